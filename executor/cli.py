"""``python -m executor``: run plans and XLA's resharding on real JAX devices.

    python -m executor compare --mesh x=4,y=2 --src "P('y', None, 'x')" --shape 8,16,8 \\
        --dst "P(None, ('x','y'), None)" [--itemsize 4 | --dtype float32] [--devices 8] [--json]
    python -m executor codegen --mesh x=4,y=2 --src '[8{y}, 16, 8{x}]' --dst '[8, 16{x,y}, 8]'
    python -m executor xla-schedule --mesh ... --src ... --dst ... [--partitioner gspmd] --json
    python -m executor calibrate --devices 8 [--quick] --out models/profiles/calibrated/cpu-8.json
    python -m executor report --cases 30 [--json]

On CPU the device count (--devices, default 8) is set before JAX starts. User errors
print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from executor.distributed import add_arguments as add_process_args
from executor.distributed import dispatch
from synth.cli import UserErrorParser
from synth.errors import RedistributionError
from synth.limits import int_arg


def _case_args(p, dtype=True):
    p.add_argument("--mesh", required=True, help="mesh axes, e.g. x=4,y=2")
    p.add_argument("--src", required=True,
                   help="source type: '[8{y}, 16, 8{x}]' or \"P('y', None, 'x')\" (with --shape)")
    p.add_argument("--dst", required=True, help="target type, same forms as --src")
    p.add_argument("--shape", default=None, help="global shape for P(...) forms, e.g. 8,16,8")
    p.add_argument("--itemsize", type=int_arg(1, "itemsize"), default=None, help="bytes per element (default 4)")
    if dtype:
        p.add_argument("--dtype", default=None,
                       help="element type: float32 (default), bfloat16, float16, int8, int32, float64, ...")


def _device_args(p):
    p.add_argument("--devices", type=int_arg(1, "cpu_devices"), default=8,
                   help="CPU devices to create before JAX starts (default: %(default)s; on GPU/TPU the "
                        "devices present are used)")


def _target_args(p, what):
    p.add_argument("--target", default=None, metavar="PROFILE:SIZE",
                   help=f"{what}; PROFILE:SIZE is a profile of the simulator: tpu-v5p:16x16x16, "
                        "tpu-v4:4x4x4, tpu-v5e:16x16, tpu-v6e:8x8 (libtpu), or dgx-h100:N, h100-multinode:N, "
                        "dgx-a100:N (N nodes of 8 GPUs; needs jax-cuda12-plugin); the mesh must have one "
                        "device per chip")
    p.add_argument("--placement", default=None,
                   help="with --target: mesh device -> chip, as the simulator's --placement "
                        "(default row-major: device d on chip d)")


def build_parser() -> argparse.ArgumentParser:
    p = UserErrorParser(prog="python -m executor",
                description="Run redistribution plans and XLA's own resharding on JAX devices; read XLA's "
                            "plan from its HLO; calibrate the simulator.")
    sub = p.add_subparsers(dest="cmd", parser_class=UserErrorParser)
    sub.required = True

    c = sub.add_parser("compare", help="ours vs XLA (Shardy and GSPMD): correctness, time, memory",
                       description="Run our plan and XLA's jit(identity, out_shardings=dst) under both "
                                   "partitioners on the same input; check each output element by element "
                                   "and measure it (warm-up, repeats, median/p10/p90, compiled temp bytes).")
    _case_args(c)
    _device_args(c)
    add_process_args(c)
    _target_args(c, "compile ours and XLA's (both partitioners) for this TPU slice or GPU machine, no accelerator "
                    "needed, and compare compiled temp memory and collectives (compile-only: no times)")
    c.add_argument("--dst-mesh", default=None,
                   help="target mesh with device ids (e.g. b=4@4-7; default: --mesh): run our cross-mesh plan "
                        "against jax.device_put (executor.crossmesh)")
    c.add_argument("--planner", default="auto", help="our planner: auto (default), normal, easy, search")
    c.add_argument("--repeats", type=int_arg(10, "repeats"), default=10, help="timed runs (default: %(default)s; at least 10)")
    c.add_argument("--warmup", type=int_arg(0, "repeats"), default=3, help="untimed runs first (default: %(default)s)")
    c.add_argument("--json", action="store_true", help="print one JSON document")

    g = sub.add_parser("codegen", help="print the plan as standalone JAX source",
                       description="Synthesize a plan and print it as a runnable JAX module "
                                   "(jax.shard_map with lax collectives). Does not start JAX.")
    _case_args(g)
    g.add_argument("--planner", default="auto", help="auto (default), normal, easy, search")
    g.add_argument("--out", default=None, help="write the source to this file instead of stdout")
    g.add_argument("--json", action="store_true", help="print {source, plan} as one JSON document")

    x = sub.add_parser("xla-schedule", help="XLA's resharding as a simulator schedule (from its HLO)",
                       description="Compile jax.jit(identity, out_shardings=dst) and read the compiled HLO "
                                   "into the simulator's schedule format (python -m simulator run "
                                   "--schedule FILE replays it).")
    _case_args(x)
    _device_args(x)
    x.add_argument("--partitioner", default="shardy", choices=["shardy", "gspmd"])
    _target_args(x, "compile for this TPU slice or GPU machine with its own XLA compiler (no accelerator needed) instead of "
                    "the local CPU backend; adds temp bytes")
    x.add_argument("--out", default=None, help="also write the schedule JSON to this file")
    x.add_argument("--hlo", action="store_true", help="print the compiled HLO text as well")
    x.add_argument("--check", action="store_true",
                   help="also run XLA's program on the local devices and check its output element by element "
                        "(makes the array; without it nothing runs and no array is made)")
    x.add_argument("--json", action="store_true", help="print the schedule as one JSON document")

    k = sub.add_parser("calibrate", help="fit a hardware profile to this backend and check it",
                       description="Microbenchmark every collective kind x group size x message size, fit "
                                   "the profile by least squares, write it (--out, JSON) and a report "
                                   "next to it (*.report.json) with the held-out MAPE of whole plans.")
    _device_args(k)
    add_process_args(k)
    k.add_argument("--quick", action="store_true", help="small grid (well under 3 minutes)")
    k.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    k.add_argument("--out", required=True, help="profile path, e.g. models/profiles/calibrated/cpu-8.json")
    k.add_argument("--seed", type=int_arg(0), default=0, help="seed of the training/held-out cases")
    k.add_argument("--json", action="store_true", help="print the report summary as one JSON document")

    r = sub.add_parser("report", help="ours vs XLA on seeded random cases: memory and time ratios",
                       description="Run compare on --cases seeded random redistributions on 8 devices and "
                                   "summarize temp memory (ours vs XLA) and time ratios (geomean, max) "
                                   "against both partitioners, plus the calibration MAPE if a report exists.")
    _device_args(r)
    add_process_args(r)
    r.add_argument("--cases", type=int_arg(1, "cases"), default=30, help="number of cases (default: %(default)s)")
    r.add_argument("--seed", type=int_arg(0), default=0)
    r.add_argument("--scale", type=int_arg(1, maximum=1 << 20), default=64,
                   help="array size multiplier: dims are devices x {1..4} x SCALE (default: %(default)s)")
    r.add_argument("--repeats", type=int_arg(10, "repeats"), default=10,
                   help="timed runs per case (default: %(default)s; at least 10, as for compare)")
    r.add_argument("--calibration", default=None,
                   help=f"calibration report to quote (default: {DEFAULT_CALIBRATION} when it exists)")
    r.add_argument("--json", action="store_true", help="print one JSON document")
    _doctor_args(sub)
    return p


def _doctor_args(sub):
    d = sub.add_parser("doctor", help="find the collectives XLA inserted in a program, by source line, "
                                      "with the full rematerializations and the reshard that fixes them",
                       description="Compile FILE.py:FUNCTION (inputs from --mesh/--arg or the file's DOCTOR "
                                   "dict) or read an --xla_dump_to folder, and report every collective "
                                   "sequence with its source line, XLA's steps and bytes, our plan and "
                                   "both costs simulated on --hardware (see docs/reshard.md).")
    d.add_argument("program", nargs="?", default=None, help="FILE.py:FUNCTION")
    d.add_argument("--hlo-dir", default=None, help="a folder written by XLA_FLAGS=--xla_dump_to=DIR")
    d.add_argument("--mesh", default=None, help="mesh, e.g. x=4,y=2")
    d.add_argument("--arg", action="append", default=None,
                   help="an example input as a type, e.g. '[8{y}, 64{x}, 128]' or 'bfloat16:[8{y}, 64]' "
                        "(once per input)")
    d.add_argument("--dtype", default=None, help="dtype of inputs without one (default float32)")
    d.add_argument("--hardware", default=None, help="profile to simulate on (default cpu-host:N, or --target)")
    d.add_argument("--target", default=None, metavar="PROFILE:SIZE",
                   help="compile ahead of time for this TPU slice (libtpu), e.g. tpu-v5e:2x4, or GPU machine "
                        "(dgx-h100:1; needs jax-cuda12-plugin); the mesh must have one device per chip")
    _device_args(d)
    d.add_argument("--json", action="store_true", help="print one JSON document")


def _case(args):
    from synth.cliutil import parse_case  # both spellings, errors name the flag

    return parse_case(args.mesh, args.src, args.dst, args.shape)


def _compare(args):
    from executor._jaxsetup import ensure_devices
    from executor.compare import compare
    from executor.fmt import fmt_bytes, fmt_time, table

    if getattr(args, "dst_mesh", None) is not None:
        from synth import Mesh

        if Mesh.parse(args.dst_mesh) != Mesh.parse(args.mesh):
            from executor.crossmesh import compare_cli

            return compare_cli(args)
    if args.target is not None:
        return _compare_target(args)
    if args.placement is not None:
        raise RedistributionError("--placement applies with --target only (the local backend's devices "
                                  "are used in id order)")
    if args.repeats < 10:
        raise RedistributionError(f"--repeats {args.repeats}: the protocol needs at least 10 timed runs")
    mesh, src, dst = _case(args)
    devs = ensure_devices(args.devices)
    res = compare(mesh, src, dst, itemsize=args.itemsize, dtype=args.dtype, planner=args.planner,
                  warmup=args.warmup, repeats=args.repeats)
    if args.json:
        return res
    from executor.distributed import process_index, processes_note

    if process_index() != 0:  # in a multi-process run, process 0 prints
        return None
    print(f"mesh {mesh}: {src} -> {dst}  ({devs[0].platform}, {len(devs)} devices{processes_note()}, median of "
          f"{args.repeats} after {args.warmup} warm-up)")
    rows = []
    for k in ("ours", "xla_shardy", "xla_gspmd"):
        r = res[k]
        rows.append([k, "yes" if r["correct"] else "NO: " + r.get("error", ""), fmt_time(r.get("time_s")),
                     f"{fmt_time(r.get('time_p10_s'))} .. {fmt_time(r.get('time_p90_s'))}",
                     fmt_bytes(r["temp_bytes"]), fmt_bytes(r["temp_plus_output_bytes"]),
                     "YES" if r["full_remat"] else "no", " ".join(r["collectives"]) or "-"])
    print(table(rows, ["strategy", "correct", "time", "p10 .. p90", "temp", "temp+out", "full remat",
                       "collectives"]))
    print("our plan: " + (" ; ".join(res["ours"]["plan_steps"]) or "(no steps)"))
    return None


def _compare_target(args):
    from executor.fmt import fmt_bytes, table
    from executor.tpu import compare_on_target

    mesh, src, dst = _case(args)
    res = compare_on_target(args.target, mesh, src, dst, itemsize=args.itemsize, dtype=args.dtype,
                            planner=args.planner, placement=args.placement)
    if args.json:
        return res
    print(f"mesh {mesh}: {src} -> {dst}  compiled for {res['target']} by {res['compiler']} "
          f"({res['dtype']}, placement {res['placement']}); compile-only: nothing ran, no times")
    rows = []
    for k in ("ours", "xla_shardy", "xla_gspmd", "shardy_r2c"):
        r = res[k]
        if "error" in r:
            rows.append([k, "-", "-", "-", r["error"][:60], "-"])
            continue
        rows.append([k, fmt_bytes(r["temp_bytes"]), fmt_bytes(r["output_bytes"]),
                     "YES" if r["full_remat"] else "no", " ".join(r["collectives"]) or "-",
                     f"{r['compile_s']:.2f} s"])
    print(table(rows, ["strategy", "temp", "output", "full remat", "collectives", "compile"]))
    print("our plan: " + (" ; ".join(res["ours"]["plan_steps"]) or "(no steps)"))
    mf = res["ours"].get("memory_first")
    if mf and mf["note"]:
        print(mf["note"])
    return None


def _codegen(args):
    if args.out is not None:
        from synth.fileio import check_output_file

        check_output_file(args.out, "--out")
    from executor.codegen import generate_source
    from executor.run import resolve_dtype
    from synth.planners import synthesize

    mesh, src, dst = _case(args)
    dtype, itemsize = resolve_dtype(args.dtype, args.itemsize)
    plan = synthesize(mesh, src, dst, planner=args.planner, itemsize=itemsize)
    src_text = generate_source(plan, dtype=dtype)
    if args.out:
        from synth.fileio import atomic_write_text

        atomic_write_text(args.out, src_text, "--out")
    if args.json:
        return {"source": src_text, "plan": plan.to_dict(), "out": args.out}
    if not args.out:
        sys.stdout.write(src_text)
    else:
        print(f"wrote {args.out}")
    return None


def _check_compile_memory(src, args, what):
    """The host memory of the local compile, estimated before JAX starts (one line)."""
    from executor.run import compile_host_bytes
    from synth.cliutil import resolve_itemsize
    from synth.limits import check_memory

    nbytes = src.num_elems() * resolve_itemsize(args.dtype, args.itemsize)
    check_memory(compile_host_bytes(nbytes, args.devices or 64), f"{what} {src}: the CPU compile")


def _xla_schedule(args):
    from executor._jaxsetup import ensure_devices
    from executor.fmt import fmt_bytes, table
    from executor.run import xla_reshard

    if args.out is not None:
        from synth.fileio import check_output_file

        check_output_file(args.out, "--out")
    mesh, src, dst = _case(args)
    if args.target is not None:
        from executor.tpu import compile_xla

        r = compile_xla(args.target, mesh, src, dst, args.partitioner, dtype=args.dtype, itemsize=args.itemsize,
                        placement=args.placement)
        sched = r.schedule
        sched.meta.update({"partitioner": args.partitioner, "temp_bytes": r.temp_bytes,
                           "compile_only": True, "compile_s": round(r.compile_s, 3)})
        where = f" compiled for {r.target} ({r.compiler}, compile-only), temp {fmt_bytes(r.temp_bytes)}"
    elif not args.check:  # compile-only: no array, so nothing is refused for running's memory
        if args.placement is not None:
            raise RedistributionError("--placement applies with --target only")
        from executor.extract import xla_schedule
        from executor.run import resolve_dtype

        platform = ensure_devices(args.devices)[0].platform
        dtype, _ = resolve_dtype(args.dtype, args.itemsize)
        sched, hlo_text = xla_schedule(mesh, src, dst, args.partitioner, dtype=dtype, with_hlo=True)
        sched.meta.update({"partitioner": args.partitioner, "compiler": f"xla-{platform}", "correct": None})

        class r:  # noqa: N801 - what the printing below reads
            full_remat, hlo_text = bool(sched.meta.get("full_remat")), None

        r.hlo_text = hlo_text
        where = f" (local {platform} backend, compile-only, temp {fmt_bytes(sched.meta['temp_bytes'])})"
    else:
        if args.placement is not None:
            raise RedistributionError("--placement applies with --target only")
        _check_compile_memory(src, args, "xla-schedule")  # before JAX starts
        platform = ensure_devices(args.devices)[0].platform
        r = xla_reshard(mesh, src, dst, args.partitioner, dtype=args.dtype, itemsize=args.itemsize,
                        measure=False, strict=False)
        sched = r.schedule
        sched.meta.update({"src": str(src), "partitioner": args.partitioner, "correct": r.correct,
                           "compiler": f"xla-{platform}", "temp_bytes": r.memory.temp_bytes})
        where = f" (local {platform} backend, temp {fmt_bytes(r.memory.temp_bytes)})"
    d = sched.to_dict()
    if args.out:
        from synth.fileio import atomic_write_json

        atomic_write_json(args.out, d, "--out", indent=2)
    if args.json:
        if args.hlo:
            d = dict(d, hlo=r.hlo_text)
        return d
    print(f"XLA ({args.partitioner}) {src} -> {dst} on {mesh}{where}: {len(sched.ops)} ops, "
          f"full rematerialization: {'YES (' + sched.meta['full_remat_reason'] + ')' if r.full_remat else 'no'}")
    rows = [[i, op.kind, fmt_bytes(op.in_bytes), fmt_bytes(op.out_bytes), fmt_bytes(op.recv_bytes),
             (str([list(g) for g in op.groups[:4]]) + (" ..." if len(op.groups) > 4 else "")) if op.kind != "permute"
             else str([list(p) for p in op.pairs[:6]]) + (" ..." if len(op.pairs) > 6 else ""), op.label]
            for i, op in enumerate(sched.ops)]
    print(table(rows, ["#", "kind", "in", "out", "recv", "groups / pairs", "HLO"]))
    if args.hlo:
        print(r.hlo_text)
    if args.out:
        print(f"wrote {args.out}")
    return None


def _progress():
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    bars = {}

    def cb(stage, i, n, label):
        if tqdm is None:
            print(f"{stage} {i}/{n} {label}", file=sys.stderr)
            return
        if stage not in bars:
            bars[stage] = tqdm(total=n, desc=stage, file=sys.stderr, leave=True)
        b = bars[stage]
        b.set_postfix_str(label[:50])
        b.update(i - b.n)
        if i == n:
            b.close()

    return cb


def _calibrate(args):
    from executor.calibrate import calibrate
    from synth.fileio import check_output_file

    check_output_file(args.out, "--out", make_parents=True)  # before minutes of measuring, not after
    rep = calibrate(args.out, devices=args.devices, quick=args.quick, tiny=args.tiny, seed=args.seed,
                    progress=_progress())
    if rep is None:  # a process other than 0 of a multi-process run
        return None
    summary = {k: rep[k] for k in ("profile", "report_path", "mode", "backend", "devices", "mape",
                                   "median_ape", "mape_vs_p10", "mape_without_program_overhead",
                                   "retest_mape", "mape_vs_mean_of_two", "n_heldout", "n_train_plans", "mape_by_strategy",
                                   "worst", "wall_s", "processes", "link_classes", "n_heldout_crossing",
                                   "mape_crossing", "mape_within_process") if k in rep}
    summary["fit"] = {k: rep["fit"][k] for k in ("mape", "max_rel_err", "points")}
    if args.json:
        return summary
    print(f"wrote {rep['profile']} and {rep['report_path']} ({rep['mode']} grid, {rep['backend']}, "
          f"{rep['devices']} devices, {rep['wall_s']:.0f} s)")
    print(f"fit: {rep['fit']['points']} points, MAPE {100 * rep['fit']['mape']:.1f}%")
    print(f"held-out: {rep['n_heldout']} whole plans, MAPE {rep['mape']:.1f}% (median APE "
          f"{rep['median_ape']:.1f}%); re-measuring the same plans differs by {rep.get('retest_mape', float('nan')):.1f}% "
          f"(noise floor)")
    from executor.calibrate import link_class_lines

    for line in link_class_lines(rep):  # two-level (multi-process) machines only
        print(line)
    for k, v in rep["mape_by_strategy"].items():
        print(f"  {k:12s} MAPE {v:.1f}%")
    print("worst:")
    for w in rep["worst"]:
        print(f"  {w['strategy']:12s} {w['mesh']} {w['src']} -> {w['dst']}: measured "
              f"{w['measured_s'] * 1e6:.0f} us, predicted {w['predicted_s'] * 1e6:.0f} us ({w['abs_pct_err']:.0f}%)")
    return None


DEFAULT_CALIBRATION = "models/profiles/calibrated/cpu-8.report.json"


def _report(args):
    from executor._jaxsetup import ensure_devices
    from executor.report import report_cases
    from synth.fileio import read_json
    from synth.limits import check_memory

    calibration = args.calibration
    if calibration is None:
        import os

        calibration = DEFAULT_CALIBRATION if os.path.isfile(DEFAULT_CALIBRATION) else None
    if calibration is not None and not isinstance(read_json(calibration, "--calibration"), dict):
        raise RedistributionError(f"--calibration {calibration}: expected a JSON object (a calibration report)")
    # the largest case is (16 MiB x scale / 64); a few copies of it live at once
    check_memory((16 << 20) * args.scale // 64 * 8, f"report --scale {args.scale}")
    ensure_devices(args.devices)
    rep = report_cases(args.cases, seed=args.seed, scale=args.scale, repeats=args.repeats,
                       calibration=calibration, progress=_progress())
    if args.json:
        return rep
    from executor.distributed import process_index

    if process_index() != 0:  # in a multi-process run, process 0 prints
        return None
    from executor.report import print_report

    print_report(rep)
    return None


def _doctor(args):
    from executor import doctor
    from executor.errors import ExecutorError

    if (args.program is None) == (args.hlo_dir is None):
        raise ExecutorError("doctor: give FILE.py:FUNCTION or --hlo-dir DIR (one of them)")
    if args.hlo_dir is not None:
        reports = doctor.doctor_hlo_dir(args.hlo_dir, args.mesh, args.hardware)
    else:
        if args.target is None:
            from executor._jaxsetup import ensure_devices

            ensure_devices(args.devices)
        reports = [doctor.doctor_program(args.program, args.mesh, args.arg, args.dtype, args.hardware, args.target)]
    if args.json:
        return {"reports": [r.to_dict() for r in reports]}
    print("\n\n".join(r.text() for r in reports))
    return None


_COMMANDS = {"compare": _compare, "codegen": _codegen, "xla-schedule": _xla_schedule,
             "calibrate": _calibrate, "report": _report, "doctor": _doctor}


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        out = dispatch(args, sys.argv[1:] if argv is None else argv, _COMMANDS[args.cmd])
    except RedistributionError as e:
        from synth.cliutil import report_error

        return report_error(e, argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    try:
        if out is not None:
            json.dump(out, sys.stdout, indent=2, default=_json_default)
            sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _json_default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
