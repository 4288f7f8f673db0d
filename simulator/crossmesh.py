"""Replay of a cross-mesh plan (:class:`synth.crossmesh.CrossPlan`) on a machine.

The phase on A and the phase on B are schedules on machine device ids and are replayed
by :func:`simulator.simulate` like every other schedule (same algorithms, same links);
the transfer between them is its point-to-point flows, one per piece, replayed max-min
fairly on the same links (:func:`models.crossmesh.transfer_time_s`). Phases run one
after another. Memory per device is the plan's own accounting
(:attr:`CrossPlan.device_memory`): the simulator's SPMD memory timeline allocates every
op's output on every device, which a device outside a phase's mesh never does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.errors import SimulationError


@dataclass(frozen=True)
class CrossSimResult:
    time_s: float
    lower_bound_s: float
    lower_bound_kind: str
    lower_bound_terms: dict
    phases: tuple          # ({"phase", "start_s", "end_s", "ops": [...]}, ...)
    transfer: dict         # engine, flows, time_s
    peak_bytes_max_device: int
    bound_bytes: int
    bound_holds: bool
    machine: str
    ops: tuple = field(default=(), repr=False)

    @property
    def ratio_to_bound(self) -> float | None:
        return self.time_s / self.lower_bound_s if self.lower_bound_s > 0 else None

    def to_dict(self) -> dict:
        return {"machine": self.machine, "time_s": self.time_s, "lower_bound_s": self.lower_bound_s,
                "lower_bound_kind": self.lower_bound_kind, "lower_bound_terms": self.lower_bound_terms,
                "ratio_to_bound": self.ratio_to_bound, "phases": list(self.phases), "transfer": self.transfer,
                "peak_bytes_max_device": self.peak_bytes_max_device, "bound_bytes": self.bound_bytes,
                "bound_holds": self.bound_holds}

    def timeline_rows(self) -> list[dict]:
        """One row per op: phase, kind, label, start and end (for a timeline figure)."""
        rows = []
        for ph in self.phases:
            for o in ph["ops"]:
                rows.append({"phase": ph["phase"], "kind": o["kind"], "label": o.get("label", ""),
                             "start_s": o["start_s"], "end_s": o["end_s"]})
        return rows


def _phase(schedule, machine, t0, name, engine):
    from simulator.engine import simulate

    if not schedule.ops:
        return {"phase": name, "start_s": t0, "end_s": t0, "ops": []}
    res = simulate(schedule, machine, engine=engine, lp_bound=False)
    ops = [{"kind": o["kind"], "label": o["label"], "start_s": t0 + o["start_s"], "end_s": t0 + o["end_s"],
            "algorithm": o.get("algorithm")} for o in res.ops]
    return {"phase": name, "start_s": t0, "end_s": t0 + res.time_s, "ops": ops}


def simulate_crossmesh(plan, machine, *, engine: str = "flow") -> CrossSimResult:
    """Replay ``plan`` on ``machine`` (a profile or spec such as ``"h100-multinode:2"``)."""
    from dataclasses import replace

    from models.crossmesh import cross_lower_bound_s, transfer_time_s
    from models.profiles import load_profile
    from synth.crossmesh import check_meshes

    machine = load_profile(machine)
    n = machine.num_devices
    try:
        check_meshes(plan.src_mesh, plan.dst_mesh, n)
    except ValueError as e:
        raise SimulationError(f"simulate: {e}") from None
    pre, flows, post = plan.schedules()
    pre, post = replace(pre, num_devices=n), replace(post, num_devices=n)
    p1 = _phase(pre, machine, 0.0, "on A", engine)
    t_x, info = transfer_time_s(flows, machine, detail=True)
    t1 = p1["end_s"]
    xop = {"kind": "cross_mesh_transfer", "label": f"{len(flows)} pieces", "start_s": t1, "end_s": t1 + t_x,
           "algorithm": info["engine"]}
    p2 = {"phase": "transfer", "start_s": t1, "end_s": t1 + t_x, "ops": [xop] if flows else []}
    p3 = _phase(post, machine, t1 + t_x, "on B", engine)
    lb, kind, terms = cross_lower_bound_s(machine, plan.src_mesh, plan.src, plan.dst_mesh, plan.dst, plan.itemsize)
    m = plan.metrics()
    return CrossSimResult(
        time_s=float(p3["end_s"]), lower_bound_s=lb, lower_bound_kind=kind, lower_bound_terms=terms,
        phases=(p1, p2, p3), transfer={"engine": info["engine"], "flows": info["flows"], "time_s": t_x,
                                       "bytes": int(sum(b for _, _, b in flows))},
        peak_bytes_max_device=m["peak_bytes_max_device"], bound_bytes=m["bound_bytes"],
        bound_holds=m["bound_holds"], machine=machine.spec)


def format_result(res: CrossSimResult) -> str:
    from synth.format import fmt_bytes

    lines = [f"simulated on {res.machine}: {res.time_s * 1e3:.3f} ms; lower bound {res.lower_bound_s * 1e3:.3f} ms "
             f"({res.lower_bound_kind})" + (f", ratio {res.ratio_to_bound:.2f}" if res.ratio_to_bound else "")]
    for ph in res.phases:
        lines.append(f"  {ph['phase']:8s} {ph['start_s'] * 1e3:9.3f} .. {ph['end_s'] * 1e3:9.3f} ms  "
                     f"{len(ph['ops'])} op(s)")
    lines.append(f"  transfer: {res.transfer['flows']} flows, {fmt_bytes(res.transfer['bytes'])} "
                 f"(engine {res.transfer['engine']})")
    lines.append(f"  peak per device {fmt_bytes(res.peak_bytes_max_device)} (bound {fmt_bytes(res.bound_bytes)}: "
                 f"{'holds' if res.bound_holds else 'EXCEEDED'})")
    return "\n".join(lines)


def plan_on_machine(src_mesh, src, dst_mesh, dst, machine, itemsize: int = 4, planner: str = "auto"):
    """The cross-mesh plan whose candidates are ranked by their simulated time on ``machine``."""
    from models.profiles import load_profile
    from synth.crossmesh import plan_crossmesh

    machine = load_profile(machine)
    return plan_crossmesh(src_mesh, src, dst_mesh, dst, itemsize, planner=planner,
                          num_devices=machine.num_devices,
                          cost=lambda p: simulate_crossmesh(p, machine).time_s)


def run_cli(args, machine, mesh, src, dst) -> int:
    """``python -m simulator run --dst-mesh ...``: plan across meshes on the machine, replay, print."""
    import json

    from synth.cliutil import resolve_itemsize
    from synth.errors import RedistributionError

    if args.schedule or args.free_device_order or args.budget_ms is not None or args.trace or args.chrome_trace:
        raise RedistributionError("run: --dst-mesh plans across meshes; --schedule, --free-device-order, "
                                  "--budget-ms, --trace and --chrome-trace apply to one mesh")
    if args.placement not in (None, "row-major"):
        raise RedistributionError("run: with --dst-mesh the meshes' device ids place them; drop --placement")
    plan = plan_on_machine(mesh, src, args.dst_mesh, dst, machine, resolve_itemsize(args.dtype, args.itemsize), args.planner)
    res = simulate_crossmesh(plan, machine, engine=args.engine)
    if args.json:
        d = res.to_dict()
        d["plan"] = plan.to_dict()
        print(json.dumps(d))
    else:
        print(str(plan))
        print()
        print(format_result(res))
    return 0
