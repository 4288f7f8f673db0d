"""Plans and code: the scenario's text parsed into a mesh and two shardings, the plan
of a planner (cached), the exported plan JSON and the generated JAX program.

Each function takes plain strings/numbers (so Streamlit can hash them) and calls
``synth`` (or ``executor.codegen``, pure text, no jax). User errors propagate as
``synth.errors.RedistributionError``; pages show them with ``st.error``.
"""

from __future__ import annotations

import importlib
import json
import re

import streamlit as st

import synth
from synth.errors import RedistributionError
from ui.errors import InputError
from ui.machines import machine, missing, scenario_devices
from ui.scenario import Scenario, parse_shape, suggest_meshes


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


#: The ``auto`` planner's budget in the app (documented in docs/app.md): synth's work
#: budget (``synth.planners.DEFAULT_BUDGET_MOVES`` moves examined), so the plan a page shows
#: does not depend on how busy the server is, and synth's wall-clock safety cap
#: (``DEFAULT_BUDGET_S``); a plan cut by that cap says so in its notes. None: synth's default.
AUTO_BUDGET_S = None

#: On a machine's cost a move costs more the larger the machine (every op is costed on it),
#: so the app gives ``auto`` ``APP_WORK_MOVE_DEVICES / devices`` moves (at least
#: ``APP_MIN_MOVES``, at most synth's default): 625 on 64 devices, 16 on 4096. A function of
#: the scenario alone, so a page shows the same plan on a busy server, and interactive.
#: Without a machine, synth's default work budget (the default cost is cheap arithmetic).
APP_WORK_MOVE_DEVICES = 40_000
APP_MIN_MOVES = 16


def app_budget_moves(num_devices: int) -> int:
    """The app's work budget for ``auto`` costed on a machine of ``num_devices`` devices."""
    from synth.planners import DEFAULT_BUDGET_MOVES

    return max(APP_MIN_MOVES, min(DEFAULT_BUDGET_MOVES, APP_WORK_MOVE_DEVICES // max(1, num_devices)))


@st.cache_data(show_spinner=False, max_entries=256)
def make_plan(mesh_text: str, shape_text: str, src_text: str, dst_text: str,
              planner: str, itemsize: int, num_devices: int | None = None,
              machine_profile: str = "", machine_size: str = "") -> synth.Plan:
    """The plan of ``planner``. ``auto`` is costed on the scenario's machine (row-major
    placement: ``models.plan_cost.machine_cost``) when one is given and models/ loads;
    otherwise on synth's documented default cost."""
    mesh, src, dst = parse_inputs(mesh_text, shape_text, src_text, dst_text, num_devices)
    kw = {"budget_s": AUTO_BUDGET_S} if planner == "auto" and AUTO_BUDGET_S is not None else {}
    if planner == "auto" and machine_profile and not missing("models"):
        m = machine(machine_profile, machine_size)
        if m.num_devices == mesh.size:
            from models.plan_cost import machine_cost

            kw["cost"] = machine_cost(m, mesh)
            kw["budget_moves"] = app_budget_moves(mesh.size)
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




# -- what the Plan page claims, in words ------------------------------------------------------
def _num(d: dict, key: str):
    """``d[key]`` as a float, or None when absent or not a number (``Plan.search`` is
    read defensively: its fields are the search's, and may change)."""
    v = d.get(key) if isinstance(d, dict) else None
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def is_textbook_optimum(plan: synth.Plan) -> bool:
    """One collective that receives exactly the receive lower bound and stays within
    ``max(src, dst)``: no plan communicates fewer times or receives fewer bytes (e.g.
    Megatron TP -> SP, one reduce-scatter)."""
    return (plan.num_collectives == 1 and plan.bound_holds and plan.recv_lower_bound_bytes > 0
            and plan.recv_bytes_max_device == plan.recv_lower_bound_bytes)


def plan_claims(plan: synth.Plan, fmt_bytes, fmt_seconds) -> list[tuple[str, str, str]]:
    """What the Plan page states next to its numbers: ``(topic, level, sentence)`` with
    level ``"ok"`` (a proven good property), ``"info"`` (a plain fact or a limit of
    what was proven) or ``"warn"`` (the plan breaks a bound, or the search did not
    finish). Topics: ``memory``, ``live``, ``received``, ``optimality``.

    Every sentence restates a field of the plan (``bound_holds``, ``max_shard_bytes``,
    ``peak_live_bytes``, ``recv_bytes_max_device``, ``recv_lower_bound_bytes``) or of
    ``Plan.search`` (``status``, ``optimal``, ``time_s``, ``lower_bound_s``, ``gap_s``,
    ``min_max_shard_bytes``, ``cost_model``); nothing is recomputed here."""
    out = []
    b = plan.bound_bytes
    s = plan.search if isinstance(plan.search, dict) else None
    if not plan.steps:
        return [("memory", "ok", "Source and target are the same sharding: nothing moves.")]
    if plan.bound_holds:
        out.append(("memory", "ok", f"Within the bound: the largest shard per device, "
                    f"{fmt_bytes(plan.max_shard_bytes)}, is at most max(src, dst) = {fmt_bytes(b)}."))
    else:
        least = _num(s or {}, "min_max_shard_bytes")
        proven = (f" No plan over the documented move set does better (proven: its least largest shard "
                  f"is {fmt_bytes(least)})." if least is not None and least >= plan.max_shard_bytes else "")
        out.append(("memory", "warn", f"Exceeds the bound: the largest shard per device, "
                    f"{fmt_bytes(plan.max_shard_bytes)}, is {plan.max_shard_bytes / b:.3g}x max(src, dst) "
                    f"= {fmt_bytes(b)}.{proven}"))
    live = plan.peak_live_bytes
    out.append(("live", "ok" if live <= 2 * b else "info",
                f"Peak live bytes (input + output of one step): {fmt_bytes(live)}, against 2 x max(src, dst) "
                f"= {fmt_bytes(2 * b)}, the most a plan within the bound can hold during a step."))
    r, lb = plan.recv_bytes_max_device, plan.recv_lower_bound_bytes
    if r == lb:
        out.append(("received", "ok", f"Received bytes: {fmt_bytes(r)} per device (busiest device), "
                    "equal to the receive lower bound (the part of its target block a device does "
                    "not already hold): no plan receives less."))
    else:
        ratio = f"{r / lb:.3g}x" if lb else "more than"
        out.append(("received", "info", f"Received bytes: {fmt_bytes(r)} per device (busiest device), "
                    f"{ratio} the receive lower bound of {fmt_bytes(lb)} (the part of its target block a "
                    "device does not already hold)."))
    textbook = is_textbook_optimum(plan)
    if textbook:
        out.append(("optimality", "ok", "Textbook optimum: one collective, which receives exactly the "
                    "receive lower bound within max(src, dst); no plan communicates fewer times or "
                    "receives fewer bytes."))
    if s is None:
        if not textbook:
            out.append(("optimality", "info", f"The `{plan.planner}` planner follows fixed rules and does "
                        "not search, so it claims no optimality; the `auto` planner searches the "
                        "documented move set for the cheapest plan on the machine."))
        return out
    status = str(s.get("status", "?"))
    model = str(s.get("cost_model", "its cost model"))
    t, low, gap = _num(s, "time_s"), _num(s, "lower_bound_s"), _num(s, "gap_s")
    if s.get("optimal") is True:
        out.append(("optimality", "ok", "Optimal over the documented move set (synth/auto.py, "
                    f"'The search space'): no plan within the memory cap costs less than "
                    f"{fmt_seconds(t)} under the {model}."))
    elif status.startswith("best found") and t is not None:
        # synth's statuses: "best found within the work budget" (deterministic) or "best found
        # before the wall-clock cap (load-dependent)"; the sentence says which
        how = ("within the search's work budget" if "budget" in status
               else status[len("best found "):])
        if low is not None and gap is not None:
            pct = f" ({100 * gap / t:.3g} % of its time)" if t > 0 else ""
            out.append(("optimality", "info", f"Best found {how}: {fmt_seconds(t)} "
                        f"under the {model}; the search's lower bound (injection only: the bytes the "
                        f"neediest device must receive over its links plus one launch, no hop latency or "
                        f"cut) is {fmt_seconds(low)}, gap {fmt_seconds(gap)}{pct}. A longer budget may find "
                        "a cheaper plan; the Simulate page's machine lower bound adds the hops and the "
                        "cuts, and can be larger."))
        else:
            out.append(("optimality", "info", f"Best found {how}: {fmt_seconds(t)} "
                        f"under the {model}; no lower bound was established."))
    else:
        level = "info" if textbook or s.get("bound_met", plan.bound_holds) else "warn"
        out.append(("optimality", level, f"Search: {status} ({fmt_seconds(t)} under the {model}); "
                    "not proven optimal over every plan."))
    return out


#: The step table's columns (``plan.rows()`` fields, formatted).
STEP_COLUMNS = ("step", "collective", "type after", "local shape", "shard bytes", "received bytes (max device)",
                "pending sum over", "padded")


def steps_table(plan: synth.Plan) -> str:
    """The plan's steps as a Markdown table (a handful of rows: no data grid, so the first
    paint loads neither pandas nor the grid's JavaScript). Types, shapes and collectives are
    code spans, shown as typed (types and shapes kept on one line). Example row: ``| 1 | `AllToAll(1->0, model)` |
    `[8192{data,model}, 32768]` | `(128, 32768)` | 8 MiB | 6 MiB | - | - |``."""
    from ui.fmt import fmt_bytes

    def code(text, keep=False):  # keep: no line break inside (non-breaking spaces)
        text = str(text).replace("`", "'")
        return "`" + (text.replace(" ", "\u00a0") if keep else text) + "`"

    lines = ["| " + " | ".join(STEP_COLUMNS) + " |", "|" + "---|" * len(STEP_COLUMNS)]
    for r in plan.rows():
        cells = [str(r["step"]), code(r["collective"]), code(r["type"], True), code(tuple(r["local_shape"]), True),
                 fmt_bytes(r["shard_bytes"]), fmt_bytes(r["recv_bytes"]),
                 ",".join(r.get("unreduced") or []) or "-", "yes" if r.get("padded") else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the Plan page's pictures, cached (plotly imported only here, off the first paint; the memory
#    chart is Vega-Lite, ui.charts) ---------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=128)
def layout_picture(type_text: str, mesh_text: str, title: str, exact: bool):
    """``(figure, summarised, per-axis text)`` of a type's layout on a mesh: the exact
    grid, or its summary when the grid is too big (``ui.figures.layout_needs_summary``)
    and ``exact`` is false. Shared between sessions (figures are not mutated)."""
    from ui import figures

    mesh = synth.Mesh.parse(mesh_text)
    t = synth.ArrayType.parse(type_text).check(mesh)
    big = figures.layout_needs_summary(t, mesh)
    fig = (figures.layout_summary_figure(t, mesh, title) if big and not exact
           else figures.layout_figure(t, mesh, title))
    return fig, big and not exact, figures.layout_axes_text(t, mesh)


@st.cache_data(show_spinner=False, max_entries=64)
def _plan_memory_chart(plan_json_text: str, easy_peak_bytes: int, capacity_bytes: int | None) -> dict:
    from ui import charts

    plan = synth.Plan.from_dict(json.loads(plan_json_text))
    return charts.plan_memory_spec(plan, easy_peak_bytes, capacity_bytes)


def plan_memory_chart(plan: synth.Plan, easy_peak_bytes: int, capacity_bytes: int | None) -> dict:
    """The memory chart's Vega-Lite spec (``ui.charts.plan_memory_spec``, cached): the
    Plan page's first picture, drawn without plotly so the first load does not wait for it."""
    return _plan_memory_chart(plan.to_json(), int(easy_peak_bytes), capacity_bytes)


@st.cache_resource(show_spinner=False, max_entries=64)
def _recv_figure(plan_json_text: str):
    from ui import figures

    return figures.recv_heatmap(synth.Plan.from_dict(json.loads(plan_json_text)))


def recv_figure(plan: synth.Plan):
    """The received-bytes heat map of a plan (plotly, cached, shared between sessions)."""
    return _recv_figure(plan.to_json())
