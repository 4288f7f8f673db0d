"""The browser half of ``python -m ui.bench``: the explorer's server (``python -m ui.serve``,
as ``make run`` starts it; ``streamlit run app.py`` with ``serve=False``) driven by headless
Chromium (Playwright), timed as a user waits.

An interaction's time runs from the click or the Enter key until the page is idle:
its heading (or the text the interaction must produce) is shown, the app's script
state (``stApp``'s ``data-test-script-state``) is not running, no background-job panel
or progress bar is shown, nothing is still loading (no ``stSkeleton``, every
``stPlotlyChart`` and ``stVegaLiteChart`` drawn), no element is stale (greyed while a rerun is on its
way), and the number of drawn plotly charts has stopped changing for
``SETTLE_S`` seconds (that quiet period is subtracted from the figure).

Figures (targets from issue 24, on a quiet machine):

* ``first_load_s``: opening ``/`` on a server that is up (its health check answers; the
  browser opens the page at once, so it races the server's warm-up thread) until the
  default 64-device Plan page is idle (<= 3 s); ``first_paint_s``: until its metrics show;
* ``switch_64_s``: every switch between the pages (:data:`PAGES`), twice round, 64 devices (p50 <= 0.5 s);
* ``edit_64_s``: a sidebar edit (a new target sharding) on the Plan page (<= 0.5 s);
* ``simulate_4096_s``: opening Simulate on ``tpu-v4:16x16x16``, ``data=512,model=8``,
  until the result is drawn, and whether a progress bar was seen on the way (<= 10 s);
* ``switch_4096_s``: the page switches again at 4096 devices (p50 <= 2 s).

Each switch also records ``shown_s``: the seconds until the page was drawn apart from a
background job, whose panel (estimate, progress bar, Cancel) then shows (``job``: a
progress bar was seen); ``shown_4096_max_s`` is the longest of these at 4096 devices.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
PAGES = ("Plan", "Simulate", "Compare", "Calibration", "Sweeps", "Cross-mesh")
#: Seconds the page must stay unchanged to count as idle (not counted in the figures).
SETTLE_S = 0.25
BIG = {"Machine size": "16x16x16", "Mesh axes": "data=512,model=8"}
TARGETS = {"switch_64_s": 0.5, "edit_64_s": 0.5, "first_load_s": 3.0, "simulate_4096_s": 10.0,
           "switch_4096_s": 2.0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The app's server on a free local port, until :meth:`stop`: ``python -m ui.serve``
    (``serve=True``, as ``make run`` starts it) or ``streamlit run app.py``."""

    def __init__(self, env: dict | None = None, serve: bool = False):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".streamlit.log", delete=False)
        e = dict(os.environ, **(env or {}))
        e.pop("XLA_FLAGS", None)
        opts = ["--server.headless", "true", "--server.port", str(self.port), "--server.address", "127.0.0.1",
                "--browser.gatherUsageStats", "false"]
        cmd = ([sys.executable, "-m", "ui.serve", *opts] if serve else
               [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), *opts])
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=e, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        self.ready_s = time.monotonic() - t0  # process start -> health check answers
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit("streamlit did not start; its log: " + self.log.name)
            time.sleep(0.2)

    def warm_first_page_s(self) -> float | None:
        """Seconds ``ui.serve``'s warm-up took to fill the first page's caches (from its log
        line; None with plain ``streamlit run`` or before it finished)."""
        import re

        try:
            text = Path(self.log.name).read_text(errors="replace")
        except OSError:
            return None
        m = re.search(r"caches filled in ([0-9.]+) s", text)
        return float(m.group(1)) if m else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


_IDLE_JS = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  const run = !app || ["running", "rerunRequested", "initial"].includes(app.dataset.testScriptState)
      || app.dataset.testConnectionState !== "CONNECTED";
  const stale = document.querySelectorAll("[data-stale='true']").length;
  const vega = "[data-testid='stMain'] [data-testid='stVegaLiteChart']";
  const charts = document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot").length
      + document.querySelectorAll(vega + " canvas, " + vega + " svg.marks").length;
  // elements still loading: skeletons, plotly and Vega-Lite containers not drawn yet
  const loading = document.querySelectorAll("[data-testid='stMain'] [data-testid='stSkeleton']").length
      + [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stPlotlyChart']")]
          .filter(e => e.offsetParent !== null && !e.querySelector(".js-plotly-plot")).length
      + [...document.querySelectorAll(vega)]
          .filter(e => e.offsetParent !== null && !e.querySelector("canvas, svg.marks")).length;
  const job = [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stAlert']")]
      .some(e => /background process/.test(e.innerText || ""))
      || document.querySelectorAll("[data-testid='stMain'] [data-testid='stProgress']").length > 0;
  return [run || loading > 0, stale, charts, job, document.querySelectorAll("[data-testid='stProgress']").length];
}"""


def wait_idle(page, t0: float, ready=None, limit_s: float = 120.0, seen: dict | None = None) -> float:
    """Seconds from ``t0`` until the page is idle (see the module docstring);
    ``ready()`` must also be true (e.g. a heading is shown). ``seen["progress"]`` is set
    when a progress bar was drawn on the way, ``seen["shown_s"]`` to the seconds until the
    page was first drawn apart from a background job (its panel and progress bar shown)."""
    last, since = None, None
    while True:
        now = time.perf_counter()
        if now - t0 > limit_s:
            raise TimeoutError(f"the page was not idle within {limit_s:.0f} s")
        run, stale, charts, job, progress = page.evaluate(_IDLE_JS)
        if seen is not None and progress:
            seen["progress"] = True
        if seen is not None and "shown_s" not in seen and not run and not stale and (ready is None or ready()):
            seen["shown_s"] = now - t0
        state = (charts,)
        quiet = not run and not stale and not job and (ready is None or ready())
        if quiet and state == last:
            if now - since >= SETTLE_S:
                return since - t0
        else:
            since = now
        last = state if quiet else None
        page.wait_for_timeout(30)


def _heading(page, title):
    main = page.locator("[data-testid='stMain']")
    return lambda: main.get_by_role("heading", name=title, exact=True).count() > 0


def _switch(page, title: str, limit_s: float = 120.0, seen=None) -> float:
    t0 = time.perf_counter()
    page.get_by_role("link", name=title).first.click()
    return wait_idle(page, t0, _heading(page, title), limit_s, seen)


def _fill(page, label: str, value: str, limit_s: float = 120.0) -> float:
    box = page.get_by_role("textbox", name=label)
    box.fill(value)
    t0 = time.perf_counter()
    box.press("Enter")
    return wait_idle(page, t0, None, limit_s)


def _rounds(page, rounds: int = 2, start: str = "Plan", limit_s: float = 120.0) -> list[dict]:
    """Every page switch, ``rounds`` times round; a switch not idle within ``limit_s``
    (a background job still running) is recorded with ``"s": None`` and the bench goes on."""
    out = []
    order = list(PAGES)
    cur = start
    for _ in range(rounds):
        for title in order[order.index(cur) + 1:] + order[:order.index(cur) + 1]:
            seen: dict = {}
            try:
                out.append({"to": title, "s": _switch(page, title, limit_s, seen)})
            except TimeoutError:
                out.append({"to": title, "s": None, "timed_out_s": limit_s})
            out[-1]["shown_s"] = seen.get("shown_s")  # a page waiting on a job: when its panel showed
            out[-1]["job"] = bool(seen.get("progress"))
            cur = title
    return out


def _slug(title: str) -> str:
    return title.lower().replace(" ", "-")


def screenshots(page, folder: str, tag: str, limit_s: float = 300.0) -> list[str]:
    """Every page (:data:`PAGES`) in a full-height screenshot, ``<page>-<tag>.png`` in
    ``folder`` (``plan-64.png``, ``cross-mesh-4096.png``); the viewport is stretched to
    the page's height (Streamlit scrolls inside its main block, which a full-page
    screenshot alone would cut). Taken outside the timed figures. Returns the paths."""
    out = []
    size = page.viewport_size
    Path(folder).mkdir(parents=True, exist_ok=True)
    try:
        for title in PAGES:
            _switch(page, title, limit_s)
            height = page.evaluate("() => Math.max(...[...document.querySelectorAll("
                                   "\"[data-testid='stMainBlockContainer'], [data-testid='stSidebarContent']\")]"
                                   ".map(e => e.getBoundingClientRect().top + e.scrollHeight))")
            page.set_viewport_size({"width": size["width"], "height": int(min(max(height + 40, 900), 9000))})
            wait_idle(page, time.perf_counter(), _heading(page, title), limit_s)
            page.wait_for_timeout(400)  # chart transitions
            path = str(Path(folder) / f"{_slug(title)}-{tag}.png")
            page.screenshot(path=path, full_page=True)
            out.append(path)
            page.set_viewport_size(size)
    finally:
        page.set_viewport_size(size)
    return out


def _key(r: dict) -> float:
    return r["s"] if r["s"] is not None else float("inf")


def _p50(rows: list[dict]) -> float:
    """The median over the switches that finished (a timed-out one counts as the slowest)."""
    vals = [r["s"] if r["s"] is not None else float("inf") for r in rows]
    return statistics.median(vals)


def run(log=None, big: bool = True, shots: str | None = None, serve: bool = True) -> dict:
    """Every figure of the module docstring, as a dict (``log(line)`` as they come).
    ``serve``: start the server with ``python -m ui.serve`` (``make run``: the default
    page's caches filled in a background thread from the start), else with plain
    ``streamlit run app.py``."""
    from playwright.sync_api import sync_playwright

    say = log or (lambda s: None)
    srv = Server(serve=serve)
    out: dict = {"url": srv.url, "launcher": "python -m ui.serve" if serve else "streamlit run app.py",
                 "load_avg_1m_start": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count()}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                t0 = time.perf_counter()
                page.goto(srv.url + "/", wait_until="commit")
                page.locator("[data-testid='stMain'] [data-testid='stMetric']").first.wait_for(timeout=120_000)
                out["first_paint_s"] = time.perf_counter() - t0
                out["first_load_s"] = wait_idle(page, t0, _heading(page, "Plan"))
                say(f"first load: numbers shown after {out['first_paint_s']:.2f} s, page idle after "
                    f"{out['first_load_s']:.2f} s")
                sw = _rounds(page)
                out["switches_64"] = sw
                out["switch_64_s"] = _p50(sw)
                say(f"page switch, 64 devices: p50 {out['switch_64_s']:.2f} s, max {_p50([max(sw, key=_key)]):.2f} s")
                edits = []
                for dst in ("P(('data', 'model'), None)", "[8192, 32768{data,model}]", "P('model', 'data')"):
                    edits.append(_fill(page, "Target sharding", dst))
                out["edits_64"] = edits
                out["edit_64_s"] = statistics.median(edits)
                say(f"sidebar edit, 64 devices: p50 {out['edit_64_s']:.2f} s ({', '.join(f'{e:.2f}' for e in edits)})")
                if shots:  # after the timed figures of this scale (the last edit is the default target)
                    out["screenshots"] = screenshots(page, shots, "64")
                    _switch(page, "Plan")
                if big:
                    for label, value in BIG.items():
                        _fill(page, label, value)
                    seen: dict = {}
                    out["simulate_4096_s"] = _switch(page, "Simulate", 300, seen)
                    out["simulate_4096_progress_seen"] = bool(seen.get("progress"))
                    say(f"Simulate, 4096 devices: {out['simulate_4096_s']:.2f} s "
                        f"(progress bar seen: {out['simulate_4096_progress_seen']})")
                    sw = _rounds(page, start="Simulate", limit_s=300)
                    out["switches_4096"] = sw
                    out["switch_4096_s"] = _p50(sw)
                    out["shown_4096_max_s"] = max((r["shown_s"] for r in sw if r.get("shown_s") is not None),
                                                  default=None)
                    say(f"page switch, 4096 devices: p50 {out['switch_4096_s']:.2f} s, "
                        f"max {_p50([max(sw, key=_key)]):.2f} s")
                    if shots:
                        out["screenshots"] = out.get("screenshots", []) + screenshots(page, shots, "4096")
            finally:
                browser.close()
    finally:
        srv.stop()
    out["server_ready_s"] = round(srv.ready_s, 2)
    out["warm_first_page_s"] = srv.warm_first_page_s()
    out["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    out["targets"] = TARGETS
    out["met"] = {k: (out[k] <= v) for k, v in TARGETS.items() if k in out}
    return out
