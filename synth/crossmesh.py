"""Redistribution across two meshes: a type on mesh A to a type on mesh B.

A and B name machine devices (``a=4@4-7``, :class:`synth.mesh.Mesh`); they may be
disjoint (training to inference), overlap (an elastic resize 8 -> 6), or be the same
devices under another shape or other axis names. A :class:`CrossPlan` has three phases:

1. **on A** (``pre``): a single-mesh plan (``synth.synthesize``) from the source type to
   ``mid_a`` -- the source with its pending sums reduced, either as it is (replicas stay,
   so a device of B that holds a block already copies it locally) or with every axis of A
   that the source leaves replicated splitting a dim (``spread``: each element has one
   holder and the senders share the work evenly);
2. **the transfer** (:class:`Transfer`): point-to-point pieces. Each device of B receives,
   for every block of ``mid_a`` that meets its ``mid_b`` block, the intersection box from
   one holder of that block (itself when it holds it: a local copy). Where a block has
   several holders (replicas that no axis could split), the sender is chosen to balance
   the bytes sent (longest piece first, to the least-loaded holder);
3. **on B** (``post``): a single-mesh plan from ``mid_b`` to the target. ``mid_b`` is the
   target without its pending sums, either as it is (``direct``: replicas of B each pull
   their copy over the transfer) or with B's replicated axes splitting a dim
   (``broadcast``: every element crosses between the groups once and B's own all-gathers
   fan it out -- the broadcast where several target devices need the same piece). Where
   the target has pending sums, ``direct`` is the target itself: the members of each
   unreduced group each receive one part of the group's block and hold zeros elsewhere.

Invariants (checked by :meth:`CrossPlan.check` element by element, with the numpy data
rules of every typed step and of the transfer):

* the pieces a device of B receives tile its ``mid_b`` block exactly (padding excluded);
* every device holds at most ``max(its source shard, its target shard) + staging_bytes``
  at any time; ``staging_bytes`` is what the plan states (the largest piece a device
  receives from another device, plus, on a device in both meshes, the shard of the other
  phase it holds during the transfer); under a ``staging_cap`` the pieces are cut into
  chunks that fit it, and a cap no chunking can meet is a user error.

Worked example: ``[8{a}]`` on ``a=4@0-3`` to ``[8{b}]`` on ``b=2@4-5``. ``mid_a`` is the
source (nothing replicated), ``mid_b`` the target. Device 4 holds ``[0, 4)``: it receives
``[0, 2)`` from device 0 and ``[2, 4)`` from device 1; device 5 receives from 2 and 3.
Each device of A sends 2 elements; each of B receives 4; the receive bound is 4.

Pure Python + numpy: no jax, simpy, plotly or streamlit.
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from synth.errors import PlanError, RedistributionError, kept_for_message
from synth.interp import PAD_GARBAGE, InterpreterError, check_blocks, scatter
from synth.mesh import Mesh, parse_axis
from synth.plan import Plan
from synth.schedule import Schedule, ScheduleOp
from synth.types import ArrayType, Dim

#: ``mid_b`` strategies the planner compares (see the module docstring): ``keep`` is
#: ``mid_a`` itself on B (where B names its axes): each device receives its block whole from
#: one holder, as Shardy's ``collective_permute`` between two device orders does.
MID_B_MODES = ("broadcast", "direct", "keep")

#: What :func:`plan_crossmesh` ranks candidates by without ``cost``: received bytes
#: (``traffic``), bytes live per device with staged pieces (``memory``), or with pieces
#: written in place (``memory-inplace``).
OBJECTIVES = ("traffic", "memory", "memory-inplace")


class StagingError(RedistributionError):
    """A staging cap below what the transfer needs."""


# -- the transfer step -------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    """One box of the global array that machine device ``dst`` receives from ``src``
    (``src == dst``: a local copy). ``start``/``stop`` are global coordinates."""

    dst: int
    src: int
    start: tuple[int, ...]
    stop: tuple[int, ...]
    nbytes: int

    @property
    def local(self) -> bool:
        return self.src == self.dst

    def to_dict(self) -> dict:
        return {"from": self.src, "start": list(self.start), "stop": list(self.stop), "bytes": self.nbytes}


@dataclass(frozen=True)
class Transfer:
    """The cross-mesh step: ``mid_a`` on ``src_mesh`` becomes ``mid_b`` on ``dst_mesh`` by
    point-to-point pieces (:class:`Piece`), listed per receiving device."""

    src_mesh: Mesh
    dst_mesh: Mesh
    mid_a: ArrayType
    mid_b: ArrayType
    itemsize: int
    pieces: tuple[Piece, ...]

    @cached_property
    def remote(self) -> tuple[Piece, ...]:
        return tuple(p for p in self.pieces if not p.local)

    @property
    def sums(self) -> bool:
        """``mid_a`` still has pending sums: each receiver gets one piece per partial value
        and adds them up into its block (a reduction on the way, no collective on A)."""
        return bool(self.mid_a.unreduced)

    def recv_bytes(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for p in self.remote:
            out[p.dst] = out.get(p.dst, 0) + p.nbytes
        return out

    def send_bytes(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for p in self.remote:
            out[p.src] = out.get(p.src, 0) + p.nbytes
        return out

    def shared_devices(self) -> set[int]:
        """Devices whose ``mid_b`` block is exactly their own ``mid_a`` block (one local
        piece covering both, same local shape): the buffer is reused, not copied."""
        if self.mid_a.local_shape(self.src_mesh.local()) != self.mid_b.local_shape(self.dst_mesh.local()) \
                or self.mid_b.unreduced or self.mid_a.unreduced:
            return set()
        A, B = self.src_mesh.local(), self.dst_mesh.local()
        sa, ea = self.mid_a.regions(A)
        sb, eb = self.mid_b.regions(B)
        pa = {d: i for i, d in enumerate(self.src_mesh.device_ids)}
        pb = {d: i for i, d in enumerate(self.dst_mesh.device_ids)}
        by: dict[int, list] = {}
        for p in self.pieces:
            by.setdefault(p.dst, []).append(p)
        out = set()
        for d, ps in by.items():
            if len(ps) == 1 and ps[0].local and d in pa:
                i, j = pa[d], pb[d]
                if (tuple(sa[i]), tuple(ea[i])) == (tuple(sb[j]), tuple(eb[j])) == (ps[0].start, ps[0].stop):
                    out.add(d)
        return out

    @property
    def largest_piece_bytes(self) -> int:
        return max((p.nbytes for p in self.remote), default=0)

    def matrix(self) -> tuple[list[int], list[int], np.ndarray]:
        """``(senders, receivers, bytes[sender, receiver])`` of the remote pieces."""
        snd = sorted({p.src for p in self.remote})
        rcv = sorted({p.dst for p in self.remote})
        si, ri = {d: i for i, d in enumerate(snd)}, {d: i for i, d in enumerate(rcv)}
        m = np.zeros((len(snd), len(rcv)), dtype=np.int64)
        for p in self.remote:
            m[si[p.src], ri[p.dst]] += p.nbytes
        return snd, rcv, m

    def to_dict(self) -> dict:
        by: dict[int, list] = {}
        for p in self.pieces:
            by.setdefault(p.dst, []).append(p.to_dict())
        return {"op": "cross_mesh_transfer", "from_type": str(self.mid_a), "type": str(self.mid_b),
                "receives": [{"device": d, "pieces": by[d]} for d in sorted(by)]}

    def run(self, blocks_a: list, pad=PAD_GARBAGE) -> list:
        """The data rule: each device of B's ``mid_b`` block, assembled only from the
        pieces it receives, each cut from its sender's ``mid_a`` block."""
        A, B = self.src_mesh.local(), self.dst_mesh.local()
        sa, _ = self.mid_a.regions(A)
        sb, _ = self.mid_b.regions(B)
        pos_a = {d: i for i, d in enumerate(self.src_mesh.device_ids)}
        pos_b = {d: i for i, d in enumerate(self.dst_mesh.device_ids)}
        local = self.mid_b.local_shape(B)
        dt = blocks_a[0].dtype
        out = [np.full(local, pad, dtype=dt) for _ in range(B.size)]
        if self.sums:  # the parts are added into a zero block
            for j in range(B.size):
                _, eb = self.mid_b.regions(B)
                out[j][tuple(slice(0, int(b - a)) for a, b in zip(sb[j], eb[j]))] = 0
        if self.mid_b.unreduced:  # members hold zeros outside the part they receive
            _, eb = self.mid_b.regions(B)
            for j in range(B.size):
                out[j][tuple(slice(0, int(b - a)) for a, b in zip(sb[j], eb[j]))] = 0
        ea = self.mid_a.regions(A)[1]
        for p in self.pieces:
            i, j = pos_a[p.src], pos_b[p.dst]
            if any(a < lo or b > hi for a, b, lo, hi in zip(p.start, p.stop, sa[i], ea[i])):
                raise InterpreterError(f"transfer: device {p.src} does not hold the piece {p.start}..{p.stop} "
                                       f"it is to send to device {p.dst}")
            src_sl = tuple(slice(a - o, b - o) for a, b, o in zip(p.start, p.stop, sa[i]))
            dst_sl = tuple(slice(a - o, b - o) for a, b, o in zip(p.start, p.stop, sb[j]))
            if self.sums:
                out[j][dst_sl] += blocks_a[i][src_sl]
            else:
                out[j][dst_sl] = blocks_a[i][src_sl]
        return out


def _parts(t: ArrayType, mesh: Mesh) -> np.ndarray:
    """Per position, which partial value of its block it holds: its index in its group over
    ``t``'s unreduced axes (all 0 without pending sums)."""
    part = np.zeros(mesh.size, dtype=np.int64)
    if t.unreduced:
        from synth.collectives import groups_of

        for g in groups_of(mesh, t.unreduced):
            part[list(g)] = np.arange(len(g))
    return part


def _boxes(t: ArrayType, mesh: Mesh):
    """Distinct (start, stop) boxes of ``t`` with real data, and the positions holding each
    (with pending sums, one entry per partial value of a box: its holders hold that part)."""
    s, e = t.regions(mesh)
    key = np.concatenate([s, e, _parts(t, mesh)[:, None]], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    holders = [[] for _ in range(len(uniq))]
    for pos, k in enumerate(inv):
        holders[k].append(pos)
    r = t.rank
    vol = np.clip(uniq[:, r:2 * r] - uniq[:, :r], 0, None).prod(axis=1)
    keep = vol > 0
    return uniq[keep, :r], uniq[keep, r:2 * r], [h for h, k in zip(holders, keep) if k]


def _slab(b0, b1, k: int, n: int):
    """Part ``k`` of ``n`` of the box ``[b0, b1)``, cut along its longest dim."""
    ext = [int(e - s) for s, e in zip(b0, b1)]
    dim = int(np.argmax(ext))
    step = -(-ext[dim] // n)
    lo, hi = list(b0), list(b1)
    lo[dim] = min(int(b0[dim]) + k * step, int(b1[dim]))
    hi[dim] = min(int(b0[dim]) + (k + 1) * step, int(b1[dim]))
    return tuple(int(x) for x in lo), tuple(int(x) for x in hi)


def recv_units(mid_b: ArrayType, dst_mesh: Mesh):
    """``(device, start, stop)``: the boxes each device of B must receive. Without pending
    sums, its ``mid_b`` block. With pending sums, the members of each unreduced group share
    their block: member ``k`` of ``n`` receives part ``k`` (cut along the longest dim) and
    holds zeros elsewhere, so the group's partial blocks sum to the block."""
    B = dst_mesh.local()
    ids = dst_mesh.device_ids
    s, e = mid_b.regions(B)
    units = []
    if not mid_b.unreduced:
        for q in range(B.size):
            units.append((ids[q], tuple(int(x) for x in s[q]), tuple(int(x) for x in e[q])))
        return units
    from synth.collectives import groups_of

    for g in groups_of(B, mid_b.unreduced):
        for k, q in enumerate(g):
            lo, hi = _slab(s[q], e[q], k, len(g))
            units.append((ids[q], lo, hi))
    return units


def plan_transfer(src_mesh: Mesh, mid_a: ArrayType, dst_mesh: Mesh, mid_b: ArrayType,
                  itemsize: int) -> Transfer:
    """The pieces from ``mid_a`` on A to ``mid_b`` on B, senders balanced among replicas.

    For each distinct block of ``mid_a`` (its holders are a replica group) and each box a
    device of B must receive (:func:`recv_units`) that meets it, one piece: the
    intersection. A receiver holding the block copies it locally; otherwise the pieces
    of a replica group go longest first to the holder that has sent the fewest bytes so
    far (LPT): its busiest holder sends at most 4/3 of the best possible assignment."""
    A = src_mesh.local()
    a0, a1, ahold = _boxes(mid_a, A)
    units = [u for u in recv_units(mid_b, dst_mesh) if all(b > a for a, b in zip(u[1], u[2]))]
    ida = src_mesh.device_ids
    pieces = []
    if not units or not len(a0):
        return Transfer(src_mesh, dst_mesh, mid_a, mid_b, itemsize, ())
    u0 = np.array([u[1] for u in units], dtype=np.int64)
    u1 = np.array([u[2] for u in units], dtype=np.int64)
    lo = np.maximum(a0[:, None, :], u0[None, :, :])
    hi = np.minimum(a1[:, None, :], u1[None, :, :])
    vol = np.clip(hi - lo, 0, None).prod(axis=2)
    # every (block, unit) pair that meets, in block order then unit order, as Python values
    ia_all, iu_all = np.nonzero(vol)
    los = [tuple(r) for r in lo[ia_all, iu_all].tolist()]
    his = [tuple(r) for r in hi[ia_all, iu_all].tolist()]
    nbs = (vol[ia_all, iu_all] * itemsize).tolist()
    dsts = [units[iu][0] for iu in iu_all.tolist()]
    bounds = np.searchsorted(ia_all, np.arange(len(a0) + 1)).tolist()
    for ia in range(len(a0)):
        holders = [ida[p] for p in ahold[ia]]
        hset = set(holders)
        jobs = []
        for k in range(bounds[ia], bounds[ia + 1]):
            box, nb, d = (los[k], his[k]), nbs[k], dsts[k]
            if d in hset:
                pieces.append(Piece(d, d, box[0], box[1], nb))
            else:
                jobs.append((nb, d, box))
        if not jobs:
            continue
        if len(holders) == 1:
            pieces += [Piece(d, holders[0], b[0], b[1], nb) for nb, d, b in jobs]
            continue
        heap = [(0, h) for h in holders]
        heapq.heapify(heap)
        for nb, d, b in sorted(jobs, key=lambda j: (-j[0], j[1], j[2])):
            load, h = heapq.heappop(heap)
            pieces.append(Piece(d, h, b[0], b[1], nb))
            heapq.heappush(heap, (load + nb, h))
    pieces.sort(key=lambda p: (p.dst, p.start, p.src))
    return Transfer(src_mesh, dst_mesh, mid_a, mid_b, itemsize, tuple(pieces))


#: The most pieces a chunked transfer may have (:func:`chunk_transfer`); a staging cap that
#: needs more is refused (raise the cap).
MAX_CHUNKS = 200_000


def split_piece(p: Piece, cap_bytes: int, itemsize: int) -> list[Piece]:
    """``p`` cut into chunks of at most ``cap_bytes`` each, in row-major order of the box, so
    each chunk is contiguous in it: the outermost dims are taken one index at a time until a
    slab of one index along the next dim fits, and that dim is cut into runs of as many
    indices as fit. The smallest chunk is one element (``itemsize`` bytes).

    Worked example: a ``[4, 6]`` box of 4-byte elements (96 bytes) under a 40-byte cap: a
    row is 24 bytes, so one row per chunk along dim 0 -> 4 chunks of ``[1, 6]``; under a
    48-byte cap, 2 rows per chunk -> 2 chunks of ``[2, 6]``; under a 20-byte cap, single rows
    are cut into runs of 5 elements -> 8 chunks (``[1, 5]`` and ``[1, 1]`` per row)."""
    if p.nbytes <= cap_bytes:
        return [p]
    if cap_bytes < itemsize:
        raise StagingError(f"plan_crossmesh: the staging cap of {cap_bytes} bytes is below one element "
                           f"({itemsize} bytes), the smallest piece a transfer can send; raise the cap")
    ext = [b - a for a, b in zip(p.start, p.stop)]
    rank = len(ext)
    k = 0
    while k < rank and math.prod(ext[k + 1:]) * itemsize > cap_bytes:
        k += 1
    k = min(k, rank - 1)
    slab = math.prod(ext[k + 1:]) * itemsize  # one index along dim k
    run = max(1, cap_bytes // slab)
    out = []
    for outer in np.ndindex(*ext[:k]) if k else [()]:
        for lo in range(0, ext[k], run):
            hi = min(ext[k], lo + run)
            start = tuple(p.start[i] + outer[i] for i in range(k)) + (p.start[k] + lo,) + p.start[k + 1:]
            stop = tuple(p.start[i] + outer[i] + 1 for i in range(k)) + (p.start[k] + hi,) + p.stop[k + 1:]
            out.append(Piece(p.dst, p.src, start, stop, (hi - lo) * slab))
    return out


def chunk_transfer(x: Transfer, cap_bytes: int) -> Transfer:
    """``x`` with every remote piece above ``cap_bytes`` cut into chunks that fit
    (:func:`split_piece`); local copies stage nothing and stay whole."""
    from dataclasses import replace

    if x.largest_piece_bytes <= cap_bytes:
        return x
    out = []
    for p in x.pieces:
        out.extend([p] if p.local else split_piece(p, cap_bytes, x.itemsize))
        if len(out) > MAX_CHUNKS:
            raise StagingError(f"plan_crossmesh: a staging cap of {cap_bytes} bytes cuts the transfer into more "
                               f"than {MAX_CHUNKS:,} chunks; raise the cap")
    return replace(x, pieces=tuple(out))


# -- the intermediate types --------------------------------------------------------------------
def spread(t: ArrayType, mesh: Mesh) -> ArrayType:
    """``t`` with every axis of ``mesh`` that it leaves replicated splitting a dim, where
    the dim divides evenly (the dim with the largest shard first): each element then has
    fewer holders. Pending sums are dropped (the caller reduces them first).

    >>> str(spread(ArrayType.parse("[8{x}, 6]"), Mesh.parse("x=2,y=3")))
    '[8{x}, 6{y}]'
    """
    used = {parse_axis(a)[0] for a in t.all_axes}
    dims = list(t.dims)
    for name, k in mesh.axes:
        if name in used or k == 1:
            continue
        best, best_local = None, 0
        for i, d in enumerate(dims):
            split = math.prod(mesh.shape[a] for a in d.axes)
            if d.size % (split * k) == 0 and d.size // split > best_local:
                best, best_local = i, d.size // split
        if best is not None:
            dims[best] = Dim(dims[best].size, dims[best].axes + (name,))
    return ArrayType(tuple(dims))


# -- the plan ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CrossPlan:
    """A redistribution from ``src`` on ``src_mesh`` to ``dst`` on ``dst_mesh``: ``pre`` (a
    :class:`Plan` on A), ``transfer``, ``post`` (a :class:`Plan` on B). Device ids in the
    transfer and in :meth:`device_memory` are machine devices; the phase plans use mesh
    positions (``mesh.device_ids`` maps them)."""

    src_mesh: Mesh
    dst_mesh: Mesh
    src: ArrayType
    dst: ArrayType
    itemsize: int
    pre: Plan
    transfer: Transfer
    post: Plan
    mode: str = "broadcast"
    notes: tuple[str, ...] = field(default=(), compare=False)

    # -- memory ------------------------------------------------------------------------------
    def _shard(self, t: ArrayType, mesh: Mesh) -> int:
        return t.shard_elems(mesh.local()) * self.itemsize

    @cached_property
    def devices(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.src_mesh.device_ids) | set(self.dst_mesh.device_ids)))

    @cached_property
    def device_memory(self) -> dict[int, dict]:
        """Per machine device: its source and target shard, the largest buffer it holds in
        each phase (shards of the phase's types; in the transfer, the ``mid_a`` shard it
        sends from, the ``mid_b`` shard it receives into and the largest remote piece in
        flight), and ``max(source, target)``."""
        ina, inb = set(self.src_mesh.device_ids), set(self.dst_mesh.device_ids)
        s_a = self._shard(self.src, self.src_mesh)
        s_b = self._shard(self.dst, self.dst_mesh)
        m_a = self._shard(self.transfer.mid_a, self.src_mesh)
        m_b = self._shard(self.transfer.mid_b, self.dst_mesh)
        # a device whose whole block is one remote piece receives it as its buffer; one that
        # assembles several pieces holds the largest one in flight (the staging buffer)
        biggest: dict[int, int] = {}
        count: dict[int, int] = {}
        for p in self.transfer.pieces:
            count[p.dst] = count.get(p.dst, 0) + 1
        for p in self.transfer.remote:
            if count[p.dst] > 1:
                biggest[p.dst] = max(biggest.get(p.dst, 0), p.nbytes)
        shared = self.transfer.shared_devices()
        sent: dict[int, int] = {}  # the largest remote piece a device cuts out of its block to send
        for p in self.transfer.remote:
            if p.nbytes < m_a:
                sent[p.src] = max(sent.get(p.src, 0), p.nbytes)
        mine: dict[int, list] = {}
        for p in self.transfer.pieces:
            mine.setdefault(p.dst, []).append(p.nbytes)
        out = {}
        for d in self.devices:
            src_b = s_a if d in ina else 0
            dst_b = s_b if d in inb else 0
            if d in shared:  # its mid_b block is its mid_a block: one buffer serves both
                xfer = m_a
            else:
                xfer = (m_a if d in ina else 0) + (m_b + biggest.get(d, 0) if d in inb else 0)
            pre = self.pre.max_shard_bytes if d in ina else 0
            post = self.post.max_shard_bytes if d in inb else 0
            out[d] = {"src_shard_bytes": src_b, "dst_shard_bytes": dst_b, "pre_bytes": pre,
                      "transfer_bytes": xfer, "post_bytes": post,
                      "peak_bytes": max(pre, xfer, post), "own_bound_bytes": max(src_b, dst_b),
                      "live_bytes": self._live(d, d in ina, d in inb, s_a, m_a, m_b, s_b, shared,
                                               sent.get(d, 0), mine.get(d, []))}
        return out

    def _live(self, d, in_a, in_b, s_a, m_a, m_b, s_b, shared, send, mine, staged: bool = True) -> int:
        """Bytes live on ``d`` when the caller keeps the source (as ``jax.device_put``'s caller
        does) and each phase runs as one program (its input and output live together):
        what :mod:`executor.crossmesh` allocates, against ``jax.device_put``'s source + target."""
        pre_steps = len(self.pre.device_steps())
        post_steps = len(self.post.device_steps())
        held = s_a if in_a else 0
        pre = 0
        if in_a and pre_steps:
            pre = self.pre.peak_live_bytes + (s_a if pre_steps > 1 else 0)
        hold_a = (m_a if pre_steps else 0) if in_a else 0
        assembled = len(mine) > 1 or bool(self.transfer.mid_b.unreduced)  # a zero block, pieces written in
        if not staged:  # pieces written straight into the receiver's block from the sender's buffer
            assembled, send = False, 0
        xfer_b = 0 if d in shared else ((m_b + (max(mine, default=0) if assembled else 0)) if in_b else 0)
        xfer = held + hold_a + send + xfer_b
        post = 0
        if in_b:
            post = held + (self.post.peak_live_bytes + (m_b if post_steps > 1 else 0) if post_steps else
                           (0 if d in shared else s_b))
        return int(max(held + pre, xfer, post))

    @cached_property
    def live_bytes_in_place_max_device(self) -> int:
        """:attr:`live_bytes_max_device` when every piece is written straight from its
        sender's buffer into its receiver's block (nothing staged on either side: the
        executor's ``inplace`` transfer)."""
        ina, inb = set(self.src_mesh.device_ids), set(self.dst_mesh.device_ids)
        s_a = self._shard(self.src, self.src_mesh)
        s_b = self._shard(self.dst, self.dst_mesh)
        m_a = self._shard(self.transfer.mid_a, self.src_mesh)
        m_b = self._shard(self.transfer.mid_b, self.dst_mesh)
        shared = self.transfer.shared_devices()
        return max(self._live(d, d in ina, d in inb, s_a, m_a, m_b, s_b, shared, 0, [], staged=False)
                   for d in self.devices)

    @property
    def staging_bytes(self) -> int:
        """The stated staging buffer: the most any device holds beyond ``max(its source
        shard, its target shard)`` (during the transfer: the largest piece in flight on a
        device that assembles its block from several pieces and, on a device in both
        meshes, the other phase's shard)."""
        return max(max(0, m["peak_bytes"] - m["own_bound_bytes"]) for m in self.device_memory.values())

    @property
    def peak_bytes_max_device(self) -> int:
        return max(m["peak_bytes"] for m in self.device_memory.values())

    @property
    def live_bytes_max_device(self) -> int:
        return max(m["live_bytes"] for m in self.device_memory.values())

    @property
    def bound_bytes(self) -> int:
        """``max over devices of max(source shard, target shard)`` plus the staging buffer."""
        return max(m["own_bound_bytes"] for m in self.device_memory.values()) + self.staging_bytes

    @property
    def bound_holds(self) -> bool:
        st = self.staging_bytes
        return all(m["peak_bytes"] <= m["own_bound_bytes"] + st for m in self.device_memory.values())

    @cached_property
    def recv_lower_bound_bytes(self) -> int:
        return cross_recv_lower_bound_bytes(self.src_mesh, self.src, self.dst_mesh, self.dst, self.itemsize)

    def recv_bytes_max_device(self) -> int:
        """Bytes the busiest device receives over all three phases."""
        tot: dict[int, int] = dict(self.transfer.recv_bytes())
        for plan, mesh in ((self.pre, self.src_mesh), (self.post, self.dst_mesh)):
            r = plan.recv_bytes_per_device_per_step
            per = r.sum(axis=0) if len(r) else np.zeros(mesh.size, dtype=np.int64)
            for pos, d in enumerate(mesh.device_ids):
                tot[d] = tot.get(d, 0) + int(per[pos])
        return max(tot.values(), default=0)

    def metrics(self) -> dict:
        return dict(self._metrics)

    @cached_property
    def _metrics(self) -> dict:
        send = self.transfer.send_bytes()
        return {
            "peak_bytes_max_device": int(self.peak_bytes_max_device),
            "staging_bytes": int(self.staging_bytes),
            "live_bytes_max_device": int(self.live_bytes_max_device),
            "bound_bytes": int(self.bound_bytes),
            "bound_holds": bool(self.bound_holds),
            "recv_bytes_max_device": int(self.recv_bytes_max_device()),
            "recv_lower_bound_bytes": int(self.recv_lower_bound_bytes),
            "transfer_bytes": int(sum(p.nbytes for p in self.transfer.remote)),
            "transfer_send_bytes_max_device": int(max(send.values(), default=0)),
            "transfer_pieces": len(self.transfer.remote),
            "local_pieces": len(self.transfer.pieces) - len(self.transfer.remote),
            "num_collectives": int(self.pre.num_collectives + self.post.num_collectives
                                   + (1 if self.transfer.remote else 0)),
        }

    # -- checking ----------------------------------------------------------------------------
    def check(self, x: np.ndarray | None = None, seed: int | None = 0) -> list:
        """Run all three phases on ``x`` (default ``arange``) with the numpy data rules and
        check every device's block after every step, element by element. Returns the
        final blocks of B (by mesh position). Raises ``InterpreterError`` on a bug."""
        if x is None:
            x = np.arange(self.src.num_elems(), dtype=np.int64).reshape(self.src.shape)
        rng = np.random.default_rng(seed) if seed is not None else None
        pad = PAD_GARBAGE if x.dtype.kind in "iu" else np.nan
        pre = self.pre
        blocks = scatter(x, pre.work_types[0], pre.work_mesh, rng, pad=pad)
        blocks = _run_steps(pre, blocks, x, "on A")
        check_blocks(x, blocks, self.transfer.mid_a, self.src_mesh.local(), "before the transfer")
        blocks = self.transfer.run(blocks, pad)
        check_blocks(x, blocks, self.transfer.mid_b, self.dst_mesh.local(), "after the transfer")
        return _run_steps(self.post, blocks, x, "on B")

    # -- forms -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        steps = []
        for phase, plan in (("src", self.pre), ("dst", self.post)):
            rows = []
            for c, t in zip(plan.steps, plan.types):
                d = c.to_dict()
                d["type"] = str(t)
                d["mesh"] = phase
                rows.append(d)
            if phase == "src":
                steps += rows
                xfer = self.transfer.to_dict()
                xfer["mesh"] = "src->dst"
                steps.append(xfer)
            else:
                steps += rows
        out = {
            "src_mesh": _mesh_dict(self.src_mesh),
            "dst_mesh": _mesh_dict(self.dst_mesh),
            "itemsize": self.itemsize,
            "src": str(self.src),
            "dst": str(self.dst),
            "planner": f"crossmesh/{self.pre.planner}",
            "mode": self.mode,
            "steps": steps,
            "metrics": self.metrics(),
            "devices": {str(d): m for d, m in self.device_memory.items()},
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def schedules(self) -> tuple[Schedule, list[tuple], Schedule]:
        """The device-level form: ``pre`` and ``post`` as schedules on machine device ids
        (``num_devices`` = largest id + 1) and the transfer as ``(src, dst, bytes)`` flows."""
        n = max(self.devices) + 1
        flows = [(p.src, p.dst, p.nbytes) for p in self.transfer.remote]
        return (_remap(self.pre.to_schedule(), self.src_mesh.device_ids, n), flows,
                _remap(self.post.to_schedule(), self.dst_mesh.device_ids, n))

    def __str__(self) -> str:
        return format_crossplan(self)


def relabel(plan: CrossPlan, ids: dict) -> CrossPlan:
    """``plan`` with every machine device ``d`` renamed ``ids[d]`` (a one-to-one map over
    :attr:`CrossPlan.devices`): the same phases (they work on mesh positions) and the same
    pieces, between the renamed devices. A plan is found once for arrays whose meshes differ
    only by such a renaming (a pipeline stage's sub-mesh, shifted by whole nodes), and the
    renaming is valid on a machine where it maps the topology onto itself.

    Worked example: ``[8{a}]`` on ``a=4@0-3`` to ``[8{b}]`` on ``b=2@4-5`` renamed by
    ``d -> d + 8`` is the plan from ``a=4@8-11`` to ``b=2@12-13``: device 12 receives
    ``[0, 2)`` from device 8 and ``[2, 4)`` from device 9."""
    from dataclasses import replace

    def mesh(m: Mesh) -> Mesh:
        return Mesh(m.axes, m.base, tuple(ids[d] for d in m.device_ids))

    a, b = mesh(plan.src_mesh), mesh(plan.dst_mesh)
    x = plan.transfer
    pieces = tuple(replace(q, src=ids[q.src], dst=ids[q.dst]) for q in x.pieces)
    return replace(plan, src_mesh=a, dst_mesh=b, transfer=replace(x, src_mesh=a, dst_mesh=b, pieces=pieces))


def _mesh_dict(m: Mesh) -> dict:
    return {"axes": m.to_dict(), "devices": list(m.device_ids), "text": str(m)}


def _remap(s: Schedule, ids, n: int) -> Schedule:
    from dataclasses import replace

    ops = [replace(op, groups=tuple(tuple(ids[d] for d in g) for g in op.groups),
                   pairs=tuple((ids[a], ids[b]) for a, b in op.pairs)) for op in s.ops]
    meta = {k: v for k, v in s.meta.items() if k not in ("mesh", "src", "dst")}
    return Schedule(n, ops, s.name, meta)


def _run_steps(plan: Plan, blocks, x, where):
    t, mesh = plan.work_types[0], plan.work_mesh
    for i, c in enumerate(plan.steps):
        check_blocks(x, blocks, t, mesh, f"{where}: before step {i} {c}")
        t_next = c.apply(t, mesh)
        blocks = c.run(blocks, t, t_next, mesh)
        t = t_next
        check_blocks(x, blocks, t, mesh, f"{where}: after step {i} {c}")
    return blocks


def transfer_schedule_op(flows, n: int) -> ScheduleOp | None:
    """Not used by the simulator (pieces differ in size); kept for tools that want one op."""
    if not flows:
        return None
    nb = max(b for _, _, b in flows)
    return ScheduleOp("permute", nb, nb, nb, nb, pairs=tuple((a, b) for a, b, _ in flows),
                      label="cross-mesh transfer")


# -- the planner -------------------------------------------------------------------------------
def check_meshes(src_mesh: Mesh, dst_mesh: Mesh, num_devices: int | None = None) -> None:
    """Both meshes fit a machine of ``num_devices`` devices (when given)."""
    if num_devices is None:
        return
    for what, m in (("source mesh", src_mesh), ("target mesh", dst_mesh)):
        top = max(m.device_ids)
        if top >= num_devices:
            raise PlanError(f"{what} {m} names device {top}, but the machine has {num_devices} devices "
                            f"(0..{num_devices - 1}); pick ids below {num_devices} or a larger machine")


def plan_crossmesh(src_mesh, src, dst_mesh, dst, itemsize: int = 4, *, planner: str = "auto",
                   staging_cap_bytes: int | None = None, mode: str | None = None,
                   num_devices: int | None = None, cost=None, objective: str = "traffic",
                   spread_source: bool | None = None) -> CrossPlan:
    """Plan ``src`` on ``src_mesh`` to ``dst`` on ``dst_mesh`` (see the module docstring).

    ``planner`` plans the phases on A and on B (``synth.synthesize``). ``mode`` forces
    ``mid_b`` (``"broadcast"``, ``"direct"`` or ``"keep"``); by default each, with ``mid_a``
    spread and not, is built (at most six candidates) and the one that wins
    :func:`_default_key` is returned (``objective="memory"``: the fewest bytes live on the
    busiest device first, :func:`_memory_key`; ``"memory-inplace"``: the same with pieces
    written in place, :func:`_memory_inplace_key`), or, with ``cost(crossplan) -> seconds``,
    the fastest. ``spread_source`` forces ``mid_a`` spread (True) or not (False).
    ``staging_cap_bytes`` cuts every remote piece above it into chunks that fit
    (:func:`chunk_transfer`) and refuses a cap below one element, or below what a device
    in both meshes holds of the other phase (which no chunking reduces)."""
    from synth.planners import synthesize

    A, B = Mesh.of(src_mesh), Mesh.of(dst_mesh)
    check_meshes(A, B, num_devices)
    src = ArrayType.of(src).check(A.local(), "source type")
    dst = ArrayType.of(dst).check(B.local(), "target type")
    if src.shape != dst.shape:
        raise PlanError(f"plan_crossmesh: the target {dst} cannot be reached from the source {src}: their "
                        f"global shapes {src.shape} and {dst.shape} differ; a redistribution keeps the array")
    if objective not in OBJECTIVES:
        raise RedistributionError(f"plan_crossmesh: objective must be one of {list(OBJECTIVES)}, got {objective!r}")
    if mode is not None and mode not in MID_B_MODES:
        raise RedistributionError(f"plan_crossmesh: mode must be one of {list(MID_B_MODES)}, got {mode!r}")
    plain_b = ArrayType(dst.dims)
    cands = []
    refused: list[StagingError] = []
    seen = set()
    spreads: tuple = (True, False) if spread_source is None else (bool(spread_source),)
    if src.unreduced and spread_source is None and objective == "memory-inplace":
        spreads += ("sum",)  # keep the pending sums: receivers add the parts (no collective on A)
    for spread_a in spreads:
        if spread_a == "sum":
            mid_a = src
        else:
            mid_a = spread(src, A.local()) if spread_a else ArrayType(src.dims)
        pre = synthesize(A.local(), src, mid_a, planner=planner, itemsize=itemsize)
        mid_a = pre.work_types[-1].canonical(A.local())
        for m in ((mode,) if mode else MID_B_MODES):
            if m == "keep":
                try:
                    mid_b = ArrayType(mid_a.dims).check(B.local(), "keep")
                except RedistributionError:  # B does not name A's axes (or sizes them otherwise)
                    continue
            elif dst.unreduced and m == "direct":
                mid_b = dst  # the members of each unreduced group share its block (recv_units)
            else:
                mid_b = spread(plain_b, B.local()) if m == "broadcast" else plain_b
            if (mid_a, mid_b) in seen:
                continue
            seen.add((mid_a, mid_b))
            post = synthesize(B.local(), mid_b, dst, planner=planner, itemsize=itemsize)
            xfer = plan_transfer(A, mid_a, B, mid_b, itemsize)
            if staging_cap_bytes is not None:
                try:
                    xfer = chunk_transfer(xfer, staging_cap_bytes)
                except StagingError as e:  # this candidate cannot meet the cap; another may
                    refused.append(kept_for_message(e))
                    continue
            cands.append(CrossPlan(A, B, src, dst, itemsize, pre, xfer, post, m))
    if not cands and not refused:  # only mode="keep" can leave none
        raise RedistributionError(
            f"plan_crossmesh: mode 'keep' moves {src} whole onto {B}, but that mesh does not name its axes "
            f"with their sizes ({A.local()}); use mode 'direct' or 'broadcast', or leave mode unset")
    if not cands:
        raise refused[0]
    if staging_cap_bytes is not None:  # candidates within the cap first (a shared device's other shard counts)
        cands = [c for c in cands if c.staging_bytes <= staging_cap_bytes] or cands
    if cost is not None:
        best = min(cands, key=lambda p: (cost(p), MID_B_MODES.index(p.mode)))
    else:
        best = min(cands, key={"memory": _memory_key, "memory-inplace": _memory_inplace_key}.get(objective,
                                                                                             _default_key))
    if staging_cap_bytes is not None:
        need = best.staging_bytes
        if need > staging_cap_bytes:  # pieces fit the cap by now: the rest is the other phase's shard
            raise StagingError(
                f"plan_crossmesh: the staging cap of {staging_cap_bytes} bytes is below what the transfer needs "
                f"({need} bytes: chunks of at most {best.transfer.largest_piece_bytes} bytes, plus, on a device in "
                f"both meshes, the shard of the other phase it holds) for {src} on {A} -> {dst} on {B}; raise the "
                f"cap to at least {need}")
    return best


def _default_key(p: CrossPlan):
    """Within max(source shard, target shard) on every device (no staging buffer) first,
    as the single-mesh planners keep within it; then the fewest bytes into the busiest
    device, then fewest out of the busiest sender, then the smallest staging buffer, then
    fewer collectives. Example: ``[16{x}, 8]`` on ``x=2,y=2@3,2,1,0`` to ``[16, 8{x,y}]`` on
    ``x=2,y=2@3,1,2,0``: the direct transfer receives 64 B but stages 192 B on devices in
    both meshes; slicing to ``[16{x,y}, 8]``, moving it whole (``keep``) and one all-to-all
    receive 224 B in 2 collectives within the bound (Shardy's sequence)."""
    m = p.metrics()
    return (m["staging_bytes"] > 0, m["recv_bytes_max_device"], m["transfer_send_bytes_max_device"],
            m["staging_bytes"], m["num_collectives"], MID_B_MODES.index(p.mode))


def _memory_key(p: CrossPlan):
    """The fewest bytes live on the busiest device (:meth:`CrossPlan._live`), then traffic."""
    return (p.live_bytes_max_device,) + _default_key(p)


def _memory_inplace_key(p: CrossPlan):
    """The fewest bytes live on the busiest device when pieces are written in place
    (:attr:`CrossPlan.live_bytes_in_place_max_device`), then traffic."""
    return (p.live_bytes_in_place_max_device,) + _default_key(p)


# -- the receive bound -------------------------------------------------------------------------
def need_bytes(src_mesh: Mesh, src: ArrayType, dst_mesh: Mesh, dst: ArrayType, itemsize: int,
               groups=None) -> dict:
    """Bytes that must arrive, by any plan, into each set of machine devices.

    ``groups`` maps a name to a set of machine devices (default: each device of B alone).
    A set needs every element of the union of its members' target blocks that none of its
    members holds in its source block (with pending sums in the source, holding a partial
    value is counted as holding the value -- a relaxation, so the figure stays a bound).
    With pending sums in the target, only the target blocks of unreduced groups that lie
    wholly inside the set count, spread over the group's members for a single device.
    Blocks of one type are disjoint boxes, so the unions are sums over distinct boxes."""
    A, B = src_mesh.local(), dst_mesh.local()
    s0, s1 = ArrayType(src.dims).regions(A)
    d0, d1 = ArrayType(dst.dims).regions(B)
    ida, idb = src_mesh.device_ids, dst_mesh.device_ids
    if dst.unreduced:
        from synth.collectives import groups_of

        ugroups = [tuple(idb[q] for q in g) for g in groups_of(B, dst.unreduced)]
    else:
        ugroups = [(d,) for d in idb]
    pos_b = {d: q for q, d in enumerate(idb)}
    if groups is None:
        groups = {d: {d} for d in idb}
    out = {}
    for name, members in groups.items():
        members = set(members)
        held = sorted({(tuple(s0[p]), tuple(s1[p])) for p, d in enumerate(ida) if d in members})
        boxes = set()
        spread_over = 1
        for g in ugroups:
            inside = [d for d in g if d in members]
            if not inside:
                continue
            if len(inside) < len(g) and len(members) > 1:
                continue  # another member of the group, outside the set, may receive it
            q = pos_b[g[0]]
            boxes.add((tuple(d0[q]), tuple(d1[q])))
            if len(members) == 1:
                spread_over = len(g)
        total = 0
        for b0, b1 in boxes:
            b0, b1 = np.array(b0), np.array(b1)
            vol = int(np.clip(b1 - b0, 0, None).prod())
            have = 0
            for h0, h1 in held:
                have += int(np.clip(np.minimum(b1, h1) - np.maximum(b0, h0), 0, None).prod())
            total += vol - have
        out[name] = -(-max(total, 0) // spread_over) * itemsize
    return out


def cross_recv_lower_bound_bytes(src_mesh, src, dst_mesh, dst, itemsize: int) -> int:
    """The receive bound: the most bytes any single device must receive (:func:`need_bytes`)."""
    return max(need_bytes(Mesh.of(src_mesh), ArrayType.of(src), Mesh.of(dst_mesh), ArrayType.of(dst),
                          itemsize).values(), default=0)


# -- text --------------------------------------------------------------------------------------
def format_crossplan(p: CrossPlan) -> str:
    from synth.format import fmt_bytes

    m = p.metrics()
    out = [f"cross-mesh plan ({p.mode}) from mesh {p.src_mesh} to mesh {p.dst_mesh}, itemsize {p.itemsize}",
           f"  {p.src}  ->  {p.dst}", "",
           f"on {p.src_mesh}: {p.src} -> {p.transfer.mid_a}"]
    out += [f"  {c}  -> {t}" for c, t in zip(p.pre.steps, p.pre.types)] or ["  (nothing)"]
    out.append(f"transfer: {m['transfer_pieces']} pieces ({fmt_bytes(m['transfer_bytes'])}), "
               f"{m['local_pieces']} local copies; busiest sender {fmt_bytes(m['transfer_send_bytes_max_device'])}")
    for d, r in sorted(p.transfer.recv_bytes().items())[:8]:
        who = sorted({q.src for q in p.transfer.remote if q.dst == d})
        out.append(f"  device {d} receives {fmt_bytes(r)} from {who}")
    if len(p.transfer.recv_bytes()) > 8:
        out.append(f"  ... {len(p.transfer.recv_bytes()) - 8} more receiving devices")
    out.append(f"on {p.dst_mesh}: {p.transfer.mid_b} -> {p.dst}")
    out += [f"  {c}  -> {t}" for c, t in zip(p.post.steps, p.post.types)] or ["  (nothing)"]
    out += ["",
            f"peak per device {fmt_bytes(m['peak_bytes_max_device'])}  (bound max(src,dst) + staging "
            f"{fmt_bytes(m['staging_bytes'])} = {fmt_bytes(m['bound_bytes'])}: "
            f"{'holds' if m['bound_holds'] else 'EXCEEDED'})",
            f"received        {fmt_bytes(m['recv_bytes_max_device'])} per device (max); lower bound "
            f"{fmt_bytes(m['recv_lower_bound_bytes'])}",
            f"collectives     {m['num_collectives']}"]
    return "\n".join(out)


# -- seeded cases ------------------------------------------------------------------------------
#: Mesh pairs on 8 devices for :func:`seeded_cases`, by kind.
CASE_MESHES = {
    "disjoint": [("a=4@0-3", "b=4@4-7"), ("x=2,y=2@0-3", "p=2,q=2@4-7"), ("x=4@0-3", "p=2,q=2@4-7"),
                 ("x=2,y=2@0-3", "b=2@6-7")],
    "overlapping": [("x=8", "y=6@2-7"), ("x=2,y=3@0-5", "p=2,q=2@2-5"), ("x=4,y=2", "b=6@0-5"),
                    ("a=4@0-3", "p=2,q=3@2-7")],
    "reshaped": [("x=2,y=4", "u=4,v=2"), ("x=8", "u=2,v=2,w=2@7,6,5,4,3,2,1,0"), ("x=2,y=4", "p=8@0,2,4,6,1,3,5,7")],
}


def seeded_cases(n: int = 20, seed: int = 0) -> list[dict]:
    """``n`` seeded cross-mesh cases on 8 devices, cycling disjoint / overlapping / reshaped
    mesh pairs; about a third have pending sums in the source or the target and about a
    third an uneven dim. Each is ``{"name", "kind", "src_mesh", "src", "dst_mesh", "dst"}``."""
    rng = np.random.default_rng(seed)
    kinds = list(CASE_MESHES)
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        ma, mb = CASE_MESHES[kind][int(rng.integers(len(CASE_MESHES[kind])))]
        A, B = Mesh.parse(ma).local(), Mesh.parse(mb).local()
        rank = int(rng.integers(2, 4))
        uneven = i % 3 == 1
        shape = [int(rng.choice([24, 48])) for _ in range(rank)]
        if uneven:
            shape[int(rng.integers(rank))] = int(rng.choice([21, 30, 35]))
        src = _random_type(rng, A, shape, pending=(i % 3 == 2 and i % 2 == 0), uneven=uneven)
        dst = _random_type(rng, B, shape, pending=(i % 3 == 2 and i % 2 == 1), uneven=uneven)
        out.append({"name": f"{kind}-{i:02d}", "kind": kind, "src_mesh": ma, "src": str(src),
                    "dst_mesh": mb, "dst": str(dst)})
    return out


def _random_type(rng, mesh: Mesh, shape, pending: bool, uneven: bool) -> ArrayType:
    names = [a for a in mesh.names]
    rng.shuffle(names)
    dims = [[] for _ in shape]
    unreduced = []
    for a in names:
        r = rng.random()
        if pending and not unreduced:
            unreduced.append(a)
            continue
        if r < 0.7:
            i = int(rng.integers(len(shape)))
            split = math.prod(mesh.shape[x] for x in dims[i]) * mesh.shape[a]
            if shape[i] % split == 0 or uneven:
                dims[i].append(a)
    return ArrayType(tuple(Dim(s, tuple(d)) for s, d in zip(shape, dims)), tuple(sorted(unreduced)))
