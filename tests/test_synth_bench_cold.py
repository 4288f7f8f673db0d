"""``synth bench`` measures cold calls: every run starts with the memos emptied."""

from __future__ import annotations

import synth.memo as memo
from synth.bench import run_bench
from synth.planners import synthesize
from synth.types import _REGIONS_MEMO


def test_clear_all_empties_every_memo():
    from synth.mesh import Mesh
    from synth.types import ArrayType

    synthesize("x=2,y=3", "[6{x}, 6{y}]", "[6{y}, 6{x}]")
    ArrayType.of("[6{x}, 6{y}]").regions(Mesh.of("x=2,y=3"))  # the call above may not need it
    assert len(_REGIONS_MEMO) > 0
    memo.clear_all()
    assert all(len(m) == 0 and m.nbytes == 0 for m in memo._ALL)
    assert _REGIONS_MEMO in memo._ALL


def test_each_bench_run_starts_cold(monkeypatch):
    sizes = []
    real = memo.clear_all

    def spy():
        real()
        sizes.append(sum(len(m) for m in memo._ALL))

    monkeypatch.setattr(memo, "clear_all", spy)
    res = run_bench(cases=6, planners=("auto",), runs=2)
    assert sizes == [0, 0]  # once before each run, and empty after it
    assert res["identical_plans"]


def test_bench_counts_the_cyclic_garbage_of_its_runs():
    from synth.bench import _cyclic_garbage

    with _cyclic_garbage() as quiet:
        synthesize("x=2,y=3", "[6{x}, 6{y}]", "[6{y}, 6{x}]")
    assert quiet.objects == 0  # a planner call leaves none (tests/test_synth_no_cycles.py)

    class Node:
        pass

    with _cyclic_garbage() as leaky:
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
    assert leaky.objects >= 2  # the two nodes (and their dicts), freed at the block's end
