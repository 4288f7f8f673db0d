"""``synth bench`` measures cold calls: every run starts with the memos emptied."""

from __future__ import annotations

import synth.memo as memo
from synth.bench import run_bench
from synth.planners import synthesize
from synth.types import _REGIONS_MEMO


def test_clear_all_empties_every_memo():
    synthesize("x=2,y=3", "[6{x}, 6{y}]", "[6{y}, 6{x}]")
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
