"""Analytic alpha-beta costs and the lower bound.

Two levels:

* :func:`alpha_beta_s` -- the textbook closed forms for one collective over ``n``
  devices with launch cost ``alpha``, per-hop latency ``lat`` and link bandwidth
  ``bw`` (no topology):

  ========================  ===================================================
  all-gather, ring          ``alpha + (n-1) * (hops*lat + B/bw)``   (B = input block)
  all-gather, bidir ring    ``alpha + ceil((n-1)/2) * (hops*lat + B/bw)``
  reduce-scatter, ring      ``alpha + (n-1) * (hops*lat + B/(n*bw))`` (B = input)
  reduce-scatter, bidir     ``alpha + (n-1) * (hops*lat + B/(2n*bw))``
  all-reduce                twice the reduce-scatter steps
  all-to-all, direct        ``alpha + hops*lat + S/bw``  (S = bytes a device sends)
  permute, direct           ``alpha + hops*lat + S/bw``
  dyn_slice / copy (local)  ``alpha + (read + written bytes) / hbm_bw``
  ========================  ===================================================

* :func:`op_time_s` -- the same algorithms costed on the machine's topology and
  placement: every transfer is routed, and a step lasts as long as its slowest
  transfer, ``sum(latency on route) + max over its links(load on link / bandwidth)``
  where the load counts every transfer of the step crossing that link. This is
  what the simulator reproduces when nothing queues; with contention the
  simulator's FIFO links can be slower.

:func:`lower_bound_s`: each device must receive the part of its target block its
source block lacks; that many bytes over the device's total incoming link
bandwidth bounds any plan's time from below.
"""

from __future__ import annotations

import math

import numpy as np

from models.algorithms import expand, ring_steps


def local_bytes(op) -> int:
    """Bytes a local op reads plus writes: a slice copies its output out of the
    input (read ``out`` + write ``out``); a copy reads ``in`` and writes ``out``."""
    if op.kind == "dyn_slice":
        return 2 * op.out_bytes
    return op.in_bytes + op.out_bytes


def alpha_beta_s(kind: str, n: int, nbytes: float, alpha_s: float, bandwidth_Bps: float,
                 latency_s: float, algorithm: str = "ring", hops: int = 1) -> float:
    """Closed-form time of one op (see the module table). ``nbytes`` is the input
    block for ring kinds, the bytes a device sends for direct kinds, and the bytes
    read + written for local kinds (with ``bandwidth_Bps`` = HBM bandwidth)."""
    if kind in ("dyn_slice", "copy"):
        return alpha_s + nbytes / bandwidth_Bps
    if kind in ("all_gather", "reduce_scatter", "all_reduce"):
        if n < 2:
            return alpha_s
        b, sf, sb = ring_steps(kind, algorithm, n, nbytes, nbytes)
        return alpha_s + max(sf, sb) * (hops * latency_s + b / bandwidth_Bps)
    if kind in ("all_to_all", "permute"):
        if nbytes <= 0:
            return alpha_s
        return alpha_s + hops * latency_s + nbytes / bandwidth_Bps
    raise ValueError(f"alpha_beta_s: unknown kind {kind!r}")


def _link_params(machine, topo, kind):
    kp = machine.kind_params(kind)
    bw = topo.bandwidth if kp.bandwidth_Bps is None else np.full(len(topo.links), kp.bandwidth_Bps)
    lat = topo.latency if kp.latency_s is None else np.full(len(topo.links), kp.latency_s)
    return bw, lat


def op_time_s(op, machine, chips=None, units=None) -> float:
    """Topology-aware analytic time of one schedule op (see the module docstring).
    ``units`` may pass an already computed :func:`models.algorithms.expand`."""
    alpha = machine.alpha_s(op.kind)
    if op.kind in ("dyn_slice", "copy"):
        return alpha + local_bytes(op) / machine.local_bandwidth_Bps(op.kind)
    topo = machine.topology
    chips = chips if chips is not None else range(machine.num_devices)
    if units is None:
        units = expand(op, topo, chips, machine.algorithm(op.kind))
    if not units:
        return alpha
    bw, lat = _link_params(machine, topo, op.kind)
    load = np.zeros(len(topo.links))
    if op.kind in ("all_gather", "reduce_scatter", "all_reduce"):
        # one step: every member of every ring sends once in each active direction
        for u in units:
            for r in (u.routes_fwd if u.steps_fwd else ()) + (u.routes_bwd if u.steps_bwd else ()):
                for lk in r:
                    load[lk] += u.block_bytes
        t = 0.0
        for u in units:
            for routes, steps in ((u.routes_fwd, u.steps_fwd), (u.routes_bwd, u.steps_bwd)):
                if not steps:
                    continue
                step = max((sum(lat[lk] for lk in r) + max(load[lk] / bw[lk] for lk in r)) if r else 0.0
                           for r in routes)
                t = max(t, steps * step)
        return alpha + t
    for u in units:
        for f in u.flows:
            for lk in f[3]:
                load[lk] += f[2]
    used = load > 0
    if not used.any():
        return alpha
    lat_max = max(sum(lat[lk] for lk in f[3]) for u in units for f in u.flows)
    return alpha + lat_max + float((load[used] / bw[used]).max())


def schedule_time_s(schedule, machine, chips=None) -> dict:
    """Analytic time per op and in total (ops run one after another)."""
    per = [op_time_s(op, machine, chips) for op in schedule.ops]
    return {"time_s": float(sum(per)), "ops_s": per}


# -- lower bound ------------------------------------------------------------------------------
def need_bytes_per_device(mesh, src, dst, itemsize: int) -> np.ndarray:
    """Bytes of its target block each device's source block does not hold."""
    s0, s1 = src.regions(mesh)
    d0, d1 = dst.regions(mesh)
    overlap = np.clip(np.minimum(s1, d1) - np.maximum(s0, d0), 0, None).prod(axis=1)
    return (dst.shard_elems(mesh) - overlap).astype(np.int64) * int(itemsize)


def in_bandwidth_per_device(machine, chips) -> np.ndarray:
    topo = machine.topology
    cache: dict = {}
    out = np.empty(len(chips))
    for d, c in enumerate(chips):
        if c not in cache:
            cache[c] = topo.in_bandwidth(c)
        out[d] = cache[c]
    return out


def lower_bound_s(machine, need_bytes, chips=None) -> float:
    """``max_d need_d / in_bandwidth(d)`` (0 when nothing must move)."""
    need = np.asarray(need_bytes, dtype=float)
    chips = list(chips) if chips is not None else list(range(len(need)))
    bw = in_bandwidth_per_device(machine, chips)
    return _max_ratio(need, bw)


def _max_ratio(need, bw) -> float:
    """``max(need / bw)`` with 0 where nothing is needed (a lone device has no links)."""
    if not len(need):
        return 0.0
    t = np.divide(need, bw, out=np.zeros(len(need)), where=need > 0)
    return float(t.max())


def schedule_lower_bound(schedule, machine, chips=None) -> tuple[float, str]:
    """The redistribution lower bound when the schedule's ``meta`` names its mesh,
    src, dst and itemsize (as ``Plan.to_schedule`` does); otherwise a bound on this
    schedule alone (each op's largest per-device receive over in-bandwidth, summed).
    Returns ``(seconds, kind)`` with kind ``"redistribution"`` or ``"schedule"``."""
    meta = schedule.meta or {}
    chips = list(chips) if chips is not None else list(range(schedule.num_devices))
    if all(k in meta for k in ("mesh", "src", "dst")):
        from synth import ArrayType, Mesh

        try:
            mesh = Mesh.parse(meta["mesh"]) if isinstance(meta["mesh"], str) else Mesh.of(meta["mesh"])
            src, dst = ArrayType.parse(meta["src"]), ArrayType.parse(meta["dst"])
            need = need_bytes_per_device(mesh, src, dst, int(meta.get("itemsize", 4)))
            if len(need) == len(chips):
                return lower_bound_s(machine, need, chips), "redistribution"
        except ValueError:
            pass
    bw = in_bandwidth_per_device(machine, chips)
    total = 0.0
    for op in schedule.ops:
        recv = np.zeros(len(chips))
        if op.kind == "permute":
            for _a, b in op.pairs:
                recv[b] += op.recv_bytes
        elif op.kind not in ("dyn_slice", "copy"):
            for g in op.groups:
                if len(g) > 1:
                    recv[list(g)] = op.recv_bytes
        total += _max_ratio(recv, bw)
    return total, "schedule"


def describe(machine) -> str:
    return (f"{machine.spec}: link {machine.link_bandwidth_Bps / 1e9:.1f} GB/s, "
            f"{machine.link_latency_s * 1e6:.2f} us/hop, alpha {machine.launch_overhead_s * 1e6:.1f} us, "
            f"HBM {machine.hbm_bandwidth_Bps / 1e9:.0f} GB/s, {math.prod(machine.dims)} devices")
