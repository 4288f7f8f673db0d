"""Planners: ``easy`` (gather everything, then slice) and ``normal`` (the paper's
normal form: DynSlices, then AllToAlls and AllPermutes, then AllGathers).

The ``normal`` planner
----------------------
Let ``A`` be the source with every target-only axis sliced into its target dim (in
target order), and ``B`` the target with every source-only axis appended, minor-most,
to its source dim (in source order). ``src -> A`` is DynSlices only; ``B -> dst`` is
AllGathers only. ``A`` and ``B`` use the same set of mesh axes, so every type between
them has the same shard size, ``N / prod(all used axes)``, which is at most
``min(src shard, dst shard)``. Hence the plan never exceeds ``max(src, dst)``.

The middle, ``A -> B``, is a shortest search over AllToAlls (each may move a suffix
of several axes at once, over their combined group) with at most one AllPermute: a
forward search from ``A`` and a backward search from ``B`` meet either exactly
(AllToAlls only) or on a common local shape (one AllPermute in between, since a
permute reaches any type of the same local shape). Among the plans with the fewest
collectives, the one that moves the least data wins (an all-to-all over ``n`` moves
``(n-1)/n`` of a shard, a permute at most the whole shard). If the search budget runs
out, a constructive fallback moves each axis with an AllToAll and reorders with
AllPermutes.

Mesh axes of size 1 hold no data: the planner works on the types without them and
relabels at either end with an AllPermute that moves nothing (``Plan.noop_steps``).

All intermediate types must divide evenly. That always holds when every global dim
is divisible by the product of all mesh axis sizes (the paper's precondition). If it
does not hold for the normal form, the planner falls back to ``easy`` and says so in
``Plan.notes``; ``Plan.bound_holds`` then reports whether the memory bound held.
"""

from __future__ import annotations

from synth.collectives import AllGather, AllPermute, AllToAll, DynSlice
from synth.errors import CollectiveError, PlanError, RedistributionError
from synth.mesh import Mesh
from synth.plan import Plan
from synth.types import ArrayType, Dim

#: Maximum number of states the middle search may visit before the fallback.
SEARCH_BUDGET = 4000

#: Largest combined group (product of axis sizes) that one multi-axis AllGather or
#: AllToAll may span. Larger fused groups are split into several collectives: a direct
#: all-to-all over n devices is n*(n-1) messages, which neither real libraries nor the
#: simulator run as one flat exchange over thousands of devices.
MAX_FUSED_GROUP = 64


def fused_gathers(dim: int, axes: tuple[str, ...], axis_sizes: dict[str, int]) -> list:
    """AllGathers removing ``axes`` (a suffix of ``dim``) minor-most first, each over
    as many axes as fit in MAX_FUSED_GROUP."""
    out, rest = [], list(axes)
    while rest:
        group = [rest.pop()]
        n = axis_sizes[group[0]]
        while rest and n * axis_sizes[rest[-1]] <= MAX_FUSED_GROUP:
            n *= axis_sizes[rest[-1]]
            group.insert(0, rest.pop())
        out.append(AllGather(dim, tuple(group)))
    return out


def plan_easy(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4) -> Plan:
    """Gather every source axis (one all-gather per axis, minor-most first), then slice
    every target axis: the naive baseline."""
    steps = []
    for i, d in enumerate(src.dims):
        steps += [AllGather(i, a) for a in reversed(d.axes)]
    for i, d in enumerate(dst.dims):
        steps += [DynSlice(i, a) for a in d.axes]
    return Plan.build(mesh, src, dst, steps, itemsize, "easy")


def plan_normal(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4) -> Plan:
    try:
        steps = _normal_steps(mesh, src, dst)
        return Plan.build(mesh, src, dst, steps, itemsize, "normal")
    except CollectiveError as e:
        p = plan_easy(mesh, src, dst, itemsize)
        note = (
            "normal form not applicable: an intermediate type does not divide evenly "
            f"({e}); fell back to the easy plan"
        )
        return Plan(p.mesh, p.src, p.dst, p.steps, p.types, itemsize, "normal", (note,))


def splits_of(S: tuple[tuple[str, ...], ...], axis_sizes: dict[str, int]) -> tuple[int, ...]:
    """Per dim, the product of the sizes of its axes (``S`` is a type's axes per dim)."""
    out = []
    for axes in S:
        p = 1
        for a in axes:
            p *= axis_sizes[a]
        out.append(p)
    return tuple(out)


def _strip_unit_axes(t: ArrayType, mesh: Mesh) -> ArrayType:
    return ArrayType(tuple(Dim(d.size, tuple(a for a in d.axes if mesh.shape[a] > 1)) for d in t.dims))


def _normal_steps(mesh: Mesh, src: ArrayType, dst: ArrayType) -> list:
    """Plan on the types without size-1 axes (they hold no data), then relabel: an
    AllPermute between a type and its stripped form moves nothing."""
    s1, d1 = _strip_unit_axes(src, mesh), _strip_unit_axes(dst, mesh)
    steps = ([AllPermute(s1)] if s1 != src else []) + _normal_core(mesh, s1, d1)
    if d1 != dst:
        steps.append(AllPermute(dst))
    return _merge_permutes(steps)


def _merge_permutes(steps: list) -> list:
    """Two permutes in a row are one permute to the second's target."""
    merged = []
    for c in steps:
        if merged and c.kind == "all_permute" and merged[-1].kind == "all_permute":
            merged[-1] = c
        else:
            merged.append(c)
    return merged


def _normal_core(mesh: Mesh, src: ArrayType, dst: ArrayType) -> list:
    src_axes, dst_axes = set(src.used_axes), set(dst.used_axes)
    steps = [
        DynSlice(i, a) for i, d in enumerate(dst.dims) for a in d.axes if a not in src_axes
    ]
    a_type = src
    for c in steps:
        a_type = c.apply(a_type, mesh)
    b_dims, gathers = [], []
    for i, (sd, dd) in enumerate(zip(src.dims, dst.dims)):
        extra = tuple(a for a in sd.axes if a not in dst_axes)
        b_dims.append(Dim(dd.size, dd.axes + extra))
        gathers += fused_gathers(i, extra, mesh.shape)
    b_type = ArrayType(tuple(b_dims))
    if not b_type.is_valid(mesh):
        raise CollectiveError(f"the normal form's pre-gather type {b_type} does not divide evenly")
    steps += _middle(mesh, a_type, b_type)
    # One all-gather per dim removes that dim's source-only suffix.
    return steps + gathers


# -- the middle: AllToAlls and at most one AllPermute, same shard size throughout --
def _middle(mesh: Mesh, a_type: ArrayType, b_type: ArrayType) -> list:
    A = tuple(d.axes for d in a_type.dims)
    B = tuple(d.axes for d in b_type.dims)
    if A == B:
        return []
    sizes = a_type.shape
    msize = mesh.shape

    def key(S):
        return splits_of(S, msize)

    def moves(S):
        """States one AllToAll away from S: (move, new state). move = (src, dst, axes):
        a minor-most suffix of dim src moves, in order, to the end of dim dst."""
        res = []
        for s, axes in enumerate(S):
            n = 1
            for k in range(1, len(axes) + 1):
                n *= msize[axes[-k]]
                if k > 1 and n > MAX_FUSED_GROUP:
                    break
                suffix = axes[-k:]
                for t, taxes in enumerate(S):
                    if t == s:
                        continue
                    p = n
                    for b in taxes:
                        p *= msize[b]
                    if sizes[t] % p:
                        continue
                    new = list(S)
                    new[s] = axes[:-k]
                    new[t] = taxes + suffix
                    res.append(((s, t, suffix), tuple(new)))
        return res

    def to_type(S):
        return ArrayType(tuple(Dim(sz, axes) for sz, axes in zip(sizes, S)))

    if key(A) == key(B):
        return [AllPermute(b_type)]

    # Layered BFS from both ends. fwd[i]: state -> moves from A; bwd[j]: state -> moves
    # (in forward direction, to be applied in order) leading from state to B.
    fwd = [{A: ()}]
    bwd = [{B: ()}]
    seen_f, seen_b = {A}, {B}
    visited = 2

    def grow(layers, seen, forward):
        nonlocal visited
        nxt = {}
        for S, path in layers[-1].items():
            for (s, t, a), S2 in moves(S):
                if S2 in seen:
                    continue
                seen.add(S2)
                visited += 1
                # A backward step from S to S2 moves a from s to t; the forward move
                # that undoes it goes t -> s and comes before the rest of the path.
                nxt[S2] = path + ((s, t, a),) if forward else ((t, s, a),) + path
        layers.append(nxt)
        return bool(nxt)

    def emit(fpath, permute_to, bpath):
        out = [AllToAll(s, t, a) for s, t, a in fpath]
        if permute_to is not None:
            out.append(AllPermute(to_type(permute_to)))
        out += [AllToAll(s, t, a) for s, t, a in bpath]
        return out

    def moved(path):
        """Fraction of a shard each all-to-all moves, summed: (n-1)/n per step."""
        total = 0.0
        for _, _, axes in path:
            n = 1
            for a in axes:
                n *= msize[a]
            total += (n - 1) / n
        return total

    max_cost = 8
    for cost in range(1, max_cost + 1):
        # Meetings with ``cost`` collectives: AllToAlls only (i + j == cost), or one
        # permute between them (i + j == cost - 1). Among those, the least data wins.
        candidates = []
        for permute in (False, True):
            total = cost - 1 if permute else cost
            for i in range(total + 1):
                j = total - i
                while len(fwd) <= i and visited < SEARCH_BUDGET:
                    if not grow(fwd, seen_f, True):
                        break
                while len(bwd) <= j and visited < SEARCH_BUDGET:
                    if not grow(bwd, seen_b, False):
                        break
                if len(fwd) <= i or len(bwd) <= j:
                    continue
                F, Bk = fwd[i], bwd[j]
                if not permute:
                    small, big = (F, Bk) if len(F) <= len(Bk) else (Bk, F)
                    for S in small:
                        if S in big:
                            candidates.append((moved(F[S]) + moved(Bk[S]), F[S], None, Bk[S]))
                            if len(candidates) >= 32:
                                break
                else:
                    by_key = {}
                    for S, path in Bk.items():
                        by_key.setdefault(key(S), (S, path))
                    for S, path in F.items():
                        hit = by_key.get(key(S))
                        if hit is not None:
                            # a permute moves at most a whole shard
                            candidates.append((moved(path) + 1.0 + moved(hit[1]), path, hit[0], hit[1]))
                            if len(candidates) >= 32:
                                break
        if candidates:
            best = min(candidates, key=lambda c: c[0])
            return emit(best[1], best[2], best[3])
        if visited >= SEARCH_BUDGET:
            break
    return _middle_fallback(mesh, a_type, b_type)


def _middle_fallback(mesh: Mesh, a_type: ArrayType, b_type: ArrayType) -> list:
    """Move each misplaced axis with one AllToAll, lifting it to minor-most with an
    AllPermute first when it is buried; finish with an AllPermute to fix the order."""
    dB = {a: i for i, d in enumerate(b_type.dims) for a in d.axes}
    cur = a_type
    steps = []
    for a in [a for a in a_type.used_axes if a_type.dim_of(a) != dB[a]]:
        s = cur.dim_of(a)
        if cur.dims[s].axes[-1] != a:
            lifted = cur.with_dim_axes(s, tuple(x for x in cur.dims[s].axes if x != a) + (a,))
            steps.append(AllPermute(lifted))
            cur = lifted
        c = AllToAll(s, dB[a], a)
        cur = c.apply(cur, mesh)
        steps.append(c)
    if cur != b_type:
        steps.append(AllPermute(b_type))
    return _merge_permutes(steps)


def _plan_search(mesh, src, dst, itemsize=4):
    from synth.search import plan_search

    return plan_search(mesh, src, dst, itemsize)


def _plan_auto(mesh, src, dst, itemsize=4, *, budget_s=None, cost=None):
    from synth.auto import DEFAULT_BUDGET_S, plan_auto

    return plan_auto(mesh, src, dst, itemsize, cost=cost,
                     budget_s=DEFAULT_BUDGET_S if budget_s is None else budget_s)


PLANNERS = {"auto": _plan_auto, "easy": plan_easy, "normal": plan_normal, "search": _plan_search}


def synthesize(mesh, src, dst, planner: str = "auto", itemsize: int = 4, *,
               budget_s: float | None = None, budget_ms: float | None = None, cost=None) -> Plan:
    """Synthesize a plan from ``src`` to ``dst`` on ``mesh``.

    ``mesh`` is a :class:`Mesh` or ``'x=2,y=4'``; ``src``/``dst`` are
    :class:`ArrayType` or canonical strings like ``'[1024{x}, 4096{y}]'``.
    ``planner`` is ``auto`` (default), ``normal``, ``easy`` or ``search``. For ``auto``:
    ``budget_s`` (or ``budget_ms``) is the search's time budget (default 100 ms) and
    ``cost`` its cost model (default :class:`synth.auto.DefaultCost`; a machine's is
    ``models.plan_cost.machine_cost(machine, mesh, placement)``).
    """
    mesh = Mesh.of(mesh)
    src = ArrayType.of(src).check(mesh, "source type")
    dst = ArrayType.of(dst).check(mesh, "target type")
    if src.shape != dst.shape:
        raise PlanError(
            f"synthesize: source {src} and target {dst} have different global shapes "
            f"{src.shape} and {dst.shape}; a redistribution keeps the array"
        )
    if isinstance(itemsize, bool) or not isinstance(itemsize, int) or itemsize < 1:
        raise RedistributionError(f"synthesize: itemsize must be a positive integer, got {itemsize!r}")
    from synth.limits import check_itemsize

    check_itemsize(itemsize, "synthesize: itemsize")
    try:
        fn = PLANNERS[planner]
    except KeyError:
        raise RedistributionError(
            f"synthesize: unknown planner {planner!r}; choose one of {sorted(PLANNERS)}"
        ) from None
    if budget_ms is not None:
        if budget_s is not None:
            raise RedistributionError("synthesize: give budget_s or budget_ms, not both")
        from synth.auto import check_budget

        budget_s = check_budget(budget_ms, "ms") / 1e3
    if planner == "auto":
        return fn(mesh, src, dst, itemsize, budget_s=budget_s, cost=cost)
    return fn(mesh, src, dst, itemsize)
