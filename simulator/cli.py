"""``python -m simulator``: simulate a redistribution (or a schedule file) on a machine.

    python -m simulator run --hardware tpu-v4:4x4x4 --mesh x=4,y=4,z=4 \\
        --src '[1024{x}, 4096{y,z}]' --dst '[1024{y}, 4096{z,x}]' [--planner auto] [--json]
    python -m simulator run --hardware cpu-host:8 --schedule xla_schedule.json [--json]
    python -m simulator profiles [--json]
    python -m simulator bench [--sizes 256,1024,4096] [--json]
    python -m simulator agreement [--json]
    python -m simulator validate [--json] [--data FILE]
    python -m simulator bound-ratio RESULTS_DIR [--planners auto,xla-shardy,xla-gspmd] [--json]

User errors print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from synth.cli import UserErrorParser
from synth.errors import RedistributionError
from synth.limits import float_arg, int_arg

EXAMPLE = {
    "hardware": "tpu-v4:4x4x4",
    "mesh": "x=4,y=4,z=4",
    "src": "[1024{x}, 4096{y,z}]",
    "dst": "[1024{y}, 4096{z,x}]",
}


def build_parser() -> argparse.ArgumentParser:
    from synth.planners import PLANNERS

    p = UserErrorParser(prog="python -m simulator",
                description="Simulate redistributions on machine topologies (SimPy, FIFO links).")
    sub = p.add_subparsers(dest="cmd", parser_class=UserErrorParser)
    sub.required = True
    r = sub.add_parser(
        "run", help="simulate one redistribution or a schedule file",
        description="Synthesize a plan from --src to --dst on --mesh and replay it on --hardware, or "
                    "replay a schedule JSON (--schedule). Hardware is NAME[:SIZE], e.g. tpu-v4:4x4x4, "
                    "dgx-h100:2 (nodes), cpu-host:8, calibrated/cpu-8, or a profile file path.")
    r.add_argument("--hardware", default=EXAMPLE["hardware"], help="profile and size (default: %(default)s)")
    from synth.cliutil import add_case_args

    add_case_args(r)  # --mesh --src --dst --shape --itemsize --dtype (defaults: EXAMPLE)
    r.add_argument("--dst-mesh", default=None,
                   help="target mesh with device ids (e.g. b=4@4-7; default: --mesh): plans and replays "
                        "a cross-mesh redistribution (simulator.crossmesh)")
    r.add_argument("--planner", default="auto", choices=sorted(PLANNERS),
                   help="auto (default: the cheapest plan on --hardware within the memory bound), "
                        "normal, easy, search")
    from synth.cli import budget_ms_arg

    r.add_argument("--budget-ms", type=budget_ms_arg, default=None,
                   help="auto: time budget of the search in ms (default: 100)")
    r.add_argument("--free-device-order", action="store_true",
                   help="auto: the target may use any assignment of mesh positions to devices")
    r.add_argument("--schedule", default=None, help="replay this schedule JSON instead of planning")
    r.add_argument("--placement", default=None,
                   help="mesh -> chips: 'row-major' (default), 'x=Z,y=X*Y' (axes over physical dims, "
                        "X:2 takes a factor of 2), or 'devices:3,1,0,2'")
    r.add_argument("--bandwidth-scale", type=float_arg(positive=True, maximum=1e6), default=1.0, help="multiply link bandwidths (what-if)")
    r.add_argument("--latency-scale", type=float_arg(minimum=0.0, maximum=1e6), default=1.0, help="multiply latencies and launch costs (what-if)")
    r.add_argument("--engine", default="flow", choices=["flow", "packet"],
                   help="flow-level max-min model (default) or per-transfer packet replay")
    r.add_argument("--max-chunks", type=int_arg(1, maximum=1024), default=8,
                   help="packet engine: chunks per transfer (default: 8)")
    r.add_argument("--no-coarsen", action="store_true", help="simulate every unit, even identical ones")
    r.add_argument("--trace", default=None, help="also write the per-transfer trace to this CSV file")
    r.add_argument("--full", action="store_true", help="with --json: include every link and the trace")
    r.add_argument("--chrome-trace", default=None, metavar="FILE",
                   help="also write Chrome Trace Event JSON (open in Perfetto): a track per device and busy link")
    r.add_argument("--json", action="store_true", help="print one JSON document")

    pr = sub.add_parser("profiles", help="list hardware profiles with their parameters")
    pr.add_argument("--json", action="store_true", help="print one JSON document")

    b = sub.add_parser("bench", help="time the simulator on normal reshards of 256/1024/4096-chip TPU v4 tori")
    b.add_argument("--sizes", default="256,1024,4096", help="chip counts among 64,256,512,1024,4096 (default: %(default)s)")
    b.add_argument("--no-coarsen", action="store_true", help="simulate every unit")
    b.add_argument("--flat", type=int, default=4096, metavar="N",
                   help="also time one flat collective over N devices (4096 or 512; 0 = skip)")
    b.add_argument("--json", action="store_true", help="print one JSON document")

    a = sub.add_parser("agreement", help="simulated vs analytic time on several profiles (uncontended cases)")
    a.add_argument("--json", action="store_true", help="print one JSON document")

    v = sub.add_parser("validate", help="simulated vs published collective measurements (MAPE per system)",
                       description="Simulate every published measurement in simulator/data/published.yaml "
                                   "(nccl-tests results, vendor figures, the JAX scaling book) and print "
                                   "simulated vs measured, the lower bound, and MAPE per system and overall.")
    v.add_argument("--data", default=None, help="a published-measurements YAML file (default: the built-in set)")
    v.add_argument("--json", action="store_true", help="print one JSON document")

    br = sub.add_parser("bound-ratio", help="simulated time over the lower bound, with and without its latency "
                                            "term, from an experiments results folder",
                        description="Read the baseline rows of an experiments results folder (rows.jsonl, e.g. "
                                    "from experiments/configs/paper.yaml), recompute each case's lower bound with "
                                    "and without the latency term and print the geomean and max of time / bound "
                                    "per planner.")
    br.add_argument("results", help="the --out folder of 'python -m experiments run'")
    br.add_argument("--planners", default="auto,xla-shardy,xla-gspmd",
                    help="comma-separated planners (default: %(default)s)")
    br.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def _other_mesh(a: str, b: str) -> bool:
    from synth import Mesh

    return Mesh.parse(a) != Mesh.parse(b)


def _run(args):
    from models import load_profile
    from simulator.engine import simulate, simulate_plan

    if args.trace is not None:
        from synth.fileio import check_output_file

        check_output_file(args.trace, "--trace")
    if args.chrome_trace is not None:  # "" is refused (one line), not silently skipped
        from synth.fileio import check_output_file

        check_output_file(args.chrome_trace, "--chrome-trace")
    machine = load_profile(args.hardware)
    if args.bandwidth_scale != 1.0 or args.latency_scale != 1.0:
        machine = machine.with_scale(args.bandwidth_scale, args.latency_scale)
    kw = {"coarsen": not args.no_coarsen, "max_chunks": args.max_chunks, "engine": args.engine}
    from synth.cliutil import parse_case, resolve_itemsize

    itemsize = resolve_itemsize(args.dtype, args.itemsize)
    if args.schedule:
        if args.src or args.dst:
            raise RedistributionError("run: give either --schedule or --src/--dst, not both")
        from synth import Schedule

        sched = Schedule.load(args.schedule)
        res = simulate(sched, machine, mesh=args.mesh, placement=args.placement, **kw)
        plan = None
    elif args.dst_mesh is not None and _other_mesh(args.mesh or EXAMPLE["mesh"], args.dst_mesh):
        from simulator.crossmesh import run_cli

        return run_cli(args, machine, args.mesh or EXAMPLE["mesh"], args.src or EXAMPLE["src"],
                       args.dst or EXAMPLE["dst"])
    else:
        from synth import synthesize

        mesh, src, dst = parse_case(args.mesh or EXAMPLE["mesh"], args.src or EXAMPLE["src"],
                                    args.dst or EXAMPLE["dst"], args.shape)
        auto_kw = {}
        if args.planner == "auto":  # the machine's analytic cost, with this placement
            from models.plan_cost import machine_cost
            from synth import Mesh

            auto_kw = {"cost": machine_cost(machine, Mesh.of(mesh), args.placement),
                       "budget_ms": args.budget_ms, "free_device_order": args.free_device_order}
        elif args.budget_ms is not None or args.free_device_order:
            raise RedistributionError("run: --budget-ms and --free-device-order apply to --planner auto")
        plan = synthesize(mesh, src, dst, planner=args.planner, itemsize=itemsize, **auto_kw)
        res = simulate_plan(plan, machine, placement=args.placement, **kw)
    if args.trace is not None:
        from synth.fileio import atomic_writer

        with atomic_writer(args.trace, "--trace") as f:
            res.trace_df().to_csv(f, index=False)
    if args.chrome_trace is not None:
        from simulator.chrome_trace import write_chrome_trace

        write_chrome_trace(res, args.chrome_trace)
    if args.json:
        d = res.to_dict(full=args.full)
        from simulator.chrome_trace import op_bandwidths  # nccl-tests algbw/busbw per op

        for o, bw in zip(d["ops"], op_bandwidths(res)):
            o.update({k: bw[k] for k in ("nccl_bytes", "group_size", "algbw_Bps", "busbw_Bps",
                                         "link_peak_Bps", "bus_peak_Bps")})
        if plan is not None:
            d["plan"] = plan.to_dict()
        print(json.dumps(d))
    else:
        if plan is not None:
            print(str(plan))
            print()
        print(res.summary())


def _profiles(args):
    from models import available_profiles, load_profile
    from models.analytic import launch_floor_s

    out, broken = [], []
    for n in available_profiles():
        try:
            m = load_profile(n)
            # the least fixed cost the model charges a communicating op (NCCL's LL base latency on
            # NVIDIA profiles, not alpha): the launch part of the lower bound's latency term
            out.append({**m.to_dict(), "launch_floor_s": launch_floor_s(m)})
        except RedistributionError as e:  # a broken calibrated file must not hide the others
            broken.append({"name": n, "error": str(e)})
    if args.json:
        print(json.dumps({"profiles": out, "errors": broken}))
        return
    for b in broken:
        print(f"warning: profile {b['name']} does not load: {b['error']}", file=sys.stderr)
    for d in out:
        print(f"{d['spec']:<24} {d['kind']:<9} {d['num_devices']:>5} devices  link "
              f"{d['link_bandwidth_Bps'] / 1e9:7.1f} GB/s x{d['links_per_chip']:<3} "
              f"{d['link_latency_s'] * 1e6:5.2f} us/hop  alpha {d['launch_overhead_s'] * 1e6:5.1f} us  "
              f"floor {d['launch_floor_s'] * 1e6:5.1f} us  "
              f"HBM {d['hbm_bandwidth_Bps'] / 1e9:6.0f} GB/s {d['hbm_capacity_bytes'] / 2**30:6.1f} GiB")


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.cmd == "run":
            _run(args)
        elif args.cmd == "profiles":
            _profiles(args)
        elif args.cmd == "bench":
            from simulator.bench import run_bench

            try:
                sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
            except ValueError:
                raise RedistributionError(f"bench: --sizes {args.sizes!r} must be comma-separated integers") from None
            from simulator.bench import BENCH_SHAPES

            bad = [n for n in sizes if n not in BENCH_SHAPES]
            if bad or not sizes:
                raise RedistributionError(
                    f"bench: no benchmark shape for {bad[0] if bad else 'an empty list of'} chips; --sizes takes "
                    f"a comma-separated list of {sorted(BENCH_SHAPES)}")
            from simulator.bench import FLAT_CASES, flat_line, run_flat_bench

            if args.flat and args.flat not in FLAT_CASES:
                raise RedistributionError(f"bench: --flat takes one of {sorted(FLAT_CASES)} or 0, got {args.flat}")
            if args.json:
                out = run_bench(sizes, coarsen=not args.no_coarsen)
                if args.flat:
                    out["flat"] = run_flat_bench(args.flat)
                print(json.dumps(out))
            else:
                from simulator.bench import bench_header, bench_line

                print(bench_header(not args.no_coarsen), flush=True)
                res = run_bench(sizes, coarsen=not args.no_coarsen,
                                on_case=lambda c: print(bench_line(c), flush=True))
                print(f"target: {res['target']}")
                if args.flat:
                    fr = run_flat_bench(args.flat, on_case=lambda c: print(flat_line(c), flush=True))
                    print(f"target: {fr['target']}")
        elif args.cmd == "validate":
            from simulator.validate import DATA, print_validate, validate

            res = validate(args.data or DATA)
            print(json.dumps(res)) if args.json else print_validate(res)
        elif args.cmd == "bound-ratio":
            from simulator.bound_ratio import bound_ratio, print_bound_ratio

            planners = tuple(p.strip() for p in args.planners.split(",") if p.strip())
            if not planners:
                raise RedistributionError("bound-ratio: --planners is empty; give e.g. auto,xla-shardy")
            res = bound_ratio(args.results, planners)
            print(json.dumps(res)) if args.json else print_bound_ratio(res)
        elif args.cmd == "agreement":
            from simulator.bench import print_agreement, run_agreement

            res = run_agreement()
            print(json.dumps(res)) if args.json else print_agreement(res)
        return 0
    except RedistributionError as e:
        from synth.cliutil import report_error

        return report_error(e, argv)
    except BrokenPipeError:
        return 0
