"""Ours vs XLA on a seeded set of random redistributions: the closing figures.

``python -m executor report --cases 30`` runs :func:`executor.compare.compare` on
each case and summarizes, per XLA partitioner:

* compiled temp memory (``memory_analysis().temp_size_in_bytes``, per device): in how
  many cases ours is lower / equal / higher, and the totals;
* time ratio ours / XLA (median times): geometric mean, min and max;
* XLA's full rematerializations, and correctness of every run;
* the calibration MAPE quoted from the committed calibration report.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def report_cases(n: int = 30, *, seed: int = 0, scale: int = 64, repeats: int = 10,
                 min_bytes: int = 64 << 10, max_bytes: int = 16 << 20,
                 calibration: str | None = None, progress=None) -> dict:
    from executor.cases import sized_cases
    from executor.compare import compare

    lo = min_bytes
    hi = max(min_bytes, max_bytes * scale // 64)
    cases = sized_cases(n, seed, lo, hi)
    rows = []
    for i, (mesh, src, dst) in enumerate(cases):
        res = compare(mesh, src, dst, repeats=repeats, seed=i)
        row = {"case": i, "mesh": str(mesh), "src": str(src), "dst": str(dst),
               "global_bytes": int(np.prod(src.shape)) * 4}
        for k in ("ours", "xla_shardy", "xla_gspmd"):
            r = res[k]
            row[k] = {f: r.get(f) for f in ("correct", "time_s", "time_p10_s", "time_p90_s", "temp_bytes",
                                             "temp_plus_output_bytes", "full_remat", "collectives")}
        row["ours"]["plan_steps"] = res["ours"]["plan_steps"]
        rows.append(row)
        if progress:
            progress("cases", i + 1, len(cases), f"{mesh} {src} -> {dst}")
    summary = summarize(rows)
    if calibration and Path(calibration).is_file():
        cal = json.loads(Path(calibration).read_text())
        summary["calibration"] = {k: cal.get(k) for k in ("profile", "mode", "mape", "median_ape", "mape_vs_p10",
                                                          "retest_mape", "n_heldout")}
    return {"summary": summary, "cases": rows, "seed": seed, "n": n}


def _geomean(v):
    v = [x for x in v if x > 0]
    return float(math.exp(np.mean(np.log(v)))) if v else None


def summarize(rows: list[dict]) -> dict:
    out = {"n_cases": len(rows),
           "all_correct": all(r[k]["correct"] for r in rows for k in ("ours", "xla_shardy", "xla_gspmd"))}
    for part in ("xla_shardy", "xla_gspmd"):
        ot = [r["ours"]["temp_bytes"] for r in rows]
        xt = [r[part]["temp_bytes"] for r in rows]
        lower = sum(o < x for o, x in zip(ot, xt))
        equal = sum(o == x for o, x in zip(ot, xt))
        ratios = [r["ours"]["time_s"] / r[part]["time_s"] for r in rows]
        mem_ratio = [(o + 1) / (x + 1) for o, x in zip(ot, xt)]
        out[part] = {
            "temp_ours_lower": lower, "temp_equal": equal, "temp_ours_higher": len(rows) - lower - equal,
            "temp_bytes_total_ours": int(sum(ot)), "temp_bytes_total_xla": int(sum(xt)),
            "temp_ratio_geomean": _geomean(mem_ratio),
            "temp_ratio_max": float(max(mem_ratio)) if mem_ratio else None,
            "time_ratio_geomean": _geomean(ratios),
            "time_ratio_min": float(min(ratios)) if ratios else None,
            "time_ratio_max": float(max(ratios)) if ratios else None,
            "ours_faster": sum(x < 1 for x in ratios),
            "full_remat_cases": sum(bool(r[part]["full_remat"]) for r in rows),
        }
    return out


def print_report(rep: dict) -> None:
    from executor.fmt import fmt_bytes

    s = rep["summary"]
    print(f"{s['n_cases']} seeded cases (seed {rep['seed']}), 8 devices; all outputs exact: "
          f"{'yes' if s['all_correct'] else 'NO'}")
    for part, name in (("xla_shardy", "XLA Shardy"), ("xla_gspmd", "XLA GSPMD")):
        p = s[part]
        print(f"vs {name}:")
        print(f"  temp memory: ours lower in {p['temp_ours_lower']}, equal in {p['temp_equal']}, higher in "
              f"{p['temp_ours_higher']} cases; total {fmt_bytes(p['temp_bytes_total_ours'])} (ours) vs "
              f"{fmt_bytes(p['temp_bytes_total_xla'])} (XLA); (ours+1)/(XLA+1) geomean "
              f"{p['temp_ratio_geomean']:.3f}, max {p['temp_ratio_max']:.3f}")
        print(f"  time ours/XLA: geomean {p['time_ratio_geomean']:.3f}, min {p['time_ratio_min']:.3f}, "
              f"max {p['time_ratio_max']:.3f}; ours faster in {p['ours_faster']}/{s['n_cases']}")
        print(f"  XLA full rematerializations: {p['full_remat_cases']}/{s['n_cases']}")
    cal = s.get("calibration")
    if cal:
        print(f"calibration ({cal.get('mode')} run, {cal.get('profile')}): held-out MAPE "
              f"{cal.get('mape'):.1f}% over {cal.get('n_heldout')} plans; re-measurement noise "
              f"{(cal.get('retest_mape') or float('nan')):.1f}%")
    print("per case (time ours / shardy / gspmd, temp ours / shardy / gspmd):")
    for r in rep["cases"]:
        o, a, b = r["ours"], r["xla_shardy"], r["xla_gspmd"]
        print(f"  {r['case']:3d} {r['mesh']:12s} {r['src']} -> {r['dst']} ({fmt_bytes(r['global_bytes'])}): "
              f"{o['time_s'] * 1e3:.3f} / {a['time_s'] * 1e3:.3f} / {b['time_s'] * 1e3:.3f} ms, "
              f"{fmt_bytes(o['temp_bytes'])} / {fmt_bytes(a['temp_bytes'])} / {fmt_bytes(b['temp_bytes'])}"
              f"{'  [XLA remat]' if a['full_remat'] or b['full_remat'] else ''}")
