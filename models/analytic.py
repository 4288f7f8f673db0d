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

* :func:`op_time_s` -- the algorithm the simulator picks (:mod:`models.collectives`:
  NCCL-style tuner, multi-ring over rails, NVLS, trees, TPU multi-axis rings) costed on the
  machine's links: ``alpha + latency of its steps + max(sum over phases of the busiest link's
  bytes / capacity, reduction arithmetic)``. The flow-level simulator reproduces it when the
  flows of a phase load their links evenly; with contention it can be slower.

Lower bounds (:func:`schedule_lower_bound`): the largest of the injection bound (each device
receives what its source block lacks, over its links' line rate), the cut bounds (a node's
NICs, each torus dimension's bisection: what a set of devices lacks over the links into it)
and, on small machines, a max-concurrent-flow LP (:func:`lp_bound_s`). Line rates, not
achieved rates, so the bound never exceeds a real measurement.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from models.algorithms import ring_steps


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
    """Analytic time of one schedule op with the algorithm the simulator picks
    (:func:`models.collectives.plan_op`): ``alpha + latency of its steps + max(sum over phases
    of the busiest link's bytes / capacity, reduction arithmetic)``. Equal to the flow-level
    simulation whenever the flows of a phase load their links evenly (uncontended cases).
    ``units`` is accepted for compatibility and ignored."""
    alpha = machine.alpha_s(op.kind)
    if op.kind in ("dyn_slice", "copy"):
        return alpha + local_bytes(op) / machine.local_bandwidth_Bps(op.kind)
    return _op_time_cached(op, machine, None if chips is None else tuple(int(c) for c in chips))


@lru_cache(maxsize=8192)
def _op_time_cached(op, machine, chips) -> float:
    """Ops, profiles and placements are immutable values: a planner that costs the same op
    many times pays for its algorithm choice once."""
    from models.collectives import (
        MAX_ROUTE_LINKS,
        aggregated,
        direct_all_to_all_s,
        estimated_route_links,
        plan_op,
    )

    if aggregated(op, machine):
        # a large all-to-all: the same time from per-link loads counted in aggregate (per node on
        # switched machines and hosts, per torus ring segment) instead of flow by flow
        t = direct_all_to_all_s(op, machine, chips)
        if t is not None:
            return t
    w = estimated_route_links(op, machine)
    if w > MAX_ROUTE_LINKS:
        from models.errors import SimulationError

        n = max((len(g) for g in op.groups), default=0) if op.groups else len(op.pairs)
        raise SimulationError(
            f"models: costing {op.kind} over {n} devices on {machine.spec} means routing about {w:.3g} "
            f"flow-hops, above the limit of {MAX_ROUTE_LINKS:.0e} (minutes of wall time); use a smaller "
            f"machine (fewer devices), or a plan (--planner normal) whose collectives span fewer devices")
    plan = plan_op(op, machine, chips)
    return machine.alpha_s(op.kind) if plan is None else float(plan.analytic_s())


def op_algorithm(op, machine, chips=None) -> str | None:
    """The algorithm (and protocol) the models choose for ``op``, e.g. ``"nvls/Simple"``."""
    from models.collectives import plan_op

    plan = plan_op(op, machine, chips)
    return None if plan is None else plan.label


def schedule_time_s(schedule, machine, chips=None) -> dict:
    """Analytic time per op and in total (ops run one after another)."""
    per = [op_time_s(op, machine, chips) for op in schedule.ops]
    return {"time_s": float(sum(per)), "ops_s": per}


# -- lower bound ------------------------------------------------------------------------------
#: the LP (max-concurrent-flow) bound runs when commodities x links stays below this
LP_MAX_VARIABLES = 300_000
#: ... and by default (``lp="auto"``) only below this size, which solves in well under a second
LP_AUTO_VARIABLES = 12_000
LP_METHOD = "highs-ipm"
#: HiGHS stops after this long; the LP term is then left out (the other terms still bound)
LP_TIME_LIMIT_S = 20.0
#: cut bounds compare target blocks with distinct source blocks; skipped above this many pairs
CUT_MAX_PAIRS = 20_000_000


def _pending_view(mesh, src, dst):
    """The redistribution on a mesh where every pending axis is whole: ``(work mesh, src, dst,
    partial id per device, number of partials, dst group id per device, group size)``.

    * partial id: the device's coordinates on ``src``'s pending axes (size > 1). Devices with
      the same source block but different partial ids hold different partial sums of it; an
      element's value is the sum of its ``n_partials`` partials.
    * dst group: devices that differ only on ``dst``'s pending axes; their target blocks must
      sum to the truth (singletons when nothing stays pending)."""
    from synth.types import refine

    if not src.unreduced and not dst.unreduced:
        n = mesh.size
        return mesh, src, dst, np.zeros(n, dtype=np.int64), 1, np.arange(n, dtype=np.int64), 1
    work, (src, dst) = refine(mesh.base_mesh if mesh.base else mesh, [src, dst])

    def coord_id(axes):
        key = np.zeros(work.size, dtype=np.int64)
        for a in axes:
            key = key * work.axis_size(a) + work.axis_coords(a)
        return key

    pend = [a for a in src.unreduced if work.axis_size(a) > 1]
    n_partials = math.prod(work.axis_size(a) for a in pend)
    rest = [a for a, _s in work.axes if a not in dst.unreduced]
    group_size = math.prod(work.axis_size(a) for a in dst.unreduced)
    return work, src, dst, coord_id(pend), n_partials, coord_id(rest), group_size


def need_bytes_per_device(mesh, src, dst, itemsize: int) -> np.ndarray:
    """Bytes of its target block each device cannot produce from its own source block
    (padding excluded), or, where ``dst`` keeps a pending sum, the least that the busiest
    member of each pending group receives (``ceil(need(G) / |G|)``, see
    :func:`group_need_bytes`). A device that holds one partial of a pending source (more than
    one partial per element) produces nothing alone: it needs a value for every element."""
    work, src, dst, _pid, n_partials, gid, gsize = _pending_view(mesh, src, dst)
    if gsize > 1:
        out = np.zeros(work.size, dtype=np.int64)
        for members, b in group_need_bytes(mesh, src, dst, itemsize):
            out[members] = -(-b // len(members))
        return out
    s0, s1 = src.regions(work)
    d0, d1 = dst.regions(work)
    target = np.clip(d1 - d0, 0, None).prod(axis=1)
    if n_partials > 1:
        return target.astype(np.int64) * int(itemsize)
    overlap = np.clip(np.minimum(s1, d1) - np.maximum(s0, d0), 0, None).prod(axis=1)
    return (target - overlap).astype(np.int64) * int(itemsize)


def group_need_bytes(mesh, src, dst, itemsize: int) -> list:
    """``[(members, bytes)]``: for each group of devices whose target blocks must sum to the
    truth (one device each when ``dst`` keeps nothing pending), the bytes that must enter the
    group (:func:`need_from_outside_bytes`)."""
    work, s2, d2, _pid, _n, gid, gsize = _pending_view(mesh, src, dst)
    if gsize == 1:
        need = need_bytes_per_device(mesh, src, dst, itemsize)
        return [([d], int(need[d])) for d in range(len(need))]
    order = np.argsort(gid, kind="stable")
    out = []
    for members in np.split(order, np.nonzero(np.diff(gid[order]))[0] + 1):
        members = members.tolist()
        out.append((members, int(need_from_outside_bytes(mesh, src, dst, itemsize, members))))
    return out


def reduction_values(mesh, src, dst) -> int:
    """Values the devices must receive in all to combine pending sums, without in-network
    reduction: when ``dst`` keeps nothing pending, each element's ``nR`` partials sit on ``nR``
    devices and merging them takes at least ``nR - 1`` received values (each received value
    joins at most two partial sums), so ``(nR - 1) * N`` over the array. 0 otherwise."""
    _w, _s, dst2, _pid, n_partials, _gid, _g = _pending_view(mesh, src, dst)
    if n_partials <= 1 or dst2.unreduced:
        return 0
    return (n_partials - 1) * int(src.num_elems())


def need_from_outside_bytes(mesh, src, dst, itemsize: int, members) -> float:
    """Distinct bytes the devices ``members`` need that they cannot produce themselves: what
    must cross into the set at least once. The set needs the target block of every member
    (where ``dst`` keeps a pending sum, of every pending group wholly inside the set: a group
    with a member outside can leave the set's partials zero). It can produce an element when
    its members hold all of the element's source partials (one when nothing is pending). Any
    other element it needs depends on a value held outside, so at least one value of it
    crosses. Source (and target) blocks of two devices are equal or disjoint, so unions are
    sums over distinct blocks."""
    work, src, dst, pid, n_partials, gid, gsize = _pending_view(mesh, src, dst)
    members = np.asarray(members, dtype=np.int64)
    s0, s1 = src.regions(work)
    d0, d1 = dst.regions(work)
    nd = s0.shape[1]
    if n_partials > 1:
        # a source block is held whole when every partial id holds it inside the set
        rows = np.unique(np.concatenate([s0[members], s1[members], pid[members, None]], axis=1), axis=0)
        boxes, count = np.unique(rows[:, :2 * nd], axis=0, return_counts=True)
        u = boxes[count == n_partials]
    else:
        u = np.unique(np.concatenate([s0[members], s1[members]], axis=1), axis=0)
    if gsize > 1:
        g, cnt = np.unique(gid[members], return_counts=True)
        members = members[np.isin(gid[members], g[cnt == gsize])]
        if not len(members):
            return 0.0
    u0, u1 = u[:, :nd], u[:, nd:]
    # members with the same target block need the same bytes: compare each distinct one once
    t = np.unique(np.concatenate([d0[members], d1[members]], axis=1), axis=0)
    t0, t1 = t[:, :nd], t[:, nd:]
    target = np.clip(t1 - t0, 0, None).prod(axis=1).astype(float)
    have = np.zeros(len(t))
    if len(u):
        step = max(1, CUT_MAX_PAIRS // max(1, len(u)) // 4)
        for i in range(0, len(t), step):
            a0, a1 = t0[i:i + step, None, :], t1[i:i + step, None, :]
            ov = np.clip(np.minimum(a1, u1[None]) - np.maximum(a0, u0[None]), 0, None).prod(axis=2)
            have[i:i + step] = ov.sum(axis=1)
    # distinct target blocks are disjoint: the union the set needs is their sum, and a byte
    # that crosses the cut once can be copied to every member that needs it
    return float(np.clip(target - have, 0, None).sum()) * int(itemsize)


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
    """The injection bound ``max_d need_d / in_bandwidth(d)`` (0 when nothing must move)."""
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


def _cuts(machine, chips):
    """Device sets whose incoming links form a cut: (name, member devices, capacity in B/s).

    Switched machines: every node (its NICs' ingress; for an NVL72 rack, the rack's uplinks).
    Tori: each dimension's two halves (bisection; with wraparound two cut planes carry it)."""
    dev_of = np.empty(machine.num_devices, dtype=np.int64)
    dev_of[np.asarray(chips, dtype=np.int64)] = np.arange(len(chips))
    return [(name, dev_of[np.asarray(members, dtype=np.int64)].tolist(), cap)
            for name, members, cap in _chip_cuts(machine)]


@lru_cache(maxsize=32)
def _chip_cuts(machine):
    topo = machine.topology
    bw = topo.bandwidth
    out = []
    if machine.kind == "switched" and machine.dims[0] > 1:
        gpn = machine.dims[1]

        def node_of(x):
            if isinstance(x, (int, np.integer)):
                return int(x) // gpn
            if x.startswith("nvswitch"):
                return int(x[len("nvswitch"):])
            if x.startswith("nic"):
                return int(x[3:].split(".")[0])
            return -1

        nu = np.array([node_of(u) for u, _v in topo.links])
        nv = np.array([node_of(v) for _u, v in topo.links])
        into = (nv >= 0) & (nu != nv)
        caps = np.bincount(nv[into], weights=bw[into], minlength=machine.dims[0])
        for n in range(machine.dims[0]):
            out.append((f"nic_cut(node {n})", list(range(n * gpn, (n + 1) * gpn)), float(caps[n])))
    elif machine.kind == "torus":
        dims = machine.dims
        coords = np.array(np.unravel_index(np.arange(machine.num_devices), dims)).T
        lu = np.array([u for u, _v in topo.links], dtype=np.int64)
        lv = np.array([v for _u, v in topo.links], dtype=np.int64)
        for k, s in enumerate(dims):
            if s < 2:
                continue
            for lo in sorted({0, s // 2}):
                inside = ((coords[:, k] - lo) % s) < s // 2
                if not inside.any():
                    continue
                cap = float(bw[inside[lv] & ~inside[lu]].sum())
                if cap > 0:
                    out.append((f"bisection_{machine.dim_names[k]}", np.nonzero(inside)[0].tolist(), cap))
    return out


# -- the latency term ------------------------------------------------------------------------------
#: kinds that move data between devices (the ones a plan pays a launch for)
COMM_KINDS = ("all_gather", "all_to_all", "permute", "all_reduce", "reduce_scatter")
#: devices above which the latency term uses the nearest other device as the holder of what a
#: device needs (cheap, weaker) instead of the devices whose source block overlaps its target
LATENCY_EXACT_MAX_DEVICES = 1024


def launch_floor_s(machine) -> float:
    """The least fixed cost :func:`op_time_s` charges any op that moves data on ``machine``.

    Where NCCL's protocols are modelled (switched profiles with protocol latencies), every
    collective and every direct op pays a protocol's fixed latency (``plan_op``): the least of
    ``ll_base_latency_s``, ``ll128_base_latency_s``, ``simple_base_latency_s`` (H100: LL's
    6.6 us). Elsewhere every op pays its kind's ``alpha_s`` (launch overhead or a calibrated
    override): the least over the communicating kinds (TPU v5e: 5 us)."""
    if machine.kind == "switched" and machine.has_protocols:
        return float(min(machine.protocol_latency_s(p)[0] for p in ("LL", "LL128", "Simple")))
    return float(min(machine.alpha_s(k) for k in COMM_KINDS))


def _min_link_latency_s(machine) -> float:
    """The least per-link latency any kind sees (a kind's ``latency_s`` override replaces every
    link's latency for that kind)."""
    topo = machine.topology
    lats = [float(topo.latency.min())] if len(topo.latency) else [0.0]
    for k in COMM_KINDS:
        kp = machine.kind_params(k)
        if kp.latency_s is not None:
            lats.append(float(kp.latency_s))
    return max(0.0, min(lats))


def hop_floor_matrix_s(machine, chips_a, chips_b) -> np.ndarray:
    """``out[i]``: the least latency the model charges for data to travel from chip
    ``chips_a[i]`` to chip ``chips_b[i]`` in one or several ops (0 where they are one chip).

    * tori: hops of the shortest way (ring distance per dimension, open lines without their
      wrap) x the least link latency -- every algorithm charges at least one link latency per
      hop its data crosses (rings: steps x the neighbours' route latency; multi-axis: steps x
      the link latency per dimension; direct: the route's latency);
    * switched machines with NCCL protocols: the least protocol step latency (LL: 0.6 us on
      H100) inside a node, plus ``nic_latency_s`` across nodes (every network step pays it);
    * switched without protocols and CPU hosts: the least of the route's latency and the
      machine's per-step ``link_latency_s`` (trees and NVLS charge that per step)."""
    a = np.asarray(chips_a, dtype=np.int64)
    b = np.asarray(chips_b, dtype=np.int64)
    out = np.zeros(len(a))
    diff = a != b
    if not diff.any():
        return out
    lmin = _min_link_latency_s(machine)
    if machine.kind == "torus":
        dims = machine.dims
        wrap = machine.wraparound
        ca = np.array(np.unravel_index(a, dims)).T
        cb = np.array(np.unravel_index(b, dims)).T
        hops = np.zeros(len(a))
        for k, s in enumerate(dims):
            d = np.abs(ca[:, k] - cb[:, k])
            if wrap[k]:
                d = np.minimum(d, s - d)
            hops += d
        return hops * lmin
    topo = machine.topology
    if machine.kind == "switched":
        gpn = machine.dims[1]
        same = (a // gpn) == (b // gpn)
        if machine.has_protocols:
            hop = min(machine.protocol_latency_s(p)[1] for p in ("LL", "LL128", "Simple"))
            out[diff & same] = hop
            out[diff & ~same] = hop + machine.nic_latency_s
            return out
        for mask in (diff & same, diff & ~same):
            if mask.any():
                i = int(np.nonzero(mask)[0][0])      # every pair of a class has the same route shape
                r = topo.route(int(a[i]), int(b[i]))
                route_lat = min(float(sum(topo.latency[lk] for lk in r)), lmin * len(r))
                out[mask] = min(route_lat, float(machine.link_latency_s))
        return out
    i = int(np.nonzero(diff)[0][0])
    r = topo.route(int(a[i]), int(b[i]))
    route_lat = min(float(sum(topo.latency[lk] for lk in r)), lmin * len(r))
    out[diff] = min(route_lat, float(machine.link_latency_s))
    return out


def latency_floor_per_device_s(machine, mesh, src, dst, itemsize, chips) -> np.ndarray:
    """Per device: 0 when it needs nothing from others, else the least latency its data must
    cross: :func:`hop_floor_matrix_s` from the nearest device that holds part of what it needs
    (a device whose source block overlaps its target block; with pending sums or above
    :data:`LATENCY_EXACT_MAX_DEVICES` devices, the nearest other device at all)."""
    need = np.asarray(need_bytes_per_device(mesh, src, dst, itemsize), dtype=float)
    P = len(need)
    out = np.zeros(P)
    needy = np.nonzero(need > 0)[0]
    if not len(needy) or P < 2:
        return out
    chips = np.asarray(list(chips), dtype=np.int64)
    exact = P <= LATENCY_EXACT_MAX_DEVICES and not src.unreduced and not dst.unreduced
    if not exact:
        # the nearest other device is at least one hop away (the machine's least hop)
        out[needy] = _least_hop_s(machine)
        return out
    if exact:
        s0, s1 = src.regions(mesh)
        d0, d1 = dst.regions(mesh)
    others = np.arange(P)
    for d in needy:
        if exact:
            ov = np.clip(np.minimum(s1, d1[d]) - np.maximum(s0, d0[d]), 0, None).prod(axis=1) > 0
            ov[d] = False
            cand = others[ov]
            if not len(cand):
                cand = others[others != d]
        else:
            cand = others[others != d]
        h = hop_floor_matrix_s(machine, chips[cand], np.full(len(cand), chips[d]))
        out[d] = float(h.min()) if len(h) else 0.0
    return out


def redistribution_bound_terms(machine, mesh, src, dst, itemsize, chips, lp="auto", latency: bool = True) -> dict:
    """Every lower-bound term (seconds) of a redistribution: ``injection``, the cuts and, for
    small machines whose source is not replicated, ``lp`` (max-concurrent-flow). ``lp``:
    ``"auto"`` (only LPs of at most ``LP_AUTO_VARIABLES`` variables), ``True`` (up to
    ``LP_MAX_VARIABLES``: a few hundred devices, seconds to a minute), ``False``.
    ``latency=False`` leaves out the launch and the hops (the bound before issue 23: bytes over
    bandwidth only; ``python -m simulator bound-ratio`` compares the two)."""
    groups = group_need_bytes(mesh, src, dst, itemsize)
    bw = in_bandwidth_per_device(machine, chips)
    # a group of devices takes in its bytes through all its members' incoming links at best
    terms = {"injection": max((b / bw[m].sum() for m, b in groups if b > 0 and bw[m].sum() > 0), default=0.0)}
    if not any(b > 0 for _m, b in groups):
        return terms
    # the latency term: one launch, then the first byte a device needs crosses the hops from
    # its nearest holder, and only then can the rest stream in through its links
    if latency:
        launch = launch_floor_s(machine)
        hop = latency_floor_per_device_s(machine, mesh, src, dst, itemsize, chips)
        terms["latency"] = launch + float(hop.max())
    else:
        launch, hop = 0.0, np.zeros(len(chips))
    if all(len(m) == 1 for m, _b in groups) and bw.min() > 0:
        need = np.zeros(len(chips))
        for m, b in groups:
            need[m[0]] = b
        terms["injection"] = launch + float(np.max(np.where(need > 0, hop + need / bw, 0.0)))
    else:
        terms["injection"] += launch
    red = reduction_values(mesh, src, dst) * int(itemsize)
    if red and not (machine.nvls_efficiency > 0 or machine.sharp) and bw.sum() > 0:
        # merging partial sums: (nR - 1) N values received somewhere, over every device's links
        terms["reduction"] = launch + red / float(bw.sum())
    for name, members, cap in _cuts(machine, chips):
        b = need_from_outside_bytes(mesh, src, dst, itemsize, members)
        key = name.split("(")[0]
        if b > 0 and cap > 0:
            terms[key] = max(terms.get(key, 0.0), launch + b / cap)
    if lp:
        limit = LP_AUTO_VARIABLES if lp == "auto" else LP_MAX_VARIABLES
        v = _lp_cached(machine, str(mesh), str(src),
                       str(dst), int(itemsize), tuple(chips), limit)
        if v is not None:
            terms["lp"] = launch + v
    return terms


@lru_cache(maxsize=256)
def _lp_cached(machine, mesh_s, src_s, dst_s, itemsize, chips, limit):
    from synth import ArrayType, Mesh

    return lp_bound_s(machine, Mesh.parse(mesh_s), ArrayType.parse(src_s), ArrayType.parse(dst_s), itemsize,
                      list(chips), limit)


def lp_bound_s(machine, mesh, src, dst, itemsize, chips, max_variables: int = LP_MAX_VARIABLES) -> float | None:
    """Max-concurrent-flow bound (scipy.optimize.linprog, HiGHS): one commodity per source
    device (its block's bytes to every device that needs them), flow conservation at every
    node, ``sum of commodities on a link <= capacity * T``; minimise ``T``. Only when every
    element has one holder before and one after (no replication or pending sums: a copied
    piece would be counted once per reader) and the LP is small (``max_variables``); ``None``
    otherwise."""
    def unique_holders(t):
        used = t.used_axes() if callable(t.used_axes) else t.used_axes
        return not t.unreduced and all(a in used for a, s in mesh.axes if s > 1)

    # a commodity is a piece of data with one holder and one reader: copying a piece on the
    # way (a gather, a broadcast) would make the LP overestimate, so both types must be
    # unreplicated (each element on exactly one device before and after)
    if not (unique_holders(src) and unique_holders(dst)):
        return None
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    topo = machine.topology
    E = len(topo.links)
    if len(chips) * E > 4 * max_variables:
        return None
    s0, s1 = src.regions(mesh)
    d0, d1 = dst.regions(mesh)
    ov = np.clip(np.minimum(s1[:, None, :], d1[None]) - np.maximum(s0[:, None, :], d0[None]), 0, None).prod(axis=2)
    dem = ov.astype(float) * itemsize
    np.fill_diagonal(dem, 0.0)
    sources = np.nonzero(dem.sum(axis=1) > 0)[0]
    if not len(sources):
        return 0.0
    K = len(sources)
    if K * E > max_variables:
        return None
    nodes = list(topo.graph.nodes)
    nid = {v: i for i, v in enumerate(nodes)}
    V = len(nodes)
    tail = np.array([nid[u] for u, _v in topo.links])
    head = np.array([nid[v] for _u, v in topo.links])
    scale = float(dem.max())
    rows, cols, vals = [], [], []
    b_eq = np.zeros(K * V)
    for ki, sdev in enumerate(sources):
        base = ki * E
        r_off = ki * V
        e = np.arange(E)
        rows += [r_off + tail, r_off + head]
        cols += [base + e, base + e]
        vals += [np.ones(E), -np.ones(E)]
        b_eq[r_off + nid[chips[sdev]]] += dem[sdev].sum() / scale
        for d in np.nonzero(dem[sdev])[0]:
            b_eq[r_off + nid[chips[d]]] -= dem[sdev, d] / scale
    a_eq = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(K * V, K * E + 1)).tocsr()
    t_unit = scale / float(topo.bandwidth.min())      # seconds per unit of T (keeps the LP well scaled)
    cap = topo.bandwidth * t_unit / scale
    ur = np.repeat(np.arange(E), K)
    uc = (np.arange(K)[None, :] * E + np.arange(E)[:, None]).ravel()
    a_ub = coo_matrix((np.concatenate([np.ones(K * E), -cap]),
                       (np.concatenate([ur, np.arange(E)]), np.concatenate([uc, np.full(E, K * E)]))),
                      shape=(E, K * E + 1)).tocsr()
    c = np.zeros(K * E + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(E), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method=LP_METHOD,
                  options={"time_limit": LP_TIME_LIMIT_S})
    if res.status != 0 or res.x is None:
        return None
    # a feasible primal T is an upper estimate of the optimum; HiGHS's dual bound is the safe
    # lower one when available
    return float(res.x[-1]) * t_unit * (1 - 1e-6)   # optimum within HiGHS's tolerance


def op_bound_terms(op, machine, chips) -> dict:
    """Lower-bound terms (seconds) of one collective from what its devices must receive:
    injection (per device) and the node NIC cuts. All-gather: ``(n-1)/n`` of the output;
    reduce-scatter: ``(n-1)/n`` of the input; all-reduce ``2(n-1)/n`` of the buffer, or
    ``(n-1)/n`` where the switch or fabric reduces (NVLS, SHARP); all-to-all and permute: the
    bytes received. A node of ``k`` group members must take in what the rest hold (all-gather:
    ``(n-k)/n`` of the output, once; reduce-scatter: its ``k/n`` share; all-reduce: ``2(m-1)/m``
    of the buffer over ``m`` nodes, half that with SHARP in the fabric)."""
    from models.collectives import size_bytes

    terms: dict = {}
    if op.is_local:
        return terms
    chips = list(chips)
    bw = in_bandwidth_per_device(machine, chips)
    recv = np.zeros(len(chips))
    innet = machine.nvls_efficiency > 0 or bool(machine.sharp)
    if op.kind == "permute":
        for _a, b in op.pairs:
            if _a != b:
                recv[b] += op.recv_bytes
    else:
        for g in op.groups:
            n = len(g)
            if n < 2:
                continue
            S = size_bytes(op)
            if op.kind in ("all_gather", "reduce_scatter"):
                r = (n - 1) / n * S
            elif op.kind == "all_reduce":
                r = (1 if innet else 2) * (n - 1) / n * S
            else:
                r = op.recv_bytes
            recv[list(g)] = np.maximum(recv[list(g)], r)
    terms["injection"] = _max_ratio(recv, bw)
    if machine.kind == "switched" and machine.dims[0] > 1 and op.kind != "permute":
        gpn = machine.dims[1]
        caps = {name: cap for name, _m, cap in _cuts(machine, chips)}
        worst = 0.0
        for g in op.groups:
            n = len(g)
            by: dict = {}
            for d in g:
                by.setdefault(chips[d] // gpn, []).append(d)
            m = len(by)
            if m < 2:
                continue
            S = size_bytes(op)
            for node, mem in by.items():
                k = len(mem)
                if op.kind == "all_gather":
                    b = (n - k) / n * S          # the other members' blocks enter once
                elif op.kind == "reduce_scatter":
                    b = k / n * S                # the node's shards, reduced outside at best
                elif op.kind == "all_reduce":
                    b = (1 if machine.sharp else 2) * (m - 1) / m * S
                else:
                    b = k * op.recv_bytes * (n - k) / max(n - 1, 1)
                cap = caps.get(f"nic_cut(node {node})", 0.0)
                if cap > 0:
                    worst = max(worst, b / cap)
        if worst > 0:
            terms["nic_cut"] = worst
    if any(v > 0 for v in terms.values()):
        # every term pays one launch; the latency term adds the hops from the nearest partner
        launch = launch_floor_s(machine)
        terms = {k: launch + v for k, v in terms.items() if v > 0}
        terms["latency"] = launch + _op_hop_floor_s(op, machine, chips)
    return terms


#: groups up to this size get their nearest partner exactly; larger ones the machine's least hop
_EXACT_GROUP = 64


def _op_hop_floor_s(op, machine, chips) -> float:
    """The largest, over the devices of ``op`` that receive, of the least latency from the nearest
    other member of its group (permute: from its source)."""
    chips = np.asarray(chips, dtype=np.int64)
    if op.kind == "permute":
        pairs = [(a, b) for a, b in op.pairs if a != b]
        if not pairs:
            return 0.0
        a, b = np.array(pairs).T
        return float(hop_floor_matrix_s(machine, chips[a], chips[b]).max())
    worst = 0.0
    for g in op.groups:
        n = len(g)
        if n < 2:
            continue
        c = chips[list(g)]
        if n > _EXACT_GROUP:
            # the least hop between any two distinct chips of the group's first pair class
            h = hop_floor_matrix_s(machine, c[:1], c[1:2])
            worst = max(worst, min(float(h[0]), _least_hop_s(machine)))
            continue
        ia, ib = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        h = hop_floor_matrix_s(machine, c[ia.ravel()], c[ib.ravel()]).reshape(n, n)
        np.fill_diagonal(h, np.inf)
        worst = max(worst, float(h.min(axis=0).max()))
    return worst


def _least_hop_s(machine) -> float:
    """The least latency between any two distinct chips of ``machine`` (one hop)."""
    if machine.kind == "torus":
        return _min_link_latency_s(machine)
    if machine.kind == "switched" and machine.has_protocols:
        return float(min(machine.protocol_latency_s(p)[1] for p in ("LL", "LL128", "Simple")))
    n = machine.num_devices
    if n < 2:
        return 0.0
    return float(hop_floor_matrix_s(machine, [0], [1])[0]) if machine.kind != "switched" or machine.dims[1] > 1 \
        else float(hop_floor_matrix_s(machine, [0], [machine.dims[1]])[0])


def schedule_lower_bound(schedule, machine, chips=None, detail: bool = False, lp="auto"):
    """The lower bound of a schedule: with ``meta`` naming its mesh, src, dst and itemsize (as
    ``Plan.to_schedule`` writes), the redistribution's bound -- the largest of the injection,
    cut and LP terms (:func:`redistribution_bound_terms`); otherwise the sum over ops of each
    op's largest term (:func:`op_bound_terms`), kinds prefixed ``schedule:``.

    Returns ``(seconds, kind)`` or, with ``detail=True``, ``(seconds, kind, terms)``."""
    meta = schedule.meta or {}
    chips = list(chips) if chips is not None else list(range(schedule.num_devices))
    if all(k in meta for k in ("mesh", "src", "dst")):
        from synth import ArrayType, Mesh

        try:
            mesh = Mesh.parse(meta["mesh"]) if isinstance(meta["mesh"], str) else Mesh.of(meta["mesh"])
            src, dst = ArrayType.parse(meta["src"]), ArrayType.parse(meta["dst"])
            if mesh.size == len(chips):
                terms = redistribution_bound_terms(machine, mesh, src, dst, int(meta.get("itemsize", 4)), chips,
                                                   lp=lp)
                kind = max(terms, key=terms.get)
                out = (terms[kind], kind if terms[kind] > 0 else "injection")
                return out + (terms,) if detail else out
        except ValueError:
            pass
    total = 0.0
    kinds: dict = {}
    for op in schedule.ops:
        t = op_bound_terms(op, machine, chips)
        if t:
            k = max(t, key=t.get)
            total += t[k]
            kinds[k] = kinds.get(k, 0.0) + t[k]
            kinds.setdefault("injection", 0.0)
    kind = "schedule:" + (max(kinds, key=kinds.get) if kinds and total > 0 else "injection")
    terms = {f"schedule:{k}": v for k, v in kinds.items()}
    return (total, kind, terms) if detail else (total, kind)


def describe(machine) -> str:
    return (f"{machine.spec}: link {machine.link_bandwidth_Bps / 1e9:.1f} GB/s, "
            f"{machine.link_latency_s * 1e6:.2f} us/hop, alpha {machine.launch_overhead_s * 1e6:.1f} us, "
            f"HBM {machine.hbm_bandwidth_Bps / 1e9:.0f} GB/s, {math.prod(machine.dims)} devices")
