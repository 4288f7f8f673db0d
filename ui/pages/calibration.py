"""Calibration page: how true the simulator's estimates are on a calibrated backend."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from synth.errors import RedistributionError
from ui import charts, files
from ui.errors import escape_md
from ui.fmt import fmt_bandwidth, fmt_bytes, fmt_seconds, table_cells


def _value(v):
    return v.get("value") if isinstance(v, dict) else v


def _source(v):
    return v.get("source", "") if isinstance(v, dict) else ""


#: A fitted bandwidth at or above this is the fit's cap: the data set no limit.
UNBOUNDED_BPS = 1e14


def _fmt_param(name: str, v) -> str:
    """A fitted value in its unit; a bandwidth at the fit's cap reads "unbounded", a
    time fitted to 0 "not identifiable" (the measurements do not constrain it)."""
    if v is None:
        return "-"
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    if name.endswith("_Bps"):
        if v >= UNBOUNDED_BPS or v == float("inf"):
            return "unbounded (fit at its cap: no limit seen in the data)"
        return fmt_bandwidth(v)
    if name.endswith("_s"):
        if v == 0:
            return "not identifiable (fitted to 0: the data do not constrain it)"
        return fmt_seconds(v)
    if name.endswith("_bytes"):
        return fmt_bytes(v)
    return f"{v:.4g}"


#: What the parameter table says for the source most of its rows share (stated once above it).
COMMON_SOURCE = "the calibration run"


#: Link classes of a profile: parameter prefix -> what it is.
LINK_CLASSES = {"link": "link (intra-node / intra-process)", "nic": "nic (inter-node / inter-process)",
                "bus": "bus (shared host bus)", "hbm": "hbm (device memory)"}


def _link_classes_frame(prof: dict) -> pd.DataFrame | None:
    """Bandwidth and latency of each link class side by side (``link_*``, ``nic_*``,
    ``bus_*``, ``hbm_*``), or ``None`` when the profile has fewer than two classes."""
    params = prof.get("params") or {}
    cols = {}
    for prefix, label in LINK_CLASSES.items():
        bw = params.get(f"{prefix}_bandwidth_Bps")
        lat = params.get(f"{prefix}_latency_s")
        if bw is None and lat is None:
            continue
        cols[label] = {"bandwidth": _fmt_param("x_Bps", _value(bw)) if bw is not None else "-",
                       "latency": _fmt_param("x_s", _value(lat)) if lat is not None else "-"}
    if len([c for c in cols if not c.startswith("hbm")]) < 2:
        return None
    return pd.DataFrame(cols)


def _params_frame(prof: dict, rep: dict | None) -> pd.DataFrame:
    rows = []
    flagged = {(f["scope"], f["parameter"]): f["why"] for f in files.calibration_flags(prof)}
    for name, v in (prof.get("params") or {}).items():
        rows.append({"scope": "machine", "parameter": name, "value": _fmt_param(name, _value(v)),
                     "source": _source(v), "implausible": flagged.get(("machine", name), "")})
    for kind, entry in (prof.get("collectives") or {}).items():
        for name, v in entry.items():
            rows.append({"scope": kind, "parameter": name, "value": _fmt_param(name, _value(v)),
                         "implausible": flagged.get((kind, name), ""),
                         "source": _source(v)})
    cal = prof.get("calibration") or {}
    if "program_overhead_s" in cal:
        rows.append({"scope": "program", "parameter": "program_overhead_s",
                     "value": _fmt_param("program_overhead_s", cal["program_overhead_s"]),
                     "source": cal.get("program_overhead_note", "")})
    return pd.DataFrame(rows, columns=["scope", "parameter", "value", "implausible", "source"])


def main():
    st.title("Calibration")
    st.caption("The cost model fitted to microbenchmarks on a real JAX backend, and checked on "
               "held-out whole redistributions (ours and XLA's) it was not fitted on.")
    folder = st.text_input("Calibrated profiles folder", key="calib_dir",
                           value=files.calibrated_dir(),
                           help="Where `python -m executor calibrate --out FOLDER/NAME.json` wrote "
                                "NAME.json and NAME.report.json: the shipped folder or one under the "
                                f"results root ({files.results_root()}; APP_RESULTS_ROOT).")
    try:
        paths = files.calibrated_profiles(folder)
    except RedistributionError as e:
        st.error(escape_md(str(e)))
        return
    if not paths:
        st.info(f"No calibrated profile in {folder} yet. Write one with "
                "`python -m executor calibrate --quick --out models/profiles/calibrated/cpu-8.json` "
                "(8 CPU devices; a few minutes).")
        return
    over = files.calibration_overview(paths)
    st.subheader("Profiles in this folder and their fit quality")
    # static tables throughout (a few dozen rows at most): the data grid's JavaScript and one
    # canvas per table would be most of what a visit to this page waits for
    st.table(table_cells(pd.DataFrame(over).round(1)), hide_index=True)
    st.caption("Held-out MAPE: error of the simulator's predictions on whole plans the fit never saw; fit "
               "MAPE / max error: on the microbenchmarks and training plans it was fitted to. Implausible "
               "values: fitted parameters no real machine has (listed below for the chosen profile).")
    if st.session_state.get("calib_profile") not in paths:  # the folder changed
        st.session_state["calib_profile"] = paths[0]
    path = st.selectbox("Profile", paths, key="calib_profile", format_func=lambda p: Path(p).stem)
    try:
        prof, rep = files.read_calibration(path)
        _show(path, prof, rep)
    except RedistributionError as e:
        st.error(escape_md(str(e)))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        st.error(escape_md(f"{Path(path).name}: not a calibrated profile this page can read ({type(e).__name__}: {e})"))


def _show(path, prof, rep):
    # name and description come from the file: shown as typed, never as markdown
    st.markdown(f"**{escape_md(prof.get('name', Path(path).stem))}** &mdash; {escape_md(prof.get('description', ''))}")
    flags = files.calibration_flags(prof)
    if flags:
        st.warning(f"{len(flags)} fitted value(s) are implausible for any real machine; predictions that "
                   "depend on them are not to be trusted:\n" + "\n".join(
                       f"- `{f['scope']}.{f['parameter']}`: {escape_md(f['why'])}" for f in flags),
                   icon=":material/report:")
    if rep is None:
        st.warning(escape_md(f"No report next to {path} (expected {Path(path).stem}.report.json); only the "
                   "fitted parameters are shown."))
    else:
        c = st.columns(5)
        c[0].metric("held-out MAPE", f"{rep['mape']:.1f} %" if rep.get("mape") is not None else "-",
                    help="Mean absolute percentage error of simulator predictions on held-out plans.")
        c[1].metric("median APE", f"{rep['median_ape']:.1f} %" if rep.get("median_ape") is not None else "-")
        fit = rep.get("fit") or {}
        c[2].metric("fit MAPE", f"{100 * fit['mape']:.1f} %" if fit.get("mape") is not None else "-",
                    help=f"On the {fit.get('points', '?')} points the parameters were fitted to.")
        c[3].metric("held-out plans", rep.get("n_heldout", "-"))
        c[4].metric("backend", f"{rep.get('backend', '?')} x{rep.get('devices', '?')}",
                    help=f"jax {rep.get('jax_version', '?')}, {rep.get('mode', '?')} grid, host "
                         f"{rep.get('host', '?')}")
        held = rep.get("heldout") or []
        groups = {}
        for r in held:
            g = groups.setdefault(r["strategy"], ([], [], []))
            g[0].append(r["measured_s"])
            g[1].append(r["predicted_s"])
            g[2].append(f"{r['strategy']}: {r['mesh']} {r['src']} -> {r['dst']}<br>"
                        f"error {r['abs_pct_err']:.1f} %")
        # Vega-Lite: the page fetches no plotly.js and draws in a fraction of the time
        st.vega_lite_chart(charts.measured_vs_predicted_spec(groups, "Held-out whole plans: measured vs predicted",
                                                             "measured", "predicted by the simulator"),
                           key="calib_heldout")
        fitg = {}
        for r in rep.get("microbenchmarks") or []:
            if "fit_s" in r:
                g = fitg.setdefault(f"micro {r['kind']}", ([], [], []))
                g[0].append(r["time_s"])
                g[1].append(r["fit_s"])
                g[2].append(f"{r['kind']} group {r.get('group')} {r.get('bytes')} B/device")
        for r in rep.get("train_plans") or []:
            if "fit_s" in r:
                g = fitg.setdefault("training plans", ([], [], []))
                g[0].append(r["time_s"])
                g[1].append(r["fit_s"])
                g[2].append(f"{r['strategy']}: {r['mesh']} {r['src']} -> {r['dst']}")
        if fitg:
            st.vega_lite_chart(charts.measured_vs_predicted_spec(fitg, "Fit: microbenchmarks and training plans",
                                                                 "measured", "fitted model"), key="calib_fit")
        by = rep.get("mape_by_strategy") or {}
        if by:
            st.subheader("Held-out error by strategy")
            st.table(table_cells(pd.DataFrame({"strategy": list(by), "MAPE %": [round(v, 1) for v in by.values()]})),
                     hide_index=True)
        worst = rep.get("worst") or []
        if worst:
            with st.expander("Worst held-out predictions"):
                st.table(table_cells(pd.DataFrame(worst)), hide_index=True)
    classes = _link_classes_frame(prof)
    if classes is not None:
        st.subheader("Link classes")
        st.table(table_cells(classes))
    st.subheader("Fitted parameters")
    params = _params_frame(prof, rep)
    common = params["source"].value_counts()
    if len(common) and common.iloc[0] >= 4:  # one calibration run wrote most of them: say it once
        run = common.index[0]
        params["source"] = params["source"].where(params["source"] != run, COMMON_SOURCE)
        st.caption(f"{COMMON_SOURCE}: {escape_md(run)}")
    st.table(table_cells(params), hide_index=True)


main()
