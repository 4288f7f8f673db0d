"""Plan page: which collectives run, and how per-device memory rises and falls."""

from __future__ import annotations

import json

import streamlit as st

from synth.errors import RedistributionError
from ui import charts, machines, plans, scenario, share
from ui.errors import escape_md
from ui.fmt import fmt_bytes, fmt_seconds


def _pct(part, whole) -> str:
    p = 100 * part / whole
    return "< 0.01 %" if 0 < p < 0.01 else f"{p:.3g} %"


def _layout_picture(col, t, mesh, title, key, exact):
    """One layout picture (``ui.plans.layout_picture``: the exact grid, or its summary)
    and its per-axis caption."""
    fig, summary, axes = plans.layout_picture(str(t), str(mesh), title, exact)
    col.plotly_chart(fig, key=key)
    col.caption(("Summary of a grid too big to draw legibly. " if summary else "") + "Per axis: " + axes)


def _layout_section(plan):
    """Which device holds which block: source and target side by side, and any step."""
    from ui import figures

    types = [plan.src, plan.dst] + list(plan.all_types)
    big = any(figures.layout_needs_summary(t, plan.mesh) for t in types)
    exact = False
    if big:
        exact = st.toggle("Exact grid", key="layout_exact",
                          help="Draw every block of the array, labelled with its devices, instead of the "
                               "summary (which block each device holds, devices laid out as the mesh).")
    st.caption("Which device holds which block of the array (rows: blocks of dim 0; columns: blocks of "
               "the other dims), as jax.debug.visualize_array_sharding draws it. A block listed with "
               "several devices is replicated on them; with a pending sum {U:...} each holds a partial "
               "block. Hatched: padding of uneven dimensions."
               + (" Grids over 16 blocks a side (or 64 in all) are summarised: the devices as the mesh, "
                  "each tile labelled with the block (row, column) it holds." if big else ""))
    a, b = st.columns(2)
    _layout_picture(a, plan.src, plan.mesh, "source", "layout_src", exact)
    _layout_picture(b, plan.dst, plan.mesh, "target", "layout_dst", exact)
    if plan.steps:
        labels = ["0: source"] + [f"{i + 1}: {r['collective']}" for i, r in enumerate(plan.rows()[1:])]
        share.restore("layout_step")
        if st.session_state.get("layout_step") not in labels:
            st.session_state["layout_step"] = labels[min(1, len(labels) - 1)]
        pick = st.select_slider("Step", labels, key="layout_step", on_change=share.save_page_fields,
                                help="The type after this step.")
        i = labels.index(pick)
        t = plan.all_types[i]
        _layout_picture(st, t, plan.mesh, f"after step {pick}", "layout_step_chart", exact)


#: The Plan page's pictures, one tab each (``plan_view``, kept in the link). Only the open
#: tab is computed and drawn (``st.tabs(on_change="rerun")``): the first paint carries one
#: chart, not four, and each picture is one click away.
VIEWS = ("Memory per step", "Layout", "Received bytes")


def _pictures(plan, easy, cap):
    share.restore("plan_view")
    if st.session_state.get("plan_view") not in VIEWS:
        st.session_state["plan_view"] = VIEWS[0]
    mem, layout, recv = st.tabs(list(VIEWS), key="plan_view", on_change=share.save_page_fields)
    if mem.open:  # Vega-Lite, not plotly: the first paint does not load plotly.js (4.7 MB)
        mem.vega_lite_chart(plans.plan_memory_chart(plan, easy.max_shard_bytes, cap), key="plan_memory_chart",
                            width="stretch", height=charts.MEMORY_HEIGHT_PX)
    if recv.open:
        recv.caption("The bytes every device receives in every step (colour scale from 0).")
        recv.plotly_chart(plans.recv_figure(plan), key="plan_recv_heatmap")
    if layout.open:
        with layout:
            _layout_section(plan)


_ICONS = {"ok": ":green[:material/check_circle:]", "info": ":blue[:material/info:]",
          "warn": ":orange[:material/warning:]"}


def _claims(plan):
    """The plan's claims in words (``ui.plans.plan_claims``), then the planner's notes."""
    claims = plans.plan_claims(plan, fmt_bytes, fmt_seconds)
    st.markdown("\n".join(f"- {_ICONS[level]} {text}" for _topic, level, text in claims),
                help="Each line restates a field of the plan or of Plan.search; docs/app.md says which.")
    if plan.notes:
        warn = any(level == "warn" for _t, level, _x in claims)
        with st.expander(f"What the planner noted ({len(plan.notes)})", expanded=warn):
            for note in plan.notes:
                st.caption(escape_md(note))


def main():
    st.title("Plan")
    st.caption("Which collectives turn the source sharding into the target, and what each "
               "step holds per device. Edit the scenario in the sidebar.")
    sc = scenario.current()
    try:
        plan = plans.plan_for(sc)
        easy = plans.plan_for(sc, "easy") if sc.planner != "easy" else plan
    except RedistributionError as e:
        st.error(escape_md(str(e)))
        return

    st.markdown(f"**{plan.src}** &rarr; **{plan.dst}** on mesh `{plan.mesh}` "
                f"({plan.mesh.size} devices, {sc.dtype}), planner `{plan.planner}`")
    if not plan.steps:
        st.info("Source and target are the same sharding: nothing moves and no collective runs.")

    cap = machines.hbm_capacity(sc)
    oom = cap is not None and plan.peak_live_bytes > cap
    if oom:
        st.error(escape_md(f"Out of memory: this plan holds {fmt_bytes(plan.peak_live_bytes)} per device at its peak "
                 f"(input + output of one step), more than the {fmt_bytes(cap)} of HBM a "
                 f"{sc.machine_profile} device has ({fmt_bytes(plan.peak_live_bytes - cap)} over). "
                 "Pick a planner or sharding with smaller shards, or a bigger machine."))
    c = st.columns(6)
    c[0].metric("collectives", plan.num_collectives, help="Communicating steps (DynSlice excluded).")
    if oom:
        badge, color = "out of memory on this machine", "inverse"
    elif plan.bound_holds:
        badge, color = "within max(src, dst)", "normal"
    else:
        badge, color = "exceeds max(src, dst)", "inverse"
    c[1].metric("largest shard", fmt_bytes(plan.max_shard_bytes), delta=badge, delta_color=color,
                help=f"The paper's measure; bound max(src, dst) = {fmt_bytes(plan.bound_bytes)}.")
    c[2].metric("peak live (in + out)", fmt_bytes(plan.peak_live_bytes),
                help="Largest input+output buffer pair live during one step.")
    if cap is not None:
        head = cap - plan.peak_live_bytes
        c[3].metric("HBM headroom", fmt_bytes(abs(head)) + ("" if head >= 0 else " short"),
                    delta=f"{_pct(plan.peak_live_bytes, cap)} used",
                    delta_color="off" if head >= 0 else "inverse",
                    help=f"Device memory capacity ({fmt_bytes(cap)}, the profile's hbm_capacity_bytes) minus "
                         "the plan's peak live bytes; the delta is the share of the capacity the peak uses. "
                         "Other buffers of the program are not counted.")
    else:
        c[3].metric("HBM headroom", "-", help="Needs the models package for the capacity.")
    c[4].metric("received per device", fmt_bytes(plan.recv_bytes_max_device),
                help=f"Lower bound: {fmt_bytes(plan.recv_lower_bound_bytes)} (the part of its "
                     "target block a device does not already hold).")
    c[5].metric("easy plan's shard", fmt_bytes(easy.max_shard_bytes),
                help="The easy plan's largest shard per device: gather everything, then slice.")

    _claims(plan)

    st.subheader("Steps")
    st.markdown(plans.steps_table(plan))
    _pictures(plan, easy, cap)

    st.subheader("Export")
    doc = plans.plan_document(plan, sc)
    text = json.dumps(doc, indent=2)
    e1, e2 = st.columns(2)
    e1.download_button("Download plan JSON", data=text, file_name="plan.json",
                       mime="application/json", key="export_json",
                       help="Plan.to_dict() plus the scenario; load it with synth.Plan.from_dict.")
    code, why = plans.jax_code(plan, sc.dtype)
    if code is not None:
        e2.download_button("Download JAX code", data=code, file_name="reshard_plan.py",
                           mime="text/x-python", key="export_jax",
                           help="A runnable shard_map program that performs this plan.")
    else:
        e2.info(why)
    # drawn only when opened (a rerun): the code highlighter is 1.5 MB of JavaScript that the
    # first load need not wait for
    box = st.expander("Plan JSON", key="plan_json_open", on_change="rerun")
    if box.open:
        box.code(text, language="json")
    if code is not None:
        box = st.expander("JAX code", key="plan_code_open", on_change="rerun")
        if box.open:
            box.code(code, language="python")


main()
