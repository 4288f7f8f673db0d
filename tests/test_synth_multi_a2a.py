"""The search's all-to-alls that carry two moves sharing a dim (issue 18, the XLA issue
21562 case): ``auto`` finds the one collective at the receive bound, and every such move
the search generates is exactly its collective (type rule, live memory, cost)."""

from __future__ import annotations

import pytest

from synth.bench import check_plan_exact
from synth.collectives import MultiAllToAll, schedule_ops
from synth.mesh import Mesh
from synth.plan import recv_lower_bound_bytes
from synth.planners import MAX_FUSED_GROUP, DefaultCost, synthesize
from synth.planners.cost import op_time
from synth.planners.moves import MAX_MULTI_ALL_TO_ALLS, Space, work_mesh
from synth.types import ArrayType, refine_type

ISSUE = ("x=4,y=2", "[16{y}, 16, 16{x}]", "[16, 16{x,y}, 16]")


def test_auto_plans_the_issue_case_as_one_all_to_all_at_the_receive_bound():
    mesh, src, dst = ISSUE
    p = synthesize(mesh, src, dst)
    check_plan_exact(p)  # element by element, every device, every step
    assert [str(c) for c in p.steps] == ["AllToAll(2->1:x, 0->1:y)"]
    assert p.num_collectives == 1
    bound = recv_lower_bound_bytes(Mesh.of(mesh), ArrayType.of(src), ArrayType.of(dst), 4)
    assert p.recv_bytes_max_device == bound == 1792
    assert p.search["optimal"] is True and p.search["gap_s"] == 0.0
    assert p.max_shard_bytes == 2048 and p.peak_live_bytes == 4096


@pytest.mark.parametrize("mesh, src, dst, want", [
    # the other order of the shared destination
    ("x=4,y=2", "[16{y}, 16, 16{x}]", "[16, 16{y,x}, 16]", "AllToAll(0->1:y, 2->1:x)"),
    # a shared source: one dim's suffix split into two dims
    ("a=2,b=4", "[8{a,b}, 4, 8]", "[8, 4{b}, 8{a}]", "AllToAll(0->1:b, 0->2:a)"),
    # uneven dims where the chain's type rule holds (12 -> 4 -> 2 on dim 1)
    ("x=3,y=2", "[7{y}, 12, 5{x}]", "[7, 12{x,y}, 5]", "AllToAll(2->1:x, 0->1:y)"),
])
def test_auto_finds_the_shared_dim_forms(mesh, src, dst, want):
    from synth.plan import Plan

    p = synthesize(mesh, src, dst)
    check_plan_exact(p)
    assert [str(c) for c in p.steps] == [want]
    chain = Plan.build(Mesh.of(mesh), src, dst, p.steps[0].singles(), itemsize=p.itemsize)
    check_plan_exact(chain)
    assert p.recv_bytes_max_device < chain.recv_bytes_max_device
    bound = recv_lower_bound_bytes(Mesh.of(mesh), ArrayType.of(src), ArrayType.of(dst), p.itemsize)
    if ArrayType.of(src).is_even(Mesh.of(mesh)):
        assert p.recv_bytes_max_device == bound
    else:  # padding moves and is counted: 5/6 of the padded [4, 12, 2] block, not of [4, 12, 2] less padding
        assert p.recv_bytes_max_device == 4 * 12 * 2 * 5 // 6 * 4 > bound


class _SlowDefault(DefaultCost):
    """The default model under another class: ``Space`` costs it through the schedule."""


CASES = [ISSUE,
         ("a=2,b=4", "[8{a,b}, 4, 8]", "[8, 4{b}, 8{a}]"),
         ("x=3,y=2", "[7{y}, 12, 5{x}]", "[7, 12{x,y}, 5]"),
         ("a=2,b=3,c=2", "[12{a,b}, 6{c}, 12, 10]", "[12, 6, 12{b,c}, 10{a}]"),
         ("x=2,y=2,z=2", "[8{x,y}, 8{z}, 8]", "[8, 8, 8{z,x,y}]")]


@pytest.mark.parametrize("mesh, src, dst", CASES)
def test_every_multi_all_to_all_move_is_its_collective(mesh, src, dst):
    """From the first states of each problem, every multi-move all-to-all the search
    generates: the state it leads to is the collective's type rule applied, its live
    elements are the collective's ``peak_elems``, its cost the collective's own schedule
    ops under the default model (through the general path), and there are at most
    ``MAX_MULTI_ALL_TO_ALLS`` of them a state."""
    mesh, src, dst = Mesh.of(mesh), ArrayType.of(src), ArrayType.of(dst)
    wm = work_mesh(mesh, [src, dst])
    ws, wd = refine_type(src, wm), refine_type(dst, wm)
    sp = Space(wm, ws, wd, 4, DefaultCost(), MAX_FUSED_GROUP)
    slow = Space(wm, ws, wd, 4, _SlowDefault(), MAX_FUSED_GROUP)
    frontier = [sp.intern(sp.S0)]
    seen = set(frontier)
    shared = checked = 0
    while frontier and len(seen) < 12:
        i = frontier.pop(0)
        state = sp.states[i]
        ta = sp.to_type(state)
        for full in (False, True):
            n_here = 0
            for steps, j, _sh, c, live in sp.successors(i, full):
                if j not in seen:
                    seen.add(j)
                    frontier.append(j)
                if len(steps) != 1 or steps[0][0] != "multi_all_to_all":
                    continue
                n_here += 1
                col = sp.collective(steps[0])
                assert isinstance(col, MultiAllToAll)
                tb = sp.to_type(sp.states[j])
                assert col.apply(ta, wm) == tb, (steps, col.apply(ta, wm), tb)
                assert live == col.peak_elems(ta, tb, wm), (steps, live)
                want_t = sum(op_time(DefaultCost(), op) for op in schedule_ops(col, ta, tb, wm, 4))
                want_b = int(col.recv_elems(ta, tb, wm).max()) * 4
                assert c[1:] == (want_b, 1) == slow.step_cost(steps[0], state, sp.states[j])[1:]
                assert c[0] == pytest.approx(want_t, rel=1e-12, abs=0.0)
                moves = col.moves
                shared += len({m[0] for m in moves}) < len(moves) or len({m[1] for m in moves}) < len(moves)
                checked += 1
            assert n_here <= MAX_MULTI_ALL_TO_ALLS
    assert checked > 0 and shared > 0
