"""Responsiveness benchmark of the app on 64-device cases (prints figures; no asserts).

    python -m ui.bench            # a table
    python -m ui.bench --json     # one JSON document

Each page is loaded once with cold caches (``first load``), then driven through
interactions the way a user would: new inputs that miss the caches, and inputs seen
before (cache hits). Times are wall-clock seconds of ``AppTest.run()``, i.e. one
Streamlit script run including every cached call and figure build, without the
browser's rendering.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (page, [(label, widget kind, key, value), ...]) -- every value is a 64-device case.
SCENARIOS = [
    ("ui/pages/plan.py", [
        ("new target sharding", "text_input", "dst", "[8192, 32768{data,model}]"),
        ("new source sharding", "text_input", "src", "[8192{model}, 32768{data}]"),
        ("planner -> easy", "selectbox", "planner", "easy"),
        ("planner -> search", "selectbox", "planner", "search"),
        ("back to normal (cached)", "selectbox", "planner", "normal"),
        ("mesh data=8,model=8", "text_input", "mesh", "data=8,model=8"),
    ]),
    ("ui/pages/simulate.py", [
        ("new target sharding", "text_input", "dst", "[8192{model,data}, 32768]"),
        ("placement data=X*Y,model=Z", "text_input", "sim_placement", "data=X*Y,model=Z"),
        ("placement data=Z*Y,model=X", "text_input", "sim_placement", "data=Z*Y,model=X"),
        ("back to row-major (cached)", "text_input", "sim_placement", ""),
    ]),
    ("ui/pages/compare.py", [
        ("bandwidth x2", "select_slider", "cmp_bw_scale", 2.0),
        ("latency x4", "select_slider", "cmp_lat_scale", 4.0),
        ("placement data=Z*Y,model=X", "text_input", "cmp_placement", "data=Z*Y,model=X"),
        ("back to bandwidth x1 (cached)", "select_slider", "cmp_bw_scale", 1.0),
        ("placement data=Z*Y:2,model=Y:2*X (invalid on 16x4: error)", "text_input", "cmp_placement", "data=Z*Y:2,model=Y:2*X"),
        ("mesh data=8,model=8", "selectbox", "cmp_mesh", "data=8,model=8"),
    ]),
]


def _widget(at, kind, key):
    return getattr(at, kind)(key=key)


def run_bench(repeats: int = 1) -> list[dict]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    rows = []
    for page, steps in SCENARIOS:
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        t0 = time.perf_counter()
        at.run()
        at.switch_page(page).run()
        first = time.perf_counter() - t0
        if at.exception or at.error:
            raise SystemExit(f"{page}: first load failed: {[e.value for e in (*at.exception, *at.error)]}")
        rows.append({"page": page, "interaction": "first load (cold caches)", "seconds": first})
        for label, kind, key, value in steps:
            t0 = time.perf_counter()
            _widget(at, kind, key).set_value(value)
            at.run()
            dt = time.perf_counter() - t0
            ok = not at.exception and not at.error
            rows.append({"page": page, "interaction": label, "seconds": dt, "ok": ok})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m ui.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON document")
    args = p.parse_args(argv)
    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    rows = run_bench()
    inter = [r["seconds"] for r in rows if r["interaction"] != "first load (cold caches)"]
    summary = {"interactions": len(inter), "max_interaction_s": max(inter),
               "median_interaction_s": sorted(inter)[len(inter) // 2], "target_s": 2.0,
               "all_under_target": max(inter) < 2.0}
    if args.json:
        json.dump({"rows": rows, "summary": summary}, sys.stdout, indent=2)
        print()
        return 0
    w = max(len(r["interaction"]) for r in rows)
    page = None
    for r in rows:
        if r["page"] != page:
            page = r["page"]
            print(f"\n{page}")
        flag = "" if r.get("ok", True) else "  (error shown)"
        print(f"  {r['interaction']:<{w}}  {r['seconds']:7.3f} s{flag}")
    print(f"\n{summary['interactions']} interactions on 64-device cases: median "
          f"{summary['median_interaction_s']:.3f} s, max {summary['max_interaction_s']:.3f} s "
          f"(target < {summary['target_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
