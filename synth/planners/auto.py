"""The ``auto`` planner: the cheapest plan over the documented move set (see
:mod:`synth.planners`) within the memory bound, or, where no plan stays within it, a
plan with the least achievable largest shard; deterministic, and honest about what it
proved.

Phases, all inside one work budget (moves examined, :class:`synth.planners.astar.Budget`):

0. a greedy best-first pass (:func:`_greedy_incumbent`, at most :data:`GREEDY_MOVES`):
   the cheaper of its plan and the paper's seeds 1-2 as an upper bound; where none of
   them stays within the bound, the reachability pass (:func:`_reach`, at most
   :data:`REACH_MOVES`) looks for any path of the full moves within it, target first: a
   path found is the incumbent, and a search exhausted proves there is none (1-2 are then
   skipped at that level, but for a plan within the directed moves' least largest shard);
1. a *directed* A* within ``bound = max(src shard, dst shard)``: permutes only to the
   target and to types from which the target is reached by gathers and slices;
2. if it found a plan, the *full* A* (permutes to every type of the same splits) with
   that plan's cost as an upper bound: exhausted means optimal over the move set.
   If it found none, the full A* within ``bound``; exhausted without a plan means no
   bounded plan exists (proven), and then :func:`synth.planners.astar.bottleneck`
   finds the least largest shard ``cap`` and 1-2 run again within ``cap``;
3. the tie pass (:data:`synth.planners.cost.TIE_TOLERANCE`): among plans within the
   tolerance of the optimum, the least peak live memory (a binary search over live
   caps), then the fewest collectives, then the fewest bytes.

When the work budget runs out first, the answer is the best plan found so far (not
claimed optimal); where that plan is over the memory bound, the plan found on the way that
is least over it, then the fastest (:func:`_least_over`). Where the search found no plan
at all, :func:`_over_fallback` then looks for one a little over the bound, in at most
:func:`over_allowance` more moves (said in a note, counted in
``Plan.search["fallback_moves"]``), and ``normal``'s plan is the answer only where it
finds none less over the bound.

``Plan.search`` records the outcome; its ``lower_bound_s`` is the machine's bound over
*every* plan (:func:`synth.planners.cost.lower_bound_s`), never the search's frontier.
"""

from __future__ import annotations

import heapq
import math
import time

from synth.collectives import AllPermute, AllReduce, Unreduce
from synth.errors import RedistributionError
from synth.mesh import Mesh
from synth.plan import Plan
from synth.planners.astar import (
    Budget,
    Found,
    OutOfTime,
    OutOfWork,
    astar,
    bottleneck,
    path_steps,
    ticked_members,
)
from synth.planners.cost import (
    DEFAULT_BUDGET_MOVES,
    DEFAULT_BUDGET_S,
    TIE_TOLERANCE,
    DefaultCost,
    check_budget,
    check_budget_moves,
    cost_name,
    lower_bound_need,
    lower_bound_s,
    schedule_cost,
)
from synth.planners.gcpause import gc_paused
from synth.planners.moves import (
    LOCAL_MOVE_KINDS,
    MAX_FREE_RELABELS,
    MAX_PERMUTE_CLASSES,
    MOVES,
    PERMUTE_MOVES,
    Space,
    work_mesh,
)
from synth.planners.normal import MAX_FUSED_GROUP, _merge_permutes, plan_normal
from synth.types import ArrayType, Dim, refine_type

__all__ = ["plan_auto", "DEFAULT_BUDGET_MOVES", "DEFAULT_BUDGET_S"]


def _fmt_t(v: float) -> str:
    return f"{v * 1e3:.4g} ms" if v >= 1e-3 else f"{v * 1e6:.4g} us"


class _NoFinitePlan(Exception):
    """The memory cap admits paths, but each has a step of infinite cost."""


class _State:
    """What the phases established so far (kept when the budget runs out mid-phase)."""

    def __init__(self):
        self.found = None        # best Found so far
        self.optimal = False     # the full search within ``cap`` is exhausted
        self.min_max = None      # proven least largest shard (elements)
        self.ties = "not run"
        self.optimum_s = None    # the optimal time before the tie pass
        self.cap = None          # the memory cap of the search (elements)
        self.proven = None       # the move set over which st.found is proven optimal
        self.opt_lb = 0.0        # proven: no plan within the cap costs less (seconds)
        self.need_bytes = 0      # no plan receives fewer bytes (its steps' neediest devices, summed)
        self.least = []          # bottleneck paths (least largest shard, not costed): kept for a cut
        self.over = None         # a plan over the bound, where the search found none (_over_fallback)


def _incumbent(p, cost, itemsize):
    """A built plan as an incumbent of the search: its schedule's cost and peak (elements)."""
    f = Found(None, tuple(schedule_cost(p, cost)), -(-p.peak_live_bytes // itemsize), None)
    f.plan = p
    return f


def _normal_incumbent(mesh, src, dst, itemsize, cost, bound_elems):
    """The paper's (``normal``) plan as the first incumbent when it stays within the bound:
    its cost prunes the search from the start (and if nothing beats it, it is the answer)."""
    try:
        p = plan_normal(mesh, src, dst, itemsize)
    except RedistributionError:
        return None
    if p.max_shard_bytes > bound_elems * itemsize:
        return None
    return _incumbent(p, cost, itemsize)


#: Moves the greedy first pass may examine (:func:`_greedy_incumbent`): a small share of
#: the default work budget.
GREEDY_MOVES = 4000
#: In the greedy pass's order, one collective weighs as much as this many axes out of
#: place: a fused gather of three axes beats three gathers.
GREEDY_COLLECTIVE_WEIGHT = 2


def _distance(sp: Space, state) -> int:
    """How far ``state`` is from the target, structurally (for ordering only, never a
    bound): per dim, the axes after the common prefix with the target dim on either
    side, plus the pending sums that differ. Example, target ``[12{d}, 6{b}, 4, 2]``:
    ``[12{a,c}, 6{e}, 4{d,f}, 2{b}]`` is 2+1 + 1+1 + 2 + 1 = 8 away, ``[12{d}, 6{b}, 4,
    2]`` 0."""
    dims, U = state
    n = 0
    for a, t in zip(dims, sp.T[0]):
        m = 0
        while m < len(a) and m < len(t) and a[m] == t[m]:
            m += 1
        n += len(a) + len(t) - 2 * m
    return n + len(set(U) ^ sp.TU)


def _greedy_incumbent(sp: Space, budget: Budget, cap: int, src, dst, itemsize, cost):
    """A first plan within ``cap`` found fast: best-first over the full pass's moves (of
    the permutes, only the one to the target and those that move nothing: enumerating
    permute targets is most of a state's cost), the state with the least :func:`_distance` to the target plus
    :data:`GREEDY_COLLECTIVE_WEIGHT` per collective so far first, then the less time; at
    most :data:`GREEDY_MOVES` moves (a cut probe finds nothing). It only seeds the exact
    phases with an upper bound (they prove or beat it), so its order decides no claim.
    Example: on ``a=3,b=2,c=4,d=2,e=3,f=2``, ``[12{a,c}, 6{e}, 4{d,f}, 2{b}] -> [12{d},
    6{b}, 4, 2]`` the exact passes spend the default 50,000 moves on the many short plans
    over the bound before any within 576 B, while this pass reaches a 2-collective plan
    within it in under 1,000 moves. Returns a :class:`Found` (under the default model its
    steps' own costs, which are the schedule's; under another, carrying its plan costed by
    :func:`schedule_cost`), or None."""
    import heapq

    s0, t = sp.intern(sp.S0), sp.intern(sp.T)
    sp.tick = budget.tick
    seen = {s0: None}
    heap = [(_distance(sp, sp.S0), 0, 0.0, 0, s0)]
    w = GREEDY_COLLECTIVE_WEIGHT
    counter = 1
    goal = None
    with budget.probe(GREEDY_MOVES):
        while heap:
            _, g, ncoll, _, i = heapq.heappop(heap)
            if i == t:
                goal = i
                break
            budget.expanded += 1
            succ = sp.successors(i, True)
            budget.tick(len(succ))
            for steps, j, sh2, c, live in succ:
                if steps[0][0] == "permute_class":  # of a permute's targets, only the target
                    dims, U = sp.states[i]
                    if U != sp.T[1] or dims == sp.T[0] or sp.info(dims)[0] != sp.info(sp.T[0])[0]:
                        continue
                    steps = (("all_permute", sp.T),)
                    j, c = t, sp.step_cost(steps[0], sp.states[i], sp.T)
                elif steps[0][0] == "all_permute" and j != t and c[2]:
                    continue  # a permute to other splits: only where it moves nothing
                if sh2 > cap or j in seen:
                    continue
                c = c or (0.0, 0, 0)
                seen[j] = (i, steps, c, live)
                n2 = ncoll + c[2]
                heapq.heappush(heap, (_distance(sp, sp.states[j]) + w * n2, g + c[0], n2, counter, j))
                counter += 1
    if goal is None:
        return None
    path, total, peak = [], (0.0, 0, 0), sp.shard(sp.S0)
    while seen[goal] is not None:
        goal, steps, c, live = seen[goal]
        path.append(steps)
        total = (total[0] + c[0], total[1] + c[1], total[2] + c[2])
        peak = max(peak, live)
    steps = tuple(s for st in reversed(path) for s in st)
    if sp.fast:  # the default model: the steps' own costs are the schedule's (tested)
        return Found(steps, total, peak, sp)
    try:
        p = _path_plan(sp, steps, src, dst, itemsize)
    except RedistributionError:  # cannot happen (every move obeys its type rule); no incumbent then
        return None
    if p.max_shard_bytes > cap * itemsize:
        return None
    return _incumbent(p, cost, itemsize)


#: Moves the reachability pass may examine (:func:`_reach_incumbent`).
REACH_MOVES = 8000


def _reach(sp: Space, budget: Budget, cap: int):
    """Whether any path of the full pass stays within ``cap``: a best-first search over
    the full move set (every permute class enumerated, no permute right after a permute,
    no step of infinite cost: the graph the full A* searches), the state with the least
    :func:`_distance` to the target plus one per collective so far first. Returns the
    steps of a path, or None when every state within ``cap`` it reaches has been expanded
    (then the full A* within ``cap`` finds no plan either: the same graph); raises
    :class:`OutOfWork` past the budget.

    It decides what the time-ordered A* decides slowly where no incumbent prunes it: with
    latency-bound costs that A* expands every state a few collectives deep before one
    deeper, while this pass goes to the target first. Example (bench case 1482,
    ``x=8,y=8,z=5,w=3,v=3,u=3``, ``[3{w,z}, 16, 50{x,v}, 5{y}] -> [3, 16{y,u}, 50{x,w,v},
    5{z}]``): a 2-collective plan within the 192 B bound in 2,514 moves, where the directed
    A* spent the whole 50,000-move budget without one."""
    s0, t = sp.intern(sp.S0), sp.intern(sp.T)
    sp.tick = budget.tick
    inf = float("inf")
    start = (s0, 0)  # node: (state id, 1 when reached by a permute)
    seen = {start: None}  # node -> (parent node, steps)
    heap = [(_distance(sp, sp.S0), 0, 0, start)]  # (order, collectives so far, first in, node)
    counter = 1
    push = heapq.heappush
    while heap:
        _, ncoll, _, node = heapq.heappop(heap)
        i, after_permute = node
        if i == t:
            return path_steps(seen, node)
        budget.expanded += 1
        succ = sp.successors(i, True)
        if after_permute:
            succ = [e for e in succ if e[0][0][0] not in PERMUTE_MOVES]
        budget.tick(len(succ))
        state = sp.states[i]
        for steps, j, sh2, c, _live in succ:
            if sh2 > cap:
                continue
            if steps[0][0] == "permute_class":  # every member, as the full A* relaxes them
                splits, U = sp.entry_class(state, steps[0])
                floor = sp.permute_floor(state) if sp.fast else None
                if floor is not None and floor[0] == inf:
                    continue
                n2 = ncoll + 1
                for d2 in ticked_members(sp, budget.tick, splits, U):
                    s2 = (d2, U)
                    if s2 == state:
                        continue
                    if floor is None and sp.step_cost(("all_permute", s2), state, s2)[0] == inf:
                        continue
                    k = sp.intern(s2)
                    if (k, 0) in seen or (k, 1) in seen:
                        continue
                    seen[(k, 1)] = (node, (("all_permute", s2),))
                    push(heap, (_distance(sp, s2) + n2, n2, counter, (k, 1)))
                    counter += 1
                continue
            if c is not None and c[0] == inf:
                continue
            nxt = (j, 1 if steps[-1][0] == "all_permute" else 0)
            if nxt in seen or (j, 0) in seen:
                continue
            seen[nxt] = (node, steps)
            n2 = ncoll + (c[2] if c is not None else 0)
            push(heap, (_distance(sp, sp.states[j]) + n2, n2, counter, nxt))
            counter += 1
    return None


def _reach_incumbent(sp: Space, budget: Budget, cap: int, src, dst, itemsize, cost):
    """:func:`_reach` within ``cap``, at most :data:`REACH_MOVES` moves: ``("found",
    incumbent)`` (its plan built and costed by :func:`schedule_cost`), ``("none", None)``
    (proven: no plan of the full move set within ``cap``), or ``("cut", None)`` (the
    probe ran out; nothing is concluded)."""
    outcome = "cut"
    with budget.probe(REACH_MOVES) as probe:
        steps = _reach(sp, budget, cap)
        outcome = "none" if steps is None else "found"
    if probe.cut:
        return "cut", None
    if outcome == "none":
        return "none", None
    try:
        p = _path_plan(sp, steps, src, dst, itemsize)
    except RedistributionError:  # cannot happen (every move obeys its type rule): no incumbent then
        return "cut", None
    return "found", _incumbent(p, cost, itemsize)


#: Moves the search for a plan a little over the bound may examine past the work budget
#: (:func:`over_allowance`, :func:`_over_fallback`).
OVER_MOVES = 6000
#: Moves one probe of that search may examine.
OVER_PROBE_MOVES = 800


def _over_fallback(sp: Space, budget: Budget, cap: int, st: _State, src, dst, itemsize, cost):
    """Where the search found no plan at all before its budget ran out: a plan within a
    small multiple of ``cap`` elements (:func:`_least_over` then takes the least over the
    bound of the plans found; without this, ``normal``'s plan, which may gather the whole
    array). A binary search over ``k`` for the least cap ``cap * 2**k`` within which the
    greedy pass (:func:`_greedy_incumbent`), or else the reachability pass
    (:func:`_reach`), finds a plan; each probe at most :data:`OVER_PROBE_MOVES` moves (a
    probe cut short counts as none), all within the budget's limit (which
    :func:`_over_after_cut` raises by :func:`over_allowance`). The plan of the least cap
    found so far is ``st.over`` (set as soon as it is found, so a limit reached later
    keeps it); nothing is claimed of it.

    Example (bench case 814, ``x=3,y=4,z=6,w=1,v=6,u=4``, ``[5{x,y,z}, 6{w}, 10{v}, 7{u}]
    -> [5{u,w}, 6{y}, 10{z}, 7{v}]``): the bound is 96 B; no pass finds a plan within it
    before the budget runs out, and ``auto`` answered with ``normal``'s plan, whose
    largest shard is 8,400 B. This pass finds one of 160 B, the least the directed moves
    over whole axes reach (the least-largest-shard search needs 225,000 moves to prove
    that)."""
    whole = math.prod(sp.shape)  # elements: a cap this large admits every type
    k_lo, k_hi = 1, 1
    while (cap << k_hi) < whole:
        k_hi += 1
    while k_lo <= k_hi:
        k = (k_lo + k_hi) // 2
        f = None
        with budget.probe(OVER_PROBE_MOVES):
            f = _greedy_incumbent(sp, budget, cap << k, src, dst, itemsize, cost)
        if f is None:
            with budget.probe(OVER_PROBE_MOVES):
                steps = _reach(sp, budget, cap << k)
                if steps is not None:
                    f = Found(steps, None, None, sp)
        if f is not None:
            st.over, k_hi = f, k - 1
        else:
            k_lo = k + 1


def over_allowance(limit: int) -> int:
    """Moves :func:`_over_after_cut` may examine past a work budget of ``limit`` moves:
    :data:`OVER_MOVES`, and at most an eighth of the budget."""
    return min(OVER_MOVES, limit // 8)


def _over_after_cut(sp: Space, budget: Budget, limit: int, cap: int, st: _State, src, dst, itemsize,
                    cost) -> int:
    """:func:`_over_fallback` after the work budget of ``limit`` moves ran out before the
    search found any plan, in at most :func:`over_allowance` more moves (on the same
    CPU-time cap); returns the moves it examined. It runs only then, so no result of the
    budgeted search changes: given those moves up front it would take them from the
    search (Shardy's ``replace_sub_axes_3`` finds its plan within the bound in the last
    6,000 of the 50,000)."""
    start, allowance = budget.used, over_allowance(limit)
    budget.limit = max(budget.limit, start) + allowance
    try:
        _over_fallback(sp, budget, cap, st, src, dst, itemsize, cost)
    except (OutOfWork, OutOfTime):
        pass
    # a list of moves past the limit is counted whole, then not examined (as for "moves")
    return min(budget.used - start, allowance)


#: Moves the one-collective seed may examine (:func:`_one_collective_incumbent`).
SEED_MOVES = 2000
#: Complete candidates the seed costs (in the order found: fewer local steps first).
SEED_CANDIDATES = 48
#: Permute targets the seed tries first (types from which gathers and slices finish).
SEED_PERMUTES = 16


def _one_collective_incumbent(sp: Space, budget: Budget, cap: int, src, dst, itemsize, cost, beat=None):
    """The cheapest plan of the shape XLA's partitioner emits most often, found without
    costing the moves that do not finish: local steps, at most one collective (any move of
    the full set: a fused multi-dim collective, an all-to-all of a sub-axis, ...), local
    steps, then at most one permute to the target (where the types have the target's
    splits and pending sums); or a permute first, to a type from which gathers and slices
    reach the target, then those. Every state within ``cap``; each of the two stages
    examines at most :data:`SEED_MOVES` moves and a third of the budget left, and at most
    :data:`SEED_CANDIDATES` complete plans are costed. Like the greedy pass it only
    seeds the exact phases with an upper bound.

    Example (``autoparallel-462-llama8b-128``, ``dp=16,tp=8``, ``[4096{dp}, 14336{tp}] ->
    [4096{tp}, 14336{dp}]``): the all-to-all of dp's minor factor of 2 into dim 1 gives
    ``[4096{dp:(1)8}, 14336{tp,dp:(8)2}]``, whose splits (8, 16) are the target's, so one
    permute finishes: 2 collectives, XLA's plan, where the work budget of a 128-device
    machine's cost ran out on a 3-collective plan. On ``random-0-001`` the seed is two
    local slices then one permute.

    ``beat``: the incumbent's cost, when there is one: a winner that provably does not
    cost less is not built (None is returned, as plan_auto would drop it)."""
    best = _seed_best(sp, budget, cap)
    if best is None:
        return None
    if beat is not None and sp.fast and not best[0] < beat and \
            not any(s[0] == "all_permute" for s in best[1]):
        # under the default model a path's step costs are its plan's schedule_cost where
        # no permutes merge (Plan.build merges adjacent permutes only; test_synth_median
        # checks the equality): this plan would not beat the incumbent, so plan_auto would
        # drop it (it keeps a seed only when seed.cost < inc.cost); skip building it
        return None
    try:
        p = _path_plan(sp, best[1], src, dst, itemsize)
    except RedistributionError:  # cannot happen (every move obeys its type rule)
        return None
    if p.max_shard_bytes > cap * itemsize:
        return None
    return _incumbent(p, cost, itemsize)


def _seed_may_finish(sp: Space, i) -> bool:
    """Whether local steps from state id ``i`` may reach a type the one-collective seed
    finishes from (the target's splits and pending sums, then at most one permute): see
    :func:`_seed_may_finish_state`, which the seed itself asks of state tuples before it
    interns them (``tests/test_synth_seed_walk.py`` asks this one, by id)."""
    return _seed_may_finish_state(sp, sp.states[i], sp.info(sp.T[0])[0])


def _seed_may_finish_state(sp: Space, state, T_splits) -> bool:
    """:func:`_seed_may_finish` of the state tuple ``state`` (not interned: the seed asks
    before it interns), the target's splits ``T_splits``. Pending sums only grow by local
    steps, and a dim's splits end as a prefix of its axes (the rest ShardedToUnreduced, so
    target-pending) times the slices after it, so the target's splits must be a multiple
    of the product of the shortest such prefix. Where this is False the local closure of
    ``state`` finds nothing (every state of it fails too), and the seed does not walk it.
    Example, toward ``[16, 16{x}]`` on ``x=2,y=2``: ``[16{x}, 16{y}]`` splits dim 0 in 2
    where the target does not split it, and ``x`` is not target-pending: False."""
    dims, U = state
    TU = sp.TU
    if not TU.issuperset(U):
        return False
    nprod = sp.nprod
    for ax, k in zip(dims, T_splits):
        m = len(ax)
        while m and ax[m - 1] in TU:
            m -= 1
        if k % nprod(ax[:m]):
            return False
    return True


def _seed_best(sp: Space, budget: Budget, cap: int):
    """The search of :func:`_one_collective_incumbent`: ``(cost, steps)`` of its cheapest
    candidate by the steps' own costs (time, then collectives, then bytes), or None."""
    s0, t = sp.intern(sp.S0), sp.intern(sp.T)
    sp.tick = budget.tick
    T_splits = sp.info(sp.T[0])[0]
    local_gens = [MOVES[k] for k in LOCAL_MOVE_KINDS]
    other_gens = [g for k, g in MOVES.items() if k not in LOCAL_MOVE_KINDS]
    gather_gens = [MOVES[k] for k in ("all_gather", "multi_all_gather", "dyn_slice")]
    # node: (state id, phase); phase 0: no collective yet, 1: one collective done
    parent = {(s0, 0): None}
    done = []

    def finish(node):
        i = node[0]
        if i == t:
            done.append((node, None))
        elif node[1] < 2:  # phase 2 began with a permute: no second one
            st_ = sp.states[i]
            if st_[1] == sp.T[1] and sp.info(st_[0])[0] == T_splits:
                done.append((node, (("all_permute", sp.T),)))

    tick, intern, shards = budget.tick, sp.intern, sp.shards

    def expand(node, gens, phase_to):
        """Successors of ``node`` by ``gens`` within ``cap``, new ones only; in phase 1
        only those from which local steps may finish (:func:`_seed_may_finish_state`,
        asked before the landing is interned: most landings of the one collective are
        not, and every state their local steps reach is not either)."""
        state = sp.states[node[0]]
        sp._cur = (state[0], sp.info(state[0]))
        out = []
        live = phase_to == 1
        for gen in gens:
            for steps, s2 in gen(sp, state, True):
                tick(1)
                if steps[0][0] == "permute_class":
                    continue
                if live and not _seed_may_finish_state(sp, s2, T_splits):
                    continue
                j = intern(s2)
                if shards[j] > cap or (j, phase_to) in parent:
                    continue
                if steps[0][0] == "dyn_slice":
                    if any(t_k % k for t_k, k in zip(T_splits, sp.infos[j][0])):
                        continue  # a slice the target's splits do not divide: no permute finishes
                    i_dim, X = steps[0][1], steps[0][2]
                    before = state[0][i_dim]
                    if len(X) == 1 and len(before) > len(sp.S0[0][i_dim]) and before[-1] > X[0]:
                        continue  # slices of single factors onto one dim in one order only
                parent[(j, phase_to)] = (node, steps)
                out.append((j, phase_to))
        return out

    def closure(nodes, expand=expand, finish=finish):  # bound, not closed over: synth.planners.gcpause
        """``nodes`` and every state reached from them by local steps (breadth first)."""
        seen, level = list(nodes), list(nodes)
        while level and len(done) < SEED_CANDIDATES:
            nxt = []
            for node in level:
                nxt += expand(node, local_gens, node[1])
            for node in nxt:
                finish(node)
            seen += nxt
            level = nxt
        return seen

    def share():
        """Moves one stage may examine: SEED_MOVES, and at most a third of what is left
        (the two stages never take more than 5/9 of the budget)."""
        return min(SEED_MOVES, max(0, (budget.limit - budget.used) // 3))

    with budget.probe(share()):
        # a permute first, to a type from which gathers and slices reach the target (XLA's
        # plan for random-0-007: a permute, then the gathers), then those gathers and slices
        state0 = sp.states[s0]
        starts = []
        for d2 in sp.goal_adjacent(sp.info(state0[0])[0], state0[1], head=SEED_PERMUTES):
            if d2 == state0[0] or len(done) >= SEED_CANDIDATES:
                continue
            j = sp.intern((d2, state0[1]))
            if (j, 2) not in parent:
                parent[(j, 2)] = ((s0, 0), (("all_permute", (d2, state0[1])),))
                starts.append((j, 2))
                finish((j, 2))
        level = starts
        while level and len(done) < SEED_CANDIDATES:
            nxt = []
            for node in level:
                nxt += expand(node, gather_gens, 2)
            for node in nxt:
                finish(node)
            level = nxt
    first, done = done, []  # each stage finds up to SEED_CANDIDATES of its own
    finish((s0, 0))
    with budget.probe(share()):
        phase0 = closure([(s0, 0)])
        for node in phase0:
            if len(done) >= SEED_CANDIDATES:
                break
            new = expand(node, other_gens, 1)
            for n2 in new:
                finish(n2)
            closure(new)
    done = first[:SEED_CANDIDATES] + done[:SEED_CANDIDATES]
    if not done:
        return None
    best = None
    for node, tail in done:
        path = [] if tail is None else [(tail, sp.T)]
        while parent[node] is not None:
            prev_node, steps = parent[node]
            path.append((steps, sp.states[node[0]]))
            node = prev_node
        path.reverse()
        if not path:
            continue
        # rank by the steps' own costs (memoised per step, as the search costs them); the
        # winner is costed as a plan
        c, prev = (0.0, 0, 0), sp.S0
        for steps, s2 in path:
            for st in steps:
                nxt = s2 if st is steps[-1] else st[1]
                x = sp.step_cost(st, prev, nxt)
                c = (c[0] + x[0], c[1] + x[1], c[2] + x[2])
                prev = nxt
        if best is None or (c[0], c[2], c[1]) < (best[0][0], best[0][2], best[0][1]):
            best = (c, tuple(st for steps, _ in path for st in steps))
    return best


def _prove(sp: Space, budget: Budget, cap: int, st: _State, cost):
    """The full search pruned at the incumbent's ``cost``: a plan it returns is the exact
    optimum within ``cap``; when it returns None, the incumbent is (proven)."""
    f, _ = astar(sp, budget, cap, full=True, upper=cost)
    st.opt_lb = max(st.opt_lb, f.cost[0] if f is not None else cost[0])
    return f


def _unbeatable(c, lb_s: float, need_bytes: int, cost) -> bool:
    """True when no path of the search has a cost tuple below ``c`` = ``(time_s, bytes,
    collectives)``, so an A* pass pruned at ``upper=c`` (which keeps only paths strictly
    below it) would return nothing: decided from the input alone, before searching.

    Only under :class:`DefaultCost` (``alpha_s > 0``, a finite bandwidth), where a plan's
    time is, per communicating op, ``alpha_s + bytes / bandwidth_Bps`` and every plan
    receives at least ``need_bytes`` = ``n`` (its steps' neediest devices, summed;
    :func:`lower_bound_need`). Two shapes of ``c`` qualify:

    * ``(0.0, 0, 0)`` (local steps only): no tuple of non-negative parts is smaller;
    * ``(t, n, 1)`` with ``t <= lb_s`` (= ``alpha_s + n / bandwidth_Bps``, the bound over
      every plan): a path with no collective receives nothing (< n: impossible); one with
      one collective receiving ``b >= n`` bytes costs ``alpha_s + b / bandwidth_Bps >= t``
      (the same float expression, monotone in ``b``) and, at equal time, ``b >= n`` bytes
      and one collective: not below ``c``; one with two or more costs at least
      ``2 * alpha_s + n / bandwidth_Bps``, above ``t`` by ``alpha_s`` (``t`` is capped at a
      million ``alpha_s``, so rounding cannot close that gap).

    Example: ``x=3,y=1``, ``[3, 6, 6{y}]{U:x} -> [3{x}, 6, 6{y}]``: normal's plan, one
    reduce-scatter receiving the 288 B every plan must receive, costs 5.00576 us = the
    bound; the directed pass under it is skipped (it returned nothing there, 0.03 ms)."""
    if type(cost) is not DefaultCost:
        return False
    alpha, bw = cost.alpha_s, cost.bandwidth_Bps
    if not (alpha > 0 and 0 < bw < float("inf")):
        return False
    t, b, k = c
    if need_bytes <= 0:
        return t == 0 and b == 0 and k == 0
    return k == 1 and b == need_bytes and t <= lb_s and t <= 1e6 * alpha


def _solve(sp: Space, budget: Budget, cap: int, st: _State, lb_s: float, inc=None):
    """A plan within ``cap``, optimal up to the tie tolerance; None when the full search
    proves there is none. Where the directed pass finds nothing within ``cap``, a
    directed plan within the least cap the directed moves achieve is kept first (the
    answer if the budget runs out before the full search ends)."""
    if inc is not None:
        st.found = inc
    if inc is not None and _unbeatable(inc.cost, lb_s, st.need_bytes, sp.cost):
        found = None  # the directed pass, pruned at inc.cost, could return nothing (proof there)
    else:
        found, _ = astar(sp, budget, cap, full=False, weight=1 + TIE_TOLERANCE,
                         upper=None if inc is None else inc.cost)
    if found is None:
        found = inc  # the directed pass found nothing cheaper than the incumbent
    if found is not None:
        st.found = found
        if found.cost[0] <= lb_s * (1 + 1e-12):
            st.opt_lb = max(st.opt_lb, found.cost[0])
            return found  # it costs the bound over every plan: nothing is cheaper
        better = _prove(sp, budget, cap, st, found.cost)
        return better if better is not None else found
    _least_directed(sp, budget, st)
    f = astar(sp, budget, cap, full=True)[0]
    if f is not None:
        st.opt_lb = max(st.opt_lb, f.cost[0])
    return f


def _least_directed(sp: Space, budget: Budget, st: _State):
    """Where nothing was found within the cap: a plan of the directed moves within their
    least largest shard, kept as the answer if the budget runs out before the full moves
    decide (first the least-largest-shard search's own path, then the cheapest plan the
    directed A* finds within its shard), in ``st.found``."""
    if st.found is None:
        least = bottleneck(sp, budget, full=False)
        if least is not None:
            # its own path is the answer if the budget runs out in the pass that looks for
            # the cheapest plan within its shard (plan_auto then builds and costs it)
            st.found = least
            f = astar(sp, budget, least.max_shard, full=False, weight=1 + TIE_TOLERANCE)[0]
            if f is not None:
                st.found = f


#: Moves one tie-breaking probe may examine (a probe cut short counts as "no such plan").
TIE_PROBE_MOVES = 3000


def _tie_pass(sp: Space, budget: Budget, cap: int, st: _State):
    """Among plans within TIE_TOLERANCE of the optimum: least peak live, then fewest
    collectives, then fewest bytes (see the module doc)."""
    best = st.found
    t_star = max(st.opt_lb, 0.0)
    limit = max(t_star * (1 + TIE_TOLERANCE), best.cost[0]) + 1e-15
    st.optimum_s = t_star
    # live caps worth trying: sums of two shard sizes seen, below the optimum's peak
    lo = max(sp.shard(sp.S0), sp.shard(sp.T))
    shards = sorted(v for v in {v[2] for v in sp._info.values()} | {sp.shard(sp.S0), sp.shard(sp.T)}
                    if v < best.peak)[-64:]
    cands = sorted({a + b for a in shards for b in shards if lo <= a + b < best.peak})
    partial = False
    if cands:
        # feasibility is monotone in the cap: binary search for the least feasible one;
        # each probe may examine at most TIE_PROBE_MOVES moves (cut: taken as infeasible)
        i, j = 0, len(cands)
        while i < j:
            mid = (i + j) // 2
            f = None
            with budget.probe(TIE_PROBE_MOVES) as pr:
                f, _ = astar(sp, budget, cap, full=True, live_cap=cands[mid], time_limit=limit,
                             weight=1 + TIE_TOLERANCE)
            partial |= bool(getattr(pr, "cut", False))
            if f is not None and f.cost[0] <= limit:
                if (f.peak, f.cost[2], f.cost[1]) < (best.peak, best.cost[2], best.cost[1]):
                    best = st.found = f  # kept if the budget runs out in a later probe
                j = mid
            else:
                i = mid + 1
    if best.cost[2] == 1 and best.cost[1] <= st.need_bytes and not sp.local_reach(sp.S0):
        pass  # every plan has a collective and receives >= need_bytes: none has fewer of either
    elif best.cost[2] >= 1:
        f = None
        with budget.probe(TIE_PROBE_MOVES) as pr:
            f, _ = astar(sp, budget, cap, full=True, live_cap=best.peak, objective="fewest",
                         time_limit=limit)
        partial |= bool(getattr(pr, "cut", False))
        if f is not None and f.cost[0] <= limit and f.peak <= best.peak and \
                (f.cost[2], f.cost[1]) < (best.cost[2], best.cost[1]):
            best = st.found = f
    st.ties = "partly compared (probe budget)" if partial else "broken"
    return best


#: Move-set options of ``auto`` (``move_set=`` / ``--move-set``): ``full`` (the default: the
#: documented move set over the prime factors of every axis) or ``whole-axes`` (the same
#: moves over whole mesh axes and the factors the types name only).
MOVE_SETS = ("full", "whole-axes")


def check_move_set(value) -> str:
    if not isinstance(value, str) or value not in MOVE_SETS:
        raise RedistributionError(
            f"auto planner: unknown move set {value!r}; choose one of {', '.join(MOVE_SETS)} "
            "(e.g. --move-set full)")
    return value


@gc_paused()  # the search's spaces die inside: the collector never walks them
def plan_auto(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4, *, cost=None,
              budget_s: float | None = None, budget_moves: int | None = None,
              move_set: str = "full") -> Plan:
    """The ``auto`` plan (see the module doc). ``cost``: a cost model
    (:class:`synth.planners.cost.DefaultCost` when None; a machine's is
    ``models.plan_cost.machine_cost``). ``budget_moves``: the work budget (default
    :data:`DEFAULT_BUDGET_MOVES`); ``budget_s``: the CPU-time safety cap (default
    :data:`DEFAULT_BUDGET_S`).

    ``Plan.search`` holds: ``status``, ``optimal`` (no plan over the move set within the
    memory cap costs less, up to the tie tolerance), ``cost_model``, ``time_s``,
    ``bytes_moved``, ``collectives``, ``optimum_s`` (the least time, before ties were
    broken), ``lower_bound_s`` (bound over every plan) and ``gap_s``, ``bound_bytes``,
    ``max_shard_bytes``, ``bound_met``, ``min_max_shard_bytes`` (proven least largest
    shard, or None), ``ties``, ``budget_moves``, ``moves`` (of the budgeted search),
    ``fallback_moves`` (past the budget, :func:`_over_after_cut`; 0 unless the search found
    no plan), ``states``, ``budget_s``, ``elapsed_s``, ``cap_fired``."""
    t0 = time.perf_counter()
    cost = cost if cost is not None else DefaultCost()
    cap_s = DEFAULT_BUDGET_S if budget_s is None else check_budget(budget_s)
    limit = DEFAULT_BUDGET_MOVES if budget_moves is None else check_budget_moves(budget_moves)
    move_set = check_move_set(move_set)
    from synth.types import refine

    base = mesh.base_mesh if mesh.base else mesh
    w1 = refine(base, [src, dst])[0]          # whole axes (and the factors the types name)
    w2 = work_mesh(mesh, [src, dst]) if move_set == "full" else w1   # every prime factor
    sp1 = Space(w1, refine_type(src, w1), refine_type(dst, w1), itemsize, cost, MAX_FUSED_GROUP)
    sp2 = None
    if w2.axes != w1.axes:
        sp2 = Space(w2, refine_type(src, w2), refine_type(dst, w2), itemsize, cost, MAX_FUSED_GROUP)
    budget = Budget(limit, time.thread_time() + cap_s)
    st = _State()
    sub = None  # level 2's state, where level 1 proved no plan within the bound
    bound = max(sp1.shard(sp1.S0), sp1.shard(sp1.T))
    # the default model reads only the neediest device's bytes (its plan_lower_bound_s is
    # bytes_lower_bound_s of need.max()): no per-device vector then
    need = lower_bound_need(mesh, src, dst, itemsize, vector=type(cost) is not DefaultCost)
    lb_s = lower_bound_s(mesh, src, dst, itemsize, cost, need=need)
    st.need_bytes = need[1]
    cut = None
    try:
        # level 1: whole axes (a small space: a good plan fast, and an upper bound)
        cap = bound
        inc = _normal_incumbent(mesh, src, dst, itemsize, cost, bound)
        st.found = inc  # kept if the budget runs out in the greedy pass
        greedy = None
        if inc is None or inc.cost[0] > lb_s * (1 + 1e-12):  # XLA's shape of plan, over every factor
            seed = _one_collective_incumbent(sp2 or sp1, budget, cap, src, dst, itemsize, cost,
                                             beat=None if inc is None else inc.cost)
            if seed is not None and (inc is None or seed.cost < inc.cost):
                inc = st.found = seed
        if inc is None or inc.cost[0] > lb_s * (1 + 1e-12):  # the paper's plan may be beaten
            greedy = _greedy_incumbent(sp1, budget, cap, src, dst, itemsize, cost)
        if greedy is not None and (inc is None or greedy.cost < inc.cost):
            inc = greedy  # the cheaper first plan seeds the search (the exact passes prove or beat it)
        reach = None
        if inc is None:  # no plan within the bound yet: does any path of the full moves stay within it?
            reach, inc = _reach_incumbent(sp1, budget, cap, src, dst, itemsize, cost)
        if reach == "none":  # the full A* within the bound would exhaust without a plan (the same graph)
            _least_directed(sp1, budget, st)
            found = None
        else:
            found = _solve(sp1, budget, cap, st, lb_s, inc)
        if found is None:  # no plan within the bound over whole axes (proven)
            least = bottleneck(sp1, budget)
            if least is None:
                raise AssertionError("auto: the target is unreachable from the source")
            st.least.append(least)
            cap = least.max_shard
            found = _solve(sp1, budget, cap, st, lb_s)
            if found is None:  # every path within the cap has a step of infinite cost
                raise _NoFinitePlan
        st.found, st.cap = found, cap
        st.proven = "whole-axes"
        if sp2 is None:
            st.proven, st.min_max = move_set, cap
        elif found.cost[0] <= lb_s * (1 + 1e-12) and cap == bound:
            st.proven, st.min_max = move_set, cap  # it costs the bound over every plan
        else:
            # level 2: every prime factor, the full move set, bounded by level 1's plan
            if cap == bound:
                st.opt_lb = 0.0  # level 1 proved its bound over whole axes only
                f2, _ = astar(sp2, budget, bound, full=False, weight=1 + TIE_TOLERANCE, upper=found.cost)
                if f2 is not None:
                    st.found = f2
                if st.found.cost[0] <= lb_s * (1 + 1e-12):
                    st.opt_lb = max(st.opt_lb, st.found.cost[0])  # the bound over every plan: nothing is cheaper
                else:
                    f3 = _prove(sp2, budget, bound, st, st.found.cost)
                    f2 = f3 or f2
            else:  # is there a bounded plan over the sub-axes, or a smaller largest shard?
                st.opt_lb = 0.0
                sub = _State()
                reach2, inc2 = _reach_incumbent(sp2, budget, bound, src, dst, itemsize, cost)
                if reach2 == "none":
                    _least_directed(sp2, budget, sub)
                    f2 = None
                else:
                    f2 = _solve(sp2, budget, bound, sub, lb_s, inc2)
                if f2 is None:
                    least = bottleneck(sp2, budget)
                    if least is None:  # cannot happen (level 1's plan is a path); keep level 1's
                        m = cap
                    else:
                        st.least.append(least)
                        m = least.max_shard
                    if m < cap:
                        f2 = _solve(sp2, budget, m, sub, lb_s)
                    else:
                        f2 = _prove(sp2, budget, m, sub, found.cost)
                    cap = m
                else:
                    cap = bound
                st.opt_lb = sub.opt_lb
            if f2 is not None:
                st.found = f2
            st.cap, st.min_max, st.proven = cap, cap, move_set
        st.optimal = True
        st.found = _tie_pass(sp2 or sp1, budget, st.cap, st)
    except OutOfWork:
        cut = "work"
    except OutOfTime:
        cut = "time"
    except _NoFinitePlan:
        cut = "infinite"
    if cut in ("work", "time") and st.optimal and st.ties == "not run":
        # the proof ended and the tie pass was cut (bench case 87: optimal at 10.0 us, the
        # rest of the budget spent in a tie probe); it said "not run"
        st.ties = "partly compared (" + ("work budget" if cut == "work" else "CPU-time cap") + ")"
    notes = []
    over_moves = 0
    if cut == "work" and st.found is None:
        # the budget ran out before the search found any plan: a plan a little over the
        # bound, in at most over_allowance(limit) more moves, said in a note
        over_moves = _over_after_cut(sp1, budget, limit, bound, st, src, dst, itemsize, cost)
    if cut is not None and not st.optimal:
        # cut short before a plan was proven: of the plans found, the one least over the memory bound, then the
        # fastest (the bound first, as everywhere in auto); see _least_over
        st.found, plan = _least_over(st, sub, mesh, src, dst, itemsize, cost, bound)
    elif st.found is not None and st.found.sp is None:
        plan = st.found.plan
    elif st.found is not None:
        plan = _found_plan(st.found, src, dst, itemsize)
    else:
        plan = plan_normal(mesh, src, dst, itemsize)
    if st.found is None:
        if cut == "infinite":
            notes.append("auto: every plan the search found has a step the cost model cannot "
                         "cost (infinite time); returned the normal planner's plan")
        elif cut == "time":
            notes.append(f"auto: the CPU-time safety cap of {cap_s:g} s fired after {budget.used} "
                         "moves, before the search found a plan; returned the normal planner's plan "
                         "(load-dependent; raise --budget-ms)")
        else:
            notes.append(f"auto: the work budget of {limit} moves ran out before the search found a "
                         "plan; returned the normal planner's plan (not searched to the end; raise "
                         "--budget-moves)")
    if st.found is not None and st.found.sp is not None and st.found.sp.fast and st.found.cost is not None:
        # the search's own cost: under the default model it is the schedule's, step by
        # step (tests check it against schedule_cost); big meshes skip building the schedule
        t_s, moved, ncoll = st.found.cost
    elif st.found is not None and st.found.sp is None:
        t_s, moved, ncoll = st.found.cost  # a built plan: schedule_cost was taken in _incumbent
    else:
        t_s, moved, ncoll = schedule_cost(plan, cost)
    if ncoll != plan.num_collectives:
        # Plan.build merged a chain of permutes into one AllPermute: the search counted each
        # link, so its figure is not this plan's; cost the plan as built (the check below then
        # withholds "optimal", since the search ranked paths by the unmerged costs)
        t_s, moved, ncoll = schedule_cost(plan, cost)
    optimal = st.optimal and st.proven == move_set
    if optimal and st.found is not None and abs(t_s - st.found.cost[0]) > 1e-9 * max(t_s, 1e-9):
        optimal = False  # the search's step costs and the schedule's disagree: claim nothing
        notes.append(f"auto: the schedule costs {_fmt_t(t_s)} where the search counted "
                     f"{_fmt_t(st.found.cost[0])}; not claimed optimal")
    if optimal and t_s > lb_s * (1 + 1e-9) and any(x is not None and x.closure_capped for x in (sp1, sp2)):
        # a permute reaches its whole closure in one move (synth.planners.moves.
        # Space.permute_classes) unless the closure was capped: then say so
        notes.append("auto: 'optimal' is over the capped move set: a permute's closure was capped on "
                     f"some state (at {MAX_PERMUTE_CLASSES} classes, or {MAX_FREE_RELABELS} permutes that "
                     "move nothing: synth.planners.moves); permutes past the cap were not searched")
    if over_moves:
        notes.append(f"auto: the work budget of {limit} moves ran out before the search found any plan; "
                     f"{over_moves} more moves (at most {over_allowance(limit)}) looked for one a little over "
                     "the memory bound (auto._over_fallback)")
    if cut == "work" and st.found is not None:
        notes.append(f"auto: the work budget of {limit} moves ran out"
                     + (" while breaking ties (the plan is optimal; ties by peak memory were not all "
                        "compared)" if optimal else "; this is the best plan found, not proven optimal "
                        "(raise --budget-moves to search further)"))
    if cut == "time" and st.found is not None:
        notes.append(f"auto: the CPU-time safety cap of {cap_s:g} s fired after {budget.used} moves; "
                     "this result depends on the machine's speed and load (raise --budget-ms, or "
                     "lower --budget-moves)")
    bound_b = plan.bound_bytes
    max_shard = plan.max_shard_bytes
    min_b = None if st.min_max is None else int(st.min_max) * itemsize
    if max_shard > bound_b:
        if min_b is not None and min_b == max_shard:
            notes.append(f"auto: no plan over the move set ({move_set}) stays within the memory bound of {bound_b} B "
                         f"per device (proven: the search is exhausted); this plan's largest shard, "
                         f"{max_shard} B, is the least such plans achieve")
        else:
            notes.append(f"auto: the largest shard, {max_shard} B, exceeds the memory bound of {bound_b} B "
                         "per device, and the budget ran out before proving whether a bounded plan "
                         "exists; raise --budget-moves")
    if optimal:
        status = "optimal"
    elif cut == "time":
        status = "best found before the CPU-time cap (load-dependent)"
    elif st.found is None:
        status = "not searched to the end (normal's plan)"
    else:
        status = "best found within the work budget"
    lb_s = min(lb_s, t_s)
    search = {
        "status": status, "optimal": bool(optimal), "cost_model": cost_name(cost),
        "time_s": float(t_s), "bytes_moved": int(moved), "collectives": int(ncoll),
        "optimum_s": None if st.optimum_s is None or not optimal else float(st.optimum_s),
        "lower_bound_s": float(lb_s), "gap_s": float(max(t_s - lb_s, 0.0)),
        "bound_bytes": int(bound_b), "max_shard_bytes": int(max_shard),
        "bound_met": bool(max_shard <= bound_b), "min_max_shard_bytes": min_b,
        "ties": st.ties, "tie_tolerance": TIE_TOLERANCE, "move_set": move_set,
        "optimal_over": st.proven if st.optimal or st.proven == "whole-axes" else None,
        "sub_axes": bool(plan.work_mesh.base),
        "budget_moves": int(limit), "moves": int(min(budget.used, limit)),
        "fallback_moves": int(over_moves),
        "states": int(budget.expanded), "budget_s": float(cap_s),
        "elapsed_s": float(time.perf_counter() - t0), "cap_fired": cut == "time",
    }
    return Plan(plan.mesh, plan.src, plan.dst, plan.steps, plan.types, itemsize, "auto",
                tuple(plan.notes) + tuple(notes), search=search)


def _path_plan(sp: Space, steps, src, dst, itemsize) -> Plan:
    """The plan of a path of ``sp``'s steps (on its work mesh) from ``src`` to ``dst``."""
    return _build(sp, sp.mesh, refine_type(src, sp.mesh), refine_type(dst, sp.mesh), src, dst, steps, itemsize)


def _found_plan(found, src, dst, itemsize) -> Plan:
    """The plan of a path the search found (on its space's work mesh)."""
    return _path_plan(found.sp, found.steps, src, dst, itemsize)


def _least_over(st: _State, sub, mesh, src, dst, itemsize, cost, bound):
    """The answer of a search cut short, as ``(Found or None, Plan)``: ``st.found`` (or,
    where the search found nothing, normal's plan and None) unless it is over the memory
    bound (``bound`` elements) and another plan found on the way is less over it; then, of
    the least over it, the fastest (the bound first, as everywhere in ``auto``), as a built
    plan (``Found.sp`` None, costed by ``schedule_cost``). The others: level 2's best
    (``sub.found``: a plan within the bound, or within a smaller cap than level 1's, which
    the cut would otherwise drop), the least-largest-shard paths (``st.least``) and the
    plan a little over the bound (``st.over``, :func:`_over_fallback`). Within
    the bound nothing changes: every plan there is 0 over it, and ``st.found`` is the
    search's choice.

    Example (bench case 87, ``x=6,y=1,z=3,w=4,v=4,u=1``, ``[12{x,y}]{U:z} ->
    [12{w}]{U:v}``): level 1 proves no plan within the bound over whole axes; level 2 finds
    one within it, then the budget runs out proving it optimal; ``auto`` used to answer
    with level 1's plan, 4x over the bound."""
    here = None
    if st.found is not None and st.found.sp is None:
        here = (st.found, st.found.plan)
    elif st.found is not None:
        try:
            here = (st.found, _found_plan(st.found, src, dst, itemsize))
        except RedistributionError:
            if st.found.cost is not None:
                raise  # a path the search costed: its steps obey their type rules
            # a least-largest-shard path whose permutes do not merge into one: not an answer
    if here is None:
        here = (None, plan_normal(mesh, src, dst, itemsize))
    limit_b = bound * itemsize
    if here[1].max_shard_bytes <= limit_b:
        return here
    best, best_key = here, (here[1].max_shard_bytes - limit_b, schedule_cost(here[1], cost)[0])
    others = [sub.found] if sub is not None and sub.found is not None else []
    others += st.least + ([st.over] if st.over is not None else [])
    for f in others:
        if f.sp is None:
            p = f.plan
        else:
            try:
                p = _found_plan(f, src, dst, itemsize)
            except RedistributionError:  # cannot happen (every move obeys its type rule)
                continue
        key = (max(p.max_shard_bytes - limit_b, 0), schedule_cost(p, cost)[0])
        if key < best_key:
            best, best_key = (f, p), key
    if best is here:
        return here
    inc = _incumbent(best[1], cost, itemsize)
    return inc, inc.plan


def _build(sp: Space, wm: Mesh, ws: ArrayType, wd: ArrayType, src, dst, steps, itemsize) -> Plan:
    """The plan: relabelling steps for size-1 axes at either end, the searched steps on the
    work mesh, checked by ``Plan.build``; written back in the user's canonical form."""
    unit = {a for a, s in wm.axes if s == 1}
    pre, post = [], []
    stripped = ArrayType._derived(  # ws less its size-1 axes: valid as ws is
        tuple(Dim(d.size, tuple(a for a in d.axes if a not in unit)) for d in ws.dims), ws.unreduced)
    if stripped != ws:
        pre.append(AllPermute(stripped))
    red = tuple(a for a in ws.unreduced if a in unit and a not in wd.unreduced)
    if red:
        pre.append(AllReduce(red))
    core = [sp.collective(s) for s in steps]
    new = tuple(a for a in wd.unreduced if a in unit and a not in ws.unreduced)
    if new:
        post.append(Unreduce(new))
    end = sp.to_type(sp.T).with_unreduced(sp.to_type(sp.T).unreduced + new)
    if end != wd:
        post.append(AllPermute(wd))
    full = _merge_permutes(pre + core + post)
    if not wm.base:
        return Plan.build(wm, src, dst, full, itemsize, "auto")
    # steps in the user's canonical form: adjacent factors of one axis merge (a plan that
    # moves whole axes only runs on the user's mesh)
    base = wm.base_mesh
    return Plan.build(base, src, dst, [_canon_step(c, base) for c in full], itemsize, "auto")


def _canon_names(names, base):
    return ArrayType._derived((Dim(1, tuple(names)),)).canonical(base).dims[0].axes  # a step's axes, once each


def _canon_step(c, base):
    from dataclasses import replace

    if isinstance(c, AllPermute):
        return AllPermute(ArrayType.of(c.target).canonical(base))
    if hasattr(c, "moves"):
        w = len(c.moves[0]) - 1
        moves = []
        for m in c.moves:
            names = _canon_names((m[w],) if isinstance(m[w], str) else m[w], base)
            moves.append(m[:w] + (names[0] if len(names) == 1 else names,))
        return replace(c, moves=tuple(moves))
    axis = (c.axis,) if isinstance(c.axis, str) else tuple(c.axis)
    names = _canon_names(axis, base)
    return replace(c, axis=names[0] if len(names) == 1 else names)


def check_auto_args(budget_s=None, budget_moves=None):
    """Validate the budgets up front (the CLIs and ``synthesize`` call this)."""
    if budget_s is not None:
        check_budget(budget_s)
    if budget_moves is not None:
        check_budget_moves(budget_moves)

