"""Subprocess worker for the Compare page: XLA's own resharding and local measurements.

The Streamlit process cannot choose JAX's CPU device count after JAX has started (and
should not pay for a JAX compile on every rerun), so the page runs this module in a
fresh interpreter, which sets the device count first. It only calls the executor's
public functions and prints one JSON document on stdout::

    python -m ui.xla_worker schedules --mesh data=16,model=4 --src '[8192{data}, 32768{model}]' \\
        --dst '[8192{model}, 32768{data}]' --dtype bfloat16
    python -m ui.xla_worker measure ... --planner normal --repeats 5

Exit status 2 with the message on stderr for user errors (no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ui.xla_worker", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["schedules", "measure"],
                   help="schedules: XLA's compiled resharding under Shardy and GSPMD, as schedules; "
                        "measure: run ours and both XLA partitioners on this backend and time them")
    p.add_argument("--mesh", required=True)
    p.add_argument("--src", required=True, help="canonical source type")
    p.add_argument("--dst", required=True, help="canonical target type")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--planner", default="normal")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", action="store_true", help="accepted for symmetry; output is always JSON")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from synth import Mesh, parse_type
    from synth.errors import RedistributionError

    try:
        mesh = Mesh.parse(args.mesh)
        src = parse_type(args.src).check(mesh, "source")
        dst = parse_type(args.dst, src.shape).check(mesh, "target")
        import executor

        executor.ensure_devices(mesh.size)
        if args.what == "schedules":
            out = {}
            for part in ("shardy", "gspmd"):
                r = executor.xla_reshard(mesh, src, dst, part, dtype=args.dtype, measure=False)
                out[part] = {"schedule": r.schedule.to_dict(), "full_remat": bool(r.full_remat),
                             "correct": bool(r.correct), "error": r.error,
                             "collectives": r.collectives}
        else:
            out = executor.compare(mesh, src, dst, dtype=args.dtype, planner=args.planner,
                                   warmup=args.warmup, repeats=args.repeats)
            out = {k: v for k, v in out.items() if not k.startswith("_")}
    except RedistributionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    json.dump(out, sys.stdout, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
