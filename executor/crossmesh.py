"""Running a cross-mesh plan (:class:`synth.crossmesh.CrossPlan`) on JAX devices.

The phase on A and the phase on B are jitted ``shard_map`` programs on ``jax`` meshes over
the meshes' own devices (the same lowering as every single-mesh plan). The transfer
between them has three lowerings:

* ``inplace`` (one process, CPU backend; the default there): each receiver's block is
  allocated once and every piece is written straight into it from a view of its sender's
  buffer, so no device stages anything (:meth:`CrossProgram._transfer_inplace`). On the
  CPU backend device buffers are host memory, which is what makes this possible; on
  GPU/TPU the same receive-into-the-destination needs a strided receive (NCCL) and is not
  built here.
* ``p2p`` (one process, any backend): each piece is cut from its sender's shard, ``jax.device_put`` to
  its receiver, and written into the receiver's block by a jitted
  ``dynamic_update_slice`` that donates the block (in place). A receiver whose block is a
  single piece takes the piece as its block; a device whose block on B is its block on A
  keeps the same buffer.
* ``ppermute`` (any number of processes): the pieces go in rounds, each a matching of
  senders to receivers, as one ``jax.lax.ppermute`` over a 1-D mesh of all the devices
  involved (pieces padded to a common shape); receivers write them in place as above.
  This is what runs across processes (``jax.distributed``, gloo on CPU), where no process
  can ``device_put`` onto another's devices.

Every result is checked element by element against the target
(:func:`executor.run.check_output`, on every process for the shards it holds).

Memory (``live``): JAX's CPU backend reports no ``memory_stats``, so the executor counts,
per device, the bytes of the buffers alive at each step of its own run (``jax.live_arrays``
after every step, plus the compiled programs' temp bytes), and the same for
``jax.device_put`` (its input and its output; it also copies the whole global array to the
host on the way, which is reported separately as ``host_staging_bytes``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from executor.errors import ExecutorError


def _devices(ids):
    """The JAX devices of machine device ids: position ``i`` of ``jax.devices()`` (in a
    multi-process run JAX numbers each process's devices from its own base)."""
    import jax

    devs = jax.devices()
    missing = [i for i in ids if i >= len(devs)]
    if missing:
        raise ExecutorError(f"the meshes name device(s) {missing[:4]}, but JAX has {len(devs)} devices "
                            f"(0..{len(devs) - 1}); use --devices {max(ids) + 1} on CPU or smaller device ids")
    return [devs[i] for i in ids]


def _mine(devs) -> bool:
    import jax

    return any(d.process_index == jax.process_index() for d in devs)


def _program(plan, jmesh):
    import jax

    from executor.lowering import body_for
    from executor.run import named_sharding

    src_s = named_sharding(jmesh, plan.work_types[0])
    dst_s = named_sharding(jmesh, plan.work_types[-1])
    return jax.jit(jax.shard_map(body_for(plan), mesh=jmesh, in_specs=src_s.spec, out_specs=dst_s.spec,
                                 check_vma=False), out_shardings=dst_s)


def _temp_bytes(fn, arg) -> int:
    try:
        ma = fn.lower(arg).compile().memory_analysis()
        return int(ma.temp_size_in_bytes) if ma is not None else 0
    except Exception:  # noqa: BLE001 - some backends do not implement it
        return 0


def _live_by_device() -> dict[int, int]:
    """Bytes of distinct live device buffers per device (a shard's ``.data`` and its parent
    array share one buffer, counted once; scalars are left out)."""
    import jax

    seen: dict[tuple, int] = {}
    for a in jax.live_arrays():
        if a.ndim == 0:  # scalars: jit arguments (the offsets of a write), a few bytes each
            continue
        try:
            shards = a.addressable_shards
            for s in shards:
                buf = s.data
                seen[(s.device.id, buf.unsafe_buffer_pointer())] = int(buf.nbytes)
        except Exception:  # noqa: BLE001 - a deleted or donated array
            continue
    out: dict[int, int] = {}
    for (d, _), b in seen.items():
        out[d] = out.get(d, 0) + b
    return out


class _Tracker:
    """Per-device peak of live buffer bytes above a baseline, sampled after each step."""

    def __init__(self, on: bool):
        self.on = on
        self.base = _live_by_device() if on else {}
        self.peak: dict[int, int] = {}

    def sample(self, extra: dict | None = None):
        if not self.on:
            return
        now = _live_by_device()
        extra = extra or {}
        for d in set(now) | set(extra):
            v = now.get(d, 0) - self.base.get(d, 0) + extra.get(d, 0)
            self.peak[d] = max(self.peak.get(d, 0), v)


#: The transfer lowerings (module doc): ``inplace`` and ``p2p`` in one process, ``ppermute`` in any.
TRANSFERS = ("inplace", "p2p", "ppermute")

_ZEROS: dict = {}


def _zeros_on(shape, dtype, dev):
    """A zero block made on ``dev`` itself (no copy through another device)."""
    key = (tuple(shape), str(dtype), dev.id)
    fn = _ZEROS.get(key)
    if fn is None:
        import jax
        import jax.numpy as jnp
        from jax.sharding import SingleDeviceSharding

        fn = _ZEROS[key] = jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=SingleDeviceSharding(dev))
    return fn()


_PLACE = None


def _aligned_zeros(shape, dtype, align: int = 64):
    """A zero numpy array whose data starts on an ``align``-byte boundary (the CPU client
    adopts such a buffer on ``device_put`` instead of copying it)."""
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.zeros(n + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + n].view(dtype).reshape(shape)


def _place(buf, piece, offsets, add: bool = False):
    """``buf`` with ``piece`` written (``add``: added) at ``offsets``, in place (``buf`` is donated)."""
    global _PLACE
    import jax

    if _PLACE is None:
        def write(b, p, *o):
            return jax.lax.dynamic_update_slice(b, p, o)

        def add_in(b, p, *o):
            return jax.lax.dynamic_update_slice(b, jax.lax.dynamic_slice(b, o, p.shape) + p, o)

        _PLACE = (jax.jit(write, donate_argnums=0), jax.jit(add_in, donate_argnums=0))
    return _PLACE[1 if add else 0](buf, piece, *[np.int32(o) for o in offsets])


@dataclass
class _Run:
    out: object
    jmesh_b: object
    temp_bytes: dict


class CrossProgram:
    """The three phases of ``plan`` on this process's JAX devices (see the module doc)."""

    def __init__(self, plan, transfer: str = "p2p"):
        import jax

        from executor.run import jax_mesh

        if transfer not in TRANSFERS:
            raise ExecutorError(f"transfer lowering must be one of {list(TRANSFERS)}, got {transfer!r}")
        if transfer in ("p2p", "inplace") and jax.process_count() > 1:
            raise ExecutorError(f"the {transfer} transfer runs in one process; use transfer='ppermute' across "
                                "processes")
        if transfer == "inplace" and any(d.platform != "cpu" for d in jax.devices()):
            raise ExecutorError("the inplace transfer writes into device buffers through host views and runs on "
                                "the CPU backend only; use transfer='p2p' on GPU/TPU")
        self.plan, self.kind = plan, transfer
        self.host_staging_bytes = 0  # inplace: bytes of a block device_put had to copy (0 when aliased)
        self.devs_a = _devices(plan.src_mesh.device_ids)
        self.devs_b = _devices(plan.dst_mesh.device_ids)
        self.jmesh_a = jax_mesh(plan.pre.work_mesh, self.devs_a)
        self.jmesh_b = jax_mesh(plan.post.work_mesh, self.devs_b)
        self.pre_fn = _program(plan.pre, self.jmesh_a)
        self.post_fn = _program(plan.post, self.jmesh_b)
        x = plan.transfer
        A, B = plan.src_mesh.local(), plan.dst_mesh.local()
        self.sa = x.mid_a.regions(A)[0]
        self.sb = x.mid_b.regions(B)[0]
        self.pos_a = {d: i for i, d in enumerate(plan.src_mesh.device_ids)}
        self.pos_b = {d: i for i, d in enumerate(plan.dst_mesh.device_ids)}
        self.local_b = tuple(x.mid_b.local_shape(B))
        self.lead = (1,) if x.mid_b.unreduced else ()
        self.lead_a = (0,) if x.mid_a.unreduced else ()  # index of the part in a block with pending sums
        self.sums = x.sums
        self.shared = x.shared_devices()
        by: dict[int, list] = {}
        for p in x.pieces:
            by.setdefault(p.dst, []).append(p)
        self.by_dst = by
        ids = list(plan.src_mesh.device_ids) + list(plan.dst_mesh.device_ids)
        self.dev = dict(zip(ids, self.devs_a + self.devs_b))  # machine id -> JAX device
        self.mid_of = {d.id: m for m, d in self.dev.items()}  # JAX device id -> machine id
        if transfer == "ppermute":
            self._rounds_setup()

    # -- inputs ----------------------------------------------------------------------------
    def make_input(self, x: np.ndarray, seed: int = 0):
        """The physical source array (padded; pending sums as stacked parts) on A."""
        import jax

        from executor.run import named_sharding, physical_input

        pre = self.plan.pre
        phys = physical_input(x, pre.work_types[0], pre.work_mesh, seed)
        sh = named_sharding(self.jmesh_a, pre.work_types[0])
        return jax.make_array_from_callback(phys.shape, sh, lambda idx: phys[idx], dtype=phys.dtype)

    # -- the transfer ----------------------------------------------------------------------
    def _cut(self, blocks_a, p):
        i = self.pos_a[p.src]
        sl = tuple(slice(a - o, b - o) for a, b, o in zip(p.start, p.stop, self.sa[i]))
        blk = blocks_a[p.src]
        if not self.lead_a and tuple(b - a for a, b in zip(p.start, p.stop)) == tuple(blk.shape) and all(
                a == o for a, o in zip(p.start, self.sa[i])):
            return blk
        return blk[self.lead_a + sl]

    def _offsets(self, p):
        j = self.pos_b[p.dst]
        return (0,) * len(self.lead) + tuple(int(a - o) for a, o in zip(p.start, self.sb[j]))

    def _whole(self, p) -> bool:
        """``p`` is the receiver's whole block (nothing else, no padding, nothing pending)."""
        j = self.pos_b[p.dst]
        return not self.lead and not self.sums and tuple(p.start) == tuple(int(v) for v in self.sb[j]) and \
            tuple(b - a for a, b in zip(p.start, p.stop)) == self.local_b

    def _transfer_p2p(self, blocks_a, dtype, track):
        import jax

        bufs = {}
        for d in self.plan.dst_mesh.device_ids:
            ps = self.by_dst.get(d, [])
            if d in self.shared:
                bufs[d] = blocks_a[d]
                continue
            if len(ps) == 1 and self._whole(ps[0]):
                bufs[d] = jax.device_put(self._cut(blocks_a, ps[0]), self.dev[d])
                track.sample()
                continue
            buf = _zeros_on(self.lead + self.local_b, dtype, self.dev[d])
            for p in ps:
                piece = jax.device_put(self._cut(blocks_a, p), self.dev[d])
                if self.lead:
                    piece = piece[None]
                track.sample()
                buf = _place(buf, piece, self._offsets(p), self.sums)
                del piece
            bufs[d] = buf
        return bufs

    def _transfer_inplace(self, blocks_a, dtype, track):
        """Each receiver's block is allocated once, and every piece is written straight into
        it from a view of its sender's buffer; nothing is staged on either device.

        On the CPU backend a device buffer *is* host memory: ``np.asarray`` of a shard is a
        view of its buffer (no copy), and ``jax.device_put`` of an aligned numpy block on a
        CPU device adopts that memory as the device buffer (no copy). Worked example: device
        4 of ``[8{b}]`` on ``b=2@4-5`` from ``[8{a}]`` on ``a=4@0-3``: a 4-element block is
        allocated, elements 0-1 are copied in from device 0's buffer and 2-3 from device 1's,
        and the block becomes device 4's buffer. While a block is filled it is counted on its
        receiver (the tracker's ``extra``); if ``device_put`` copies instead of adopting, the
        copy is counted as host staging (``host_staging_bytes``)."""
        import jax

        views = {d: np.asarray(b) for d, b in blocks_a.items()}
        bufs = {}
        for d in self.plan.dst_mesh.device_ids:
            if d in self.shared:
                bufs[d] = blocks_a[d]
                continue
            dev = self.dev[d]
            block = _aligned_zeros(self.lead + self.local_b, np.dtype(dtype))
            for p in self.by_dst.get(d, []):
                i = self.pos_a[p.src]
                src_sl = tuple(slice(a - o, b - o) for a, b, o in zip(p.start, p.stop, self.sa[i]))
                dst_sl = tuple(slice(o, o + (b - a)) for a, b, o in
                               zip(p.start, p.stop, self._offsets(p)[len(self.lead):]))
                got = views[p.src][self.lead_a + src_sl]
                into = block[0] if self.lead else block
                if self.sums:
                    into[dst_sl] += got
                else:
                    into[dst_sl] = got
            track.sample({dev.id: int(block.nbytes)})
            buf = jax.device_put(block, dev)
            buf.block_until_ready()
            if np.asarray(buf).ctypes.data != block.ctypes.data:  # copied, not adopted
                self.host_staging_bytes = max(self.host_staging_bytes, int(block.nbytes))
            del block
            bufs[d] = buf
            track.sample()
        del views
        return bufs

    def _rounds_setup(self):
        """Greedy matchings: each round a device sends at most one piece and receives at most one."""
        remote = [p for p in self.plan.transfer.pieces if not p.local]
        rounds: list[list] = []
        busy: list[tuple[set, set]] = []
        for p in remote:
            for r, (snd, rcv) in enumerate(busy):
                if p.src not in snd and p.dst not in rcv:
                    rounds[r].append(p)
                    snd.add(p.src)
                    rcv.add(p.dst)
                    break
            else:
                rounds.append([p])
                busy.append(({p.src}, {p.dst}))
        self.rounds = rounds
        rank = self.plan.src.rank
        self.piece_shape = tuple(max((p.stop[k] - p.start[k] for p in remote), default=1) for k in range(rank))
        ids = sorted(set(self.plan.src_mesh.device_ids) | set(self.plan.dst_mesh.device_ids))
        from jax.sharding import Mesh as JMesh

        self.union_ids = ids
        self.pos_u = {d: i for i, d in enumerate(ids)}
        self.umesh = JMesh(np.asarray(_devices(ids), dtype=object), ("xm",))
        self._perm_fns = {}

    def _perm_fn(self, perm):
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        key = tuple(perm)
        if key not in self._perm_fns:
            spec = PartitionSpec("xm")
            self._perm_fns[key] = jax.jit(jax.shard_map(lambda s: jax.lax.ppermute(s, "xm", list(key)),
                                                        mesh=self.umesh, in_specs=spec, out_specs=spec,
                                                        check_vma=False),
                                          out_shardings=NamedSharding(self.umesh, spec))
        return self._perm_fns[key]

    def _transfer_ppermute(self, blocks_a, dtype, track):
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec

        me = jax.process_index()
        mine_b = [d for d in self.plan.dst_mesh.device_ids if self.dev[d].process_index == me]
        bufs = {}
        for d in mine_b:
            if d in self.shared:
                bufs[d] = blocks_a[d]
            else:
                bufs[d] = _zeros_on(self.lead + self.local_b, dtype, self.dev[d])
                for p in self.by_dst.get(d, []):
                    if p.local:
                        piece = self._cut(blocks_a, p)
                        bufs[d] = _place(bufs[d], piece[None] if self.lead else piece, self._offsets(p), self.sums)
        P = self.piece_shape
        sharding = NamedSharding(self.umesh, PartitionSpec("xm"))
        udevs = list(self.umesh.devices.flat)
        for rnd in self.rounds:
            send = {p.src: p for p in rnd}
            locals_ = []
            for d in udevs:
                if d.process_index != me:
                    continue
                p = send.get(self.mid_of[d.id])
                if p is None:
                    locals_.append(_zeros_on((1,) + P, dtype, d))
                else:
                    piece = self._cut(blocks_a, p)
                    pad = [(0, P[k] - piece.shape[k]) for k in range(len(P))]
                    piece = jnp.pad(piece, pad) if any(b for _, b in pad) else piece
                    locals_.append(jax.device_put(piece[None], d))
            arr = jax.make_array_from_single_device_arrays((len(udevs),) + P, sharding, locals_)
            perm = [(self.pos_u[p.src], self.pos_u[p.dst]) for p in rnd]
            out = self._perm_fn(perm)(arr)
            track.sample()
            got = {self.mid_of[s.device.id]: s.data for s in out.addressable_shards}
            for p in rnd:
                if p.dst in got:
                    ext = tuple(slice(0, b - a) for a, b in zip(p.start, p.stop))
                    piece = got[p.dst][(0,) + ext]
                    bufs[p.dst] = _place(bufs[p.dst], piece[None] if self.lead else piece, self._offsets(p),
                                         self.sums)
            del arr, out, got, locals_
        return bufs

    # -- the whole run ---------------------------------------------------------------------
    def __call__(self, xs, track=None):
        import jax

        from executor.run import Layout

        track = track or _Tracker(False)
        plan = self.plan
        if not plan.pre.device_steps():
            mid_a = xs if _mine(self.devs_a) else None  # nothing to do on A: send from the source
        else:
            mid_a = self.pre_fn(xs) if _mine(self.devs_a) else None
        if mid_a is not None:
            mid_a.block_until_ready()
        track.sample()
        blocks_a = {self.mid_of[s.device.id]: s.data for s in mid_a.addressable_shards} if mid_a is not None else {}
        dtype = xs.dtype
        if self.kind == "p2p":
            bufs = self._transfer_p2p(blocks_a, dtype, track)
        elif self.kind == "inplace":
            bufs = self._transfer_inplace(blocks_a, dtype, track)
        else:
            bufs = self._transfer_ppermute(blocks_a, dtype, track)
        del blocks_a, mid_a
        if not _mine(self.devs_b):
            return None
        from executor.run import named_sharding

        post = plan.post
        lay = Layout(post.work_types[0], post.work_mesh)
        sh = named_sharding(self.jmesh_b, post.work_types[0])
        order = [self.mid_of[d.id] for d in self.jmesh_b.devices.flat if self.mid_of[d.id] in bufs]
        mid_b = jax.make_array_from_single_device_arrays(lay.shape, sh, [bufs[d] for d in order])
        del bufs
        track.sample()
        if not post.device_steps():
            return mid_b
        out = self.post_fn(mid_b)
        out.block_until_ready()
        track.sample()
        return out

    def check(self, out, x) -> str | None:
        from executor.run import check_output

        if out is None:
            return None
        post = self.plan.post
        return check_output(out, x, post.work_types[-1], post.work_mesh, self.jmesh_b)


def _device_put_baseline(plan, x, jax_src, devs_b, measure, repeats):
    """``jax.device_put`` of the source (pending sums already summed: device_put cannot
    reduce) to the target sharding on B (pending sums dropped), checked and measured."""
    import jax

    from executor.run import check_output, jax_mesh, named_sharding
    from synth.types import ArrayType

    B = plan.dst_mesh.local()
    dst_plain = ArrayType(plan.dst.dims)
    jm = jax_mesh(B, devs_b)
    sh = named_sharding(jm, dst_plain)
    track = _Tracker(measure)
    try:
        y = jax.device_put(jax_src, sh)
    except ValueError as e:  # jax.device_put needs every sharded dim to divide evenly
        return {"correct": None, "error": f"jax.device_put refuses it: {str(e).splitlines()[0][:200]}"}
    y.block_until_ready()
    track.sample()
    err = check_output(y, x, dst_plain, B, jm)
    res = {"correct": err is None, "host_staging_bytes": int(x.nbytes)}
    if err:
        res["error"] = err
    if measure:
        res["peak_bytes_per_device"] = {int(k): int(v) for k, v in track.peak.items()}
        # the source the caller holds counts on A's devices, as it does for ours
        src_b = {s.device.id: int(s.data.nbytes) for s in jax_src.addressable_shards}
        for d, b in src_b.items():
            res["peak_bytes_per_device"][d] = res["peak_bytes_per_device"].get(d, 0) + b
        res["peak_bytes_max_device"] = max(res["peak_bytes_per_device"].values())
        res["peak_bytes_total"] = int(sum(res["peak_bytes_per_device"].values())) + int(x.nbytes)
        del y
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.device_put(jax_src, sh).block_until_ready()
            ts.append(time.perf_counter() - t0)
        res["time_s"] = float(np.median(ts))
    return res


def run_crossmesh(plan, x: np.ndarray | None = None, *, dtype: str | None = None, seed: int = 0,
                  transfer: str | None = None, measure: bool = True, repeats: int = 10,
                  baseline: bool = True) -> dict:
    """Run ``plan`` (checked element by element) and, with ``baseline``, ``jax.device_put``
    to the target mesh; with ``measure``, time both (median of ``repeats`` after a warm-up)
    and count their live bytes per device (module doc). ``transfer`` defaults to ``inplace``
    in one process on CPU devices, ``p2p`` in one process on others and ``ppermute`` across
    processes."""
    import jax

    from executor.run import _enable_x64_if, make_input, resolve_dtype

    if transfer is None:
        transfer = "ppermute" if jax.process_count() > 1 else (
            "inplace" if all(d.platform == "cpu" for d in jax.devices()) else "p2p")
    dtype, _ = resolve_dtype(dtype if x is None else str(x.dtype), None if x is not None else plan.itemsize)
    _enable_x64_if(dtype)
    if x is None:
        x = make_input(plan.src, dtype, seed)
    prog = CrossProgram(plan, transfer)
    xs = prog.make_input(x, seed)
    out = prog(xs)  # warm-up (compiles)
    err = prog.check(out, x)
    checked = len(out.addressable_shards) if out is not None else 0
    del out
    res = {"transfer": transfer, "correct": err is None, "checked_shards": checked}
    if err:
        res["error"] = err
    if measure:
        track = _Tracker(True)
        src_b = {prog.mid_of[s.device.id]: int(s.data.nbytes) for s in xs.addressable_shards}
        temps = {}
        t_pre = _temp_bytes(prog.pre_fn, xs) if _mine(prog.devs_a) and plan.pre.device_steps() else 0
        for d in plan.src_mesh.device_ids:
            temps[d] = t_pre
        out = prog(xs, track)
        del out
        track.peak = {prog.mid_of.get(d, d): b for d, b in track.peak.items()}
        peak, buffers = {}, {}
        for d in set(track.peak) | set(src_b):
            buffers[d] = track.peak.get(d, 0) + src_b.get(d, 0)
            peak[d] = buffers[d] + temps.get(d, 0)
        # the live buffers alone (what the plan's own accounting, CrossPlan.live_bytes, covers) and
        # with the compiled programs' temp bytes (what is compared with jax.device_put)
        res["buffer_bytes_max_device"] = max(buffers.values()) if buffers else 0
        res["temp_bytes_max_device"] = max(temps.values()) if temps else 0
        res["peak_bytes_per_device"] = {int(k): int(v) for k, v in sorted(peak.items())}
        res["peak_bytes_max_device"] = max(peak.values()) if peak else 0
        res["host_staging_bytes"] = int(prog.host_staging_bytes)
        res["peak_bytes_total"] = int(sum(peak.values())) + int(prog.host_staging_bytes)
        res["model_live_bytes_max_device"] = int(plan.live_bytes_in_place_max_device if transfer == "inplace"
                                                 else plan.live_bytes_max_device)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            o = prog(xs)
            if o is not None:
                o.block_until_ready()
            ts.append(time.perf_counter() - t0)
            del o
        res["time_s"] = float(np.median(ts))
    if baseline and jax.process_count() == 1:
        from executor.run import jax_mesh, named_sharding
        from synth.types import ArrayType

        A = plan.src_mesh.local()
        plain = ArrayType(plan.src.dims)
        jm = jax_mesh(A, prog.devs_a)
        try:
            src_plain = jax.device_put(x, named_sharding(jm, plain))
        except ValueError as e:
            src_plain = None
            res["device_put"] = {"correct": None,
                                 "error": f"jax.device_put refuses it: {str(e).splitlines()[0][:200]}"}
        if src_plain is not None:
            res["device_put"] = _device_put_baseline(plan, x, src_plain, prog.devs_b, measure, repeats)
    return res


# -- command line -----------------------------------------------------------------------------
def compare_cli(args):
    """``python -m executor compare --dst-mesh ...``: ours (checked) against ``jax.device_put``."""
    import jax

    from executor._jaxsetup import ensure_devices
    from executor.distributed import gather_flags, process_index
    from executor.fmt import fmt_bytes, fmt_time
    from synth.crossmesh import plan_crossmesh
    from synth.errors import RedistributionError

    if args.target is not None or args.placement is not None or args.shape is not None:
        raise RedistributionError("compare: with --dst-mesh, --target, --placement and --shape do not apply; "
                                  "write the types as '[64{x}, 32]' and give device ids in the meshes")
    from executor.distributed import is_member

    if not is_member() and not getattr(args, "cluster", False):
        ensure_devices(args.devices)  # before anything starts the backend
    n = len(jax.devices())
    plan = plan_crossmesh(args.mesh, args.src, args.dst_mesh, args.dst, itemsize=args.itemsize or 4,
                          planner=args.planner, num_devices=n, objective="memory")
    res = run_crossmesh(plan, dtype=args.dtype, repeats=args.repeats)
    flags = gather_flags([bool(res["correct"])])
    res["correct_on_every_process"] = all(all(f) for f in flags)
    res["processes"] = jax.process_count()
    res["plan"] = plan.to_dict()
    if args.json:
        return res
    if process_index() != 0:
        return None
    print(f"{plan.src} on {plan.src_mesh} -> {plan.dst} on {plan.dst_mesh}  ({jax.devices()[0].platform}, {n} devices, "
          f"{jax.process_count()} process(es), transfer {res['transfer']}, median of {args.repeats})")
    ok = "yes" if res["correct_on_every_process"] else "NO: " + res.get("error", "")
    print(f"  ours        correct {ok}  time {fmt_time(res.get('time_s'))}  peak/device "
          f"{fmt_bytes(res.get('peak_bytes_max_device'))}")
    dp = res.get("device_put")
    if dp:
        if dp.get("correct") is None:
            print(f"  device_put  {dp.get('error')}")
        else:
            print(f"  device_put  correct {'yes' if dp['correct'] else 'NO'}  time {fmt_time(dp.get('time_s'))}  "
                  f"peak/device {fmt_bytes(dp.get('peak_bytes_max_device'))} (+ {fmt_bytes(dp['host_staging_bytes'])} "
                  "of host staging: it copies the whole array to the host)")
    print(str(plan))
    return None


def _gather_ints(values: list[int]) -> list[list[int]]:
    import jax

    if jax.process_count() == 1:
        return [list(values)]
    from jax.experimental import multihost_utils

    got = multihost_utils.process_allgather(np.asarray(values, dtype=np.int64))
    return np.asarray(got).reshape(jax.process_count(), -1).tolist()


def run_cases(n: int = 20, seed: int = 0, repeats: int = 10, progress=None) -> dict:
    """The seeded cross-mesh cases (:func:`synth.crossmesh.seeded_cases`) run for real on 8
    devices, each checked element by element (on every process, shards counted), timed,
    and, in one process, measured against ``jax.device_put``."""
    import jax

    from synth.crossmesh import plan_crossmesh, seeded_cases

    rows = []
    one = jax.process_count() == 1
    for i, c in enumerate(seeded_cases(n, seed)):
        # in one process the plan is ranked for the inplace transfer (nothing staged); across
        # processes, for the ppermute transfer (pieces staged in their rounds)
        plan = plan_crossmesh(c["src_mesh"], c["src"], c["dst_mesh"], c["dst"], num_devices=len(jax.devices()),
                              objective="memory-inplace" if one else "memory")
        r = run_crossmesh(plan, repeats=repeats, seed=seed + i)
        dp = r.get("device_put") or {}
        if one:  # the same plan with the portable p2p transfer (one device_put per piece)
            q = run_crossmesh(plan, repeats=repeats, seed=seed + i, transfer="p2p", baseline=False)
            p2p = {"p2p_correct": bool(q["correct"]), "p2p_time_s": q.get("time_s"),
                   "p2p_peak_bytes_max_device": q.get("peak_bytes_max_device"),
                   "p2p_buffer_bytes_max_device": q.get("buffer_bytes_max_device"),
                   "p2p_model_live_bytes_max_device": q.get("model_live_bytes_max_device")}
        else:
            p2p = {}
        row = {**c, "mode": plan.mode, "correct": bool(r["correct"]), "checked_shards": r["checked_shards"],
               "buffer_bytes_max_device": r.get("buffer_bytes_max_device"),
               "temp_bytes_max_device": r.get("temp_bytes_max_device"),
               "time_s": r.get("time_s"), "peak_bytes_max_device": r.get("peak_bytes_max_device"),
               "peak_bytes_total": r.get("peak_bytes_total"),
               "model_live_bytes_max_device": r.get("model_live_bytes_max_device"),
               "host_staging_bytes": r.get("host_staging_bytes"),
               "staging_bytes": plan.staging_bytes, "transfer": r["transfer"], **p2p}
        if "error" in r:
            row["error"] = r["error"]
        if dp:
            row.update(device_put_correct=dp.get("correct"), device_put_time_s=dp.get("time_s"),
                       device_put_peak_bytes_max_device=dp.get("peak_bytes_max_device"),
                       device_put_peak_bytes_total=dp.get("peak_bytes_total"),
                       device_put_note=dp.get("error"))
        rows.append(row)
        if progress:
            progress(i + 1, n, c["name"])
    for r in rows:
        r["correct"] = r["correct"] and r.get("p2p_correct", True)
        dpk = r.get("device_put_peak_bytes_max_device")
        r["peak_le_device_put"] = None if dpk is None else bool(r["peak_bytes_max_device"] <= dpk)
    flags = _gather_ints([int(r["correct"]) for r in rows] + [r["checked_shards"] for r in rows])
    k = len(rows)
    for i, r in enumerate(rows):
        r["correct"] = all(f[i] == 1 for f in flags)
        r["checked_shards"] = int(sum(f[k + i] for f in flags))
        r["dst_devices"] = len(__import__("synth").Mesh.parse(r["dst_mesh"]).device_ids)
    cmp = [r["peak_le_device_put"] for r in rows if r["peak_le_device_put"] is not None]
    return {"cases": rows, "processes": jax.process_count(), "devices": len(jax.devices()),
            "peak_le_device_put": f"{sum(cmp)} of {len(cmp)}" if one else None,
            "all_correct": all(r["correct"] and r["checked_shards"] == r["dst_devices"] for r in rows)}


def print_cases(res: dict) -> None:
    from executor.fmt import fmt_bytes, fmt_time

    print(f"{len(res['cases'])} seeded cross-mesh cases on {res['devices']} CPU devices, {res['processes']} "
          f"process(es); every output checked element by element (timings on a shared machine)")
    head = f"{'case':16s} {'src mesh':16s} {'dst mesh':24s} {'ok':3s} {'ours':>9s} {'peak':>10s}"
    if res["processes"] == 1:
        head += f" {'p2p peak':>10s} {'device_put':>10s} {'dp peak':>10s} {'dp +host':>10s}"
    print(head)
    for r in res["cases"]:
        line = (f"{r['name']:16s} {r['src_mesh']:16s} {r['dst_mesh']:24s} {'yes' if r['correct'] else 'NO':3s} "
                f"{fmt_time(r['time_s']):>9s} {fmt_bytes(r['peak_bytes_max_device']):>10s}")
        if res["processes"] == 1:
            line += f" {fmt_bytes(r.get('p2p_peak_bytes_max_device')):>10s}"
            if r.get("device_put_correct") is None:
                line += "  (jax.device_put refuses an uneven sharding)"
            else:
                line += (f" {fmt_time(r['device_put_time_s']):>10s} {fmt_bytes(r['device_put_peak_bytes_max_device']):>10s}"
                         f" {fmt_bytes(r['device_put_peak_bytes_total']):>10s}")
        print(line)
    print("all correct: " + ("yes" if res["all_correct"] else "NO"))
    if res.get("peak_le_device_put"):
        print(f"our peak (inplace transfer) <= jax.device_put's, per device: {res['peak_le_device_put']} cases "
              "(device_put refuses the others)")


def _member_env(port: int, i: int, n: int, local: int) -> dict:
    import os

    from executor import distributed as dist

    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env.update({dist.ENV_COORD: f"127.0.0.1:{port}", dist.ENV_NUM: str(n), dist.ENV_ID: str(i),
                dist.ENV_LOCAL: str(local), "JAX_PLATFORMS": "cpu"})
    return env


def main(argv=None) -> int:
    """``python -m executor.crossmesh cases [--cases 20] [--seed 0] [--processes 2] [--json]``."""
    import json
    import subprocess
    import sys

    from synth.cli import UserErrorParser
    from synth.errors import RedistributionError
    from synth.limits import int_arg

    p = UserErrorParser(prog="python -m executor.crossmesh",
                        description="Run the seeded cross-mesh cases for real on 8 CPU devices.")
    p.add_argument("cmd", choices=["cases"])
    p.add_argument("--cases", type=int_arg(1, maximum=200), default=20)
    p.add_argument("--seed", type=int_arg(0), default=0)
    p.add_argument("--repeats", type=int_arg(1, maximum=1000), default=10)
    p.add_argument("--processes", type=int_arg(1, maximum=2), default=1,
                   help="1 (default) or 2 (jax.distributed over gloo: 4 devices per process)")
    p.add_argument("--json", action="store_true")
    try:
        args = p.parse_args(argv)
        from executor import distributed as dist

        if args.processes > 1 and not dist.is_member():
            port = dist.free_port()
            argv2 = [a for a in (sys.argv[1:] if argv is None else argv)]
            procs = [subprocess.Popen([sys.executable, "-m", "executor.crossmesh", *argv2],
                                      env=_member_env(port, i, args.processes, 8 // args.processes),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      preexec_fn=dist._die_with_parent)
                     for i in range(args.processes)]
            outs = []
            for pr in procs:
                try:
                    outs.append(pr.communicate(timeout=1800))
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                    raise RedistributionError("the member processes did not finish within 1800 s") from None
            for i, (pr, (_o, e)) in enumerate(zip(procs, outs)):
                if pr.returncode != 0:
                    raise RedistributionError(f"process {i} failed: {dist._error_line(e)}")
            sys.stdout.write(outs[0][0])
            return 0
        if dist.is_member():
            dist.quiet_native_stdout()
            dist.initialize()
        else:
            from executor._jaxsetup import ensure_devices

            ensure_devices(8)
        res = run_cases(args.cases, args.seed, args.repeats)
        if dist.is_member() and dist.process_index() != 0:
            return 0
        if args.json:
            print(json.dumps(res))
        else:
            print_cases(res)
        return 0 if res["all_correct"] else 1
    except RedistributionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
