"""The app's heavy work, as plain functions of plain arguments.

Each runs either inline (small cases) or in a worker process (:mod:`ui.jobs`), takes
a ``progress(done, total, text)`` keyword, and returns a picklable *view*: the numbers,
tables and figures a page shows, never the simulator's whole result (which holds the
topology graph and every transfer).
"""

from __future__ import annotations

import json
import time


def schedule_units(schedule_dict: dict) -> float:
    """A size measure of a simulation's work: the devices taking part in each
    communicating op, summed over the ops. With the measured rate of earlier runs
    (``ui.jobs.estimate_s``) it gives the estimate shown before a job starts."""
    units = 0.0
    for op in schedule_dict.get("ops", []):
        if op.get("kind") == "permute":
            units += 2 * len(op.get("pairs", ()))
        elif op.get("groups") and op.get("kind") not in ("dyn_slice", "copy"):
            units += sum(len(g) for g in op["groups"] if len(g) > 1)
    return units


def load_machine(profile: str, size: str, bandwidth_scale: float = 1.0, latency_scale: float = 1.0):
    import models

    size = size.strip()
    m = models.load_profile(f"{profile}:{size}" if size else profile)
    if bandwidth_scale != 1.0 or latency_scale != 1.0:
        m = m.with_scale(bandwidth_scale=bandwidth_scale, latency_scale=latency_scale)
    return m


def _simulate(schedule_json: str, mesh_text: str, profile: str, size: str, placement: str,
              bandwidth_scale: float, latency_scale: float, progress=None, text: str = ""):
    import simulator
    import synth

    m = load_machine(profile, size, bandwidth_scale, latency_scale)
    sched = synth.Schedule.from_dict(json.loads(schedule_json))
    cb = None
    if progress is not None:
        def cb(done, total):
            progress(done, total, f"{text}op {done} of {total} simulated")
    return simulator.simulate(sched, m, mesh=mesh_text, placement=placement.strip() or None, progress=cb)


def _summary(res) -> dict:
    m = res.machine
    return {
        "time_s": float(res.time_s), "lower_bound_s": float(res.lower_bound_s),
        "lower_bound_kind": str(res.lower_bound_kind), "ratio_to_bound": res.ratio_to_bound,
        "lower_bound_terms": {str(k): float(v) for k, v in (getattr(res, "lower_bound_terms", None) or {}).items()},
        "analytic_s": float(res.analytic_s), "peak_bytes_max_device": int(res.peak_bytes_max_device),
        "link_bytes_max": float(res.link_bytes_max), "link_bytes_total": float(res.link_bytes_array.sum()),
        "hbm_capacity_bytes": int(m.hbm_capacity_bytes), "machine_spec": m.spec, "machine_name": m.name,
        "placement_text": res.placement.text, "warnings": list(res.warnings),
        "num_devices": int(res.num_devices), "wall_s": float(res.wall_s),
        "link_bandwidth_Bps": float(m.link_bandwidth_Bps),
    }


def _ops_rows(res) -> list[dict]:
    from simulator.chrome_trace import op_bandwidths

    rows = []
    for o, bw in zip(res.ops, op_bandwidths(res)):
        r = {k: o.get(k) for k in ("index", "kind", "label", "algorithm", "start_s", "end_s", "duration_s",
                                   "analytic_s", "send_bytes", "recv_bytes", "in_bytes", "out_bytes")}
        for k in ("protocol", "channels", "rings"):
            if k in o:
                r[k] = o[k]
        r.update({k: bw[k] for k in ("nccl_bytes", "group_size", "algbw_Bps", "busbw_Bps", "link_peak_Bps",
                                     "bus_peak_Bps")})
        rows.append(r)
    return rows


def simulate_view(schedule_json: str, mesh_text: str, profile: str, size: str, placement: str = "",
                  bandwidth_scale: float = 1.0, latency_scale: float = 1.0, *, progress=None) -> dict:
    """Everything the Simulate page shows: summary, op table (with nccl-tests bandwidths)
    and figures (timeline: a Vega-Lite spec, ``ui.charts.timeline_spec``; memory and
    topology: plotly). Not the Chrome trace: :func:`chrome_trace_file` builds it when the
    download is clicked (half of this work at 64 devices, 2 s and 12 MB at 4096)."""
    from ui import charts, figures

    t0 = time.perf_counter()
    res = _simulate(schedule_json, mesh_text, profile, size, placement, bandwidth_scale, latency_scale,
                    progress)
    if progress is not None:
        progress(1, 1, "building the figures and the trace")
    view = {
        "summary": _summary(res),
        "ops": _ops_rows(res),
        # the timeline is Vega-Lite (the page's default tab: its first visit needs no plotly.js)
        "figures": {"timeline": charts.timeline_spec(charts.timeline_rows(res)), "memory": figures.memory_figure(res),
                    "topology": (figures.topology_figure(res)
                                 if res.machine.topology.num_chips <= figures.TOPOLOGY_MAX_CHIPS
                                 else figures.topology_summary_figure(res))},
        "hot_links": figures.hot_links(res),
        "units": schedule_units(json.loads(schedule_json)),
        "wall_s": time.perf_counter() - t0,
    }
    return view


def chrome_trace_file(schedule_json: str, mesh_text: str, profile: str, size: str, placement: str = "",
                      bandwidth_scale: float = 1.0, latency_scale: float = 1.0) -> str:
    """The Chrome Trace Event JSON of the simulation :func:`simulate_view` shows (the same
    arguments: the simulator is deterministic, so the same schedule on the same machine
    replays to the same transfers), built when the download is asked for."""
    from simulator.chrome_trace import chrome_trace_json

    return chrome_trace_json(_simulate(schedule_json, mesh_text, profile, size, placement, bandwidth_scale,
                                       latency_scale))


def compare_view(schedules: dict, mesh_text: str, profile: str, size: str, placement: str = "",
                 bandwidth_scale: float = 1.0, latency_scale: float = 1.0, *, progress=None) -> dict:
    """Every strategy's schedule (name -> schedule JSON) simulated the same way:
    name -> ``{"summary", "ops"}``. Identical schedules are simulated once."""
    t0 = time.perf_counter()
    out, seen = {}, {}
    units = 0.0
    n = len(schedules)
    for i, (name, sj) in enumerate(schedules.items()):
        if sj in seen:
            out[name] = seen[sj]
            continue
        units += schedule_units(json.loads(sj))  # distinct schedules only, as the estimate

        def cb(done, total, text="", i=i, name=name):
            if progress is not None:
                progress(i + done / max(total, 1), n, f"{name}: {text}")

        res = _simulate(sj, mesh_text, profile, size, placement, bandwidth_scale, latency_scale, cb)
        v = {"summary": _summary(res), "ops": _ops_rows(res)}
        out[name] = seen[sj] = v
    return {"strategies": out, "units": units, "wall_s": time.perf_counter() - t0}


def warm() -> float:
    """Run one tiny simulation (8 devices) through :func:`simulate_view` and
    :func:`compare_view`, so that this process has paid the first-call costs (lazy
    imports, plotly's validators, the models' tables) before a user waits on them.
    Returns the seconds it took. Called once per server (:func:`ui.compute.warm_up`) and
    in the fork server that starts job workers (:mod:`ui._warm_worker`)."""
    import synth

    t0 = time.perf_counter()
    plan = synth.synthesize("data=4,model=2", "[64{data}, 64{model}]", "[64{model}, 64{data}]",
                            planner="normal", itemsize=2)
    sj = json.dumps(plan.to_schedule().to_dict())
    simulate_view(sj, "data=4,model=2", "tpu-v4", "2x2x2")
    compare_view({"a": sj}, "data=4,model=2", "tpu-v4", "2x2x2")
    return time.perf_counter() - t0


def run_sweep(config_path: str, out_dir: str, *, progress=None) -> dict:
    """``python -m experiments run CONFIG --out OUT`` in a child process (its own session,
    so a Cancel stops it and its workers: SIGTERM to the group, SIGKILL 0.3 s later);
    progress is the rows written to ``OUT/rows.jsonl`` over the rows the config asks for.
    Returns ``{"out", "rows", "expected", "wall_s"}``; a failed run raises its last
    error line. The run resumes a folder that already has rows, as the CLI does."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from experiments.config import load_config
    from synth.errors import RedistributionError

    t0 = time.perf_counter()
    expected = sum(len(u.ids) for u in load_config(config_path).units())
    rows = Path(out_dir) / "rows.jsonl"

    def count() -> int:
        try:
            with open(rows, "rb") as f:
                return sum(1 for line in f if line.strip())
        except OSError:
            return 0

    def raise_limit():  # the child is bounded by the runner's own timeouts, not the job's RLIMIT_AS
        import resource

        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))

    root = Path(__file__).resolve().parents[1]
    child = subprocess.Popen([sys.executable, "-m", "experiments", "run", str(config_path), "--out", str(out_dir),
                              "--no-progress"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, preexec_fn=raise_limit)

    def stop(signum=None, frame=None):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                break
            try:
                child.wait(0.3)
                break
            except subprocess.TimeoutExpired:
                continue
        if signum is not None:
            raise SystemExit(1)

    old = signal.signal(signal.SIGTERM, stop)
    try:
        err = []
        import threading

        reader = threading.Thread(target=lambda: err.extend(child.stderr), daemon=True)
        reader.start()
        while child.poll() is None:
            if progress is not None:
                n = count()
                progress(min(n, expected), max(expected, 1), f"{n} of {expected} rows written")
            time.sleep(0.5)
        reader.join(1.0)
    finally:
        signal.signal(signal.SIGTERM, old)
        if child.poll() is None:
            stop()
    if child.returncode != 0:
        lines = [ln.strip() for ln in err if ln.strip()]
        raise RedistributionError(f"the sweep stopped: {lines[-1] if lines else f'exit status {child.returncode}'}")
    return {"out": str(out_dir), "rows": count(), "expected": expected, "wall_s": time.perf_counter() - t0}
