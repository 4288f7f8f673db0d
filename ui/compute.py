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
    names = list(synth.PLANNERS)
    return ["normal"] + [n for n in names if n != "normal"] if "normal" in names else names


# -- scenario -> plan -----------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=256)
def parse_inputs(mesh_text: str, shape_text: str, src_text: str, dst_text: str,
                 num_devices: int | None):
    """Validate the scenario's text: returns ``(mesh, src, dst)``."""
    mesh = synth.Mesh.parse(mesh_text)
    if num_devices is not None and mesh.size != num_devices:
        raise InputError(
            f"mesh {mesh} has {mesh.size} devices but the machine has {num_devices}; "
            f"make the axis sizes multiply to {num_devices}, e.g. "
            + " or ".join(repr(s) for s in suggest_meshes(num_devices))
        )
    shape = parse_shape(shape_text) if shape_text.strip() else None
    src = _parse_sharding("source sharding", src_text, shape).check(mesh, "source sharding")
    dst = _parse_sharding("target sharding", dst_text, shape or src.shape).check(mesh, "target sharding")
    return mesh, src, dst


def _parse_sharding(what: str, text: str, shape):
    """``synth.parse_type`` with the input named in the message."""
    try:
        return synth.parse_type(text, shape)
    except RedistributionError as e:
        raise InputError(f"{what} {text.strip()!r}: {e}") from None


@st.cache_data(show_spinner=False, max_entries=256)
def make_plan(mesh_text: str, shape_text: str, src_text: str, dst_text: str,
              planner: str, itemsize: int, num_devices: int | None = None) -> synth.Plan:
    mesh, src, dst = parse_inputs(mesh_text, shape_text, src_text, dst_text, num_devices)
    return synth.synthesize(mesh, src, dst, planner=planner, itemsize=itemsize)


def plan_for(sc: Scenario, planner: str | None = None) -> synth.Plan:
    return make_plan(sc.mesh, sc.shape, sc.src, sc.dst, planner or sc.planner, sc.itemsize,
                     scenario_devices(sc))


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


def jax_code(plan: synth.Plan) -> tuple[str | None, str | None]:
    """``(code, None)`` from ``executor.codegen.generate_source`` (pure text, no jax
    import), or ``(None, why)``."""
    why = missing("executor.codegen")
    if why:
        return None, ("JAX code export needs `executor.codegen` (issue 4), which is not "
                      f"available here ({why}).")
    return _jax_code(plan.to_json()), None


@st.cache_data(show_spinner=False, max_entries=64)
def _jax_code(plan_json_text: str) -> str:
    codegen = importlib.import_module("executor.codegen")
    plan = synth.Plan.from_dict(json.loads(plan_json_text))
    return codegen.generate_source(plan)


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


def scenario_devices(sc: Scenario) -> int:
    """Device count of the scenario's machine (from models; else the size's product)."""
    if missing("models"):
        return machine_devices(sc.machine_size)
    return machine(sc.machine_profile, sc.machine_size).num_devices


# -- simulation -----------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=128)
def _simulate_cached(schedule_json: str, mesh_text: str, profile: str, size: str,
                     placement: str, bandwidth_scale: float, latency_scale: float):
    simulator = importlib.import_module("simulator")
    m = machine(profile, size, bandwidth_scale, latency_scale)
    sched = synth.Schedule.from_dict(json.loads(schedule_json))
    return simulator.simulate(sched, m, mesh=mesh_text, placement=placement.strip() or None)


def simulate_plan(plan: synth.Plan, sc: Scenario, placement: str = "",
                  bandwidth_scale: float = 1.0, latency_scale: float = 1.0):
    """``simulator.simulate`` of the plan's schedule on the scenario's machine (cached;
    the result is immutable and shared)."""
    return simulate_schedule(plan.to_schedule(), str(plan.mesh), sc, placement,
                             bandwidth_scale, latency_scale)


def _schedule_key(schedule: synth.Schedule) -> str:
    """The schedule as JSON without the labels that do not change its simulation
    (its name and which planner made it), so two planners that produce the same
    device-level schedule (often ``normal`` and ``search``) share one simulation."""
    d = schedule.to_dict()
    d["name"] = ""
    d["meta"] = {k: v for k, v in d.get("meta", {}).items() if k not in ("planner", "strategy")}
    return json.dumps(d, sort_keys=True)


def simulate_schedule(schedule: synth.Schedule, mesh_text: str, sc: Scenario, placement: str = "",
                      bandwidth_scale: float = 1.0, latency_scale: float = 1.0):
    return _simulate_cached(_schedule_key(schedule), mesh_text, sc.machine_profile, sc.machine_size,
                            placement, float(bandwidth_scale), float(latency_scale))


@st.cache_resource(show_spinner=False, max_entries=64)
def _simulation_figures_cached(schedule_json: str, mesh_text: str, profile: str, size: str,
                               placement: str, bandwidth_scale: float, latency_scale: float):
    from ui import figures

    res = _simulate_cached(schedule_json, mesh_text, profile, size, placement, bandwidth_scale,
                           latency_scale)
    return {"timeline": figures.timeline_figure(res), "memory": figures.memory_figure(res),
            "topology": figures.topology_figure(res)}


def simulation_figures(plan: synth.Plan, sc: Scenario, placement: str = "",
                       bandwidth_scale: float = 1.0, latency_scale: float = 1.0) -> dict:
    """Timeline, memory and topology figures of :func:`simulate_plan` (cached)."""
    return _simulation_figures_cached(plan.to_schedule().to_json(), str(plan.mesh), sc.machine_profile,
                                      sc.machine_size, placement, float(bandwidth_scale),
                                      float(latency_scale))


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


def strategy_schedules(plan: synth.Plan, sc: Scenario, xla: dict | None) -> dict:
    """Name -> ``synth.Schedule`` for every strategy on the Compare page."""
    out = {f"ours ({plan.planner})": plan.to_schedule()}
    for name in planners():
        if name != plan.planner:
            p = make_plan(str(plan.mesh), "", str(plan.src), str(plan.dst), name, plan.itemsize)
            out[name] = p.to_schedule()
    for part, d in (xla or {}).items():
        out[f"xla {part}"] = synth.Schedule.from_dict(d["schedule"])
    return out


# -- sweeps (experiments results folders) ----------------------------------------------------
def results_folders(root=None, limit: int = 50) -> list[str]:
    """Results folders (holding ``rows.jsonl``) under ``root``'s ``results*/``, newest first."""
    from pathlib import Path

    root = Path(root) if root else Path(__file__).resolve().parents[1]
    found = set()
    for pattern in ("results*/rows.jsonl", "results*/*/rows.jsonl", "results*/*/*/rows.jsonl"):
        found.update(p.parent for p in root.glob(pattern))
    ordered = sorted(found, key=lambda p: (p / "rows.jsonl").stat().st_mtime, reverse=True)
    return [str(p) for p in ordered[:limit]]


def _mtime(path) -> float:
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
    reloaded when ``rows.jsonl`` changes."""
    return _sweep_rows(path, _mtime(path))


def build_sweep_report(path: str) -> str:
    """(Re)write ``report.html`` of a results folder; returns its path."""
    report = importlib.import_module("experiments.report")
    return report.build_report(path).html_path


# -- calibration ---------------------------------------------------------------------------
def calibrated_dir() -> str:
    try:
        return str(importlib.import_module("models.profiles").CALIBRATED_DIR)
    except Exception:  # noqa: BLE001
        from pathlib import Path

        return str(Path(__file__).resolve().parents[1] / "models" / "profiles" / "calibrated")


def calibrated_profiles(folder: str) -> list[str]:
    """Calibrated profile files (``*.json`` that are not ``*.report.json``) in ``folder``."""
    from pathlib import Path

    d = Path(folder)
    if not d.is_dir():
        return []
    return sorted(str(p) for p in d.glob("*.json") if not p.name.endswith(".report.json"))


@st.cache_data(show_spinner=False, max_entries=32)
def _read_json(path: str, mtime: float) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON: {e}") from None


def read_calibration(profile_path: str) -> tuple[dict, dict | None]:
    """``(profile, report or None)`` for a calibrated profile file; the report is the
    ``*.report.json`` written next to it by ``executor calibrate``."""
    import os
    from pathlib import Path

    p = Path(profile_path)
    if not p.is_file():
        raise InputError(f"calibrated profile {profile_path} does not exist")
    prof = _read_json(str(p), os.stat(p).st_mtime)
    rp = p.with_name(p.stem + ".report.json")
    rep = _read_json(str(rp), os.stat(rp).st_mtime) if rp.is_file() else None
    return prof, rep
