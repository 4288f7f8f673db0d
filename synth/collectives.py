"""The typed collectives: one table, one class per kind.

Each kind keeps its facets together:

* ``apply(t, mesh)``        -- type rule: the type after the collective, or a precise error;
* ``run(blocks, t, mesh)``  -- data rule: per-device numpy blocks after the collective,
                               computed only from the blocks other devices hold;
* ``recv_elems(t, mesh)``   -- cost: elements each device receives (per device);
* ``peak_elems(t, mesh)``   -- memory: the largest set of buffers live at once during
                               the step (input + output, plus any re-padding buffer;
                               an all-reduce runs in place: one buffer);
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

**Several dims in one collective.** ``MultiDynSlice``, ``MultiAllGather`` and
``MultiAllToAll`` carry several one-dim moves on disjoint axes as one step over the
group of all their axes (one launch, as XLA and Shardy emit them). Slices and gathers
touch disjoint dims; the moves commute, so type and data rules are the composition of
the moves. An all-to-all's moves may share a source or a destination dim (never a dim
that is both): they then apply in the order given, and its data rule is the one
exchange over the joint group, equal to the chain of its moves (see
:class:`MultiAllToAll`). The cost is that of one collective over the joint group. JSON:
the one-dim ``op`` with ``"moves"``.
``ShardedToUnreduced`` is local: a split dim becomes a pending sum (see docs/collectives.md).
"""

from __future__ import annotations

import heapq
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from synth.errors import CollectiveError
from synth.memo import Memo
from synth.mesh import Mesh
from synth.types import ArrayType


class _Who:
    """A type rule's name for its error messages (``f"{who}: ..."``), formatted only when
    a message is: the rules run on every step of every plan built, and formatting the
    types cost more than the checks."""

    __slots__ = ("fmt", "args")

    def __init__(self, fmt: str, *args):
        self.fmt, self.args = fmt, args

    def __str__(self) -> str:
        return self.fmt.format(*self.args)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _check_dim(t: ArrayType, dim: int, who: str):
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not (0 <= dim < t.rank):
        raise CollectiveError(f"{who}: dim {dim!r} is out of range for rank-{t.rank} type {t}")


def _axes_tuple(axis) -> tuple[str, ...]:
    return (axis,) if isinstance(axis, str) else tuple(axis)


def _canonical_axis(obj, who: str):
    """A one-name tuple becomes the name; a list becomes a tuple (frozen, hashable)."""
    object.__setattr__(obj, "axis", _canonical_axis_value(obj.axis, who))


def _canonical_axis_value(axis, who: str):
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
    return axis


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
    groups ordered by their smallest id (as :meth:`Mesh.groups`). Memoised per (mesh,
    axes): the result is a tuple of tuples, immutable."""
    names = _axes_tuple(axis)
    return _GROUPS_MEMO.get((mesh, names), lambda: _groups_of(mesh, names))


_GROUPS_MEMO = Memo("groups_of")


def _groups_of(mesh: Mesh, names: tuple) -> tuple[tuple[int, ...], ...]:
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

    def recv_elems_max(self, t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> int:
        """``max(recv_elems(...))``: what the most-receiving device receives."""
        return int(self.recv_elems(t_in, t_out, mesh).max())

    def _recv_uniform(self, t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> np.ndarray:
        """``recv_elems`` of a kind whose every device receives the same,
        :meth:`recv_elems_max` (a kind sets ``recv_elems = Collective._recv_uniform``;
        ``Plan.recv_bytes_max_device`` then sums the maxima without the rows)."""
        return np.full(mesh.size, self.recv_elems_max(t_in, t_out, mesh), dtype=np.int64)

    def map_axes(self, fn) -> Collective:
        """This collective with each axis name ``a`` written as the names ``fn(a)``
        (e.g. the factors of a refined mesh it spans)."""
        old = _axes_tuple(self.axis)
        names = tuple(x for a in old for x in fn(a))
        return self if names == old else replace(self, axis=names)

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
        who = _Who("DynSlice(dim={}, axis={!r}) on {}", self.dim, self.axis, t)
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

    def recv_elems_max(self, t_in, t_out, mesh):
        return 0

    recv_elems = Collective._recv_uniform

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
        who = _Who("AllGather(dim={}, axis={!r}) on {}", self.dim, self.axis, t)
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

    def recv_elems_max(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return (n - 1) * t_in.shard_elems(mesh)

    recv_elems = Collective._recv_uniform

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
        who = _Who("AllToAll(src_dim={}, dst_dim={}, axis={!r}) on {}", self.src_dim, self.dst_dim, self.axis, t)
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

    def recv_elems_max(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return self._sent_elems(t_in, t_out, mesh) * (n - 1) // n

    recv_elems = Collective._recv_uniform

    def to_dict(self):
        return {"op": self.kind, "src_dim": self.src_dim, "dst_dim": self.dst_dim,
                "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"AllToAll({self.src_dim}->{self.dst_dim}, {_axes_text(self.axis)})"


@dataclass(frozen=True)
class AllPermute(Collective):
    """Any type with the same local shape and the same unreduced set: each device
    receives its new block from a device that holds it (itself when it can), with the
    same coordinates on the unreduced axes. The number of blocks per dim may differ only
    where the extra blocks hold no data: with the local size ``L`` of a dim of size ``N``
    the same, block ``b`` is ``[b*L, min((b+1)*L, N))`` under either type. Example, mesh
    ``x=2,y=2,z=2,w=2``: ``[8{y,z,w}] -> [8{x,y,z,w}]`` (1 element a device both ways;
    the 16-way split leaves the devices with ``x=1`` empty) moves nothing: each device
    with ``x=0`` already holds element ``4y+2z+w``.

    With the same blocks per dim, the pending sums may also move to other axes of the
    same group size: each new group of partial blocks receives, member by member, the
    parts of one old group of the same block (so its sum is still the block). Example,
    mesh ``a=4,b=2`` (work mesh ``a:(1)2, a:(2)2, b``): ``[16{a}, 24]{U:b} ->
    [16{b,a:(2)2}, 24]{U:a:(1)2}`` relabels ``a:(1)2`` and ``b``: device ``(a1, a2, b)``
    receives the block of ``(b, a2, a1)`` (DTensor's ``[64]`` case, then one
    ShardedToUnreduced and one all-reduce: 2 collectives within the bound)."""

    target: ArrayType
    kind: ClassVar[str] = "all_permute"

    def apply(self, t, mesh):
        tgt = ArrayType.of(self.target)
        who = _Who("AllPermute(target={}) on {}", tgt, t)
        if tgt.shape != t.shape:
            raise CollectiveError(f"{who}: global shapes differ ({t.shape} vs {tgt.shape})")
        tgt.check(mesh, "AllPermute target")
        if tgt.local_shape(mesh) != t.local_shape(mesh):
            raise CollectiveError(
                f"{who}: local shapes differ ({t.local_shape(mesh)} vs {tgt.local_shape(mesh)}); "
                "an AllPermute keeps the local shape"
            )
        if tgt.unreduced != t.unreduced:
            n_in = math.prod(mesh.shape[a] for a in t.unreduced)
            n_out = math.prod(mesh.shape[a] for a in tgt.unreduced)
            if n_in != n_out or tgt.splits(mesh) != t.splits(mesh):
                raise CollectiveError(
                    f"{who}: the unreduced sets differ ({list(t.unreduced)}, a group of {n_in}, vs "
                    f"{list(tgt.unreduced)}, a group of {n_out}); an AllPermute moves pending sums only "
                    "to axes of the same group size, with the same blocks per dim; reduce them first")
        return tgt

    def sources(self, t_in: ArrayType, mesh: Mesh) -> np.ndarray:
        return permute_sources(t_in, ArrayType.of(self.target), mesh)

    def run(self, blocks, t_in, t_out, mesh):
        src = self.sources(t_in, mesh)
        return [blocks[int(s)] for s in src]

    def is_noop(self, t_in, mesh):
        return permute_is_noop(t_in, ArrayType.of(self.target), mesh)

    def recv_elems(self, t_in, t_out, mesh):
        moved = permute_moved(t_in, ArrayType.of(self.target), mesh)
        return np.where(moved, t_in.shard_elems(mesh), 0).astype(np.int64)

    def recv_elems_max(self, t_in, t_out, mesh):
        # a device that moves receives its whole shard; one moves unless none does
        return 0 if self.is_noop(t_in, mesh) else t_in.shard_elems(mesh)

    def to_dict(self):
        return {"op": self.kind}

    def __str__(self):
        return f"AllPermute({self.target})"


_SOURCES_MEMO = Memo("permute_sources")


def permute_sources(t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> np.ndarray:
    """:func:`_permute_sources` (see there), memoised per ``(t_in, t_out, mesh)``
    (:class:`synth.memo.Memo`: the array is read-only)."""
    return _SOURCES_MEMO.get((t_in, t_out, mesh), lambda: _permute_sources(t_in, t_out, mesh))


def _permute_sources(t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> np.ndarray:
    """For each device, the device whose ``t_in`` block is its ``t_out`` block (with the
    same coordinates on the unreduced axes, so every pending sum keeps its parts).

    A device that already holds its new block keeps it. The others are spread
    round-robin over the holders of their block, so no holder sends to many. Where the
    two types split a dim a different number of ways (the same local size), blocks are
    matched by the data they hold, and a device whose new block is empty keeps its own
    (it receives nothing). Where the pending sums move to other axes (same blocks per
    dim, same group size, see :class:`AllPermute`), see :func:`_pending_move_sources`."""
    if t_in.unreduced != t_out.unreduced:
        return _pending_move_sources(t_in, t_out, mesh)
    have, want, need = _permute_keys(t_in, t_out, mesh)
    ids = np.arange(mesh.size)
    src = ids.copy()
    if need.any():
        order = np.argsort(have, kind="stable")
        sorted_keys = have[order]
        first = np.searchsorted(sorted_keys, want, side="left")
        last = np.searchsorted(sorted_keys, want, side="right")
        counts = {}
        for d in np.nonzero(need)[0]:
            lo, hi = first[d], last[d]
            if hi == lo:  # cannot happen for types of one local shape (see AllPermute)
                raise CollectiveError(f"AllPermute {t_in} -> {t_out}: no device holds the block of device {d}")
            k = int(want[d])
            j = counts.get(k, 0)
            counts[k] = j + 1
            src[d] = order[lo + j % (hi - lo)]
    return src


def _permute_keys(t_in: ArrayType, t_out: ArrayType, mesh: Mesh):
    """``(have, want, need)`` of :func:`_permute_sources` (the same unreduced sets): per
    device, the key of the block it holds and of the block it must hold, and whether it
    must receive (the keys differ and its new block is not empty)."""
    empty = None
    if t_in.splits(mesh) == t_out.splits(mesh):
        nblocks = np.array(t_in.splits(mesh), dtype=np.int64)
        radix = np.append(np.cumprod(nblocks[::-1])[::-1][1:], 1)  # radix[i] = prod(nblocks[i+1:])
        have = t_in.block_indices(mesh) @ radix
        want = t_out.block_indices(mesh) @ radix
    else:  # key a block by its region's start (equal local sizes: equal starts, equal blocks)
        ext = np.array(t_in.shape, dtype=np.int64) + 1
        radix = np.append(np.cumprod(ext[::-1])[::-1][1:], 1)
        s_in, e_in = t_in.regions(mesh)
        s_out, e_out = t_out.regions(mesh)
        have = np.where((e_in > s_in).all(axis=1), s_in @ radix, -1)
        want = s_out @ radix
        empty = ~(e_out > s_out).all(axis=1)
    if t_in.unreduced:
        nu = math.prod(mesh.shape[a] for a in t_in.unreduced)
        have = have * nu + t_in.unreduced_index(mesh)
        want = want * nu + t_out.unreduced_index(mesh)
    need = have != want
    if empty is not None:
        need &= ~empty
    return have, want, need


_MOVED_MEMO = Memo("permute_moved")


def permute_moved(t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> np.ndarray:
    """``[num_devices]`` bool: the devices that receive in a permute from ``t_in`` to
    ``t_out``, i.e. ``permute_sources(t_in, t_out, mesh) != arange(num_devices)``, without
    assigning each one its holder (memoised, read-only). With the same unreduced sets a
    device keeps its buffer exactly where it does not need to receive
    (:func:`_permute_sources` sends it from a holder of its new block, and a device that
    needs to receive holds another block), so this is ``need`` of :func:`_permute_keys`."""
    def make():
        if t_in.unreduced != t_out.unreduced:
            return permute_sources(t_in, t_out, mesh) != np.arange(mesh.size)
        return _permute_keys(t_in, t_out, mesh)[2]

    return _MOVED_MEMO.get((t_in, t_out, mesh), make)


def permute_is_noop(t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> bool:
    """True when a permute from ``t_in`` to ``t_out`` moves nothing
    (``not permute_moved(...).any()``). With the same unreduced sets and the same blocks
    per dim, decided on the types alone: a dim's block index is the mixed-radix number
    over its axes of size > 1, which is the same function of the device on both sides
    exactly when those axes are the same sequence (an axis on one side only, or two in
    another order, changes one index and not the other at some device), and the device's
    key combines the dims' indices one to one."""
    if t_in.unreduced == t_out.unreduced and len(t_in.dims) == len(t_out.dims):
        shape = mesh.shape
        same = True
        for a, b in zip(t_in.dims, t_out.dims):
            ka = tuple(x for x in a.axes if shape[x] != 1)
            kb = tuple(x for x in b.axes if shape[x] != 1)
            if ka != kb:
                if math.prod(shape[x] for x in ka) != math.prod(shape[x] for x in kb):
                    break  # other blocks per dim: matched by the data they hold (arrays)
                same = False
        else:
            return same
    return not permute_moved(t_in, t_out, mesh).any()


def _pending_move_sources(t_in: ArrayType, t_out: ArrayType, mesh: Mesh) -> np.ndarray:
    """Sources of a permute whose pending sums move to other axes of the same group size.

    A *group* of a type is the devices that differ only on its unreduced axes: they hold
    the parts of one block, which sum to it. Each new group (of ``t_out``) takes one old
    group (of ``t_in``) of the same block whole, member ``k`` from member ``k`` (``k``
    the mixed-radix index over the unreduced axes), so its sum is the block. Among the
    old groups of its block, a new group takes the one that leaves the most of its
    devices their own buffer, ties to the least taken, then the lowest id.

    Example, ``a=2,b=2``, ``[4{a}]{U:b} -> [4{b}]{U:a}``: the new group of block 0 is
    devices 0, 2 (``b=0``); the old groups of block 0 are ``{0, 1}`` (``a=0``); so device 0
    keeps its part and device 2 takes device 1's."""
    nblocks = np.array(t_in.splits(mesh), dtype=np.int64)
    radix = np.append(np.cumprod(nblocks[::-1])[::-1][1:], 1)
    have = t_in.block_indices(mesh) @ radix
    want = t_out.block_indices(mesh) @ radix
    u_in, u_out = t_in.unreduced_index(mesh), t_out.unreduced_index(mesh)

    def bases(t):
        b = np.arange(mesh.size)
        for a, (s, _) in zip(t.unreduced, _strides(mesh, t.unreduced)):
            b = b - mesh.axis_coords(a) * s
        return b

    base_in, base_out = bases(t_in), bases(t_out)
    old = {}  # block -> {old group base: members by unreduced index}
    for d in range(mesh.size):
        old.setdefault(int(have[d]), {}).setdefault(int(base_in[d]), {})[int(u_in[d])] = d
    new = {}
    for d in range(mesh.size):
        new.setdefault(int(base_out[d]), []).append(d)
    # an old group's score for a new group: the members it leaves their own buffer, i.e.
    # the members d in it (base_in[d]) at the same index (u_in[d] == u_out[d]); the other
    # old groups of the block score 0, and among them the least taken, then the lowest id,
    # comes off a heap per block (entries re-keyed when found stale: taken only grows)
    keep = (u_in == u_out) & (have == want)
    taken = {}
    free = {}  # block -> heap of (taken, old group base)
    src = np.arange(mesh.size)
    for g in sorted(new):
        members = new[g]
        blk = int(want[members[0]])
        cands = old[blk]
        score = {}
        for d in members:
            if keep[d]:
                b = int(base_in[d])
                score[b] = score.get(b, 0) + 1
        if score:
            best = min(score, key=lambda b: (-score[b], taken.get(b, 0), b))
        else:
            heap = free.get(blk)
            if heap is None:
                heap = free[blk] = [(0, b) for b in sorted(cands)]  # sorted: a heap
            while True:
                t, best = heap[0]
                now = taken.get(best, 0)
                if now == t:
                    break
                heapq.heapreplace(heap, (now, best))
        taken[best] = taken.get(best, 0) + 1
        grp = cands[best]
        for d in members:
            src[d] = grp[int(u_out[d])]
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
        who = _Who("AllReduce(axis={!r}) on {}", self.axis, t)
        names = _axes_tuple(self.axis)
        _group_size(mesh, names)
        _pending(t, names, who)
        return t.with_unreduced(a for a in t.unreduced if a not in names)

    def run(self, blocks, t_in, t_out, mesh):
        return [sum(blocks[s] for s in _group_of(mesh, self.axis, d)) for d in range(len(blocks))]

    def recv_elems_max(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return 2 * (n - 1) * t_in.shard_elems(mesh) // n

    recv_elems = Collective._recv_uniform

    def to_dict(self):
        return {"op": self.kind, "axis": _axis_json(self.axis)}

    def peak_elems(self, t_in, t_out, mesh):
        """In place: the sum overwrites its input (one buffer, the shard). XLA's buffer
        assignment gives an all-reduce its operand's slice when the operand dies there
        (GPU: ``all-reduce-start`` at the operand's offset; libtpu: the second of two
        chained all-reduces at the first's offset), as NCCL's in-place ``ncclAllReduce``.
        Example: ``[8{y}, 4]{U:x}`` on ``x=2, y=2``, 4-byte items: 16 B live, not 32 B."""
        return t_in.shard_elems(mesh)

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
        who = _Who("ReduceScatter(dim={}, axis={!r}) on {}", self.dim, self.axis, t)
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

    def recv_elems_max(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return (n - 1) * t_out.shard_elems(mesh)

    recv_elems = Collective._recv_uniform

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
        who = _Who("Unreduce(axis={!r}) on {}", self.axis, t)
        names = _axes_tuple(self.axis)
        _group_size(mesh, names)
        _unused(t, names, who)
        return t.with_unreduced(t.unreduced + names)

    def run(self, blocks, t_in, t_out, mesh):
        return [b if _group_index(mesh, self.axis, d) == 0 else np.zeros_like(b)
                for d, b in enumerate(blocks)]

    def recv_elems_max(self, t_in, t_out, mesh):
        return 0

    recv_elems = Collective._recv_uniform

    def to_dict(self):
        return {"op": self.kind, "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"Unreduce({_axes_text(self.axis)})"


# -- several dims in one collective ------------------------------------------------
def _canonical_moves(obj, who: str, width: int):
    """``moves`` becomes a tuple of tuples whose last entry is a canonical axis (a name,
    or a tuple of two or more names), sorted by the leading dim(s) so one collective has
    one spelling. ``width`` is the number of dim fields before the axis (1 or 2).

    Gathers and slices (``width == 1``): every dim in at most one move. All-to-alls
    (``width == 2``): see :func:`_canonical_a2a_moves` (moves may share a dim)."""
    raw = obj.moves
    try:
        moves = [tuple(m) for m in raw]
    except TypeError:
        raise CollectiveError(f"{who}: moves {raw!r} must be a list of {'(dim, axis)' if width == 1 else '(src_dim, dst_dim, axis)'} "
                              "tuples") from None
    if len(moves) < 2:
        raise CollectiveError(
            f"{who}: needs at least two moves, got {len(moves)}; a single move is the one-dim "
            f"form ({'DynSlice/AllGather(dim, axis)' if width == 1 else 'AllToAll(src_dim, dst_dim, axis)'})")
    out = []
    for m in moves:
        if len(m) != width + 1:
            raise CollectiveError(f"{who}: move {m!r} must have {width + 1} entries")
        for v in m[:width]:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise CollectiveError(f"{who}: move {m!r}: dims must be integers")
        out.append(tuple(int(v) for v in m[:width]) + (_canonical_axis_value(m[width], who),))
    names = [a for m in out for a in _axes_tuple(m[width])]
    if len(set(names)) != len(names):
        raise CollectiveError(f"{who}: an axis appears in two moves ({names})")
    if width == 2:
        object.__setattr__(obj, "moves", _canonical_a2a_moves(out, who))
        return
    dims = [m[0] for m in out]
    if len(set(dims)) != len(dims):
        raise CollectiveError(
            f"{who}: a dim appears in two moves ({dims}); each dim takes part in at most one "
            "move, as in Shardy's all_gather / all_slice (one move may carry several axes)")
    object.__setattr__(obj, "moves", tuple(sorted(out, key=lambda m: m[:width])))


def _canonical_a2a_moves(out: list, who: str) -> tuple:
    """The canonical spelling of an all-to-all's moves ``(src_dim, dst_dim, axis)``.

    Rules: ``src_dim != dst_dim``; a dim that sends in one move receives in none; a
    ``(src_dim, dst_dim)`` pair appears once (its axes are one move's tuple). Moves may
    share a dim: the moves apply one after another in the order given (the type and data
    of the chain of one-dim moves), so order matters between two moves that share a dim:

    * a shared ``dst_dim`` receives the moves' axes in order, the first most major:
      ``((2, 1, 'x'), (0, 1, 'y'))`` ends with dim 1 split ``{.., x, y}``;
    * a shared ``src_dim`` gives up its minor-most axes first: from ``8{a,b,c}``,
      ``((0, 1, 'c'), (0, 2, 'b'))`` moves ``c`` (minor-most), then ``b``.

    Moves that share no dim commute; the canonical order is the least, by
    ``(src_dim, dst_dim)``, of the orders that keep every pair sharing a dim as given:
    ``((1, 3, 'c'), (0, 2, 'b'))`` is spelt ``((0, 2, 'b'), (1, 3, 'c'))``, while
    ``((2, 1, 'x'), (0, 1, 'y'))`` stays (both write dim 1)."""
    for m in out:
        if m[0] == m[1]:
            raise CollectiveError(
                f"{who}: move {m!r} has src_dim == dst_dim; an all-to-all moves axes to another dim")
    srcs, dsts = {m[0] for m in out}, {m[1] for m in out}
    both = sorted(srcs & dsts)
    if both:
        raise CollectiveError(
            f"{who}: dim {both[0]} both sends (src_dim) and receives (dst_dim) in one all-to-all; "
            "a dim is a source or a destination, not both: split it into two all-to-alls")
    pairs = [m[:2] for m in out]
    if len(set(pairs)) != len(pairs):
        dup = next(p for p in pairs if pairs.count(p) > 1)
        raise CollectiveError(
            f"{who}: the pair src_dim={dup[0]} -> dst_dim={dup[1]} appears in two moves; write its "
            "axes as one move's tuple, e.g. (src_dim, dst_dim, ('x', 'y'))")
    # Least linear extension of "moves sharing a dim keep their order" (Kahn, smallest first).
    n = len(out)
    before = [[j for j in range(i) if out[j][0] == out[i][0] or out[j][1] == out[i][1]]
              for i in range(n)]
    done, order = set(), []
    while len(order) < n:
        ready = [i for i in range(n) if i not in done and all(j in done for j in before[i])]
        i = min(ready, key=lambda k: (out[k][:2], k))
        done.add(i)
        order.append(out[i])
    return tuple(order)


class _MultiMixin:
    """Shared facets of the multi-dim forms: the type rule is the chain of the one-dim
    moves in canonical order (:meth:`singles`), and so is the data rule of slices and
    gathers (disjoint dims and axes: the order does not matter); ``MultiAllToAll`` has a
    data rule of its own, the one exchange. The group is the product of all the moves'
    groups."""

    #: the one-dim collective each move is (set by every multi-dim form)
    SINGLE: ClassVar[type]

    def singles(self) -> list[Collective]:
        """The one-dim collectives this one fuses, in canonical order:
        ``MultiAllGather(((0, 'x'), (1, 'y'))).singles()`` is
        ``[AllGather(0, 'x'), AllGather(1, 'y')]``."""
        return [self.SINGLE(*m) for m in self.moves]

    @property
    def axis(self) -> tuple[str, ...]:
        """Every axis the collective runs over, move by move (its group's axes)."""
        return tuple(a for c in self.singles() for a in _axes_tuple(c.axis))

    def names(self) -> tuple[str, ...]:
        return self.axis

    def chain(self, t: ArrayType, mesh: Mesh) -> list[ArrayType]:
        """``t`` and the type after each one-dim move (the last is the result)."""
        out = [t]
        for c in self.singles():
            out.append(c.apply(out[-1], mesh))
        return out

    def apply(self, t, mesh):
        return self.chain(t, mesh)[-1]

    def run(self, blocks, t_in, t_out, mesh):
        types = self.chain(t_in, mesh)
        for c, a, b in zip(self.singles(), types[:-1], types[1:]):
            blocks = c.run(blocks, a, b, mesh)
        return blocks

    def is_noop(self, t_in, mesh):
        return _group_size(mesh, self.axis) == 1

    def map_axes(self, fn):
        w = len(self.moves[0]) - 1
        moves = tuple(m[:w] + (tuple(x for a in _axes_tuple(m[w]) for x in fn(a)),) for m in self.moves)
        return replace(self, moves=moves)


@dataclass(frozen=True)
class MultiDynSlice(_MultiMixin, Collective):
    """Several ``(dim, axis)`` slices in one local step: each ``axis`` (unused) becomes
    the minor-most axis of its ``dim``. ``[16, 8]`` with ``((0, 'x'), (1, 'y'))`` on
    ``x=2,y=4`` -> ``[16{x}, 8{y}]``: device ``(i, j)`` keeps rows ``8i..8i+7`` and
    columns ``2j, 2j+1``. Shardy's ``all_slice [{"x"}, {"y"}]``. JSON:
    ``{"op": "dyn_slice", "moves": [{"dim": 0, "axis": "x"}, ...]}``."""

    SINGLE: ClassVar[type] = DynSlice

    moves: tuple[tuple[int, str | tuple[str, ...]], ...]
    kind: ClassVar[str] = "multi_dyn_slice"
    op: ClassVar[str] = "dyn_slice"
    local: ClassVar[bool] = True

    def __post_init__(self):
        _canonical_moves(self, "DynSlice(moves)", 1)

    def apply(self, t, mesh):
        for d, _ in self.moves:
            _check_dim(t, d, f"{self} on {t}")
        return super().apply(t, mesh)

    def padded_shape(self, t_in, t_out, mesh) -> tuple[int, ...]:
        """The input block padded so every sliced dim holds ``n`` whole pieces."""
        loc = list(t_in.local_shape(mesh))
        out = t_out.local_shape(mesh)
        for d, a in self.moves:
            loc[d] = max(loc[d], _group_size(mesh, a) * out[d])
        return tuple(loc)

    def repad_elems(self, t_in, t_out, mesh):
        p = math.prod(self.padded_shape(t_in, t_out, mesh))
        return p if p > t_in.shard_elems(mesh) else 0

    def recv_elems_max(self, t_in, t_out, mesh):
        return 0

    recv_elems = Collective._recv_uniform

    def to_dict(self):
        return {"op": self.op, "moves": [{"dim": d, "axis": _axis_json(a)} for d, a in self.moves]}

    def __str__(self):
        return "DynSlice(" + ", ".join(f"{d}:{_axes_text(a)}" for d, a in self.moves) + ")"


@dataclass(frozen=True)
class MultiAllGather(_MultiMixin, Collective):
    """One all-gather over several ``(dim, axis)`` pairs: each ``axis`` (the minor-most
    suffix of its ``dim``) is removed, over the group of all the axes at once.
    ``[16{x}, 8{y}] -> [16, 8]`` on ``x=2,y=4``: every device receives the 7 other
    blocks of its ``(x, y)`` group and places block ``(i, j)`` at rows ``8i``, columns
    ``2j``. Shardy's ``all_gather [{"x"}, {"y"}]``; XLA lowers it to one HLO
    all-gather. JSON: ``{"op": "all_gather", "moves": [{"dim": 0, "axis": "x"}, ...]}``."""

    SINGLE: ClassVar[type] = AllGather

    moves: tuple[tuple[int, str | tuple[str, ...]], ...]
    kind: ClassVar[str] = "multi_all_gather"
    op: ClassVar[str] = "all_gather"

    def __post_init__(self):
        _canonical_moves(self, "AllGather(moves)", 1)

    def apply(self, t, mesh):
        for d, _ in self.moves:
            _check_dim(t, d, f"{self} on {t}")
        return super().apply(t, mesh)

    def repad_elems(self, t_in, t_out, mesh):
        raw = _group_size(mesh, self.axis) * t_in.shard_elems(mesh)
        return raw if raw > t_out.shard_elems(mesh) else 0

    def recv_elems_max(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return (n - 1) * t_in.shard_elems(mesh)

    recv_elems = Collective._recv_uniform

    def to_dict(self):
        return {"op": self.op, "moves": [{"dim": d, "axis": _axis_json(a)} for d, a in self.moves]}

    def __str__(self):
        return "AllGather(" + ", ".join(f"{d}:{_axes_text(a)}" for d, a in self.moves) + ")"


@dataclass(frozen=True)
class MultiAllToAll(_MultiMixin, Collective):
    """One all-to-all carrying several ``(src_dim, dst_dim, axis)`` moves: each ``axis``
    (the minor-most suffix of ``src_dim``) moves to be minor-most of ``dst_dim``, over
    the group of all the axes at once. ``[8{a,b}, 8{c}, 4, 4]`` with
    ``((0, 2, 'b'), (1, 3, 'c'))`` -> ``[8{a}, 8, 4{b}, 4{c}]`` (Shardy's
    ``all_to_all [{"b"}: 0->2, {"c"}: 1->3]``): each device keeps ``1/n`` of its padded
    block and receives ``(n-1)/n`` of it, ``n = |b| * |c|``, where two chained
    all-to-alls would receive ``(|b|-1)/|b| + (|c|-1)/|c|`` of it.

    Invariants (stated once; :func:`_canonical_a2a_moves`): axes are disjoint; a dim is a
    source or a destination, never both; moves may share a dim, and then apply in the
    order given (the chain of one-dim moves, :meth:`singles`, has the same type and the
    same data): the first move into a shared ``dst_dim`` is the more major there, the
    first move out of a shared ``src_dim`` takes its minor-most axes.

    Worked example, a shared destination, mesh ``x=4,y=2``: ``[16{y}, 16, 16{x}]`` with
    ``((2, 1, 'x'), (0, 1, 'y'))`` -> ``[16, 16{x,y}, 16]``. Device ``(x', y')`` holds
    ``[8, 16, 4]``; it cuts dim 1 into 8 pieces of 2, piece ``2*x'' + y''`` (``x``
    major, the order of the moves) for device ``(x'', y'')``, and places the piece from
    device ``(x'', y'')`` at rows ``8*y''`` (dim 0, the ``y`` move's source) and columns
    ``4*x''`` (dim 2, the ``x`` move's source): ``[16, 2, 16]``. It receives 7/8 of its
    512 elements (448; the receive bound), in one collective over ``(x, y)``; the chain
    ``AllToAll(2->1, x)``, ``AllToAll(0->1, y)`` receives 384 + 256 = 640. A shared
    source splits one dim's suffix into two dims: ``[8{a,b}, 4, 4]`` with
    ``((0, 1, 'b'), (0, 2, 'a'))`` -> ``[8, 4{b}, 4{a}]``; received pieces land in the
    source dim with the later move's axis more major (``a`` then ``b``, as the type had them).

    The data rule is the one exchange itself (:meth:`run`: each device sends piece ``g``
    to group member ``g``), not the chain; a test checks the two agree. Uneven dims: the
    chain's type rule (every one-dim move must apply in turn, nesting included), the
    padded block sent once. JSON:
    ``{"op": "all_to_all", "moves": [{"src_dim": 0, "dst_dim": 2, "axis": "b"}, ...]}``
    (in the canonical order)."""

    SINGLE: ClassVar[type] = AllToAll

    moves: tuple[tuple[int, int, str | tuple[str, ...]], ...]
    kind: ClassVar[str] = "multi_all_to_all"
    op: ClassVar[str] = "all_to_all"

    def __post_init__(self):
        _canonical_moves(self, "AllToAll(moves)", 2)

    def apply(self, t, mesh):
        for s, d, _ in self.moves:
            _check_dim(t, s, f"{self} on {t}")
            _check_dim(t, d, f"{self} on {t}")
        cur = t
        for k, c in enumerate(self.singles()):
            try:
                cur = c.apply(cur, mesh)
            except CollectiveError as e:
                if len({m[0] for m in self.moves}) == len(self.moves) == len({m[1] for m in self.moves}):
                    raise  # disjoint moves: the move's own message says it all
                raise CollectiveError(
                    f"{self} on {t}: move {k + 1} of {len(self.moves)} does not apply"
                    + (" after the moves before it" if k else "")
                    + f" (moves sharing a dim apply in order): {e}") from None
        return cur

    def dst_groups(self, mesh: Mesh) -> dict[int, int]:
        """Per destination dim, the product of the group sizes of the moves into it."""
        out: dict[int, int] = {}
        for _, d, a in self.moves:
            out[d] = out.get(d, 1) * _group_size(mesh, a)
        return out

    def src_groups(self, mesh: Mesh) -> dict[int, int]:
        """Per source dim, the product of the group sizes of the moves out of it."""
        out: dict[int, int] = {}
        for s, _, a in self.moves:
            out[s] = out.get(s, 1) * _group_size(mesh, a)
        return out

    def sent_shape(self, t_in, t_out, mesh) -> tuple[int, ...]:
        """The input block with every split dim padded to whole pieces (``n_d`` pieces of
        the output's local size, ``n_d`` the product of the moves into dim ``d``): what
        the exchange sends (``1/n`` of it stays)."""
        loc = list(t_in.local_shape(mesh))
        out = t_out.local_shape(mesh)
        for d, k in self.dst_groups(mesh).items():
            loc[d] = k * out[d]
        return tuple(loc)

    def raw_shape(self, t_in, t_out, mesh) -> tuple[int, ...]:
        """The received block before an uneven concatenated dim is truncated."""
        loc = list(t_out.local_shape(mesh))
        li = t_in.local_shape(mesh)
        for s, k in self.src_groups(mesh).items():
            loc[s] = k * li[s]
        return tuple(loc)

    def run(self, blocks, t_in, t_out, mesh):
        """One exchange over the group of every move's axes (the order of :attr:`axis`).
        A device's index on a move is its mixed-radix index over that move's axes. The
        sender cuts each destination dim into ``n_d`` pieces of the output's local size
        (after padding), indexed by the receiver's indices on the moves into that dim,
        first move most major; the receiver places the piece from each sender along each
        source dim at the sender's indices on the moves out of it, last move most major,
        then drops an uneven dim's padding. Only other devices' blocks are read."""
        moves = self.moves
        sent = self.sent_shape(t_in, t_out, mesh)
        raw = self.raw_shape(t_in, t_out, mesh)
        lo = t_out.local_shape(mesh)
        li = t_in.local_shape(mesh)
        sizes = [_group_size(mesh, a) for _, _, a in moves]
        into = {d: [k for k, m in enumerate(moves) if m[1] == d] for d in {m[1] for m in moves}}
        outof = {s: [k for k, m in enumerate(moves) if m[0] == s][::-1] for s in {m[0] for m in moves}}
        idx = np.array([[_group_index(mesh, a, d) for _, _, a in moves] for d in range(mesh.size)])

        def radix(ix, ks):
            v = 0
            for k in ks:
                v = v * sizes[k] + int(ix[k])
            return v

        padded = []
        for b in blocks:
            pad = [(0, sent[i] - b.shape[i]) if i in into else (0, 0) for i in range(b.ndim)]
            padded.append(np.pad(b, pad) if any(p[1] for p in pad) else b)
        out = []
        for d in range(len(blocks)):
            buf = np.zeros(raw, dtype=blocks[d].dtype)
            for s in _group_of(mesh, self.axis, d):
                cut = tuple(slice(radix(idx[d], into[i]) * lo[i], (radix(idx[d], into[i]) + 1) * lo[i])
                            if i in into else slice(None) for i in range(len(raw)))
                put = tuple(slice(radix(idx[s], outof[i]) * li[i], (radix(idx[s], outof[i]) + 1) * li[i])
                            if i in outof else slice(None) for i in range(len(raw)))
                buf[put] = padded[s][cut]
            keep = tuple(slice(0, lo[i]) for i in range(len(raw)))
            out.append(buf[keep])
        return out

    def _sent_elems(self, t_in, t_out, mesh):
        return math.prod(self.sent_shape(t_in, t_out, mesh))

    def repad_elems(self, t_in, t_out, mesh):
        a, b = t_in.shard_elems(mesh), t_out.shard_elems(mesh)
        sent = self._sent_elems(t_in, t_out, mesh)
        raw = math.prod(self.raw_shape(t_in, t_out, mesh))
        return max(sent if sent > a else 0, raw if raw > b else 0)

    def recv_elems_max(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return self._sent_elems(t_in, t_out, mesh) * (n - 1) // n

    recv_elems = Collective._recv_uniform

    def to_dict(self):
        return {"op": self.op, "moves": [{"src_dim": s, "dst_dim": d, "axis": _axis_json(a)}
                                         for s, d, a in self.moves]}

    def __str__(self):
        return "AllToAll(" + ", ".join(f"{s}->{d}:{_axes_text(a)}" for s, d, a in self.moves) + ")"


@dataclass(frozen=True)
class ShardedToUnreduced(Collective):
    """``axis``, the minor-most axis (or suffix) of ``dim``, leaves the dim and joins
    the unreduced set, locally: each device places its block at its offset in a zero
    block of the unsplit size. ``[16{x}, 8] -> [16, 8]{U:x}`` on ``x=2``: device 0 holds
    rows 0..7 and zeros in rows 8..15, device 1 zeros then rows 8..15; their sum is
    the array. Shardy's ``sharded_to_unreduced``; DTensor's Shard -> Partial. Moves
    nothing; the block grows by the group size (counted as memory).

    The mirror, unreduced -> sharded with no communication, is not sound: a partial
    block may carry any part of the sum anywhere, so the sound mirror is
    :class:`ReduceScatter`. The replicated form is :class:`Unreduce`."""

    dim: int
    axis: str | tuple[str, ...]
    kind: ClassVar[str] = "sharded_to_unreduced"
    local: ClassVar[bool] = True

    def __post_init__(self):
        _canonical_axis(self, "ShardedToUnreduced")

    def apply(self, t, mesh):
        who = _Who("ShardedToUnreduced(dim={}, axis={!r}) on {}", self.dim, self.axis, t)
        _check_dim(t, self.dim, who)
        names = _axes_tuple(self.axis)
        n = _group_size(mesh, names)
        rest = _suffix(t, self.dim, names, who)
        out = t.with_dim_axes(self.dim, rest)
        coarse = out.split(mesh, self.dim)
        if not nests(t.dims[self.dim].size, coarse, n):
            raise _nest_error(who, out, self.dim, coarse, n)
        return out.with_unreduced(t.unreduced + names)

    def run(self, blocks, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        coarse = t_out.local_shape(mesh)[self.dim]
        out = []
        for d, b in enumerate(blocks):
            me = _group_index(mesh, self.axis, d)
            pieces = [b if j == me else np.zeros_like(b) for j in range(n)]
            out.append(_join(pieces, self.dim, coarse))
        return out

    def repad_elems(self, t_in, t_out, mesh):
        raw = _group_size(mesh, self.axis) * t_in.shard_elems(mesh)
        return raw if raw > t_out.shard_elems(mesh) else 0

    def recv_elems_max(self, t_in, t_out, mesh):
        return 0

    recv_elems = Collective._recv_uniform

    def to_dict(self):
        return {"op": self.kind, "dim": self.dim, "axis": _axis_json(self.axis)}

    def __str__(self):
        return f"ShardedToUnreduced({self.dim}, {_axes_text(self.axis)})"


#: The table of collective kinds. Every other layer keys its own facet by ``kind``.
COLLECTIVES: dict[str, type[Collective]] = {
    c.kind: c for c in (DynSlice, AllGather, AllToAll, AllPermute, AllReduce, ReduceScatter, Unreduce,
                        MultiDynSlice, MultiAllGather, MultiAllToAll, ShardedToUnreduced)
}

#: The one-dim kind each multi-dim kind fuses (they share a JSON ``op``).
MULTI_OF = {"dyn_slice": MultiDynSlice, "all_gather": MultiAllGather, "all_to_all": MultiAllToAll}


def fuse(steps) -> Collective:
    """One collective doing what ``steps`` (DynSlices, AllGathers or AllToAlls of one
    kind, one-dim or multi-dim, on disjoint axes) do one after another:
    ``fuse([AllGather(0, 'x'), AllGather(1, 'y')]) == MultiAllGather(((0, 'x'), (1, 'y')))``.
    Slices or gathers of one dim merge into one move (``DynSlice(0, 'x'), DynSlice(0, 'y')``
    is ``DynSlice(0, ('x', 'y'))``; ``AllGather(0, 'y'), AllGather(0, 'x')`` is
    ``AllGather(0, ('x', 'y'))``). All-to-alls may share a source or a destination dim
    (``fuse([AllToAll(2, 1, 'x'), AllToAll(0, 1, 'y')]) == MultiAllToAll(((2, 1, 'x'), (0, 1, 'y')))``,
    in the order given). One move gives the one-dim form. Raises :class:`CollectiveError` when they do not
    fuse (mixed kinds, an axis in two moves, a gather's dim in two moves, an all-to-all's
    dim that both sends and receives, a pair of dims twice)."""
    steps = list(steps)
    if not steps:
        raise CollectiveError("fuse: needs at least one step")
    if len(steps) == 1:
        return steps[0]
    ops = {getattr(c, "op", c.kind) for c in steps}
    if len(ops) != 1 or next(iter(ops)) not in MULTI_OF:
        raise CollectiveError(f"fuse: steps {[str(c) for c in steps]} are not all DynSlices, "
                              "all AllGathers or all AllToAlls")
    op = next(iter(ops))
    moves = []
    for c in steps:
        mine = list(c.moves) if isinstance(c, _MultiMixin) else \
            [(c.src_dim, c.dst_dim, c.axis) if op == "all_to_all" else (c.dim, c.axis)]
        for m in mine:
            same = [k for k, e in enumerate(moves) if op != "all_to_all" and e[0] == m[0]]
            if same:  # the same dim again: one move over both groups of axes
                k = same[0]
                old, new = _axes_tuple(moves[k][1]), _axes_tuple(m[1])
                # a slice appends minor-most; a gather removes the minor-most suffix first
                moves[k] = (m[0], old + new if op == "dyn_slice" else new + old)
            else:
                moves.append(m)
    moves = [m[:-1] + (_canonical_axis_value(m[-1], "fuse"),) for m in moves]
    if len(moves) == 1:
        return COLLECTIVES[op](*moves[0])
    return MULTI_OF[op](tuple(moves))


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
        if "moves" in d and op in MULTI_OF:
            return _multi_from_dict(d)
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
        if op == "sharded_to_unreduced":
            return ShardedToUnreduced(_int_field(d, "dim"), _axis_from_json(d["axis"]))
    except KeyError as e:
        raise CollectiveError(f"plan step {op!r}: missing field {e.args[0]!r}") from None
    raise CollectiveError(f"unknown collective op {op!r}; expected one of {sorted(_JSON_OPS)}")


_JSON_OPS = {getattr(c, "op", k) for k, c in COLLECTIVES.items()}


def _multi_from_dict(d: dict) -> Collective:
    """``{"op": "all_gather", "moves": [{"dim": 0, "axis": "x"}, ...]}`` and the like;
    one move reads as the one-dim form."""
    op, moves = d["op"], d["moves"]
    if not isinstance(moves, list) or not moves or len(moves) > _MAX_MOVES:
        raise CollectiveError(f"plan step {op!r}: 'moves' must be a list of 1 to {_MAX_MOVES} "
                              f"moves, got {moves!r}"[:300])
    out = []
    for m in moves:
        if not isinstance(m, dict):
            raise CollectiveError(f"plan step {op!r}: each move must be an object, got {m!r}"[:300])
        dims = (_int_field(m, "src_dim"), _int_field(m, "dst_dim")) if op == "all_to_all" \
            else (_int_field(m, "dim"),)
        out.append(dims + (_axis_from_json(m["axis"]),))
    if len(out) == 1:
        return collective_from_dict({"op": op, **moves[0]})
    return MULTI_OF[op](tuple(out))


def fuse_runs(steps, src: ArrayType, mesh: Mesh) -> list[Collective]:
    """``steps`` with each run of consecutive DynSlices, AllGathers or AllToAlls (one kind
    per run) that :func:`fuse` accepts fused into one multi-dim step, where the fused
    step ends at the same type and receives no more than the run (on uneven dims one op
    carries padding the run trims between its steps; such a run is left as it is).

    Example, on ``x=2,y=2,z=2``: ``[AllGather(0, 'x'), AllGather(1, 'y'), AllGather(2, 'z')]``
    from ``[8{x}, 8{y}, 8{z}]`` becomes ``[MultiAllGather(((0, 'x'), (1, 'y'), (2, 'z')))]``:
    one collective instead of three, the same 7 blocks received; the step's live buffers
    are its input and the whole output (the chain never holds both at once), so the peak
    may grow: a planner weighs that (``Plan.peak_live_bytes``)."""
    steps = list(steps)
    types = [ArrayType.of(src)]
    for c in steps:
        types.append(c.apply(types[-1], mesh))
    out, i = [], 0
    while i < len(steps):
        j = i + 1
        best = None
        while j < len(steps) and getattr(steps[j], "op", steps[j].kind) == getattr(steps[i], "op", steps[i].kind):
            try:
                f = fuse(steps[i:j + 1])
                ok = f.apply(types[i], mesh) == types[j + 1]
            except CollectiveError:
                break
            if not ok:
                break
            chain = sum(int(c.recv_elems(a, b, mesh).max()) for c, a, b in
                        zip(steps[i:j + 1], types[i:j + 1], types[i + 1:j + 2]))
            if int(f.recv_elems(types[i], types[j + 1], mesh).max()) > chain:
                break
            best = (f, j)
            j += 1
        if best is None or steps[i].kind not in MULTI_OF and not isinstance(steps[i], _MultiMixin):
            out.append(steps[i])
            i += 1
        else:
            out.append(best[0])
            i = best[1] + 1
    return out


#: A multi-dim step carries at most this many moves (a type's rank is capped lower).
_MAX_MOVES = 64


# -- device-level lowering (the schedule facet of each kind) ----------------------
def schedule_ops(c: Collective, t_in: ArrayType, t_out: ArrayType, mesh: Mesh, itemsize: int,
                 op=None) -> list:
    """Lower one typed collective to :class:`synth.schedule.ScheduleOp` s: the
    collective, plus a local ``copy`` for an uneven dim's re-padding. ``op``: what builds
    each op instead of ``ScheduleOp`` (same arguments), e.g. :func:`bytes_op` where only
    the kinds and received bytes are wanted (a bytes-only cost model)."""
    if op is None:
        from synth.schedule import ScheduleOp as op

    in_b = t_in.shard_elems(mesh) * itemsize
    out_b = t_out.shard_elems(mesh) * itemsize
    return _SCHEDULE_LOWERING[c.kind](c, t_in, t_out, mesh, in_b, out_b, itemsize, op)


def bytes_op(kind, in_bytes, out_bytes, send_bytes=0, recv_bytes=0, groups=(), pairs=(), label=""):
    """``(kind, recv_bytes)`` of an op, in place of a ``ScheduleOp`` (see :func:`schedule_ops`)."""
    return kind, recv_bytes


def schedule_op(c: Collective, t_in: ArrayType, t_out: ArrayType, mesh: Mesh, itemsize: int):
    """The main op of :func:`schedule_ops` (the collective itself)."""
    ops = schedule_ops(c, t_in, t_out, mesh, itemsize)
    return next((op for op in ops if op.kind not in ("copy",)), ops[0])


def _each_device(mesh):
    return tuple((d,) for d in range(mesh.size))


def _op_devices(Op, mesh):
    """Each device alone (a local op's groups), unless ``Op`` wants no groups."""
    return () if Op is bytes_op else _each_device(mesh)


def _op_groups(Op, mesh, axis):
    """The op's device groups over ``axis``, unless ``Op`` wants no groups."""
    return () if Op is bytes_op else groups_of(mesh, axis)


def _pad_copy(Op, a_b, b_b, mesh, label):
    return Op("copy", a_b, b_b, groups=_op_devices(Op, mesh), label=label)


def _lower_dyn_slice(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    pad = c.repad_elems(t_in, t_out, mesh) * isz
    if pad:
        return [_pad_copy(Op, in_b, pad, mesh, f"pad for {c}"),
                Op("dyn_slice", pad, out_b, groups=_op_devices(Op, mesh), label=str(c))]
    return [Op("dyn_slice", in_b, out_b, groups=_op_devices(Op, mesh), label=str(c))]


def _lower_all_gather(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    raw = n * in_b
    ops = [Op("all_gather", in_b, raw, send_bytes=in_b, recv_bytes=(n - 1) * in_b,
              groups=_op_groups(Op, mesh, c.axis), label=str(c))]
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
                  groups=_op_groups(Op, mesh, c.axis), label=str(c)))
    if raw != out_b:
        ops.append(_pad_copy(Op, raw, out_b, mesh, f"unpad after {c}"))
    return ops


def _lower_all_permute(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    if Op is bytes_op:  # the pairs are not wanted (each pair receives in_b)
        pairs = ()
    else:
        src = c.sources(t_in, mesh)
        pairs = tuple((int(s), d) for d, s in enumerate(src) if int(s) != d)
    return [Op("permute", in_b, out_b, send_bytes=in_b, recv_bytes=in_b, pairs=pairs, label="AllPermute")]


def _lower_all_reduce(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    moved = 2 * in_b * (n - 1) // n  # ring traffic, as executor.hlo reads XLA's
    return [Op("all_reduce", in_b, out_b, send_bytes=moved, recv_bytes=moved,
               groups=_op_groups(Op, mesh, c.axis), label=str(c))]


def _lower_reduce_scatter(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    sent = c._sent_elems(t_in, t_out, mesh) * isz
    ops = []
    if sent != in_b:
        ops.append(_pad_copy(Op, in_b, sent, mesh, f"pad for {c}"))
    moved = sent * (n - 1) // n
    ops.append(Op("reduce_scatter", sent, out_b, send_bytes=moved, recv_bytes=moved,
                  groups=_op_groups(Op, mesh, c.axis), label=str(c)))
    return ops


def _lower_unreduce(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    return [Op("copy", in_b, out_b, groups=_op_devices(Op, mesh), label=str(c))]


def _lower_multi_dyn_slice(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    pad = c.repad_elems(t_in, t_out, mesh) * isz
    ops = [_pad_copy(Op, in_b, pad, mesh, f"pad for {c}")] if pad else []
    return ops + [Op("dyn_slice", pad or in_b, out_b, groups=_op_devices(Op, mesh), label=str(c))]


def _lower_multi_all_gather(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    # One all-gather over the group of every move's axes (XLA's one HLO all-gather).
    n = _group_size(mesh, c.axis)
    raw = n * in_b
    ops = [Op("all_gather", in_b, raw, send_bytes=in_b, recv_bytes=(n - 1) * in_b,
              groups=_op_groups(Op, mesh, c.axis), label=str(c))]
    if raw != out_b:
        ops.append(_pad_copy(Op, raw, out_b, mesh, f"unpad after {c}"))
    return ops


def _lower_multi_all_to_all(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    n = _group_size(mesh, c.axis)
    sent = c._sent_elems(t_in, t_out, mesh) * isz
    raw = math.prod(c.raw_shape(t_in, t_out, mesh)) * isz
    moved = sent * (n - 1) // n
    ops = [_pad_copy(Op, in_b, sent, mesh, f"pad for {c}")] if sent != in_b else []
    ops.append(Op("all_to_all", sent, raw, send_bytes=moved, recv_bytes=moved,
                  groups=_op_groups(Op, mesh, c.axis), label=str(c)))
    if raw != out_b:
        ops.append(_pad_copy(Op, raw, out_b, mesh, f"unpad after {c}"))
    return ops


def _lower_sharded_to_unreduced(c, t_in, t_out, mesh, in_b, out_b, isz, Op):
    # Local: write the block at its offset into a zeroed buffer of the unsplit dim.
    return [Op("copy", in_b, out_b, groups=_op_devices(Op, mesh), label=str(c))]


_SCHEDULE_LOWERING = {
    "dyn_slice": _lower_dyn_slice,
    "all_gather": _lower_all_gather,
    "all_to_all": _lower_all_to_all,
    "all_permute": _lower_all_permute,
    "all_reduce": _lower_all_reduce,
    "reduce_scatter": _lower_reduce_scatter,
    "unreduce": _lower_unreduce,
    "multi_dyn_slice": _lower_multi_dyn_slice,
    "multi_all_gather": _lower_multi_all_gather,
    "multi_all_to_all": _lower_multi_all_to_all,
    "sharded_to_unreduced": _lower_sharded_to_unreduced,
}
