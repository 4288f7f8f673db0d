"""``python -m experiments``: run sweep configs and report on their results.

    python -m experiments run experiments/configs/smoke.yaml --out results/smoke
    python -m experiments run CONFIG --out DIR --engine ray [--address HEAD:6379]   # on Ray
    python -m experiments report results/smoke            # writes results/smoke/report.html
    python -m experiments report results/smoke --markdown # the summary as a markdown table
    python -m experiments suites [--suite transformer]    # list the suites' cases
    python -m experiments weight-sync experiments/configs/weight-sync/perplexity-kimi-k2.yaml [--json]

Every command has ``--json`` (one JSON document on stdout). User errors print one
line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from synth.cli import UserErrorParser
from synth.errors import RedistributionError
from synth.limits import int_arg


def build_parser() -> argparse.ArgumentParser:
    p = UserErrorParser(prog="python -m experiments",
                description="Suites of redistributions, resumable batch sweeps, and reports that "
                "compare our plans with XLA's resharding and the lower bound.")
    sub = p.add_subparsers(dest="cmd", parser_class=UserErrorParser)
    sub.required = True
    r = sub.add_parser("run", help="run a sweep config into a results folder (resumes if it has rows)",
                       description="Run every case x machine x planner x what-if knob of CONFIG in "
                       "parallel worker processes (--engine local) or as Ray tasks (--engine ray). Rows "
                       "are appended to OUT/rows.jsonl as each case finishes; rerunning skips rows already "
                       "there. One run at a time may write to OUT. Writes OUT/results.csv and "
                       "OUT/results.parquet.")
    r.add_argument("config", help="YAML config, e.g. experiments/configs/smoke.yaml")
    r.add_argument("--out", required=True, help="results folder (created if missing)")
    r.add_argument("--workers", type=int_arg(1, maximum=1024), default=None,
                   help="worker processes (default: config, else CPUs); with --engine ray and no --address, "
                        "the CPUs of the local Ray (default 2)")
    r.add_argument("--engine", default="local", choices=["local", "ray"],
                   help="local: a process pool on this machine (default); ray: one Ray task per work unit")
    r.add_argument("--address", default=None,
                   help="with --engine ray: the Ray cluster to join (e.g. 10.0.0.5:6379 or ray://host:10001; "
                        "start one with 'ray start --head'); default: a local Ray started for this run")
    r.add_argument("--retry-errors", action="store_true", help="rerun rows recorded as error or timeout")
    r.add_argument("--limit", type=int_arg(1), default=None,
                   help="run at most this many work units, at least 1 (for trials)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--json", action="store_true", help="print the run summary as one JSON document")
    rp = sub.add_parser("report", help="HTML report and summary table of a results folder",
                        description="Write DIR/report.html (self-contained, plotly) and print the "
                        "summary: speedup of the normal planner over each XLA partitioner, share of "
                        "cases where XLA exceeded max(src, dst) shard, time over the lower bound.")
    rp.add_argument("dir", help="results folder written by 'run'")
    rp.add_argument("--html", default=None, help="where to write the HTML (default: DIR/report.html)")
    rp.add_argument("--planner", default="auto", help="our planner to compare (default: auto)")
    rp.add_argument("--markdown", action="store_true", help="print the summary as a markdown table")
    rp.add_argument("--json", action="store_true", help="print the summary as one JSON document")
    tm = sub.add_parser("tpu-memory", help="our temp bytes vs XLA's, all compiled by XLA's TPU compiler",
                        description="Compile our plan and XLA's reshard (Shardy and GSPMD) for a TPU slice "
                        "of each profile sized for each case (libtpu, ahead of time, no TPU needed) and "
                        "compare the compiled temp bytes (compiled.memory_analysis()); counts the cases "
                        "where ours is <= XLA's and where XLA rematerialized the whole array.")
    tm.add_argument("--suites", default="transformer,xla-issues", help="comma-separated (default: %(default)s)")
    tm.add_argument("--profiles", default="tpu-v5p,tpu-v4", help="comma-separated (default: %(default)s)")
    from synth.planners import PLANNERS

    tm.add_argument("--planner", default="auto", choices=sorted(PLANNERS), help="our planner (default: %(default)s)")
    tm.add_argument("--json", action="store_true", help="print one JSON document")
    ws = sub.add_parser("weight-sync", help="plan and simulate a whole-model weight sync across meshes",
                        description="Every parameter of a model from the training mesh to the inference mesh, "
                        "in buckets under a staging cap, simulated with the baselines (docs/crossmesh.md).")
    ws.add_argument("config", help="YAML, e.g. experiments/configs/weight-sync/perplexity-kimi-k2.yaml")
    ws.add_argument("--json", action="store_true", help="print one JSON document")
    s = sub.add_parser("suites", help="list suites and their cases")
    s.add_argument("--suite", default=None, help="only this suite")
    s.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    import signal

    try:
        signal.signal(signal.SIGTERM, _sigterm)  # a polite kill stops the workers too
    except ValueError:  # not in the main thread
        pass
    try:
        args = build_parser().parse_args(argv)
        if args.cmd == "run":
            return _run(args)
        if args.cmd == "report":
            return _report(args)
        if args.cmd == "suites":
            return _suites(args)
        if args.cmd == "weight-sync":
            from experiments.weightsync import run as run_weight_sync

            return run_weight_sync(args.config, args.json)
        if args.cmd == "tpu-memory":
            from experiments.backends import print_tpu_memory

            return print_tpu_memory(args)
        return 2
    except RedistributionError as e:
        from synth.cliutil import report_error

        return report_error(e, argv)
    except BrokenPipeError:  # e.g. piped into `head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


def _run(args) -> int:
    from experiments.config import load_config
    from experiments.runner import run

    if args.workers is not None and args.workers < 1:
        raise RedistributionError("run: --workers must be at least 1")
    from synth.fileio import check_output_dir

    check_output_dir(args.out, "--out")  # before the sweep, not after it
    cfg = load_config(args.config)
    s = run(cfg, args.out, workers=args.workers, progress=not args.no_progress,
            retry_errors=args.retry_errors, limit=args.limit, engine=args.engine, address=args.address)
    if args.json:
        print(json.dumps(s.to_dict()))
    else:
        print(f"{cfg.name}: {s.units_total} work units ({s.units_skipped} already done, {s.units_run} run) "
              f"in {s.wall_s:.1f} s ({s.engine} engine)")
        print(f"  rows this run: {s.rows_written} (ok {s.rows_ok}, error {s.rows_error}, "
              f"timeout {s.rows_timeout}); rows in folder: {s.rows_total}")
        print(f"  {s.tables['csv']}\n  {s.tables['parquet']}")
        print(f"  next: python -m experiments report {args.out}")
    return 0


def _report(args) -> int:
    from experiments.report import build_report

    rep = build_report(args.dir, html_path=args.html, planner=args.planner)
    if args.json:
        print(json.dumps(rep.to_dict(), default=str))
    elif args.markdown:
        print(rep.markdown())
    else:
        print(rep.text())
        print(f"\nHTML report: {rep.html_path}")
    return 0


def _suites(args) -> int:
    from experiments.suites import SUITES, load_suite

    names = [args.suite] if args.suite else list(SUITES)
    out = {n: [c.to_dict() for c in load_suite(n)] for n in names}
    if args.json:
        print(json.dumps(out))
        return 0
    for n, cases in out.items():
        print(f"{n} ({len(cases)} cases)")
        for c in cases:
            print(f"  {c['name']:38s} {c['mesh']:26s} {c['src']} -> {c['dst']}  {c['dtype']}")
            if c["layout"] and c["layout"] != "random":
                print(f"  {'':38s} {c['layout']}")
            if c["ref"]:
                print(f"  {'':38s} ref: {c['ref']}")
    return 0
