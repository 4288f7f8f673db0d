"""Compare page: our plan vs the easy plan vs XLA's own resharding, simulated on the
chosen machine (with what-if knobs), plus measured numbers on the local backend."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from synth.errors import RedistributionError
from ui import background, charts, compute, scenario, share, xla_compare
from ui.errors import escape_md
from ui.fmt import fmt_bandwidth, fmt_bytes, fmt_ratio, fmt_seconds, table_cells
from ui.texts import COMPARE_TABLES, lower_bound_help
from ui.texts import model_error_text as simulate_page_model_error

SCALES = [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0]


def _case_key(mesh, plan, dtype) -> str:
    return f"{mesh}|{plan.src}|{plan.dst}|{dtype}"


def _whatif(sc, mesh):
    st.subheader("What if")
    c = st.columns(4)
    for k in ("cmp_bw_scale", "cmp_lat_scale", "cmp_mesh", "cmp_placement"):
        share.restore(k)
    for k in ("cmp_bw_scale", "cmp_lat_scale"):
        if st.session_state.get(k) not in SCALES:
            st.session_state[k] = 1.0
    bw = c[0].select_slider("Link bandwidth scale", SCALES, key="cmp_bw_scale",
                            format_func=lambda v: f"x{v:g}", on_change=share.save_page_fields)
    lat = c[1].select_slider("Latency scale", SCALES, key="cmp_lat_scale",
                             format_func=lambda v: f"x{v:g}", on_change=share.save_page_fields)
    shapes = scenario.mesh_shapes(mesh.names, mesh.size, keep=str(mesh))  # bounded list
    if st.session_state.get("cmp_mesh") not in shapes:
        st.session_state["cmp_mesh"] = str(mesh)
    mesh_text = c[2].selectbox("Mesh shape", shapes, key="cmp_mesh", on_change=share.save_page_fields,
                               help="Same axis names and device count, other sizes.")
    placement = c[3].text_input("Placement", key="cmp_placement", placeholder="row-major",
                                on_change=share.save_page_fields,
                                help="As on the Simulate page, e.g. data=X*Y,model=Z.")
    share.save_page_fields()
    return bw, lat, mesh_text, placement


CPU_NOTE = ("These times come from CPU devices of this host, which are not the simulated machine: "
            "CPU 'collectives' are memory copies between threads, with no links, topology or "
            "launch costs like a TPU's or GPU's. They say which strategy moves less data here, "
            "not which one a {machine} would run faster.")


def main():
    st.title("Compare")
    st.caption("Every strategy lowered to a device-level schedule and replayed by the same "
               "simulator on the chosen machine; XLA's schedules come from its compiled HLO.")
    why = compute.missing("simulator")
    if why:
        st.warning(escape_md(f"The simulator package is not available ({why}); this page needs it."))
        return
    sc = scenario.current()
    try:
        base = compute.plan_for(sc)
    except RedistributionError as e:
        st.error(escape_md(str(e)))
        return
    bw, lat, mesh_text, placement = _whatif(sc, base.mesh)
    try:
        plan = compute.make_plan(mesh_text, "", str(base.src), str(base.dst), sc.planner, sc.itemsize,
                                 compute.scenario_devices(sc), sc.machine_profile, sc.machine_size)
    except RedistributionError as e:
        st.error(escape_md(f"mesh {mesh_text}: {e}"))
        return
    st.session_state["cmp_plan"] = plan.to_dict()  # the plan this page shows (tests check it)

    key = _case_key(mesh_text, plan, sc.dtype)
    machine_spec = f"{sc.machine_profile}:{sc.machine_size}"
    xkey = xla_compare.case_key(machine_spec, mesh_text, plan, sc.dtype, placement)
    share.restore("cmp_xla")
    asked = st.session_state.setdefault("cmp_xla_asked", [])
    if st.session_state.get("cmp_xla") == "1" and xkey not in asked:  # from a shared link
        asked.append(xkey)
    xla, xla_error, compiled = None, None, None
    have_exec = compute.missing("executor") is None
    if not have_exec:
        st.info("XLA's schedules need the executor package (JAX), which is not available here.")
    elif xkey in asked or xla_compare.done(xkey) is not None:
        try:
            with st.spinner(f"Compiling ours, XLA's resharding (Shardy and GSPMD) and Shardy's "
                            f"reshard-to-collectives plan for {machine_spec} (compile-only)..."):
                compiled = xla_compare.compiled_strategies(xkey, machine_spec, mesh_text, plan, sc.dtype, placement)
            st.session_state["cmp_xla"] = "1"
            share.save_page_fields()
            if xkey not in asked:
                asked.append(xkey)
        except RedistributionError as e:
            xla_error = str(e)
    else:
        if st.button("Add XLA's resharding (compile with the machine's compiler)", key="cmp_xla_button",
                     help="Compiles our plan's shard_map program, jax.jit(identity, out_shardings=...) under "
                          "both partitioners and Shardy's reshard-to-collectives plan with the machine's own "
                          "compiler (libtpu for TPU machines, XLA's GPU compiler for GPU machines when JAX's "
                          "CUDA plugin is installed, the CPU backend for cpu-* machines), ahead of time in a "
                          "subprocess; reads each schedule from its compiled HLO. Compile-only: nothing runs. "
                          "Takes seconds to a minute; kept for every session."):
            asked.append(xkey)
            st.session_state["cmp_xla"] = "1"
            share.save_page_fields()
            st.rerun()
    if xla_error:
        st.error(escape_md(xla_error))
    comp_scheds, comp_errors = xla_compare.schedules(compiled) if compiled else ({}, {})
    for name, why in comp_errors.items():
        st.warning(escape_md(f"{name}: {why}"))

    try:
        schedules = compute.strategy_schedules(plan, sc, xla)
        schedules.update(comp_scheds)
        ok, refused = compute.split_replayable(schedules, sc.machine_profile, sc.machine_size)
        if refused and ok:  # simulate the others; say which were left out and why
            for name, why in refused.items():
                st.warning(escape_md(f"{name}: not simulated: {why}"))
            schedules = ok
        view = background.resolve(compute.compare_simulations(schedules, mesh_text, sc, placement, bw, lat))
    except RedistributionError as e:
        st.error(escape_md(str(e)))
        return
    if view is None:
        return
    results = view["strategies"]

    ours = next(iter(results.values()))["summary"]
    bound = ours["lower_bound_s"]
    rows = []
    for name, r in results.items():
        sched = schedules[name]
        sm = r["summary"]
        comm = [o for o in r["ops"] if o.get("busbw_Bps") is not None]
        slowest = max(comm, key=lambda o: o["duration_s"], default=None)
        local_s = sum(o["duration_s"] for o in r["ops"] if o["kind"] in ("copy", "dyn_slice"))
        rows.append({
            "strategy": name,
            "compiler": sched.meta.get("compiler", "none"),
            "full rematerialization": ("YES" if sched.meta.get("full_remat") else "no")
            if name.startswith("xla ") else "-",
            "collectives": sum(1 for op in sched.ops if not op.is_local),
            "simulated time": fmt_seconds(sm["time_s"]),
            "collectives only": fmt_seconds(sm["time_s"] - local_s),
            "local ops": fmt_seconds(local_s),
            "compiled temp": fmt_bytes(sched.meta.get("temp_bytes")) if sched.meta.get("temp_bytes") is not None
            else "-",
            "compiled peak": fmt_bytes(sched.meta.get("compiled_peak_bytes"))
            if sched.meta.get("compiled_peak_bytes") is not None else "-",
            "time / lower bound": fmt_ratio(sm["time_s"] / bound if bound > 0 else None),
            "peak memory per device": fmt_bytes(sm["peak_bytes_max_device"]),
            "bytes on links": fmt_bytes(sm["link_bytes_total"]),
            "slowest op": (f"{slowest['index']}: {slowest['kind']} ({slowest.get('algorithm') or '-'})"
                           if slowest else "-"),
            "its algbw": fmt_bandwidth(slowest["algbw_Bps"]) if slowest else "-",
            "its busbw": fmt_bandwidth(slowest["busbw_Bps"]) if slowest else "-",
            "bus peak": fmt_bandwidth(slowest["bus_peak_Bps"]) if slowest else "-",
        })
    st.markdown(f"**{plan.src}** &rarr; **{plan.dst}** on `{plan.mesh}`, machine "
                f"`{ours['machine_spec']}` (bandwidth x{bw:g}, latency x{lat:g}), placement "
                f"`{ours['placement_text']}`; lower bound **{fmt_seconds(bound)}** "
                f"(binds on: {ours['lower_bound_kind']})")
    st.caption(f"Binding term {ours['lower_bound_kind']}: {lower_bound_help(ours['lower_bound_kind'])}")
    me = simulate_page_model_error(compute.model_error(ours["machine_spec"]))
    if me:
        st.caption(me)
    if compiled:
        st.markdown(f"**Compiler:** `{compiled['compiler']}` ({compiled['compiler_text']}) for ours, XLA and "
                    f"Shardy's plan alike. **Element type:** {xla_compare.dtype_text(compiled, sc.dtype)}.")
        mf = compiled.get("memory_first") or {}
        if mf.get("plan"):  # the memory-first rule replaced the page's plan in 'ours (compiled)'
            st.info("**Memory first** (docs/executor.md): " + escape_md(mf.get("note") or "")
                    + f" The row 'ours (compiled)' is that plan: {escape_md(', '.join(mf.get('plan_steps') or []))}.")
        if compiled.get("collectives_only"):
            st.warning("Collectives only: " + compiled["collectives_only"] + ". Compare the 'collectives only' "
                       "column, not the totals.")
        else:
            st.caption("The rows marked with a compiler were compiled by it and read back from their HLO by the "
                       "same reader; their local ops (copies, transposes, slices) are costed at the machine's "
                       "HBM bandwidth, so their totals compare. Rows with compiler 'none' are plans' own "
                       "schedules: compare their collectives only. 'shardy r2c' is the plan Shardy's own "
                       "reshard-to-collectives pass chooses, lowered and compiled like ours (XLA in jax 0.10.2 "
                       "cannot be made to use that pass itself; see docs/executor.md).")
    table = pd.DataFrame(rows)
    for title, cols, note in COMPARE_TABLES:  # three narrow tables, not one wider than the page
        st.markdown(f"**{title}**")
        # a static table (a handful of rows): the data grid is 1.2 MB of JavaScript and a
        # canvas per table that every visit to this page would wait for
        st.table(table_cells(table[["strategy", *cols]]), hide_index=True)
        if note:
            st.caption(note)

    names = list(results)
    # Vega-Lite, not plotly: the page fetches no plotly.js (4.7 MB) and draws in a fraction of the time
    spec = charts.strategies_spec(names, [results[n]["summary"]["time_s"] for n in names],
                                  [results[n]["summary"]["peak_bytes_max_device"] for n in names], bound)
    st.vega_lite_chart(spec, key="cmp_chart")
    sim_times = {n: results[n]["summary"]["time_s"] for n in names}
    _xla_steps(comp_scheds)

    st.subheader("Measured on this machine's JAX backend")
    st.caption("Runs our plan (shard_map) and XLA's resharding for real on this host's JAX CPU backend, "
               f"one CPU device per mesh device ({plan.mesh.size}), standing in for the {plan.mesh.size} "
               f"devices of `{machine_spec}`; checks every output element, and times them. "
               "CPU devices are not the simulated machine: these numbers say which strategy moves less "
               "data here, not what a TPU or GPU would take. "
               f"The array is {fmt_bytes(plan.src.num_elems() * plan.itemsize)}; large arrays on many "
               "CPU devices take minutes.")
    mkey = "measure|" + key + "|" + sc.planner
    if not have_exec:
        st.info("Measuring needs the executor package (JAX).")
        return
    if st.button("Measure locally", key="cmp_measure_button") or mkey in st.session_state.get(
            "cmp_measured", []):
        st.session_state.setdefault("cmp_measured", [])
        if mkey not in st.session_state["cmp_measured"]:
            st.session_state["cmp_measured"].append(mkey)
        try:
            with st.spinner("Running and timing ours, XLA Shardy and XLA GSPMD..."):
                m = compute.measure_local(mesh_text, str(plan.src), str(plan.dst), sc.dtype, sc.planner)
        except RedistributionError as e:
            st.error(escape_md(str(e)))
            return
        mrows = [{
            "strategy": k,
            "correct": v.get("correct"),
            "median time": fmt_seconds(v.get("time_s")),
            "p10..p90": f"{fmt_seconds(v.get('time_p10_s'))} .. {fmt_seconds(v.get('time_p90_s'))}",
            "temp + output bytes": fmt_bytes(v.get("temp_plus_output_bytes")),
            "full rematerialization": v.get("full_remat"),
            "collectives": ", ".join(v.get("collectives", [])),
        } for k, v in m.items()]
        st.dataframe(pd.DataFrame(mrows), hide_index=True)
        _winners_note(sim_times, m, ours["machine_spec"])


def _xla_steps(comp_scheds: dict) -> None:
    """XLA's step table per partitioner, with the rematerialisation explained."""
    xs = {n: s for n, s in comp_scheds.items() if n.startswith("xla ")}
    if not xs:
        return
    st.subheader("XLA's steps")
    ours = next((s for n, s in comp_scheds.items() if n.startswith("ours")), None)
    for name, s in xs.items():
        why = xla_compare.remat_text(s)
        nc = sum(1 for o in s.ops if not o.is_local)
        st.markdown(f"**{name}** ({s.meta.get('compiler', '?')}): {len(s.ops)} ops, "
                    f"{nc} collective{'s' if nc != 1 else ''}; full rematerialization: "
                    + ("**YES**" if why else "no"))
        if why:
            peak = ours.meta.get("compiled_peak_bytes") if ours is not None else None
            st.warning("Rematerialisation: " + why + (f" Ours: a peak of {fmt_bytes(peak)} per device."
                                                      if peak is not None else ""))
        st.dataframe(pd.DataFrame(xla_compare.step_rows(s)), hide_index=True, key=f"cmp_steps_{name}")


def _winners_note(sim_times: dict, measured: dict, machine: str) -> None:
    """Say so when the measured and simulated winners differ (they often do)."""
    def norm(name):
        name = name.lower()
        if name.startswith("ours"):
            return "ours"
        return name.replace("xla ", "xla_").replace(" ", "_")

    sim = {norm(k): v for k, v in sim_times.items()}
    meas = {norm(k): v.get("time_s") for k, v in measured.items() if v.get("time_s") is not None}
    common = [k for k in meas if k in sim or k.replace("xla_", "xla ") in sim]
    if len(common) < 2:
        st.caption(CPU_NOTE.format(machine=machine))
        return
    sim_win = min(common, key=lambda k: sim.get(k, float("inf")))
    meas_win = min(common, key=lambda k: meas[k])
    if sim_win != meas_win:
        st.warning(escape_md(f"Measured here, **{meas_win}** is fastest; simulated on {machine}, **{sim_win}** is. "
                   + CPU_NOTE.format(machine=machine)))
    else:
        st.caption(f"Measured and simulated agree that {sim_win} is fastest. " + CPU_NOTE.format(machine=machine))


main()
