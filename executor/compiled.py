"""``python -m executor.compiled``: every strategy of one reshard compiled by one machine's
compiler, as schedules (the app's Compare page runs this in a subprocess).

    python -m executor.compiled --machine tpu-v4:4x4x4 --mesh x=4,y=4,z=4 \\
        --src '[4096{x,y}, 1024{z}]' --dst '[4096{z}, 1024{x,y}]' --dtype bfloat16 \\
        [--plan-json PLAN.json] [--strategies ours,xla-shardy,xla-gspmd,shardy-r2c] [--placement P]

Prints one JSON document: ``{"machine", "compiler", "compiler_text", "collectives_only",
"strategies": {name: {"schedule": ..., "error": ...}}}``. The compiler is the machine's
own (:func:`executor.compare.compiled_schedule`); where it is not installed here, XLA's
schedules come from the CPU backend, ours is the plan's own schedule, and
``collectives_only`` says why. Compile-only: no array is made, so no memory for running
the program is needed. A user error prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys


def _parser():
    p = argparse.ArgumentParser(prog="python -m executor.compiled", description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", required=True, help="profile:size, e.g. tpu-v4:4x4x4, dgx-h100:1, cpu-host:8")
    p.add_argument("--mesh", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--plan-json", default=None, help="our plan (synth Plan JSON) to compile; default: auto")
    p.add_argument("--strategies", default="ours,xla-shardy,xla-gspmd,shardy-r2c")
    p.add_argument("--placement", default=None)
    return p


def run(args) -> dict:
    from executor import tpu
    from executor.compare import COMPILED_STRATEGIES, compiled_schedule, parse_case
    from executor.errors import ExecutorError
    from synth.plan import Plan

    mesh, src, dst = parse_case(args.mesh, args.src, args.dst)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    for s in strategies:
        if s not in COMPILED_STRATEGIES:
            raise ExecutorError(f"--strategies {s!r}: use some of {list(COMPILED_STRATEGIES)}")
    plan = None
    if args.plan_json:
        from synth.fileio import read_json

        plan = Plan.from_dict(read_json(args.plan_json, "--plan-json"))
    machine = args.machine.strip()
    import models

    try:  # the machine must be a profile the simulator knows, sized for the mesh
        m = models.load_profile(machine)
    except ValueError as e:
        raise ExecutorError(f"--machine {machine!r}: {e}") from None
    if m.num_devices != mesh.size:
        raise ExecutorError(f"--machine {machine!r} has {m.num_devices} devices but mesh {mesh} has {mesh.size}; "
                            "give a machine size with one device per mesh device")
    compiler = tpu.compiler_for_profile(machine)
    missing = tpu.compiler_missing(machine)
    if compiler == "xla-cpu" or missing:
        from executor._jaxsetup import ensure_devices

        ensure_devices(mesh.size)
    out = {"machine": machine, "compiler": compiler if not missing else "xla-cpu",
           "compiler_text": tpu.COMPILER_TEXT[compiler if not missing else "xla-cpu"],
           "collectives_only": (f"{machine}'s compiler is not installed here ({missing}); XLA's schedules are the "
                                "CPU backend's and ours is the plan's own schedule: compare collectives only"
                                if missing else None),
           "strategies": {}}
    for s in strategies:
        try:
            if missing and not s.startswith("xla-"):
                from executor.shardy import shardy_plan

                p = plan if s == "ours" else shardy_plan(mesh, src, dst, plan.itemsize if plan else 4)
                if p is None:  # auto for this machine: its cost, as the sweeps plan
                    from models.plan_cost import machine_cost
                    from synth.planners import synthesize

                    p = synthesize(mesh, src, dst, cost=machine_cost(machine, mesh, args.placement))
                sched = p.to_schedule()
                sched.meta.update({"compiler": "none", "plan_steps": [str(c) for c in p.steps]})
            else:
                target = f"cpu-host:{mesh.size}" if missing else machine
                sched = compiled_schedule(target, s, mesh, src, dst, plan=plan, dtype=args.dtype,
                                          placement=None if missing or compiler == "xla-cpu" else args.placement)
                if missing:
                    sched.meta["target"] = f"{machine} (CPU backend stands in)"
            out["strategies"][s] = {"schedule": sched.to_dict(), "error": None}
        except ValueError as e:  # a strategy that cannot lower this case says so; the others go on
            out["strategies"][s] = {"schedule": None, "error": str(e).splitlines()[0]}
    return out


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        res = run(args)
    except ValueError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    json.dump(res, sys.stdout, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
