"""``python -m synth``: plan a redistribution, or benchmark the synthesizer.

    python -m synth plan --mesh x=2,y=4 --src '[1024{y}, 512, 256{x}]' --dst '[1024, 512{x,y}, 256]'
    python -m synth plan ... --json
    python -m synth bench [--cases 2000] [--seed 0] [--json]

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


class UserErrorParser(argparse.ArgumentParser):
    """argparse whose usage errors raise :class:`RedistributionError`, so every CLI of
    the project reports them like any other user error: one line, status 2."""

    def error(self, message):
        raise RedistributionError(f"{self.prog}: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    p = UserErrorParser(prog="python -m synth", description="Synthesize memory-efficient redistributions.")
    sub = p.add_subparsers(dest="cmd", parser_class=UserErrorParser)
    sub.required = True
    pl = sub.add_parser("plan", help="synthesize a plan from --src to --dst on --mesh",
                        description="Synthesize a plan. Types use the canonical form "
                        "'[1024{x}, 4096{y,z}, 8]' (axes major to minor, as in PartitionSpec).")
    pl.add_argument("--mesh", default=EXAMPLE["mesh"], help="mesh axes, e.g. x=2,y=4 (default: %(default)s)")
    pl.add_argument("--src", default=EXAMPLE["src"], help="source type (default: %(default)s)")
    pl.add_argument("--dst", default=EXAMPLE["dst"], help="target type (default: %(default)s)")
    pl.add_argument("--itemsize", type=int_arg(1, "itemsize"), default=4, help="bytes per element (default: 4)")
    pl.add_argument("--planner", default="normal", choices=["easy", "normal", "search"])
    pl.add_argument("--json", action="store_true", help="print one JSON document")
    b = sub.add_parser("bench", help="time the synthesizer on seeded random cases")
    b.add_argument("--cases", type=int_arg(1, "cases"), default=2000, help="number of random cases (default: %(default)s)")
    b.add_argument("--seed", type=int_arg(0), default=0)
    b.add_argument("--planner", default="normal", choices=["easy", "normal", "search"])
    b.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.cmd == "plan":
            from synth.planners import synthesize

            plan = synthesize(args.mesh, args.src, args.dst, planner=args.planner, itemsize=args.itemsize)
            print(json.dumps(plan.to_dict()) if args.json else str(plan))
        elif args.cmd == "bench":
            from synth.bench import run_bench

            if args.cases < 1:
                raise RedistributionError("bench: --cases must be >= 1")
            res = run_bench(args.cases, args.seed, args.planner)
            if args.json:
                print(json.dumps(res))
            else:
                print(
                    f"synth bench: {res['cases']} seeded random cases (seed {res['seed']}, rank <= 4, "
                    f"<= 4 mesh axes), planner {res['planner']}\n"
                    f"  median {res['median_ms']:.3f} ms   p90 {res['p90_ms']:.3f} ms   "
                    f"max {res['max_ms']:.3f} ms   (target: median <= 1 ms)"
                )
        return 0
    except RedistributionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
