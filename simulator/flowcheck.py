"""``python -m simulator.flowcheck``: the fast flow replay against the plain one.

Simulates each case twice, once with :func:`models.flow.maxmin_replay` (component-wise
refills, what ``simulate`` uses) and once with :func:`models.flow.maxmin_replay_reference`
(one filling of the whole phase per event), and prints, per case, both wall times and the
largest relative difference in simulated time, per-op durations, per-link loads and every
trace row's end, and whether the event counts are equal. Exit 1 if any difference exceeds
1e-9 relative or an event count differs. The reference is slow (about 20 s on the app's
4096-chip case on a quiet machine): this is a check to run by hand, not a test.

Cases: the app's default scenario on a 4096-chip TPU v4 (``ui.bench``'s: mesh
``data=512,model=8``, bf16 ``[8192, 32768]``, ``[8192{data}, 32768{model}]`` ->
``P('model', 'data')``, ``auto`` costed on the machine with the app's 16-move budget) and
``python -m simulator bench``'s reshards at 256, 1024 and 4096 chips.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

TOL = 1e-9


def _cases(sizes):
    from models import load_profile
    from models.plan_cost import machine_cost
    from simulator.bench import BENCH_CASE, BENCH_SHAPES
    from synth import Mesh, parse_type, synthesize

    m = load_profile("tpu-v4:16x16x16")
    mesh = Mesh.parse("data=512,model=8")
    shape = (8192, 32768)
    src = parse_type("[8192{data}, 32768{model}]", shape)
    dst = parse_type("P('model', 'data')", shape)
    plan = synthesize(mesh, src, dst, planner="auto", itemsize=2, cost=machine_cost(m, mesh), budget_moves=16)
    yield "app default, tpu-v4:16x16x16 data=512,model=8", plan, m
    for n in sizes:
        dims, mtext = BENCH_SHAPES[n]
        mesh = Mesh.parse(mtext)
        s, d, itemsize = BENCH_CASE
        plan = synthesize(mesh, parse_type(s), parse_type(d), planner="normal", itemsize=itemsize)
        yield f"bench {n} chips, tpu-v4:{dims}", plan, load_profile(f"tpu-v4:{dims}")


def _rel(x, y) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        return float("inf")
    if not x.size:
        return 0.0
    return float(np.max(np.abs(x - y) / np.maximum(np.abs(y), 1e-300)))


def compare(plan, machine) -> dict:
    import models.flow as flow
    import simulator.engine as engine

    out = {}
    runs = {}
    for name, fn in (("fast", flow.maxmin_replay), ("reference", flow.maxmin_replay_reference)):
        saved = engine.maxmin_replay
        engine.maxmin_replay = fn
        try:
            t0 = time.perf_counter()
            res = engine.simulate_plan(plan, machine)
            out[f"{name}_wall_s"] = time.perf_counter() - t0
        finally:
            engine.maxmin_replay = saved
        runs[name] = res
    a, b = runs["fast"], runs["reference"]
    ra, rb = list(a.trace_rows()), list(b.trace_rows())
    out.update(
        time_rel=_rel(a.time_s, b.time_s),
        op_duration_rel=_rel([o["duration_s"] for o in a.ops], [o["duration_s"] for o in b.ops]),
        link_bytes_rel=_rel(a.link_bytes_array, b.link_bytes_array),
        link_busy_rel=_rel(a.link_busy_array, b.link_busy_array),
        trace_end_rel=_rel([r["end_s"] for r in ra], [r["end_s"] for r in rb]),
        lower_bound_equal=a.lower_bound_s == b.lower_bound_s,
        events=(a.events, b.events),
    )
    out["ok"] = (max(out["time_rel"], out["op_duration_rel"], out["link_bytes_rel"], out["link_busy_rel"],
                     out["trace_end_rel"]) <= TOL and a.events == b.events and out["lower_bound_equal"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulator.flowcheck", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="256,1024,4096", help="bench chip counts (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        sizes = None
    from simulator.bench import BENCH_SHAPES

    if sizes is None or any(n not in BENCH_SHAPES for n in sizes):
        print(f"flowcheck: --sizes {args.sizes!r} must be a comma-separated list of chip counts among "
              f"{sorted(BENCH_SHAPES)}; e.g. --sizes 256,1024", file=sys.stderr)
        return 2
    bad = 0
    for label, plan, m in _cases(sizes):
        r = compare(plan, m)
        bad += not r["ok"]
        print(f"{label}: fast {r['fast_wall_s']:.2f} s, reference {r['reference_wall_s']:.2f} s; max rel diff "
              f"time {r['time_rel']:.1e}, ops {r['op_duration_rel']:.1e}, link bytes {r['link_bytes_rel']:.1e}, "
              f"trace ends {r['trace_end_rel']:.1e}; events {r['events'][0]} vs {r['events'][1]}; "
              f"{'OK' if r['ok'] else 'DIFFERENT'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
