"""``python -m executor.compiled``: every strategy of one reshard compiled by one machine's
compiler, as schedules (the app's Compare page runs this in a subprocess).

    python -m executor.compiled --machine tpu-v4:4x4x4 --mesh x=4,y=4,z=4 \\
        --src '[4096{x,y}, 1024{z}]' --dst '[4096{z}, 1024{x,y}]' --dtype bfloat16 \\
        [--plan-json PLAN.json] [--strategies ours,xla-shardy,xla-gspmd,shardy-r2c] [--placement P]

Prints one JSON document: ``{"machine", "compiler", "compiler_text", "collectives_only",
"strategies": {name: {"schedule": ..., "error": ...}}, "memory_first"}``. Where ours is
``auto``'s plan (no ``--plan-json``, or one whose planner is ``auto``) and the machine's
compiler is installed, the memory-first rule applies (:mod:`executor.memfirst`): if its
compiled temp bytes are above XLA's, ``ours`` is the chosen plan's schedule and
``memory_first`` (also in that schedule's meta) says which plan and why. The compiler is the machine's
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
    out["memory_first"] = None
    ours = out["strategies"].get("ours") or {}
    if not missing and ours.get("schedule") is not None and (plan is None or plan.planner == "auto"):
        out["memory_first"] = _memory_first(machine, mesh, src, dst, plan, args, out)
    return out


def _memory_first(machine, mesh, src, dst, plan, args, out) -> dict:
    """The memory-first rule (:mod:`executor.memfirst`) on ``ours``: XLA's temp bytes from
    this call's XLA strategies (compiled here when not asked for); where auto's are above
    them, ``ours`` becomes the chosen plan's schedule and its meta says why."""
    from executor import memfirst
    from executor.compare import compiled_schedule
    from executor.run import resolve_dtype
    from models.plan_cost import machine_cost
    from synth.planners import synthesize

    dtype, itemsize = resolve_dtype(args.dtype, None)
    place = args.placement
    cost = machine_cost(machine, mesh, place)
    if plan is None:  # auto for this machine, as compiled_schedule plans it
        plan = synthesize(mesh, src, dst, itemsize=itemsize, cost=cost)
    temps = []
    for s in ("xla-shardy", "xla-gspmd"):
        got = out["strategies"].get(s)
        try:
            sched = got["schedule"] if got else compiled_schedule(machine, s, mesh, src, dst, dtype=dtype,
                                                                  placement=place)
        except ValueError:
            sched = None
        meta = sched["meta"] if isinstance(sched, dict) else getattr(sched, "meta", None)
        temps.append(meta.get("temp_bytes") if meta else None)
    ours = out["strategies"]["ours"]["schedule"]

    def compile_temp(p):
        try:
            sc = compiled_schedule(machine, "ours", mesh, src, dst, plan=p, dtype=dtype, placement=place)
        except ValueError:
            return None, None
        return sc.meta.get("temp_bytes"), sc

    ch = memfirst.choose(plan, ours["meta"].get("temp_bytes"), None, memfirst.xla_temp(*temps), compile_temp, cost)
    if ch.changed:
        sched = ch.result
        sched.meta["memory_first"] = ch.to_dict()
        out["strategies"]["ours"] = {"schedule": sched.to_dict(), "error": None}
    return ch.to_dict()


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
