"""Sweeps page: browse a results folder written by ``python -m experiments run``."""

from __future__ import annotations

from pathlib import Path

import plotly.express as px
import streamlit as st

from synth.errors import RedistributionError
from ui import figures, files, machines
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
    else:
        c1.info(f"No results folder under {files.results_root()} yet. Run e.g. `python -m experiments run "
                "experiments/configs/smoke.yaml --out results/smoke`.")
    typed = c2.text_input("...or a path", key="sweeps_dir", placeholder="results/smoke",
                          help="A folder written by `python -m experiments run`, under the results root "
                               f"({files.results_root()}; set APP_RESULTS_ROOT to change it).")
    return typed.strip() or picked


def _multiselect(label, df, col, key):
    from synth.limits import limit

    opts = sorted(str(v) for v in df[col].dropna().unique())[:limit("options")]  # bounded option list
    if key in st.session_state:  # keep only choices the current folder has
        st.session_state[key] = [v for v in st.session_state[key] if v in opts]
    chosen = st.multiselect(label, opts, key=key, placeholder="all")
    return df if not chosen else df[df[col].astype(str).isin(chosen)]


def main():
    st.title("Sweeps")
    st.caption("Browse a results folder from the experiments runner: every case x machine x "
               "planner x what-if row, figures, and the HTML report.")
    why = machines.missing("experiments.report")
    if why:
        st.warning(escape_md(f"The experiments package is not available ({why}); this page needs it."))
        return
    folder = _pick_folder()
    if not folder:
        return
    try:
        folder = str(files.check_results_path(folder))
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
    base = ok[ok["baseline"]] if "baseline" in ok else ok
    if len(base):
        fig = px.strip(base, x="planner", y="time_over_lb", color="machine", hover_data=["case", "suite"],
                       log_y=True, title="Simulated time / lower bound (baseline knobs), per planner")
        fig.update_layout(height=380, margin=dict(l=40, r=20, t=60, b=40))
        st.plotly_chart(fig, key="sweeps_time_chart")
        fig2 = px.strip(base, x="planner", y="peak_over_bound", color="machine",
                        hover_data=["case", "suite"], log_y=True,
                        title="Peak memory / max(src, dst) bound, per planner")
        fig2.add_hline(y=1.0, line_dash="dash", line_color="#54A24B")
        fig2.update_layout(height=380, margin=dict(l=40, r=20, t=60, b=40))
        st.plotly_chart(fig2, key="sweeps_memory_chart")
    scaled = ok[ok["bandwidth_scale"].fillna(1.0) != 1.0] if "bandwidth_scale" in ok else ok.iloc[:0]
    if len(scaled):
        fig3 = figures.whatif_figure(ok[ok["bandwidth_scale"].notna() & ok["time_s"].notna()])
        st.plotly_chart(fig3, key="sweeps_whatif_chart")

    st.subheader("Rows")
    st.dataframe(view[[c for c in COLUMNS if c in view]], hide_index=True)

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
