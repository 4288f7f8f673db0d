"""The exact passes' sharper bound where sums are pending toward a target with none
(``Space.h_sharp_id``, ``Space._reduce_bound``).

On small problems the whole reachable state graph of the full move set is built
(``tests/test_synth_bounds.py``), and the exact least rest from every state is found by a
reverse Dijkstra over cost tuples, in the order the search keys by (time, then bytes, then
collectives) and in the tie pass's order (collectives, bytes, time). Then:

* ``h_sharp_id`` is at most the exact least rest in both orders, and its time at most the
  exact least time alone (the weighted passes' time limits and the proofs read it);
* it is above ``h_id`` on some states of the pending problems (the check is not empty) and
  equal to it where the target keeps sums pending, or nothing is pending and every dim is
  even; on uneven states with nothing pending it counts the bytes device 0 lacks
  (``Space._uneven_deficit``), where ``h_id`` counts none;
* on a one-AllReduce problem it equals the exact optimum at the source, where ``h_id`` is
  below it;
* bench case 111: the proof that ran out of its budget ends at the source, the plan checked
  element by element.
"""

from __future__ import annotations

import heapq

import pytest

from synth.bench import bench_cases, check_plan_exact
from synth.planners import synthesize
from tests.test_synth_bounds import CASES, _graph, _space

_REL = 1e-12

PENDING = [
    # (mesh, src, dst, whether the sharp bound raises some state above h_id)
    ("x=2,y=3", "[4{x}, 6]{U:y}", "[4{x}, 6]", True),       # one AllReduce: the bound is tight
    ("x=3,y=2", "[6{y}, 4]{U:x}", "[6, 4{y}]", True),       # a group of 3
    ("x=2,y=2,z=2", "[4, 4{x}]{U:y,z}", "[4{x}, 4]", True),
    ("a=3,b=2", "[5{a}, 3]{U:b}", "[5, 3]", True),          # uneven
    # the target is sharded over every axis: what all devices lack of the partial sums
    # (h_id's spread bound) is more than one AllReduce of the target's shard would bring
    ("x=2,y=4", "[16{x}, 8]{U:y}", "[16, 8{x,y}]", False),
    ("x=2,y=2", "[8, 8]{U:x,y}", "[8{x}, 8{y}]", False),
]


def _rest_lex(edges, t, order):
    """The lexicographically least rest from every state to ``t``, the components of each
    cost tuple taken in ``order`` (a reverse Dijkstra over tuples: they add componentwise
    and never decrease)."""
    rev = {}
    for i, out in edges.items():
        for j, c in out:
            rev.setdefault(j, []).append((i, tuple(c[k] for k in order)))
    zero = (0, 0, 0)
    dist = {t: zero}
    heap = [(zero, t)]
    while heap:
        d, j = heapq.heappop(heap)
        if d > dist[j]:
            continue
        for i, w in rev.get(j, ()):
            nd = (d[0] + w[0], d[1] + w[1], d[2] + w[2])
            if nd < dist.get(i, (float("inf"),)):
                dist[i] = nd
                heapq.heappush(heap, (nd, i))
    return dist


def _lex_le(a, b) -> bool:
    """``a <= b`` lexicographically, two floats within a relative 1e-12 counting as equal."""
    for x, y in zip(a, b):
        tol = _REL * max(abs(x), abs(y))
        if x < y - tol:
            return True
        if x > y + tol:
            return False
    return True


def _check(mesh, src, dst):
    """The checks on one problem; returns how many states the sharp bound raised."""
    sp = _space(mesh, src, dst)
    edges, _classes = _graph(sp)
    t = sp.intern(sp.T)
    by_time = _rest_lex(edges, t, (0, 1, 2))
    by_fewest = _rest_lex(edges, t, (2, 1, 0))
    raised = 0
    for i in edges:
        if i not in by_time:
            continue  # the target is not reachable from here
        h, base = sp.h_sharp_id(i), sp.h_id(i)
        assert _lex_le(base, h), (sp.states[i], base, h)
        raised += h != base
        even = sp._even_T and all(n % k == 0 for n, k in zip(sp.shape, sp.infos[i][0]))
        if sp.T[1] or (not sp.states[i][1] and even):
            assert h == base, (sp.states[i], h, base)
        assert _lex_le(h, by_time[i]), f"{sp.states[i]}: {h} above the least rest {by_time[i]}"
        assert _lex_le((h[2], h[1], h[0]), by_fewest[i]), (
            f"{sp.states[i]}: {h} above the fewest-collectives rest {by_fewest[i]}")
        assert h[0] <= by_time[i][0] * (1 + _REL), (sp.states[i], h, by_time[i])
    return raised


@pytest.mark.parametrize("mesh, src, dst, raises", PENDING)
def test_the_sharp_bound_is_admissible_on_pending_problems(mesh, src, dst, raises):
    assert (_check(mesh, src, dst) > 0) == raises


@pytest.mark.parametrize("mesh, src, dst", CASES[::2])
def test_the_sharp_bound_is_admissible_on_the_bound_cases(mesh, src, dst):
    _check(mesh, src, dst)


def test_one_allreduce_is_the_bound_at_the_source():
    # [4{x}, 6]{U:y} -> [4{x}, 6] on x=2,y=3 (4-byte elements): the least plan is one
    # AllReduce over y of the 2x6 shard, 2 * (3 - 1) * 12 / 3 = 16 elements received
    sp = _space("x=2,y=3", "[4{x}, 6]{U:y}", "[4{x}, 6]")
    edges, _ = _graph(sp)
    rest = _rest_lex(edges, sp.intern(sp.T), (0, 1, 2))
    s0 = sp.intern(sp.S0)
    assert sp.h_sharp_id(s0) == (5e-6 + 64 / 50e9, 64, 1)
    assert sp.h_sharp_id(s0) == pytest.approx(rest[s0], rel=1e-12)
    assert sp.h_id(s0)[1] == 48  # the one-op bound alone: the target's shard, 12 elements


def test_bench_case_111_is_proven_at_the_source():
    mesh, src, dst = bench_cases(112, 0)[111]
    assert (str(mesh), str(src), str(dst)) == ("x=1,y=5,z=8,w=2,v=5,u=8", "[12{w}, 3{x}]{U:v,y}",
                                               "[12{w}, 3{x}]")
    plan = synthesize(mesh, src, dst)
    check_plan_exact(plan)
    s = plan.search
    # one AllReduce of the 18-element shard over 25 devices (2 * 18 * 4 * 24 // 25 = 138 B;
    # then a permute that moves nothing, x being of size 1); before the sharp bound the
    # proof spent the whole 50,000 moves
    assert s["optimal"] and s["moves"] < 2000
    assert plan.num_collectives == 1 and type(plan.steps[0]).__name__ == "AllReduce"
    assert s["time_s"] == pytest.approx(5e-6 + 138 / 50e9, rel=1e-12)


def test_uneven_states_count_what_a_device_lacks():
    # a=3, [10{a}] -> [10] (4-byte elements): blocks of 4, 4 and 2 rows; device 0 holds
    # the first 4 rows and lacks 6, 24 B (the last device lacks 8: the bound takes device
    # 0, whose box is never clipped, from the local shapes alone); h_id counts no bytes on
    # uneven dims
    sp = _space("a=3", "[10{a}]", "[10]")
    s0 = sp.intern(sp.S0)
    assert sp.h_id(s0) == (5e-6, 0, 1)
    assert sp.h_sharp_id(s0) == (5e-6 + 24 / 50e9, 24, 1)
    assert _check("a=3", "[10{a}]", "[10]") >= 1
