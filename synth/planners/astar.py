"""The A* engine over a :class:`synth.planners.moves.Space`, budgeted in work.

:class:`Budget` counts the moves examined (every successor generated, permute targets
included) and raises :class:`OutOfWork` past its limit; it also checks a CPU-time cap
(the planning thread's own CPU seconds, ``time.thread_time``, read every
:data:`CLOCK_EVERY_MOVES` moves) and raises :class:`OutOfTime` past it. The cap is a safety
net only: counting the thread's CPU time rather than wall time, it does not fire sooner
because other processes share the cores, but a result cut by it still depends on the
machine's speed, and the planner says so.

:func:`astar` finds the cheapest path under a cost model (``objective="time"``: the tuple
``(time_s, bytes, collectives)`` compared in that order) with every type within ``cap``
elements, and, when ``live_cap`` is given, every step's live buffers (input + output, or
the re-padding buffer with either) within ``live_cap`` elements. ``objective="fewest"``
ranks by ``(collectives, bytes, time)`` instead, among paths whose time bound stays
within ``time_limit`` (the tie pass). The bound ``Space.h`` is admissible, and a node is
re-opened when reached more cheaply, so what it returns on exhaustion is optimal over the
move set within the caps.

:func:`bottleneck` finds the least largest shard of any path (a minimax Dijkstra).
"""

from __future__ import annotations

import heapq
import itertools
import time

try:  # Cython's pure-Python mode: type declarations for the compiled copy (moves.pxd)
    import cython
except ImportError:  # no Cython: the declarations are no-ops
    from synth.planners import _nocython as cython

from synth.planners.gcpause import gc_paused
from synth.planners.moves import PERMUTE_MOVES, Space

_ZERO = (0.0, 0, 0)

#: ``run`` of a node reached by a permute move: no permute move follows (see :func:`astar`).
AFTER_PERMUTE = -1


class OutOfWork(Exception):
    """The work budget (moves examined) ran out."""


class OutOfTime(Exception):
    """The CPU-time safety cap fired."""


#: Moves between two reads of the CPU clock (a read costs about 0.5 us; a move 10 us).
CLOCK_EVERY_MOVES = 64


class Budget:
    """Moves examined, against ``limit``; CPU-time cap ``deadline`` (on the clock of
    ``time.thread_time``: the planning thread's CPU seconds)."""

    __slots__ = ("limit", "deadline", "used", "expanded", "_clock_at")

    def __init__(self, limit: int, deadline: float):
        self.limit = int(limit)
        self.deadline = float(deadline)
        self.used = 0
        self.expanded = 0
        self._clock_at = 0  # ``used`` at which the CPU clock is read next

    def probe(self, moves: int):
        """A context in which at most ``moves`` more moves may be examined (then
        :class:`OutOfWork`); the overall limit comes back after it."""
        return _Probe(self, moves)

    def tick(self, n: int = 1):
        self.used += n
        if self.used > self.limit:
            raise OutOfWork
        if self.used >= self._clock_at:
            self._clock_at = self.used + CLOCK_EVERY_MOVES
            if time.thread_time() > self.deadline:
                raise OutOfTime


class _Probe:
    """The context of :meth:`Budget.probe` (one class for every probe: building a class
    per call cost more than the probe)."""

    __slots__ = ("budget", "moves", "saved", "cut")

    def __init__(self, budget: Budget, moves: int):
        self.budget, self.moves = budget, moves

    def __enter__(self):
        budget = self.budget
        self.saved = budget.limit
        budget.limit = min(budget.limit, budget.used + int(self.moves))
        return self

    def __exit__(self, *exc):
        budget = self.budget
        cut_here = exc[0] is OutOfWork and budget.used <= self.saved
        budget.limit = self.saved
        self.cut = cut_here
        return cut_here  # swallow a cut of the probe, not of the whole budget


def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


class Found:
    """A path found: its steps, cost ``(time_s, bytes, collectives)``, peak live elements
    and the space it was found in. ``cost`` and ``peak`` are None for a path the search
    did not cost (:func:`bottleneck`'s: its ``max_shard``, the largest shard on it in
    elements, is what that search ranks by)."""

    __slots__ = ("steps", "cost", "peak", "sp", "plan", "max_shard")

    def __init__(self, steps, cost, peak, sp, max_shard=None):
        self.steps, self.cost, self.peak, self.sp = steps, cost, peak, sp
        self.max_shard = max_shard
        self.plan = None  # a Plan built elsewhere (the normal incumbent), when sp is None


@gc_paused()
@cython.locals(sp=Space, budget=Budget)
def astar(sp: Space, budget: Budget, cap: int, full: bool, upper=None, live_cap=None,
          objective: str = "time", time_limit=None, weight: float = 1.0):
    """Cheapest path from ``sp.S0`` to ``sp.T`` (see the module doc); with ``weight`` > 1
    a path within that factor of the cheapest. Returns
    ``(Found or None, exhausted)``; raises :class:`OutOfWork` / :class:`OutOfTime`.

    Nodes are ``(state id, run)``: ``run`` is the shard (elements) at the start of the run
    of slices in progress (0: none), when local ops cost something, or :data:`AFTER_PERMUTE`
    where the last move was a permute in the full pass: no permute move follows one there
    (``Plan.build`` merges two in a row into one permute, so the search would cost a chain
    that never runs; the full pass's permute moves reach the whole permute closure in one
    move instead, see :func:`synth.planners.moves._permute_moves`), so every path of the
    pass that proves "optimal" is costed as it runs. In
    the full pass, the permutes from a state to every type of one class (its own splits
    and pending sums, or another class one permute reaches) are one heap entry (a *class*
    entry) until it is popped: its key is the cheapest such permute with no bound on the
    rest (admissible, :meth:`Space.class_key`), so most classes are never enumerated once
    an upper bound prunes them."""
    s0, t = sp.intern(sp.S0), sp.intern(sp.T)
    runs = not sp.local_free  # a run of slices is one local op, costed when it ends
    fewest = objective == "fewest"
    inf = float("inf")
    shards = sp.shards
    # the exact passes (weight 1) key by the sharper bound (Space.h_sharp_id), the
    # weighted ones by h_id
    sharp = weight == 1.0
    h_id = sp.h_sharp_id if sharp else sp.h_id

    def key(g, hh):
        # weight > 1: weighted A* (finds a plan fast, within ``weight`` of the best)
        f = (g[0] + weight * hh[0], g[1] + hh[1], g[2] + hh[2])
        return (f[2], f[1], f[0]) if fewest else f

    tick = budget.tick
    sp.tick = tick
    start = (s0, 0)
    best_g = {start: _ZERO}
    parent = {start: None}
    peak_of = {start: shards[s0]}
    counter = itertools.count()
    # ties in f go to the entry nearer the goal (smaller bound left), then first in
    heap = [(key(_ZERO, h_id(s0)), 0.0, next(counter), _ZERO, start)]
    push = heapq.heappush

    best_get = best_g.get
    h_list = sp._hvs if sharp else sp._hv
    # a time past which nothing is kept (the upper bound's, the tie pass's limit), with a
    # margin for rounding: a state with g[0] + Space.comm_floor_id past it is expanded by
    # its local moves and relabels only
    limit_s = None
    if not runs:
        if upper is not None and not fewest:
            limit_s = upper[0]
        if time_limit is not None:
            limit_s = time_limit if limit_s is None else min(limit_s, time_limit)
        if limit_s is not None:
            limit_s = limit_s * (1 + 1e-9) + 1e-18

    # Under the default model every member of a class that a permute moves data to costs
    # the same from any state of its local shape (a permute of the shard; the members that
    # move nothing are single moves): a class enumerated once at ``g`` relaxes nothing new
    # from a state reached at ``g`` or more, so it is not enumerated again there (its
    # members are not ticked again). Example: on the relabel case ``[10{w,z,x}] ->
    # [10{y,z,v}]`` every state of local shape ``1`` reaches the same classes.
    class_done = {} if sp.fast and not runs else None

    def no_worse(old, g2):
        # ``old`` ranks at or before ``g2`` in the objective's order (see ``key``)
        if fewest:
            return (old[2], old[1], old[0]) <= (g2[2], g2[1], g2[0])
        return old <= g2

    def dominated(j, g2, no_worse=no_worse):  # bound, not closed over: synth.planners.gcpause
        # a state reached by a permute (no permute may follow) at no less than it was
        # reached otherwise (any move may follow) adds nothing: (j, 0) has every move
        old = best_get((j, 0))
        return old is not None and no_worse(old, g2)

    # Deferred bounds: a node first reached whose exact bound needs per-device arrays is
    # pushed under a quick bound (Space.h_quick_id: what a few devices lack) and its exact
    # bound is taken only when that entry is popped, then re-pushed under it with the same
    # counter; many nodes of a proof are never popped. The quick key is at most the exact
    # key in every component (so in the heap's order), so every entry whose exact key is
    # below a popped exact entry's has been popped and re-keyed before it: the nodes are
    # expanded in the order, with the ties, of computing each bound at once. A deferred
    # node the exact bound would have pruned is recorded in ``best_g``; only a path at no
    # less cost reaches it again, which the exact bound prunes as well. Example: bench
    # case 1104 (1,152 devices) computed 31,000 exact bounds to expand 405 states.
    deferred = set()  # counters of entries keyed under a quick bound
    h_quick = sp.h_quick_sharp_id if sharp else sp.h_quick_id

    def relax(node, g2, node2, steps, live, key=key):  # bound, not closed over: synth.planners.gcpause
        if g2[0] == inf:
            return
        # pruned by its cost alone, whatever its state's bound (every bound is >= 0 in each
        # part, so it only raises the key): the bound is not computed. A fifth of the moves
        # relaxed on the budget-spending bench cases, most to states not bounded yet
        if upper is not None and (key(g2, _ZERO) if fewest else g2) >= upper:
            return
        if time_limit is not None and g2[0] > time_limit:
            return
        old = best_get(node2)
        if old is not None:
            # key(old, 0) <= key(g2, 0): the time / fewest orders of the tuples
            if fewest:
                if (old[2], old[1], old[0]) <= (g2[2], g2[1], g2[0]):
                    return
            elif old <= g2:
                return
        j = node2[0]
        hh = h_list[j]
        c = next(counter)
        if hh is None:
            hh, exact = h_quick(j)
            if not exact:  # deferred: this bound keys the entry until it is popped
                deferred.add(c)
        if time_limit is not None and g2[0] + hh[0] > time_limit:
            deferred.discard(c)
            return
        f2 = key(g2, hh)
        if upper is not None and f2 >= upper:
            deferred.discard(c)
            return
        best_g[node2] = g2
        parent[node2] = (node, steps)
        pk = peak_of[node]
        peak_of[node2] = pk if pk >= live else live
        push(heap, (f2, hh[0], c, g2, node2))

    while heap:
        f, _, cnt, g, node = heapq.heappop(heap)
        if upper is not None and f >= upper:
            break
        if cnt in deferred:  # its exact bound now, and back into the heap under it
            deferred.discard(cnt)
            if g != best_g.get(node):
                continue  # stale
            hh = h_id(node[0])
            if time_limit is not None and g[0] + hh[0] > time_limit:
                continue
            f = key(g, hh)
            if upper is not None and f >= upper:
                continue
            push(heap, (f, hh[0], cnt, g, node))
            continue
        if node[0] == "class":  # enumerate the permutes of a class entry now
            _, origin, g0, entry = node
            if g0 != best_g.get(origin):
                continue
            i, run = origin
            sh = shards[i]
            if live_cap is not None and 2 * sh > live_cap:
                continue
            g1 = _add(g0, sp.local_run_cost(run, sh)) if run > 0 else g0
            state = sp.states[i]
            cls = sp.entry_class(state, entry)
            if class_done is not None:
                done_at = class_done.get(cls)
                if done_at is not None and done_at <= g1:
                    continue  # enumerated from a state reached as cheaply (see class_done)
                class_done[cls] = g1
            splits, U = cls
            members = ticked_members(sp, tick, splits, U)
            # the default model: one permute cost for every member (the shard's bytes; a
            # member of other splits that moves nothing is also a single move of its own,
            # at its cost, synth.planners.moves._free_relabel_moves); another model: each
            # member's own
            same = _add(g1, sp.permute_floor(state)) if sp.fast else None
            intern, ids = sp.intern, sp._ids
            for d2 in members:
                s2 = (d2, U)
                if s2 == state:
                    continue
                step = ("all_permute", s2)
                g2 = same if same is not None else _add(g1, sp.step_cost(step, state, s2))
                k = ids.get(s2)
                if k is None:
                    k = intern(s2)
                elif dominated(k, g2):
                    continue
                relax(origin, g2, (k, AFTER_PERMUTE), (step,), 2 * sh)
            continue
        if g != best_g.get(node):
            continue  # stale: reached more cheaply since
        i, run = node
        if run < 0:
            # reached more cheaply since by a move a permute may follow: that node relaxes
            # every move. Not at equal cost: (i, 0) then relaxes its permutes only (the
            # only_perm rule below, which counts on this node for the other moves), so
            # skipping here would relax none of them. Bench agreement case x=2,y=4,z=2,
            # [7{y}, 10{z}, 5] -> [7, 10{x}, 5{y,z}]: both nodes of the state
            # [7{y:(1)2,y:(2)2,z}, 10{x}, 5] were reached at one cost, neither relaxed its
            # all-to-all to the target, and a plan 0.008% dearer was called optimal
            old = best_get((i, 0))
            if old is not None and old != g and no_worse(old, g):
                continue
        if i == t and run <= 0:
            return Found(path_steps(parent, node), g, peak_of[node], sp), True
        budget.expanded += 1
        sh = shards[i]
        # the full pass: after a permute, no permute (the closure reached it in one); a state
        # already reached by a permute as cheaply has relaxed its other moves: permutes only
        only_perm = False
        if full and run == 0:
            pb = best_get((i, AFTER_PERMUTE))
            only_perm = pb is not None and no_worse(pb, g)
        ticks = None
        if limit_s is not None and g[0] + sp.comm_floor_id(i) > limit_s:
            # every communicating move from here ends past the upper bound (or the tie
            # pass's time limit): relax the local moves and relabels only (the others
            # would all be pruned; the same nodes are kept, fewer moves are examined)
            succ = sp.local_successors(i, full)
        elif limit_s is not None and g[0] + sp.last_op_floor_id(i) > limit_s:
            # one communicating move and the rest of the way after it end past it: of the
            # communicating moves only those after which local steps reach the target can
            # be kept (Space.last_op_floor_id bounds the others). The kinds none of whose
            # moves can are not generated, and the dropped moves are neither interned nor
            # costed (Space.last_op_successors); the moves generated are counted
            succ, n_all, n_perm = sp.last_op_successors(i, full)
            ticks = n_perm if only_perm else (n_all - n_perm if run < 0 else n_all)
        else:
            succ = sp.successors(i, full)
        if run < 0 or only_perm:
            succ = [e for e in succ if (e[0][0][0] in PERMUTE_MOVES) is only_perm]
        tick(len(succ) if ticks is None else ticks)
        for steps, j, sh2, c, live in succ:
            if c is None:
                if steps[0][0] == "permute_class":
                    # c: no member costs less; hc: a bound over every member's rest
                    c, hc = sp.class_key(sp.states[i], steps[0])
                    g2 = _add(g, c)
                    if upper is not None and key(g2, hc) >= upper:
                        continue
                    if time_limit is not None and g2[0] + hc[0] > time_limit:
                        continue
                    push(heap, (key(g2, hc), hc[0], next(counter), g2, ("class", node, g, steps[0])))
                    continue
                if sh2 > cap:
                    continue
                if live_cap is not None and live > live_cap:
                    continue
                if runs:
                    run2 = run if run > 0 else sh
                    if j == t:
                        relax(node, _add(g, sp.local_run_cost(run2, sh2)), (j, 0), steps, live)
                    else:
                        relax(node, g, (j, run2), steps, live)
                else:
                    relax(node, g, (j, 0), steps, live)
                continue
            if sh2 > cap:
                continue
            if live_cap is not None and live > live_cap:
                continue
            g2 = (g[0] + c[0], g[1] + c[1], g[2] + c[2])
            if run > 0:
                g2 = _add(g2, sp.local_run_cost(run, sh))
            if full and steps[-1][0] == "all_permute":
                if not dominated(j, g2):
                    relax(node, g2, (j, AFTER_PERMUTE), steps, live)
            else:
                relax(node, g2, (j, 0), steps, live)
    return None, True


@cython.locals(sp=Space)
def ticked_members(sp: Space, tick, splits, U):
    """The permute targets of a class, each a move examined every time the class is
    enumerated: the first time ``Space.class_members`` ticks while it builds the list, later
    (the list is memoised, the relaxations are not) here. Unticked, 25 M relaxations once
    took 45 s on ``[7{x,y,w}] -> [7{z,w}]`` over ``x=2,y=8,z=2,w=4``."""
    cached = sp.class_cached(splits, U)
    members = sp.class_members(splits, U)
    if cached:
        tick(len(members))
    return members


def path_steps(parent, node):
    """The steps from the start to ``node``, where ``parent[node]`` is ``(previous node,
    steps)`` and the start's is None."""
    out = []
    while parent[node] is not None:
        node, steps = parent[node]
        out.append(steps)
    out.reverse()
    return tuple(s for steps in out for s in steps)


@gc_paused()
@cython.locals(sp=Space, budget=Budget)
def bottleneck(sp: Space, budget: Budget, full: bool = True):
    """The least largest shard (elements) over every path, by a minimax Dijkstra over the
    full move set (``full``; else the directed pass's moves), without a cap. Returns a
    :class:`Found` holding a path that achieves it (``max_shard``; the path is not costed:
    ``cost`` is None), or None when the target is unreachable.

    The path is what ``auto`` answers with when the work budget runs out before a cheaper
    plan within that shard is found. Example (bench case 1822, ``x=3,y=1,z=8``,
    ``[100{z,x}, 12{y}, 100] -> [100, 12{z}, 100{x}]``): over the prime factors the
    directed moves' least largest shard is 40,000 elements; the A* that then looks for the
    cheapest plan within it ran out of budget, and ``auto`` used to answer with level 1's
    plan, which gathers the whole array (120,000 elements)."""
    s0, t = sp.intern(sp.S0), sp.intern(sp.T)
    sp.tick = budget.tick
    shards = sp.shards
    best = {s0: shards[s0]}
    parent = {s0: None}
    counter = itertools.count()
    heap = [(best[s0], next(counter), s0)]
    done = set()
    while heap:
        b, _, i = heapq.heappop(heap)
        if i in done:
            continue
        if i == t:
            return Found(path_steps(parent, i), None, None, sp, max_shard=b)
        done.add(i)
        budget.expanded += 1
        succ = sp.successors(i, full)
        budget.tick(len(succ))
        for steps, j, sh2, _c, _live in succ:
            if steps[0][0] == "permute_class":  # same shard: every member at bottleneck b
                splits, U = sp.entry_class(sp.states[i], steps[0])
                members = ticked_members(sp, budget.tick, splits, U)
                for d2 in members:
                    s2 = (d2, U)
                    k = sp.intern(s2)
                    if k not in done and best.get(k, b + 1) > b:
                        best[k] = b
                        parent[k] = (i, (("all_permute", s2),))
                        heapq.heappush(heap, (b, next(counter), k))
                continue
            b2 = max(b, sh2)
            if j in done or best.get(j, b2 + 1) <= b2:
                continue
            best[j] = b2
            parent[j] = (i, steps)
            heapq.heappush(heap, (b2, next(counter), j))
    return None
