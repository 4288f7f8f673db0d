"""Responsiveness benchmark of the app (prints figures; no asserts).

    python -m ui.bench                 # the browser figures (issue 24's targets), a table
    python -m ui.bench --json          # one JSON document
    python -m ui.bench --apptest       # also the script-run figures below (AppTest)
    python -m ui.bench --big-limit 60  # give the 4096-device simulation at most 60 s
    python -m ui.bench --streamlit-run # the server started by plain `streamlit run app.py`

The browser figures (:mod:`ui.bench_browser`: the server started as ``make run`` starts
it, ``python -m ui.serve``, driven by headless Chromium) are first load, page switches at 64 and 4096 devices, a sidebar edit and a
4096-device Simulate, each until the page is idle. With ``--apptest`` four more parts,
each timed with Streamlit's ``AppTest`` (one script run per interaction, without the
browser's rendering):

1. **64-device interactions.** Each page is loaded with cold caches, then driven
   through inputs that miss the caches and inputs seen before. The time of an
   interaction runs until its final result is on the page: when the work went to a
   background process, the page is re-run (as its progress display does) until the
   result is shown.
2. **4096-device Simulate** (``tpu-v4:16x16x16``, ``data=512,model=8``), with planner
   ``normal`` (all-to-alls over 512 devices, which the simulator refuses as too large to
   route: the time until that line shows) and ``easy`` (all-gathers, which it replays):
   the time until the result is shown, and the progress updates seen on the way.
3. **Another session meanwhile:** while part 2's ``easy`` job runs, a second session edits the
   target sharding on the Plan page (64 devices); the time of that script run.
4. **Cancel:** a third session starts a 4096-device simulation (another target
   sharding, so a separate job), presses Cancel once it runs, and the time until its worker
   process has exited is taken.
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
        ("planner -> normal", "selectbox", "planner", "normal"),
        ("open the Layout tab", "tab", "plan_view", "Layout"),
        ("layout step -> last", "select_slider", "layout_step", -1),
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
        ("bandwidth x1 (latency still x4: new)", "select_slider", "cmp_bw_scale", 1.0),
        ("placement data=Z*Y:2,model=Y:2*X (invalid on 16x4: error)", "text_input", "cmp_placement",
         "data=Z*Y:2,model=Y:2*X"),
        ("mesh data=8,model=8", "selectbox", "cmp_mesh", "data=8,model=8"),
    ]),
]

BIG = {"machine_size": "16x16x16", "mesh": "data=512,model=8", "planner": "normal"}


def _widget(at, kind, key):
    w = getattr(at, kind)(key=key)
    return w


def _pending(at) -> bool:
    return any("background process" in str(i.value) for i in at.info)


def _settle(at, limit_s: float, on_poll=None) -> bool:
    """Re-run while a background job panel is shown; True when the result came."""
    t0 = time.monotonic()
    while _pending(at):
        if time.monotonic() - t0 > limit_s:
            return False
        if on_poll:
            on_poll(at)
        time.sleep(0.2)
        at.run()
    return True


def _app(tag: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.session_state["_session_tag"] = tag
    return at


def _set_sidebar(at, **values):
    for k, v in values.items():
        w = at.sidebar.selectbox(key=k) if k in ("dtype", "planner", "machine_profile") else \
            at.sidebar.text_input(key=k)
        w.set_value(v)
    at.run()


def run_interactions(log: bool = False) -> list[dict]:
    import streamlit as st

    rows = []
    for page, steps in SCENARIOS:
        st.cache_data.clear()
        st.cache_resource.clear()
        at = _app(f"bench-{page}")
        t0 = time.perf_counter()
        at.run()
        at.switch_page(page).run()
        _settle(at, 600)
        first = time.perf_counter() - t0
        if at.exception or at.error:
            raise SystemExit(f"{page}: first load failed: {[e.value for e in (*at.exception, *at.error)]}")
        rows.append({"page": page, "interaction": "first load (cold caches)", "seconds": first})
        for label, kind, key, value in steps:
            w = None if kind == "tab" else _widget(at, kind, key)
            if value == -1:
                value = w.options[-1]
            t0 = time.perf_counter()
            if w is None:  # a tab (AppTest cannot click one): its state, as the click sets it
                at.session_state[key] = value
            else:
                w.set_value(value)
            at.run()
            bg = _pending(at)
            _settle(at, 600)
            dt = time.perf_counter() - t0
            ok = not at.exception and not at.error
            rows.append({"page": page, "interaction": label, "seconds": dt, "ok": ok, "background": bg})
            if log:
                print(f"  {page} {label}: {dt:.3f} s{' (background job)' if bg else ''}", file=sys.stderr,
                      flush=True)
    return rows


def _big_simulate(tag: str, planner: str, limit_s: float, during=None) -> dict:
    """Open Simulate on the 4096-device scenario with ``planner``; the seconds until the
    result (or an error line) is shown, the estimate and the progress texts seen.
    ``during(at)`` runs once right after the page first shows (the job running)."""
    out = {"planner": planner}
    a = _app(tag).run()
    _set_sidebar(a, **dict(BIG, planner=planner))
    t0 = time.perf_counter()
    a.switch_page("ui/pages/simulate.py").run()
    seen = []

    def note(at):
        for p in at.get("progress"):
            txt = getattr(p.proto, "text", "")
            if txt and (not seen or seen[-1] != txt):
                seen.append(txt)

    out["background"] = _pending(a)
    info = [str(i.value) for i in a.info if "background process" in str(i.value)]
    out["estimate_shown"] = info[0].split("(estimated ")[1].split(",")[0] if info else None
    if during is not None:
        during(a)
    done = _settle(a, limit_s, note)
    out["seconds"] = time.perf_counter() - t0 if done else None
    out["finished"] = done
    out["error"] = next((str(e.value) for e in a.error), None)
    out["progress_updates_seen"] = seen[:8]
    if done and not out["error"]:
        m = {x.label: x.value for x in a.metric}
        out["simulated_time"] = m.get("simulated time")
    elif not done:  # stop it
        a.button(key="simulate_cancel_job").click().run()
    return out


def run_big(limit_s: float) -> dict:
    """Parts 2-4."""
    from ui import jobs

    out = {"limit_s": limit_s, "runs": []}
    # the case with the default planner's kind of plan (all-to-all over 512 devices)
    out["runs"].append(_big_simulate("big-N", "normal", limit_s))

    def other_session(a):  # part 3 while part 2 runs: another session edits the Plan page
        b = _app("big-B").run()
        b.sidebar.text_input(key="dst").set_value("[8192{data,model}, 32768]")
        tb = time.perf_counter()
        b.run()
        out["other_session_plan_edit_s"] = time.perf_counter() - tb
        out["other_session_ok"] = not b.exception and not b.error
        out["big_job_was_running_meanwhile"] = _pending(a.run())

    out["runs"].append(_big_simulate("big-A", "easy", limit_s, other_session))

    # part 4: cancel
    c = _app("big-C").run()
    _set_sidebar(c, **dict(BIG, planner="easy"))
    c.switch_page("ui/pages/simulate.py").run()
    c.sidebar.text_input(key="dst").set_value("[8192{data,model}, 32768]")  # a separate job
    c.run()
    job = None
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        running = [j for j in jobs.manager().running() if j._proc is not None and j._proc.is_alive()]
        if running and _pending(c):
            job = running[-1]
            break
        time.sleep(0.2)
        c.run()
    if job is None:
        out["cancel_s"] = None
        out["cancel_note"] = "no job to cancel (the case finished or failed first)"
        return out
    time.sleep(1.0)
    tc = time.perf_counter()
    c.button(key="simulate_cancel_job").click().run()
    job._proc.join(10)
    out["cancel_s"] = time.perf_counter() - tc
    out["cancel_process_exited"] = not job._proc.is_alive()
    out["cancelled_panel_shown"] = any("cancelled" in str(i.value) for i in c.info)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m ui.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--big-limit", type=float, default=120.0,
                   help="seconds to wait for the 4096-device simulation (default: %(default)s)")
    p.add_argument("--skip-big", action="store_true", help="only the 64-device interactions")
    p.add_argument("--apptest", action="store_true", help="also the AppTest script-run figures")
    p.add_argument("--no-browser", action="store_true", help="skip the browser figures")
    p.add_argument("--screenshots", metavar="DIR", help="save a full-height screenshot of every page at 64 "
                   "and at 4096 devices there (plan-64.png, simulate-4096.png, ...), after the timed figures")
    p.add_argument("--streamlit-run", action="store_true", help="start the server with plain `streamlit run "
                   "app.py` (the first page pays every first-call cost) instead of `python -m ui.serve`, which "
                   "`make run` uses (the default page's caches filled in a background thread at start)")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the default since issue 24's round 4
    p.add_argument("--progress", action="store_true", help="print each figure to stderr as it is measured")
    args = p.parse_args(argv)
    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    browser = {}
    if not args.no_browser:
        from ui import bench_browser

        if not Path(bench_browser.CHROMIUM).exists():
            print(f"the browser figures need {bench_browser.CHROMIUM} (apt-get install -y chromium); "
                  "use --no-browser --apptest for the rest", file=sys.stderr)
            return 2
        log = (lambda s: print("  " + s, file=sys.stderr, flush=True)) if args.progress else None
        browser = bench_browser.run(log=log, big=not args.skip_big, shots=args.screenshots,
                                    serve=not args.streamlit_run)
        if not args.apptest:
            if args.json:
                json.dump({"browser": browser}, sys.stdout, indent=2)
                print()
            else:
                _print_browser(browser)
            return 0
    rows = run_interactions(log=args.progress)
    inter = [r["seconds"] for r in rows if r["interaction"] != "first load (cold caches)"]
    summary = {"interactions": len(inter), "max_interaction_s": max(inter),
               "median_interaction_s": sorted(inter)[len(inter) // 2], "target_s": 1.0,
               "all_under_target": max(inter) <= 1.0}
    big = {} if args.skip_big else run_big(args.big_limit)
    if args.json:
        json.dump({"browser": browser, "rows": rows, "summary": summary, "big": big}, sys.stdout, indent=2)
        print()
        return 0
    if browser:
        _print_browser(browser)
    w = max(len(r["interaction"]) for r in rows)
    page = None
    for r in rows:
        if r["page"] != page:
            page = r["page"]
            print(f"\n{page}")
        flag = "" if r.get("ok", True) else "  (error shown)"
        flag += "  (background job)" if r.get("background") else ""
        print(f"  {r['interaction']:<{w}}  {r['seconds']:7.3f} s{flag}")
    print(f"\n{summary['interactions']} interactions on 64-device cases: median "
          f"{summary['median_interaction_s']:.3f} s, max {summary['max_interaction_s']:.3f} s "
          f"(target <= {summary['target_s']:.0f} s)")
    if big:
        print("\n4096 devices (tpu-v4:16x16x16, data=512,model=8), Simulate until the result or its error "
              "is shown (target <= 15 s):")
        for r in big["runs"]:
            s = r.get("seconds")
            res = (f"{s:.1f} s" if s is not None else f"not finished within {big['limit_s']:.0f} s")
            what = (f"error shown: {r['error'][:110]}..." if r.get("error") else
                    f"simulated time {r.get('simulated_time')}")
            print(f"  planner {r['planner']}: {res}; {what}")
            print(f"    background job: {r['background']}, estimate shown first: {r.get('estimate_shown')}; "
                  f"progress seen: {r.get('progress_updates_seen')}")
        if "other_session_plan_edit_s" in big:
            print(f"  another session's Plan edit meanwhile: {big['other_session_plan_edit_s']:.2f} s "
                  f"(target <= 2 s; big job still running then: {big['big_job_was_running_meanwhile']})")
        c = big.get("cancel_s")
        print("  Cancel -> worker process gone: " + (f"{c:.2f} s (target <= 2 s)" if c is not None
                                                     else big.get("cancel_note", "-")))
    return 0


def _print_browser(b: dict) -> None:
    t = b["targets"]

    def line(label, key, extra=""):
        if key not in b:
            return
        ok = "ok" if b["met"].get(key) else "OVER"
        print(f"  {label:<38} {b[key]:7.2f} s   target <= {t[key]:g} s  {ok}{extra}")

    print(f"Browser ({b.get('launcher')}, headless Chromium), until the page is idle; load average (1 min) "
          f"{b.get('load_avg_1m_start')} at the start, {b.get('load_avg_1m_end')} at the end, "
          f"{b.get('cpu_count')} CPUs:")
    if b.get("server_ready_s") is not None:
        warm = b.get("warm_first_page_s")
        print(f"  server answered its health check {b['server_ready_s']:.2f} s after its start; the page opened "
              "then" + (f"; ui.serve's warm-up filled the first page's caches in {warm:.2f} s from its start"
                        if warm is not None else ""))
    line("first load (Plan, 64 devices)", "first_load_s",
         f"  (numbers shown after {b['first_paint_s']:.2f} s)" if "first_paint_s" in b else "")
    sw = b.get("switches_64") or []
    line("page switch p50, 64 devices", "switch_64_s",
         f"  (max {max(r['s'] if r['s'] is not None else float('inf') for r in sw):.2f} s over {len(sw)})" if sw else "")
    line("sidebar edit p50, 64 devices", "edit_64_s")
    line("Simulate, 4096 devices", "simulate_4096_s",
         f"  (progress bar seen: {b.get('simulate_4096_progress_seen')})")
    sw = b.get("switches_4096") or []
    line("page switch p50, 4096 devices", "switch_4096_s",
         f"  (max {max(r['s'] if r['s'] is not None else float('inf') for r in sw):.2f} s over {len(sw)})" if sw else "")
    if b.get("screenshots"):
        print("  screenshots: " + ", ".join(b["screenshots"]))
    if b.get("shown_4096_max_s") is not None:
        print(f"  {'page shown (job panel up), 4096, max':<38} {b['shown_4096_max_s']:7.2f} s")

    def one(r):
        s = f"{r['s']:.2f}" if r["s"] is not None else f"> {r['timed_out_s']:g} (timed out)"
        if r.get("job") and r.get("shown_s") is not None:
            s += f" (shown {r['shown_s']:.2f}, then a job)"
        return f"{r['to']} {s}"

    for key in ("switches_64", "switches_4096"):
        if b.get(key):
            print(f"    {key}: " + ", ".join(one(r) for r in b[key]))


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
