"""The synthesizer's fast paths give the answers of the general paths.

* the search's hot loop (``Space.successors``) costs each move from the two states'
  infos (``Space._ab_i``, ``Space._live_i``); here every move of the first states of
  several problems is also costed through the collective's own schedule lowering
  (``schedule_ops`` under a cost model the fast path does not recognise) and its own
  ``peak_elems``, and the two must agree;
* the tie pass skips the fewest-collectives probe only where nothing can win it: the
  plan then has one collective and receives the bound over every plan;
* ``synth bench --slowest`` lists the slowest cases, and re-planning one of them gives
  the plan and the work the bench recorded.
"""

from __future__ import annotations

import pytest

from synth.bench import bench_cases, check_plan_exact, run_bench
from synth.mesh import Mesh
from synth.plan import recv_lower_bound_bytes
from synth.planners import MAX_FUSED_GROUP, DefaultCost, synthesize
from synth.planners.moves import Space, work_mesh
from synth.types import ArrayType, refine_type


class _SlowDefault(DefaultCost):
    """The default model under another class: ``Space`` costs it through the schedule."""


def _spaces(mesh, src, dst, itemsize=4):
    mesh, src, dst = Mesh.of(mesh), ArrayType.of(src), ArrayType.of(dst)
    wm = work_mesh(mesh, [src, dst])
    ws, wd = refine_type(src, wm), refine_type(dst, wm)
    fast = Space(wm, ws, wd, itemsize, DefaultCost(), MAX_FUSED_GROUP)
    slow = Space(wm, ws, wd, itemsize, _SlowDefault(), MAX_FUSED_GROUP)
    assert fast.fast and not slow.fast
    return fast, slow


CASES = [
    ("data=4,model=2", "[8192{data}, 4096{model}]", "[8192{model}, 4096{data}]"),   # sub-axes
    ("a=3,b=5", "[100{a}, 70{b}]", "[100{b}, 70{a}]"),                              # uneven
    ("x=2,y=4", "[16{x}, 8, 4]{U:y}", "[16, 8{y}, 4{x}]"),                          # pending sums
    ("x=2,y=2,z=3,w=2", "[12{x}, 12{y}, 12{z}, 12{w}]", "[12{w}, 12{z}, 12{y}, 12{x}]"),  # rank 4: multi a2a
    ("x=2,y=3", "[6{x}, 6{y}]", "[6, 6]"),                                          # multi-dim gather
] + [(str(m), str(s), str(d)) for m, s, d in bench_cases(24, 7, max_axes=4, max_rank=4)
       if 1 < m.size <= 64 and s != d][:16]


@pytest.mark.parametrize("mesh, src, dst", CASES)
def test_hot_loop_costs_every_move_as_the_schedule_does(mesh, src, dst):
    fast, slow = _spaces(mesh, src, dst)
    checked = costed = 0
    frontier = [fast.intern(fast.S0)]
    seen = set(frontier)
    while frontier and len(seen) < 10:  # the first states, breadth first
        i = frontier.pop(0)
        state = fast.states[i]
        for full in (False, True):
            for steps, j, sh2, c, live in fast.successors(i, full):
                if steps[0][0] == "permute_class":
                    continue
                s2 = fast.states[j]
                assert sh2 == fast.shard(s2)
                last = steps[-1]
                prev = state if len(steps) == 1 else steps[0][1]
                ta, tb = fast.to_type(prev), fast.to_type(s2)
                col = fast.collective(last)
                # live elements: the collective's own peak_elems
                want_live = col.peak_elems(ta, tb, fast.mesh)
                if len(steps) > 1:
                    want_live = max(want_live, 2 * fast.shard(state))
                assert live == want_live, (steps, live, want_live)
                checked += 1
                if j not in seen:
                    seen.add(j)
                    frontier.append(j)
                if c is None:
                    assert last[0] == "dyn_slice"
                    continue
                # cost: the schedule lowering, step by step
                want = (0.0, 0, 0)
                p = state
                for st in steps:
                    nxt = s2 if st is last else st[1]
                    x = slow.step_cost(st, p, nxt)
                    want = (want[0] + x[0], want[1] + x[1], want[2] + x[2])
                    p = nxt
                assert c[1:] == want[1:], (steps, c, want)
                assert c[0] == pytest.approx(want[0], rel=1e-12, abs=0.0), (steps, c, want)
                costed += 1
    assert checked > 0
    if (mesh, src, dst) in CASES[:5]:  # the named cases have communicating moves early
        assert costed > 0


def test_one_collective_plan_at_the_byte_bound_has_its_ties_decided():
    """Normal's plan is one AllGather receiving exactly the bound over every plan: no plan
    has fewer collectives or fewer bytes, so the tie pass decides without a probe (it used
    to spend its probe budget and say "partly compared")."""
    mesh, src, dst = "x=8,y=5,z=8,w=3,v=8,u=3", "[16{v}, 1, 12, 16{z}]", "[16, 1, 12, 16{z}]"
    p = synthesize(mesh, src, dst)
    check_plan_exact(p)
    assert p.num_collectives == 1
    assert p.search["optimal"] is True
    assert p.search["ties"] == "broken"
    assert p.search["bytes_moved"] == recv_lower_bound_bytes(Mesh.of(mesh), ArrayType.of(src),
                                                             ArrayType.of(dst), 4)
    assert p.search["gap_s"] == 0.0


def test_bench_lists_its_slowest_cases_reproducibly():
    res = run_bench(cases=8, seed=3, planners=("auto",), max_axes=4, max_rank=3, slowest=3)
    top = res["slowest"]
    assert len(top) == 3
    assert [r["cpu_ms"] for r in top] == sorted((r["cpu_ms"] for r in top), reverse=True)
    assert len({r["case"] for r in top}) == 3
    cases = bench_cases(8, 3, 4, 3)
    for r in top:
        m, s, d = cases[r["case"]]
        assert (str(m), str(s), str(d)) == (r["mesh"], r["src"], r["dst"])
        p = synthesize(m, s, d)
        check_plan_exact(p)
        assert (p.search["states"], p.search["moves"], p.search["status"]) == (r["states"], r["moves"], r["status"])
