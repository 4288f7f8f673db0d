"""Round 6's shortcuts for the median ``auto`` call give the answers of the general paths.

* ``lower_bound_need(..., vector=False)`` (the default model reads only the neediest
  device) finds the same bytes, hence the same ``lower_bound_s``, without per-device arrays;
* ``recv_lower_bound_bytes`` where the target keeps pending sums is computed over every
  group at once: it equals the group-by-group count (kept here as the reference) and no
  plan receives less;
* ``auto._unbeatable``: where it holds, the A* passes pruned at the incumbent's cost
  (directed and full, unbounded budget) find nothing, and it never holds off the default
  model;
* the one-collective seed's winner, when it has no permute, costs by its steps exactly its
  plan's ``schedule_cost`` (so a winner that does not beat the incumbent need not be built);
* with the shortcuts on or off, ``auto`` returns the same plans (digest by digest), each
  checked element by element, with the same claims (the count of moves may differ either
  way: a permute list is ticked per step while it is built and per member once memoised,
  so skipping a pass moves where a list is first built).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import synth.planners.auto as auto
from synth.bench import bench_cases, check_plan_exact, plan_digest
from synth.collectives import groups_of
from synth.mesh import Mesh
from synth.plan import recv_lower_bound_bytes
from synth.planners import DefaultCost, synthesize
from synth.planners.astar import Budget, astar
from synth.planners.cost import lower_bound_need, lower_bound_s, schedule_cost
from synth.planners.moves import Space, work_mesh
from synth.planners.normal import MAX_FUSED_GROUP
from synth.types import ArrayType, refine, refine_type

_CASES = bench_cases(300, 0, 6, 4)


def _space(mesh, src, dst, cost=None):
    w = work_mesh(mesh, [src, dst])
    return Space(w, refine_type(src, w), refine_type(dst, w), 4, cost or DefaultCost(), MAX_FUSED_GROUP)


def test_need_max_without_vectors_is_the_vectors_max():
    cost = DefaultCost()
    compared = 0
    for mesh, src, dst in _CASES[:200]:
        vec, n = lower_bound_need(mesh, src, dst, 4)
        none, n2 = lower_bound_need(mesh, src, dst, 4, vector=False)
        assert none is None and n2 == n, (mesh, src, dst)
        assert lower_bound_s(mesh, src, dst, 4, cost, need=(none, n2)) == \
            lower_bound_s(mesh, src, dst, 4, cost, need=(vec, n))
        compared += vec is not None
    assert compared >= 100
    # the docstring's example: device (0, 2) lacks its whole 16 x 16 target block
    m, s, d = Mesh.parse("x=2,y=4"), ArrayType.parse("[64{x}, 32{y}]"), ArrayType.parse("[64{y}, 32{x}]")
    assert lower_bound_need(m, s, d, 4, vector=False) == (None, 16 * 16 * 4)
    assert lower_bound_need(m, s, d, 4)[0][2] == 16 * 16 * 4


def _groupwise_bound(mesh, src, dst, itemsize):
    """The receive bound with pending target sums, group by group (distinct source boxes
    deduplicated per group): the reference for the vectorised count."""
    work, (src, dst) = refine(mesh.base_mesh if mesh.base else mesh, [src, dst])
    s0, s1 = src.regions(work)
    d0, d1 = dst.regions(work)
    block = np.maximum(d1 - d0, 0).prod(axis=1)
    reduced = [a for a in src.unreduced if a not in dst.unreduced and work.shape[a] > 1]
    best = 0
    for g in groups_of(work, dst.unreduced):
        g = list(g)
        need = int(block[g[0]])
        if not reduced:
            boxes = {tuple(s0[k]) + tuple(s1[k]): k for k in g}
            need -= sum(int(np.maximum(np.minimum(s1[k], d1[g[0]]) - np.maximum(s0[k], d0[g[0]]), 0).prod())
                        for k in boxes.values())
        best = max(best, -(-max(need, 0) // len(g)))
    return best * itemsize


def test_pending_target_bound_is_the_groupwise_count():
    cases = [c for c in _CASES if c[2].unreduced and c[0].size <= 2048][:40]
    cases += [(Mesh.parse("x=2,y=2"), ArrayType.parse("[8{x}]"), ArrayType.parse("[8{y}]{U:x}")),
              (Mesh.parse("x=2,y=3"), ArrayType.parse("[6{y}, 4]{U:x}"), ArrayType.parse("[6, 4{x}]{U:y}")),
              (Mesh.parse("x=4,y=2"), ArrayType.parse("[5{x}, 3]"), ArrayType.parse("[5, 3{y}]{U:x}"))]
    assert len(cases) >= 30
    for mesh, src, dst in cases:
        assert recv_lower_bound_bytes(mesh, src, dst, 4) == _groupwise_bound(mesh, src, dst, 4), (mesh, src, dst)
    # the docstring's example: each group holds its 4 target elements already
    assert recv_lower_bound_bytes(Mesh.parse("x=2,y=2"), ArrayType.parse("[8{x}]"),
                                  ArrayType.parse("[8{y}]{U:x}"), 4) == 0
    # and no plan receives less (plans checked element by element)
    small = [c for c in cases if c[1].num_elems() <= 50_000][:12]  # the interpreter checks every element
    assert len(small) >= 8
    for mesh, src, dst in small:
        p = synthesize(mesh, src, dst, budget_moves=3000)
        check_plan_exact(p)
        assert p.recv_bytes_max_device >= recv_lower_bound_bytes(mesh, src, dst, 4)


def test_unbeatable_incumbents_admit_no_cheaper_path():
    held = 0
    for mesh, src, dst in _CASES[:100]:
        if src.num_elems() > 50_000:  # the interpreter checks every element
            continue
        sp = _space(mesh, src, dst)
        need = lower_bound_need(mesh, src, dst, 4)
        lb = lower_bound_s(mesh, src, dst, 4, sp.cost, need=need)
        bound = max(sp.shard(sp.S0), sp.shard(sp.T))
        inc = auto._normal_incumbent(mesh, src, dst, 4, sp.cost, bound)
        if inc is None or not auto._unbeatable(inc.cost, lb, need[1], sp.cost):
            continue
        held += 1
        check_plan_exact(inc.plan)
        for full in (False, True):
            budget = Budget(10**6, time.thread_time() + 120)
            found, exhausted = astar(sp, budget, bound, full=full, upper=inc.cost)
            assert found is None and exhausted, (mesh, src, dst, full)
    assert held >= 20
    # never off the default model, nor with a zero alpha (a tie in time could then be
    # broken by fewer collectives)
    c = (5.00576e-06, 288, 1)

    class Other(DefaultCost):
        pass

    assert auto._unbeatable(c, 5.00576e-06, 288, DefaultCost())
    assert not auto._unbeatable(c, 5.00576e-06, 288, Other())
    assert not auto._unbeatable((288 / 50e9, 288, 1), 288 / 50e9, 288, DefaultCost(alpha_s=0.0))
    assert not auto._unbeatable((1e-5, 288, 2), 5.00576e-06, 288, DefaultCost())
    assert auto._unbeatable((0.0, 0, 0), 0.0, 0, DefaultCost())


def test_seed_winner_without_permutes_costs_its_schedule():
    cost = DefaultCost()
    compared = 0
    for mesh, src, dst in _CASES[:80]:
        sp = _space(mesh, src, dst, cost)
        best = auto._seed_best(sp, Budget(50_000, time.thread_time() + 60), max(sp.shard(sp.S0), sp.shard(sp.T)))
        if best is None or any(s[0] == "all_permute" for s in best[1]):
            continue
        p = auto._build(sp, sp.mesh, refine_type(src, sp.mesh), refine_type(dst, sp.mesh), src, dst, best[1], 4)
        assert tuple(schedule_cost(p, cost)) == tuple(best[0]), (mesh, src, dst)
        if src.num_elems() <= 50_000:
            check_plan_exact(p)
        compared += 1
    assert compared >= 20


@pytest.fixture
def shortcuts_off(monkeypatch):
    """auto with this round's shortcuts disabled (the general paths)."""
    oci = auto._one_collective_incumbent
    lbn = auto.lower_bound_need

    def off():
        monkeypatch.setattr(auto, "_unbeatable", lambda *a, **k: False)
        monkeypatch.setattr(auto, "_one_collective_incumbent", lambda *a, **k: oci(*a, **{**k, "beat": None}))
        monkeypatch.setattr(auto, "lower_bound_need", lambda m, s, d, i, vector=True: lbn(m, s, d, i))

    return off


def test_shortcuts_keep_the_plans(shortcuts_off, monkeypatch):
    cases = [c for c in _CASES[:100] if c[1].num_elems() <= 50_000][:45]
    fired = {"unbeatable": 0, "seed not built": 0}
    unbeatable = auto._unbeatable

    def counted(*a, **k):
        r = unbeatable(*a, **k)
        fired["unbeatable"] += r
        return r

    def seed(*a, **k):  # the seed returned None although its search found a winner
        r = oci(*a, **k)
        if r is None and k.get("beat") is not None and auto._seed_best(*a[:3]) is not None:
            fired["seed not built"] += 1
        return r

    oci = auto._one_collective_incumbent
    monkeypatch.setattr(auto, "_unbeatable", counted)
    monkeypatch.setattr(auto, "_one_collective_incumbent", seed)
    on = [synthesize(m, s, d, budget_moves=8000) for m, s, d in cases]
    monkeypatch.undo()
    shortcuts_off()
    off = [synthesize(m, s, d, budget_moves=8000) for m, s, d in cases]
    monkeypatch.undo()
    assert fired["unbeatable"] >= 10 and fired["seed not built"] >= 1, fired
    for (m, s, d), a, b in zip(cases, on, off):
        assert plan_digest(a) == plan_digest(b), (m, s, d)
        check_plan_exact(a)
        for k in ("optimal", "status", "time_s", "lower_bound_s", "min_max_shard_bytes", "optimal_over", "ties"):
            assert a.search[k] == b.search[k], (m, s, d, k)
