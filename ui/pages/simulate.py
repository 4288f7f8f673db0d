"""Simulate page: the plan replayed event by event on the machine's topology."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from synth.errors import RedistributionError
from ui import compute, scenario
from ui.fmt import fmt_bytes, fmt_ratio, fmt_seconds

PLACEMENT_HELP = (
    "Which chip each mesh device runs on. Empty or 'row-major': device d on chip d. "
    "'data=X*Y,model=Z' lays each mesh axis over physical dimensions (major to minor); "
    "'devices:3,1,0,2' lists the chip of every device. See docs/simulator.md."
)


def _ops_frame(res) -> pd.DataFrame:
    return pd.DataFrame({
        "op": [o["index"] for o in res.ops],
        "kind": [o["kind"] for o in res.ops],
        "algorithm": [o.get("algorithm") or "-" for o in res.ops],
        "start": [fmt_seconds(o["start_s"]) for o in res.ops],
        "duration": [fmt_seconds(o["duration_s"]) for o in res.ops],
        "analytic estimate": [fmt_seconds(o["analytic_s"]) for o in res.ops],
        "recv per device": [fmt_bytes(o["recv_bytes"]) for o in res.ops],
        "out buffer": [fmt_bytes(o["out_bytes"]) for o in res.ops],
    })


def main():
    st.title("Simulate")
    st.caption("The plan's device-level schedule replayed on the machine (SimPy, links shared "
               "by concurrent flows). Edit the scenario in the sidebar.")
    why = compute.missing("simulator")
    if why:
        st.warning(f"The simulator package is not available ({why}); this page needs it.")
        return
    sc = scenario.current()
    placement = st.text_input("Placement", key="sim_placement", placeholder="row-major",
                              help=PLACEMENT_HELP)
    try:
        plan = compute.plan_for(sc)
        with st.spinner(f"Simulating {plan.num_collectives} collective(s) on {sc.machine}..."):
            res = compute.simulate_plan(plan, sc, placement)
            figs = compute.simulation_figures(plan, sc, placement)
    except RedistributionError as e:
        st.error(str(e))
        return

    st.markdown(f"**{plan.src}** &rarr; **{plan.dst}** on `{plan.mesh}`, planner `{plan.planner}`, "
                f"machine `{res.machine.spec}`, placement `{res.placement.text}`")
    for w in res.warnings:
        st.warning(w)
    c = st.columns(5)
    c[0].metric("simulated time", fmt_seconds(res.time_s))
    c[1].metric("lower bound", fmt_seconds(res.lower_bound_s),
                help=f"{res.lower_bound_kind} bound: the bytes a device must receive over its "
                     "injection bandwidth.")
    c[2].metric("time / bound", fmt_ratio(res.ratio_to_bound))
    c[3].metric("peak memory (max device)", fmt_bytes(res.peak_bytes_max_device),
                help=f"HBM capacity {fmt_bytes(res.machine.hbm_capacity_bytes)}.")
    c[4].metric("busiest link", fmt_bytes(res.link_bytes_max),
                help=f"Analytic (alpha-beta) estimate of the whole plan: {fmt_seconds(res.analytic_s)}.")

    if res.ops:
        st.plotly_chart(figs["timeline"], key="sim_timeline")
    else:
        st.info("The plan has no steps (source and target are the same sharding): nothing to "
                "replay. Pick another target in the sidebar.")
    st.plotly_chart(figs["topology"], key="sim_topology")
    st.plotly_chart(figs["memory"], key="sim_memory")
    st.subheader("Ops")
    st.dataframe(_ops_frame(res), hide_index=True)


main()
