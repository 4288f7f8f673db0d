"""Sweeps page: browse a results folder written by ``python -m experiments run``."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from synth.errors import RedistributionError
from ui import background, files, machines, runs
from ui.errors import escape_md

COLUMNS = ["status", "suite", "case", "machine", "planner", "bandwidth_scale", "latency_scale",
           "placement", "mesh", "src", "dst", "time_s", "time_over_lb", "peak_over_bound",
           "max_shard_over_bound", "num_collectives", "full_remat", "measured_time_s", "error"]


def _pick_folder() -> str | None:
    found = files.results_folders()
    c1, c2 = st.columns([2, 3])
    picked = None
    if found:
        if st.session_state.get("sweeps_pick") not in found:  # a folder went away
            st.session_state["sweeps_pick"] = found[0]
        picked = c1.selectbox("Results folder", found, key="sweeps_pick",
                              help="Folders under results*/ with a rows.jsonl, newest first.")
    typed = (c2 if found else c1).text_input("...or a path" if found else "Results folder (a path)",
                                             key="sweeps_dir", placeholder="results/smoke",
                          help="A folder written by `python -m experiments run`, under the results root "
                               f"({files.results_root()}; set APP_RESULTS_ROOT to change it).")
    return typed.strip() or picked


def _fresh_clone() -> str | None:
    """No results folder yet: offer the smoke sweep as a background job, and show the
    bundled example meanwhile (labelled as such). Returns the folder to show."""
    out = files.smoke_out_dir()
    st.info(f"No results folder under {files.results_root()} yet. Run the smoke sweep here (7 cases x 5 "
            f"planners x 2 machines x 2 bandwidths, about a minute; written to `{out}`), or on the command "
            f"line: `python -m experiments run {files.SMOKE_CONFIG} --out results/smoke`.")
    asked = st.session_state.get("sweeps_run_smoke") or st.button("Run the smoke sweep", key="sweeps_run_button")
    if asked:
        st.session_state["sweeps_run_smoke"] = True
        try:
            res = background.resolve(runs.sweep_job(str(files.REPO_ROOT / files.SMOKE_CONFIG), str(out)))
        except RedistributionError as e:
            st.error(escape_md(str(e)))
            res = None
        if res is not None:
            st.session_state.pop("sweeps_run_smoke", None)
            st.rerun()
    st.warning("**Bundled example, not your results**: " + files.EXAMPLE_NOTE, icon=":material/inventory_2:")
    return str(files.EXAMPLE_DIR)


def _multiselect(label, df, col, key):
    from synth.limits import limit

    opts = sorted(str(v) for v in df[col].dropna().unique())[:limit("options")]  # bounded option list
    if key in st.session_state:  # keep only choices the current folder has
        st.session_state[key] = [v for v in st.session_state[key] if v in opts]
    chosen = st.multiselect(label, opts, key=key, placeholder="all")
    return df if not chosen else df[df[col].astype(str).isin(chosen)]


#: The sweep's pictures, one tab each (``sweeps_view``); only the open tab is computed and
#: drawn (``st.tabs(on_change="rerun")``), so the page draws one chart, not four.
VIEWS = ("Time over the lower bound", "Largest shard", "Peak live", "What if")


def _charts(ok) -> None:
    """The sweep's figures, in tabs: time over its lower bound (with the machine's latency
    floor), the largest shard against max(src, dst), the peak live pair against its own
    bound 2 x max(src, dst), and the what-if of one case at a time."""
    # the strip charts are Vega-Lite (ui.charts): the default tab fetches no plotly.js
    from ui import charts, figures

    if st.session_state.get("sweeps_view") not in VIEWS:
        st.session_state["sweeps_view"] = VIEWS[0]
    tabs = dict(zip(VIEWS, st.tabs(list(VIEWS), key="sweeps_view", on_change="rerun")))
    base = ok[ok["baseline"].fillna(False).astype(bool)] if "baseline" in ok else ok
    tab = tabs["Time over the lower bound"]
    if tab.open:
        comm = base[(base["num_collectives"].fillna(0) > 0) & (base["time_s"] > 0)].copy()
        if len(comm):
            floor = [machines.latency_floor_s(str(m), float(ls) if ls == ls else 1.0)
                     for m, ls in zip(comm["machine"], comm["latency_scale"])]
            comm["bound_s"] = [max(lb if lb == lb and lb is not None else 0.0, f or 0.0)
                               for lb, f in zip(comm["lower_bound_s"], floor)]
            comm = comm[comm["bound_s"] > 0]
            comm["time_over_bound"] = comm["time_s"] / comm["bound_s"]
        if len(comm):
            tab.vega_lite_chart(charts.sweep_strip_spec(
                comm, "time_over_bound", "Simulated time over its lower bound (baseline knobs)",
                "simulated time / lower bound (x)", 1.0, "lower bound"), key="sweeps_time_chart", width="stretch")
            tab.caption("Lower bound per row: the larger of the simulator's bound (lower_bound_s: bytes over "
                        "the links that must carry them) and the least latency any communicating plan pays "
                        "on that machine (models.plan_cost.machine_cost(...).comm_floor_s(), the smallest "
                        "launch cost of a collective). Rows that communicate nothing are left out.")
        else:
            tab.info("No baseline row of this selection communicates: nothing to set against a bound.")
    tab = tabs["Largest shard"]
    if tab.open:
        if len(base):
            tab.vega_lite_chart(charts.sweep_strip_spec(
                base, "max_shard_over_bound", "Largest shard per device over max(src, dst) (baseline knobs)",
                "largest shard / max(src, dst) (x)", 1.0, "the bound: max(src, dst)"), key="sweeps_memory_chart", width="stretch")
        else:
            tab.info("No baseline row in this selection.")
    tab = tabs["Peak live"]
    if tab.open:
        live = base[base["peak_over_bound"].notna()] if len(base) else base
        if len(live):
            tab.vega_lite_chart(charts.sweep_strip_spec(
                live, "peak_over_bound", "Peak live bytes (input + output of a step) over max(src, dst)",
                "peak live / max(src, dst) (x)", 2.0, "2 x max(src, dst): the most a plan within the bound holds"),
                key="sweeps_live_chart", width="stretch")
            tab.caption("Peak live counts the input and the output buffer of a step together, so a plan within "
                        "max(src, dst) reaches up to 2x here; its own bound is the dashed line.")
        else:
            tab.info("No baseline row of this selection records its peak live bytes.")
    tab = tabs["What if"]
    if tab.open:
        knobs = [k for k in figures.WHATIF_KNOBS if k in ok and (ok[k].fillna(1.0) != 1.0).any()]
        if len(knobs) > 1:
            knob = tab.radio("What-if knob", knobs, key="sweeps_whatif_knob", horizontal=True,
                             format_func=lambda k: figures.WHATIF_KNOBS[k][2],
                             help="The knob on the x axis; rows where the other knob is scaled are left out.")
        else:
            knob = knobs[0] if knobs else None
        scaled = ok[ok[knob].fillna(1.0) != 1.0] if knob else ok.iloc[:0]
        if len(scaled):
            w = ok[ok[knob].notna() & ok["time_s"].notna()]
            for other in figures.WHATIF_KNOBS:
                if other != knob and other in w:
                    w = w[w[other].fillna(1.0) == 1.0]      # one knob at a time around the baseline
            cases = sorted(str(c) for c in scaled["case"].dropna().unique())
            if st.session_state.get("sweeps_whatif_case") not in cases:
                st.session_state["sweeps_whatif_case"] = cases[0]
            case = tab.selectbox("What-if case", cases, key="sweeps_whatif_case",
                                 help="The what-if chart follows one case: every planner and machine it ran on.")
            tab.plotly_chart(figures.whatif_figure(w[w["case"].astype(str) == case], x=knob),
                             key="sweeps_whatif_chart")
        else:
            tab.info("This selection has no what-if rows (link bandwidth or latency scaled).")


def main():
    st.title("Sweeps")
    st.caption("Browse a results folder from the experiments runner: every case x machine x "
               "planner x what-if row, figures, and the HTML report.")
    why = machines.missing("experiments.report")
    if why:
        st.warning(escape_md(f"The experiments package is not available ({why}); this page needs it."))
        return
    picked = _pick_folder()
    folder = picked
    if not picked or st.session_state.get("sweeps_run_smoke"):
        # a fresh clone, or the smoke sweep this session started: its panel (progress,
        # Cancel) stays on the page while the runner fills the folder
        fallback = _fresh_clone()
        filling = picked and Path(picked).resolve() == files.smoke_out_dir().resolve()
        if not picked or (filling and st.session_state.get("sweeps_run_smoke")):
            folder = fallback
    example = folder == str(files.EXAMPLE_DIR)
    try:
        folder = folder if example else str(files.check_results_path(folder))
        df = files.sweep_rows(folder)
    except RedistributionError as e:
        st.error(escape_md(str(e)))
        return

    counts = df["status"].value_counts().to_dict()
    c = st.columns(4)
    c[0].metric("rows", len(df))
    c[1].metric("ok", int(counts.get("ok", 0)))
    c[2].metric("error / timeout", int(counts.get("error", 0)) + int(counts.get("timeout", 0)))
    c[3].metric("cases", df["case"].nunique())

    f = st.columns(3)
    with f[0]:
        view = _multiselect("Suites", df, "suite", "sweeps_suite")
    with f[1]:
        view = _multiselect("Machines", view, "machine", "sweeps_machine")
    with f[2]:
        view = _multiselect("Planners", view, "planner", "sweeps_planner")

    ok = view[view["status"] == "ok"]
    _charts(ok)
    st.subheader("Rows")
    st.dataframe(view[[c for c in COLUMNS if c in view]], hide_index=True)

    if example:
        return
    st.subheader("Report")
    html = Path(folder) / "report.html"
    if st.button("Build report.html" if not html.exists() else "Rebuild report.html",
                 key="sweeps_build_report"):
        try:
            with st.spinner("Building the report..."):
                files.build_sweep_report(folder)
        except RedistributionError as e:
            st.error(escape_md(str(e)))
    if html.exists():
        text = html.read_text(encoding="utf-8", errors="replace")
        st.download_button("Download report.html", data=text, file_name="report.html",
                           mime="text/html", key="sweeps_download_report")
        with st.expander("report.html", expanded=False):
            if hasattr(st, "iframe"):  # Streamlit >= 1.5x
                st.iframe(text, height=900)
            else:
                st.components.v1.html(text, height=900, scrolling=True)


main()
