"""Cross-mesh page: a redistribution from a type on mesh A to a type on mesh B (disjoint,
overlapping or the same devices reshaped), and whole-model weight sync."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from synth.errors import RedistributionError
from ui import crossmesh as cx
from ui.fmt import fmt_bytes, fmt_ratio, fmt_seconds


def _inputs():
    ex = cx.EXAMPLE
    c = st.columns(2)
    src_mesh = c[0].text_input("Source mesh (A)", ex["src_mesh"], key="xm_src_mesh",
                               help="Axes and device ids: 'fsdp=8@0-7', 'x=2,y=2@0,2,4,6' (default ids 0..n-1).")
    dst_mesh = c[1].text_input("Target mesh (B)", ex["dst_mesh"], key="xm_dst_mesh")
    src = c[0].text_input("Source type", ex["src"], key="xm_src", help="'[4096{fsdp}, 1024]', pending sums '{U:x}'.")
    dst = c[1].text_input("Target type", ex["dst"], key="xm_dst")
    c2 = st.columns(2)
    machine = c2[0].text_input("Machine", ex["machine"], key="xm_machine",
                               help="A simulator profile and size, e.g. h100-multinode:2 (2 nodes of 8 GPUs).")
    itemsize = c2[1].number_input("Bytes per element", 1, 8, ex["itemsize"], key="xm_itemsize")
    return src_mesh, src, dst_mesh, dst, machine, int(itemsize)


def _show(view):
    plan, sim, m = view["plan"], view["sim"], view["metrics"]
    c = st.columns(5)
    c[0].metric("simulated time", fmt_seconds(sim["time_s"]))
    c[1].metric("lower bound", fmt_seconds(sim["lower_bound_s"]), help=f"binding cut: {sim['lower_bound_kind']}")
    c[2].metric("time / bound", fmt_ratio(sim["ratio_to_bound"]))
    c[3].metric("peak (max device)", fmt_bytes(m["peak_bytes_max_device"]),
                help=f"bound max(src, dst) + staging = {fmt_bytes(m['bound_bytes'])}")
    c[4].metric("staging", fmt_bytes(m["staging_bytes"]))
    left, right = st.columns(2)
    # Vega-Lite and static tables: the page fetches neither plotly.js, the data grid nor the
    # code highlighter (together over 7 MB of JavaScript)
    left.vega_lite_chart(cx.layout_spec(plan, "src"), key="xm_layout_src", width="stretch")
    right.vega_lite_chart(cx.layout_spec(plan, "dst"), key="xm_layout_dst", width="stretch")
    st.vega_lite_chart(cx.matrix_spec(view), key="xm_matrix", width="stretch")
    st.vega_lite_chart(cx.timeline_spec(view), key="xm_timeline", width="stretch")
    with st.expander("Plan, step by step"):
        st.text(view["text"])
    with st.expander("Device layouts"):
        left, right = st.columns(2)
        left.table(pd.DataFrame(cx.layout_rows(plan, "src")), hide_index=True)
        right.table(pd.DataFrame(cx.layout_rows(plan, "dst")), hide_index=True)
    st.download_button("Download plan JSON", data=plan.to_json(indent=1), file_name="crossmesh-plan.json",
                       mime="application/json", key="xm_json")


def _sync():
    st.subheader("Whole-model weight sync")
    names = cx.sync_configs()
    default = names.index("openrlhf-llama3-70b") if "openrlhf-llama3-70b" in names else 0
    name = st.selectbox("Published configuration", names, index=default, key="xm_sync_cfg",
                        help="experiments/configs/weight-sync/*.yaml; the large models take up to a minute.")
    try:
        with st.spinner(f"planning every parameter of {name} ..."):
            tab = cx.sync_table(name)
    except RedistributionError as e:
        st.error(cx.md_escape(str(e)))
        return
    r = tab["result"]
    st.caption(f"{r['model']}: {r['arrays']} parameters, {fmt_bytes(r['total_bytes'])} to move, "
               f"{r['buckets']} bucket(s), peak {fmt_bytes(r['peak_bytes_max_device'])} per device "
               f"(bound {fmt_bytes(r['bound_bytes'])}); planned in {r['planning_s']:.1f} s")
    st.table(pd.DataFrame([{"schedule": x["schedule"], "time": fmt_seconds(x["time_s"]),
                            "x lower bound": fmt_ratio(x["x bound"])} for x in tab["rows"]]), hide_index=True)
    if r.get("published"):
        st.caption("Published: " + cx.md_escape(r["published"]["what"]) + " - " + r["published"]["source"])
        c = r.get("published_check") or {}
        if c:
            st.caption(f"The published method ({c['method']}) simulated: {c['simulated_s']:.2f} s, "
                       f"{c['ratio']:.2f} x the published figure ({'within' if c['within_30pct'] else 'not within'} "
                       "30%)." + ("" if c["within_30pct"] or not c.get("differs") else
                                  " Why: " + cx.md_escape(c["differs"])))


def main():
    st.title("Cross-mesh")
    st.caption("A type on mesh A to a type on mesh B: typed collectives on A, a point-to-point transfer "
               "(senders balanced among replicas), typed collectives on B. docs/crossmesh.md")
    args = _inputs()
    try:
        view = cx.cross_view(*args)
    except RedistributionError as e:
        st.error(cx.md_escape(str(e)))
    else:
        _show(view)
    _sync()


main()
