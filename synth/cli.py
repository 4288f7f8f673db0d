"""``python -m synth``: plan a redistribution, or benchmark the synthesizer.

    python -m synth plan --mesh x=2,y=4 --src '[1024{y}, 512, 256{x}]' --dst '[1024, 512{x,y}, 256]'
    python -m synth plan ... [--planner auto|normal|easy|search] [--budget-moves 50000]
                             [--budget-ms 10000] [--move-set full|whole-axes] [--free-device-order] [--json]
    python -m synth plan --mesh a=4@0-3 --src '[8{a}, 4]' --dst-mesh b=2,c=2@4-7 --dst '[8{b}, 4]'  (two meshes)
    python -m synth bench [--cases 2000] [--seed 0] [--planner auto,normal] [--runs 3] [--burn 2] [--json]
    python -m synth bench --quality-at 4000 [--cases 2000]   (plans at 4,000 moves against the default budget)
    python -m synth agreement [--cases 1000] [--seed 0] [--json]
    python -m synth peers [--suite shardy,dtensor] [--budget-moves N] [--budget-ms MS] [--fuse] [--json]

User errors print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from synth.errors import RedistributionError
from synth.limits import int_arg

EXAMPLE = {
    "mesh": "x=2,y=4",
    "src": "[1024{y}, 512, 256{x}]",
    "dst": "[1024, 512{x,y}, 256]",
}


# the parser and the error contract live in synth.cliutil, shared by every CLI
from synth.cliutil import UserErrorParser, add_case_args, parse_case, report_error, resolve_itemsize  # noqa: E402,F401


def build_parser() -> argparse.ArgumentParser:
    p = UserErrorParser(prog="python -m synth", description="Synthesize memory-efficient redistributions.")
    sub = p.add_subparsers(dest="cmd", parser_class=UserErrorParser)
    sub.required = True
    pl = sub.add_parser("plan", help="synthesize a plan from --src to --dst on --mesh",
                        description="Synthesize a plan. Types use the canonical form "
                        "'[1024{x}, 4096{y,z}, 8]' (axes major to minor, as in PartitionSpec).")
    add_case_args(pl, mesh_default=EXAMPLE["mesh"], src_default=EXAMPLE["src"], dst_default=EXAMPLE["dst"])
    pl.add_argument("--dst-mesh", default=None,
                    help="target mesh, with device ids after '@' (e.g. b=4@4-7); default: --mesh. "
                         "Another mesh plans across meshes (synth.crossmesh)")
    pl.add_argument("--planner", default="auto", choices=_planners(),
                    help="auto (default: cheapest plan within the memory bound), normal (the paper's), "
                         "easy (gather everything), search (older Dijkstra)")
    pl.add_argument("--budget-moves", type=budget_moves_arg, default=None,
                    help="auto: work budget, in moves examined (default: 50000); it decides the plan, "
                         "whatever the machine's load")
    pl.add_argument("--budget-ms", type=budget_ms_arg, default=None,
                    help="auto: wall-clock safety cap in ms (default: 10000); the plan says when it fired")
    pl.add_argument("--move-set", type=move_set_arg, default=None,
                    help="auto: 'full' (default: the documented move set, sub-axes included) or "
                         "'whole-axes'")
    pl.add_argument("--free-device-order", action="store_true",
                    help="auto: the target may use any assignment of mesh positions to devices; "
                         "the plan reports the permutation")
    pl.add_argument("--json", action="store_true", help="print one JSON document")
    b = sub.add_parser("bench", help="time the synthesizer on seeded random cases (up to 6 axes, rank 4)")
    b.add_argument("--cases", type=int_arg(1, "cases"), default=2000, help="number of random cases (default: %(default)s)")
    b.add_argument("--seed", type=int_arg(0), default=0)
    b.add_argument("--planner", default="auto,normal",
                   help="comma-separated planners, timed side by side (default: %(default)s)")
    b.add_argument("--max-axes", type=int_arg(1, maximum=6), default=6, help="mesh axes, at most (default: 6)")
    b.add_argument("--max-rank", type=int_arg(1, maximum=8), default=4, help="array rank, at most (default: 4)")
    b.add_argument("--budget-moves", type=budget_moves_arg, default=None,
                   help="auto's work budget (default: 50000 moves)")
    b.add_argument("--budget-ms", type=budget_ms_arg, default=None,
                   help="auto's wall-clock safety cap (default: 10000)")
    b.add_argument("--runs", type=int_arg(1, maximum=10), default=1,
                   help="run the cases this many times and compare the plans (default: 1)")
    b.add_argument("--burn", type=int_arg(0, maximum=64), default=0,
                   help="CPU burner processes beside the last run (default: 0)")
    b.add_argument("--slowest", type=int_arg(0, maximum=1000), default=0,
                   help="list this many cases with the most auto CPU time (default: 0)")
    b.add_argument("--quality-at", type=budget_moves_arg, default=None, metavar="MOVES",
                   help="plan every case at this work budget and at the default (or --budget-moves) "
                        "and compare the final plans case by case (cheaper / equal / costlier)")
    b.add_argument("--json", action="store_true", help="print one JSON document")
    a = sub.add_parser("agreement", help="auto against an exhaustive search on small seeded cases")
    a.add_argument("--cases", type=int_arg(1, "cases"), default=1000, help="number of cases (default: %(default)s)")
    a.add_argument("--seed", type=int_arg(0), default=0)
    a.add_argument("--budget-moves", type=budget_moves_arg, default=None,
                   help="auto's work budget (default: 50000 moves)")
    a.add_argument("--budget-ms", type=budget_ms_arg, default=None,
                   help="auto's wall-clock safety cap (default: 10000)")
    a.add_argument("--json", action="store_true", help="print one JSON document")
    _add_peers_parser(sub)
    return p


def _add_peers_parser(sub):
    from synth.peers import SUITES

    pe = sub.add_parser("peers", help="our planner on the peers' own cases (Shardy, DTensor)",
                        description="Run the planner on every case of the peers' suites (Shardy's "
                        "reshard-to-collectives tests, DTensor's planner) and count where we dominate "
                        "or are dominated; every plan is checked element by element.")
    pe.add_argument("--suite", default=",".join(SUITES),
                    help="comma-separated suites (default: %(default)s)")
    pe.add_argument("--planner", default="auto", choices=_planners(), help="planner (default: auto)")
    pe.add_argument("--budget-moves", type=budget_moves_arg, default=None,
                    help="auto: the work budget in moves examined (default: the planner's)")
    pe.add_argument("--budget-ms", type=budget_ms_arg, default=None,
                    help="auto: the wall-clock safety cap in ms (default: the planner's)")
    pe.add_argument("--move-set", type=move_set_arg, default=None, help="auto: the move set (default: full)")
    pe.add_argument("--fuse", action="store_true",
                    help="fuse runs of one-dim steps of our plans into multi-dim steps first "
                         "(synth.collectives.fuse_runs), to see what the vocabulary alone buys")
    pe.add_argument("--json", action="store_true", help="print one JSON document (with every case)")


def _planners():
    from synth.planners import PLANNERS

    return sorted(PLANNERS)


def _other_mesh(src_mesh: str, dst_mesh: str) -> bool:
    """Whether ``--dst-mesh`` names another mesh than ``--mesh`` (axes or devices)."""
    from synth.mesh import Mesh

    return Mesh.parse(src_mesh) != Mesh.parse(dst_mesh)


def _progress(suite: str, done: int, total: int) -> None:
    print(f"\r  {suite}: {done}/{total} cases", end="", file=sys.stderr, flush=True)


def budget_ms_arg(text: str) -> float:
    """argparse ``type=`` for ``--budget-ms``: a positive, finite number."""
    from synth.planners.cost import check_budget

    try:
        return check_budget(text, "ms")
    except RedistributionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def budget_moves_arg(text: str) -> int:
    """argparse ``type=`` for ``--budget-moves``: a positive whole number."""
    from synth.planners.cost import check_budget_moves

    try:
        return check_budget_moves(text)
    except RedistributionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def move_set_arg(text: str) -> str:
    """argparse ``type=`` for ``--move-set``."""
    from synth.planners.auto import check_move_set

    try:
        return check_move_set(text)
    except RedistributionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _auto_kw(args) -> dict:
    kw = {}
    if getattr(args, "budget_ms", None) is not None:
        kw["budget_ms"] = args.budget_ms
    if getattr(args, "budget_moves", None) is not None:
        kw["budget_moves"] = args.budget_moves
    if getattr(args, "move_set", None) is not None:
        kw["move_set"] = args.move_set
    return kw


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.cmd == "plan":
            from synth.planners import synthesize

            kw = _auto_kw(args)
            itemsize = resolve_itemsize(args.dtype, args.itemsize)
            if args.dst_mesh is not None and _other_mesh(args.mesh, args.dst_mesh):
                from synth.crossmesh import plan_crossmesh

                if args.free_device_order or kw:
                    raise RedistributionError("plan: --free-device-order, --budget-ms, --budget-moves and --move-set apply to one mesh; "
                                              "drop them with --dst-mesh")
                xp = plan_crossmesh(args.mesh, args.src, args.dst_mesh, args.dst, itemsize=itemsize,
                                    planner=args.planner)
                print(json.dumps(xp.to_dict()) if args.json else str(xp))
                return 0
            mesh, src, dst = parse_case(args.mesh, args.src, args.dst, args.shape)
            plan = synthesize(mesh, src, dst, planner=args.planner, itemsize=itemsize,
                              free_device_order=args.free_device_order, **kw)
            print(json.dumps(plan.to_dict()) if args.json else str(plan))
        elif args.cmd == "bench":
            from synth.bench import run_bench
            from synth.planners import PLANNERS

            planners = tuple(p.strip() for p in args.planner.split(",") if p.strip())
            bad = [p for p in planners if p not in PLANNERS]
            if bad or not planners:
                raise RedistributionError(f"bench: unknown planner(s) {bad}; choose from {sorted(PLANNERS)}")
            if args.quality_at is not None:
                from synth.bench import format_budget_quality, run_budget_quality

                res = run_budget_quality(args.cases, args.seed, args.quality_at, args.budget_moves,
                                         args.max_axes, args.max_rank)
                print(json.dumps(res) if args.json else format_budget_quality(res))
                return 0
            res = run_bench(args.cases, args.seed, planners, args.max_axes, args.max_rank,
                            _auto_kw(args), runs=args.runs, burn=args.burn, slowest=args.slowest)
            if args.json:
                print(json.dumps(res))
            else:
                from synth.bench import format_bench

                print(format_bench(res))
        elif args.cmd == "agreement":
            from synth.bench import run_agreement

            res = run_agreement(args.cases, args.seed, _auto_kw(args))
            if args.json:
                print(json.dumps(res))
            else:
                print(f"synth agreement: auto vs references, {res['cases']} seeded cases (seed {res['seed']}; "
                      f"precondition true {res['precondition_true']}, false {res['precondition_false']}; "
                      f"uneven {res['uneven']}, pending sums {res['pending']}; rank <= 3)\n"
                      "  (even cases: the exhaustive least largest shard over whole axes; uneven and pending "
                      "cases on <= 16 devices: an exhaustive search over every type and step of the "
                      "collectives table, sub-axes included (synth.agreement); larger ones: the better of "
                      "normal's and easy's plans)\n"
                      f"  searched exhaustively (uneven/pending) {res['reference_searched']}, not "
                      f"{res['reference_skipped']}\n"
                      f"  optimal yet above the exhaustive optimum  {res['optimal_above_reference']}   (target 0)\n"
                      f"  exhaustive reference above a plan found   {res['reference_above_auto']}   (target 0)\n"
                      f"  bounded plan exists                {res['bounded_exists']}\n"
                      f"  bound misses                       {res['bound_misses']}   (target 0)\n"
                      f"  above least largest shard          {res['above_min_max_shard']}   (target 0)\n"
                      f"  below it thanks to sub-axes        {res['below_via_sub_axes']}\n"
                      f"  plans using sub-axes               {res['sub_axes_used']}\n"
                      f"  auto within the bound              {res['auto_within_bound']}\n"
                      f"  plans checked exactly              {res['checked_exactly']}\n"
                      f"  auto proven optimal                {res['auto_optimal']}\n"
                      f"  optimal yet costlier than normal   {res['optimal_costlier_than_normal']}   (target 0)")
                for ex in res["examples"]:
                    print(f"  counterexample: {ex}")
        elif args.cmd == "peers":
            from synth.peers import SUITES, format_report, run_peers

            suites = [x.strip() for x in args.suite.split(",") if x.strip()]
            bad = [x for x in suites if x not in SUITES]
            if bad or not suites:
                raise RedistributionError(f"peers: unknown suite(s) {bad}; choose from {list(SUITES)}")
            kw = {k: v for k, v in (("budget_ms", args.budget_ms), ("budget_moves", args.budget_moves),
                                    ("move_set", args.move_set)) if v is not None}
            res = run_peers(suites, args.planner, progress=_progress if sys.stderr.isatty() else None,
                            fuse=args.fuse, **kw)
            if sys.stderr.isatty():
                print(file=sys.stderr)
            print(json.dumps(res) if args.json else format_report(res))
        return 0
    except RedistributionError as e:
        return report_error(e, argv)
