"""Background work: simulations (inline when the estimate is small, else a worker
process of :mod:`ui.jobs`) and the executor's subprocesses (XLA's schedules, local
measurements). Every size limit is checked here before work starts, with one line.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import sys
import threading
import time

import streamlit as st

import synth
from synth.errors import RedistributionError
from ui.errors import InputError
from ui.machines import machine
from ui.plans import make_plan, planners
from ui.scenario import Scenario

# -- simulation (inline when quick, else a worker process: ui.jobs) -----------------------
#: The largest machine the app simulates (documented in docs/app.md); bigger ones are
#: refused with one line (use ``python -m simulator run``).
MAX_SIM_DEVICES = 16384


def _schedule_key(schedule: synth.Schedule) -> str:
    """The schedule as JSON without the labels that do not change its simulation
    (its name and which planner made it), so two planners that produce the same
    device-level schedule (often ``normal`` and ``search``) share one simulation."""
    d = schedule.to_dict()
    d["name"] = ""
    d["meta"] = {k: v for k, v in d.get("meta", {}).items() if k not in ("planner", "strategy")}
    return json.dumps(d, sort_keys=True)


#: Keys of the work computed inline (``_inline``'s cache holds each result): asked for
#: again, the result is served from that cache whatever the estimate says by then.
_INLINE_KEYS: dict[str, None] = {}
_INLINE_MAX = 64


@st.cache_resource(show_spinner=False, max_entries=_INLINE_MAX)
def _inline(func: str, args: tuple, kind: str = ""):
    from ui import jobs

    mod, name = func.split(":")
    view = getattr(importlib.import_module(mod), name)(*args)
    if kind and isinstance(view, dict):  # computed now (not a cache hit): the rate learns from it
        jobs.note_rate(kind, view.get("units", 0), view.get("wall_s", 0))
    return view


#: Seconds the warm-up thread waits after the first page's script run before it starts
#: (``APP_WARM_UP_DELAY_S``, read when the thread starts), so it does not compete with the
#: browser drawing that page.
WARM_UP_DELAY_S = 2.5


def warm_up_delay_s() -> float:
    """``APP_WARM_UP_DELAY_S`` if set (seconds, 0 to 60), else :data:`WARM_UP_DELAY_S`."""
    try:
        v = float(os.environ.get("APP_WARM_UP_DELAY_S", WARM_UP_DELAY_S))
    except ValueError:
        return WARM_UP_DELAY_S
    return min(60.0, max(0.0, v)) if v == v else WARM_UP_DELAY_S  # v != v: NaN


#: Set when a page's first script run has ended (``app.py`` calls :func:`warm_up` then):
#: ``ui.serve``'s warm-up thread waits for it before the other pages' work.
FIRST_PAGE_DRAWN = threading.Event()
#: Set by ``ui.serve`` when its own thread runs :func:`warm_pages`; :func:`warm_up` then
#: starts nothing (one warm-up per server, never two doing the same work at once).
SERVE_OWNS_WARM_UP = threading.Event()
#: Set at interpreter exit: the warm-up stops between two steps (it never runs on while the
#: interpreter finalises, which aborted the process: "terminate called without an active exception").
_STOP = threading.Event()
_THREADS: list[threading.Thread] = []
_WARM_STARTED = threading.Event()
_WARM_LOCK = threading.Lock()
#: Seconds the exit waits for a warm-up step that is still running.
EXIT_JOIN_S = 30.0


def _join_at_exit() -> None:
    _STOP.set()
    for t in _THREADS:
        t.join(EXIT_JOIN_S)


atexit.register(_join_at_exit)


def join_warm_up(timeout_s: float = EXIT_JOIN_S) -> bool:
    """Wait for the warm-up threads of this process to end; whether they all did."""
    deadline = time.monotonic() + timeout_s
    for t in list(_THREADS):
        t.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in _THREADS)


def start_warm_thread(target, name: str) -> threading.Thread:
    """A daemon thread running ``target()`` that the interpreter's exit stops between steps
    (:data:`_STOP`) and waits for (:data:`EXIT_JOIN_S`), so no warm-up is cut in the middle
    of a native import at shutdown."""
    t = threading.Thread(target=target, name=name, daemon=True)
    _THREADS.append(t)
    t.start()
    return t


def prefill_compare(sc: Scenario) -> None:
    """Compute the Compare page's simulations of the scenario (its what-if knobs at their
    defaults: bandwidth and latency x1, the scenario's mesh, row-major) into the cache
    :func:`run_work` serves inline work from, outside any page."""
    from ui.machines import scenario_devices
    from ui.plans import plan_for

    base = plan_for(sc)
    mesh_text = str(base.mesh)
    plan = make_plan(mesh_text, "", str(base.src), str(base.dst), sc.planner, sc.itemsize, scenario_devices(sc),
                     sc.machine_profile, sc.machine_size)
    schedules = strategy_schedules(plan, sc, None)
    ok, refused = split_replayable(schedules, sc.machine_profile, sc.machine_size)
    if refused and ok:
        schedules = ok
    func, args, _units = _compare_work(schedules, mesh_text, sc)
    _inline(func, args, "compare")
    _INLINE_KEYS[json.dumps([func, args], sort_keys=True, default=str)] = None


def _warm_imports() -> None:
    # pandas before plotly: plotly reads ``sys.modules["pandas"]`` without importing it and
    # fails on a half-imported module ("partially initialized module 'pandas' ... circular
    # import"), so every module that uses plotly (ui.figures) imports pandas first: a script
    # thread reaching plotly while this thread is half-way through the import waits at that
    # ``import pandas`` for it to finish (Python's per-module import lock).
    import pandas  # noqa: F401
    import plotly.graph_objects as go
    import pyarrow  # noqa: F401

    go.Figure(go.Scatter(x=[0], y=[0])).to_json()  # plotly's validators (the Plan page's Layout tab)
    from ui import figures, texts  # noqa: F401


def _warm_cross_mesh() -> None:
    from ui import crossmesh as cx

    ex = cx.EXAMPLE
    cx.cross_view(ex["src_mesh"], ex["src"], ex["dst_mesh"], ex["dst"], ex["machine"], ex["itemsize"])
    names = cx.sync_configs()
    if "openrlhf-llama3-70b" in names:  # the page's default
        cx.sync_table("openrlhf-llama3-70b")


def _warm_sweeps() -> None:
    from ui import files
    from ui.machines import latency_floor_s

    df = files.sweep_rows(str(files.EXAMPLE_DIR))  # what a fresh clone's Sweeps page shows
    if "machine" in df and "latency_scale" in df:
        for m, ls in set(zip(df["machine"].astype(str), df["latency_scale"])):
            latency_floor_s(m, float(ls) if ls == ls else 1.0)


def _warm_calibration() -> None:
    from ui import files

    paths = files.calibrated_profiles(files.calibrated_dir())
    files.calibration_overview(paths)
    if paths:
        files.read_calibration(paths[0])


def warm_steps() -> list[tuple[str, object]]:
    """The steps of :func:`warm_pages`, in order: ``(name, function)``."""
    from ui import jobs, work
    from ui.plans import plan_for
    from ui.scenario import DEFAULT_SCENARIO as sc

    # the pages first, in the order of the sidebar (a visitor's likely next clicks); the job
    # workers' fork server last: only work estimated over APP_INLINE_S needs it, and its
    # start-up (a process importing the packages) would compete with the pages' steps
    return [
        ("imports (pandas, pyarrow, plotly)", _warm_imports),
        ("Simulate (default scenario)", lambda: prefill_simulation(plan_for(sc), sc)),
        ("Compare (default scenario)", lambda: prefill_compare(sc)),
        ("Calibration (the shipped profiles)", _warm_calibration),
        ("Sweeps (the bundled example)", _warm_sweeps),
        ("Cross-mesh (its example)", _warm_cross_mesh),
        ("job workers' fork server", jobs.prestart),
        ("a simulation through compare_view (8 devices)", work.warm),
    ]


def warm_pages(stop: threading.Event | None = None) -> dict[str, float]:
    """Every page's first-call costs paid for the default scenario, one step at a time
    (:func:`warm_steps`): the imports, the job workers' fork server, the first simulation,
    and the cached functions that Simulate, Compare, Cross-mesh, Sweeps and Calibration
    call on their first visit, so that visit finds them computed (or waits on Streamlit's
    per-key lock for the one being computed; nothing is computed twice). A step that fails
    logs one line and the others run on; the warm-up stops between steps when ``stop``
    (default: the interpreter is exiting) is set. Returns step -> seconds."""
    import logging

    stop = _STOP if stop is None else stop
    out: dict[str, float] = {}
    for name, step in warm_steps():
        if stop.is_set():
            break
        t0 = time.perf_counter()
        try:
            step()
        except Exception as e:  # noqa: BLE001 - a cold first visit is only slower
            logging.getLogger(__name__).warning("app warm-up skipped %s: %s: %s", name, type(e).__name__, e)
        out[name] = time.perf_counter() - t0
    # a log record, not a print: the thread may outlive the caller's output (a test's
    # captured stderr, a CLI's one-line error); ``ui.serve`` prints the line itself
    logging.getLogger(__name__).info("app warm-up: %s", warm_text(out))
    return out


def warm_text(steps: dict[str, float]) -> str:
    """``{step: seconds}`` of :func:`warm_pages` as one line: ``imports 1.2 s, ...``."""
    return ", ".join(f"{k} {v:.1f} s" for k, v in steps.items())


@st.cache_resource(show_spinner=False)
def warm_up():
    """Once per server, after the first page's script run (``app.py``): say so
    (:data:`FIRST_PAGE_DRAWN`) and, unless ``ui.serve``'s thread owns the warm-up
    (:data:`SERVE_OWNS_WARM_UP`: ``make run``), start :func:`warm_pages` in a background
    thread. The thread waits :func:`warm_up_delay_s` first: the first page's script run has
    ended, but the browser is still fetching its components and drawing it, and a fork
    server starting on a 2-core machine takes the CPU it needs."""
    FIRST_PAGE_DRAWN.set()
    with _WARM_LOCK:  # once per process, even when Streamlit's resource cache is cleared
        if SERVE_OWNS_WARM_UP.is_set() or _WARM_STARTED.is_set():
            return None
        _WARM_STARTED.set()

    def run():
        if not _STOP.wait(warm_up_delay_s()):
            warm_pages()

    return start_warm_thread(run, "app-warm-up")


class Pending:
    """Work handed to a worker process: the page shows :func:`ui.background.show_job`."""

    def __init__(self, job, slot: str, what: str):
        self.job, self.slot, self.what = job, slot, what


def _check_size(n: int, what: str):
    if n > MAX_SIM_DEVICES:
        raise InputError(
            f"{what}: the machine has {n} devices, more than the app simulates ({MAX_SIM_DEVICES}, "
            "MAX_SIM_DEVICES in docs/app.md); use `python -m simulator run` on the command line")


def check_replay(schedules, profile: str, size: str) -> None:
    """Refuse, before any work starts, a replay the simulator would refuse
    (``models.collectives.check_replay_size``: too many flow-hops to route), with its one
    line."""
    for s in schedules:
        why = _replay_refusal(_schedule_key(s), profile, size)
        if why is not None:
            raise InputError(why)


@st.cache_data(show_spinner=False, max_entries=64)
def _replay_refusal(schedule_key: str, profile: str, size: str) -> str | None:
    """``models.collectives.check_replay_size``'s one line for a schedule (by
    :func:`_schedule_key`) on a machine, or ``None`` when the simulator accepts it; cached,
    since a page asks again on every rerun (a second at 4096 chips, the topology's routes)."""
    try:
        from models.collectives import check_replay_size
    except ImportError:  # an older models package: the simulator says it in the job
        return None
    try:
        check_replay_size(synth.Schedule.from_dict(json.loads(schedule_key)), machine(profile, size))
    except RedistributionError as e:
        return str(e)
    return None


def split_replayable(schedules: dict, profile: str, size: str) -> tuple[dict, dict]:
    """``(ok, refused)``: the strategies the simulator will replay, and name -> its one
    line for those it refuses as too large (:func:`check_replay`)."""
    ok, refused = {}, {}
    for name, s in schedules.items():
        if isinstance(s, FailedStrategy):
            refused[name] = s.why
            continue
        try:
            check_replay([s], profile, size)
            ok[name] = s
        except RedistributionError as e:
            refused[name] = str(e)
    return ok, refused


def run_work(slot: str, func: str, args: tuple, units: float, what: str, kind: str = "simulate"):
    """The result of ``func(*args)``: computed inline when the estimate (``kind``'s
    rate, :func:`ui.jobs.estimate_s`) is under ``ui.jobs.INLINE_S`` (cached), else a
    :class:`Pending` for a worker process job (shared by every session asking for the
    same work; cached when done)."""
    from ui import jobs

    est = jobs.estimate_s(kind, units)
    key = json.dumps([func, args], sort_keys=True, default=str)
    m = jobs.manager()
    done = m.result(key)
    if done is not None:
        jobs.manager().cancel(jobs.session_id(), slot)
        return done
    marker = f"_job_cancelled_{slot}"
    if st.session_state.get(marker) == key:  # cancelled here: start again only when asked
        return Pending(jobs.Job(key=key, func=func, args=args, label=what, estimate_s=est,
                                state="cancelled"), slot, what)
    st.session_state.pop(marker, None)
    if key in _INLINE_KEYS or est <= jobs.inline_s():
        view = _inline(func, args, kind)
        _INLINE_KEYS[key] = None
        while len(_INLINE_KEYS) > _INLINE_MAX:
            _INLINE_KEYS.pop(next(iter(_INLINE_KEYS)))
        return view
    job = m.submit(key, func, args, session=jobs.session_id(), slot=slot, label=what, estimate_s=est, kind=kind)
    if job.state == "done":  # its rate was noted when it finished
        return job.result
    return Pending(job, slot, what)


@st.cache_data(show_spinner=False, max_entries=64)
def check_placement(placement: str, mesh_text: str, profile: str, size: str) -> None:
    """Parse a placement against the machine before any work starts (one line if bad)."""
    if not placement.strip():
        return
    models = importlib.import_module("models")
    models.Placement.of(placement.strip(), synth.Mesh.parse(mesh_text), machine(profile, size))


def _simulation_work(plan: synth.Plan, sc: Scenario, placement: str = "", bandwidth_scale: float = 1.0,
                     latency_scale: float = 1.0, schedule: synth.Schedule | None = None):
    """``(func, args, units)`` of the Simulate page's work, every size limit checked first."""
    from ui import work

    sched = schedule or plan.to_schedule()
    _check_size(sched.num_devices, "simulate")
    check_placement(placement, str(plan.mesh), sc.machine_profile, sc.machine_size)
    check_replay([sched], sc.machine_profile, sc.machine_size)
    sj = _schedule_key(sched)
    args = (sj, str(plan.mesh), sc.machine_profile, sc.machine_size, placement.strip(),
            float(bandwidth_scale), float(latency_scale))
    return "ui.work:simulate_view", args, work.schedule_units(json.loads(sj))


def simulation(plan: synth.Plan, sc: Scenario, placement: str = "", bandwidth_scale: float = 1.0,
               latency_scale: float = 1.0, schedule: synth.Schedule | None = None):
    """The Simulate page's view of the plan (``ui.work.simulate_view``): a dict, or a
    :class:`Pending` job while a worker computes it."""
    func, args, units = _simulation_work(plan, sc, placement, bandwidth_scale, latency_scale, schedule)
    return run_work("simulate", func, args, units, f"Simulating {plan.num_collectives} collective(s) on {sc.machine}")


def chrome_trace(plan: synth.Plan, sc: Scenario, placement: str = "") -> str:
    """The Chrome trace of the Simulate page's simulation (``ui.work.chrome_trace_file``),
    built when the download button is clicked (its deferred data), in this process: the
    replay was accepted by :func:`check_replay` before the page showed its result."""
    from ui import work

    _func, args, _units = _simulation_work(plan, sc, placement)
    return work.chrome_trace_file(*args)


def prefill_simulation(plan: synth.Plan, sc: Scenario) -> None:
    """Compute the Simulate page's view of ``plan`` (row-major placement) now, into the
    cache :func:`run_work` serves inline work from, outside any page (``ui.serve`` does it
    for the default scenario at start, so the first visit to Simulate finds it computed)."""
    func, args, _units = _simulation_work(plan, sc)
    _inline(func, args, "simulate")
    _INLINE_KEYS[json.dumps([func, args], sort_keys=True, default=str)] = None


def _compare_work(schedules: dict, mesh_text: str, sc: Scenario, placement: str = "",
                  bandwidth_scale: float = 1.0, latency_scale: float = 1.0):
    """``(func, args, units)`` of the Compare page's work, every size limit checked first."""
    from ui import work

    failed = [s.why for s in schedules.values() if isinstance(s, FailedStrategy)]
    if failed:
        raise RedistributionError(failed[0])

    keyed = {name: _schedule_key(s) for name, s in schedules.items()}
    n = max((s.num_devices for s in schedules.values()), default=0)
    _check_size(n, "compare")
    check_placement(placement, mesh_text, sc.machine_profile, sc.machine_size)
    check_replay(schedules.values(), sc.machine_profile, sc.machine_size)
    units = sum(work.schedule_units(json.loads(v)) for v in set(keyed.values()))
    return ("ui.work:compare_view", (keyed, mesh_text, sc.machine_profile, sc.machine_size, placement.strip(),
                                     float(bandwidth_scale), float(latency_scale)), units)


def compare_simulations(schedules: dict, mesh_text: str, sc: Scenario, placement: str = "",
                        bandwidth_scale: float = 1.0, latency_scale: float = 1.0):
    """Every strategy simulated (``ui.work.compare_view``), or a :class:`Pending` job."""
    func, args, units = _compare_work(schedules, mesh_text, sc, placement, bandwidth_scale, latency_scale)
    return run_work("compare", func, args, units, f"Simulating {len(schedules)} strategies on {sc.machine}",
                    kind="compare")


# -- XLA and local measurements (subprocess: python -m executor ...) ------------------------
class WorkerError(RedistributionError):
    """The executor subprocess failed (its message is shown on the page)."""


def _executor_cmd(sub: str, mesh_text: str, src: str, dst: str, dtype: str, *extra: str) -> list[str]:

    n = synth.Mesh.parse(mesh_text).size
    return [sys.executable, "-m", "executor", sub, "--mesh", mesh_text, "--src", src, "--dst", dst,
            "--dtype", dtype, "--devices", str(n), *extra, "--json"]


def _killed_line(cmd: list[str], returncode: int) -> str:
    """:func:`executor.run.killed_line` for one of :func:`_executor_cmd`'s commands: the
    estimate of a run over real arrays (``compare``, ``--check``) or of an ahead-of-time
    compile (``xla-schedule``)."""
    from executor.run import aot_compile_host_bytes, compile_host_bytes, killed_line
    from synth.cliutil import DTYPE_ITEMSIZE

    arg = {k: v for k, v in zip(cmd, cmd[1:]) if k.startswith("--")}
    try:
        nbytes = synth.ArrayType.parse(arg["--src"]).num_elems() * DTYPE_ITEMSIZE.get(arg.get("--dtype", ""), 4)
        n = synth.Mesh.parse(arg["--mesh"]).size
        real = cmd[3] == "compare" or "--check" in cmd
        need = compile_host_bytes(nbytes, n) if real else aot_compile_host_bytes("cpu", n)
    except (synth.RedistributionError, KeyError, IndexError):  # the case as typed is named below anyway
        need = None
    return killed_line(f"{arg.get('--src')} -> {arg.get('--dst')} on {arg.get('--mesh')}", "cpu", need, returncode)


def _run_executor(cmds: list[list[str]], timeout_s: int) -> list[dict]:
    """Run executor CLI commands in parallel; each prints one JSON document. JAX's CPU
    device count is fixed when its backend starts, so each gets a fresh interpreter
    with ``--devices`` set (the Streamlit process never imports jax)."""
    import os
    import subprocess
    from pathlib import Path

    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    root = Path(__file__).resolve().parents[1]
    procs = [subprocess.Popen(c, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for c in cmds]
    outs = []
    try:
        for c, p in zip(cmds, procs):
            try:
                so, se = p.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise WorkerError(f"`python -m executor {c[3]}` took longer than {timeout_s} s and was "
                                  "stopped; try a smaller array or mesh") from None
            if p.returncode < 0:  # a signal (9: the out-of-memory killer): case, compiler, bytes
                raise WorkerError(f"python -m executor {c[3]}: {_killed_line(c, p.returncode)}")
            if p.returncode != 0:
                lines = [ln for ln in se.strip().splitlines() if ln.strip()]
                msg = lines[-1] if lines else f"exit status {p.returncode}"
                raise WorkerError(f"python -m executor {c[3]}: {msg.removeprefix('error: ')}")
            outs.append(json.loads(so))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


@st.cache_data(show_spinner=False, max_entries=32)
def xla_schedules(mesh_text: str, src: str, dst: str, dtype: str) -> dict:
    """XLA's compiled resharding under Shardy and GSPMD, read from its HLO as schedules
    (``python -m executor xla-schedule``). ``{partitioner: {schedule, full_remat, correct}}``."""
    parts = ("shardy", "gspmd")
    outs = _run_executor([_executor_cmd("xla-schedule", mesh_text, src, dst, dtype, "--partitioner", p)
                          for p in parts], timeout_s=900)
    return {p: {"schedule": d, "full_remat": bool(d.get("meta", {}).get("full_remat")),
                "correct": d.get("meta", {}).get("correct")} for p, d in zip(parts, outs)}


@st.cache_data(show_spinner=False, max_entries=32)
def measure_local(mesh_text: str, src: str, dst: str, dtype: str, planner: str) -> dict:
    """Ours vs both XLA partitioners, run, checked and timed on the local JAX backend
    (``python -m executor compare``)."""
    return _run_executor([_executor_cmd("compare", mesh_text, src, dst, dtype, "--planner", planner)],
                         timeout_s=900)[0]


class FailedStrategy:
    """A strategy whose planner failed (a bug, not a user error): the Compare page leaves
    it out with this one line (:func:`split_replayable`) and compares the others."""

    def __init__(self, why: str):
        self.why = why

    def __repr__(self) -> str:
        return f"FailedStrategy({self.why!r})"


def strategy_schedules(plan: synth.Plan, sc: Scenario, xla: dict | None) -> dict:
    """Name -> ``synth.Schedule`` for every strategy on the Compare page; another
    planner that fails unexpectedly gives a :class:`FailedStrategy` instead of taking
    the page down."""
    out = {f"ours ({plan.planner})": plan.to_schedule()}
    for name in planners():
        if name != plan.planner:
            try:
                p = make_plan(str(plan.mesh), "", str(plan.src), str(plan.dst), name, plan.itemsize,
                              None, sc.machine_profile, sc.machine_size)
                out[name] = p.to_schedule()
            except RedistributionError:
                raise
            except Exception as e:  # noqa: BLE001 - one planner's bug must not hide the others
                out[name] = FailedStrategy(f"the {name} planner failed ({type(e).__name__}: {e}); "
                                           "please report it")
    for part, d in (xla or {}).items():
        out[f"xla {part}"] = synth.Schedule.from_dict(d["schedule"])
    return out


# -- sweeps (experiments runner in a worker job) ---------------------------------------------
def sweep_job(config_path: str, out_dir: str, slot: str = "sweep", start: bool = True):
    """The smoke sweep (or any config) run by :func:`ui.work.run_sweep` in a worker job:
    a :class:`Pending` while it runs (progress: rows written), its result dict when done,
    ``None`` when it was not asked for (``start=False`` and no job of this session)."""
    from ui import jobs

    key = json.dumps(["ui.work:run_sweep", [config_path, out_dir]])
    m = jobs.manager()
    done = m.result(key)
    if done is not None:
        return done
    marker = f"_job_cancelled_{slot}"
    if st.session_state.get(marker) == key:
        return Pending(jobs.Job(key=key, func="ui.work:run_sweep", args=(config_path, out_dir),
                                label="sweep", estimate_s=None, state="cancelled"), slot, "The smoke sweep")
    job = m.get(key)
    if job is None and not start:
        return None
    if job is None or job.finished:
        st.session_state.pop(marker, None)
        job = m.submit(key, "ui.work:run_sweep", (config_path, out_dir), session=jobs.session_id(), slot=slot,
                       label="sweep", estimate_s=60.0)
    if job.state == "done":
        return job.result
    return Pending(job, slot, "The smoke sweep")
