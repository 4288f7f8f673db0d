"""Benchmarks that print figures (no timed asserts anywhere).

* :func:`run_bench` -- simulator wall time and events/s for one ``normal`` reshard
  on TPU v4 tori of 256, 1024 and 4096 chips;
* :func:`run_flat_bench` -- one flat collective over every device (4096 by default) on a TPU v4
  pod and on 512 DGX H100 nodes: wall time, chosen algorithm, simulated time;
* :func:`run_agreement` -- simulated vs analytic time on several profiles.
"""

from __future__ import annotations

import time

from synth.errors import RedistributionError

#: chips -> (torus dims, mesh)
BENCH_SHAPES = {
    64: ("4x4x4", "x=4,y=4,z=4"),
    256: ("4x8x8", "x=4,y=8,z=8"),
    512: ("8x8x8", "x=8,y=8,z=8"),
    1024: ("8x8x16", "x=8,y=8,z=16"),
    4096: ("16x16x16", "x=16,y=16,z=16"),
}
#: a bf16 [65536, 16384] array (2 GiB): fully sharded rows -> rows on z, columns on y
BENCH_CASE = ("[65536{x,y,z}, 16384]", "[65536{z}, 16384{y}]", 2)


def run_bench(sizes=(256, 1024, 4096), coarsen: bool = True, on_case=None) -> dict:
    """``on_case(row)`` is called after each size (to print progress)."""
    from models import load_profile
    from simulator.engine import simulate_plan
    from synth import synthesize

    rows = []
    for n in sizes:
        if n not in BENCH_SHAPES:
            raise RedistributionError(f"bench: no benchmark shape for {n} chips; choose from {sorted(BENCH_SHAPES)}")
        dims, mesh = BENCH_SHAPES[n]
        src, dst, itemsize = BENCH_CASE
        t0 = time.perf_counter()
        machine = load_profile(f"tpu-v4:{dims}")
        machine.topology  # noqa: B018 -- build the graph once, timed separately
        t1 = time.perf_counter()
        plan = synthesize(mesh, src, dst, planner="normal", itemsize=itemsize)
        t2 = time.perf_counter()
        c2 = time.process_time()
        res = simulate_plan(plan, machine, coarsen=coarsen)
        t3 = time.perf_counter()
        c3 = time.process_time()
        rows.append({
            "chips": n, "hardware": machine.spec, "mesh": mesh, "src": src, "dst": dst, "itemsize": itemsize,
            "steps": [o["kind"] for o in res.ops],
            "topology_s": t1 - t0, "plan_s": t2 - t1, "simulate_s": t3 - t2, "simulate_cpu_s": c3 - c2,
            "total_s": t3 - t0,
            "events": res.events, "events_per_s": res.events / (t3 - t2) if t3 > t2 else 0.0,
            "units": sum(o["units"] for o in res.ops), "simulated_units": sum(o["simulated"] for o in res.ops),
            "sim_time_s": res.time_s, "lower_bound_s": res.lower_bound_s,
            "peak_bytes_max_device": res.peak_bytes_max_device,
        })
        if on_case is not None:
            on_case(rows[-1])
    return {"coarsen": coarsen, "target": "4096 chips in <= 10 s (wall; 'sim cpu' is this process's CPU time)",
            "cases": rows}


#: (hardware, kind) pairs of the flat-collective benchmark, keyed by device count
FLAT_CASES = {
    4096: [("tpu-v4:16x16x16", "all_gather"), ("tpu-v4:16x16x16", "all_reduce"),
           ("h100-multinode:512", "all_gather"), ("h100-multinode:512", "all_reduce")],
    512: [("tpu-v4:8x8x8", "all_gather"), ("h100-multinode:64", "all_reduce")],
}


def run_flat_bench(devices: int = 4096, size_bytes: int = 1 << 30, on_case=None) -> dict:
    """One collective over all ``devices`` at once (a flat group), per case in ``FLAT_CASES``."""
    from models import load_profile
    from simulator.engine import simulate
    from synth import Schedule, ScheduleOp

    if devices not in FLAT_CASES:
        raise RedistributionError(f"bench: no flat-collective case for {devices} devices; choose from "
                                  f"{sorted(FLAT_CASES)}")
    rows = []
    for hw, kind in FLAT_CASES[devices]:
        t0 = time.perf_counter()
        m = load_profile(hw)
        m.topology  # noqa: B018
        n = m.num_devices
        S = size_bytes
        op = ScheduleOp(kind, S // n if kind == "all_gather" else S, S, S, S, (tuple(range(n)),), label="flat")
        t1 = time.perf_counter()
        res = simulate(Schedule(n, (op,), f"flat {kind}"), m)
        t2 = time.perf_counter()
        rows.append({"hardware": m.spec, "devices": n, "kind": kind, "size_bytes": S,
                     "algorithm": res.ops[0]["algorithm"], "topology_s": t1 - t0, "simulate_s": t2 - t1,
                     "sim_time_s": res.time_s, "lower_bound_s": res.lower_bound_s,
                     "lower_bound_kind": res.lower_bound_kind, "events": res.events})
        if on_case is not None:
            on_case(rows[-1])
    return {"target": f"one flat collective over {devices} devices in <= 10 s (wall)", "cases": rows}


def flat_line(c: dict) -> str:
    from simulator.format import fmt_s

    return (f"flat {c['kind']:<11} {c['hardware']:<20} {c['devices']:>5} dev  {c['algorithm']:<22} "
            f"topology {c['topology_s']:6.2f}s  simulate {c['simulate_s']:6.2f}s  sim time {fmt_s(c['sim_time_s']):>10} "
            f" bound {fmt_s(c['lower_bound_s']):>10} ({c['lower_bound_kind']})")


def bench_header(coarsen: bool) -> str:
    src, dst, itemsize = BENCH_CASE
    return (f"simulator bench: normal reshard {src} -> {dst} (itemsize {itemsize}) on TPU v4 tori, "
            f"coarsen={coarsen}\n"
            f"{'chips':>6} {'hardware':<18} {'steps':<34} {'topology':>9} {'simulate':>9} {'sim cpu':>9} {'total':>9} "
            f"{'events':>9} {'events/s':>10} {'sim time':>12}")


def bench_line(c: dict) -> str:
    from simulator.format import fmt_s

    return (f"{c['chips']:>6} {c['hardware']:<18} {','.join(c['steps']):<34} {c['topology_s']:>8.2f}s "
            f"{c['simulate_s']:>8.2f}s {c['simulate_cpu_s']:>8.2f}s {c['total_s']:>8.2f}s {c['events']:>9} {c['events_per_s']:>10.0f} "
            f"{fmt_s(c['sim_time_s']):>12}")


def print_bench(res: dict) -> None:
    print(bench_header(res["coarsen"]))
    for c in res["cases"]:
        print(bench_line(c))
    print(f"target: {res['target']}")


#: profile -> (mesh, one-axis all-gather type pair, a reshard) for the agreement table
AGREEMENT_CASES = [
    ("tpu-v4:4x4x4", "x=4,y=4,z=4"),
    ("tpu-v5e:16x16", "x=16,y=16"),
    ("dgx-h100:1", "x=2,y=4"),
    ("h100-multinode:2", "x=2,y=8"),
    ("cpu-host:8", "x=2,y=4"),
]


def run_agreement() -> dict:
    """For each profile: (1) an all-gather over the last mesh axis (uncontended
    rings along the placement), (2) an all-to-all over the last axis, (3) a normal
    reshard; simulated time vs the topology-aware analytic time and vs the textbook
    alpha-beta formula."""
    from models import load_profile
    from models.analytic import alpha_beta_s
    from simulator.engine import simulate_plan
    from synth import AllGather, AllToAll, ArrayType, Mesh, Plan, synthesize

    out = []
    for hw, mesh_s in AGREEMENT_CASES:
        m = load_profile(hw)
        mesh = Mesh.parse(mesh_s)
        names = mesh.names
        last, n = names[-1], mesh.sizes[-1]
        rows = 1 << 14
        cols = 1 << 12
        t_ag = ArrayType.parse(f"[{rows}{{{last}}}, {cols}]")
        ag = Plan.build(mesh, t_ag, ArrayType.parse(f"[{rows}, {cols}]"), [AllGather(0, last)], itemsize=4)
        t_a2a = ArrayType.parse(f"[{rows}{{{last}}}, {cols}]")
        a2a = Plan.build(mesh, t_a2a, ArrayType.parse(f"[{rows}, {cols}{{{last}}}]"), [AllToAll(0, 1, last)],
                         itemsize=4)
        first = names[0]
        src = f"[{rows}{{{','.join(names)}}}, {cols}]"
        dst = f"[{rows}{{{last}}}, {cols}{{{first}}}]"
        rs = synthesize(mesh, src, dst, planner="normal", itemsize=4)
        for label, plan in (("all_gather", ag), ("all_to_all", a2a), ("normal reshard", rs)):
            res = simulate_plan(plan, m)
            pk = simulate_plan(plan, m, engine="packet")
            row = {"hardware": m.spec, "mesh": mesh_s, "case": label,
                   "steps": [str(s) for s in plan.steps], "sim_s": res.time_s, "analytic_s": res.analytic_s,
                   "rel_err": (res.time_s - res.analytic_s) / res.analytic_s if res.analytic_s else 0.0,
                   "packet_s": pk.time_s, "packet_rel": (pk.time_s - res.time_s) / res.time_s if res.time_s else 0.0,
                   "packet_engine_ops": sum(1 for o in pk.ops if o.get("engine") == "packet"),
                   "algorithms": [o["algorithm"] for o in res.ops if o["algorithm"]],
                   "lower_bound_s": res.lower_bound_s}
            if label == "all_gather":
                op = plan.to_schedule().ops[0]
                g = op.groups[0]
                route = m.topology.route(g[0], g[1])
                bw = float(min(m.topology.bandwidth[lk] for lk in route))
                lat = float(sum(m.topology.latency[lk] for lk in route))
                tb = alpha_beta_s("all_gather", n, op.in_bytes, m.alpha_s("all_gather"), bw, lat,
                                  "bidir_ring" if m.kind == "torus" else "ring", 1)
                row["textbook_s"] = tb
            out.append(row)
    return {"cases": out}


def print_agreement(res: dict) -> None:
    from simulator.format import fmt_s

    print(f"{'hardware':<20} {'mesh':<10} {'case':<15} {'flow sim':>11} {'analytic':>11} {'sim/an-1':>9} "
          f"{'packet':>11} {'pkt/flow-1':>10} {'textbook':>11}  algorithms")
    for r in res["cases"]:
        tb = fmt_s(r["textbook_s"]) if "textbook_s" in r else "-"
        pk = f"{r['packet_rel'] * 100:>9.2f}%" if r.get("packet_engine_ops") else f"{'(flow)':>10}"
        print(f"{r['hardware']:<20} {r['mesh']:<10} {r['case']:<15} {fmt_s(r['sim_s']):>11} "
              f"{fmt_s(r['analytic_s']):>11} {r['rel_err'] * 100:>8.2f}% {fmt_s(r['packet_s']):>11} {pk} {tb:>11}  "
              f"{','.join(r['algorithms'])}")
    print("flow sim: the flow-level engine; packet: the per-transfer replay where it applies (rings, "
          "direct ops); '(flow)': no op of that case has a step-by-step form; textbook: line-rate alpha-beta")
