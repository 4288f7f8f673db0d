"""A state whose every communicating move would end past the upper bound is expanded by
its local moves and relabels only (``Space.local_successors``, ``Space.comm_floor_id``).

* the floor bounds every move it claims to: from every state of the first few hundred of
  several problems (both passes' successor lists, the permute-class members included),
  each move that is neither local nor a relabel costs at least ``comm_floor_id``;
* ``local_successors`` is the sublist of ``successors`` it says, in the same order,
  whether it is built before or after the whole list;
* planning with the shortcut and without it (the floor forced to 0) gives the same plan,
  element by element against the target, the same search outcome, and no more moves,
  where the old count neither ran out nor cut a tie probe (else the shortcut gets further).
"""

from __future__ import annotations

import pytest

from synth.bench import bench_cases, check_plan_exact, plan_digest
from synth.mesh import Mesh
from synth.planners import MAX_FUSED_GROUP, TIE_TOLERANCE, DefaultCost, synthesize
from synth.planners.moves import Space, _is_local_entry, work_mesh
from synth.types import ArrayType, refine_type


def _space(mesh, src, dst, itemsize=4):
    mesh, src, dst = Mesh.of(mesh), ArrayType.of(src), ArrayType.of(dst)
    wm = work_mesh(mesh, [src, dst])
    return Space(wm, refine_type(src, wm), refine_type(dst, wm), itemsize, DefaultCost(), MAX_FUSED_GROUP)


def _moves_data(m, s, d) -> bool:
    sp = _space(m, s, d)
    return sp.S0 != sp.T


CASES = [
    ("data=4,model=2", "[8192{data}, 4096{model}]", "[8192{model}, 4096{data}]"),    # sub-axes
    ("a=3,b=5", "[100{a}, 70{b}]", "[100{b}, 70{a}]"),                               # uneven
    ("x=2,y=4", "[16{x}, 8, 4]{U:y}", "[16, 8{y}, 4{x}]"),                           # pending sums
    ("x=2,y=2,z=3,w=2", "[12{x}, 12{y}, 12{z}, 12{w}]", "[12{w}, 12{z}, 12{y}, 12{x}]"),  # multi a2a
    ("x=2,y=3", "[6{x}, 6{y}]", "[6, 6]"),                                           # multi gather
    ("x=8,y=4,z=3,w=1,v=4", "[384, 384{z}, 768{w,x}, 384{y}]", "[384{x}, 384, 768{z,y}, 384]"),
] + [(str(m), str(s), str(d)) for m, s, d in bench_cases(40, 11, max_axes=4, max_rank=4)
     if 1 < m.size <= 64 and _moves_data(m, s, d)][:14]


@pytest.mark.parametrize("mesh, src, dst", CASES)
def test_comm_floor_bounds_every_other_move(mesh, src, dst):
    sp = _space(mesh, src, dst)
    frontier = [sp.intern(sp.S0)]
    seen = set(frontier)
    checked = local = 0
    while frontier and len(seen) < 300:
        i = frontier.pop(0)
        floor = sp.comm_floor_id(i)
        assert floor >= sp.cost.alpha_s
        for full in (True, False):
            for entry in sp.successors(i, full):
                steps, j, _sh, c, _live = entry
                if steps[0][0] == "permute_class":  # every member that moves data
                    splits, U = sp.entry_class(sp.states[i], steps[0])
                    for d2 in sp.class_members(splits, U)[:50]:
                        if (d2, U) != sp.states[i]:
                            pc = sp.step_cost(("all_permute", (d2, U)), sp.states[i], (d2, U))
                            if pc[0] == 0.0:  # moves nothing: a single (local) move of its own,
                                continue      # checked in test_synth_bounds
                            assert pc[0] >= floor, (d2, pc, floor)
                            checked += 1
                    continue
                if _is_local_entry(sp, entry, i):
                    local += 1
                else:
                    assert c is not None and c[0] >= floor, (steps, c, floor)
                    checked += 1
                if j not in seen:
                    seen.add(j)
                    frontier.append(j)
    assert checked > 0


@pytest.mark.parametrize("mesh, src, dst", CASES[:8])
def test_local_successors_are_the_local_sublist_in_order(mesh, src, dst):
    first = _space(mesh, src, dst)   # local lists built before the whole lists
    second = _space(mesh, src, dst)  # after them (filtered from the cached lists)
    frontier, seen, n = [first.intern(first.S0)], set(), 0
    while frontier and n < 120:
        i = frontier.pop(0)
        if i in seen:
            continue
        seen.add(i)
        n += 1
        for full in (True, False):
            built = first.local_successors(i, full)
            whole = first.successors(i, full)
            assert [e for e in whole if _is_local_entry(first, e, i)] == built
            k = second.intern(first.states[i])
            second.successors(k, full)
            again = second.local_successors(k, full)
            assert [(e[0], second.states[e[1]], e[2], e[3], e[4]) for e in again] == \
                [(e[0], first.states[e[1]], e[2], e[3], e[4]) for e in built]
            frontier += [e[1] for e in whole if e[1] not in seen]


#: (mesh, src, dst, budget, whether the shortcut fires): two where it does (one spends the
#: whole budget, where it may search further), three where it does not
SEARCH_CASES = [
    ("x=5,y=3", "[30{x}, 30, 30]", "[30{y}, 30, 30{x}]", 20000, True),
    ("x=2,y=6,z=6,w=3,v=6,u=5", "[3, 12, 4, 1]{U:v}", "[3, 12{x,z}, 4, 1]{U:u}", 20000, True),
    ("x=4,y=2,z=2", "[64{x}, 32{y}]", "[64{y,z}, 32{x}]", 50000, False),
    ("x=8,y=2,z=2", "[7{z,y}, 12]", "[7{x}, 12]", 50000, False),
    ("data=4,model=2", "[8192{data}, 4096{model}]", "[8192{model}, 4096{data}]", 50000, False),
]


@pytest.mark.parametrize("mesh, src, dst, budget, fires", SEARCH_CASES)
def test_the_shortcut_keeps_the_plan_and_spends_no_more_moves(mesh, src, dst, budget, fires, space_methods):
    calls = []
    local = Space.local_successors
    space_methods(local_successors=lambda self, i, full: calls.append(i) or local(self, i, full))
    fast = synthesize(mesh, src, dst, budget_moves=budget)
    assert bool(calls) == fires
    space_methods(comm_floor_id=lambda self, i: 0.0)
    slow = synthesize(mesh, src, dst, budget_moves=budget)
    check_plan_exact(fast)
    a, b = fast.search, slow.search
    if b["moves"] < budget and not b["ties"].startswith("partly"):
        # the old count finished (no tie probe cut either): the same search, fewer moves
        assert plan_digest(fast) == plan_digest(slow)
        assert (a["status"], a["time_s"], a["collectives"], a["bytes_moved"], a["states"]) == \
            (b["status"], b["time_s"], b["collectives"], b["bytes_moved"], b["states"])
        assert (a["moves"] < b["moves"]) == fires
    else:  # where it ran out, the same search gets further on the same budget (the tie
        # rule may then trade up to TIE_TOLERANCE of time for less peak memory)
        assert a["time_s"] <= b["time_s"] * (1 + TIE_TOLERANCE)
        assert a["states"] > b["states"]
    assert a["moves"] <= b["moves"]
