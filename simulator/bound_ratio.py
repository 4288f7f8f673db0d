"""``python -m simulator bound-ratio RESULTS``: simulated time over the lower bound, with and
without the bound's latency term, read from an experiments results folder (e.g. ``paper.yaml``'s).

The experiments runner records, per baseline row, the simulated time and the lower bound of
the model it ran with. This command recomputes each case's bound twice on the current model --
with the latency term (one launch plus the hops from the nearest holder; issue 23) and without
it (bytes over bandwidth only, the bound before) -- and prints, per planner (``auto`` and XLA's
partitioners by default), the geometric mean and the largest of ``time / bound`` over the cases.

The times are the folder's (the model the run used); only the bounds are recomputed, so a
folder from an older model gives that model's times over today's bounds (the output says when
a recomputed bound with the latency term differs from the recorded one).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from models.profiles import auto_size
from synth.errors import RedistributionError

#: planners reported by default: ours (auto) and XLA's two partitioners
PLANNERS = ("auto", "xla-shardy", "xla-gspmd")
#: most rows read from a results folder (paper.yaml writes about 1,500)
MAX_ROWS = 200_000


def _machine(profile: str, n: int, cache: dict):
    from models import load_profile

    key = (profile, n)
    if key not in cache:
        base = load_profile(profile)
        if base.num_devices == n:
            cache[key] = base
        else:
            gpn = base.dims[1] if base.kind == "switched" else 8
            cache[key] = load_profile(profile, auto_size(base.kind, len(base.dims), n, gpn))
    return cache[key]


def read_rows(folder) -> list[dict]:
    """The finished baseline rows of a results folder's ``rows.jsonl`` (capped reader: a
    regular file inside the folder, UTF-8, at most the ``rows_bytes`` limit; every row a JSON
    object). Later rows with the same id replace earlier ones, as the runner's journal does."""
    from synth.fileio import iter_lines

    d = Path(folder)
    if not d.is_dir():
        raise RedistributionError(f"bound-ratio: {folder} is not a results folder; give the --out folder of "
                                  "'python -m experiments run' (it holds rows.jsonl)")
    path = d / "rows.jsonl"
    if not path.exists():
        raise RedistributionError(f"bound-ratio: {folder} has no rows.jsonl; run a config into it first "
                                  "('python -m experiments run experiments/configs/paper.yaml --out DIR')")
    rows: dict = {}
    for i, line in iter_lines(path, "bound-ratio: rows.jsonl", inside=d):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise RedistributionError(f"bound-ratio: {path}: line {i} is not JSON ({e.msg}); the file is "
                                      "damaged (re-run the config into a new folder)") from None
        if not isinstance(r, dict):
            raise RedistributionError(f"bound-ratio: {path}: line {i} is not a JSON object")
        rows[str(r.get("id", i))] = r
        if len(rows) > MAX_ROWS:
            raise RedistributionError(f"bound-ratio: {path} holds more than {MAX_ROWS:,} rows")
    need = ("suite", "case", "machine", "planner", "mesh", "src", "dst", "itemsize", "num_devices", "time_s")
    out = []
    for r in rows.values():
        if r.get("status") != "ok" or not r.get("baseline") or r.get("placement", "default") != "default":
            continue
        if any(r.get(k) is None for k in need):
            continue
        out.append(r)
    if not out:
        raise RedistributionError(f"bound-ratio: {path} has no finished baseline rows")
    return out


def bound_ratio(folder, planners=PLANNERS) -> dict:
    """Per planner: cases, geomean and max of ``time / bound`` with the latency term
    (``after``) and without it (``before``), and the case with the largest ratio. Bounds are
    computed once per case (they do not depend on the planner)."""
    from models.analytic import redistribution_bound_terms
    from synth import ArrayType, Mesh

    rows = [r for r in read_rows(folder) if r["planner"] in planners]
    if not rows:
        raise RedistributionError(f"bound-ratio: {folder} has no rows of the planners {list(planners)}")
    machines: dict = {}
    bounds: dict = {}
    mismatched = 0
    for r in rows:
        key = (r["suite"], r["case"], r["machine"])
        if key in bounds:
            continue
        n = int(r["num_devices"])
        m = _machine(r["machine"], n, machines)
        mesh, src, dst = Mesh.parse(r["mesh"]), ArrayType.parse(r["src"]), ArrayType.parse(r["dst"])
        chips = list(range(n))
        after = redistribution_bound_terms(m, mesh, src, dst, int(r["itemsize"]), chips)
        before = redistribution_bound_terms(m, mesh, src, dst, int(r["itemsize"]), chips, latency=False)
        b_after, b_before = max(after.values()), max(before.values())
        rec = r.get("lower_bound_s")
        if rec is not None and not math.isclose(float(rec), b_after, rel_tol=1e-6, abs_tol=1e-15):
            mismatched += 1
        bounds[key] = (b_before, b_after)
    out: dict = {}
    for p in planners:
        sub = [r for r in rows if r["planner"] == p]
        if not sub:
            continue
        res = {"cases": len(sub)}
        for name, idx in (("before", 0), ("after", 1)):
            ratios = []
            for r in sub:
                b = bounds[(r["suite"], r["case"], r["machine"])][idx]
                if b > 0 and float(r["time_s"]) > 0:
                    ratios.append((float(r["time_s"]) / b, f"{r['suite']}/{r['case']} on {r['machine']}"))
            if not ratios:
                continue
            v = np.array([x for x, _ in ratios])
            worst = max(ratios)
            res[name] = {"geomean": float(np.exp(np.log(v).mean())), "max": float(worst[0]), "max_case": worst[1],
                         "n": len(v)}
        out[p] = res
    return {"folder": str(folder), "planners": out, "cases": len(bounds),
            "recorded_bound_differs": mismatched}


def print_bound_ratio(res: dict) -> None:
    print(f"results: {res['folder']} ({res['cases']} cases x machines)")
    print(f"{'planner':12s} {'cases':>5s} {'geomean before':>15s} {'geomean after':>14s} "
          f"{'max before':>11s} {'max after':>10s}  worst case (after)")
    for p, s in res["planners"].items():
        b, a = s.get("before", {}), s.get("after", {})
        print(f"{p:12s} {s['cases']:5d} {b.get('geomean', float('nan')):15.2f} {a.get('geomean', float('nan')):14.2f} "
              f"{b.get('max', float('nan')):11.1f} {a.get('max', float('nan')):10.1f}  {a.get('max_case', '-')}")
    print("before: the bound without its latency term (bytes over bandwidth only); after: with one launch plus "
          "the hops from the nearest holder (models.analytic.redistribution_bound_terms). Times are the folder's.")
    if res["recorded_bound_differs"]:
        print(f"note: {res['recorded_bound_differs']} case(s) recorded a different bound than today's model gives "
              "(the folder was run with an older model)")
