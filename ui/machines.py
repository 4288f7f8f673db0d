"""Machines and models: the hardware profiles the sidebar offers, the sized
``models.HardwareProfile`` of a scenario (cached, shared between sessions), its device
memory, and the simulator's model error against published measurements.

Optional packages are imported lazily; :func:`missing` says which are not available.
"""

from __future__ import annotations

import importlib
import threading

import streamlit as st

from ui.scenario import Scenario, machine_devices


# -- optional packages --------------------------------------------------------------
def missing(module: str) -> str | None:
    """``None`` if ``module`` imports, else a one-line reason (for ``st.warning``)."""
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return f"{type(e).__name__}: {e}"
    return None



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
_MODEL_ERROR_LOCK = threading.Lock()


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



@st.cache_data(show_spinner=False, max_entries=64)
def latency_floor_s(profile: str, latency_scale: float = 1.0) -> float | None:
    """The least latency any communicating plan pays on ``profile`` (with its latency
    scaled): ``models.plan_cost.machine_cost(machine).comm_floor_s()``, the smallest launch
    cost of any communicating kind. ``None`` when models/ cannot load the profile."""
    try:
        from models.plan_cost import machine_cost

        m = machine(profile, "", 1.0, float(latency_scale))
        return float(machine_cost(m).comm_floor_s())
    except Exception:  # noqa: BLE001 - unknown profile (an old results folder): no floor
        return None
