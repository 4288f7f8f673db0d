"""The JAX lowering of each typed collective: one table keyed by the synth ``kind``.

Each entry lowers one step two ways from the same facts:

* ``emit(block, step)``   -- the traced ``jax.lax`` call inside ``jax.shard_map``;
* ``source(step)``        -- the same call as readable Python source (for codegen).

A ``Step`` carries the collective, the type before and after, and the mesh (the plan's
work mesh: with sub-axes, each factor is a mesh axis of its own, named by
:func:`jax_axis_name`). Blocks are padded shards: an uneven dim is padded before a
split (``jnp.pad``) and truncated after a concatenation, exactly where the numpy data
rule does. ``LOWERINGS`` must have an entry for every kind in :data:`synth.COLLECTIVES`
(a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.collectives import Collective
from synth.mesh import Mesh, parse_axis
from synth.plan import Plan
from synth.types import ArrayType


def jax_axis_name(a: str) -> str:
    """The JAX mesh axis name of an axis or sub-axis: ``x`` stays ``x``; the factor
    ``x:(2)4`` of a refined mesh becomes ``x_sub2_4`` (an identifier)."""
    base, pre, size = parse_axis(a)
    return a if pre is None else f"{base}_sub{pre}_{size}"


def jax_axes(axis):
    """``jax.lax``'s axis argument (a name or a tuple of names) for a collective's axis."""
    if isinstance(axis, str):
        return jax_axis_name(axis)
    return tuple(jax_axis_name(a) for a in axis)


def _names(axis) -> tuple[str, ...]:
    return (axis,) if isinstance(axis, str) else tuple(axis)


@dataclass(frozen=True)
class Step:
    index: int
    op: Collective
    t_in: ArrayType
    t_out: ArrayType
    mesh: Mesh
    #: The plan's collectives this step does at once (empty: just ``op``); see :func:`fuse_steps`.
    fused: tuple = ()
    #: A ``DynSlice`` of ``op``'s split dim that follows an ``AllToAll``, done on the operand
    #: before the exchange (each device then sends only the part its peer keeps); see
    #: :func:`_slice_first`. ``t_out`` is then the type after that slice.
    keep: Collective | None = None

    @property
    def comment(self) -> str:
        if self.fused:
            what = f"one {self.op}" + (f" sending only the {self.keep} part" if self.keep is not None else "")
            return (f"steps {self.index + 1}-{self.index + len(self.fused)}: "
                    f"{' ; '.join(str(c) for c in self.fused)}, lowered as {what}  {self.t_in} -> "
                    f"{self.t_out}  local {self.t_in.local_shape(self.mesh)} -> {self.t_out.local_shape(self.mesh)}")
        return (f"step {self.index + 1}: {self.op if self.op.kind != 'all_permute' else 'AllPermute'}"
                f"  {self.t_in} -> {self.t_out}  local {self.t_in.local_shape(self.mesh)} -> "
                f"{self.t_out.local_shape(self.mesh)}")


def plan_steps(plan: Plan) -> list[Step]:
    """The steps the program runs: the plan's steps, with the adjacent pairs that
    :func:`fuse_steps` merges into one collective merged."""
    wt = plan.work_types
    return fuse_steps([Step(i, c, a, b, plan.work_mesh)
                       for i, (c, a, b) in enumerate(zip(plan.steps, wt[:-1], wt[1:]))])


def _fused_pair(first: Step, second: Step):
    """The one collective that does ``first`` then ``second``, or ``None``.

    Two patterns, each kept only if the merged op's type rule gives exactly the second
    step's output type (so the data rule, and the element-by-element check of every run,
    is the plan's).

    **An all-gather whose result is sliced by the same axes along another dim** is an
    all-to-all: ``AllGather(d, A) ; DynSlice(e, A)`` is ``AllToAll(d -> e, A)``. Example
    (``random-0-013`` on ``dgx-h100``, ``x=2,y=2,z=2``): ``[128{y}, 64, 128{z}] ->
    AllGather(2, z) -> [128{y}, 64, 128] -> DynSlice(0, z) -> [128{y,z}, 64, 128]``
    gathers 2 MiB on each device and drops half of it; ``AllToAll(2->0, z)`` receives only
    the half it keeps (0.5 MiB instead of 1 MiB, and no 2 MiB buffer).

    **A reduce-scatter then the all-to-all that moves its axes:** ``ReduceScatter(d1, A)`` then ``AllToAll(d1 -> d0, A)`` over the same
    axes is ``ReduceScatter(d0, A)``. Example (``vocab-50257-embedding-grad-8``):
    ``[50257, 1024]{U:data} -> ReduceScatter(1, data) -> [50257, 1024{data}] ->
    AllToAll(1->0, data) -> [50257{data}, 1024]``; a planner takes the detour because
    dim 0 does not divide by 8, but lowered as two collectives, XLA's GPU compiler
    first transposes the whole partial sum (196 MiB) so that dim 1 is major, and keeps
    it as temp next to the scattered result (220.9 MiB of temp against XLA's 196.3 MiB).
    One reduce-scatter of the uneven dim 0 (an all-reduce in place and this device's
    rows, :class:`_ReduceScatter`) needs no transpose.

    The reduce-scatter may be a run of them on the same dim whose axes, in order, are
    the all-to-all's (:func:`_scatter_run`): ``ReduceScatter(d1, A) ; ReduceScatter(d1,
    B) ; AllToAll(d1 -> d0, A + B)`` is ``ReduceScatter(d0, A + B)`` (the sums nest).
    Example (``vocab-50257-embedding-grad-8`` planned for ``tpu-v5p:2x2x2``, ``data``
    two torus dims): ``ReduceScatter(1, data:(1)4) ; ReduceScatter(1, data:(4)2) ;
    AllToAll(1->0, data)`` compiled as three collectives to 245.4 MiB of temp against
    XLA's 196.3 MiB; as one, 196.3 MiB. A run of reduce-scatters alone is kept: libtpu
    compiles ``fsdp-grad-reduce-scatter-8``'s two (``[14336, 4096]{U:fsdp}``) with 0 B of
    temp, one over all 8 devices with 224 MiB."""
    from synth.collectives import AllGather, AllToAll, DynSlice, ReduceScatter
    from synth.errors import RedistributionError

    a, b = first.op, second.op
    if first.keep is not None:
        return None
    if isinstance(a, AllGather) and isinstance(b, DynSlice):
        if b.dim == a.dim or _names(a.axis) != _names(b.axis):
            return None
        op = AllToAll(a.dim, b.dim, a.axis)
    elif isinstance(a, ReduceScatter) and isinstance(b, AllToAll):
        if b.src_dim != a.dim or _names(a.axis) != _names(b.axis):
            return None
        op = ReduceScatter(b.dst_dim, a.axis)
    else:
        return None
    try:
        if op.apply(first.t_in, first.mesh) != second.t_out:
            return None
    except RedistributionError:
        return None
    return op


def _slice_first(first: Step, second: Step) -> bool:
    """Whether ``second``, a ``DynSlice`` of the split dim of ``first``, an ``AllToAll``,
    can be done on the all-to-all's operand instead: each device then sends its peers
    only the part they keep.

    ``AllToAll(s -> d, A) ; DynSlice(d, B)``: after the exchange a device holds piece
    ``a`` (its index over ``A``) of dim ``d`` and keeps sub-piece ``b`` (its index over
    ``B``) of it. The peers of an all-to-all differ only in their ``A`` coordinates, so
    every sender has the receiver's ``b``: it cuts each outgoing piece to sub-piece ``b``
    first. Example (``random-0-013`` on ``dgx-h100``, after the merge above):
    ``[128{y}, 64, 128{z}] -> AllToAll(2->0, z) -> [128{y,z}, 64, 128] -> DynSlice(0, x)
    -> [128{y,z,x}, 64, 128]``: the local ``64 x 64 x 64`` block is cut into 2 pieces of
    32 rows (one per ``z`` peer), each cut to its 16 rows of this device's ``x`` index,
    and the exchange moves 0.5 MiB instead of 1 MiB into a 0.5 MiB result, with no 1 MiB
    buffer. Only where no dim is padded (the slice is of whole, even pieces)."""
    from synth.collectives import AllToAll, DynSlice

    a, b = first.op, second.op
    if first.keep is not None or not (isinstance(a, AllToAll) and isinstance(b, DynSlice)):
        return False
    if b.dim != a.dst_dim or set(_names(a.axis)) & set(_names(b.axis)):
        return False
    m = first.mesh
    li, lm, lo = first.t_in.local_shape(m), first.t_out.local_shape(m), second.t_out.local_shape(m)
    n, k = _n(first), _n(second)
    return li[a.dst_dim] == n * lm[a.dst_dim] == n * k * lo[a.dst_dim] and lm[a.src_dim] == n * li[a.src_dim]


def _plan_ops(st: Step) -> tuple:
    """The plan's collectives ``st`` does: its merged ones, or its own op."""
    return st.fused or (st.op,)


def _scatter_run(out: list[Step], st: Step) -> int:
    """How many steps at the end of ``out`` are a run of reduce-scatters of one dim that,
    merged, meet ``st`` (an all-to-all) in :func:`_fused_pair`'s second pattern: 0 if
    fewer than two. Example: ``ReduceScatter(1, a) ; ReduceScatter(1, b)`` before
    ``AllToAll(1->0, (a, b))``: 2."""
    from synth.collectives import AllToAll, ReduceScatter

    if not isinstance(st.op, AllToAll):
        return 0
    want, k, names = _names(st.op.axis), 0, ()
    while k < len(out):
        p = out[-1 - k]
        if not isinstance(p.op, ReduceScatter) or p.op.dim != st.op.src_dim or p.fused or p.keep is not None:
            break
        names = _names(p.op.axis) + names
        k += 1
        if names == want:
            return k if k >= 2 else 0
    return 0


def fuse_steps(steps: list[Step]) -> list[Step]:
    """``steps`` with every adjacent pair that :func:`_fused_pair` merges replaced by the
    merged step (it keeps the first step's index and input type, the second's output),
    and every slice that :func:`_slice_first` moves before its all-to-all moved."""
    from synth.collectives import ReduceScatter

    out: list[Step] = []
    for st in steps:
        if k := _scatter_run(out, st):  # a run of reduce-scatters, then their all-to-all
            run = out[-k:]
            del out[-k:]
            merged = ReduceScatter(run[0].op.dim, _names(st.op.axis))
            out.append(Step(run[0].index, merged, run[0].t_in, run[-1].t_out, st.mesh,
                            fused=tuple(c for r in run for c in _plan_ops(r))))
            op = _fused_pair(out[-1], st)
            if op is None:  # the merged run does not meet the all-to-all: keep the plan's steps
                out[-1:] = run
        else:
            op = _fused_pair(out[-1], st) if out else None
        if op is not None:
            prev = out.pop()
            st = Step(prev.index, op, prev.t_in, st.t_out, st.mesh, fused=_plan_ops(prev) + _plan_ops(st))
        elif out and _slice_first(out[-1], st):
            prev = out.pop()
            st = Step(prev.index, prev.op, prev.t_in, st.t_out, st.mesh,
                      fused=_plan_ops(prev) + _plan_ops(st), keep=st.op)
        out.append(st)
    return out


# -- permutes: rounds of partial permutations ----------------------------------------
def permute_rounds(sources: np.ndarray) -> list[list[tuple[int, int]]]:
    """Split "device d receives from sources[d]" into rounds that ``lax.ppermute`` takes.

    A ppermute needs each device to send at most once and receive at most once per
    call. Devices that keep their own block take part in no round. A holder that must
    feed several devices sends once per round; most plans need a single round."""
    pending = [(int(s), d) for d, s in enumerate(sources) if int(s) != d]
    rounds = []
    while pending:
        used, this, rest = set(), [], []
        for s, d in pending:
            (rest if s in used else this).append((s, d))
            if s not in used:
                used.add(s)
        rounds.append(this)
        pending = rest
    return rounds


def complete_round(pairs, num_devices: int):
    """``pairs`` plus ``(d, d)`` for every device that neither sends nor receives, when
    that makes a full permutation (then no device needs to keep its old block by hand);
    otherwise ``None``."""
    senders = {s for s, _ in pairs}
    receivers = {d for _, d in pairs}
    idle = [d for d in range(num_devices) if d not in receivers]
    if any(d in senders for d in idle):
        return None
    return sorted(list(pairs) + [(d, d) for d in idle], key=lambda p: p[1])


def _linear_index(mesh: Mesh):
    """Row-major device index inside shard_map, from ``lax.axis_index`` per axis."""
    from jax import lax

    idx = 0
    for name, size in zip(mesh.names, mesh.sizes):
        idx = idx * size + lax.axis_index(jax_axis_name(name))
    return idx


def _group_index(mesh: Mesh, axis):
    """This device's index in its group over ``axis`` (major to minor), traced."""
    from jax import lax

    idx = 0
    for a in _names(axis):
        idx = idx * mesh.axis_size(a) + lax.axis_index(jax_axis_name(a))
    return idx


def _group_index_src(mesh: Mesh, axis) -> str:
    parts = [f"lax.axis_index({jax_axis_name(a)!r})" for a in _names(axis)]
    expr = parts[0]
    for a, p in zip(_names(axis)[1:], parts[1:]):
        expr = f"({expr}) * {mesh.axis_size(a)} + {p}"
    return expr


def _pad_to(block, dim: int, length: int):
    import jax.numpy as jnp

    if block.shape[dim] >= length:
        return block
    pad = [(0, 0)] * block.ndim
    pad[dim] = (0, length - block.shape[dim])
    return jnp.pad(block, pad)


def _cut_to(block, dim: int, length: int):
    from jax import lax

    if block.shape[dim] <= length:
        return block
    return lax.slice_in_dim(block, 0, length, axis=dim)


def _pad_src(dim: int, have: int, length: int) -> list[str]:
    if have >= length:
        return []
    pad = ["(0, 0)"] * (dim + 1)
    pad[dim] = f"(0, {length - have})"
    return [f"block = jnp.pad(block, [{', '.join(pad)}] + [(0, 0)] * (block.ndim - {dim + 1}))"
            "  # uneven dim: pad to whole shards"]


def _cut_src(dim: int, have: int, length: int) -> list[str]:
    if have <= length:
        return []
    return [f"block = lax.slice_in_dim(block, 0, {length}, axis={dim})  # uneven dim: drop padding"]


def _n(step: Step) -> int:
    n = 1
    for a in _names(step.op.axis):
        n *= step.mesh.axis_size(a)
    return n


# -- the kinds ----------------------------------------------------------------------
class _DynSlice:
    kind = "dyn_slice"

    @staticmethod
    def emit(block, step: Step):
        from jax import lax

        c = step.op
        n, piece = _n(step), step.t_out.local_shape(step.mesh)[c.dim]
        block = _pad_to(block, c.dim, n * piece)
        return lax.dynamic_slice_in_dim(block, _group_index(step.mesh, c.axis) * piece, piece, axis=c.dim)

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        n, piece = _n(step), step.t_out.local_shape(step.mesh)[c.dim]
        have = step.t_in.local_shape(step.mesh)[c.dim]
        return _pad_src(c.dim, have, n * piece) + [
            f"block = lax.dynamic_slice_in_dim(block, {_group_index_src(step.mesh, c.axis)} * {piece}, "
            f"{piece}, axis={c.dim})"]


class _AllGather:
    kind = "all_gather"

    @staticmethod
    def emit(block, step: Step):
        from jax import lax

        c = step.op
        out = lax.all_gather(block, jax_axes(c.axis), axis=c.dim, tiled=True)
        return _cut_to(out, c.dim, step.t_out.local_shape(step.mesh)[c.dim])

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        n = _n(step)
        have = n * step.t_in.local_shape(step.mesh)[c.dim]
        return [f"block = lax.all_gather(block, {jax_axes(c.axis)!r}, axis={c.dim}, tiled=True)"] + \
            _cut_src(c.dim, have, step.t_out.local_shape(step.mesh)[c.dim])


def _a2a_moves(shape, split, concat, n):
    """Shapes and axis moves of :func:`_all_to_all` for a block of ``shape``."""
    cut = tuple(shape[:split]) + (n, shape[split] // n) + tuple(shape[split + 1:])
    dest = concat  # the source index lands right before the concat dim (either side of split)
    out = list(shape)
    out[split], out[concat] = shape[split] // n, shape[concat] * n
    return cut, dest, tuple(out)


def _all_to_all(block, axes, split: int, concat: int, n: int, keep=None):
    """``lax.all_to_all(block, axes, split, concat, tiled=True)``, written the way XLA
    writes its own resharding: the split dimension is cut into ``(n, rest)``, the
    exchange runs on that leading piece (split = concat axis), and the source index is
    then merged into the concat dimension. Same values; on TPU the layout assignment
    makes these reshapes free, where the tiled form compiles to extra transposing
    copies (twice XLA's temp memory on e.g. ``[8{data}, 4096, 128256{tensor}] ->
    [8{data}, 4096{tensor}, 128256]``, measured with ``python -m experiments tpu-memory``)."""
    import jax.numpy as jnp
    from jax import lax

    cut, dest, out = _a2a_moves(block.shape, split, concat, n)
    x = block.reshape(cut)
    if keep is not None:  # (index, size): each outgoing piece cut to the sub-piece its receiver keeps
        idx, size = keep
        x = lax.dynamic_slice_in_dim(x, idx * size, size, axis=split + 1)
        out = out[:split] + (size,) + out[split + 1:]
    x = lax.all_to_all(x, axes, split_axis=split, concat_axis=split, tiled=True)
    return jnp.moveaxis(x, split, dest).reshape(out)


def _all_to_all_src(axes, split: int, concat: int, n: int, keep=None) -> list[str]:
    cut = f"block.shape[:{split}] + ({n}, block.shape[{split}] // {n}) + block.shape[{split + 1}:]"
    if keep is None:
        return [f"_out = list(block.shape); _out[{split}] //= {n}; _out[{concat}] *= {n}",
                f"block = lax.all_to_all(block.reshape({cut}), {axes!r}, split_axis={split}, "
                f"concat_axis={split}, tiled=True)",
                f"block = jnp.moveaxis(block, {split}, {concat}).reshape(_out)"]
    idx, size = keep
    return [f"_out = list(block.shape); _out[{split}] = {size}; _out[{concat}] *= {n}",
            f"block = lax.dynamic_slice_in_dim(block.reshape({cut}), ({idx}) * {size}, {size}, axis={split + 1})"
            "  # send each peer only the part it keeps",
            f"block = lax.all_to_all(block, {axes!r}, split_axis={split}, concat_axis={split}, tiled=True)",
            f"block = jnp.moveaxis(block, {split}, {concat}).reshape(_out)"]


class _AllToAll:
    kind = "all_to_all"

    @staticmethod
    def emit(block, step: Step):
        c = step.op
        n = _n(step)
        if step.keep is not None:  # even pieces only (_slice_first): no padding, no cut
            size = step.t_out.local_shape(step.mesh)[c.dst_dim]
            return _all_to_all(block, jax_axes(c.axis), c.dst_dim, c.src_dim, n,
                               keep=(_group_index(step.mesh, step.keep.axis), size))
        block = _pad_to(block, c.dst_dim, n * step.t_out.local_shape(step.mesh)[c.dst_dim])
        out = _all_to_all(block, jax_axes(c.axis), c.dst_dim, c.src_dim, n)
        return _cut_to(out, c.src_dim, step.t_out.local_shape(step.mesh)[c.src_dim])

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        n = _n(step)
        li, lo = step.t_in.local_shape(step.mesh), step.t_out.local_shape(step.mesh)
        if step.keep is not None:
            return _all_to_all_src(jax_axes(c.axis), c.dst_dim, c.src_dim, n,
                                   keep=(_group_index_src(step.mesh, step.keep.axis), lo[c.dst_dim]))
        return _pad_src(c.dst_dim, li[c.dst_dim], n * lo[c.dst_dim]) + _all_to_all_src(
            jax_axes(c.axis), c.dst_dim, c.src_dim, n) + _cut_src(c.src_dim, n * li[c.src_dim], lo[c.src_dim])


class _AllReduce:
    kind = "all_reduce"

    @staticmethod
    def emit(block, step: Step):
        from jax import lax

        return lax.psum(block, jax_axes(step.op.axis))

    @staticmethod
    def source(step: Step) -> list[str]:
        return [f"block = lax.psum(block, {jax_axes(step.op.axis)!r})"]


class _ReduceScatter:
    kind = "reduce_scatter"

    @staticmethod
    def emit(block, step: Step):
        from jax import lax

        c = step.op
        n = _n(step)
        fine = step.t_out.local_shape(step.mesh)[c.dim]
        have = block.shape[c.dim]
        if have < n * fine:
            # An uneven whole dim (e.g. 50257 rows over 8: blocks of 6283, 7 rows of padding).
            # Padding it for psum_scatter copies the whole partial, which a TPU allocates as
            # temp (vocab-50257-embedding-grad-8: 392.69 MiB against XLA's 196.34 MiB). So,
            # as XLA does: all-reduce in place, then keep this device's block: a slice of the
            # sum padded to whole blocks, which the compiler fuses into one loop that reads
            # the sum (the pad is never materialised; a window and a roll of it cost 3 more
            # copies on TPU).
            full = _pad_to(lax.psum(block, jax_axes(c.axis)), c.dim, n * fine)
            return lax.dynamic_slice_in_dim(full, _group_index(step.mesh, c.axis) * fine, fine, axis=c.dim)
        # Scattered along its own dim, as XLA writes its own reduce-scatter: a TPU compiles
        # it in place (bringing the pieces to the front first made it an all-reduce there).
        return lax.psum_scatter(block, jax_axes(c.axis), scatter_dimension=c.dim, tiled=True)

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        n = _n(step)
        fine = step.t_out.local_shape(step.mesh)[c.dim]
        li = step.t_in.local_shape(step.mesh)
        if li[c.dim] < n * fine:  # uneven whole dim: all-reduce in place, keep own block (see emit)
            pad = ["(0, 0)"] * (c.dim + 1)
            pad[c.dim] = f"(0, {n * fine - li[c.dim]})"
            return [f"full = lax.psum(block, {jax_axes(c.axis)!r})  # uneven dim: all-reduce in place",
                    f"full = jnp.pad(full, [{', '.join(pad)}] + [(0, 0)] * (full.ndim - {c.dim + 1}))"
                    "  # fused into the slice: never materialised",
                    f"block = lax.dynamic_slice_in_dim(full, ({_group_index_src(step.mesh, c.axis)}) * {fine}, "
                    f"{fine}, axis={c.dim})"]
        return [f"block = lax.psum_scatter(block, {jax_axes(c.axis)!r}, "
                f"scatter_dimension={c.dim}, tiled=True)"]


class _Unreduce:
    kind = "unreduce"

    @staticmethod
    def emit(block, step: Step):
        import jax.numpy as jnp

        return jnp.where(_group_index(step.mesh, step.op.axis) == 0, block, jnp.zeros_like(block))

    @staticmethod
    def source(step: Step) -> list[str]:
        return [f"block = jnp.where({_group_index_src(step.mesh, step.op.axis)} == 0, block, "
                "jnp.zeros_like(block))  # one device per group keeps the value"]


class _AllPermute:
    kind = "all_permute"

    @staticmethod
    def rounds(step: Step):
        return permute_rounds(step.op.sources(step.t_in, step.mesh))

    @staticmethod
    def emit(block, step: Step):
        import jax.numpy as jnp
        from jax import lax

        axes = tuple(jax_axis_name(a) for a in step.mesh.names)
        rounds = _AllPermute.rounds(step)
        if not rounds:
            return block
        if len(rounds) == 1:
            full = complete_round(rounds[0], step.mesh.size)
            if full is not None:
                return lax.ppermute(block, axes, full)
        me = _linear_index(step.mesh)
        out = block
        for pairs in rounds:
            got = lax.ppermute(block, axes, pairs)
            mask = np.zeros(step.mesh.size, dtype=bool)
            mask[[d for _, d in pairs]] = True
            out = jnp.where(jnp.asarray(mask)[me], got, out)
        return out

    @staticmethod
    def source(step: Step) -> list[str]:
        axes = tuple(jax_axis_name(a) for a in step.mesh.names)
        rounds = _AllPermute.rounds(step)
        if not rounds:
            return ["pass  # every device already holds its new block"]
        lines = []
        if len(rounds) == 1:
            full = complete_round(rounds[0], step.mesh.size)
            if full is not None:
                return [f"block = lax.ppermute(block, {axes!r}, perm={full!r})"]
        lines.append(f"me = _device_index({axes!r})")
        lines.append("out = block")
        for pairs in rounds:
            dests = sorted(d for _, d in pairs)
            lines.append(f"got = lax.ppermute(block, {axes!r}, perm={pairs!r})")
            lines.append(f"out = jnp.where(jnp.isin(me, jnp.array({dests!r})), got, out)")
        lines.append("block = out")
        return lines


# -- several dims in one collective -------------------------------------------------
def _singles_steps(step: Step) -> list[Step]:
    """The one-dim steps a multi-dim step fuses, with their intermediate types."""
    types = step.op.chain(step.t_in, step.mesh)
    return [Step(step.index, c, a, b, step.mesh)
            for c, a, b in zip(step.op.singles(), types[:-1], types[1:])]


def _move_sizes(step: Step) -> list[int]:
    w = len(step.op.moves[0]) - 1
    out = []
    for m in step.op.moves:
        n = 1
        for a in _names(m[w]):
            n *= step.mesh.axis_size(a)
        out.append(n)
    return out


def _unstack_layout(rank: int, dims: list[int]):
    """For a block with leading group dims ``(n_1, .., n_k)`` followed by ``rank`` block
    dims, the transpose that puts each ``n_i`` right before block dim ``dims[i]``.
    Example: rank 2, dims [0, 1]: (n1, n2, r0, r1) -> (n1, r0, n2, r1)."""
    k = len(dims)
    perm = []
    for d in range(rank):
        if d in dims:
            perm.append(dims.index(d))
        perm.append(k + d)
    return perm


class _MultiDynSlice:
    kind = "multi_dyn_slice"

    @staticmethod
    def emit(block, step: Step):
        for st in _singles_steps(step):
            block = _DynSlice.emit(block, st)
        return block  # XLA fuses the slices into one

    @staticmethod
    def source(step: Step) -> list[str]:
        return [line for st in _singles_steps(step) for line in _DynSlice.source(st)]


class _MultiAllGather:
    """One ``lax.all_gather`` over every move's axes (``tiled=False``: a leading dim of
    the group's size, major to minor over the axes), then each move's piece index is
    moved in front of its dim and merged: one HLO all-gather and a local transpose."""

    kind = "multi_all_gather"

    @staticmethod
    def emit(block, step: Step):
        import jax.numpy as jnp
        from jax import lax

        c, sizes = step.op, _move_sizes(step)
        dims = [d for d, _ in c.moves]
        x = lax.all_gather(block, jax_axes(c.axis), axis=0, tiled=False)
        x = x.reshape(tuple(sizes) + block.shape)
        x = jnp.transpose(x, _unstack_layout(block.ndim, dims))
        shape = [s * (sizes[dims.index(d)] if d in dims else 1) for d, s in enumerate(block.shape)]
        x = x.reshape(shape)
        for d in dims:
            x = _cut_to(x, d, step.t_out.local_shape(step.mesh)[d])
        return x

    @staticmethod
    def source(step: Step) -> list[str]:
        c, sizes = step.op, _move_sizes(step)
        dims = [d for d, _ in c.moves]
        rank = step.t_in.rank
        li = step.t_in.local_shape(step.mesh)
        shape = [s * (sizes[dims.index(d)] if d in dims else 1) for d, s in enumerate(li)]
        lines = [f"block = lax.all_gather(block, {jax_axes(c.axis)!r}, axis=0, tiled=False)"
                 "  # one all-gather over every move's axes",
                 f"block = jnp.transpose(block.reshape({tuple(sizes)!r} + block.shape[1:]), "
                 f"{_unstack_layout(rank, dims)!r}).reshape({tuple(shape)!r})"]
        for d in dims:
            lines += _cut_src(d, shape[d], step.t_out.local_shape(step.mesh)[d])
        return lines


def _stack_layout(rank: int, dims: list[int]):
    """For a block with leading dims ``(n_0, .., n_k-1)`` followed by ``rank`` block dims,
    the transpose that puts the leading dims of block dim ``d`` (those ``i`` with
    ``dims[i] == d``) right before it, the last listed most major. Distinct ``dims`` give
    :func:`_unstack_layout`'s order. Example, rank 3, dims [2, 0, 0]:
    (n0, n1, n2, r0, r1, r2) -> (n2, n1, r0, r1, n0, r2)."""
    k = len(dims)
    perm = []
    for d in range(rank):
        perm += [i for i in range(k - 1, -1, -1) if dims[i] == d]
        perm.append(k + d)
    return perm


def _merge_steps(sizes, rest, src_dims) -> list[tuple[int, tuple[int, ...]]]:
    """For a block of shape ``sizes + rest`` (one leading sender index per move, in move
    order), the ``(destination, shape)`` of each step that moves the first leading dim in
    front of its source dim and merges the two, first move first (so a later move out of
    a shared source dim lands more major). Example, sizes (4, 2), rest (8, 2, 4), source
    dims [2, 0]: the ``4`` goes before dim 2 -> ``(2, 8, 2, 16)``, then the ``2`` before
    dim 0 -> ``(16, 2, 16)``."""
    shape = list(sizes) + list(rest)
    out = []
    k = len(sizes)
    for i, s in enumerate(src_dims):
        left = k - i  # leading dims still in front, this one first
        dest = left - 1 + s
        lead = shape.pop(0)
        shape.insert(dest, lead)
        shape[dest: dest + 2] = [shape[dest] * shape[dest + 1]]
        out.append((dest, tuple(shape)))
    return out


class _MultiAllToAll:
    """One ``lax.all_to_all`` over every move's axes (the order of the moves). Each
    destination dim ``d`` is cut into ``(n_a, n_b, .., rest)``, one piece dim per move
    into it, first move most major.

    * Moves into several destination dims: the piece dims are brought to the front in move
      order as one dim of the group's size, exchanged (split = concat = 0), unflattened
      into one dim per move (the sender's index on it), and one transpose puts each in
      front of its source dim, where it is merged.
    * Every move into one destination dim (its piece dims adjacent, in move order): the
      exchange runs on them in place, as XLA writes its own all-to-all (no transpose
      before it), and each sender index is then merged into its source dim one at a time
      (:func:`_merge_steps`, an optimization barrier between two merges), as the chain of
      one-dim all-to-alls would: on libtpu this keeps the compiled peak of
      ``[256{y}, 256, 256{x}] -> [256, 256{x,y}, 256]`` at the chain's 32 MiB (40 MiB with
      the merges fused into one transpose). Example, ``x=4,y=2``,
      ``AllToAll(2->1:x, 0->1:y)`` on a local ``[8, 16, 4]``: reshape to ``(8, 8, 2, 4)``,
      exchange on dim 1, reshape ``(8, 4, 2, 2, 4)``, move the piece dims to the front
      ``(4, 2, 8, 2, 4)``, merge the ``x`` index before dim 2 ``(2, 8, 2, 16)``, then the
      ``y`` index before dim 0 ``(16, 2, 16)``: one HLO all-to-all.

    The last move out of a shared source dim lands most major there."""

    kind = "multi_all_to_all"

    @staticmethod
    def _plan(step: Step):
        c, sizes = step.op, _move_sizes(step)
        li, lo = step.t_in.local_shape(step.mesh), step.t_out.local_shape(step.mesh)
        rank = len(li)
        into = {d: [k for k, m in enumerate(c.moves) if m[1] == d] for d in range(rank)}
        padded = list(li)
        for d, ks in into.items():
            if ks:
                padded[d] = lo[d]
                for k in ks:
                    padded[d] *= sizes[k]
        # cut shape: each destination dim d becomes (n_k for the moves k into it, lo[d])
        cut, pos = [], {}
        for d in range(rank):
            for k in into[d]:
                pos[k] = len(cut)
                cut.append(sizes[k])
            cut.append(lo[d] if into[d] else padded[d])
        order = [pos[k] for k in range(len(c.moves))]  # piece dims in move order
        front = order + [i for i in range(len(cut)) if i not in order]
        rest = [lo[d] if into[d] else padded[d] for d in range(rank)]
        src_dims = [s for s, _, _ in c.moves]
        grow = [1] * rank
        for s, k in zip(src_dims, sizes):
            grow[s] *= k
        shape = [r * g for r, g in zip(rest, grow)]
        return c, sizes, padded, cut, front, rest, src_dims, shape, li, lo

    @staticmethod
    def _one_destination(front, k) -> int | None:
        """The position of the piece dims in the cut shape when they are adjacent and in
        move order (every move into one destination dim), else None."""
        p = front[0]
        return p if front[:k] == list(range(p, p + k)) else None

    @staticmethod
    def emit(block, step: Step):
        import jax.numpy as jnp
        from jax import lax

        c, sizes, padded, cut, front, rest, src_dims, shape, li, lo = _MultiAllToAll._plan(step)
        n = 1
        for s in sizes:
            n *= s
        for d in range(len(li)):
            block = _pad_to(block, d, padded[d])
        k = len(sizes)
        p = _MultiAllToAll._one_destination(front, k)
        if p is not None:
            x = block.reshape(tuple(cut[:p]) + (n,) + tuple(cut[p + k:]))
            x = lax.all_to_all(x, jax_axes(c.axis), split_axis=p, concat_axis=p, tiled=True)
            x = jnp.moveaxis(x.reshape(cut), list(range(p, p + k)), list(range(k)))
            for i, (dest, shp) in enumerate(_merge_steps(sizes, rest, src_dims)):
                if i:
                    x = lax.optimization_barrier(x)
                x = jnp.moveaxis(x, 0, dest).reshape(shp)
        else:
            x = jnp.transpose(block.reshape(cut), front)
            x = lax.all_to_all(x.reshape((n,) + tuple(rest)), jax_axes(c.axis), split_axis=0, concat_axis=0,
                               tiled=True)
            x = jnp.transpose(x.reshape(tuple(sizes) + tuple(rest)), _stack_layout(len(rest), src_dims))
            x = x.reshape(shape)
        for s in sorted(set(src_dims)):
            x = _cut_to(x, s, lo[s])
        return x

    @staticmethod
    def source(step: Step) -> list[str]:
        c, sizes, padded, cut, front, rest, src_dims, shape, li, lo = _MultiAllToAll._plan(step)
        n = 1
        for s in sizes:
            n *= s
        k = len(sizes)
        lines = []
        for d in range(len(li)):
            lines += _pad_src(d, li[d], padded[d])
        p = _MultiAllToAll._one_destination(front, k)
        if p is not None:
            lines += [f"block = lax.all_to_all(block.reshape({tuple(cut[:p]) + (n,) + tuple(cut[p + k:])!r}), "
                      f"{jax_axes(c.axis)!r}, split_axis={p}, concat_axis={p}, tiled=True)"
                      "  # one all-to-all over every move's axes",
                      f"block = jnp.moveaxis(block.reshape({tuple(cut)!r}), {list(range(p, p + k))!r}, "
                      f"{list(range(k))!r})  # the senders' indices in front, move by move"]
            for i, (dest, shp) in enumerate(_merge_steps(sizes, rest, src_dims)):
                if i:
                    lines.append("block = lax.optimization_barrier(block)")
                lines.append(f"block = jnp.moveaxis(block, 0, {dest}).reshape({shp!r})")
        else:
            lines += [f"block = jnp.transpose(block.reshape({tuple(cut)!r}), {front!r}).reshape({(n,) + tuple(rest)!r})",
                      f"block = lax.all_to_all(block, {jax_axes(c.axis)!r}, split_axis=0, concat_axis=0, "
                      "tiled=True)  # one all-to-all over every move's axes",
                      f"block = jnp.transpose(block.reshape({tuple(sizes) + tuple(rest)!r}), "
                      f"{_stack_layout(len(rest), src_dims)!r}).reshape({tuple(shape)!r})"]
        for s in sorted(set(src_dims)):
            lines += _cut_src(s, shape[s], lo[s])
        return lines


class _ShardedToUnreduced:
    """Local: the block goes to its offset in a zero block of the unsplit size."""

    kind = "sharded_to_unreduced"

    @staticmethod
    def emit(block, step: Step):
        import jax.numpy as jnp
        from jax import lax

        c = step.op
        n, piece = _n(step), block.shape[c.dim]
        shape = list(block.shape)
        shape[c.dim] = n * piece
        out = lax.dynamic_update_slice_in_dim(jnp.zeros(shape, block.dtype), block,
                                              _group_index(step.mesh, c.axis) * piece, axis=c.dim)
        return _cut_to(out, c.dim, step.t_out.local_shape(step.mesh)[c.dim])

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        n = _n(step)
        piece = step.t_in.local_shape(step.mesh)[c.dim]
        return [f"_z = list(block.shape); _z[{c.dim}] = {n * piece}",
                f"block = lax.dynamic_update_slice_in_dim(jnp.zeros(_z, block.dtype), block, "
                f"{_group_index_src(step.mesh, c.axis)} * {piece}, axis={c.dim})"
                "  # sharded -> unreduced: my block at my offset, zeros elsewhere"] + \
            _cut_src(c.dim, n * piece, step.t_out.local_shape(step.mesh)[c.dim])


#: kind -> lowering. Keyed exactly like :data:`synth.COLLECTIVES`.
LOWERINGS = {low.kind: low for low in (_DynSlice, _AllGather, _AllToAll, _AllPermute, _AllReduce,
                                        _ReduceScatter, _Unreduce, _MultiDynSlice, _MultiAllGather,
                                        _MultiAllToAll, _ShardedToUnreduced)}


def body_for(plan: Plan):
    """The per-device function: source block in, target block out. With pending sums
    the block carries a leading stacking dim of 1 (see :func:`executor.run.layout`)."""
    steps = plan_steps(plan)
    stacked_in = bool(plan.work_types[0].unreduced)
    stacked_out = bool(plan.work_types[-1].unreduced)

    def body(block):
        if stacked_in:
            block = block[0]
        for st in steps:
            block = LOWERINGS[st.op.kind].emit(block, st)
        if stacked_out:
            block = block[None]
        return block

    return body
