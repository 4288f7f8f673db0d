"""Compare page: our plan vs the easy plan vs XLA's own resharding, simulated on the
chosen machine (with what-if knobs), plus measured numbers on the local backend."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from synth.errors import RedistributionError
from ui import background, compute, figures, scenario, share
from ui.errors import escape_md
from ui.fmt import fmt_bandwidth, fmt_bytes, fmt_ratio, fmt_seconds
from ui.texts import lower_bound_help
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
    asked = st.session_state.setdefault("cmp_xla_asked", [])
    xla, xla_error = None, None
    have_exec = compute.missing("executor") is None
    if not have_exec:
        st.info("XLA's schedules need the executor package (JAX), which is not available here.")
    elif key in asked:
        try:
            with st.spinner(f"Compiling XLA's resharding on {plan.mesh.size} CPU devices "
                            "(Shardy and GSPMD)..."):
                xla = compute.xla_schedules(mesh_text, str(plan.src), str(plan.dst), sc.dtype)
        except RedistributionError as e:
            xla_error = str(e)
    else:
        if st.button("Add XLA's resharding (compile with JAX)", key="cmp_xla_button",
                     help="Runs jax.jit(identity, out_shardings=...) under both partitioners in a "
                          "subprocess with the mesh's device count, and reads the schedule from "
                          "the compiled HLO. Takes seconds to a minute; cached."):
            asked.append(key)
            st.rerun()
    if xla_error:
        st.error(escape_md(xla_error))

    try:
        schedules = compute.strategy_schedules(plan, sc, xla)
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
        rows.append({
            "strategy": name,
            "collectives": sum(1 for op in sched.ops if not op.is_local),
            "simulated time": fmt_seconds(sm["time_s"]),
            "time / lower bound": fmt_ratio(sm["time_s"] / bound if bound > 0 else None),
            "peak memory per device": fmt_bytes(sm["peak_bytes_max_device"]),
            "bytes on links": fmt_bytes(sm["link_bytes_total"]),
            "slowest op": (f"{slowest['index']}: {slowest['kind']} ({slowest.get('algorithm') or '-'})"
                           if slowest else "-"),
            "its algbw": fmt_bandwidth(slowest["algbw_Bps"]) if slowest else "-",
            "its busbw": fmt_bandwidth(slowest["busbw_Bps"]) if slowest else "-",
            "bus peak": fmt_bandwidth(slowest["bus_peak_Bps"]) if slowest else "-",
            "full rematerialization": (str(xla[name.split()[-1]]["full_remat"])
                                       if xla and name.startswith("xla ") else "-"),
        })
    st.markdown(f"**{plan.src}** &rarr; **{plan.dst}** on `{plan.mesh}`, machine "
                f"`{ours['machine_spec']}` (bandwidth x{bw:g}, latency x{lat:g}), placement "
                f"`{ours['placement_text']}`; lower bound **{fmt_seconds(bound)}** "
                f"(binds on: {ours['lower_bound_kind']})")
    st.caption(f"Binding term {ours['lower_bound_kind']}: {lower_bound_help(ours['lower_bound_kind'])}")
    me = simulate_page_model_error(compute.model_error(ours["machine_spec"]))
    if me:
        st.caption(me)
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    st.caption("algbw/busbw of each strategy's slowest op, by nccl-tests' conventions (see the Simulate "
               "page); bus peak: a chip's injection bandwidth.")

    names = list(results)
    fig = figures.strategies_figure(names, [results[n]["summary"]["time_s"] for n in names],
                                    [results[n]["summary"]["peak_bytes_max_device"] for n in names], bound)
    st.plotly_chart(fig, key="cmp_chart")
    sim_times = {n: results[n]["summary"]["time_s"] for n in names}

    st.subheader("Measured on this machine's JAX backend")
    st.caption("Runs our plan (shard_map) and XLA's resharding for real on the local backend "
               f"({plan.mesh.size} CPU devices here), checks every output element, and times them. "
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
