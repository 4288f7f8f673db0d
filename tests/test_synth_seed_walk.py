"""The one-collective seed walks less (round 11), and finds the same candidates.

* ``Space.goal_adjacent(splits, U, head=n)`` is the first ``n`` of the whole list, in the
  same order, built without the rest (fewer moves examined where the list is long);
* ``auto._seed_may_finish`` is optimistic: from a state where it is False, no state of the
  local closure (slices, Unreduce, ShardedToUnreduced) has the target's splits and pending
  sums, so the seed loses nothing by not walking that closure (checked on every reachable
  state of the bounds test's small problems); since round 12 the seed asks it of every
  landing after its one collective, before interning it (``_seed_may_finish_state``);
* the seed's answer with both shortcuts is its answer without them, on 120 bench cases,
  with no more moves examined (and fewer on some).
"""

from __future__ import annotations

import sys
import time

import pytest

import synth.planners.auto as auto
from synth.bench import bench_cases
from synth.planners import MAX_FUSED_GROUP, DefaultCost
from synth.planners.astar import Budget
from synth.planners.moves import LOCAL_MOVE_KINDS, MOVES, Space, work_mesh
from synth.types import refine_type
from tests.test_synth_bounds import CASES as SMALL
from tests.test_synth_bounds import _graph
from tests.test_synth_bounds import _space as _small_space

_BENCH = bench_cases(600, 0)


def _space(m, s, d):
    w = work_mesh(m, [s, d])
    return Space(w, refine_type(s, w), refine_type(d, w), 4, DefaultCost(), MAX_FUSED_GROUP)


def _ticked(sp):
    n = [0]

    def tick(k=1):
        n[0] += k

    sp.tick = tick
    return n


def test_goal_adjacent_head_is_the_whole_lists_head():
    shorter = compared = 0
    for m, s, d in _BENCH[::5]:
        a, b = _space(m, s, d), _space(m, s, d)
        na, nb = _ticked(a), _ticked(b)
        splits, U = a.info(a.S0[0])[0], a.S0[1]
        for head in (1, 16):
            got = a.goal_adjacent(splits, U, head=head)
            whole = b.goal_adjacent(splits, U)
            assert got == whole[:head], (m, s, d, head)
            compared += 1
        assert na[0] <= 2 * nb[0]  # two head calls against one whole list
        shorter += na[0] < nb[0]
        # once the whole list is known, the head is read from it
        assert b.goal_adjacent(splits, U, head=16) == whole[:16]
    assert compared >= 200 and shorter >= 10


def _local_closure(sp, i, limit=2000):
    seen, todo = {i}, [i]
    while todo:
        k = todo.pop()
        state = sp.states[k]
        sp._cur = (state[0], sp.info(state[0]))
        for kind in LOCAL_MOVE_KINDS:
            for _steps, s2 in MOVES[kind](sp, state, True):
                j = sp.intern(s2)
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        assert len(seen) <= limit
    return seen


@pytest.mark.parametrize("mesh, src, dst", SMALL)
def test_seed_may_finish_is_optimistic(mesh, src, dst):
    sp = _small_space(mesh, src, dst)
    edges, _ = _graph(sp)
    t_key = (sp.info(sp.T[0])[0], sp.T[1])
    for i in list(edges):
        if auto._seed_may_finish(sp, i):
            continue
        for j in _local_closure(sp, i):
            st = sp.states[j]
            assert (sp.info(st[0])[0], st[1]) != t_key, (sp.states[i], st)


def test_seed_may_finish_refuses_some_states():
    refused = 0
    for mesh, src, dst in SMALL[:12]:
        sp = _small_space(mesh, src, dst)
        edges, _ = _graph(sp)
        refused += sum(not auto._seed_may_finish(sp, i) for i in edges)
    assert refused >= 20


class _Recorded(Budget):
    """A budget that keeps its probes, to tell whether a seed stage was cut short."""

    __slots__ = ("probes",)

    def __init__(self, *a):
        super().__init__(*a)
        self.probes = []

    def probe(self, moves):
        p = super().probe(moves)
        self.probes.append(p)
        return p


def _seed(m, s, d):
    sp = _space(m, s, d)
    budget = _Recorded(10**6, time.thread_time() + 600)
    cap = max(sp.shard(sp.S0), sp.shard(sp.T))
    best = auto._seed_best(sp, budget, cap)
    return best, budget.used, any(p.cut for p in budget.probes)


def _rank(best):
    c = best[0]
    return (c[0], c[2], c[1])


def _both(cases, monkeypatch):
    new = [_seed(*c) for c in cases]
    with monkeypatch.context() as mp:
        whole = Space.goal_adjacent
        # the compiled Space is an extension type whose methods are fixed: _space builds
        # a subclass that lists the whole goal-adjacent list and cuts it
        mp.setattr(sys.modules[__name__], "Space", type("WholeListSpace", (Space,), {
            "goal_adjacent": lambda self, splits, U, head=None: whole(self, splits, U)[:head]}))
        mp.setattr(auto, "_seed_may_finish_state", lambda sp, state, T_splits: True)
        old = [_seed(*c) for c in cases]
    return new, old


def test_the_seed_finds_the_same_answer_with_fewer_moves(monkeypatch):
    """With a stage cap of a million moves: where the walk without the shortcuts is not
    cut short, the same answer in no more moves; where it is, an answer at least as good
    (the shortcuts drop only states whose local steps never finish, so the live states
    are found in the same order, sooner). At the default cap (SEED_MOVES a stage) the
    seed finds an answer wherever it found one without them."""
    cases = _BENCH[:120]
    with monkeypatch.context() as mp:
        mp.setattr(auto, "SEED_MOVES", 10**6)
        new, old = _both(cases, monkeypatch)
    fewer = whole = 0
    for c, (b_new, n_new, _), (b_old, n_old, cut_old) in zip(cases, new, old):
        if not cut_old:
            whole += 1
            assert b_new == b_old, c
            assert n_new <= n_old, c
            fewer += n_new < n_old
        elif b_old is not None:
            assert b_new is not None and _rank(b_new) <= _rank(b_old), c
    assert whole >= 100 and fewer >= 20
    assert sum(b is not None for b, _, _ in new) >= 50
    new, old = _both(cases, monkeypatch)
    assert all(b_new is not None for (b_new, _, _), (b_old, _, _) in zip(new, old) if b_old is not None)
