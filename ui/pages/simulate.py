"""Simulate page: the plan replayed event by event on the machine's topology."""

from __future__ import annotations

import streamlit as st

from synth.errors import RedistributionError
from ui import background, machines, plans, runs, scenario, share
from ui.errors import escape_md
from ui.fmt import fmt_bytes, fmt_ratio, fmt_seconds, table_cells
from ui.texts import (
    BANDWIDTH_NOTE,
    MACHINE_BOUND_TEXT,
    OPS_BANDWIDTH_COLUMNS,
    OPS_TIME_COLUMNS,
    SEARCH_BOUND_TEXT,
    lower_bound_help,
    lower_bound_terms_text,
    model_error_text,
    ops_frame,
)

PLACEMENT_HELP = (
    "Which chip each mesh device runs on. Empty or 'row-major': device d on chip d. "
    "'data=X*Y,model=Z' lays each mesh axis over physical dimensions (major to minor); "
    "'devices:3,1,0,2' lists the chip of every device. See docs/simulator.md."
)

#: The page's pictures, one tab each (``sim_view``, kept in the link); only the open tab
#: is drawn (``st.tabs(on_change="rerun")``), so a page switch draws one chart, not three.
VIEWS = ("Timeline", "Link load", "Memory over time")


def show_summary(sm: dict, me=None, search_bound_s: float | None = None) -> None:
    """The simulation's metrics; ``search_bound_s``: the plan's own search bound (the Plan
    page's), named next to the machine bound so a reader sees why they differ."""
    c = st.columns(5)
    c[0].metric("simulated time", fmt_seconds(sm["time_s"]))
    kind = sm.get("lower_bound_kind") or "?"
    c[1].metric("lower bound", fmt_seconds(sm["lower_bound_s"]),
                help=f"The machine lower bound: {MACHINE_BOUND_TEXT}. Binding term: {kind}: "
                     f"{lower_bound_help(kind)}")
    c[2].metric("time / bound", fmt_ratio(sm["ratio_to_bound"]))
    cap = sm["hbm_capacity_bytes"]
    peak = sm["peak_bytes_max_device"]
    c[3].metric("peak memory", fmt_bytes(peak),
                delta=(f"{fmt_bytes(cap - peak)} headroom" if peak <= cap else f"{fmt_bytes(peak - cap)} over HBM"),
                delta_color="normal" if peak <= cap else "inverse",
                help=f"The largest bytes any device holds at one time (max over devices); HBM capacity "
                     f"{fmt_bytes(cap)}.")
    c[4].metric("busiest link", fmt_bytes(sm["link_bytes_max"]),
                help=f"Analytic (alpha-beta) estimate of the whole plan: {fmt_seconds(sm['analytic_s'])}.")
    terms = lower_bound_terms_text(sm.get("lower_bound_terms"), fmt_seconds)
    st.caption(f"Lower bound binds on: **{kind}**: {lower_bound_help(kind)} It is {MACHINE_BOUND_TEXT}"
               + (f" ({terms})" if terms else "") + ".")
    if search_bound_s is not None:
        st.caption(f"The auto search's own lower bound, {fmt_seconds(search_bound_s)} (the Plan page names it "
                   f"when the plan is not proven optimal), is {SEARCH_BOUND_TEXT}.")
    st.caption(model_error_text(me) or
               "Model error against published measurements: not available (`simulator validate` "
               "has no figure for this machine yet).")


def main():
    st.title("Simulate")
    st.caption("The plan's device-level schedule replayed on the machine (SimPy, links shared "
               "by concurrent flows). Edit the scenario in the sidebar.")
    why = machines.missing("simulator")
    if why:
        st.warning(escape_md(f"The simulator package is not available ({why}); this page needs it."))
        return
    sc = scenario.current()
    share.restore("sim_placement")
    placement = st.text_input("Placement", key="sim_placement", placeholder="row-major",
                              help=PLACEMENT_HELP, on_change=share.save_page_fields)
    share.save_page_fields()
    try:
        plan = plans.plan_for(sc)
        view = background.resolve(runs.simulation(plan, sc, placement))
    except RedistributionError as e:
        st.error(escape_md(str(e)))
        return
    if view is None:
        return
    sm = view["summary"]
    st.markdown(f"**{plan.src}** &rarr; **{plan.dst}** on `{plan.mesh}`, planner `{plan.planner}`, "
                f"machine `{sm['machine_spec']}`, placement `{sm['placement_text']}`")
    for w in sm["warnings"]:
        st.warning(escape_md(w))
    search = plan.search if isinstance(plan.search, dict) else {}
    low = search.get("lower_bound_s")
    show_summary(sm, machines.model_error(sm["machine_spec"]), float(low) if low is not None else None)

    figs = view["figures"]
    # deferred (a callable): the file is built and sent when clicked, not with the page
    # (megabytes the browser would otherwise fetch on every visit, and half the simulation's
    # work at 64 devices that nobody would wait for unless they download it).
    # on_click="ignore": the click must not rerun the page. Streamlit registers the callable
    # under a new id on every run and drops the previous run's id when a run ends; the
    # browser asks for the file by the id it was drawn with, on a worker thread, while a
    # click's rerun (the default) races it, and where that rerun ends first (a loaded
    # machine) the request finds no callable, the button shows "Failed to generate file for
    # download" and nothing downloads. The page reads nothing from the click, so no rerun.
    st.download_button("Download Chrome trace (Perfetto)", data=lambda: runs.chrome_trace(plan, sc, placement),
                       file_name="simulation.trace.json", mime="application/json", key="sim_chrome_trace",
                       on_click="ignore",
                       help="Chrome Trace Event JSON: open it in https://ui.perfetto.dev or chrome://tracing. "
                            "One track per device and per busy link; op names, bytes and algorithm as args. "
                            "Built when clicked, by replaying the simulation again (about as long as the "
                            "simulation took: "
                            f"{sm['wall_s']:.1f} s here).")
    hot = view.get("hot_links") or []
    if hot:
        agg = bool((figs["topology"].layout.meta or {}).get("aggregated"))
        st.caption(("Link load aggregated: the machine has too many links to draw one by one. " if agg else "")
                   + "Hottest links (one direction): "
                   + "; ".join(f"`{h['link']}` {fmt_bytes(h['bytes'])}" for h in hot[:5]) + ".")
    share.restore("sim_view")
    if st.session_state.get("sim_view") not in VIEWS:
        st.session_state["sim_view"] = VIEWS[0]
    timeline, links, memory = st.tabs(list(VIEWS), key="sim_view", on_change=share.save_page_fields)
    if timeline.open:
        if view["ops"]:
            tl = figs["timeline"]  # Vega-Lite (ui.charts.timeline_spec): no plotly.js for the default tab
            timeline.vega_lite_chart(tl, key="sim_timeline", width="stretch")
            meta = tl["usermeta"]["timeline"]
            if not meta.get("detailed", True):
                timeline.caption(f"The timeline shows all {meta.get('transfers')} transfers aggregated, as its "
                                 "title says; the Chrome trace has every transfer (or, above 200,000, one "
                                 "event per device and op).")
        else:
            timeline.info("The plan has no steps (source and target are the same sharding): nothing to "
                          "replay. Pick another target in the sidebar.")
    if links.open:
        links.plotly_chart(figs["topology"], key="sim_topology")
    if memory.open:
        memory.plotly_chart(figs["memory"], key="sim_memory")
    st.subheader("Ops")
    ops = ops_frame(view["ops"])
    # static tables (one row per op, a handful): the data grid is 1.2 MB of JavaScript the
    # first visit to this page would otherwise wait for
    st.table(table_cells(ops[list(OPS_TIME_COLUMNS)]), hide_index=True)
    st.markdown("**Bandwidth of each op**")  # a second table: one with every column is wider than the page
    st.table(table_cells(ops[list(OPS_BANDWIDTH_COLUMNS)]), hide_index=True)
    st.caption(BANDWIDTH_NOTE)


main()
