"""The replay of a schedule on a machine.

Two engines share every op's algorithm choice (:func:`models.collectives.plan_op`):

* ``engine="flow"`` (default) -- the **flow-level model**: an op is its algorithm's phases of
  concurrent flows (a ring is one flow per neighbour pair carrying all its steps' bytes, an
  all-to-all one flow per pair); links are shared max-min fairly among the flows crossing them
  and rates are recomputed only when a flow finishes (:mod:`models.flow`). An op costs
  ``alpha + latency of its steps + max(flow replay of its phases, reduction arithmetic)``.
  Contention between groups and between rings of one op is captured by the shared links.
* ``engine="packet"`` -- the exact **per-transfer replay** (SimPy): every ring step and every
  flow is cut into chunks that queue FIFO on each link (ASTRA-sim style, virtual cut-through).
  It replays the algorithms it can express step by step (rings, bidirectional rings, direct);
  an op whose algorithm is NVLS, a tree, a multi-ring over rails, a line or a multi-axis
  collective is replayed by the flow model and marked ``engine: "flow"`` in ``res.ops``.
  Both engines use the same link capacities (line rate x achieved fraction x protocol x ramp).
* ``engine: "aggregate"`` (per op, either engine; algorithm ``direct(agg)``) -- an all-to-all too
  large to route flow by flow (:func:`models.collectives.aggregated`): its exact per-link loads
  are counted in aggregate (:func:`models.collectives.direct_all_to_all_loads`) and its transfer
  time is the busiest link's bytes / capacity, i.e. the analytic time; the max-min replay of its
  flows is not run (on the uniform all-to-alls checked it equals the busiest link's time), and
  the trace has no per-flow rows for it.

Common to both:

* **Ops run one after another.** Op ``k+1`` starts when every device has finished op ``k``.
* **Local ops** (dyn_slice, copy) cost ``alpha + (bytes read + written) / HBM bandwidth``.
* **Memory**: at op start each participating device allocates its output; at op end it frees
  its input; an all-reduce runs in place (``synth.schedule.IN_PLACE_KINDS``: its output
  takes its input's buffer). Every device runs every op of an SPMD program, so a
  permute's output is allocated on all devices.
"""

from __future__ import annotations

import math
import os
import time as _time

import numpy as np

from models.algorithms import components, expand, order_component, signature
from models.analytic import local_bytes, schedule_lower_bound
from models.collectives import (
    MAX_ROUTE_LINKS,
    aggregated,
    check_replay_size,
    direct_all_to_all_loads,
    plan_op,
)
from models.errors import SimulationError
from models.flow import maxmin_replay
from models.placement import Placement
from models.profiles import load_profile
from synth.schedule import IN_PLACE_KINDS

DEFAULT_MAX_CHUNKS = 8
DEFAULT_MIN_CHUNK_BYTES = 4096


class _Chunk:
    """One chunk travelling its route; ``arrive`` runs when its head reaches a hop."""

    __slots__ = ("sim", "route", "c", "done", "i", "tail", "cb")

    def __init__(self, sim, route, c, done):
        self.sim, self.route, self.c, self.done = sim, route, c, done
        self.cb = self._next

    def arrive(self, i, prev_tail):
        sim = self.sim
        env = sim.env
        now = env.now
        route = self.route
        lk = route[i]
        free = sim.free
        f = free[lk]
        start = f if f > now else now
        tail = start + self.c / sim.bw[lk]
        if prev_tail is not None:
            t2 = prev_tail + sim.lat[route[i - 1]]
            if t2 > tail:
                tail = t2
        free[lk] = tail
        self.i, self.tail = i, tail
        if i + 1 < len(route):
            env.timeout(start + sim.lat[lk] - now).callbacks.append(self.cb)
        elif self.done is not None:
            env.timeout(tail + sim.lat[lk] - now).callbacks.append(self._done)
        return tail

    def _next(self, _ev):
        self.arrive(self.i + 1, self.tail)

    def _done(self, _ev):
        self.done()


class _OpSim:
    """One op's transfers in one SimPy environment (links start idle)."""

    def __init__(self, env, bw, lat, max_chunks, min_chunk_bytes):
        self.env = env
        self.bw = bw
        self.lat = lat
        self.free = [0.0] * len(bw)
        self.max_chunks = max_chunks
        self.min_chunk = min_chunk_bytes
        self.events = 0
        self.rows: list = []  # (class, unit, key, step, direction, start, end, bytes)

    def nchunks(self, size: float) -> int:
        if size <= self.min_chunk:
            return 1
        return max(1, min(self.max_chunks, math.ceil(size / self.min_chunk)))

    def _enter(self, route, i, c, prev_tail, done):
        """A chunk of ``c`` bytes whose head reaches hop ``i`` of ``route`` now."""
        ch = _Chunk(self, route, c, done)
        return ch.arrive(i, prev_tail)

    def send(self, route, size, done):
        """Generator: inject ``size`` bytes along ``route`` chunk by chunk at the first
        link's line rate (chunks queue FIFO where links are busy); ``done()`` is
        called when the last chunk has fully arrived."""
        env = self.env
        k = self.nchunks(size)
        c = size / k
        gap = c / self.bw[route[0]]
        self.events += k * len(route)  # one event per chunk per hop
        for j in range(k):
            self._enter(route, 0, c, None, done if j == k - 1 else None)
            if j + 1 < k:
                self.events += 1
                yield env.timeout(gap)

    # -- units --------------------------------------------------------------------------
    def start_unit(self, cls: int, ui: int, u):
        env = self.env
        if u.algo == "ring":
            n = len(u.devices)
            for direction, routes, steps in ((1, u.routes_fwd, u.steps_fwd), (-1, u.routes_bwd, u.steps_bwd)):
                if not steps:
                    continue
                got = [[env.event() for _ in range(steps)] for _ in range(n)]
                self.events += n * steps
                for i in range(n):
                    env.process(self._ring_member(cls, ui, u, i, direction, routes, steps, got))
                    self.events += 1
        else:
            for fi, fl in enumerate(u.flows):
                env.process(self._flow(cls, ui, fi, fl))
                self.events += 1

    def _ring_member(self, cls, ui, u, i, direction, routes, steps, got):
        env = self.env
        n = len(u.devices)
        nxt = (i + direction) % n
        b = u.block_bytes
        for s in range(steps):
            if s > 0:
                yield got[i][s - 1]
            t0 = env.now

            def done(s=s, t0=t0):
                got[nxt][s].succeed()
                self.rows.append((cls, ui, (direction, i), s, direction, t0, env.now, b))

            yield from self.send(routes[i], b, done)

    def _flow(self, cls, ui, fi, fl):
        t0 = self.env.now

        def done():
            self.rows.append((cls, ui, fi, 0, 0, t0, self.env.now, fl[2]))

        yield from self.send(fl[3], fl[2], done)


def _participants(op, num_devices):
    """Devices that allocate the op's output: all of them for a permute (SPMD) and
    for an op that names no groups; otherwise the members of its groups."""
    if op.kind == "permute" or not op.groups:
        return np.arange(num_devices)
    ids = sorted({d for g in op.groups for d in g})
    return np.array(ids, dtype=np.int64)


def _as_schedule(schedule):
    from synth import Schedule

    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, dict):
        return Schedule.from_dict(schedule)
    if isinstance(schedule, (str, os.PathLike)):
        return Schedule.load(schedule)
    if hasattr(schedule, "to_schedule"):
        return schedule.to_schedule()
    raise SimulationError(f"simulate: expected a synth.Schedule (or its dict / JSON path), got {type(schedule).__name__}")


ENGINES = ("flow", "packet")


def _packet_algorithm(plan) -> str | None:
    """The step-by-step algorithm the packet engine replays for ``plan`` (None: it cannot)."""
    a = plan.algorithm
    if a == "direct":
        return "direct"
    if a == "ring":
        return "ring"
    if a.startswith("bidir_ring("):
        return "bidir_ring"
    return None


def simulate(schedule, machine, mesh=None, placement=None, *, engine: str = "flow", coarsen: bool = True,
             max_chunks: int = DEFAULT_MAX_CHUNKS, min_chunk_bytes: int = DEFAULT_MIN_CHUNK_BYTES,
             progress=None, lp_bound="auto", max_route_links: float = MAX_ROUTE_LINKS):
    """Replay ``schedule`` (a :class:`synth.Schedule`) on ``machine`` (a profile or a
    spec string such as ``"tpu-v4:4x4x4"``). ``mesh`` (a Mesh or string) is needed
    only for an axis-mapping ``placement``; ``placement`` is ``None`` (row-major), a
    :class:`models.Placement`, its text form, or a list of chips.

    ``engine``: ``"flow"`` (default, flow-level max-min model) or ``"packet"`` (per-transfer
    SimPy replay; ``coarsen``, ``max_chunks`` and ``min_chunk_bytes`` apply to it).
    ``progress``: an optional callable ``progress(done_ops, total_ops)``. ``lp_bound``: whether
    the lower bound includes the max-concurrent-flow LP (``"auto"``: small LPs only; ``True``:
    up to a few hundred devices; ``False``). ``max_route_links``: the largest replay accepted,
    in flows x hops estimated before routing (:func:`models.collectives.check_replay_size`;
    above it a :class:`SimulationError` names the size and the fix).
    Returns a :class:`simulator.result.SimResult`."""
    from simulator.result import SimResult

    wall0 = _time.perf_counter()
    if engine not in ENGINES:
        raise SimulationError(f"simulate: engine must be one of {list(ENGINES)}, got {engine!r}")
    schedule = _as_schedule(schedule)
    machine = load_profile(machine)
    if mesh is not None:
        from synth import Mesh

        mesh = Mesh.of(mesh)
    elif schedule.meta.get("mesh"):
        from synth import Mesh

        try:
            mesh = Mesh.of(schedule.meta["mesh"])
        except ValueError:
            mesh = None
    if mesh is not None and mesh.size == schedule.num_devices:
        Placement.of(None, mesh, machine)  # names the mesh when it does not fit the machine
    if schedule.num_devices != machine.num_devices:
        raise SimulationError(
            f"simulate: schedule {schedule.name!r} runs on {schedule.num_devices} devices but hardware "
            f"{machine.spec} has {machine.num_devices}; size the hardware to match the mesh")
    if mesh is not None and mesh.size != schedule.num_devices:
        mesh = None
    if max_chunks < 1 or min_chunk_bytes < 1:
        raise SimulationError("simulate: max_chunks and min_chunk_bytes must be >= 1")
    place = Placement.of(placement, mesh, machine)
    chips = place.chips
    # refuse a replay that would run for minutes before routing a single flow (one line, exit 2)
    check_replay_size(schedule, machine, max_route_links)
    topo = machine.topology
    P = schedule.num_devices
    nlinks = len(topo.links)
    device_of = {c: d for d, c in enumerate(chips)}

    link_bytes = np.zeros(nlinks)
    link_busy = np.zeros(nlinks)
    cur = np.full(P, schedule.initial_bytes, dtype=np.int64)
    mem_t, mem_b = [0.0], [cur.copy()]
    ops_out, trace_ops = [], []
    t = 0.0
    events = 0
    for k, op in enumerate(schedule.ops):
        part = _participants(op, P)
        start = t
        in_place = op.kind in IN_PLACE_KINDS  # the output takes the input's buffer
        if len(part) and not in_place:
            cur[part] += op.out_bytes
        mem_t.append(start)
        mem_b.append(cur.copy())
        info = {"index": k, "kind": op.kind, "label": op.label, "start_s": start,
                "algorithm": None, "protocol": None, "engine": None, "flows": 0,
                "units": 0, "components": 0, "simulated": 0}
        if op.is_local:
            dur = machine.alpha_s(op.kind) + local_bytes(op) / machine.local_bandwidth_Bps(op.kind)
            analytic = dur
        elif (agg := direct_all_to_all_loads(op, machine, chips) if aggregated(op, machine) else None) is not None:
            # a large all-to-all: exact per-link loads counted in aggregate; its transfer time is the
            # busiest link's (the max-min replay of its flows is not run: engine "aggregate")
            load, cap = agg["load"], agg["capacity"]
            link_bytes += load
            used = load > 0
            link_busy[used] += load[used] / cap[used]
            dur = analytic = agg["alpha_s"] + agg["latency_s"] + agg["xfer_s"]
            info.update(algorithm="direct(agg)", engine="aggregate", flows=agg["flows"], units=agg["flows"],
                        components=1, simulated=0, size_bytes=float(op.in_bytes))
            trace_ops.append(("flow", k, start + agg["alpha_s"], agg["latency_s"], []))
        else:
            plan = plan_op(op, machine, chips)
            analytic = plan.analytic_s()
            info.update(algorithm=plan.label, protocol=plan.protocol, flows=plan.num_flows(),
                        size_bytes=plan.size_bytes)
            cap = plan.capacity
            for ph in plan.phases:
                for r, b, w in zip(ph.routes, ph.nbytes, ph.weights):
                    for lk in r:
                        link_bytes[lk] += b * w
                        link_busy[lk] += b * w / cap[lk]
            pk = _packet_algorithm(plan) if engine == "packet" else None
            if pk is not None:
                xfer, ev, classes, rows, nunits, ncomp = _packet_op(op, machine, topo, chips, pk, cap, coarsen,
                                                                    max_chunks, min_chunk_bytes)
                events += ev
                info.update(engine="packet", units=nunits, components=ncomp, simulated=len(classes))
                trace_ops.append(("packet", k, start + plan.alpha_s, classes, rows))
                lat = 0.0  # the packet replay pays every hop's latency itself
            else:
                xfer, rows = 0.0, []
                for pi, ph in enumerate(plan.phases):
                    tp, ev, fin = maxmin_replay(ph.routes, ph.nbytes, ph.weights, cap)
                    events += ev + len(ph.routes)
                    for fi, (r, b, w) in enumerate(zip(ph.routes, ph.nbytes, ph.weights)):
                        rows.append((pi, fi, r, b * w, xfer, xfer + float(fin[fi])))
                    xfer += tp
                info.update(engine="flow", units=plan.num_flows(), components=len(plan.phases),
                            simulated=len(plan.phases))
                lat = sum(ph.latency_s for ph in plan.phases)
                trace_ops.append(("flow", k, start + plan.alpha_s, lat, rows))
            dur = plan.alpha_s + lat + max(xfer, plan.reduce_s)
        t = start + dur
        if len(part) and not in_place:
            cur[part] -= op.in_bytes
        mem_t.append(t)
        mem_b.append(cur.copy())
        info.update(end_s=t, duration_s=dur, analytic_s=analytic,
                    send_bytes=op.send_bytes, recv_bytes=op.recv_bytes,
                    in_bytes=op.in_bytes, out_bytes=op.out_bytes)
        ops_out.append(info)
        if progress is not None:
            progress(k + 1, len(schedule.ops))

    mem_b = np.stack(mem_b)
    peak = mem_b.max(axis=0)
    lb, lb_kind, lb_terms = schedule_lower_bound(schedule, machine, chips, detail=True, lp=lp_bound)
    warnings = []
    if peak.max() > machine.hbm_capacity_bytes:
        warnings.append(
            f"peak memory {int(peak.max())} bytes on device {int(peak.argmax())} exceeds the "
            f"{machine.name} HBM capacity of {machine.hbm_capacity_bytes} bytes (out of memory)")
    return SimResult(
        machine=machine, schedule=schedule, placement=place, time_s=float(t), lower_bound_s=float(lb),
        lower_bound_kind=lb_kind, analytic_s=float(sum(o["analytic_s"] for o in ops_out)),
        peak_bytes=peak, link_bytes_array=link_bytes, link_busy_array=link_busy, ops=ops_out,
        memory_times_s=np.array(mem_t), memory_bytes=mem_b, warnings=warnings, events=events,
        wall_s=_time.perf_counter() - wall0, _trace=trace_ops, engine=engine, lower_bound_terms=lb_terms,
        _device_of=device_of,
    )


def _packet_op(op, machine, topo, chips, algo, cap, coarsen, max_chunks, min_chunk_bytes):
    """Per-transfer SimPy replay of one ring / bidirectional-ring / direct op."""
    import simpy

    kp = machine.kind_params(op.kind)
    lat = topo.latency if kp.latency_s is None else np.full(len(topo.links), kp.latency_s)
    units = expand(op, topo, chips, algo)
    comps = [order_component(c, topo.link_key) for c in components(units)]
    if coarsen and len(comps) > 1:
        bwl, latl = list(cap), lat.tolist()
        by_sig: dict = {}
        for c in comps:
            by_sig.setdefault(signature(c, bwl, latl), []).append(c)
        classes = list(by_sig.values())
    else:
        classes = [[c] for c in comps]
    env = simpy.Environment()
    sim = _OpSim(env, [float(x) for x in cap], lat.tolist(), max_chunks, min_chunk_bytes)
    for ci, members in enumerate(classes):
        for ui, u in enumerate(members[0]):
            sim.start_unit(ci, ui, u)
    env.run()
    end = max((r[6] for r in sim.rows), default=0.0)
    return end, sim.events, classes, sim.rows, len(units), len(comps)


def simulate_plan(plan, machine, placement=None, **kw):
    """Simulate a :class:`synth.Plan` (its schedule) on ``machine``."""
    return simulate(plan.to_schedule(), machine, mesh=plan.mesh, placement=placement, **kw)
