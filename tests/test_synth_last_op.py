"""The engine's last-op expansion (``Space.last_op_floor_id``, ``Space.last_op_successors``).

Where one communicating move and the rest of the way after it already end past the upper
bound, the engine expands a state with its local moves, its permute moves and the
communicating moves after which local steps reach the target. Two facts make that sound,
each checked here against the whole reachable state graph of small problems (the exact
least time to the target from every state, by a reverse Dijkstra; see
``tests/test_synth_bounds.py``):

* ``last_op_floor_id(i)`` is at most the cost of every communicating move from ``i`` plus
  the exact rest from where it lands, wherever local steps do not reach the target from
  there;
* ``last_op_successors`` keeps exactly the entries of the whole successor list that it
  says it keeps, in the same order, and counts the moves of the kinds it generates;
* no move of a kind it leaves out (``Space._last_op_skips``) lands where local steps
  reach the target;

and planning with the expansion and without it gives the same plan where both finish, and
proves more where the budget ran out without it (every plan checked element by element).
"""

from __future__ import annotations

import pytest

from synth.bench import check_plan_exact, plan_digest
from synth.planners import DEFAULT_BUDGET_MOVES, synthesize
from synth.planners.moves import LOCAL_MOVE_KINDS, Space, _kept_last
from tests.test_synth_bounds import CASES, _graph, _rest, _space

_EPS = 1e-12

EXTRA = [
    ("x=2,y=2", "[8{x}, 8]", "[8, 8{y}]"),          # the docstring's example
    ("x=4,y=2", "[16{x}, 8{y}]", "[16{y}, 8{x}]"),
    ("x=2,y=2,z=2", "[8{x,y}, 4]", "[8{z}, 4{x}]"),
    ("x=8", "[64{x}]", "[64]"),
    ("x=2,y=4", "[16{x}, 8]{U:y}", "[16, 8{x,y}]"),   # sums pending in the source
    ("a=3,b=2", "[10{a}, 7{b}]", "[10{b}, 7]"),       # uneven
]


def _communicating(sp, i, steps, j):
    if all(st[0] in LOCAL_MOVE_KINDS for st in steps):
        return False
    if len(steps) == 1 and steps[0][0] == "all_permute":
        # a relabel (other splits) may move nothing; a permute of the same splits moves
        return sp.infos[j][0] == sp.infos[i][0]
    return True


@pytest.mark.parametrize("mesh, src, dst", CASES + EXTRA)
def test_last_op_floor_bounds_every_communicating_move_and_its_rest(mesh, src, dst):
    _check_floor(mesh, src, dst)


def _check_floor(mesh, src, dst):
    """The check; returns ``(moves checked, states whose floor the bytes form raised)``."""
    sp = _space(mesh, src, dst)
    edges, _classes = _graph(sp)
    t = sp.intern(sp.T)
    rest = _rest(edges, t, 0)
    checked = raised = 0
    for i in edges:
        sp.h_id(i)
        floor = sp.last_op_floor_id(i)
        assert floor >= sp.comm_floor_id(i) + sp.floor
        raised += floor > sp.comm_floor_id(i) + sp.floor
        for steps, j, _sh, c, _live in sp.successors(i, True):
            if steps[0][0] == "permute_class" or j not in rest or sp.local_reach_id(j):
                continue
            if not _communicating(sp, i, steps, j):
                continue
            assert c[0] + rest[j] >= floor * (1 - _EPS) - _EPS, (
                f"{sp.states[i]} --{steps}--> {sp.states[j]}: {c[0]} + rest {rest[j]} "
                f"< last-op floor {floor} ({mesh} {src} -> {dst})")
            checked += 1
    return checked, raised


def test_the_bytes_form_raises_the_floor():
    """The check above is not empty: the bytes form is past ``comm_floor_id + floor`` on
    states of even, pending and uneven problems, and their moves are checked."""
    for case in EXTRA[:3] + EXTRA[4:]:
        checked, raised = _check_floor(*case)
        assert checked >= 5 and raised >= 1, case


@pytest.mark.parametrize("mesh, src, dst", CASES[::3] + EXTRA)
def test_last_op_successors_filter_the_whole_list(mesh, src, dst):
    for built_first in (False, True):
        sp = _space(mesh, src, dst)
        edges, _ = _graph(sp) if built_first else ({sp.intern(sp.S0): None}, None)
        for i in list(edges)[:200]:
            for full in (True, False):
                got, n_all, n_perm = sp.last_op_successors(i, full)
                whole = sp.successors(i, full)
                want = [e for e in whole if _kept_last(e[0]) or sp.local_reach_id(e[1])]
                assert [(e[0], e[1], e[3], e[4]) for e in got] == [
                    (e[0], e[1], e[3], e[4]) for e in want]
                skips = sp._last_op_skips(sp.states[i])
                made = [e for e in whole if e[0][-1][0] not in skips]
                assert n_all == len(made)
                assert n_perm == sum(1 for e in made if e[0][0][0] in ("all_permute", "permute_class"))


@pytest.mark.parametrize("mesh, src, dst", CASES + EXTRA)
def test_no_skipped_kind_finishes(mesh, src, dst):
    """Every move of a kind ``_last_op_skips`` leaves out lands where local steps do not
    reach the target (so leaving its generator out drops nothing the engine keeps)."""
    _check_skips(mesh, src, dst)


def test_skips_leave_out_moves_on_even_problems():
    assert all(_check_skips(*case) >= 10 for case in EXTRA[1:3] + CASES[1:3])


def _check_skips(mesh, src, dst):
    """The check; returns how many moves the skipped kinds had."""
    sp = _space(mesh, src, dst)
    edges, _ = _graph(sp)
    skipped = 0
    for i in edges:
        skips = sp._last_op_skips(sp.states[i])
        for full in (True, False):
            for steps, j, *_ in sp.successors(i, full):
                if steps[-1][0] in skips:
                    skipped += 1
                    assert not sp.local_reach_id(j), (sp.states[i], steps, sp.states[j])
    return skipped


#: (mesh, src, dst): two the search proves either way (bench cases 943 and 1045), and two
#: it proves only with the last-op expansion (bench cases 87 and 455: without it, the
#: default budget runs out on the plan it now proves optimal)
SEARCH_CASES = [
    ("x=3,y=2", "[4, 16, 12{y}]", "[4, 16{y}, 12]{U:x}"),
    ("x=5,y=2,z=2", "[12{y}, 16{z}, 3, 1]", "[12{z}, 16, 3, 1]"),
    ("x=6,y=1,z=3,w=4,v=4,u=1", "[12{x,y}]{U:z}", "[12{w}]{U:v}"),
    ("x=2,y=2,z=2,w=5,v=8", "[3, 16{z,x}]{U:y}", "[3, 16]"),
]


@pytest.mark.parametrize("mesh, src, dst", SEARCH_CASES)
def test_the_expansion_keeps_the_plan_and_gets_further(mesh, src, dst, space_methods):
    """Planning with the last-op expansion and without it (its floor forced to -inf):
    where the search without it finishes, the same plan, time and claim in fewer moves;
    where it runs out, the expansion proves a plan optimal at no more time."""
    calls = []
    last = Space.last_op_successors
    space_methods(last_op_successors=lambda self, i, full: calls.append(i) or last(self, i, full))
    fast = synthesize(mesh, src, dst)
    assert calls
    space_methods(last_op_floor_id=lambda self, i: float("-inf"))
    calls.clear()
    slow = synthesize(mesh, src, dst)
    assert not calls
    check_plan_exact(fast)
    check_plan_exact(slow)
    a, b = fast.search, slow.search
    assert a["status"] == "optimal"
    if b["status"] == "optimal":
        assert plan_digest(fast) == plan_digest(slow)
        assert (a["time_s"], a["collectives"], a["bytes_moved"]) == \
            (b["time_s"], b["collectives"], b["bytes_moved"])
        # fewer moves, unless the tie pass spent the rest of the budget without it
        assert a["moves"] < b["moves"] or a["moves"] == b["moves"] == DEFAULT_BUDGET_MOVES
    else:
        assert b["moves"] == DEFAULT_BUDGET_MOVES
        assert a["time_s"] <= b["time_s"]
