"""Plan page: which collectives run, and how per-device memory rises and falls."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from synth.errors import RedistributionError
from ui import compute, figures, scenario
from ui.fmt import fmt_bytes


def _steps_frame(plan) -> pd.DataFrame:
    rows = plan.rows()
    return pd.DataFrame({
        "step": [r["step"] for r in rows],
        "collective": [r["collective"] for r in rows],
        "type after": [r["type"] for r in rows],
        "local shape": [str(tuple(r["local_shape"])) for r in rows],
        "shard bytes": [fmt_bytes(r["shard_bytes"]) for r in rows],
        "received bytes (max device)": [fmt_bytes(r["recv_bytes"]) for r in rows],
    })


def main():
    st.title("Plan")
    st.caption("Which collectives turn the source sharding into the target, and what each "
               "step holds per device. Edit the scenario in the sidebar.")
    sc = scenario.current()
    try:
        plan = compute.plan_for(sc)
        easy = compute.plan_for(sc, "easy") if sc.planner != "easy" else plan
    except RedistributionError as e:
        st.error(str(e))
        return

    st.markdown(f"**{plan.src}** &rarr; **{plan.dst}** on mesh `{plan.mesh}` "
                f"({plan.mesh.size} devices, {sc.dtype}), planner `{plan.planner}`")
    for note in plan.notes:
        st.warning(note)
    if not plan.steps:
        st.info("Source and target are the same sharding: nothing moves and no collective runs.")

    c = st.columns(5)
    c[0].metric("collectives", plan.num_collectives, help="Communicating steps (DynSlice excluded).")
    c[1].metric("largest shard", fmt_bytes(plan.max_shard_bytes),
                delta=("within max(src, dst)" if plan.bound_holds else "exceeds max(src, dst)"),
                delta_color="normal" if plan.bound_holds else "inverse",
                help=f"The paper's measure; bound max(src, dst) = {fmt_bytes(plan.bound_bytes)}.")
    c[2].metric("peak live (in + out)", fmt_bytes(plan.peak_live_bytes),
                help="Largest input+output buffer pair live during one step.")
    c[3].metric("received per device", fmt_bytes(plan.recv_bytes_max_device),
                help=f"Lower bound: {fmt_bytes(plan.recv_lower_bound_bytes)} (the part of its "
                     "target block a device does not already hold).")
    c[4].metric("easy plan's largest shard", fmt_bytes(easy.max_shard_bytes),
                help="Gather everything, then slice.")

    st.subheader("Steps")
    st.dataframe(_steps_frame(plan), hide_index=True)
    st.plotly_chart(figures.plan_memory_figure(plan, easy.max_shard_bytes), key="plan_memory_chart")
    with st.expander("Bytes received per device per step"):
        st.plotly_chart(figures.recv_heatmap(plan), key="plan_recv_heatmap")

    st.subheader("Export")
    doc = compute.plan_document(plan, sc)
    text = json.dumps(doc, indent=2)
    e1, e2 = st.columns(2)
    e1.download_button("Download plan JSON", data=text, file_name="plan.json",
                       mime="application/json", key="export_json",
                       help="Plan.to_dict() plus the scenario; load it with synth.Plan.from_dict.")
    code, why = compute.jax_code(plan)
    if code is not None:
        e2.download_button("Download JAX code", data=code, file_name="reshard_plan.py",
                           mime="text/x-python", key="export_jax",
                           help="A runnable shard_map program that performs this plan.")
    else:
        e2.info(why)
    with st.expander("Plan JSON"):
        st.code(text, language="json")
    if code is not None:
        with st.expander("JAX code"):
            st.code(code, language="python")


main()
