"""An exhaustive reference for ``auto`` on tiny meshes, with uneven dims, sub-axes and
pending sums (``python -m synth agreement``; issue 18).

:func:`reference_search` enumerates *every type* of the problem on the work mesh (each
prime factor of each mesh axis splitting a dim, in any order, or pending, or unused) and
*every step* between them that the collectives table allows, and runs two exact searches
over that graph:

* the least largest shard of any plan (a minimax Dijkstra), and
* the least cost of a plan within the memory cap ``auto`` plans under (max(src, dst), or,
  where no plan stays within it, that least largest shard), under the default cost model
  (the time of each step's own schedule ops, ``synth.collectives.schedule_ops``: ``alpha``
  per communicating op plus its bytes over the bandwidth; local ops free).

It is written from the collectives table alone, independently of :mod:`synth.planners`
(it shares only the work mesh, whose factors are the documented move set's): a step is
tried for every argument of its kind and kept when its own type rule
(``Collective.apply``) accepts it, and its bytes are its own ``recv_elems``. The kinds and
their arguments, from a type with pending axes ``U`` and unused, not pending factors ``F``:

=====================  ===========================================================
DynSlice(i, X)         every ordered non-empty subset ``X`` of ``F``, every dim ``i``
AllGather(i, X)        every minor-most suffix ``X`` of dim ``i``
MultiAllGather         one suffix on each of two or more dims
AllToAll(i, j, X)      every suffix ``X`` of dim ``i``, every other dim ``j``
MultiAllToAll          two such moves sharing a destination (either order), or one
                       dim's suffix and the next suffix of its rest into two dims
AllReduce(X)           every non-empty subset of ``U``
ReduceScatter(i, X)    every ordered non-empty subset of ``U``, every dim
Unreduce(X)            every non-empty subset of ``F``
ShardedToUnreduced     every suffix of every dim
AllPermute(t')         every type ``t'`` of the problem its type rule accepts (one
                       local shape), never right after another AllPermute
=====================  ===========================================================

A plan is costed as it runs: ``Plan.build`` merges two permutes in a row into one, so the
reference never takes a permute right after a permute (its nodes are ``(type, whether the
last step was a permute)``); one permute already reaches every type one permute can, so
a chain would only be the merged permute costed twice. ``auto``'s permute moves are the
same closure (:meth:`synth.planners.moves.Space.permute_classes`).

The graph grows fast with the mesh: the reference is for meshes of at most
:data:`MAX_REFERENCE_DEVICES` devices and rank <= 3, and stops with ``None`` past
:data:`MAX_REFERENCE_TYPES` types (said in the result).
"""

from __future__ import annotations

import heapq
import itertools
import math

from synth.collectives import (
    AllGather,
    AllPermute,
    AllReduce,
    AllToAll,
    DynSlice,
    MultiAllGather,
    MultiAllToAll,
    ReduceScatter,
    ShardedToUnreduced,
    Unreduce,
    schedule_ops,
)
from synth.errors import CollectiveError, RedistributionError
from synth.mesh import Mesh
from synth.types import ArrayType, Dim, refine_type

#: Meshes the reference searches (devices, at most).
MAX_REFERENCE_DEVICES = 16
#: Types of one problem, at most (the search stops and says so past it).
MAX_REFERENCE_TYPES = 4000


def _subsets(xs):
    for r in range(1, len(xs) + 1):
        yield from itertools.combinations(xs, r)


def _suffixes(axes):
    return [axes[len(axes) - k:] for k in range(1, len(axes) + 1)]


def _ax(names):
    names = tuple(names)
    return names[0] if len(names) == 1 else names


def all_types(wm: Mesh, shape) -> list[ArrayType]:
    """Every valid type of ``shape`` on the work mesh ``wm`` (each factor of size > 1 on one
    dim in any order, pending, or unused; kept when :meth:`ArrayType.check` accepts it)."""
    names = [a for a, n in wm.axes if n > 1]
    rank = len(shape)
    out = []
    for assign in itertools.product(range(-2, rank), repeat=len(names)):
        per = [[a for a, k in zip(names, assign) if k == i] for i in range(rank)]
        U = tuple(a for a, k in zip(names, assign) if k == -2)
        for orders in itertools.product(*(itertools.permutations(p) for p in per)):
            t = ArrayType(tuple(Dim(n, o) for n, o in zip(shape, orders)), U)
            try:
                t.check(wm, "type")
            except RedistributionError:
                continue
            out.append(t)
            if len(out) > MAX_REFERENCE_TYPES:
                return None
    return out


def _steps(t: ArrayType, wm: Mesh, types_by_local):
    """Every step of the table from ``t`` (arguments as in the module doc)."""
    names = [a for a, n in wm.axes if n > 1]
    U = tuple(t.unreduced)
    used = set(a for d in t.dims for a in d.axes)
    free = [a for a in names if a not in used and a not in U]
    rank = t.rank
    for i in range(rank):
        for X in _subsets(free):
            for Xo in itertools.permutations(X):
                yield DynSlice(i, _ax(Xo))
        for X in _suffixes(t.dims[i].axes):
            yield AllGather(i, _ax(X))
            yield ShardedToUnreduced(i, _ax(X))
            for j in range(rank):
                if j != i:
                    yield AllToAll(i, j, _ax(X))
    opts = [[(i, X) for X in _suffixes(t.dims[i].axes)] for i in range(rank) if t.dims[i].axes]
    for r in range(2, len(opts) + 1):
        for group in itertools.combinations(opts, r):
            for combo in itertools.product(*group):
                yield MultiAllGather(tuple((i, _ax(X)) for i, X in combo))
    yield from _multi_a2a_steps(t)
    for X in _subsets(U):
        yield AllReduce(_ax(X))
        for Xo in itertools.permutations(X):
            for i in range(rank):
                yield ReduceScatter(i, _ax(Xo))
    for X in _subsets(free):
        yield Unreduce(_ax(X))
    for t2 in types_by_local.get(t.local_shape(wm), ()):
        if t2 != t:
            yield AllPermute(t2)


def _multi_a2a_steps(t: ArrayType):
    """The two-move all-to-alls of the module doc: moves on four distinct dims, two
    sources into one destination (both orders), and one source's suffix then the next
    suffix of what remains into two other dims."""
    rank = t.rank
    axes = [t.dims[i].axes for i in range(rank)]
    singles = [(i, j, X) for i in range(rank) for X in _suffixes(axes[i]) for j in range(rank) if j != i]
    for a, (i, j, X) in enumerate(singles):
        for b, (k, m, Y) in enumerate(singles):
            if k in (i, j) or m == i:
                continue
            if m == j or (b > a and len({i, j, k, m}) == 4):
                yield MultiAllToAll(((i, j, _ax(X)), (k, m, _ax(Y))))
        rest = axes[i][:len(axes[i]) - len(X)]
        for Y in _suffixes(rest):
            for m in range(rank):
                if m not in (i, j):
                    yield MultiAllToAll(((i, j, _ax(X)), (i, m, _ax(Y))))


def _permute_key(t: ArrayType, t2: ArrayType, wm: Mesh):
    """What AllPermute's type rule reads of two types of one shape and local shape: the
    pending sets and the blocks per dim (the reference asks the rule once per key)."""
    return (t.unreduced, t.splits(wm), t2.unreduced, t2.splits(wm))


def _dijkstra(start, goal, succ, zero, extend):
    """``(label, steps)`` of the best path from ``start`` to ``goal``, or ``(None, None)``:
    labels grow along a path by ``extend(label, type, step, next_type)`` (``max`` of shards
    for the least largest shard, a sum of step costs for the cheapest plan; ``inf`` drops
    the edge), and the least label at ``goal`` wins. Nodes are ``(type, after a permute)``:
    no AllPermute follows an AllPermute (see the module doc)."""
    start = (start, False)
    best, parent = {start: zero}, {start: None}
    heap, tick, done = [(zero, 0, start)], itertools.count(1), set()
    while heap:
        g, _, node = heapq.heappop(heap)
        if node in done:
            continue
        t, after_permute = node
        if t == goal:
            t = node
            steps = []
            while parent[t] is not None:
                t, step = parent[t]
                steps.append(step)
            return g, steps[::-1]
        done.add(node)
        for t2, step in succ(t):
            permute = isinstance(step, AllPermute)
            if permute and after_permute:
                continue
            g2 = extend(g, t, step, t2)
            n2 = (t2, permute)
            if g2 < best.get(n2, math.inf):
                best[n2], parent[n2] = g2, (node, step)
                heapq.heappush(heap, (g2, next(tick), n2))
    return None, None


def reference_search(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4,
                     alpha_s: float = 5e-6, bandwidth_Bps: float = 50e9) -> dict | None:
    """The least largest shard and the least cost within the cap over every plan of the
    table's steps (see the module doc): ``{"min_max_shard_bytes", "cap_bytes", "optimum_s",
    "types", "steps"}`` (``steps``: one cheapest plan, as text), or None where the problem has more than :data:`MAX_REFERENCE_TYPES` types
    (the caller counts it as not searched)."""
    from synth.planners.cost import DefaultCost
    from synth.planners.moves import work_mesh

    model = DefaultCost(alpha_s, bandwidth_Bps)

    mesh, src, dst = Mesh.of(mesh), ArrayType.of(src), ArrayType.of(dst)
    if mesh.size > MAX_REFERENCE_DEVICES:
        raise RedistributionError(f"reference_search: {mesh} has {mesh.size} devices, over the "
                                  f"{MAX_REFERENCE_DEVICES}-device cap of the exhaustive reference")
    wm = work_mesh(mesh, [src, dst])
    order = {a: k for k, a in enumerate(wm.names)}

    def norm(t):  # pending axes in mesh order: one spelling per type
        if len(t.unreduced) < 2:
            return t
        u = tuple(sorted(t.unreduced, key=order.__getitem__))
        return t if u == tuple(t.unreduced) else t.with_unreduced(u)

    rule: dict = {}  # AllPermute's verdict per _permute_key

    s0, t1 = norm(refine_type(src, wm)), norm(refine_type(dst, wm))
    types = all_types(wm, src.shape)
    if types is None:
        return None
    by_local: dict = {}
    for t in types:
        by_local.setdefault(t.local_shape(wm), []).append(t)
    edges: dict = {}

    def succ(t):
        got = edges.get(t)
        if got is None:
            got = []
            for c in _steps(t, wm, by_local):
                if isinstance(c, AllPermute):
                    k = _permute_key(t, c.target, wm)
                    ok = rule.get(k)
                    if ok is None:
                        try:
                            c.apply(t, wm)
                            ok = rule[k] = True
                        except (CollectiveError, RedistributionError):
                            ok = rule[k] = False
                    if ok:
                        got.append((c.target, c))
                    continue
                try:
                    t2 = norm(c.apply(t, wm))
                except (CollectiveError, RedistributionError):
                    continue
                got.append((t2, c))
            edges[t] = got
        return got

    def step_cost(c, t, t2):
        if c.local or c.is_noop(t, wm):
            return 0.0
        # the cost model's time of the step's own schedule ops
        return sum(model.op_time_s(op) for op in schedule_ops(c, t, t2, wm, itemsize))

    def shard(t):
        return t.shard_elems(wm) * itemsize

    # least largest shard (minimax), then the least cost within that cap (sum)
    least, _ = _dijkstra(s0, t1, succ, shard(s0), lambda b, t, step, t2: max(b, shard(t2)))
    if least is None:
        raise AssertionError(f"reference_search: {dst} unreachable from {src} on {mesh}")
    cap = max(least, max(shard(s0), shard(t1)))
    opt, steps = _dijkstra(s0, t1, succ, 0.0, lambda g, t, step, t2: (
        math.inf if shard(t2) > cap else g + step_cost(step, t, t2)))
    return {"min_max_shard_bytes": least, "cap_bytes": cap, "optimum_s": opt, "types": len(types),
            "steps": [str(c) for c in steps or ()]}
