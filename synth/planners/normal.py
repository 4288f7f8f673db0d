"""The ``easy`` (gather everything, then slice) and ``normal`` planners (the paper's
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

Pending sums, uneven dims, sub-axes
-----------------------------------
Axes unreduced in the source but not in the target (``R``) are reduced early: right
after (or, as a second candidate, before) the free DynSlices, each goes into the
target dim that uses it with a ReduceScatter, or, when the target replicates it,
either an AllReduce or a ReduceScatter into the dim with the largest shard (gathered
back at the end). Every combination is planned and the plan with the smallest largest
shard, then the fewest bytes received, then the fewest collectives wins: reducing
before the all-to-alls and gathers shrinks every later shard and message by the
group size. Axes unreduced in both stay pending throughout; axes unreduced only in
the target are added at the end by a local ``Unreduce``. Uneven dims follow the
collectives' nesting rule (see :mod:`synth.collectives`); the easy plan gathers a
dim whole where its shards do not nest and slices it whole again. Sub-axes: every
planner works on the refined mesh (:func:`synth.types.refine`), where each factor an
input type uses is an axis of its own.
"""

from __future__ import annotations

import itertools

from synth.collectives import (
    AllGather,
    AllPermute,
    AllReduce,
    AllToAll,
    DynSlice,
    ReduceScatter,
    Unreduce,
    nests,
)
from synth.errors import CollectiveError, kept_for_message
from synth.mesh import Mesh
from synth.plan import Plan
from synth.types import ArrayType, Dim, refine

#: Maximum number of states the middle search may visit before the fallback.
SEARCH_BUDGET = 4000

#: Largest combined group (product of axis sizes) that one multi-axis AllToAll may span.
#: Larger fused groups are split into several collectives: a direct all-to-all over n
#: devices is n*(n-1) messages, which real libraries do not run as one flat exchange over
#: thousands of devices.
MAX_FUSED_GROUP = 64
#: AllGathers are not capped: the 64-device cap existed only to keep the old per-transfer
#: simulator fast; the flow-level simulator replays a 4096-device gather in seconds and
#: libraries run it as one ring / multi-axis collective (issue 9).
MAX_FUSED_GATHER = 1 << 30


def fused_gathers(dim: int, axes: tuple[str, ...], axis_sizes: dict[str, int]) -> list:
    """AllGathers removing ``axes`` (a suffix of ``dim``) minor-most first, each over
    as many axes as fit in MAX_FUSED_GATHER."""
    out, rest = [], list(axes)
    while rest:
        group = [rest.pop()]
        n = axis_sizes[group[0]]
        while rest and n * axis_sizes[rest[-1]] <= MAX_FUSED_GATHER:
            n *= axis_sizes[rest[-1]]
            group.insert(0, rest.pop())
        out.append(AllGather(dim, tuple(group)))
    return out


def _on_work_mesh(mesh: Mesh, src: ArrayType, dst: ArrayType):
    """The refined mesh and types every planner works on (identity without sub-axes)."""
    if mesh.base:
        return mesh, src, dst
    work, (s, d) = refine(mesh, [src, dst])
    return work, s, d


def _easy_steps(mesh: Mesh, src: ArrayType, dst: ArrayType) -> list:
    reduced = tuple(a for a in src.unreduced if a not in dst.unreduced)
    steps = [AllReduce(reduced)] if reduced else []
    for i, d in enumerate(src.dims):
        axes = list(d.axes)
        while axes:
            a = axes[-1]
            coarse = 1
            for b in axes[:-1]:
                coarse *= mesh.shape[b]
            if nests(d.size, coarse, mesh.shape[a]):
                steps.append(AllGather(i, a))
                axes.pop()
            else:  # shards do not nest: gather the rest of the dim whole
                steps.append(AllGather(i, tuple(axes)))
                axes = []
    for i, d in enumerate(dst.dims):
        if not d.axes:
            continue
        k = 1
        for a in d.axes:
            k *= mesh.shape[a]
        if d.size % k:  # uneven: one slice of the whole dim
            steps.append(DynSlice(i, d.axes))
        else:
            steps += [DynSlice(i, a) for a in d.axes]
    new = tuple(a for a in dst.unreduced if a not in src.unreduced)
    if new:
        steps.append(Unreduce(new))
    return steps


def plan_easy(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4) -> Plan:
    """Reduce every pending sum the target does not keep (one all-reduce), gather every
    source axis (one all-gather per axis, minor-most first; an uneven dim whose shards
    do not nest is gathered whole), then slice every target axis: the naive baseline."""
    wm, ws, wd = _on_work_mesh(mesh, src, dst)
    return Plan.build(wm, src, dst, _easy_steps(wm, ws, wd), itemsize, "easy")


def plan_normal(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4) -> Plan:
    wm, ws, wd = _on_work_mesh(mesh, src, dst)
    best, errors = None, []
    for steps in _candidates(wm, ws, wd, _normal_steps, errors=errors):
        try:
            p = Plan.build(wm, src, dst, steps, itemsize, "normal")
        except CollectiveError as e:
            errors.append(kept_for_message(e))
            continue
        if best is None or _rank(p) < _rank(best):
            best = p
    if best is not None:
        return best
    p = plan_easy(mesh, src, dst, itemsize)
    note = (
        "normal form not applicable: an intermediate type does not divide evenly "
        f"({errors[0] if errors else 'no candidate'}); fell back to the easy plan"
    )
    return Plan(p.mesh, p.src, p.dst, p.steps, p.types, itemsize, "normal", (note,))


def _rank(p: Plan):
    return (p.max_shard_bytes, p.recv_bytes_max_device, p.num_collectives, p.peak_live_bytes)


def _candidates(mesh: Mesh, src: ArrayType, dst: ArrayType, core, limit: int = 16, errors=None):
    """Step lists from ``src`` to ``dst``: the reductions of pending sums (see the module
    doc) placed after or before the free DynSlices, then ``core(mesh, t, dst_core)``
    (a planner for the rest, which keeps the shared pending axes), then an Unreduce of
    the axes only the target leaves pending. Candidates that break a type rule are
    skipped (their errors are appended to ``errors``); without pending sums there is one
    candidate."""
    errors = [] if errors is None else errors
    reduced = [a for a in src.unreduced if a not in dst.unreduced]
    new = tuple(a for a in dst.unreduced if a not in src.unreduced)
    kept = tuple(a for a in src.unreduced if a in dst.unreduced)
    dst_core = dst.with_unreduced(kept)
    tail = [Unreduce(new)] if new else []
    if not reduced:
        try:
            steps = core(mesh, src, dst_core) + tail
        except CollectiveError as e:
            errors.append(kept_for_message(e))
            return
        yield steps
        return
    src_dims = set(src.used_axes)
    slices = [DynSlice(i, a) for i, d in enumerate(dst.dims) for a in d.axes
              if a not in src_dims and a not in src.unreduced]
    local = src.local_shape(mesh)
    options = []
    for r in reduced:
        opts = []
        j = dst.dim_of(r)
        if j is not None:
            opts.append(("rs", j))
        opts.append(("ar",))
        if j is None:
            big = max(range(src.rank), key=lambda i: local[i])
            opts.append(("rs", big))
        options.append(opts)
    seen = 0
    for combo in itertools.product(*options):
        red = _reduction_steps(dst, reduced, combo)
        for order in ("slices-first", "reduce-first"):
            pre = slices + red if order == "slices-first" else red + slices
            try:
                t = src
                for c in pre:
                    t = c.apply(t, mesh)
                steps = pre + core(mesh, t, dst_core) + tail
            except CollectiveError as e:
                errors.append(kept_for_message(e))
                continue
            yield steps
            seen += 1
            if not slices:
                break
        if seen >= limit:
            return


def _reduction_steps(dst: ArrayType, reduced, combo) -> list:
    """ReduceScatters (axes bound for one dim in one op, in the target's order), then
    one AllReduce of the rest (on the smaller shards the reduce-scatters leave)."""
    by_dim: dict[int, list[str]] = {}
    ar = []
    for r, ch in zip(reduced, combo):
        if ch[0] == "ar":
            ar.append(r)
        else:
            by_dim.setdefault(ch[1], []).append(r)
    steps = []
    for j, axes in sorted(by_dim.items()):
        order = list(dst.dims[j].axes)
        axes.sort(key=lambda a: order.index(a) if a in order else len(order))
        steps.append(ReduceScatter(j, tuple(axes)))
    if ar:
        steps.append(AllReduce(tuple(ar)))
    return steps


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
    return ArrayType._derived(  # t less its size-1 axes: valid as t is
        tuple(Dim(d.size, tuple(a for a in d.axes if mesh.shape[a] > 1)) for d in t.dims), t.unreduced)


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
    if not src.is_even(mesh) or not dst.is_even(mesh):
        steps = _uneven_slices(mesh, src, steps)
    a_type = src
    for c in steps:
        a_type = c.apply(a_type, mesh)
    b_dims, gathers = [], []
    for i, (sd, dd) in enumerate(zip(src.dims, dst.dims)):
        extra = tuple(a for a in sd.axes if a not in dst_axes)
        b_dims.append(Dim(dd.size, dd.axes + extra))
        gathers += fused_gathers(i, extra, mesh.shape)
    b_type = ArrayType(tuple(b_dims), src.unreduced)
    if not b_type.is_even(mesh) and (not src.is_even(mesh) or not dst.is_even(mesh)):
        gathers = _uneven_gathers(mesh, b_type, gathers)
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
        return ArrayType(tuple(Dim(sz, axes) for sz, axes in zip(sizes, S)), a_type.unreduced)

    if key(A) == key(B):
        return [AllPermute(b_type)]

    # Layered BFS from both ends. fwd[i]: state -> moves from A; bwd[j]: state -> moves
    # (in forward direction, to be applied in order) leading from state to B.
    fwd = [{A: ()}]
    bwd = [{B: ()}]
    seen_f, seen_b = {A}, {B}
    visited = 2

    def grow(layers, seen, forward, moves=moves):  # bound, not closed over: synth.planners.gcpause
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

    def emit(fpath, permute_to, bpath, to_type=to_type):  # bound, not closed over (gcpause)
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


def _uneven_slices(mesh: Mesh, src: ArrayType, steps: list) -> list:
    """The normal form's DynSlices, merged per dim into one slice where a dim is
    uneven and the one-at-a-time slices would not nest."""
    out, t = [], src
    for i in sorted({c.dim for c in steps}):
        axes = tuple(a for c in steps if c.dim == i for a in (c.axis,))
        try:
            tt = t
            for a in axes:
                tt = DynSlice(i, a).apply(tt, mesh)
            out += [DynSlice(i, a) for a in axes]
            t = tt
        except CollectiveError:
            out.append(DynSlice(i, axes))
            t = DynSlice(i, axes).apply(t, mesh)
    return out


def _uneven_gathers(mesh: Mesh, b_type: ArrayType, gathers: list) -> list:
    """The final AllGathers, with a dim whose shards would not nest gathered in one op."""
    out, t = [], b_type
    for i in sorted({c.dim for c in gathers}, key=lambda i: [c.dim for c in gathers].index(i)):
        mine = [c for c in gathers if c.dim == i]
        try:
            tt = t
            for c in mine:
                tt = c.apply(tt, mesh)
            out += mine
            t = tt
        except CollectiveError:
            axes = tuple(a for c in reversed(mine) for a in ((c.axis,) if isinstance(c.axis, str) else c.axis))
            out.append(AllGather(i, axes))
            t = out[-1].apply(t, mesh)
    return out
