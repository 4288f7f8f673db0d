"""The report: summary tables and a self-contained HTML page with plotly figures.

Definitions (all on *baseline* rows: bandwidth and latency scale 1, the case's own
dtype, default placement; what-if rows feed only the what-if panel):

* **speedup** over an XLA partitioner = XLA's simulated time / our simulated time, for
  the same case and machine (> 1: ours is faster);
* **memory bound** = ``max(src shard, dst shard)`` bytes per device; a strategy
  *exceeds* it when the largest buffer in its schedule is larger;
* **time over lower bound** = simulated time / the simulator's lower bound.

Geometric means are over cases (x machines); "max" and "min" name the case.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from experiments.case import ExperimentError

XLA = ("xla-shardy", "xla-gspmd")
#: Baselines (other lowerings of the same reshard) compared like XLA's.
BASELINES = XLA + ("shardy-r2c",)
COMPILER_NOTE = ("compilers: which compiler produced each side's schedule (ours / other). libtpu: XLA's TPU "
                 "compiler for the slice; xla-gpu: XLA's GPU compiler (CUDA plugin); xla-cpu: XLA's CPU "
                 "backend; none: the plan's own schedule, not compiled. A total-time speedup is printed only "
                 "where both sides come from the same compiler; elsewhere only the collectives are compared "
                 "('-' in the total columns).")


def compiler_label(values) -> str:
    """The distinct compilers among ``values`` joined by ``+``, or ``-``."""
    names = sorted({str(v) for v in values if v is not None and v == v and str(v) not in ("", "None", "nan")})
    return " + ".join(names) or "-"


_KEY = ["suite", "case", "machine", "bandwidth_scale", "latency_scale", "itemsize", "itemsize_knob", "placement"]


def load_rows(out_dir):
    import pandas as pd

    from experiments.runner import read_journal
    from experiments.worker import ROW_FIELDS

    d = Path(out_dir)
    if not d.is_dir():
        raise ExperimentError(f"report: {out_dir} is not a results folder (run 'python -m experiments run' first)")
    rows = list(read_journal(d).values())
    if not rows:
        raise ExperimentError(f"report: {out_dir} has no rows (no {d / 'rows.jsonl'}); run a config into it first")
    df = pd.DataFrame(rows)
    for c in ROW_FIELDS:
        if c not in df:
            df[c] = None
    if "compiler" not in df or df["compiler"].isna().all():
        # rows from before the compiler column: XLA's came from xla_compiler, ours were plans
        old = df["xla_compiler"] if "xla_compiler" in df else None
        df["compiler"] = None if old is None else old.map({"tpu": "libtpu", "cpu": "xla-cpu"})
    df["compiler"] = df["compiler"].where(df["compiler"].notna(), "none")
    for c in ("time_s", "comm_time_s", "local_time_s", "temp_bytes", "compiled_peak_bytes", "num_collectives", "lower_bound_s", "time_over_lb", "peak_bytes", "bound_bytes", "max_shard_bytes",
              "max_shard_over_bound", "peak_over_bound", "bandwidth_scale", "latency_scale", "itemsize",
              "measured_time_s", "measured_temp_bytes", "num_devices"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["placement"] = df["placement"].fillna("default")
    # itemsize_knob: 0 stands for "the case's own dtype" (None in the rows).
    df["itemsize_knob"] = pd.to_numeric(df["itemsize_knob"], errors="coerce").fillna(0).astype(int)
    df["baseline"] = df["baseline"].fillna(False).astype(bool)
    return df


def geomean(xs) -> float:
    xs = [float(x) for x in xs if x is not None and x == x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def paired(df, ours: str, other: str):
    """One row per case x machine x knobs with both strategies ok: times, memory, remat."""
    import pandas as pd

    ok = df[df["status"] == "ok"]
    a = ok[ok["planner"] == ours].set_index(_KEY)
    b = ok[ok["planner"] == other].set_index(_KEY)
    j = a.join(b, how="inner", suffixes=("_ours", "_other")).reset_index()
    if j.empty:
        return j
    j["speedup_any"] = j["time_s_other"] / j["time_s_ours"]
    # a total-time ratio only between schedules from the same compiler
    # (against a baseline, only where that compiler is the machine's own: never 'none' on both)
    j["comparable"] = (j["compiler_ours"] == j["compiler_other"]) & (
        ~j["planner_other"].isin(BASELINES) | (j["compiler_other"] != "none"))
    j["speedup"] = j["speedup_any"].where(j["comparable"])
    j["compilers"] = j["compiler_ours"].astype(str) + " / " + j["compiler_other"].astype(str)
    if "comm_time_s_ours" in j:
        co, cx = (pd.to_numeric(j[c], errors="coerce") for c in ("comm_time_s_ours", "comm_time_s_other"))
        j["comm_speedup"] = (cx / co).where((co > 0) & (cx > 0))
    return j


@dataclass
class Report:
    out_dir: str
    html_path: str
    planner: str
    rows: int
    status_counts: dict
    summary: list = field(default_factory=list)       # one dict per comparison
    by_machine: list = field(default_factory=list)    # one dict per machine x comparison
    by_suite: list = field(default_factory=list)      # one dict per suite x comparison (machine "all")
    whatif: list = field(default_factory=list)        # one dict per knob value x machine x partitioner
    config_name: str = ""
    #: rows whose plan the memory-first rule chose (executor.memfirst): machine, case, note
    memory_first: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"out_dir": self.out_dir, "html": self.html_path, "planner": self.planner,
                "rows": self.rows, "status": self.status_counts, "summary": self.summary,
                "by_machine": self.by_machine, "by_suite": self.by_suite, "whatif": self.whatif,
                "config": self.config_name, "memory_first": self.memory_first}

    def markdown(self) -> str:
        p = self.planner
        lines = [
            f"| {p} vs | machine | compilers ({p} / other) | pairs | total: pairs | total: geomean speedup | "
            f"total: min | total: cases we lose | collectives only: geomean speedup | collectives only: min | "
            f"local time, sum ({p} / other) | temp bytes {p} <= other | where XLA remats: {p} lower "
            f"(temp / compiled peak) | other over memory bound | "
            f"{p} over memory bound | XLA full remat | geomean time/LB ({p} / other) |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in self.summary + self.by_machine:
            lines.append(
                f"| {s['vs']} | {s['machine']} | {s['compilers']} | {s['cases']} | {s['total_pairs']} | "
                f"{_fx(s['geomean_speedup'])} | {_fx(s['min_speedup'])} | {s['losses']} | "
                f"{_fx(s['geomean_comm_speedup'])} | {_fx(s['min_comm_speedup'])} | "
                f"{_us(s['local_time_ours_s'])} / {_us(s['local_time_other_s'])} | {s['temp_le']} | "
                f"{s['temp_lt_remat']} / {s['peak_lt_remat']} | "
                f"{_pct(s['other_over_bound_share'])} | {_pct(s['ours_over_bound_share'])} | "
                f"{_pct(s['other_full_remat_share'])} | {_fx(s['geomean_time_over_lb_ours'])} / "
                f"{_fx(s['geomean_time_over_lb_other'])} |")
        over: dict = {}  # the same case against both of XLA's partitioners is listed once
        for s in self.by_machine:
            if s["vs"] in XLA:
                for t in s.get("temp_over", []):
                    over.setdefault((t["machine"], t["case"], t["temp_ours"], t["temp_other"], t["why"]),
                                    []).append(s["vs"])
        if over:
            lines += ["", f"Compiled temp bytes of {p} above XLA's, and why:", ""]
            lines += [f"- {m}, `{c}` (vs {', '.join(vs)}): {o} B against {x} B: {why}"
                      for (m, c, o, x, why), vs in over.items()]
        if self.memory_first:
            lines += ["", f"Where {p}'s fastest plan compiled to more temp bytes than XLA's, the plan the "
                          "memory-first rule chose (docs/experiments.md):", ""]
            lines += [f"- {t['machine']}, `{t['case']}`: {t['note'].removeprefix('memory-first: ')}"
                      for t in self.memory_first]
        remat: dict = {}
        for s in self.by_machine:
            if s["vs"] in XLA:
                for t in s.get("remat_not_lower", []):
                    remat.setdefault((t["machine"], t["case"], t["shown_by"], t["xla_evidence"]), []).append(s["vs"])
        if remat:
            lines += ["", f"Where XLA rematerialises but {p}'s temp bytes are not strictly lower, the measure "
                          f"that shows it ({p} against XLA):", ""]
            lines += [f"- {m}, `{c}` (vs {', '.join(vs)}): {shown}. XLA: {ev}"
                      for (m, c, shown, ev), vs in remat.items()]
        return "\n".join(lines)

    def text(self) -> str:
        st = ", ".join(f"{k} {v}" for k, v in sorted(self.status_counts.items()))
        out = [f"{self.config_name or self.out_dir}: {self.rows} rows ({st})", ""]
        hdr = (f"{'vs':12s} {'machine':10s} {'compilers':20s} {'pairs':>5s} {'total':>5s} {'geo total':>9s} "
               f"{'min':>6s} {'lose':>4s} {'geo comm':>8s} {'min comm':>8s} {'local ours/other':>20s} "
               f"{'temp<=':>7s} {'remat: lower temp/peak':>22s} {'oth>bnd':>7s} {'remat':>5s} {'t/LB ours':>9s} "
               f"{'t/LB oth':>8s}")
        out += [hdr, "-" * len(hdr)]
        for s in self.summary + self.by_machine:
            out.append(
                f"{s['vs']:12s} {s['machine']:10s} {s['compilers']:20s} {s['cases']:5d} {s['total_pairs']:5d} "
                f"{_fx(s['geomean_speedup']):>9s} {_fx(s['min_speedup']):>6s} {s['losses']:4d} "
                f"{_fx(s['geomean_comm_speedup']):>8s} {_fx(s['min_comm_speedup']):>8s} "
                f"{_us(s['local_time_ours_s']) + ' / ' + _us(s['local_time_other_s']):>20s} {s['temp_le']:>7s} "
                f"{s['temp_lt_remat'] + ' / ' + s['peak_lt_remat']:>22s} "
                f"{_pct(s['other_over_bound_share']):>7s} {_pct(s['other_full_remat_share']):>5s} "
                f"{_fx(s['geomean_time_over_lb_ours']):>9s} {_fx(s['geomean_time_over_lb_other']):>8s}")
        for s in self.summary:
            if s["cases"]:
                out.append(f"  vs {s['vs']}: max speedup on {s['max_case']}; min on {s['min_case']}")
        for s in self.by_machine:
            for t in s.get("temp_over", []):
                out.append(f"  temp above {s['vs']} on {t['machine']}: {t['case']} {t['temp_ours']} B vs "
                           f"{t['temp_other']} B: {t['why']}")
            for t in s.get("remat_not_lower", []):
                out.append(f"  {s['vs']} remats on {t['machine']}, {t['case']}: temp not strictly lower; "
                           f"shown by {t['shown_by']}")
        for t in self.memory_first:
            out.append(f"  {t['note'].split(';')[0]} on {t['machine']}, {t['case']}: "
                       f"{t['note'].split('; ', 1)[1] if '; ' in t['note'] else ''}")
        out.append(f"  {COMPILER_NOTE}")
        if self.by_suite:
            out += ["", f"{'by suite':24s} {'vs':12s} {'pairs':>5s} {'geo total':>9s} {'min':>7s} {'lose':>4s} "
                    f"{'geo comm':>8s} {'other>bound':>11s}"]
            for s in self.by_suite:
                out.append(f"{s['suite']:24s} {s['vs']:12s} {s['cases']:5d} {_fx(s['geomean_speedup']):>9s} "
                           f"{_fx(s['min_speedup']):>7s} {s['losses']:4d} {_fx(s['geomean_comm_speedup']):>8s} "
                           f"{_pct(s['other_over_bound_share']):>11s}")
        if self.whatif:
            out += ["", f"{'what-if knob':16s} {'value':>10s} {'vs':12s} {'machine':10s} {'cases':>5s} "
                    f"{'geo speedup':>11s} {'t/LB ours':>9s}"]
            for w in self.whatif:
                out.append(f"{w['knob']:16s} {str(w['value']):>10s} {w['vs']:12s} {w['machine']:10s} "
                           f"{w['cases']:5d} {_fx(w['geomean_speedup']):>11s} {_fx(w['geomean_time_over_lb']):>9s}")
        return "\n".join(out)


def _us(x) -> str:
    return "-" if x is None or x != x else f"{x * 1e6:.0f} us"


def _fx(x) -> str:
    return "-" if x is None or x != x else f"{x:.2f}x"


def _pct(x) -> str:
    return "-" if x is None or x != x else f"{100 * x:.0f}%"


#: Temp bytes above the other side's by at most this much are the GPU compiler's bookkeeping:
#: each async collective's ``-start`` keeps its operand tuple (8-16 B, aligned to 256 B) as a
#: temp buffer, so a plan with one all-to-all more than XLA's needs 256 B more.
BOOKKEEPING_BYTES = 4096


def temp_over(j) -> list[dict]:
    """The pairs of ``j`` (already those whose temp is above the other's) with why: a few
    hundred bytes of per-collective bookkeeping, or a different plan (its collectives
    against the other's; the compiled HLO of both is in ``docs/executor.md``)."""
    out = []
    for _, r in j.iterrows():
        d = int(r["temp_bytes_ours"] - r["temp_bytes_other"])
        no, nx = int(r["num_collectives_ours"]), int(r["num_collectives_other"])
        n = f"{no} collective{'s' if no != 1 else ''} against {nx}"
        why = (f"{d} B of async-collective bookkeeping ({n})" if d <= BOOKKEEPING_BYTES
               else f"a different plan ({n}): its intermediates need {d / 2**20:.1f} MiB more")
        if d > BOOKKEEPING_BYTES:  # the other side of the trade, where the row says it
            sp = r.get("speedup")
            if sp is not None and sp == sp:
                why += f"; its simulated total time is {1 / sp:.2f}x the other's"
            if "work budget" in str(r.get("notes_ours") or ""):
                why += "; its search was cut by the work budget"
        out.append({"case": str(r["case"]), "machine": str(r["machine"]), "temp_ours": int(r["temp_bytes_ours"]),
                    "temp_other": int(r["temp_bytes_other"]), "why": why})
    return out


def _mib(b) -> str:
    return f"{b / 2**20:.2f} MiB"


def remat_not_lower(j) -> list[dict]:
    """The pairs of ``j`` (already those where XLA rematerialises and our temp is not
    strictly lower) with the measure that shows the difference: both temps, both compiled
    peaks, and XLA's own evidence. On libtpu, a whole-array buffer placed outside HBM
    temporaries (a layout in memory space ``S(3)``) is in the compiled peak, not in the temp
    bytes, so both temps can be 0 B."""
    import pandas as pd

    out = []
    for _, r in j.iterrows():
        to, tx = int(r["temp_bytes_ours"]), int(r["temp_bytes_other"])
        po, px = (pd.to_numeric(r.get(c), errors="coerce") for c in ("compiled_peak_bytes_ours",
                                                                       "compiled_peak_bytes_other"))
        if po == po and px == px and po < px:
            shown = f"compiled peak: {_mib(po)} against {_mib(px)} (temp {to} B against {tx} B)"
        elif po == po and px == px:
            shown = f"neither measure: temp {to} B against {tx} B, compiled peak {_mib(po)} against {_mib(px)}"
        else:
            shown = f"neither measure: temp {to} B against {tx} B, no compiled peak"
        ev = str(r.get("notes_other") or "")
        out.append({"case": str(r["case"]), "machine": str(r["machine"]), "temp_ours": to, "temp_other": tx,
                    "peak_ours": None if po != po else int(po), "peak_other": None if px != px else int(px),
                    "lower_in_peak": bool(po == po and px == px and po < px), "shown_by": shown,
                    "xla_evidence": ev.split("; the result")[0][:240]})
    return out


def _stats(j, vs: str, machine: str) -> dict:
    """One summary row over the pairs ``j``: the total-time figures over the pairs whose
    two schedules come from the same compiler, the collectives-only figures over all."""
    import pandas as pd

    n = len(j)
    s = {"vs": vs, "machine": machine, "cases": int(n)}
    nan = float("nan")
    if n == 0:
        s.update(dict.fromkeys(["geomean_speedup", "geomean_comm_speedup", "min_comm_speedup", "max_speedup",
                                "min_speedup", "other_over_bound_share", "ours_over_bound_share",
                                "other_full_remat_share", "geomean_time_over_lb_ours", "geomean_time_over_lb_other",
                                "geomean_memory_ours", "geomean_memory_other", "local_time_ours_s",
                                "local_time_other_s"], nan))
        s.update({"losses": 0, "max_case": "", "min_case": "", "compilers": "-", "total_pairs": 0,
                  "temp_le": "-", "temp_lt_remat": "-", "peak_lt_remat": "-", "temp_over": [],
                  "remat_not_lower": []})
        return s
    s["compilers"] = compiler_label(j["compilers"])
    tot = j[j["comparable"]]
    s["total_pairs"] = int(len(tot))
    if len(tot):
        imax, imin = tot["speedup"].idxmax(), tot["speedup"].idxmin()
        s.update({"max_speedup": float(tot["speedup"].max()), "min_speedup": float(tot["speedup"].min()),
                  "max_case": f"{j.loc[imax, 'case']} ({j.loc[imax, 'machine']})",
                  "min_case": f"{j.loc[imin, 'case']} ({j.loc[imin, 'machine']})",
                  "losses": int((tot["speedup"] < 0.99).sum()), "geomean_speedup": geomean(tot["speedup"])})
    else:
        s.update({"max_speedup": nan, "min_speedup": nan, "max_case": "", "min_case": "", "losses": 0,
                  "geomean_speedup": nan})
        if "comm_speedup" in j and j["comm_speedup"].notna().any():
            imax, imin = j["comm_speedup"].idxmax(), j["comm_speedup"].idxmin()
            s["max_case"] = f"{j.loc[imax, 'case']} ({j.loc[imax, 'machine']}, collectives only)"
            s["min_case"] = f"{j.loc[imin, 'case']} ({j.loc[imin, 'machine']}, collectives only)"
    remat = j["full_remat_other"].map(lambda v: bool(v) if v is not None and v == v else False)
    to, tx = (pd.to_numeric(j[c], errors="coerce") for c in ("temp_bytes_ours", "temp_bytes_other"))
    both = to.notna() & tx.notna()
    po, px = (pd.to_numeric(j[c], errors="coerce") if c in j else pd.Series(float("nan"), index=j.index)
              for c in ("compiled_peak_bytes_ours", "compiled_peak_bytes_other"))
    bothp = po.notna() & px.notna()
    lo, lx = (pd.to_numeric(j[c], errors="coerce") for c in ("local_time_s_ours", "local_time_s_other"))
    s.update({
        "geomean_comm_speedup": geomean(j["comm_speedup"]) if "comm_speedup" in j else nan,
        "min_comm_speedup": float(j["comm_speedup"].min()) if "comm_speedup" in j else nan,
        "local_time_ours_s": float(lo[j["comparable"]].sum()) if len(tot) else nan,
        "local_time_other_s": float(lx[j["comparable"]].sum()) if len(tot) else nan,
        "temp_le": f"{int((to[both] <= tx[both]).sum())}/{int(both.sum())}" if both.any() else "-",
        "temp_lt_remat": (f"{int((to[both & remat] < tx[both & remat]).sum())}/{int((both & remat).sum())}"
                          if (both & remat).any() else "-"),
        # the compiler's own peak of live buffers (every memory space): where XLA rematerialises
        # but libtpu keeps the whole-array buffer out of HBM temporaries, temp is 0 B on both
        # sides and only the peak shows the difference
        "peak_lt_remat": (f"{int((po[bothp & remat] < px[bothp & remat]).sum())}/{int((bothp & remat).sum())}"
                          if (bothp & remat).any() else "-"),
        "temp_over": temp_over(j[both & (to > tx)]),
        "remat_not_lower": remat_not_lower(j[both & remat & ~(to < tx)]) if vs in XLA else [],
        "other_over_bound_share": float((j["max_shard_bytes_other"] > j["bound_bytes_other"]).mean()),
        "ours_over_bound_share": float((j["max_shard_bytes_ours"] > j["bound_bytes_ours"]).mean()),
        "other_full_remat_share": float(remat.mean()) if vs in XLA else nan,
        "geomean_time_over_lb_ours": geomean(j["time_over_lb_ours"]),
        "geomean_time_over_lb_other": geomean(j["time_over_lb_other"]),
        "geomean_memory_ours": geomean(j["max_shard_over_bound_ours"]),
        "geomean_memory_other": geomean(j["max_shard_over_bound_other"]),
    })
    return s


def build_report(out_dir, html_path=None, planner: str = "normal") -> Report:
    import json

    from synth.fileio import check_output_file

    check_output_file(html_path or Path(out_dir) / "report.html", "--html", make_parents=True)
    df = load_rows(out_dir)
    if planner not in set(df["planner"]):
        raise ExperimentError(f"report: no rows for planner {planner!r} in {out_dir}; planners there: "
                              f"{sorted(set(df['planner'].dropna()))}")
    base = df[df["baseline"]]
    others = [p for p in (*BASELINES, "normal", "auto", "easy") if p != planner and p in set(df["planner"])]
    rep = Report(str(out_dir), str(html_path or Path(out_dir) / "report.html"), planner, len(df),
                 {str(k): int(v) for k, v in df["status"].value_counts().items()})
    try:
        rep.config_name = json.loads((Path(out_dir) / "run.json").read_text()).get("name", "")
    except (OSError, ValueError):
        pass
    mine = base[(base["planner"] == planner) & (base["status"] == "ok")]
    for _, r in mine.sort_values(["machine", "case"]).iterrows():
        notes = str(r.get("notes") or "")
        if notes.startswith("memory-first: "):  # the worker puts the rule's note first
            parts = notes[len("memory-first: "):].split("; ")
            keep = [parts[0]] + [x for x in parts[1:3] if x.startswith(("none of", "chose", "kept"))]
            rep.memory_first.append({"machine": str(r["machine"]), "case": str(r["case"]),
                                     "note": "memory-first: " + "; ".join(keep)})
    pairs = {}
    for o in others:
        j = paired(base, planner, o)
        pairs[o] = j
        rep.summary.append(_stats(j, o, "all"))
        if not j.empty:  # never mixed: one row per machine and pair of compilers
            for (m, _c), g in j.groupby(["machine", "compilers"]):
                rep.by_machine.append(_stats(g, o, str(m)))
        if o in XLA and not j.empty and j["suite"].nunique() > 1:
            for su, g in j.groupby("suite"):
                rep.by_suite.append(dict(_stats(g, o, "all"), suite=str(su)))
    _write_html(rep, df, base, pairs, planner)
    return rep


# -- HTML ---------------------------------------------------------------------------------------
def _write_html(rep: Report, df, base, pairs, planner):
    import plotly.express as px
    import plotly.graph_objects as go

    figs: list[tuple[str, str, object]] = []
    machines = sorted(df["machine"].dropna().unique())
    planners = [p for p in ("normal", "search", "easy", *XLA) if p in set(df["planner"])]
    palette = px.colors.qualitative.Plotly
    style = {"category_orders": {"machine": machines, "planner": planners, "vs": list(XLA)},
             "color_discrete_map": {**{m: palette[i % len(palette)] for i, m in enumerate(machines)},
                                    **{p: palette[(i + 3) % len(palette)] for i, p in enumerate(planners)},
                                    **{x: palette[(i + 8) % len(palette)] for i, x in enumerate(XLA)}}}
    xla_pairs = {k: v for k, v in pairs.items() if k in BASELINES and not v.empty}

    if xla_pairs:
        import pandas as pd

        sp = pd.concat([v.assign(vs=k) for k, v in xla_pairs.items()])
        # the total where both sides share a compiler, else the collectives-only ratio (bar pattern)
        sp["basis"] = sp["comparable"].map(lambda c: "total" if c else "collectives only")
        sp["shown speedup"] = sp["speedup"].where(sp["comparable"], sp["comm_speedup"])
        sp = sp.sort_values(["vs", "shown speedup"])
        sp["XLA compiler"] = sp["compilers"]
        f = px.bar(sp, x="case", y="shown speedup", color="machine", barmode="group", facet_row="vs",
                   pattern_shape="basis", log_y=True,
                   hover_data=["mesh_ours", "src_ours", "dst_ours", "compilers", "local_time_s_ours",
                               "local_time_s_other"], **style,
                   title=f"Speedup of {planner} over each baseline, per case (simulated; total time where both "
                         "sides were compiled by the same compiler, else collectives only: bar pattern)")
        f.add_hline(y=1.0, line_dash="dot")
        f.update_layout(height=380 * len(xla_pairs) + 120)
        figs.append(("speedup-case", "Speedup per case", f))
        sp["machine"] = sp["machine"] + " [" + sp["compilers"] + ", " + sp["basis"] + "]"
        f = px.box(sp, x="machine", y="shown speedup", color="vs", points="all", log_y=True,
                   hover_data=["case"], **style, title=f"Speedup of {planner} over the baselines, per machine "
                                                       f"(compilers {planner} / other and basis in brackets)")
        f.add_hline(y=1.0, line_dash="dot")
        figs.append(("speedup-machine", "Speedup per machine", f))

    ok = base[base["status"] == "ok"]
    if not ok.empty:
        mem = ok.assign(**{"compiler": ok["compiler"].fillna("none")})
        mem = mem.drop_duplicates(["suite", "case", "planner", "compiler"])
        f = px.bar(mem, x="case", y="max_shard_over_bound", color="planner", barmode="group", log_y=True,
                   pattern_shape="compiler",
                   hover_data=["mesh", "src", "dst", "max_shard_bytes", "bound_bytes", "full_remat", "machine"],
                   **style, title="Largest buffer per device relative to max(src shard, dst shard) "
                                  "(bar pattern: the compiler of the schedule)")
        f.add_hline(y=1.0, line_dash="dot", annotation_text="memory bound")
        top = float(mem["max_shard_over_bound"].max())
        f.update_yaxes(range=[-0.4, math.log10(max(top, 2.0)) + 0.2])  # bars at 1 stay visible
        figs.append(("memory", "Memory relative to max(src, dst)", f))
        f = px.box(ok, x="planner", y="time_over_lb", color="machine", points="all", log_y=True,
                   hover_data=["case", "compiler"], **style,
                   title="Simulated time over the lower bound (each row's schedule from its 'compiler')")
        f.add_hline(y=1.0, line_dash="dot")
        figs.append(("lower-bound", "Time over the lower bound", f))

    wfigs: list = []
    whatif_tables = _whatif(df, planner, wfigs, px, go, style, rep.whatif)
    first = [True]

    def render(items):
        out = []
        for fid, title, fig in items:
            out.append(f"<h3 id='{fid}'>{html.escape(title)}</h3>" + fig.to_html(
                full_html=False, include_plotlyjs=first[0], default_height="520px"))
            first[0] = False
        return "".join(out)

    sections = [render(figs)]
    whatif_html = render(wfigs) + whatif_tables
    measured_html = _measured(df, planner)
    errors = df[df["status"] != "ok"]
    err_html = "<p>None.</p>" if errors.empty else errors[
        ["status", "suite", "case", "machine", "planner", "mesh", "error"]].to_html(index=False, escape=True)
    cases = df.drop_duplicates(["suite", "case"])[["suite", "case", "mesh", "src", "dst", "dtype", "layout", "ref"]]
    summary_tbl = _summary_html(rep)
    body = f"""<!doctype html><html><head><meta charset="utf-8">
<title>Redistribution report: {html.escape(rep.config_name or rep.out_dir)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}}
table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px}}
th{{background:#f3f3f3}}code{{background:#f3f3f3;padding:1px 3px}}</style></head><body>
<h1>Redistribution report: {html.escape(rep.config_name or rep.out_dir)}</h1>
<p>{rep.rows} rows from <code>{html.escape(rep.out_dir)}</code>; status:
{html.escape(', '.join(f'{k} {v}' for k, v in sorted(rep.status_counts.items())))}.
Speedup = XLA's simulated time / {html.escape(planner)}'s, on baseline rows (scales 1, case dtype,
default placement). Memory bound = max(src shard, dst shard) per device.
Regenerate with <code>python -m experiments report {html.escape(rep.out_dir)}</code>.</p>
<h2>Summary</h2>{summary_tbl}
{''.join(sections)}
<h2 id="whatif">What-if</h2>{whatif_html}
<h2 id="measured">Measured on the local JAX backend</h2>{measured_html}
<h2>Errors and timeouts</h2>{err_html}
<h2>Cases</h2>{cases.to_html(index=False, escape=True)}
</body></html>"""
    from synth.fileio import atomic_write_text

    Path(rep.html_path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(rep.html_path, body, "--html")


def _summary_html(rep: Report) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(s['vs'])}</td><td>{html.escape(s['machine'])}</td>"
        f"<td>{html.escape(s['compilers'])}</td><td>{s['cases']}</td><td>{s['total_pairs']}</td>"
        f"<td>{_fx(s['geomean_speedup'])}</td><td>{_fx(s['max_speedup'])}</td><td>{_fx(s['min_speedup'])}</td>"
        f"<td>{s['losses']}</td><td>{_fx(s['geomean_comm_speedup'])}</td>"
        f"<td>{_us(s['local_time_ours_s'])} / {_us(s['local_time_other_s'])}</td><td>{s['temp_le']}</td>"
        f"<td>{s['temp_lt_remat']} / {s['peak_lt_remat']}</td><td>{_pct(s['other_over_bound_share'])}</td>"
        f"<td>{_pct(s['ours_over_bound_share'])}</td><td>{_pct(s['other_full_remat_share'])}</td>"
        f"<td>{_fx(s['geomean_time_over_lb_ours'])}</td><td>{_fx(s['geomean_time_over_lb_other'])}</td></tr>"
        for s in rep.summary + rep.by_machine)
    extremes = "".join(
        f"<li>vs {html.escape(s['vs'])}: max on {html.escape(s['max_case'])}, min on {html.escape(s['min_case'])}</li>"
        for s in rep.summary if s["cases"])
    suites = ""
    if rep.by_suite:
        suites = "<p>By suite (all machines):</p><table><tr><th>suite</th><th>vs</th><th>cases</th>" + \
            "<th>geomean speedup</th><th>min speedup</th><th>cases we lose</th>" + \
            "<th>geomean speedup, collectives only</th><th>other over memory bound</th></tr>" + "".join(
                f"<tr><td>{html.escape(s['suite'])}</td><td>{html.escape(s['vs'])}</td><td>{s['cases']}</td>"
                f"<td>{_fx(s['geomean_speedup'])}</td><td>{_fx(s['min_speedup'])}</td><td>{s['losses']}</td>"
                f"<td>{_fx(s['geomean_comm_speedup'])}</td><td>{_pct(s['other_over_bound_share'])}</td></tr>"
                for s in rep.by_suite) + "</table>"
    return (f"<p>{html.escape(COMPILER_NOTE)}</p>"
            f"<table><tr><th>{html.escape(rep.planner)} vs</th><th>machine</th><th>compilers (ours / other)</th><th>pairs</th>"
            "<th>pairs compared in total</th><th>geomean speedup (total)</th>"
            "<th>max speedup</th><th>min speedup</th><th>cases we lose</th><th>geomean speedup, collectives only</th>"
            "<th>local time, sum (ours / other)</th><th>temp bytes ours &lt;= other</th>"
            "<th>where XLA remats: ours lower (temp / compiled peak)</th><th>other over memory bound</th>"
            "<th>ours over bound</th><th>XLA full remat</th><th>geomean time/LB (ours)</th>"
            f"<th>geomean time/LB (other)</th></tr>{rows}</table><ul>{extremes}</ul>") + suites


def _measured(df, planner) -> str:
    """Median time and XLA temp memory per measured case (the executor, local backend)."""
    m = df[(df["status"] == "ok") & df["measured_time_s"].notna()]
    if m.empty:
        return "<p>No case was measured (set <code>measure.enabled</code> in the config).</p>"
    m = m.drop_duplicates(["suite", "case", "planner", "itemsize"])
    t = m.pivot_table(index=["case", "itemsize"], columns="planner",
                      values=["measured_time_s", "measured_temp_bytes"], aggfunc="first")
    t.columns = [f"{a.replace('measured_', '')} {b}" for a, b in t.columns]
    return ("<p>Median wall time and XLA temp allocation on this host's CPU devices (not a "
            "model of the target machine).</p>" + t.reset_index().to_html(index=False, float_format=lambda x: f"{x:.4g}"))


def _whatif(df, planner, figs, px, go, style, records) -> str:
    """Geomean speedup and time/LB as one knob varies (the others at baseline)."""
    import pandas as pd

    ok = df[df["status"] == "ok"].copy()
    base = {"bandwidth_scale": 1.0, "latency_scale": 1.0, "placement": "default", "itemsize_knob": 0}
    parts = []
    for knob in ("bandwidth_scale", "latency_scale", "placement", "itemsize_knob"):
        vals = ok[knob].dropna().unique()
        if len(vals) < 2:
            continue
        sub = ok
        for k, v in base.items():
            if k != knob:
                sub = sub[sub[k] == v]
        recs = []
        for other in XLA:
            j = paired(sub, planner, other)
            if j.empty:
                continue
            for (m, val), g in j.groupby(["machine", knob]):
                recs.append({"vs": other, "machine": m, knob: val, "geomean speedup": geomean(g["speedup"]),
                             f"geomean time/LB ({planner})": geomean(g["time_over_lb_ours"]), "cases": len(g)})
        if not recs:
            continue
        records += [{"knob": knob, "value": ("case dtype" if knob == "itemsize_knob" and r[knob] == 0 else r[knob]), "vs": r["vs"], "machine": r["machine"], "cases": r["cases"],
                     "geomean_speedup": r["geomean speedup"],
                     "geomean_time_over_lb": r[f"geomean time/LB ({planner})"]} for r in recs]
        t = pd.DataFrame(recs).sort_values(knob)
        if knob == "itemsize_knob":
            t[knob] = t[knob].map(lambda v: "case dtype" if v == 0 else f"{v} B")
        kind = px.line if knob != "placement" else px.bar
        extra = {"markers": True} if knob != "placement" else {"barmode": "group"}
        f = kind(t, x=knob, y="geomean speedup", color="machine", facet_col="vs", **style,
                 title=f"What-if: geomean speedup as {knob} varies", **extra)
        figs.append((f"whatif-{knob}", f"What-if: {knob}", f))
        parts.append(f"<h3>{html.escape(knob)}</h3>" + t.to_html(index=False, float_format=lambda x: f"{x:.3f}"))
    if not parts:
        return "<p>No what-if knob has more than one value in these rows (see whatif.yaml).</p>"
    return "".join(parts)
