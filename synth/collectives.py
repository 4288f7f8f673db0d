"""The typed collectives: one table, one class per kind.

Each kind keeps its facets together:

* ``apply(t, mesh)``        -- type rule: the type after the collective, or a precise error;
* ``run(blocks, t, mesh)``  -- data rule: per-device numpy blocks after the collective,
                               computed only from the blocks other devices hold;
* ``recv_elems(t, mesh)``   -- cost: elements each device receives (per device);
* ``schedule_op(...)``      -- device-level lowering (groups or pairs and bytes) for the
                               simulator (see :mod:`synth.schedule`).

The JAX lowering of each kind lives in ``executor/lowering.py`` (the only package that
may import jax) in a table keyed by the same ``kind`` string; a test checks that every
kind here has an entry there and in the simulator.
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
    if not (0 <= dim < t.rank):
        raise CollectiveError(f"{who}: dim {dim} is out of range for rank-{t.rank} type {t}")


def _axes_tuple(axis) -> tuple[str, ...]:
    return (axis,) if isinstance(axis, str) else tuple(axis)


def _canonical_axis(obj, who: str):
    """A one-name tuple becomes the name; a list becomes a tuple (frozen, hashable)."""
    axis = obj.axis
    if not isinstance(axis, str):
        axis = tuple(axis)
        if not axis:
            raise CollectiveError(f"{who}: needs at least one mesh axis")
        if len(axis) == 1:
            axis = axis[0]
    object.__setattr__(obj, "axis", axis)


def _axes_text(axis) -> str:
    return axis if isinstance(axis, str) else "(" + ",".join(axis) + ")"


def _group_size(mesh: Mesh, axis) -> int:
    n = 1
    for a in _axes_tuple(axis):
        n *= mesh.axis_size(a)
    return n


def _group_of(mesh: Mesh, axis, d: int) -> list[int]:
    """Devices that differ from ``d`` only on ``axis`` (a name or a tuple of names),
    ordered by the mixed-radix index of those coordinates, major to minor."""
    names = _axes_tuple(axis)
    ks = [mesh.names.index(a) for a in names]
    strides = [math.prod(mesh.sizes[k + 1:]) for k in ks]
    base = d - sum(int(mesh.coords[d, k]) * st for k, st in zip(ks, strides))
    group = [base]
    for k, st in zip(ks, strides):
        group = [g + j * st for g in group for j in range(mesh.sizes[k])]
    return group


def _group_index(mesh: Mesh, axis, d: int) -> int:
    idx = 0
    for a in _axes_tuple(axis):
        k = mesh.names.index(a)
        idx = idx * mesh.sizes[k] + int(mesh.coords[d, k])
    return idx


@dataclass(frozen=True)
class Collective(ABC):
    """Base of the table. Subclasses set ``kind`` and implement every facet."""

    kind: ClassVar[str]

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

    def is_noop(self, t_in: ArrayType, mesh: Mesh) -> bool:
        """True when no device's data changes (e.g. a collective over size-1 axes):
        a relabelling of the type that moves and copies nothing."""
        return _group_size(mesh, self.axis) == 1


@dataclass(frozen=True)
class DynSlice(Collective):
    """``axis`` (unused) becomes the minor-most axis of ``dim``; no data moves."""

    dim: int
    axis: str
    kind: ClassVar[str] = "dyn_slice"

    def apply(self, t, mesh):
        who = f"DynSlice(dim={self.dim}, axis={self.axis!r}) on {t}"
        _check_dim(t, self.dim, who)
        n = mesh.axis_size(self.axis)
        if self.axis in t.used_axes:
            raise CollectiveError(f"{who}: axis {self.axis!r} is already used (dim {t.dim_of(self.axis)})")
        local = t.local_shape(mesh)[self.dim]
        if local % n:
            raise CollectiveError(
                f"{who}: local size {local} of dim {self.dim} is not divisible by "
                f"{self.axis}={n}"
            )
        return t.with_dim_axes(self.dim, t.dims[self.dim].axes + (self.axis,))

    def run(self, blocks, t_in, t_out, mesh):
        k = mesh.names.index(self.axis)
        n = mesh.sizes[k]
        out = []
        for d, b in enumerate(blocks):
            piece = b.shape[self.dim] // n
            c = int(mesh.coords[d, k])
            idx = [slice(None)] * b.ndim
            idx[self.dim] = slice(c * piece, (c + 1) * piece)
            out.append(b[tuple(idx)])
        return out

    def recv_elems(self, t_in, t_out, mesh):
        return np.zeros(mesh.size, dtype=np.int64)

    def to_dict(self):
        return {"op": self.kind, "dim": self.dim, "axis": self.axis}

    def __str__(self):
        return f"DynSlice({self.dim}, {self.axis})"


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
        _group_size(mesh, names)
        axes = t.dims[self.dim].axes
        if axes[len(axes) - len(names):] != names or len(names) > len(axes):
            raise CollectiveError(
                f"{who}: {_axes_text(self.axis)!r} must be the minor-most axis of dim {self.dim}, "
                f"whose axes are {list(axes)}"
            )
        return t.with_dim_axes(self.dim, axes[: len(axes) - len(names)])

    def run(self, blocks, t_in, t_out, mesh):
        return [
            np.concatenate([blocks[s] for s in _group_of(mesh, self.axis, d)], axis=self.dim)
            for d in range(len(blocks))
        ]

    def recv_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return np.full(mesh.size, (n - 1) * t_in.shard_elems(mesh), dtype=np.int64)

    def to_dict(self):
        axis = self.axis if isinstance(self.axis, str) else list(self.axis)
        return {"op": self.kind, "dim": self.dim, "axis": axis}

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
        axes = t.dims[self.src_dim].axes
        if axes[len(axes) - len(names):] != names or len(names) > len(axes):
            raise CollectiveError(
                f"{who}: {_axes_text(self.axis)!r} must be the minor-most axis of dim "
                f"{self.src_dim}, whose axes are {list(axes)}"
            )
        local = t.local_shape(mesh)[self.dst_dim]
        if local % n:
            raise CollectiveError(
                f"{who}: local size {local} of dim {self.dst_dim} is not divisible by "
                f"{'*'.join(f'{a}={mesh.shape[a]}' for a in names)}"
                + (f" = {n}" if len(names) > 1 else "")
            )
        t2 = t.with_dim_axes(self.src_dim, axes[: len(axes) - len(names)])
        return t2.with_dim_axes(self.dst_dim, t.dims[self.dst_dim].axes + names)

    def run(self, blocks, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        out = []
        for d in range(len(blocks)):
            me = _group_index(mesh, self.axis, d)
            pieces = []
            for s in _group_of(mesh, self.axis, d):
                b = blocks[s]
                piece = b.shape[self.dst_dim] // n
                idx = [slice(None)] * b.ndim
                idx[self.dst_dim] = slice(me * piece, (me + 1) * piece)
                pieces.append(b[tuple(idx)])
            out.append(np.concatenate(pieces, axis=self.src_dim))
        return out

    def recv_elems(self, t_in, t_out, mesh):
        n = _group_size(mesh, self.axis)
        return np.full(mesh.size, t_in.shard_elems(mesh) * (n - 1) // n, dtype=np.int64)

    def to_dict(self):
        axis = self.axis if isinstance(self.axis, str) else list(self.axis)
        return {"op": self.kind, "src_dim": self.src_dim, "dst_dim": self.dst_dim, "axis": axis}

    def __str__(self):
        return f"AllToAll({self.src_dim}->{self.dst_dim}, {_axes_text(self.axis)})"


@dataclass(frozen=True)
class AllPermute(Collective):
    """Any type with the same local shape: each device receives its new block
    from a device that holds it (itself when it can)."""

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
    """For each device, the device whose ``t_in`` block is its ``t_out`` block.

    A device that already holds its new block keeps it. The others are spread
    round-robin over the holders of their block, so no holder sends to many."""
    local = np.array(t_in.local_shape(mesh), dtype=np.int64)
    nblocks = np.array(t_in.shape, dtype=np.int64) // local
    radix = np.append(np.cumprod(nblocks[::-1])[::-1][1:], 1)  # radix[i] = prod(nblocks[i+1:])
    have = t_in.block_indices(mesh) @ radix
    want = t_out.block_indices(mesh) @ radix
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


#: The table of collective kinds. Every other layer keys its own facet by ``kind``.
COLLECTIVES: dict[str, type[Collective]] = {
    c.kind: c for c in (DynSlice, AllGather, AllToAll, AllPermute)
}


def _axis_from_json(axis):
    return axis if isinstance(axis, str) else tuple(axis)


def collective_from_dict(d: dict) -> Collective:
    op = d.get("op")
    if op == "dyn_slice":
        return DynSlice(int(d["dim"]), d["axis"])
    if op == "all_gather":
        return AllGather(int(d["dim"]), _axis_from_json(d["axis"]))
    if op == "all_to_all":
        return AllToAll(int(d["src_dim"]), int(d["dst_dim"]), _axis_from_json(d["axis"]))
    if op == "all_permute":
        return AllPermute(ArrayType.parse(d["type"]))
    raise CollectiveError(f"unknown collective op {op!r}; expected one of {sorted(COLLECTIVES)}")


# -- device-level lowering (the schedule facet of each kind) ----------------------
def schedule_op(c: Collective, t_in: ArrayType, t_out: ArrayType, mesh: Mesh, itemsize: int):
    """Lower one typed collective to a :class:`synth.schedule.ScheduleOp`."""
    from synth.schedule import ScheduleOp

    in_b = t_in.shard_elems(mesh) * itemsize
    out_b = t_out.shard_elems(mesh) * itemsize
    return _SCHEDULE_LOWERING[c.kind](c, t_in, t_out, mesh, in_b, out_b, ScheduleOp)


def _lower_dyn_slice(c, t_in, t_out, mesh, in_b, out_b, Op):
    return Op("dyn_slice", in_b, out_b, groups=tuple((d,) for d in range(mesh.size)), label=str(c))


def _lower_all_gather(c, t_in, t_out, mesh, in_b, out_b, Op):
    n = _group_size(mesh, c.axis)
    return Op("all_gather", in_b, out_b, send_bytes=in_b, recv_bytes=(n - 1) * in_b,
              groups=tuple(tuple(g) for g in mesh.groups(c.axis)), label=str(c))


def _lower_all_to_all(c, t_in, t_out, mesh, in_b, out_b, Op):
    n = _group_size(mesh, c.axis)
    moved = in_b * (n - 1) // n
    return Op("all_to_all", in_b, out_b, send_bytes=moved, recv_bytes=moved,
              groups=tuple(tuple(g) for g in mesh.groups(c.axis)), label=str(c))


def _lower_all_permute(c, t_in, t_out, mesh, in_b, out_b, Op):
    src = c.sources(t_in, mesh)
    pairs = tuple((int(s), d) for d, s in enumerate(src) if int(s) != d)
    return Op("permute", in_b, out_b, send_bytes=in_b, recv_bytes=in_b, pairs=pairs, label="AllPermute")


_SCHEDULE_LOWERING = {
    "dyn_slice": _lower_dyn_slice,
    "all_gather": _lower_all_gather,
    "all_to_all": _lower_all_to_all,
    "all_permute": _lower_all_permute,
}
