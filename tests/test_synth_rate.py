"""Round 6's cheaper moves give the answers of the general paths.

* every move kind the search generates has an entry in ``moves.STEP_COST_LIVE`` (the hot
  loop's per-kind cost and live arithmetic) or is the slice, whose live elements have
  their own function; the entries agree with the collective's own ``peak_elems`` and its
  schedule lowering on every move of the first states of several problems (one call per
  move: the hot loop's cost and live come from one entry);
* ``Space._holds_target`` (dim by dim, per-dim arrays memoised) gives the answer of the
  device boxes of ``ArrayType.regions`` on every state of several uneven problems;
* ``gc_paused`` restores the collector exactly: nested, across an exception, and where
  the caller had it disabled.
"""

from __future__ import annotations

import gc
import threading

import pytest

from synth.mesh import Mesh
from synth.planners import MAX_FUSED_GROUP, DefaultCost
from synth.planners.gcpause import gc_paused, paused_depth
from synth.planners.moves import LOCAL_MOVE_KINDS, MOVES, STEP_COST_LIVE, Space, work_mesh
from synth.schedule import IN_PLACE_KINDS
from synth.types import ArrayType, refine_type


class _OtherModel(DefaultCost):
    """The default model under another class: ``Space`` costs it through the schedule."""


def _space(mesh, src, dst, cost=None):
    mesh, src, dst = Mesh.of(mesh), ArrayType.of(src), ArrayType.of(dst)
    wm = work_mesh(mesh, [src, dst])
    return Space(wm, refine_type(src, wm), refine_type(dst, wm), 4, cost or DefaultCost(),
                 MAX_FUSED_GROUP)


def _states(sp, limit):
    """The first ``limit`` states reached breadth first over both passes' moves (permute
    class members included)."""
    frontier = [sp.intern(sp.S0)]
    seen = set(frontier)
    while frontier and len(seen) < limit:
        i = frontier.pop(0)
        for full in (False, True):
            for steps, j, _sh, _c, _live in sp.successors(i, full):
                nxt = [j]
                if steps[0][0] == "permute_class":
                    dims, U = sp.states[i]
                    nxt = [sp.intern((d2, U)) for d2 in sp.class_members(sp.info(dims)[0], U)[:20]]
                for k in nxt:
                    if k not in seen:
                        seen.add(k)
                        frontier.append(k)
    return sorted(seen)


CASES = [
    ("x=2,y=2,z=3,w=2", "[12{x}, 12{y}, 12{z}, 12{w}]", "[12{w}, 12{z}, 12{y}, 12{x}]"),
    ("x=2,y=4", "[16{x}, 8, 4]{U:y}", "[16, 8{y}, 4{x}]"),
    ("a=3,b=5", "[100{a}, 70{b}]", "[100{b}, 70{a}]"),
    ("x=4,y=2,z=4", "[8{x,z,y}, 6]", "[8{x,y}, 6{z}]"),
    ("x=3,y=2,z=2", "[6{y,z}, 5]", "[6{z,y,x}, 5]"),
]


def test_every_move_kind_has_its_hot_loop_arithmetic():
    assert set(MOVES) - {"dyn_slice"} <= set(STEP_COST_LIVE), set(MOVES) - set(STEP_COST_LIVE)
    assert set(IN_PLACE_KINDS) <= set(STEP_COST_LIVE)


@pytest.mark.parametrize("mesh, src, dst", CASES)
def test_one_entry_gives_the_collectives_cost_and_live(mesh, src, dst):
    fast, slow = _space(mesh, src, dst), _space(mesh, src, dst, _OtherModel())
    assert fast.fast and not slow.fast
    checked = 0
    for i in _states(fast, 30)[:30]:
        state = fast.states[i]
        for full in (False, True):
            for steps, j, _sh, _c, _live in fast.successors(i, full):
                if steps[0][0] == "permute_class":
                    continue
                step = steps[-1]
                prev = state if len(steps) == 1 else steps[0][1]
                s2 = fast.states[j]
                ip, ib = fast.info(prev[0]), fast.infos[j]
                ta, tb = fast.to_type(prev), fast.to_type(s2)
                col = fast.collective(step)
                want_live = col.peak_elems(ta, tb, fast.mesh)
                assert fast._live_i(step, ip, ib) == want_live, (steps, want_live)
                if step[0] == "dyn_slice":
                    continue
                cost, live = STEP_COST_LIVE[step[0]](fast, step, ip, ib)
                if step[0] not in IN_PLACE_KINDS:
                    assert live == want_live, (steps, live, want_live)
                if cost is None:  # a relabel: step_cost's own path
                    assert step[0] == "all_permute" and ip[0] != ib[0]
                    continue
                want = slow.step_cost(step, prev, s2)
                assert cost[1:] == want[1:], (steps, cost, want)
                assert cost[0] == pytest.approx(want[0], rel=1e-12, abs=1e-15), (steps, cost, want)
                if step[0] in LOCAL_MOVE_KINDS:
                    assert cost == (0.0, 0, 0)
                checked += 1
    assert checked > 20


UNEVEN = [
    ("x=3,y=2,z=2", "[6{y,z}, 5]", "[6{z,y,x}, 5]"),
    ("x=4,y=2,z=4", "[8{x,z,y}, 6]", "[8{x,y}, 6{z}]"),
    ("a=3,b=5", "[100{a}, 70{b}]", "[100{b}, 70{a}]"),
    ("x=4,y=3", "[10{x}, 9]", "[10{y}, 9{x}]"),
]


def _holds_by_regions(sp, state):
    """Every device's box (``ArrayType.regions``) holds its target box, or that is empty."""
    s0, e0 = sp.to_type(state).regions(sp.mesh)
    s1, e1 = sp.to_type(sp.T).regions(sp.mesh)
    empty = ~(e1 > s1).all(axis=1)
    inside = ((s0 <= s1) & (e1 <= e0)).all(axis=1)
    return bool((empty | inside).all())


@pytest.mark.parametrize("mesh, src, dst", UNEVEN)
def test_holds_target_dim_by_dim_is_the_regions_answer(mesh, src, dst):
    sp = _space(mesh, src, dst)
    assert sp.relabel  # an uneven dim: _holds_target is asked
    ids = _states(sp, 400)
    got = [sp._holds_target(sp.states[i]) for i in ids]
    want = [_holds_by_regions(sp, sp.states[i]) for i in ids]
    assert got == want
    assert any(got) and not all(got)  # both answers occur
    assert _holds_by_regions(sp, sp.T) and sp._holds_target(sp.T)


def test_gc_paused_restores_the_collector():
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled() and paused_depth() == 1
            with gc_paused():
                assert not gc.isenabled() and paused_depth() == 2
            assert not gc.isenabled()
        assert gc.isenabled() and paused_depth() == 0

        @gc_paused()
        def boom():
            assert not gc.isenabled()
            raise ValueError("x")

        with pytest.raises(ValueError):
            boom()
        assert gc.isenabled() and paused_depth() == 0

        gc.disable()  # a caller who disabled it keeps it disabled
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_gc_paused_across_threads_stays_off_while_any_region_is_open():
    was = gc.isenabled()
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def other():
        with gc_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    try:
        t.start()
        assert inside.wait(10)
        with gc_paused():
            pass
        assert not gc.isenabled()  # the other thread's region is still open
        leave.set()
        t.join(10)
        assert gc.isenabled() and paused_depth() == 0
    finally:
        leave.set()
        t.join(10)
        (gc.enable if was else gc.disable)()

