"""The typed collectives: one table, one class per kind.

Each kind keeps its facets together:

* ``apply(t, mesh)``        -- type rule: the type after the collective, or a precise error;
* ``run(blocks, t, mesh)``  -- data rule: per-device numpy blocks after the collective,
                               computed only from the blocks other devices hold;
* ``recv_elems(t, mesh)``   -- cost: elements each device receives (per device);
* ``peak_elems(t, mesh)``   -- memory: the largest set of buffers live at once during
                               the step (input + output, plus any re-padding buffer);
* ``schedule_ops(...)``     -- device-level lowering (groups or pairs and bytes) for the
                               simulator (see :mod:`synth.schedule`).

The JAX lowering of each kind lives in ``executor/lowering.py`` (the only package that
may import jax) in a table keyed by the same ``kind`` string; a test checks that every
kind here has an entry there and in the simulator.

**Pending sums.** With unreduced axes a device holds a partial block. Every data rule
is linear, so gathers, all-to-alls, slices and permutes move partial blocks as they
move whole ones; a permute keeps each device's coordinates on the unreduced axes so
that every group still sums to the truth. ``AllReduce`` and ``ReduceScatter`` sum over
a group; ``Unreduce`` (local) keeps the value on the first device of each group and
zeros on the others.

**Uneven dimensions.** Blocks are padded shards (``ceil(size / split)`` elements per
dim, padding at the end). Changing a dim's split from ``k`` to ``k*n`` (a slice, the
split side of an all-to-all, a reduce-scatter) or back (a gather, the concatenating
side of an all-to-all) is a group collective only when the coarse blocks nest the fine
ones: ``ceil(size/k) == n * ceil(size/(k*n))``, or ``k == 1`` (the whole dim). In the
second case the op re-pads: it pads the whole dim to ``n`` fine shards before
splitting, or truncates the ``n`` gathered shards to the dim's size. That buffer is
counted by ``peak_elems`` and appears as a ``copy`` op in the schedule; padding moves
and is counted like data, and never reaches the result (the interpreter fills padding
with garbage and checks).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from synth.errors import CollectiveError
from synth.mesh import Mesh
from synth.types import ArrayType


def _check_dim(t: ArrayType, dim: int, who: str):
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not (0 <= dim < t.rank):
        raise CollectiveError(f"{who}: dim {dim!r} is out of range for rank-{t.rank} type {t}")


def _axes_tuple(axis) -> tuple[str, ...]:
    return (axis,) if isinstance(axis, str) else tuple(axis)


def _canonical_axis(obj, who: str):
    """A one-name tuple becomes the name; a list becomes a tuple (frozen, hashable)."""
    axis = obj.axis
    if not isinstance(axis, str):
        try:
            axis = tuple(axis)
        except TypeError:
            raise CollectiveError(f"{who}: axis {axis!r} must be a name or a list of names") from None
        if not axis:
            raise CollectiveError(f"{who}: needs at least one mesh axis")
        if not all(isinstance(a, str) for a in axis):
            raise CollectiveError(f"{who}: axis {axis!r} must be a name or a list of names")
        if len(set(axis)) != len(axis):
            raise CollectiveError(f"{who}: axis {axis!r} names an axis twice")
        if len(axis) == 1:
            axis = axis[0]
    object.__setattr__(obj, "axis", axis)


def _axes_text(axis) -> str:
    return axis if isinstance(axis, str) else "(" + ",".join(axis) + ")"


def _axis_json(axis):
    return axis if isinstance(axis, str) else list(axis)


def _group_size(mesh: Mesh, axis) -> int:
    n = 1
    for a in _axes_tuple(axis):
        n *= mesh.axis_size(a)
    return n


def _strides(mesh: Mesh, names) -> list[tuple[int, int]]:
    """``(stride in device ids, size)`` of each axis or sub-axis name."""
    out = []
    for a in names:
        if a in mesh.names:
            k = mesh.names.index(a)
            out.append((math.prod(mesh.sizes[k + 1:]), mesh.sizes[k]))
        else:
            base, pre, size = mesh.factor_of(a)
            k = mesh.names.index(base)
            out.append((math.prod(mesh.sizes[k + 1:]) * (mesh.sizes[k] // (pre * size)), size))
    return out


def _group_of(mesh: Mesh, axis, d: int) -> list[int]:
    """Devices that differ from ``d`` only on ``axis`` (a name or a tuple of names),
    ordered by the mixed-radix index of those coordinates, major to minor."""
    names = _axes_tuple(axis)
    st = _strides(mesh, names)
    base = d - sum(int(mesh.axis_coords(a)[d]) * s for a, (s, _) in zip(names, st))
    group = [base]
    for s, n in st:
        group = [g + j * s for g in group for j in range(n)]
    return group


def groups_of(mesh: Mesh, axis) -> tuple[tuple[int, ...], ...]:
    """All groups over ``axis`` (names or sub-axis names), each ordered major to minor,
    groups ordered by their smallest id (as :meth:`Mesh.groups`)."""
    names = _axes_tuple(axis)
    if all(a in mesh.names for a in names):
        return tuple(tuple(g) for g in mesh.groups(names))
    st = _strides(mesh, names)
    ids = np.arange(mesh.size)
    base = ids.copy()
    for a, (s, _) in zip(names, st):
        base -= mesh.axis_coords(a) * s
    offs = np.zeros(1, dtype=np.int64)
    for s, n in st:
        offs = (offs[:, None] + np.arange(n)[None, :] * s).reshape(-1)
    firsts = np.unique(base)
    return tuple(tuple(int(v) for v in row) for row in firsts[:, None] + offs[None, :])


def _group_index(mesh: Mesh, axis, d: int) -> int:
    idx = 0
    for a in _axes_tuple(axis):
        idx = idx * mesh.axis_size(a) + int(mesh.axis_coords(a)[d])
    return idx


# -- uneven dimensions: nesting and re-padding ------------------------------------
def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _check_divides(t: ArrayType, mesh: Mesh, dim: int, names, n: int, who: str, uneven_fix: str):
    """The local size of ``dim`` (already split ``k`` ways) must divide by the group size
    ``n`` of ``names`` when ``k > 1``; ``uneven_fix`` is the hint for an uneven dim."""
    k = t.split(mesh, dim)
    size = t.dims[dim].size
    if k > 1 and _ceil(size, k) % n:
        raise CollectiveError(
            f"{who}: local size {_ceil(size, k)} of dim {dim} is not divisible by "
            f"{'*'.join(f'{a}={mesh.axis_size(a)}' for a in names)}"
            + (f" = {n}" if len(names) > 1 else "")
            + ("" if size % k == 0 else f"; with uneven dims {uneven_fix}"))


def nests(size: int, coarse: int, n: int) -> bool:
    """Whether blocks of a dim of ``size`` split ``coarse`` ways hold, each, exactly
    ``n`` consecutive blocks of the split ``coarse * n`` (or the dim is whole)."""
    return coarse == 1 or _ceil(size, coarse) == n * _ceil(size, coarse * n)


def _nest_error(who, t, dim, coarse, n):
    size = t.dims[dim].size
    return CollectiveError(
        f"{who}: dim {dim} (size {size}) split {coarse} ways has shards of "
        f"{_ceil(size, coarse)}, which do not hold {n} whole shards of {_ceil(size, coarse * n)} "
        f"(the split {coarse * n}); with uneven dims this step needs the dim whole (split 1) "
        "or a size where the shards nest: gather the dim first")


def _split_piece(b: np.ndarray, dim: int, n: int, c: int, fine: int) -> np.ndarray:
    """Piece ``c`` of ``n`` (each ``fine`` long) of a coarse padded block along ``dim``;
    a block shorter than ``n * fine`` (a whole dim) is padded first."""
    if b.shape[dim] < n * fine:
        pad = [(0, 0)] * b.ndim
        pad[dim] = (0, n * fine - b.shape[dim])
        b = np.pad(b, pad)
    idx = [slice(None)] * b.ndim
    idx[dim] = slice(c * fine, (c + 1) * fine)
    return b[tuple(idx)]


def _join(pieces, dim: int, coarse_len: int) -> np.ndarray:
    """Concatenate fine pieces along ``dim``; truncate to ``coarse_len`` (a whole dim)."""
    out = np.concatenate(pieces, axis=dim)
    if out.shape[dim] > coarse_len:
        idx = [slice(None)] * out.ndim
        idx[dim] = slice(0, coarse_len)
        out = out[tuple(idx)]
    return out


def _unused(t: ArrayType, names, who):
    for a in names:
        if a in t.all_axes:
            where = f"dim {t.dim_of(a)}" if a in t.used_axes else "the unreduced set"
            raise CollectiveError(f"{who}: axis {a!r} is already used ({where})")


def _suffix(t: ArrayType, dim, names, who):
    axes = t.dims[dim].axes
    if len(names) > len(axes) or axes[len(axes) - len(names):] != names:
        raise CollectiveError(
            f"{who}: {_axes_text(names if len(names) > 1 else names[0])!r} must be the minor-most "
            f"axis of dim {dim}, whose axes are {list(axes)}")
    return axes[: len(axes) - len(names)]


def _pending(t: ArrayType, names, who):
    missing = [a for a in names if a not in t.unreduced]
    if missing:
        raise CollectiveError(
            f"{who}: {missing} {'is' if len(missing) == 1 else 'are'} not in the unreduced set "
            f"{list(t.unreduced)}; only a pending sum can be reduced")


def _rest(shape, dim) -> int:
    return math.prod(s for i, s in enumerate(shape) if i != dim)


@dataclass(frozen=True)
class Collective(ABC):
    """Base of the table. Subclasses set ``kind`` and implement every facet."""

    kind: ClassVar[str]
    #: True for kinds that move no data between devices.
    local: ClassVar[bool] = False

    @abstractmethod
    def apply(self, t: ArrayType, mesh: Mesh) -> ArrayType:
        """Type rule: the type after this collective, or a :class:`CollectiveError`."""

    @abstractmethod
    def run(self, blocks: list, t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> list:
        """Data rule: the per-device blocks after this collective."""

    @abstractmethod
    def recv_elems(self, t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> np.ndarray:
        """Cost: elements each device receives, ``[num_devices]``."""

    @abstractmethod
    def to_dict(self) -> dict:
        """JSON form (without the type after the step)."""

    def peak_elems(self, t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> int:
        """Largest total of buffers live at once during the step, per device: input and
        output, or the re-padding buffer with either (see :meth:`repad_elems`)."""
        a, b = t_in.shard_elems(mesh), t_out.shard_elems(mesh)
        pad = self.repad_elems(t_in, t_out, mesh)
        if pad:
            return max(a + pad, pad + b)
        return a + b

    def repad_elems(self, t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> int:
        """Elements of the intermediate buffer an uneven dim's re-padding needs (0: none)."""
        return 0

    def is_noop(self, t_in: ArrayType, mesh: Mesh) -> bool:
        """True when no device's data changes (e.g. a collective over size-1 axes):
        a relabelling of the type that moves and copies nothing."""
        return _group_size(mesh, self.axis) == 1


@dataclass(frozen=True)
class DynSlice(Collective):
    """``axis`` (unused) becomes the minor-most axis of ``dim``; no data moves.

    ``axis`` may be a tuple: all of them are appended in order (one local slice)."""

    dim: int
    axis: str | tuple[str, ...]
    kind: ClassVar[str] = "dyn_slice"
    local: ClassVar[bool] = True

    def __post_init__(self):
        _canonical_axis(self, "DynSlice")

    def apply(self, t, mesh):
        who = f"DynSlice(dim={self.dim}, axis={self.axis!r}) on {t}"
        _check_dim(t, self.dim, who)
        names = _axes_tuple(self.axis)
        n = _group_size(mesh, names)
        _unused(t, names, who)
        _check_divides(t, mesh, self.dim, names, n, who, "slice the whole dim instead")
        return t.with_dim_axes(self.dim, t.dims[self.dim].axes + names)

    def run(self, blocks, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        fine = t_out.local_shape(mesh)[self.dim]
        return [_split_piece(b, self.dim, n, _group_index(mesh, self.axis, d), fine)
                for d, b in enumerate(blocks)]

    def repad_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        loc_in = t_in.local_shape(mesh)
        fine = t_out.local_shape(mesh)[self.dim]
        if loc_in[self.dim] < n * fine:
            return n * fine * _rest(loc_in, self.dim)
        return 0

    def recv_elems(self, t_in, t_out, mesh):
        return np.zeros(mesh.size, dtype=np.int64)

    def to_dict(self):
        return {"op": self.kind, "dim": self.dim, "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"DynSlice({self.dim}, {_axes_text(self.axis)})"


@dataclass(frozen=True)
class AllGather(Collective):
    """``axis``, the minor-most axis of ``dim``, is removed: all-gather over ``axis``.

    ``axis`` may be a tuple of axes, the minor-most suffix of ``dim`` in order: one
    all-gather over their combined group removes them all."""

    dim: int
    axis: str | tuple[str, ...]
    kind: ClassVar[str] = "all_gather"

    def __post_init__(self):
        _canonical_axis(self, "AllGather")

    def apply(self, t, mesh):
        who = f"AllGather(dim={self.dim}, axis={self.axis!r}) on {t}"
        _check_dim(t, self.dim, who)
        names = _axes_tuple(self.axis)
        n = _group_size(mesh, names)
        rest = _suffix(t, self.dim, names, who)
        out = t.with_dim_axes(self.dim, rest)
        coarse = out.split(mesh, self.dim)
        if not nests(t.dims[self.dim].size, coarse, n):
            raise _nest_error(who, out, self.dim, coarse, n)
        return out

    def run(self, blocks, t_in, t_out, mesh):
        coarse = t_out.local_shape(mesh)[self.dim]
        return [_join([blocks[s] for s in _group_of(mesh, self.axis, d)], self.dim, coarse)
                for d in range(len(blocks))]

    def repad_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        raw = n * t_in.shard_elems(mesh)
        return raw if raw > t_out.shard_elems(mesh) else 0

    def recv_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return np.full(mesh.size, (n - 1) * t_in.shard_elems(mesh), dtype=np.int64)

    def to_dict(self):
        return {"op": self.kind, "dim": self.dim, "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"AllGather({self.dim}, {_axes_text(self.axis)})"


@dataclass(frozen=True)
class AllToAll(Collective):
    """Minor-most axis of ``src_dim`` moves to be minor-most of ``dst_dim``:
    all-to-all over ``axis``, split ``dst_dim``, concatenate ``src_dim``.

    ``axis`` may be a tuple of axes, the minor-most suffix of ``src_dim`` in order:
    one all-to-all over their combined group moves them all, keeping their order."""

    src_dim: int
    dst_dim: int
    axis: str | tuple[str, ...]
    kind: ClassVar[str] = "all_to_all"

    def __post_init__(self):
        _canonical_axis(self, "AllToAll")

    def apply(self, t, mesh):
        who = f"AllToAll(src_dim={self.src_dim}, dst_dim={self.dst_dim}, axis={self.axis!r}) on {t}"
        _check_dim(t, self.src_dim, who)
        _check_dim(t, self.dst_dim, who)
        if self.src_dim == self.dst_dim:
            raise CollectiveError(f"{who}: src_dim and dst_dim must differ")
        names = _axes_tuple(self.axis)
        n = _group_size(mesh, names)
        rest = _suffix(t, self.src_dim, names, who)
        _check_divides(t, mesh, self.dst_dim, names, n, who, "split a whole dim instead")
        t2 = t.with_dim_axes(self.src_dim, rest)
        coarse = t2.split(mesh, self.src_dim)
        if not nests(t.dims[self.src_dim].size, coarse, n):
            raise _nest_error(who, t2, self.src_dim, coarse, n)
        return t2.with_dim_axes(self.dst_dim, t.dims[self.dst_dim].axes + names)

    def _fine_dst(self, t_out, mesh):
        return t_out.local_shape(mesh)[self.dst_dim]

    def run(self, blocks, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        fine = self._fine_dst(t_out, mesh)
        coarse = t_out.local_shape(mesh)[self.src_dim]
        out = []
        for d in range(len(blocks)):
            me = _group_index(mesh, self.axis, d)
            pieces = [_split_piece(blocks[s], self.dst_dim, n, me, fine)
                      for s in _group_of(mesh, self.axis, d)]
            out.append(_join(pieces, self.src_dim, coarse))
        return out

    def _sent_elems(self, t_in, t_out, mesh):
        """Elements of the input after padding the split dim: what the exchange sends."""
        n = _group_size(mesh, self.axis)
        loc = list(t_in.local_shape(mesh))
        loc[self.dst_dim] = n * self._fine_dst(t_out, mesh)
        return math.prod(loc)

    def repad_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        a, b = t_in.shard_elems(mesh), t_out.shard_elems(mesh)
        sent = self._sent_elems(t_in, t_out, mesh)
        loc = list(t_out.local_shape(mesh))
        loc[self.src_dim] = n * t_in.local_shape(mesh)[self.src_dim]
        raw = math.prod(loc)
        return max(sent if sent > a else 0, raw if raw > b else 0)

    def recv_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return np.full(mesh.size, self._sent_elems(t_in, t_out, mesh) * (n - 1) // n, dtype=np.int64)

    def to_dict(self):
        return {"op": self.kind, "src_dim": self.src_dim, "dst_dim": self.dst_dim,
                "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"AllToAll({self.src_dim}->{self.dst_dim}, {_axes_text(self.axis)})"


@dataclass(frozen=True)
class AllPermute(Collective):
    """Any type with the same local shape, the same number of blocks per dim and the
    same unreduced set: each device receives its new block from a device that holds
    it (itself when it can), with the same coordinates on the unreduced axes."""

    target: ArrayType
    kind: ClassVar[str] = "all_permute"

    def apply(self, t, mesh):
        tgt = ArrayType.of(self.target)
        who = f"AllPermute(target={tgt}) on {t}"
        if tgt.shape != t.shape:
            raise CollectiveError(f"{who}: global shapes differ ({t.shape} vs {tgt.shape})")
        tgt.check(mesh, "AllPermute target")
        if tgt.local_shape(mesh) != t.local_shape(mesh):
            raise CollectiveError(
                f"{who}: local shapes differ ({t.local_shape(mesh)} vs {tgt.local_shape(mesh)}); "
                "an AllPermute keeps the local shape"
            )
        if tgt.splits(mesh) != t.splits(mesh):
            raise CollectiveError(
                f"{who}: the number of blocks per dim differs ({t.splits(mesh)} vs "
                f"{tgt.splits(mesh)}); an AllPermute keeps it")
        if tgt.unreduced != t.unreduced:
            raise CollectiveError(
                f"{who}: the unreduced sets differ ({list(t.unreduced)} vs {list(tgt.unreduced)}); "
                "an AllPermute keeps the pending sums as they are")
        return tgt

    def sources(self, t_in: ArrayType, mesh: Mesh) -> np.ndarray:
        return permute_sources(t_in, ArrayType.of(self.target), mesh)

    def run(self, blocks, t_in, t_out, mesh):
        src = self.sources(t_in, mesh)
        return [blocks[int(s)] for s in src]

    def is_noop(self, t_in, mesh):
        return bool((self.sources(t_in, mesh) == np.arange(mesh.size)).all())

    def recv_elems(self, t_in, t_out, mesh):
        src = self.sources(t_in, mesh)
        moved = src != np.arange(mesh.size)
        return np.where(moved, t_in.shard_elems(mesh), 0).astype(np.int64)

    def to_dict(self):
        return {"op": self.kind}

    def __str__(self):
        return f"AllPermute({self.target})"


def permute_sources(t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> np.ndarray:
    """For each device, the device whose ``t_in`` block is its ``t_out`` block (with the
    same coordinates on the unreduced axes, so every pending sum keeps its parts).

    A device that already holds its new block keeps it. The others are spread
    round-robin over the holders of their block, so no holder sends to many."""
    nblocks = np.array(t_in.splits(mesh), dtype=np.int64)
    radix = np.append(np.cumprod(nblocks[::-1])[::-1][1:], 1)  # radix[i] = prod(nblocks[i+1:])
    have = t_in.block_indices(mesh) @ radix
    want = t_out.block_indices(mesh) @ radix
    if t_in.unreduced:
        nu = math.prod(mesh.shape[a] for a in t_in.unreduced)
        have = have * nu + t_in.unreduced_index(mesh)
        want = want * nu + t_out.unreduced_index(mesh)
    ids = np.arange(mesh.size)
    src = ids.copy()
    need = have != want
    if need.any():
        order = np.argsort(have, kind="stable")
        sorted_keys = have[order]
        first = np.searchsorted(sorted_keys, want, side="left")
        last = np.searchsorted(sorted_keys, want, side="right")
        counts = {}
        for d in np.nonzero(need)[0]:
            lo, hi = first[d], last[d]
            k = int(want[d])
            j = counts.get(k, 0)
            counts[k] = j + 1
            src[d] = order[lo + j % (hi - lo)]
    return src


@dataclass(frozen=True)
class AllReduce(Collective):
    """``axis`` (one or more unreduced axes) leave the unreduced set: all-reduce (sum)
    over their group. The shard keeps its shape."""

    axis: str | tuple[str, ...]
    kind: ClassVar[str] = "all_reduce"

    def __post_init__(self):
        _canonical_axis(self, "AllReduce")

    def apply(self, t, mesh):
        who = f"AllReduce(axis={self.axis!r}) on {t}"
        names = _axes_tuple(self.axis)
        _group_size(mesh, names)
        _pending(t, names, who)
        return t.with_unreduced(a for a in t.unreduced if a not in names)

    def run(self, blocks, t_in, t_out, mesh):
        return [sum(blocks[s] for s in _group_of(mesh, self.axis, d)) for d in range(len(blocks))]

    def recv_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return np.full(mesh.size, 2 * (n - 1) * t_in.shard_elems(mesh) // n, dtype=np.int64)

    def to_dict(self):
        return {"op": self.kind, "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"AllReduce({_axes_text(self.axis)})"


@dataclass(frozen=True)
class ReduceScatter(Collective):
    """``axis`` (unreduced axes) leave the unreduced set and become the minor-most axes
    of ``dim``: reduce-scatter over their group along ``dim``."""

    dim: int
    axis: str | tuple[str, ...]
    kind: ClassVar[str] = "reduce_scatter"

    def __post_init__(self):
        _canonical_axis(self, "ReduceScatter")

    def apply(self, t, mesh):
        who = f"ReduceScatter(dim={self.dim}, axis={self.axis!r}) on {t}"
        _check_dim(t, self.dim, who)
        names = _axes_tuple(self.axis)
        n = _group_size(mesh, names)
        _pending(t, names, who)
        _check_divides(t, mesh, self.dim, names, n, who, "reduce-scatter a whole dim instead")
        t2 = t.with_unreduced(a for a in t.unreduced if a not in names)
        return t2.with_dim_axes(self.dim, t.dims[self.dim].axes + names)

    def run(self, blocks, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        fine = t_out.local_shape(mesh)[self.dim]
        out = []
        for d in range(len(blocks)):
            me = _group_index(mesh, self.axis, d)
            out.append(sum(_split_piece(blocks[s], self.dim, n, me, fine)
                           for s in _group_of(mesh, self.axis, d)))
        return out

    def _sent_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return n * t_out.shard_elems(mesh)

    def repad_elems(self, t_in, t_out, mesh):
        sent = self._sent_elems(t_in, t_out, mesh)
        return sent if sent > t_in.shard_elems(mesh) else 0

    def recv_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return np.full(mesh.size, (n - 1) * t_out.shard_elems(mesh), dtype=np.int64)

    def to_dict(self):
        return {"op": self.kind, "dim": self.dim, "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"ReduceScatter({self.dim}, {_axes_text(self.axis)})"


@dataclass(frozen=True)
class Unreduce(Collective):
    """``axis`` (replicated: in no dim and not pending) joins the unreduced set. Local:
    the first device of each group keeps its block, the others hold zeros."""

    axis: str | tuple[str, ...]
    kind: ClassVar[str] = "unreduce"
    local: ClassVar[bool] = True

    def __post_init__(self):
        _canonical_axis(self, "Unreduce")

    def apply(self, t, mesh):
        who = f"Unreduce(axis={self.axis!r}) on {t}"
        names = _axes_tuple(self.axis)
        _group_size(mesh, names)
        _unused(t, names, who)
        return t.with_unreduced(t.unreduced + names)

    def run(self, blocks, t_in, t_out, mesh):
        return [b if _group_index(mesh, self.axis, d) == 0 else np.zeros_like(b)
                for d, b in enumerate(blocks)]

    def recv_elems(self, t_in, t_out, mesh):
        return np.zeros(mesh.size, dtype=np.int64)

    def to_dict(self):
        return {"op": self.kind, "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"Unreduce({_axes_text(self.axis)})"


#: The table of collective kinds. Every other layer keys its own facet by ``kind``.
COLLECTIVES: dict[str, type[Collective]] = {
    c.kind: c for c in (DynSlice, AllGather, AllToAll, AllPermute, AllReduce, ReduceScatter, Unreduce)
}


def _axis_from_json(axis):
    if isinstance(axis, str):
        return axis
    if isinstance(axis, list) and axis and all(isinstance(a, str) for a in axis):
        return tuple(axis)
    raise CollectiveError(f"plan step: 'axis' must be an axis name or a list of names, got {axis!r}")


def _int_field(d, key):
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise CollectiveError(f"plan step {d.get('op')!r}: field {key!r} must be an integer, got {v!r}")
    return v


def collective_from_dict(d: dict) -> Collective:
    if not isinstance(d, dict):
        raise CollectiveError(f"plan step must be an object, got {d!r}")
    op = d.get("op")
    try:
        if op == "dyn_slice":
            return DynSlice(_int_field(d, "dim"), _axis_from_json(d["axis"]))
        if op == "all_gather":
            return AllGather(_int_field(d, "dim"), _axis_from_json(d["axis"]))
        if op == "all_to_all":
            return AllToAll(_int_field(d, "src_dim"), _int_field(d, "dst_dim"), _axis_from_json(d["axis"]))
        if op == "all_permute":
            return AllPermute(ArrayType.parse(d["type"]))
        if op == "all_reduce":
            return AllReduce(_axis_from_json(d["axis"]))
        if op == "reduce_scatter":
            return ReduceScatter(_int_field(d, "dim"), _axis_from_json(d["axis"]))
        if op == "unreduce":
            return Unreduce(_axis_from_json(d["axis"]))
    except KeyError as e:
        raise CollectiveError(f"plan step {op!r}: missing field {e.args[0]!r}") from None
    raise CollectiveError(f"unknown collective op {op!r}; expected one of {sorted(COLLECTIVES)}")


# -- device-level lowering (the schedule facet of each kind) ----------------------
def schedule_ops(c: Collective, t_in: ArrayType, t_out: ArrayType, mesh: Mesh, itemsize: int) -> list:
    """Lower one typed collective to :class:`synth.schedule.ScheduleOp` s: the
    collective, plus a local ``copy`` for an uneven dim's re-padding."""
    from synth.schedule import ScheduleOp

    in_b = t_in.shard_elems(mesh) * itemsize
    out_b = t_out.shard_elems(mesh) * itemsize
    return _SCHEDULE_LOWERING[c.kind](c, t_in, t_out, mesh, in_b, out_b, itemsize, ScheduleOp)


def schedule_op(c: Collective, t_in: ArrayType, t_out: ArrayType, mesh: Mesh, itemsize: int):
    """The main op of :func:`schedule_ops` (the collective itself)."""
    ops = schedule_ops(c, t_in, t_out, mesh, itemsize)
    return next((op for op in ops if op.kind not in ("copy",)), ops[0])


def _each_device(mesh):
    return tuple((d,) for d in range(mesh.size))


def _pad_copy(Op, a_b, b_b, mesh, label):
    return Op("copy", a_b, b_b, groups=_each_device(mesh), label=label)


def _lower_dyn_slice(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    pad = c.repad_elems(t_in, t_out, mesh) * isz
    if pad:
        return [_pad_copy(Op, in_b, pad, mesh, f"pad for {c}"),
                Op("dyn_slice", pad, out_b, groups=_each_device(mesh), label=str(c))]
    return [Op("dyn_slice", in_b, out_b, groups=_each_device(mesh), label=str(c))]


def _lower_all_gather(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    raw = n * in_b
    ops = [Op("all_gather", in_b, raw, send_bytes=in_b, recv_bytes=(n - 1) * in_b,
              groups=groups_of(mesh, c.axis), label=str(c))]
    if raw != out_b:
        ops.append(_pad_copy(Op, raw, out_b, mesh, f"unpad after {c}"))
    return ops


def _lower_all_to_all(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    sent = c._sent_elems(t_in, t_out, mesh) * isz
    moved = sent * (n - 1) // n
    ops = []
    if sent != in_b:
        ops.append(_pad_copy(Op, in_b, sent, mesh, f"pad for {c}"))
    loc = list(t_out.local_shape(mesh))
    loc[c.src_dim] = n * t_in.local_shape(mesh)[c.src_dim]
    raw = math.prod(loc) * isz
    ops.append(Op("all_to_all", sent, raw, send_bytes=moved, recv_bytes=moved,
                  groups=groups_of(mesh, c.axis), label=str(c)))
    if raw != out_b:
        ops.append(_pad_copy(Op, raw, out_b, mesh, f"unpad after {c}"))
    return ops


def _lower_all_permute(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    src = c.sources(t_in, mesh)
    pairs = tuple((int(s), d) for d, s in enumerate(src) if int(s) != d)
    return [Op("permute", in_b, out_b, send_bytes=in_b, recv_bytes=in_b, pairs=pairs, label="AllPermute")]


def _lower_all_reduce(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    moved = 2 * in_b * (n - 1) // n  # ring traffic, as executor.hlo reads XLA's
    return [Op("all_reduce", in_b, out_b, send_bytes=moved, recv_bytes=moved,
               groups=groups_of(mesh, c.axis), label=str(c))]


def _lower_reduce_scatter(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    sent = c._sent_elems(t_in, t_out, mesh) * isz
    ops = []
    if sent != in_b:
        ops.append(_pad_copy(Op, in_b, sent, mesh, f"pad for {c}"))
    moved = sent * (n - 1) // n
    ops.append(Op("reduce_scatter", sent, out_b, send_bytes=moved, recv_bytes=moved,
                  groups=groups_of(mesh, c.axis), label=str(c)))
    return ops


def _lower_unreduce(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    return [Op("copy", in_b, out_b, groups=_each_device(mesh), label=str(c))]


_SCHEDULE_LOWERING = {
    "dyn_slice": _lower_dyn_slice,
    "all_gather": _lower_all_gather,
    "all_to_all": _lower_all_to_all,
    "all_permute": _lower_all_permute,
    "all_reduce": _lower_all_reduce,
    "reduce_scatter": _lower_reduce_scatter,
    "unreduce": _lower_unreduce,
}
