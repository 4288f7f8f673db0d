"""Cached, pure wrappers around the packages. The pages call only these.

Each function takes plain strings/numbers (so Streamlit can hash them), calls the
package that owns the algorithm, and returns values. User errors propagate as
``synth.errors.RedistributionError`` (a ``ValueError``); pages show them with
``st.error``. Optional packages (models, simulator, executor, experiments) are imported
lazily; :func:`missing` says which are not available.
"""

from __future__ import annotations

import importlib
import json
import re

import streamlit as st

import synth
from synth.errors import RedistributionError
from ui.errors import InputError
from ui.scenario import Scenario, machine_devices, parse_shape, suggest_meshes


# -- optional packages --------------------------------------------------------------
def missing(module: str) -> str | None:
    """``None`` if ``module`` imports, else a one-line reason (for ``st.warning``)."""
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return f"{type(e).__name__}: {e}"
    return None


def planners() -> list[str]:
    """Every planner ``synth`` has, its default first."""
    from ui.scenario import default_planner

    names = list(synth.PLANNERS)
    first = default_planner()
    return [first] + [n for n in names if n != first] if first in names else names


# -- scenario -> plan -----------------------------------------------------------------
_INTERNAL = re.compile(r"^(?:[A-Za-z_][\w.]*\((?:[^()]|\([^()]*\))*\)\s*:\s*|[A-Za-z_]\w*\.[\w.]+:\s+|(?:ArrayType|Mesh|Dim|Plan|Schedule|Placement)\b[\w.]*:\s+)+")

#: The accepted forms, shown with every sharding error.
SHARDING_FORMS = ("write it in canonical form, e.g. '[8192{data}, 32768{model}]', or as a "
                  "PartitionSpec, e.g. \"P('data', 'model')\" or \"P(('data', 'model'), None)\"")


def clean_message(msg: str) -> str:
    """Drop internal function names (``ArrayType.parse('...'):``, ``Mesh.parse:``) from
    the start of a message: the page names the field instead."""
    out = _INTERNAL.sub("", str(msg).strip())
    return out or str(msg)


@st.cache_data(show_spinner=False, max_entries=256)
def parse_inputs(mesh_text: str, shape_text: str, src_text: str, dst_text: str,
                 num_devices: int | None):
    """Validate the scenario's text: returns ``(mesh, src, dst)``."""
    try:
        mesh = synth.Mesh.parse(mesh_text)
    except RedistributionError as e:
        raise InputError(f"Mesh axes {mesh_text.strip()!r}: {clean_message(e)}; write named axes with "
                         "sizes, major first, e.g. 'data=16,model=4'") from None
    if num_devices is not None and mesh.size != num_devices:
        raise InputError(
            f"Mesh axes: {mesh} has {mesh.size} devices but the machine has {num_devices}; "
            f"make the axis sizes multiply to {num_devices}, e.g. "
            + " or ".join(repr(s) for s in suggest_meshes(num_devices))
        )
    shape = parse_shape(shape_text) if shape_text.strip() else None
    src = _parse_sharding("Source sharding", src_text, shape, mesh)
    dst = _parse_sharding("Target sharding", dst_text, shape or src.shape, mesh)
    return mesh, src, dst


def _parse_sharding(what: str, text: str, shape, mesh):
    """``synth.parse_type`` and the mesh check, with the field named in the message and
    both accepted forms shown."""
    try:
        return synth.parse_type(text, shape).check(mesh, what.lower())
    except RedistributionError as e:
        msg = clean_message(e)
        if "P(" not in msg or "[" not in msg:
            msg += "; " + SHARDING_FORMS
        raise InputError(f"{what} {text.strip()!r}: {msg}") from None


#: The ``auto`` planner's search budget in the app (documented in docs/app.md): larger than
#: synth's interactive default of 100 ms because the machine's cost model is slower per
#: step on a cold server, and a plan is computed once per scenario (then cached).
AUTO_BUDGET_S = 0.5


@st.cache_data(show_spinner=False, max_entries=256)
def make_plan(mesh_text: str, shape_text: str, src_text: str, dst_text: str,
              planner: str, itemsize: int, num_devices: int | None = None,
              machine_profile: str = "", machine_size: str = "") -> synth.Plan:
    """The plan of ``planner``. ``auto`` is costed on the scenario's machine (row-major
    placement: ``models.plan_cost.machine_cost``) when one is given and models/ loads;
    otherwise on synth's documented default cost."""
    mesh, src, dst = parse_inputs(mesh_text, shape_text, src_text, dst_text, num_devices)
    kw = {"budget_s": AUTO_BUDGET_S} if planner == "auto" else {}
    if planner == "auto" and machine_profile and not missing("models"):
        m = machine(machine_profile, machine_size)
        if m.num_devices == mesh.size:
            from models.plan_cost import machine_cost

            kw["cost"] = machine_cost(m, mesh)
    return synth.synthesize(mesh, src, dst, planner=planner, itemsize=itemsize, **kw)


def plan_for(sc: Scenario, planner: str | None = None) -> synth.Plan:
    return make_plan(sc.mesh, sc.shape, sc.src, sc.dst, planner or sc.planner, sc.itemsize,
                     scenario_devices(sc), sc.machine_profile, sc.machine_size)


# -- export -------------------------------------------------------------------------
def plan_document(plan: synth.Plan, sc: Scenario) -> dict:
    """The exported JSON: ``Plan.to_dict()`` (loadable with ``Plan.from_dict``) plus the
    scenario it came from."""
    doc = plan.to_dict()
    doc["dtype"] = sc.dtype
    doc["shape"] = list(plan.src.shape)
    doc["machine"] = sc.machine
    doc["partition_specs"] = {
        "src": _spec_text(plan.src), "dst": _spec_text(plan.dst),
    }
    return doc


def _spec_text(t) -> str:
    _, spec = t.to_spec()
    parts = []
    for e in spec:
        if e is None:
            parts.append("None")
        elif isinstance(e, str):
            parts.append(repr(e))
        else:
            parts.append("(" + ", ".join(repr(a) for a in e) + ")")
    return "P(" + ", ".join(parts) + ")"


@st.cache_data(show_spinner=False, max_entries=64)
def plan_json(plan_dict_json: str) -> str:
    return json.dumps(json.loads(plan_dict_json), indent=2)


def jax_code(plan: synth.Plan, dtype: str | None = None) -> tuple[str | None, str | None]:
    """``(code, None)`` from ``executor.codegen.generate_source`` (pure text, no jax
    import; its self-check uses ``dtype``), or ``(None, why)``."""
    why = missing("executor.codegen")
    if why:
        return None, ("JAX code export needs `executor.codegen` (issue 4), which is not "
                      f"available here ({why}).")
    return _jax_code(plan.to_json(), dtype), None


@st.cache_data(show_spinner=False, max_entries=64)
def _jax_code(plan_json_text: str, dtype: str | None = None) -> str:
    codegen = importlib.import_module("executor.codegen")
    plan = synth.Plan.from_dict(json.loads(plan_json_text))
    return codegen.generate_source(plan, dtype=dtype)


__all__ = [
    "RedistributionError", "jax_code", "make_plan", "missing", "parse_inputs", "plan_document",
    "plan_for", "plan_json", "planners", "scenario_devices",
]


# -- machines -----------------------------------------------------------------------
#: Shown when the models package is not available: the planner needs only the device
#: count, which the slice size gives.
FALLBACK_PROFILES = ["tpu-v4"]


def machine_profiles() -> list[str]:
    """Names of the hardware profiles ``models`` ships (fallback: the default one)."""
    try:
        models = importlib.import_module("models")
        # calibration writes NAME.report.json next to NAME.json; the report is no profile
        names = [str(n) for n in models.available_profiles() if not str(n).endswith(".report")]
    except Exception:  # noqa: BLE001 - models not there yet: plan without a machine
        return list(FALLBACK_PROFILES)
    return names or list(FALLBACK_PROFILES)


@st.cache_resource(show_spinner=False, max_entries=64)
def machine(profile: str, size: str, bandwidth_scale: float = 1.0, latency_scale: float = 1.0):
    """The sized ``models.HardwareProfile`` (immutable, shared between sessions)."""
    models = importlib.import_module("models")
    size = size.strip()
    m = models.load_profile(f"{profile}:{size}" if size else profile)
    if bandwidth_scale != 1.0 or latency_scale != 1.0:
        m = m.with_scale(bandwidth_scale=bandwidth_scale, latency_scale=latency_scale)
    return m


def default_size(profile: str) -> str | None:
    """The slice size a profile loads with when none is given (e.g. ``4x4x4``)."""
    try:
        return machine(profile, "").size_str
    except Exception:  # noqa: BLE001 - unknown profile or models missing: keep the size
        return None


def hbm_capacity(sc: Scenario) -> int | None:
    """Bytes of device memory of the scenario's machine (``None`` without models or
    with a bad machine, which the page reports elsewhere)."""
    if missing("models"):
        return None
    try:
        return int(machine(sc.machine_profile, sc.machine_size).hbm_capacity_bytes)
    except Exception:  # noqa: BLE001
        return None


_MODEL_ERROR: dict = {}
_MODEL_ERROR_LOCK = __import__("threading").Lock()


def _model_error_table():
    """``simulator.validate.model_error_by_system()`` computed once per server in a
    background thread (it takes seconds): the table, ``"pending"``, or ``None``."""
    with _MODEL_ERROR_LOCK:
        if "table" in _MODEL_ERROR:
            return _MODEL_ERROR["table"]
        if "thread" not in _MODEL_ERROR:
            def run():
                try:
                    from simulator import validate

                    table = validate.model_error_by_system()
                except Exception:  # noqa: BLE001 - not available: say so on the page
                    table = None
                _MODEL_ERROR["table"] = table

            import threading

            t = threading.Thread(target=run, name="app-model-error", daemon=True)
            _MODEL_ERROR["thread"] = t
            t.start()
    t = _MODEL_ERROR["thread"]
    t.join(0.2)
    return _MODEL_ERROR.get("table", "pending")


def model_error(spec: str) -> dict | None:
    """How far the simulator was from published measurements for the machine class of
    ``spec`` (``simulator.validate``): ``{"system", "mape_pct", "n", "worst_pct"}``,
    ``{"pending": True}`` while the table is computed, ``{"missing": [...]}`` when the
    published set has no such machine, or ``None`` when validation is not available."""
    if missing("simulator.validate"):
        return None
    table = _model_error_table()
    if table == "pending":
        return {"pending": True}
    if not isinstance(table, dict):
        return None
    try:
        from simulator.validate import system_of_profile

        system = system_of_profile(spec)
    except Exception:  # noqa: BLE001
        system = None
    v = table.get(system) if system else None
    if not isinstance(v, dict) or v.get("mape") is None:
        return {"missing": sorted(str(k) for k in table)}
    return {"system": system, "mape_pct": 100 * float(v["mape"]), "n": v.get("n"),
            "worst_pct": 100 * float(v["worst"]) if v.get("worst") is not None else None}


def scenario_devices(sc: Scenario) -> int:
    """Device count of the scenario's machine (from models; else the size's product)."""
    if missing("models"):
        return machine_devices(sc.machine_size)
    return machine(sc.machine_profile, sc.machine_size).num_devices


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


@st.cache_resource(show_spinner=False, max_entries=64)
def _inline(func: str, args: tuple):
    mod, name = func.split(":")
    return getattr(importlib.import_module(mod), name)(*args)


@st.cache_resource(show_spinner=False)
def warm_up():
    """Once per server, in a background thread: start the job workers' fork server
    (:func:`ui.jobs.prestart`) and :func:`ui.work.warm`, so the first simulation a user
    asks for does not pay the first-call costs (about 1.5 s inline, 2.5 s as a job)."""
    import threading

    from ui import jobs, work

    def run():
        try:
            jobs.prestart()   # the fork server of the job workers, warmed up too
        except Exception:  # noqa: BLE001 - jobs start it themselves then
            pass
        work.warm()

    t = threading.Thread(target=run, name="app-warm-up", daemon=True)
    t.start()
    return t


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
    try:
        from models.collectives import check_replay_size
    except ImportError:  # an older models package: the simulator says it in the job
        return
    m = machine(profile, size)
    for s in schedules:
        check_replay_size(s, m)


def split_replayable(schedules: dict, profile: str, size: str) -> tuple[dict, dict]:
    """``(ok, refused)``: the strategies the simulator will replay, and name -> its one
    line for those it refuses as too large (:func:`check_replay`)."""
    ok, refused = {}, {}
    for name, s in schedules.items():
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
    if est <= jobs.inline_s():
        view = _inline(func, args)
        jobs.note_rate(kind, view.get("units", 0), view.get("wall_s", 0))
        return view
    job = m.submit(key, func, args, session=jobs.session_id(), slot=slot, label=what, estimate_s=est)
    if job.state == "done":
        jobs.note_rate(kind, job.result.get("units", 0), job.result.get("wall_s", 0))
        return job.result
    return Pending(job, slot, what)


@st.cache_data(show_spinner=False, max_entries=64)
def check_placement(placement: str, mesh_text: str, profile: str, size: str) -> None:
    """Parse a placement against the machine before any work starts (one line if bad)."""
    if not placement.strip():
        return
    models = importlib.import_module("models")
    models.Placement.of(placement.strip(), synth.Mesh.parse(mesh_text), machine(profile, size))


def simulation(plan: synth.Plan, sc: Scenario, placement: str = "", bandwidth_scale: float = 1.0,
               latency_scale: float = 1.0, schedule: synth.Schedule | None = None):
    """The Simulate page's view of the plan (``ui.work.simulate_view``): a dict, or a
    :class:`Pending` job while a worker computes it."""
    from ui import work

    sched = schedule or plan.to_schedule()
    _check_size(sched.num_devices, "simulate")
    check_placement(placement, str(plan.mesh), sc.machine_profile, sc.machine_size)
    check_replay([sched], sc.machine_profile, sc.machine_size)
    sj = _schedule_key(sched)
    units = work.schedule_units(json.loads(sj))
    return run_work("simulate", "ui.work:simulate_view",
                    (sj, str(plan.mesh), sc.machine_profile, sc.machine_size, placement.strip(),
                     float(bandwidth_scale), float(latency_scale)),
                    units, f"Simulating {plan.num_collectives} collective(s) on {sc.machine}")


def compare_simulations(schedules: dict, mesh_text: str, sc: Scenario, placement: str = "",
                        bandwidth_scale: float = 1.0, latency_scale: float = 1.0):
    """Every strategy simulated (``ui.work.compare_view``), or a :class:`Pending` job."""
    from ui import work

    keyed = {name: _schedule_key(s) for name, s in schedules.items()}
    n = max((s.num_devices for s in schedules.values()), default=0)
    _check_size(n, "compare")
    check_placement(placement, mesh_text, sc.machine_profile, sc.machine_size)
    check_replay(schedules.values(), sc.machine_profile, sc.machine_size)
    units = sum(work.schedule_units(json.loads(v)) for v in set(keyed.values()))
    return run_work("compare", "ui.work:compare_view",
                    (keyed, mesh_text, sc.machine_profile, sc.machine_size, placement.strip(),
                     float(bandwidth_scale), float(latency_scale)),
                    units, f"Simulating {len(schedules)} strategies on {sc.machine}", kind="compare")


# -- XLA and local measurements (subprocess: python -m executor ...) ------------------------
class WorkerError(RedistributionError):
    """The executor subprocess failed (its message is shown on the page)."""


def _executor_cmd(sub: str, mesh_text: str, src: str, dst: str, dtype: str, *extra: str) -> list[str]:
    import sys

    n = synth.Mesh.parse(mesh_text).size
    return [sys.executable, "-m", "executor", sub, "--mesh", mesh_text, "--src", src, "--dst", dst,
            "--dtype", dtype, "--devices", str(n), *extra, "--json"]


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
            if p.returncode != 0:
                lines = [ln for ln in se.strip().splitlines() if ln.strip()]
                msg = lines[-1] if lines and p.returncode > 0 else (
                    f"exit status {p.returncode}" if p.returncode > 0 else
                    f"killed by signal {-p.returncode}, most likely for memory (the host ran out); "
                    "try a smaller array")
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


def strategy_schedules(plan: synth.Plan, sc: Scenario, xla: dict | None) -> dict:
    """Name -> ``synth.Schedule`` for every strategy on the Compare page."""
    out = {f"ours ({plan.planner})": plan.to_schedule()}
    for name in planners():
        if name != plan.planner:
            p = make_plan(str(plan.mesh), "", str(plan.src), str(plan.dst), name, plan.itemsize,
                          None, sc.machine_profile, sc.machine_size)
            out[name] = p.to_schedule()
    for part, d in (xla or {}).items():
        out[f"xla {part}"] = synth.Schedule.from_dict(d["schedule"])
    return out


# -- sweeps (experiments results folders) ----------------------------------------------------
REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def results_root():
    """The folder the Sweeps and Calibration pages may read and write under:
    ``APP_RESULTS_ROOT`` if set, else the repository (where only ``results*/`` folders
    count). Nothing outside it is listed, read or written."""
    import os
    from pathlib import Path

    env = os.environ.get("APP_RESULTS_ROOT", "").strip()
    return Path(env).resolve() if env else REPO_ROOT


def _inside(path, root) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def check_results_path(text: str, what: str = "results folder"):
    """The real path of a typed folder, if it lies under :func:`results_root` (and, for
    the default root, under a ``results*`` folder); else a one-line :class:`InputError`."""
    import os
    from pathlib import Path

    root = results_root()
    raw = Path(os.path.expanduser(str(text).strip()))
    p = (raw if raw.is_absolute() else root / raw).resolve()
    default = not os.environ.get("APP_RESULTS_ROOT", "").strip()
    ok = _inside(p, root) and (not default or (p != root and p.relative_to(root).parts[0].startswith("results")))
    if not ok:
        where = f"{root}/results*/" if default else f"{root}/"
        raise InputError(f"{what} {str(text).strip()!r}: the app only reads and writes folders under "
                         f"{where} (set APP_RESULTS_ROOT to change this)")
    return p


def results_folders(root=None, limit: int = 50) -> list[str]:
    """Results folders (holding ``rows.jsonl``) under the results root, newest first."""
    from pathlib import Path

    root = Path(root) if root else results_root()
    default = root == REPO_ROOT
    found = set()
    pats = ("results*/rows.jsonl", "results*/*/rows.jsonl", "results*/*/*/rows.jsonl") if default else \
        ("rows.jsonl", "*/rows.jsonl", "*/*/rows.jsonl", "*/*/*/rows.jsonl")
    for pattern in pats:
        found.update(p.parent for p in root.glob(pattern)
                     if not p.is_symlink() and _inside(p.resolve(), root.resolve()))
    ordered = sorted(found, key=_mtime, reverse=True)
    return [str(p) for p in ordered[:limit]]


def _mtime(path) -> float:
    """Modification time of a results folder's ``rows.jsonl`` (0 if it is gone)."""
    import os

    try:
        return os.stat(os.path.join(path, "rows.jsonl")).st_mtime
    except OSError:
        return 0.0


@st.cache_data(show_spinner=False, max_entries=16)
def _sweep_rows(path: str, mtime: float):
    report = importlib.import_module("experiments.report")
    return report.load_rows(path)


def sweep_rows(path: str):
    """The rows of a results folder as a DataFrame (``experiments.report.load_rows``);
    reloaded when ``rows.jsonl`` changes. Only folders under the results root."""
    p = str(check_results_path(path))
    fileio = importlib.import_module("synth.fileio")
    try:  # no link below the results root, rows.jsonl a regular file (read without following a link)
        fileio.check_inside(f"{p}/rows.jsonl", results_root(), "results file")
    except fileio.FileError as e:
        raise InputError(str(e)) from None
    return _sweep_rows(p, _mtime(p))


def build_sweep_report(path: str) -> str:
    """(Re)write ``report.html`` of a results folder (under the results root only);
    returns its path."""
    report = importlib.import_module("experiments.report")
    return report.build_report(str(check_results_path(path))).html_path


# -- calibration ---------------------------------------------------------------------------
def calibrated_dir() -> str:
    try:
        return str(importlib.import_module("models.profiles").CALIBRATED_DIR)
    except Exception:  # noqa: BLE001
        from pathlib import Path

        return str(Path(__file__).resolve().parents[1] / "models" / "profiles" / "calibrated")


def check_calibration_dir(text: str):
    """The calibrated-profiles folder, if it is the shipped one or lies under the
    results root; else a one-line :class:`InputError`."""
    import os
    from pathlib import Path

    shipped = Path(calibrated_dir()).resolve()
    raw = Path(os.path.expanduser(str(text).strip() or str(shipped)))
    p = (raw if raw.is_absolute() else REPO_ROOT / raw).resolve()
    if p == shipped or _inside(p, shipped):
        return p
    try:
        return check_results_path(str(p), "Calibrated profiles folder")
    except InputError:
        raise InputError(f"Calibrated profiles folder {str(text).strip()!r}: the app only reads {shipped} "
                         f"and folders under {results_root()} (set APP_RESULTS_ROOT to change this)") from None


def calibrated_profiles(folder: str) -> list[str]:
    """Calibrated profile files (``*.json`` that are not ``*.report.json``) in ``folder``."""

    d = check_calibration_dir(folder)
    if not d.is_dir():
        return []
    return sorted(str(p) for p in d.glob("*.json") if not p.name.endswith(".report.json"))


@st.cache_data(show_spinner=False, max_entries=32)
def _read_json(path: str, mtime: float) -> dict:
    """A JSON object from a file; any other content is a one-line :class:`InputError`."""
    from pathlib import Path

    name = Path(path).name
    fileio = importlib.import_module("synth.fileio")
    try:  # a regular file only, size-capped; a link in its place is not followed
        raw = fileio.read_bytes(path, name, follow_links=False)
    except fileio.FileError as e:
        raise InputError(str(e).replace(str(path), name)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{name} is not UTF-8 text (byte {e.start}); is it a calibrated profile?") from None
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        raise InputError(f"{name} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise InputError(f"{name} holds a JSON {type(doc).__name__}, not an object; a calibrated profile "
                         "is an object with 'name' and 'params'")
    return doc


def read_calibration(profile_path: str) -> tuple[dict, dict | None]:
    """``(profile, report or None)`` for a calibrated profile file; the report is the
    ``*.report.json`` written next to it by ``executor calibrate``."""
    import os
    from pathlib import Path

    p = Path(profile_path)
    check_calibration_dir(str(p.parent))
    if not p.is_file():
        raise InputError(f"calibrated profile {profile_path} does not exist")
    prof = _read_json(str(p), os.stat(p).st_mtime)
    rp = p.with_name(p.stem + ".report.json")
    rep = _read_json(str(rp), os.stat(rp).st_mtime) if rp.is_file() else None
    return prof, rep
