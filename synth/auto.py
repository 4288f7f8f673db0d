"""The ``auto`` planner: the cheapest plan within the memory bound, or, where no plan
stays within it, a plan with the smallest achievable largest shard; fast, and honest
about what it proved.

What it returns
---------------
Let ``bound = max(src shard, dst shard)``. Every plan holds ``src`` and ``dst``, so no
plan's largest shard is below ``bound``; call ``cap`` the smallest largest shard any
plan can achieve (``cap == bound`` exactly when a bounded plan exists). ``auto``
returns, among the plans whose every type stays within ``cap``, the one of least cost,
ties going to fewer bytes moved, then to fewer collectives.

The search space
----------------
Types are searched without their size-1 mesh axes (they hold no data; a permute that
moves nothing relabels at either end, as in ``normal``). From a type, the moves are
generated from a table keyed by collective kind (:data:`MOVES`), so a new kind adds one
generator:

* ``dyn_slice``: any unused axis becomes the minor-most axis of any dim it divides;
* ``all_gather`` / ``all_to_all``: any subset of a dim's axes (one fused group of at most
  ``MAX_FUSED_GROUP`` devices) is gathered, or moved to the end of another dim in any
  order; when the subset is not already the dim's minor-most suffix in that order, an
  AllPermute that reorders the dim comes first (one edge, both costs);
* ``all_permute``: a permute reaches *any* type with the same local shape. The first
  pass (``directed``) permutes only to the target and to the types from which the
  target is reached by gathers and slices (a prefix of each target dim, then any
  other axes); the second pass (``full``) permutes to every type of the same local
  shape, enumerated per local shape.

Cost
----
A cost model gives each device-level op (:class:`synth.schedule.ScheduleOp`) a time.
``models.plan_cost.machine_cost(machine, chips)`` wraps the analytic model of
``models/`` (a profile, its calibration and the placement); without a machine the
:class:`DefaultCost` below is used: per communicating op ``5 us + received bytes /
50 GB/s`` (the received bytes of the device that receives most), local ops free.
A plan's cost is the tuple ``(time_s, bytes moved, collectives)``, compared in that
order; consecutive DynSlices are one local op, costed once, as ``Plan.to_schedule``
runs them.

Search and proof
----------------
A* over types with an admissible, consistent bound: a type that is not a prefix of the
target on every dim still needs at least one communicating op, which costs at least the
model's ``comm_floor_s``. Phases, all under one time budget (default 100 ms):

1. ``directed`` search within ``bound``;
2. if it found nothing: ``full`` search within ``bound``; if that is exhausted, no
   bounded plan exists (proven). Then a bottleneck search finds ``cap`` (the least
   largest shard of any plan) and steps 1-2 run again within ``cap``;
3. if a plan was found by the directed pass and time is left, the ``full`` pass runs
   with that plan's cost as an upper bound: exhausted means proven optimal.

The plan records the outcome in ``Plan.search`` (see :func:`plan_auto`): ``optimal``
(the full search was exhausted: no plan within ``cap`` costs less under the model) or
the best found within the budget, the proven lower bound on the cost and the gap to it,
and whether the memory bound holds or the proven least largest shard. If the budget
runs out before any plan is found, the ``normal`` or ``easy`` plan with the smaller
largest shard is returned and the note says so.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from synth.collectives import AllGather, AllPermute, AllToAll, DynSlice, permute_sources
from synth.errors import RedistributionError
from synth.mesh import Mesh
from synth.plan import Plan
from synth.schedule import LOCAL_KINDS, ScheduleOp
from synth.types import ArrayType, Dim

#: Default time budget for one synthesis, in seconds.
DEFAULT_BUDGET_S = 0.1

#: Largest subset of a dim's axes one all-to-all may move in any order (orders of
#: larger subsets are limited to the current one).
MAX_ORDERED_SUBSET = 3


# -- cost models ----------------------------------------------------------------------
class DefaultCost:
    """The documented default when no machine is chosen: an alpha-beta model.

    A communicating op costs ``alpha_s + recv_bytes / bandwidth_Bps`` where
    ``recv_bytes`` is what the most-receiving device receives; local ops (slices,
    copies) are free. ``alpha_s = 5 us`` and ``bandwidth_Bps = 50 GB/s`` (50e9 B/s) are
    generic round figures of one accelerator link, not a machine's: pick a machine
    (``--hardware``) for real costs."""

    name = "default alpha-beta (5 us + bytes / 50 GB/s per communicating op)"
    needs_devices = False
    local_free = True

    def __init__(self, alpha_s: float = 5e-6, bandwidth_Bps: float = 50e9):
        self.alpha_s = float(alpha_s)
        self.bandwidth_Bps = float(bandwidth_Bps)

    def op_time_s(self, op: ScheduleOp) -> float:
        if op.kind in LOCAL_KINDS:
            return 0.0
        return self.alpha_s + op.recv_bytes / self.bandwidth_Bps

    def comm_floor_s(self) -> float:
        """No communicating op costs less (admissible bound for the search)."""
        return self.alpha_s

    def bytes_lower_bound_s(self, nbytes) -> float:
        """No plan in which some device must receive ``nbytes`` costs less."""
        return 0.0 if nbytes <= 0 else self.alpha_s + nbytes / self.bandwidth_Bps

    def plan_lower_bound_s(self, need_bytes) -> float:
        """No plan in which some device must receive ``max(need_bytes)`` costs less:
        at least one op, and the bytes must arrive."""
        m = int(np.max(need_bytes)) if len(need_bytes) else 0
        return 0.0 if m <= 0 else self.alpha_s + m / self.bandwidth_Bps


# -- results --------------------------------------------------------------------------
@dataclass
class _Found:
    moves: tuple          # move descriptors along the path
    cost: tuple           # (time_s, bytes, collectives)


class _Timeout(Exception):
    pass


def _prod(sizes, axes):
    p = 1
    for a in axes:
        p *= sizes[a]
    return p


class _Searcher:
    """One synthesis problem on stripped types (tuples of axis tuples)."""

    def __init__(self, mesh: Mesh, shape, S0, T, itemsize, cost, deadline, max_fused, pending=()):
        self.mesh = mesh
        self.shape = tuple(shape)
        self.rank = len(shape)
        self.total = math.prod(shape)
        self.pending = tuple(pending)  # sums pending on these axes all along: not usable
        self.sz = {a: s for a, s in mesh.axes if s > 1 and a not in self.pending}
        self.names = tuple(self.sz)
        self.S0, self.T = S0, T
        self.itemsize = itemsize
        self.cost = cost
        self.deadline = deadline
        self.max_fused = max_fused
        self.default = isinstance(cost, DefaultCost)
        self.local_free = bool(getattr(cost, "local_free", False))
        self.floor = float(cost.comm_floor_s())
        self._op_cache: dict = {}
        self._class_cache: dict = {}
        self._goal_adj: dict = {}
        self._groups: dict = {}
        self.expanded = 0
        self._tick = 0
        self._shard: dict = {}
        self._ov: dict = {}
        self._assign_cache: dict = {}
        self.bytes_lb = getattr(cost, "bytes_lower_bound_s", lambda m: 0.0)
        self._h: dict = {}

    # -- type helpers ---------------------------------------------------------------
    def splits(self, S):
        sz = self.sz
        return tuple(_prod(sz, axes) for axes in S)

    def shard(self, S):
        v = self._shard.get(S)
        if v is None:
            p = 1
            for axes in S:
                p *= _prod(self.sz, axes)
            v = self._shard[S] = self.total // p
        return v

    def _overlap(self, i, axes):
        """The largest overlap, over devices, along dim i of a device's block under
        ``axes`` with its target block (cached per dim and axes). Only the coordinates on
        the axes of either side matter, so it is computed on their sub-grid."""
        key = (i, axes)
        v = self._ov.get(key)
        if v is None:
            tax = self.T[i]
            union = tuple(dict.fromkeys(axes + tax))
            sizes = [self.sz[a] for a in union]
            if math.prod(sizes) > 512:  # a large sub-grid: the trivial bound, min of the blocks
                v = self._ov[key] = min(self.shape[i] // _prod(self.sz, axes),
                                        self.shape[i] // _prod(self.sz, tax))
                return v
            grid = np.indices(sizes).reshape(len(union), -1) if union else np.zeros((0, 1), np.int64)
            pos = {a: k for k, a in enumerate(union)}

            def starts(ax):
                idx = np.zeros(grid.shape[1], dtype=np.int64)
                for a in ax:
                    idx = idx * self.sz[a] + grid[pos[a]]
                return idx * (self.shape[i] // _prod(self.sz, ax))

            s0, t0 = starts(axes), starts(tax)
            s1 = s0 + self.shape[i] // _prod(self.sz, axes)
            t1 = t0 + self.shape[i] // _prod(self.sz, tax)
            o = np.minimum(s1, t1) - np.maximum(s0, t0)
            v = self._ov[key] = max(int(o.max()), 0)
        return v

    def h_cheap(self, S):
        """A cheaper admissible bound: the target block less the product of the largest
        per-dim overlaps is a lower bound on what the neediest device lacks."""
        v = self._h.get(S)
        if v is None:
            if self.prefix_ok(S):
                v = _ZERO
            else:
                p = 1
                for i in range(self.rank):
                    p *= self._overlap(i, S[i])
                m = (self.shard(self.T) - p) * self.itemsize
                v = (max(self.floor, self.bytes_lb(m)), m, 1)
            self._h[S] = v
        return v

    def to_type(self, S) -> ArrayType:
        return ArrayType(tuple(Dim(n, axes) for n, axes in zip(self.shape, S)), self.pending)

    def prefix_ok(self, S):
        T = self.T
        return all(T[i][: len(a)] == a for i, a in enumerate(S))

    def check_time(self):
        self._tick += 1
        if self._tick & 31 == 0 and time.perf_counter() > self.deadline:
            raise _Timeout

    # -- costs ------------------------------------------------------------------------
    def _groups_of(self, X):
        g = self._groups.get(X)
        if g is None:
            g = tuple(tuple(r) for r in self.mesh.groups(X))
            self._groups[X] = g
        return g

    def coll_cost(self, kind, X, in_elems, out_elems):
        key = (kind, X, in_elems)
        c = self._op_cache.get(key)
        if c is not None:
            return c
        n = _prod(self.sz, X)
        in_b = in_elems * self.itemsize
        out_b = out_elems * self.itemsize
        if kind == "all_gather":
            send, recv = in_b, (n - 1) * in_b
        else:  # all_to_all
            send = recv = in_b * (n - 1) // n
        if self.default:
            t = self.cost.alpha_s + recv / self.cost.bandwidth_Bps
        else:
            op = ScheduleOp(kind, in_b, out_b, send_bytes=send, recv_bytes=recv,
                            groups=self._groups_of(X))
            t = _op_time(self.cost, op)
        c = (t, recv, 1)
        self._op_cache[key] = c
        return c

    def perm_cost(self, S, S2):
        key = ("p", S, S2)
        c = self._op_cache.get(key)
        if c is not None:
            return c
        in_b = self.shard(S) * self.itemsize
        if self.default:
            t = self.cost.alpha_s + in_b / self.cost.bandwidth_Bps
        else:
            src = permute_sources(self.to_type(S), self.to_type(S2), self.mesh)
            pairs = tuple((int(s), d) for d, s in enumerate(src) if int(s) != d)
            op = ScheduleOp("permute", in_b, in_b, send_bytes=in_b, recv_bytes=in_b, pairs=pairs)
            t = _op_time(self.cost, op)
        c = (t, in_b, 1)
        self._op_cache[key] = c
        return c

    def local_cost(self, in_elems, out_elems):
        if self.local_free:
            return (0.0, 0, 0)
        key = ("l", in_elems, out_elems)
        c = self._op_cache.get(key)
        if c is None:
            n = self.mesh.size
            op = ScheduleOp("dyn_slice", in_elems * self.itemsize, out_elems * self.itemsize,
                            groups=tuple((d,) for d in range(n)))
            c = (_op_time(self.cost, op), 0, 0)
            self._op_cache[key] = c
        return c

    # -- permute targets ----------------------------------------------------------------
    def class_members(self, key):
        """Every valid stripped type whose per-dim splits are ``key`` (any axes, any order)."""
        got = self._class_cache.get(key)
        if got is not None:
            return got
        sz, names, shape = self.sz, self.names, self.shape
        out = []

        def rec(i, free, acc):
            if i == len(key):
                out.append(tuple(acc))
                return
            want = key[i]
            for combo in _subsets_with_product(free, sz, want, self.check_time):
                rest = tuple(a for a in free if a not in combo)
                for order in itertools.permutations(combo):
                    acc.append(order)
                    rec(i + 1, rest, acc)
                    acc.pop()
                    self.check_time()

        if all(n % k == 0 for n, k in zip(shape, key)):
            rec(0, names, [])
        self._class_cache[key] = out
        return out

    def goal_adjacent(self, key):
        """Types of splits ``key`` from which the target is reached by gathers then
        slices: a prefix of every target dim, then other axes (in mesh order)."""
        got = self._goal_adj.get(key)
        if got is not None:
            return got
        sz, T = self.sz, self.T
        out = []
        if all(n % k == 0 for n, k in zip(self.shape, key)):
            for cut in itertools.product(*(range(len(a) + 1) for a in T)):
                pre = tuple(a[:c] for a, c in zip(T, cut))
                extra = []
                ok = True
                for p, k in zip(pre, key):
                    q = _prod(sz, p)
                    if k % q:
                        ok = False
                        break
                    extra.append(k // q)
                if not ok:
                    continue
                used = {a for p in pre for a in p}
                rest = tuple(a for a in self.names if a not in used)
                akey = (rest, tuple(extra))
                assigns = self._assign_cache.get(akey)
                if assigns is None:
                    assigns = self._assign_cache[akey] = _assign_products(rest, sz, extra, self.check_time)
                for assign in assigns:
                    out.append(tuple(p + e for p, e in zip(pre, assign)))
                self.check_time()
        out = list(dict.fromkeys(out))
        self._goal_adj[key] = out
        return out

    # -- moves ------------------------------------------------------------------------
    def moves(self, S, cap, full):
        """Yield ``(descriptors, S2, cost, kind_of_last)`` for every move from S whose
        types stay within ``cap`` elements. Generated from :data:`MOVES`."""
        for gen in MOVES.values():
            yield from gen(self, S, cap, full)


def _subsets_with_product(axes, sz, want, tick=None):
    """Subsets (as tuples in the given order) of ``axes`` whose sizes multiply to ``want``."""
    out = []

    def rec(k, p, acc):
        if tick is not None:
            tick()
        if p == want:
            out.append(tuple(acc))
            return
        for j in range(k, len(axes)):
            s = sz[axes[j]]
            if want % (p * s) == 0:
                acc.append(axes[j])
                rec(j + 1, p * s, acc)
                acc.pop()

    rec(0, 1, [])
    return out


def _assign_products(rest, sz, extra, tick=None):
    """Assignments of ``rest`` axes to dims (or to none) so that dim i receives axes of
    product ``extra[i]``; each dim's axes in the order of ``rest``."""
    out = []
    rank = len(extra)
    # suffix[k]: the product of the sizes of rest[k:], the most the remaining axes can add
    suffix = [1] * (len(rest) + 1)
    for k in range(len(rest) - 1, -1, -1):
        suffix[k] = suffix[k + 1] * sz[rest[k]]

    def rec(k, rem, acc):
        if tick is not None:
            tick()
        if math.prod(rem) > suffix[k]:
            return
        if k == len(rest):
            if all(r == 1 for r in rem):
                out.append(tuple(tuple(a) for a in acc))
            return
        a = rest[k]
        s = sz[a]
        rec(k + 1, rem, acc)  # unused
        for i in range(rank):
            if rem[i] % s == 0:
                acc[i].append(a)
                rem2 = list(rem)
                rem2[i] //= s
                rec(k + 1, rem2, acc)
                acc[i].pop()

    rec(0, list(extra), [[] for _ in range(rank)])
    return out


# -- move generators, one per collective kind ---------------------------------------------
def _slice_moves(sr: _Searcher, S, cap, full):
    used = {a for axes in S for a in axes}
    spl = sr.splits(S)
    for a in sr.names:
        if a in used:
            continue
        s = sr.sz[a]
        for i, axes in enumerate(S):
            if (sr.shape[i] // spl[i]) % s == 0:
                S2 = S[:i] + (axes + (a,),) + S[i + 1:]
                yield (("dyn_slice", i, a),), S2, None, "dyn_slice"


def _subset_orders(axes, max_fused, sz):
    """(X, rest) for every nonempty ordered subset X of ``axes`` that one fused group
    may take: all orders when |X| <= MAX_ORDERED_SUBSET, else the current order."""
    k = len(axes)
    for r in range(1, k + 1):
        for idx in itertools.combinations(range(k), r):
            X = tuple(axes[j] for j in idx)
            if r > 1 and _prod(sz, X) > max_fused:
                continue
            rest = tuple(axes[j] for j in range(k) if j not in idx)
            orders = itertools.permutations(X) if r <= MAX_ORDERED_SUBSET else (X,)
            for Xo in orders:
                yield Xo, rest


def _gather_moves(sr: _Searcher, S, cap, full):
    sh = sr.shard(S)
    for i, axes in enumerate(S):
        seen = set()
        for X, rest in _subset_orders(axes, sr.max_fused, sr.sz):
            n = _prod(sr.sz, X)
            if sh * n > cap:
                continue
            key = (frozenset(X), rest)
            reorder = rest + X != axes
            # a gather of X removes the same axes whatever their order: one order is enough,
            # the current one when X is already the suffix
            if key in seen:
                continue
            seen.add(key)
            S2 = S[:i] + (rest,) + S[i + 1:]
            c = sr.coll_cost("all_gather", X, sh, sh * n)
            if reorder:
                Sr = S[:i] + (rest + X,) + S[i + 1:]
                p = sr.perm_cost(S, Sr)
                yield (("all_permute", Sr), ("all_gather", i, X)), S2, _add(p, c), "all_gather"
            else:
                yield (("all_gather", i, X),), S2, c, "all_gather"


def _a2a_moves(sr: _Searcher, S, cap, full):
    sh = sr.shard(S)
    spl = sr.splits(S)
    rank = sr.rank
    for i, axes in enumerate(S):
        for X, rest in _subset_orders(axes, sr.max_fused, sr.sz):
            n = _prod(sr.sz, X)
            reorder = rest + X != axes
            Sr = S[:i] + (rest + X,) + S[i + 1:] if reorder else S
            c = sr.coll_cost("all_to_all", X, sh, sh)
            if reorder:
                c = _add(sr.perm_cost(S, Sr), c)
            for j in range(rank):
                if j == i or (sr.shape[j] // spl[j]) % n:
                    continue
                S2 = list(S)
                S2[i] = rest
                S2[j] = S[j] + X
                S2 = tuple(S2)
                if reorder:
                    yield (("all_permute", Sr), ("all_to_all", i, j, X)), S2, c, "all_to_all"
                else:
                    yield (("all_to_all", i, j, X),), S2, c, "all_to_all"


def _permute_moves(sr: _Searcher, S, cap, full):
    key = sr.splits(S)
    targets = sr.class_members(key) if full else sr.goal_adjacent(key)
    if not full and key == sr.splits(sr.T) and sr.T not in targets:
        targets = [sr.T] + list(targets)
    for S2 in targets:
        if S2 != S:
            yield (("all_permute", S2),), S2, sr.perm_cost(S, S2), "all_permute"


#: Move generators keyed by collective kind: the search's view of the collectives table.
MOVES = {
    "dyn_slice": _slice_moves,
    "all_gather": _gather_moves,
    "all_to_all": _a2a_moves,
    "all_permute": _permute_moves,
}

_ZERO = (0.0, 0, 0)


def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _astar(sr: _Searcher, cap: int, full: bool, upper=None):
    """Cheapest path from S0 to T with every type within ``cap`` elements.

    Returns ``(found, lower_bound, exhausted)``: ``found`` a :class:`_Found` or None;
    ``lower_bound`` the least ``f`` left open (a proven lower bound on the cost of any
    plan within ``cap`` that is not cheaper than ``upper`` when nothing was found).
    Raises :class:`_Timeout` with the state attached when the deadline passes."""
    S0, T = sr.S0, sr.T
    run_matters = not sr.local_free

    h = sr.h_cheap

    counter = itertools.count()
    start = (S0, 0)
    sr.last_full = full
    best_g = {start: _ZERO}
    parent = {start: None}
    heap = [(h(S0), next(counter), _ZERO, start)]
    sr.last_open_f = None
    try:
        while heap:
            f, _, g, node = heapq.heappop(heap)
            if upper is not None and f >= upper:
                heap.append((f, 0, g, node))
                break
            S, run = node
            if S == T and run == 0:
                return _Found(_path(parent, node), g), f, True
            if g > best_g[node]:
                continue  # a stale entry: the node was reached more cheaply since
            sr.expanded += 1
            sr.check_time()
            sh = sr.shard(S)
            for desc, S2, c, kind in sr.moves(S, cap, full):
                if sr.shard(S2) > cap:
                    continue
                if kind == "dyn_slice":
                    if run_matters:
                        run2 = run or sh
                    else:
                        run2 = 0
                    if S2 == T and run2:
                        g2 = _add(g, sr.local_cost(run2, sr.shard(T)))
                        node2 = (T, 0)
                    else:
                        g2 = g
                        node2 = (S2, run2)
                else:
                    g2 = _add(g, c)
                    if run:
                        g2 = _add(g2, sr.local_cost(run, sh))
                    node2 = (S2, 0)
                old = best_g.get(node2)
                if old is not None and old <= g2:
                    continue
                f2 = _add(g2, h(node2[0]))
                if upper is not None and f2 >= upper:
                    continue
                best_g[node2] = g2
                parent[node2] = (node, desc)
                heapq.heappush(heap, (f2, next(counter), g2, node2))
    except _Timeout:
        sr.last_open_f = min((e[0] for e in heap), default=None)
        raise
    lb = min((e[0] for e in heap), default=None)
    return None, lb, True


def _path(parent, node):
    out = []
    while parent[node] is not None:
        node, desc = parent[node]
        out.append(desc)
    out.reverse()
    return tuple(d for desc in out for d in desc)


def _bottleneck(sr: _Searcher):
    """The least largest shard (elements) over all plans, by a minimax Dijkstra over the
    full move set (no cap)."""
    S0, T = sr.S0, sr.T
    start = sr.shard(S0)
    best = {S0: start}
    heap = [(start, next(_cnt), S0)]
    done = set()
    big = sr.total
    while heap:
        b, _, S = heapq.heappop(heap)
        if S in done:
            continue
        if S == T:
            return b
        done.add(S)
        sr.expanded += 1
        sr.check_time()
        for _desc, S2, _c, _k in _moves_no_cost(sr, S):
            b2 = max(b, sr.shard(S2))
            if S2 in done or best.get(S2, big + 1) <= b2:
                continue
            best[S2] = b2
            heapq.heappush(heap, (b2, next(_cnt), S2))
    return None


_cnt = itertools.count()


def _moves_no_cost(sr, S):
    """The full move set's successors of S without costs (for the bottleneck search)."""
    used = {a for axes in S for a in axes}
    spl = sr.splits(S)
    for a in sr.names:
        if a not in used:
            for i, axes in enumerate(S):
                if (sr.shape[i] // spl[i]) % sr.sz[a] == 0:
                    yield None, S[:i] + (axes + (a,),) + S[i + 1:], None, "dyn_slice"
    for i, axes in enumerate(S):
        for X, rest in _subset_orders(axes, sr.max_fused, sr.sz):
            n = _prod(sr.sz, X)
            yield None, S[:i] + (rest,) + S[i + 1:], None, "all_gather"
            for j in range(sr.rank):
                if j != i and (sr.shape[j] // spl[j]) % n == 0:
                    S2 = list(S)
                    S2[i] = rest
                    S2[j] = S[j] + X
                    yield None, tuple(S2), None, "all_to_all"
    for S2 in sr.class_members(spl):
        if S2 != S:
            yield None, S2, None, "all_permute"


# -- the planner --------------------------------------------------------------------------
def _op_time(cost, op) -> float:
    """``cost.op_time_s(op)``, or ``inf`` where the cost model refuses the op (too large to
    cost, e.g. a flat all-to-all over thousands of torus chips): the search then skips that
    move and tries the others instead of failing as a whole."""
    try:
        return float(cost.op_time_s(op))
    except RedistributionError:
        return math.inf


def _strip(t: ArrayType, mesh: Mesh):
    return tuple(tuple(a for a in d.axes if mesh.shape[a] > 1) for d in t.dims)


def _need_bytes(mesh, src, dst, itemsize):
    """Bytes each device lacks of its target block (an admissible bound: what it lacks must
    arrive). A target with pending axes the source lacks can be reached locally in part
    (a device may keep its data as its partial), so the bound is 0 there."""
    import numpy as np

    if set(getattr(dst, "unreduced", ())) - set(getattr(src, "unreduced", ())):
        return np.zeros(mesh.size, dtype=np.int64)
    s0, s1 = src.regions(mesh)
    d0, d1 = dst.regions(mesh)
    import numpy as np

    overlap = np.clip(np.minimum(s1, d1) - np.maximum(s0, d0), 0, None).prod(axis=1)
    return (dst.shard_elems(mesh) - overlap) * itemsize


def _steps_from(sr: _Searcher, moves):
    steps = []
    for m in moves:
        if m[0] == "dyn_slice":
            steps.append(DynSlice(m[1], m[2]))
        elif m[0] == "all_gather":
            steps.append(AllGather(m[1], m[2]))
        elif m[0] == "all_to_all":
            steps.append(AllToAll(m[1], m[2], m[3]))
        else:
            steps.append(AllPermute(sr.to_type(m[1])))
    return steps


_DEFAULT_KINDS = ("dyn_slice", "all_gather", "all_to_all", "all_permute", "all_reduce",
                  "reduce_scatter", "unreduce")


def _default_plan_cost(plan: Plan, cost: DefaultCost) -> tuple[float, int, int]:
    """:func:`schedule_cost` under :class:`DefaultCost` without building the device-level
    schedule: per step, its kind, group size and shard (a permute whose types agree once
    size-1 axes are dropped moves nothing; any other moves a whole shard)."""
    mesh = plan.mesh
    t = 0.0
    moved = ncoll = 0
    for c, a, b in zip(plan.steps, plan.all_types[:-1], plan.all_types[1:]):
        in_b = a.shard_elems(mesh) * plan.itemsize
        if c.kind in ("dyn_slice", "unreduce"):
            continue
        if c.kind in ("all_reduce", "reduce_scatter"):
            n = math.prod(mesh.shape[x] for x in ((c.axis,) if isinstance(c.axis, str) else c.axis))
            if n == 1:
                continue
            out_b = b.shard_elems(mesh) * plan.itemsize
            recv = 2 * (n - 1) * in_b // n if c.kind == "all_reduce" else (n - 1) * out_b
            t += cost.alpha_s + recv / cost.bandwidth_Bps
            moved += recv
            ncoll += 1
            continue
        if c.kind == "all_permute":
            if _strip(a, mesh) == _strip(b, mesh):
                continue
            recv = in_b
        else:
            n = math.prod(mesh.shape[x] for x in ((c.axis,) if isinstance(c.axis, str) else c.axis))
            if n == 1:
                continue
            recv = (n - 1) * in_b if c.kind == "all_gather" else in_b * (n - 1) // n
        t += cost.alpha_s + recv / cost.bandwidth_Bps
        moved += recv
        ncoll += 1
    return t, moved, ncoll


def schedule_cost(plan: Plan, cost) -> tuple[float, int, int]:
    """``(time_s, bytes moved, collectives)`` of a plan under a cost model: the model's
    time of each op of ``plan.to_schedule()``, summed; the received bytes of the
    most-receiving device per step, summed; the communicating steps."""
    if isinstance(cost, DefaultCost) and plan.work_mesh is plan.mesh and all(
            c.kind in _DEFAULT_KINDS for c in plan.steps):
        return _default_plan_cost(plan, cost)
    sched = plan.to_schedule()
    t = sum(_op_time(cost, op) for op in sched.ops)
    return t, int(sum(plan.recv_bytes_per_step)), int(plan.num_collectives)


def plan_auto(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4, *,
              cost=None, budget_s: float = DEFAULT_BUDGET_S, sub_axes: bool = True) -> Plan:
    """The ``auto`` plan (see :func:`_plan_auto_once`). Where no plan over whole mesh axes
    stays within the memory bound and time is left, the search runs again with every
    mesh axis split into its prime factors (sub-axes, ascending primes): moving a factor
    of an axis can keep shards smaller. The plan with the smaller largest shard wins."""
    t0 = time.perf_counter()
    budget_s = check_budget(budget_s)
    p = _plan_auto_once(mesh, src, dst, itemsize, cost=cost, budget_s=budget_s)
    if not sub_axes or p.bound_holds or mesh.base or p.search["status"] == "not searched":
        return p
    left = t0 + budget_s - time.perf_counter()
    from synth.types import cuts_of, refine_type

    cuts = cuts_of(mesh, [src, dst])
    for a, n in mesh.axes:
        pre = 1
        for f in _primes(n)[:-1]:
            pre *= f
            cuts.setdefault(a, set()).add(pre)
    work = mesh.refine(cuts) if cuts else mesh
    if work is mesh or left < 0.1 * budget_s:
        return p
    try:
        q = _plan_auto_once(work, refine_type(src, work), refine_type(dst, work), itemsize,
                            cost=cost, budget_s=left, usr=(src, dst), fallback=False)
    except RedistributionError:
        return p
    if q is None:  # the budget ran out before the refined search found a plan
        return p
    if q.max_shard_bytes < p.max_shard_bytes:
        note = (f"auto: splitting mesh axes into prime factors (sub-axes) lowers the largest shard "
                f"from {p.max_shard_bytes} B (the least over whole axes) to {q.max_shard_bytes} B")
        search = dict(q.search, elapsed_s=float(time.perf_counter() - t0), budget_s=float(budget_s))
        return Plan(q.mesh, q.src, q.dst, q.steps, q.types, itemsize, "auto", tuple(q.notes) + (note,),
                    search=search)
    return p


def _fmt_t(v: float) -> str:
    return f"{v * 1e3:.4g} ms" if v >= 1e-3 else f"{v * 1e6:.4g} us"


def _primes(n: int) -> list[int]:
    out, f = [], 2
    while f * f <= n:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    return out + ([n] if n > 1 else [])


def _plan_auto_once(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4, *,
                    cost=None, budget_s: float = DEFAULT_BUDGET_S, usr=None, fallback=True) -> Plan | None:
    """The ``auto`` plan (see the module docstring). ``cost`` is a cost model with
    ``op_time_s(op)``, ``comm_floor_s()`` and ``plan_lower_bound_s(need_bytes)``
    (:class:`DefaultCost` when None; ``models.plan_cost.machine_cost`` for a machine).

    ``Plan.search`` holds what the search established: ``status`` ("optimal" or
    "best found within budget"), ``optimal``, ``cost_model``, ``time_s``,
    ``bytes_moved``, ``collectives``, ``lower_bound_s`` (proven: no plan within the
    memory cap costs less), ``gap_s``, ``bound_bytes``, ``max_shard_bytes``,
    ``bound_met``, ``min_max_shard_bytes`` (the proven least largest shard of any plan,
    or None when not established), ``budget_s``, ``elapsed_s``, ``states``."""
    from synth.planners import MAX_FUSED_GROUP, _on_work_mesh, plan_normal

    t0 = time.perf_counter()
    cost = cost if cost is not None else DefaultCost()
    budget_s = check_budget(budget_s)
    usr_mesh, usr_src, usr_dst = mesh, src, dst
    if usr is not None:  # searching on a refinement of the user's mesh
        usr_mesh = mesh.base_mesh
        usr_src, usr_dst = usr
    # sub-axes: search on the refined mesh, whose factors are axes
    mesh, src, dst = _on_work_mesh(mesh, src, dst)
    if tuple(src.unreduced) != tuple(dst.unreduced):
        return _auto_pending(usr_mesh, usr_src, usr_dst, mesh, src, dst, itemsize, cost, budget_s, t0)
    why = _unsupported(mesh, src, dst)
    if why:
        plan = plan_normal(usr_mesh, usr_src, usr_dst, itemsize)
        t_s, moved, ncoll = schedule_cost(plan, cost)
        note = (f"auto: {why}, which the auto search does not cover yet; returned the normal "
                "planner's plan (not searched, not proven optimal)")
        search = {"status": "not searched", "optimal": False,
                  "cost_model": getattr(cost, "name", type(cost).__name__),
                  "time_s": float(t_s), "bytes_moved": int(moved), "collectives": int(ncoll),
                  "lower_bound_s": None, "gap_s": None, "bound_bytes": int(plan.bound_bytes),
                  "max_shard_bytes": int(plan.max_shard_bytes), "bound_met": bool(plan.bound_holds),
                  "min_max_shard_bytes": None, "budget_s": float(budget_s),
                  "elapsed_s": float(time.perf_counter() - t0), "states": 0}
        return Plan(plan.mesh, plan.src, plan.dst, plan.steps, plan.types, itemsize, "auto",
                    tuple(plan.notes) + (note,), search=search)
    # the search stops at half the budget: the rest builds and checks the plan (or
    # falls back to normal's)
    deadline = t0 + 0.5 * budget_s
    S0, T = _strip(src, mesh), _strip(dst, mesh)
    sr = _Searcher(mesh, src.shape, S0, T, itemsize, cost, deadline, MAX_FUSED_GROUP,
                   pending=tuple(src.unreduced))
    bound_elems = max(sr.shard(S0), sr.shard(T))
    itemsize_b = itemsize
    sr.last_full = False
    sr.last_open_f = None
    if mesh.size <= 4096:  # what each device lacks, exactly
        lb0 = float(cost.plan_lower_bound_s(_need_bytes(mesh, src, dst, itemsize)))
    else:  # per-dim bound, independent of the device count
        lb0 = float(sr.h_cheap(S0)[0])
    notes = []
    cap = bound_elems
    min_max_shard = None    # proven least largest shard (elements)
    state = {"found": None, "optimal": False, "lower": lb0}

    def solve(cap):
        """Cheapest plan within ``cap``: directed pass, then the full pass (bounded by the
        directed plan's cost) to prove or improve it. None: no plan within ``cap``."""
        found, _, _ = _astar(sr, cap, full=False)
        if found is not None:
            state["found"] = found
            if found.cost[0] <= lb0 * (1 + 1e-12) and (found.cost[2] <= 1 or lb0 == 0):
                return found  # it costs the lower bound: nothing can be cheaper
            better, _, _ = _astar(sr, cap, full=True, upper=found.cost)
            return better if better is not None else found
        found, _, _ = _astar(sr, cap, full=True)
        return found

    timed_out = False
    try:
        found = solve(cap)
        if found is None:
            # the full search within the bound is exhausted: no bounded plan exists
            m = _bottleneck(sr)
            if m is None:  # cannot happen: easy always reaches the target
                raise AssertionError("auto: the target is unreachable")
            cap = min_max_shard = m
            found = solve(cap)
        else:
            min_max_shard = bound_elems
        state["found"] = found
        state["optimal"] = True
    except _Timeout:
        timed_out = True
        if sr.last_full and sr.last_open_f is not None:
            # every plan within ``cap`` not yet found costs at least the least open f
            state["lower"] = max(state["lower"], sr.last_open_f[0])
    found, optimal, lower = state["found"], state["optimal"], state["lower"]
    elapsed = time.perf_counter() - t0
    if found is not None:
        steps = _steps_from(sr, found.moves)
        s1, d1 = sr.to_type(S0), sr.to_type(T)
        full_steps = ([AllPermute(s1)] if s1 != src else []) + steps
        if d1 != dst:
            full_steps.append(AllPermute(dst))
        from synth.planners import _merge_permutes  # synth.planners imports this module

        full_steps = _merge_permutes(full_steps)
        plan = Plan.build(mesh, usr_src, usr_dst, full_steps, itemsize, "auto")
        if mesh.base:  # steps written on the refined mesh: the canonical form round-trips
            plan = Plan.from_dict(plan.to_dict())
        # the search's cost is the schedule's: the same ops, consecutive slices fused, and
        # the size-1-axis relabellings at either end move nothing
        t_s, moved, ncoll = found.cost
    else:
        if not fallback:
            return None
        plan = plan_normal(usr_mesh, usr_src, usr_dst, itemsize)
        notes.append(
            f"auto: the time budget of {budget_s * 1e3:g} ms ran out before the search found a "
            f"plan; returned the normal planner's plan (not proven optimal; raise "
            "--budget-ms to search longer)")
        t_s, moved, ncoll = schedule_cost(plan, cost)
    max_shard = plan.max_shard_bytes
    bound = plan.bound_bytes
    if optimal:
        status = "optimal"
        lower = t_s
    else:
        status = "best found within budget"
        if min_max_shard is None and max_shard > bound:
            lower = lb0  # the open list bounded plans within the bound only
        lower = min(lower, t_s)
    if timed_out and found is not None:
        notes.append(
            f"auto: the time budget of {budget_s * 1e3:g} ms ran out; this is the best plan found, "
            f"within {_fmt_t(max(t_s - lower, 0.0))} of the proven lower bound "
            f"({_fmt_t(lower)}); raise --budget-ms to search longer")
    min_b = None if min_max_shard is None else int(min_max_shard) * itemsize_b
    if max_shard > bound:
        if min_b is not None and min_b == max_shard:
            notes.append(
                f"auto: no plan over {'the prime factors of the mesh axes' if mesh.base else 'whole mesh axes'} "
                f"stays within the memory bound of {bound} B per device (proven: the search over every "
                f"move is exhausted); this plan's largest shard, {max_shard} B, is the least such plans achieve")
        else:
            notes.append(
                f"auto: the largest shard, {max_shard} B, exceeds the memory bound of {bound} B "
                "per device, and the search ran out of time before proving whether a bounded "
                "plan exists; raise --budget-ms")
    search = {
        "status": status,
        "optimal": bool(optimal),
        "cost_model": getattr(cost, "name", type(cost).__name__),
        "time_s": float(t_s),
        "bytes_moved": int(moved),
        "collectives": int(ncoll),
        "lower_bound_s": float(min(lower, t_s)),
        "gap_s": float(max(t_s - min(lower, t_s), 0.0)),
        "bound_bytes": int(bound),
        "max_shard_bytes": int(max_shard),
        "bound_met": bool(max_shard <= bound),
        "min_max_shard_bytes": min_b,
        "sub_axes": bool(mesh.base),
        "budget_s": float(budget_s),
        "elapsed_s": float(elapsed),
        "states": int(sr.expanded),
    }
    return Plan(plan.mesh, plan.src, plan.dst, plan.steps, plan.types, itemsize, "auto",
                tuple(plan.notes) + tuple(notes), search=search)


def _auto_pending(usr_mesh, usr_src, usr_dst, wm, ws, wd, itemsize, cost, budget_s, t0) -> Plan:
    """Pending sums that the target does not keep, or new ones: the reductions are placed
    as the ``normal`` planner places them (each axis reduce-scattered onto its target dim,
    or all-reduced; before or after the free slices: :func:`synth.planners._candidates`),
    the rest is searched by ``auto`` (pending sums both keep ride along), and an Unreduce
    ends where the target has new pending axes. The cheapest candidate wins; it is proven
    optimal only among these placements."""
    from synth.planners import _candidates, plan_normal

    tried = []

    def core(m, t, d):
        left = t0 + budget_s - time.perf_counter()
        sub = plan_auto(m, t, d, itemsize, cost=cost, budget_s=max(left / 4, 1e-4))
        tried.append(sub)
        return list(sub.steps)

    best = None
    errors = []
    for steps in _candidates(wm, ws, wd, core, errors=errors):
        try:
            p = Plan.build(wm, usr_src, usr_dst, steps, itemsize, "auto")
            if p.work_mesh.base:  # the canonical form round-trips
                p = Plan.from_dict(p.to_dict())
        except RedistributionError as e:
            errors.append(e)
            continue
        key = (p.max_shard_bytes,) + tuple(schedule_cost(p, cost))
        if best is None or key < best[0]:
            best = (key, p)
        if time.perf_counter() > t0 + budget_s:
            break
    notes = []
    if best is None:
        plan = plan_normal(usr_mesh, usr_src, usr_dst, itemsize)
        notes.append("auto: no placement of the reductions of the pending sums was searched "
                     f"({errors[0] if errors else 'out of time'}); returned the normal planner's plan")
        key = (plan.max_shard_bytes,) + tuple(schedule_cost(plan, cost))
    else:
        key, plan = best
    t_s, moved, ncoll = key[1:]
    notes.append(f"auto: pending sums are reduced where the normal planner places reductions; the "
                 f"rest is searched ({len(tried)} placement(s)); not proven optimal over every "
                 "placement of the reductions")
    search = {"status": f"best of {len(tried)} reduction placement(s)", "optimal": False,
              "cost_model": getattr(cost, "name", type(cost).__name__),
              "time_s": float(t_s), "bytes_moved": int(moved), "collectives": int(ncoll),
              "lower_bound_s": None, "gap_s": None, "bound_bytes": int(plan.bound_bytes),
              "max_shard_bytes": int(plan.max_shard_bytes), "bound_met": bool(plan.bound_holds),
              "min_max_shard_bytes": None, "budget_s": float(budget_s),
              "elapsed_s": float(time.perf_counter() - t0),
              "states": int(sum(p.search.get("states", 0) for p in tried))}
    return Plan(plan.mesh, plan.src, plan.dst, plan.steps, plan.types, itemsize, "auto",
                tuple(plan.notes) + tuple(notes), search=search)


def _unsupported(mesh: Mesh, src: ArrayType, dst: ArrayType) -> str | None:
    """Why the search cannot take these types (None when it can)."""
    for what, t in (("source", src), ("target", dst)):
        for d in t.dims:
            for a in d.axes:
                if a not in mesh.shape:
                    return f"the {what} type {t} uses the sub-axis {a}"
            if d.size % math.prod(mesh.shape[a] for a in d.axes):
                return f"the {what} type {t} has an uneven dim ({d})"
    return None


def check_budget(value, unit: str = "s") -> float:
    """A positive, finite number (of ``unit``), or a :class:`RedistributionError`."""
    from synth.errors import RedistributionError

    flag = "--budget-ms" if unit == "ms" else "budget_s"
    v = None
    if not isinstance(value, bool):
        try:
            v = float(value)
        except (TypeError, ValueError, OverflowError):
            v = None
    if v is None or not math.isfinite(v) or v <= 0:
        raise RedistributionError(
            f"auto planner: the time budget ({flag}) must be a positive number of {unit}, got "
            f"{value!r}; e.g. --budget-ms 100")
    return v


# -- free device order ----------------------------------------------------------------------
#: Largest mesh for ``free_device_order`` (its assignment problem is n x n).
FREE_ORDER_MAX_DEVICES = 4096


def plan_free_order(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4, *, cost=None,
                    budget_s: float = DEFAULT_BUDGET_S, max_candidates: int = 6) -> Plan:
    """``auto`` when the target may use any assignment of mesh positions to devices (for
    example loading a checkpoint onto a fresh job).

    Any type ``T*`` with the target's local shape holds the same blocks as the target,
    on other devices; after a plan to ``T*``, relabelling the devices gives the target.
    The candidates: the assignment of positions to devices that keeps the most source
    data in place, found with ``scipy.optimize.linear_sum_assignment`` on the
    ``n x n`` overlap of source and target blocks (COSTA's idea), when a type realises it;
    and the types of the target's local shape that leave the neediest device the least to
    receive (the target itself always among them). ``auto`` plans to each within the
    budget; the least largest shard, then the least cost wins.

    The plan ends at ``T*`` (``plan.dst``); ``plan.search["relabel"]`` holds the requested
    target and ``device_of_position``: mesh position ``p`` of the requested target is
    device ``device_of_position[p]``, which holds exactly that block after the plan."""
    from synth.errors import RedistributionError

    budget_s = check_budget(budget_s)
    cost = cost if cost is not None else DefaultCost()
    why = _unsupported(mesh, src, dst)
    if not why and (src.unreduced or dst.unreduced):
        why = "pending sums"
    if not why and any(a not in mesh.shape for t in (src, dst) for d in t.dims for a in d.axes):
        why = "sub-axes"
    if why:
        raise RedistributionError(f"free device order: {why}, which it does not handle yet; "
                                  "drop --free-device-order")
    n = mesh.size
    if n > FREE_ORDER_MAX_DEVICES:
        raise RedistributionError(
            f"free device order: mesh {mesh} has {n} devices; the assignment covers at most "
            f"{FREE_ORDER_MAX_DEVICES} (drop --free-device-order)")
    t0 = time.perf_counter()
    S0, T = _strip(src, mesh), _strip(dst, mesh)
    sr = _Searcher(mesh, src.shape, S0, T, itemsize, cost, t0 + budget_s, 1 << 30)
    members = sr.class_members(sr.splits(T))
    dst_blocks = dst.block_indices(mesh)
    cands = []
    # COSTA: the relabelling that keeps the most data, if a type realises it
    sigma = _lsa_relabel(mesh, src, dst)
    if sigma is not None:
        want = np.empty_like(dst_blocks)
        want[sigma] = dst_blocks
        for M in members[:512]:
            if np.array_equal(sr.to_type(M).block_indices(mesh), want):
                cands.append(M)
                break
    need = sorted(members, key=lambda M: (int(_need_of(mesh, src, sr.to_type(M), itemsize).max()),
                                           M != T))
    for M in [T] + need:
        if M not in cands:
            cands.append(M)
        if len(cands) >= max_candidates:
            break
    best = None
    all_optimal, tried = True, 0
    t1 = time.perf_counter()  # the budget is the searches' (the candidates took t1 - t0)
    for k, M in enumerate(cands):
        left = t1 + budget_s - time.perf_counter()
        if left <= 0:
            break
        target = sr.to_type(M) if M != T else dst
        p = plan_auto(mesh, src, target, itemsize, cost=cost, budget_s=left / (len(cands) - k))
        key = (p.max_shard_bytes, p.search["time_s"], p.search["bytes_moved"], p.search["collectives"])
        all_optimal = all_optimal and bool(p.search.get("optimal"))
        tried += 1
        if best is None or key < best[0]:
            best = (key, p)
    if best is None:  # no time for even one candidate: plan to the target itself
        best = (None, plan_auto(mesh, src, dst, itemsize, cost=cost, budget_s=budget_s))
    plan = best[1]
    reached = plan.dst.block_indices(mesh)
    order = _match_blocks(reached, dst_blocks)
    search = dict(plan.search)
    search["relabel"] = {
        "requested_dst": str(dst), "reached_dst": str(plan.dst),
        "device_of_position": [int(d) for d in order],
        "candidates": len(cands), "identity": bool((order == np.arange(n)).all()),
    }
    search["elapsed_s"] = float(time.perf_counter() - t0)
    search["budget_s"] = float(budget_s)
    # optimal over every relabelling only if every type of the target's local shape was
    # searched to the end
    proven = all_optimal and tried == len(set(cands)) and set(members) <= set(cands)
    search["optimal"] = bool(proven)
    if not proven:
        search["status"] = (f"best of {tried} relabelled target(s) (of {len(members)} with the "
                            "target's local shape)")
        search["lower_bound_s"] = None
        search["gap_s"] = None
    notes = tuple(plan.notes)
    if plan.dst != dst:
        notes += (f"free device order: the plan ends at {plan.dst}; mesh position p of the "
                  f"requested target {dst} is device device_of_position[p]",)
    return Plan(plan.mesh, plan.src, plan.dst, plan.steps, plan.types, itemsize, "auto", notes,
                search=search)


def _need_of(mesh, src, dst, itemsize):
    return _need_bytes(mesh, src, dst, itemsize)


def _lsa_relabel(mesh: Mesh, src: ArrayType, dst: ArrayType):
    """``sigma[p]``: the device for mesh position ``p`` of ``dst`` that maximises the source
    data kept in place (``linear_sum_assignment`` on the overlap matrix)."""
    from scipy.optimize import linear_sum_assignment

    s0, s1 = src.regions(mesh)
    d0, d1 = dst.regions(mesh)
    # overlap[p, d]: elements of position p's target block that device d holds already
    lo = np.maximum(d0[:, None, :], s0[None, :, :])
    hi = np.minimum(d1[:, None, :], s1[None, :, :])
    overlap = np.clip(hi - lo, 0, None).prod(axis=2)
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    sigma = np.empty(mesh.size, dtype=np.int64)
    sigma[rows] = cols
    return sigma


def _match_blocks(reached, wanted):
    """``order[p]``: a distinct device whose block under the reached type is position p's
    target block (devices that already hold theirs keep their own position)."""
    n = len(wanted)
    holders: dict = {}
    for d in range(n):
        holders.setdefault(tuple(reached[d]), []).append(d)
    order = np.full(n, -1, dtype=np.int64)
    for p in range(n):  # keep devices in place first
        if tuple(reached[p]) == tuple(wanted[p]):
            order[p] = p
            holders[tuple(wanted[p])].remove(p)
    for p in range(n):
        if order[p] < 0:
            order[p] = holders[tuple(wanted[p])].pop()
    return order


def format_search(plan) -> list[str]:
    """Text lines for what the ``auto`` search established (empty for other planners)."""
    s = plan.search
    if not s:
        return []
    def t(v):
        return f"{v * 1e3:.4g} ms" if v >= 1e-3 else f"{v * 1e6:.4g} us"

    out = [f"search          {s['status']} under {s['cost_model']}; {s['states']} states in "
           f"{s['elapsed_s'] * 1e3:.1f} ms (budget {s['budget_s'] * 1e3:g} ms)"]
    line = f"predicted time  {t(s['time_s'])}"
    if s.get("lower_bound_s") is not None:
        line += f"; proven lower bound {t(s['lower_bound_s'])} (gap {t(s['gap_s'])})"
    out.append(line)
    if s["bound_met"]:
        out.append("memory          within the bound max(src, dst)")
    elif s.get("min_max_shard_bytes") is not None and s["min_max_shard_bytes"] == s["max_shard_bytes"]:
        over = "the prime factors of the mesh axes" if s.get("sub_axes") else "whole mesh axes"
        out.append(f"memory          NO plan over {over} stays within the bound ({s['bound_bytes']} B); "
                   f"{s['max_shard_bytes']} B is the least largest shard such plans achieve (proven)")
    else:
        out.append(f"memory          bound of {s['bound_bytes']} B exceeded; not proven minimal")
    r = s.get("relabel")
    if r:
        perm = r["device_of_position"]
        shown = ",".join(map(str, perm[:32])) + (",..." if len(perm) > 32 else "")
        out.append(f"relabel         target {r['requested_dst']} reached as {r['reached_dst']}; "
                   f"device of mesh position p: [{shown}]")
    return out
