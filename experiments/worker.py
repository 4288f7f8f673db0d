"""Run one work unit in a worker process: build the schedule once, simulate it on
every machine and what-if knob of the unit, and return one row per (machine, knobs).

A failure anywhere in the unit turns all its rows into error rows (``status='error'``,
``error`` = the message); a failure of one simulation only fails that row.
"""

from __future__ import annotations

import time
import traceback

from experiments import backends
from experiments.case import ExperimentError

#: Column order of the results (CSV / Parquet / JSONL).
ROW_FIELDS = [
    "id", "status", "error", "suite", "case", "layout", "ref", "mesh", "num_devices", "src", "dst",
    "shape", "dtype", "itemsize", "array_bytes", "machine", "planner", "bandwidth_scale",
    "latency_scale", "placement", "baseline", "compiler", "time_s", "comm_time_s", "local_time_s",
    "lower_bound_s", "time_over_lb", "temp_bytes", "compiled_peak_bytes",
    "peak_bytes", "bound_bytes", "max_shard_bytes", "max_shard_over_bound", "peak_over_bound",
    "peak_live_bytes", "recv_bytes_max_device", "recv_lower_bound_bytes", "num_collectives",
    "num_ops", "full_remat", "link_bytes_max", "measured_time_s", "measured_temp_bytes",
    "measured_correct", "schedule_s", "wall_s", "sim_backend", "itemsize_knob", "notes",
]


def base_row(unit, row_id, machine, knobs) -> dict:
    c = unit.case
    row = dict.fromkeys(ROW_FIELDS)
    row.update({
        "id": row_id, "suite": c.suite, "case": c.name, "layout": c.layout, "ref": c.ref,
        "mesh": c.mesh, "num_devices": c.num_devices, "src": c.src, "dst": c.dst,
        "dtype": c.dtype, "itemsize": unit.itemsize, "machine": machine.label,
        "planner": unit.planner, "bandwidth_scale": knobs.bandwidth_scale,
        "latency_scale": knobs.latency_scale, "placement": knobs.placement,
        "baseline": knobs.is_baseline(), "itemsize_knob": knobs.itemsize,
    })
    try:
        mesh, src, _ = c.parsed()
        row["shape"] = "x".join(str(s) for s in src.shape)
        row["array_bytes"] = src.num_elems() * unit.itemsize
    except Exception:  # noqa: BLE001 - a malformed case still gets an error row
        pass
    return row


def error_rows(unit, status: str, message: str) -> list[dict]:
    rows = []
    for rid, m, k in unit.rows:
        r = base_row(unit, rid, m, k)
        r["status"], r["error"] = status, message
        rows.append(r)
    return rows


def _message(e: BaseException) -> str:
    if isinstance(e, ValueError):  # the RedistributionError family: the message says it all
        return f"{type(e).__name__}: {e}"
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return f"{type(e).__name__}: {e}{where}"


def run_unit(unit, xla_max_devices: int = backends.XLA_MAX_DEVICES, measure_opts=None,
             delay_s: float = 0.0, engine: str = "simpy", compile_planners=backends.DEFAULT_COMPILE) -> list[dict]:
    """The rows of one unit. Each row's schedule, and so its ``compiler``:

    * XLA's reshard: compiled by the row's machine's compiler (libtpu, xla-gpu,
      xla-cpu), or by the CPU backend where that compiler is not installed (the row's
      notes say the comparison is collectives-only);
    * ``shardy-r2c`` and our planners listed in ``compile_planners``: the plan's
      ``shard_map`` program compiled by the machine's compiler when it is installed,
      read back from its HLO like XLA's (local ops included); otherwise, and for the
      other planners, the plan's own schedule (``compiler = none``)."""
    t0 = time.perf_counter()
    try:
        if delay_s:
            time.sleep(delay_s)
        case = unit.case.check()
        mesh, src, dst = case.parsed()
        from synth.plan import recv_lower_bound_bytes

        bound = max(src.shard_elems(mesh), dst.shard_elems(mesh)) * unit.itemsize
        lb_bytes = recv_lower_bound_bytes(mesh, src, dst, unit.itemsize)
        notes, plan = "", None
        if unit.planner in backends.OUR_PLANNERS and unit.planner != "auto":
            plan, _ = backends.our_schedule(case, unit.planner, unit.itemsize)
        elif unit.planner in backends.SHARDY_PLANNERS:
            plan = backends.shardy_plan(case, unit.itemsize)
        # auto plans for the machine it runs on (per row below, with the machine's cost);
        # XLA's schedule depends on the machine's compiler (per row below).
        if plan is not None:
            notes = "; ".join(plan.notes)
        schedule_s = time.perf_counter() - t0
        measured = {}
        if unit.measure:
            try:
                measured = backends.measure(case, unit.planner, unit.itemsize, **(measure_opts or {}))
            except Exception as e:  # noqa: BLE001 - a measurement failure is noted, not fatal
                notes = (notes + "; " if notes else "") + f"measure failed: {_message(e)}"
    except Exception as e:  # noqa: BLE001 - every failure becomes error rows
        return error_rows(unit, "error", _message(e))

    compiles = unit.planner in backends.SHARDY_PLANNERS or unit.planner in tuple(compile_planners or ())
    rows = []
    machines: dict = {}
    cache: dict = {}
    auto_plans: dict = {}
    for rid, m, k in unit.rows:
        r = base_row(unit, rid, m, k)
        r.update({"bound_bytes": bound, "recv_lower_bound_bytes": int(lb_bytes), "notes": notes,
                  "schedule_s": schedule_s, **measured})
        t1 = time.perf_counter()
        try:
            key = (m.profile, m.sizes, k.bandwidth_scale, k.latency_scale)
            if key not in machines:
                machines[key] = backends.load_machine(m.profile, case.num_devices, m.sizes_dict(),
                                                      k.bandwidth_scale, k.latency_scale)
            machine = machines[key]
            rplan, row_notes = plan, [notes]
            if unit.planner == "auto":
                akey = (key, k.placement)
                if akey not in auto_plans:
                    auto_plans[akey] = backends.our_schedule(case, "auto", unit.itemsize, machine=machine,
                                                             placement=k.placement)[0]
                rplan = auto_plans[akey]
                row_notes = list(rplan.notes) + [notes]
            if unit.planner in backends.XLA_PLANNERS:
                rsched = backends.xla_schedule_cached(cache, case, unit.planner, unit.itemsize, xla_max_devices,
                                                      machine, k.placement)
                row_notes = [str(rsched.meta.get("full_remat_reason", "")), notes]
            elif compiles and backends.compiler_missing(machine) is None:
                strategy = "shardy-r2c" if unit.planner in backends.SHARDY_PLANNERS else "ours"
                try:
                    rsched = backends.compiled_plan_cached(cache, case, rplan, unit.itemsize, machine, k.placement,
                                                           strategy)
                except backends.TargetRejected as e:  # e.g. no 6-chip TPU slice: the plan's own schedule
                    rsched = rplan.to_schedule()
                    rsched.meta.update({"compiler": "none", "collectives_only": f"not compiled: {e}"})
                if unit.planner == "auto" and rsched.meta.get("compiler") != "none":
                    # memory first (executor.memfirst): compiled temp bytes above XLA's pick
                    # another plan within the bound; the row's notes say which and why
                    rplan, rsched, choice = backends.memory_first(cache, case, rplan, rsched, unit.itemsize,
                                                                  machine, k.placement, xla_max_devices)
                    if choice.note:
                        row_notes = [choice.note] + row_notes
            else:
                rsched = rplan.to_schedule()
                rsched.meta["compiler"] = "none"
                if compiles:
                    rsched.meta["collectives_only"] = f"not compiled: {backends.missing_short(machine)}"
            rsm = backends.schedule_metrics(rsched)
            rpeak = (rplan.peak_live_bytes if rplan is not None and rsched.meta.get("compiler") == "none"
                     else int(rsched.meta.get("peak_pair_bytes", rsm["peak_pair_bytes"])))
            row_notes += [str(rsched.meta.get(x, "")) for x in ("collectives_only",)]
            if rsched.meta.get("compiler") == "xla-cpu" and "float32" in str(rsched.meta.get("dtype_handling", "")) \
                    and unit.itemsize != 4:
                row_notes.append(str(rsched.meta["dtype_handling"]))
            r["notes"] = "; ".join(x for x in row_notes if x)
            r["compiler"] = rsched.meta.get("compiler", "none")
            r["temp_bytes"] = rsched.meta.get("temp_bytes")
            r["compiled_peak_bytes"] = rsched.meta.get("compiled_peak_bytes")
            if unit.planner != "auto" or rsched.meta.get("compiler") != "none":
                r["schedule_s"] = schedule_s + time.perf_counter() - t1
            r.update({
                "max_shard_bytes": rsm["max_buffer_bytes"], "max_shard_over_bound": rsm["max_buffer_bytes"] / bound,
                "peak_live_bytes": int(rpeak), "recv_bytes_max_device": rsm["recv_bytes_max_device"],
                "num_collectives": rsm["num_collectives"], "num_ops": rsm["num_ops"],
                "full_remat": bool(rsched.meta.get("full_remat")) if unit.planner in backends.XLA_PLANNERS
                else None,
            })
            sim = backends.simulate(rsched, machine, mesh, k.placement, engine)
            r.update(sim)
            if r.get("lower_bound_s"):
                r["time_over_lb"] = r["time_s"] / r["lower_bound_s"]
            r["peak_over_bound"] = r["peak_bytes"] / bound
            r["status"] = "ok"
        except Exception as e:  # noqa: BLE001
            r["status"], r["error"] = "error", _message(e)
        r["wall_s"] = schedule_s + time.perf_counter() - t1
        rows.append(r)
    return rows


__all__ = ["ROW_FIELDS", "run_unit", "error_rows", "ExperimentError"]
