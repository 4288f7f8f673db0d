"""One real-browser test: streamlit run app.py, driven by Debian's Chromium.

It needs ``/usr/bin/chromium`` (``apt-get install -y chromium``): ``make test`` installs it
when the user may (root or passwordless sudo), ``.ci/run`` always does. Without it the test
skips with that reason, except under ``REQUIRE_BROWSER=1`` (``.ci/run``), where it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    port = _free_port()
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # the app's own subprocesses set what they need
    log = open(tmp_path / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
         "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            pytest.fail("streamlit did not become healthy:\n" + (tmp_path / "streamlit.log").read_text())
        time.sleep(0.3)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.mark.browser
def test_plan_page_in_chromium(server, tmp_path):
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        why = ("Chromium is missing: run `sudo apt-get install -y chromium` (make test installs it "
               "when it may; .ci/run always does)")
        if os.environ.get("REQUIRE_BROWSER"):  # CI: the browser test must run
            pytest.fail(why)
        pytest.skip(why)
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("APP_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(server + "/", wait_until="domcontentloaded")
            # The default scenario renders first.
            expect(page.get_by_text("Per-device memory along the plan")).to_be_visible(timeout=60_000)
            page.screenshot(path=str(shots / "plan_default.png"))

            # A non-default pair of shardings, one canonical and one PartitionSpec.
            main = page.locator("[data-testid='stMain']")
            src = page.get_by_role("textbox", name="Source sharding")
            src.fill("[8192{model}, 32768{data}]")
            src.press("Enter")
            expect(main.get_by_text("[8192{model}, 32768{data}] →")).to_be_visible(timeout=30_000)
            dst = page.get_by_role("textbox", name="Target sharding")
            dst.fill("P(('data', 'model'), None)")
            t0 = time.monotonic()
            dst.press("Enter")
            expect(main.get_by_text("→ [8192{data,model}, 32768]")).to_be_visible(timeout=30_000)
            print(f"\nbrowser: new target sharding on 64 devices -> updated plan in "
                  f"{time.monotonic() - t0:.2f} s")
            # the step table: a plain table (no data grid on the Plan page), one row per step
            table = main.locator("table").filter(has_text="received bytes (max device)")
            expect(table).to_have_count(1)
            expect(table).to_be_visible()
            expect(table.locator("tbody tr").first).to_contain_text("[8192{model}, 32768{data}]")
            # the memory chart: Vega-Lite drawn as SVG (no plotly on the Plan page's first paint)
            chart = main.locator("[data-testid='stVegaLiteChart'] svg.marks").first
            expect(chart).to_be_visible(timeout=30_000)
            expect(main.locator("[data-testid='stPlotlyChart']")).to_have_count(0)
            expect(chart.locator("text", has_text="shard bound max(src, dst)")).to_have_count(1)
            expect(main.locator("[data-testid='stException']")).to_have_count(0)
            expect(main.locator("[data-testid='stAlertContentError']")).to_have_count(0)
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / "plan_edited.png"))

            # Bad input shows the message, not a traceback.
            dst.fill("P('data', 'data')")
            dst.press("Enter")
            expect(main.get_by_text("at most once")).to_be_visible(timeout=30_000)
            expect(main.locator("[data-testid='stException']")).to_have_count(0)
            page.screenshot(path=str(shots / "plan_error.png"))
            dst.fill("P(('data', 'model'), None)")
            dst.press("Enter")
            expect(main.locator("[data-testid='stAlertContentError']")).to_have_count(0, timeout=30_000)

            # The other pages render in the browser too (the scenario carries over).
            # (Simulate's default tab, the timeline, Compare's chart and Calibration's scatters are
            # Vega-Lite: those pages load no plotly.js)
            for title, charts, vega, text in (("Simulate", 0, 1, "Timeline: "),
                                              ("Compare", 0, 1, "Strategies on the simulated machine"),
                                              ("Calibration", 0, 0, None), ("Sweeps", 0, 0, None)):
                page.get_by_role("link", name=title).click()
                expect(main.get_by_role("heading", name=title, exact=True)).to_be_visible(timeout=60_000)
                if charts:
                    expect(main.locator("[data-testid='stPlotlyChart'] .js-plotly-plot")).to_have_count(
                        charts, timeout=60_000)
                elif title in ("Simulate", "Compare", "Calibration"):
                    expect(main.locator("[data-testid='stPlotlyChart']")).to_have_count(0)
                if vega:
                    expect(main.locator("[data-testid='stVegaLiteChart'] svg.marks")).to_have_count(
                        vega, timeout=60_000)
                    expect(main.get_by_text(text, exact=False).first).to_be_visible()
                expect(main.locator("[data-testid='stException']")).to_have_count(0)
                expect(main.locator("[data-testid='stAlertContentError']")).to_have_count(0)
                page.wait_for_timeout(800)
                page.screenshot(path=str(shots / f"{title.lower()}.png"))
        finally:
            browser.close()
    assert (shots / "plan_edited.png").stat().st_size > 10_000


SHARED = {"machine_profile": "tpu-v4", "machine_size": "2x2x2", "mesh": "x=2,y=4", "shape": "16, 32",
          "dtype": "bfloat16", "src": "[16{y}, 32{x}]", "dst": "[16, 32{x,y}]", "planner": "normal"}


@pytest.mark.browser
def test_shared_link_layout_and_trace_download(server, tmp_path):
    """A shared /plan link reproduces the scenario and draws the layout pictures; the
    Simulate page's Chrome trace downloads and matches the simulation."""
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        why = "Chromium is missing: run `sudo apt-get install -y chromium`"
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(why)
        pytest.skip(why)
    import json
    from urllib.parse import urlencode

    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("APP_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    query = urlencode(dict(SHARED, plan_view="Layout"))  # the link opens the Layout tab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600}, accept_downloads=True)
            page.goto(f"{server}/plan?{query}", wait_until="domcontentloaded")
            main = page.locator("[data-testid='stMain']")
            expect(main.get_by_text("[16{y}, 32{x}] → [16, 32{x,y}]")).to_be_visible(timeout=60_000)
            expect(page.get_by_text("Page not found")).to_have_count(0)
            expect(page.get_by_role("textbox", name="Mesh axes")).to_have_value("x=2,y=4")
            # the layout pictures: source and target, with the devices of each block
            expect(main.get_by_role("tab", name="Layout", selected=True)).to_be_visible(timeout=30_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(shots / "plan_layout_view.png"))
            expect(main.get_by_text("source [16{y}, 32{x}]")).to_be_visible(timeout=30_000)
            expect(main.get_by_text("target [16, 32{x,y}]")).to_be_visible(timeout=30_000)
            layout = main.locator("[data-testid='stPlotlyChart']").filter(has_text="source [16{y}, 32{x}]")
            layout.scroll_into_view_if_needed()
            # rows: dim 0 over y (4 blocks); columns: dim 1 over x (2 blocks); device d = 4x + y
            cells = layout.locator("g.textpoint text")
            expect(cells).to_have_count(8)
            assert sorted(cells.all_text_contents(), key=int) == [str(d) for d in range(8)]
            page.wait_for_timeout(800)
            layout.screenshot(path=str(shots / "layout_source.png"))
            page.screenshot(path=str(shots / "plan_shared_link.png"), full_page=True)
            assert "dst=" in page.url and "x%3D2%2Cy%3D4" in page.url  # the URL carries the scenario

            page.get_by_role("link", name="Simulate").click()
            expect(main.get_by_role("heading", name="Simulate", exact=True)).to_be_visible(timeout=60_000)
            btn = main.get_by_role("button", name="Download Chrome trace (Perfetto)")
            expect(btn).to_be_visible(timeout=120_000)
            # click on the finished page (the button is drawn before the charts and tables
            # below it): the deferred file id the browser holds is then the one of the page's
            # last run, which the server keeps until another run ends (the click itself runs
            # nothing: on_click="ignore", test_app.py::test_simulate_trace_download_does_not_rerun)
            expect(page.locator("[data-testid='stApp']")).to_have_attribute(
                "data-test-script-state", "notRunning", timeout=120_000)
            expect(main.get_by_text("Bandwidth of each op")).to_be_visible()
            page.wait_for_timeout(800)
            page.screenshot(path=str(shots / "simulate_small.png"), full_page=True)
            with page.expect_download(timeout=60_000) as dl:
                btn.click()
            path = tmp_path / "trace.json"
            dl.value.save_as(str(path))
        finally:
            browser.close()
    doc = json.loads(path.read_text())
    import simulator
    import synth

    plan = synth.synthesize(SHARED["mesh"], SHARED["src"], SHARED["dst"], planner="normal", itemsize=2)
    res = simulator.simulate_plan(plan, "tpu-v4:2x2x2")
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
    assert [e["name"] for e in ops] == [f"op {o['index']}: {o['kind']}" for o in res.ops]
    dev = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 1]
    assert len(dev) == sum(1 for _ in res.trace_rows())
    assert doc["otherData"]["time_s"] == res.time_s


@pytest.fixture
def fresh_clone(monkeypatch, tmp_path):
    """No results folder yet (the Sweeps page shows its bundled example)."""
    root = tmp_path / "results-root"
    root.mkdir()
    monkeypatch.setenv("APP_RESULTS_ROOT", str(root))
    return root


@pytest.mark.browser
def test_pictures_claims_and_chart_titles_in_chromium(fresh_clone, server, tmp_path):
    """Issue 24 in the browser: the Plan page's claims and its layout summary (with the
    exact grid one click away), the Simulate page's link load and hottest links, the
    Sweeps page's bundled example and its chart titles, the Calibration overview; then
    every page switch, timed."""
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        why = "Chromium is missing: run `sudo apt-get install -y chromium`"
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(why)
        pytest.skip(why)
    from urllib.parse import urlencode

    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("APP_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(f"{server}/plan?{urlencode({'dst': '[8192, 32768{data,model}]', 'planner': 'normal'})}",
                      wait_until="domcontentloaded")
            main = page.locator("[data-testid='stMain']")
            expect(main.get_by_text("Within the bound: the largest shard per device")).to_be_visible(timeout=60_000)
            expect(main.get_by_text("Received bytes:").first).to_be_visible()
            expect(main.get_by_text("Per-device memory along the plan")).to_be_visible(timeout=30_000)
            main.get_by_role("tab", name="Layout").click()  # the layout pictures: one click away
            summary = main.get_by_text("Summary of a grid too big to draw legibly").first
            summary.scroll_into_view_if_needed()
            expect(summary).to_be_visible(timeout=30_000)
            expect(main.get_by_text("which block each of the 64 devices holds").first).to_be_visible(timeout=30_000)
            page.wait_for_timeout(800)
            page.screenshot(path=str(shots / "plan_summary.png"), full_page=True)
            main.get_by_test_id("stCheckbox").get_by_text("Exact grid", exact=True).click()
            expect(main.get_by_text("Summary of a grid too big to draw legibly")).to_have_count(0, timeout=30_000)

            page.get_by_role("link", name="Simulate").click()
            expect(main.get_by_text("Hottest links (one direction)")).to_be_visible(timeout=120_000)
            main.get_by_role("tab", name="Link load").click()  # one picture at a time, in tabs
            expect(main.get_by_text("Link load on tpu-v4:4x4x4")).to_be_visible(timeout=60_000)

            page.get_by_role("link", name="Sweeps").click()
            expect(main.get_by_text("Bundled example, not your results")).to_be_visible(timeout=60_000)
            expect(main.get_by_role("button", name="Run the smoke sweep")).to_be_visible()
            expect(main.get_by_text("simulated time / lower bound (x)").first).to_be_visible(timeout=30_000)
            # one chart per tab: each tab draws its own, with its title
            for tab, title in (("Time over the lower bound", "Simulated time over its lower bound"),
                               ("Largest shard", "Largest shard per device over max(src, dst)"),
                               ("Peak live", "Peak live bytes (input + output of a step) over max(src, dst)"),
                               ("What if", "What if: simulated time of case")):
                main.get_by_role("tab", name=tab).click()
                expect(main.get_by_text(title).first).to_be_visible(timeout=30_000)
                page.wait_for_timeout(500)
                page.screenshot(path=str(shots / f"sweeps_example_{tab.split()[0].lower()}.png"), full_page=True)

            page.get_by_role("link", name="Calibration").click()
            expect(main.get_by_text("Profiles in this folder and their fit quality")).to_be_visible(timeout=60_000)
            expect(main.locator("[data-testid='stException']")).to_have_count(0)

            times = []
            for title in ("Plan", "Simulate", "Compare", "Calibration", "Sweeps", "Cross-mesh", "Plan"):
                t0 = time.monotonic()
                page.get_by_role("link", name=title).first.click()
                expect(main.get_by_role("heading", name=title, exact=True)).to_be_visible(timeout=60_000)
                expect(main.locator("[data-testid='stException']")).to_have_count(0)
                times.append(f"{title} {time.monotonic() - t0:.2f} s")
            print("\nbrowser: page switches (heading shown): " + ", ".join(times))
        finally:
            browser.close()
