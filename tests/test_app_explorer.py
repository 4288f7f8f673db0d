"""AppTest and unit checks of the explorer features of issue 14 and the app safety of
issue 12 item 7: background jobs (estimate, progress, cancel, session loss, limits),
the Sweeps what-if chart, the aggregated timeline, layout pictures, the Chrome trace,
nccl-tests bandwidths, shareable links, device memory, model error, the "confusing"
fixes, and the results-root restrictions.

Most cases use the small 8-device scenario (``SMALL``) so they run in seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import synth  # noqa: E402
from tests.test_app import SMALL, _exported, _set, _steps, check_moves_exactly  # noqa: E402
from ui import compute, figures, jobs, machines, runs, scenario, work  # noqa: E402
from ui.fmt import byte_unit, fmt_bandwidth, fmt_bytes, fmt_seconds  # noqa: E402

APP = str(ROOT / "app.py")
SMALL_MESH, SMALL_SRC, SMALL_DST = "x=2,y=4", "[16{y}, 32{x}]", "[16, 32{x,y}]"
#: The small scenario with a fixed planner (the default planner is checked elsewhere).
SMALLN = dict(SMALL, planner="normal")


@pytest.fixture(autouse=True)
def _clear_caches(monkeypatch):
    monkeypatch.setenv("APP_INLINE_S", "1e9")
    st.cache_data.clear()
    st.cache_resource.clear()
    runs._INLINE_KEYS.clear()  # work another test file computed inline would skip a worker here
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _app(page=None, query=None, **values) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    if query:
        for k, v in query.items():
            at.query_params[k] = v
    at.run()
    if values:
        _set(at, **values)
    if page:
        at.switch_page(page).run()
    return at


def _ok(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _small_sim():
    import simulator

    plan = synth.synthesize(SMALL_MESH, SMALL_SRC, SMALL_DST, planner="normal", itemsize=2)
    return plan, simulator.simulate_plan(plan, "tpu-v4:2x2x2")


def _wait(at, limit_s=240):
    """Rerun until no background job panel is shown."""
    t0 = time.monotonic()
    while any("background process" in str(i.value) for i in at.info):
        assert time.monotonic() - t0 < limit_s, "the background job did not finish"
        time.sleep(0.3)
        at.run()
    return at


# -- 1. background jobs ------------------------------------------------------------------
def test_simulate_runs_in_a_worker_process_and_matches_inline(monkeypatch):
    at = _app(**SMALLN)
    _ok(at)
    monkeypatch.setenv("APP_INLINE_S", "0")
    at.switch_page("ui/pages/simulate.py").run()
    panel = [i.value for i in at.info if "background process" in str(i.value)]
    assert panel and "estimated about" in panel[0]
    assert any(b.label == "Cancel" for b in at.button)
    _wait(at)
    _ok(at)
    plan, res = _small_sim()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["simulated time"] == fmt_seconds(res.time_s)
    assert metrics["lower bound"] == fmt_seconds(res.lower_bound_s)


def test_work_done_inline_is_not_sent_to_a_worker_when_asked_again(monkeypatch):
    """A simulation computed inline is served from its cache when the page asks again,
    even if the estimate has grown past the inline limit meanwhile (no job, no wait)."""
    at = _app("ui/pages/simulate.py", **SMALLN)
    _ok(at)
    assert not any("background process" in str(i.value) for i in at.info)
    first = {m.label: m.value for m in at.metric}
    monkeypatch.setenv("APP_INLINE_S", "0")  # every estimate is now over the limit
    at.switch_page("ui/pages/plan.py").run()
    at.switch_page("ui/pages/simulate.py").run()
    _ok(at)
    assert not any("background process" in str(i.value) for i in at.info)
    assert {m.label: m.value for m in at.metric} == first
    # new work (another placement) does go to a worker now
    at.text_input(key="sim_placement").set_value("x=Y,y=X*Z").run()
    assert any("background process" in str(i.value) for i in at.info)
    _wait(at)
    _ok(at)


def test_cancel_stops_the_worker_within_two_seconds():
    m = jobs.manager()
    job = m.submit("test-sleep-cancel", "tests.test_app_explorer:_slow_work", (60.0,), session="local-a",
                   slot="t", label="sleep")
    t0 = time.monotonic()
    while job.state != "running" or not job._proc.is_alive():
        assert time.monotonic() - t0 < 30
        time.sleep(0.05)
    while job.done < 1:  # the worker reports progress
        assert time.monotonic() - t0 < 30
        time.sleep(0.05)
    t1 = time.monotonic()
    m.cancel("local-a", "t")
    job._proc.join(5)
    stopped = time.monotonic() - t1
    assert not job._proc.is_alive()
    assert job.state == "cancelled"
    assert stopped < 2.0, stopped


def test_a_job_stops_when_its_session_goes_away():
    m = jobs.manager()
    alive = {"s-gone": True}
    m._session_alive = lambda s: alive.get(s, True)
    try:
        job = m.submit("test-sleep-gone", "tests.test_app_explorer:_slow_work", (60.0,), session="s-gone",
                       slot="t", label="sleep")
        t0 = time.monotonic()
        while job.state != "running" or not job._proc.is_alive():  # the worker is up
            assert time.monotonic() - t0 < 30
            time.sleep(0.05)
        alive["s-gone"] = False
        while job._proc.is_alive():
            assert time.monotonic() - t0 < 30
            time.sleep(0.05)
        assert job.state == "cancelled"
    finally:
        m._session_alive = jobs._session_alive


def test_two_sessions_share_one_job_and_one_cancel_keeps_it_running():
    m = jobs.manager()
    a = m.submit("test-shared", "tests.test_app_explorer:_slow_work", (60.0,), session="local-1", slot="t")
    b = m.submit("test-shared", "tests.test_app_explorer:_slow_work", (60.0,), session="local-2", slot="t")
    assert a is b
    m.cancel("local-1", "t")
    assert a.state in ("waiting", "running")
    m.cancel("local-2", "t")
    assert a.state == "cancelled"


def test_worker_errors_are_one_line_and_results_come_back():
    m = jobs.manager()
    bad = m.submit("test-bad", "tests.test_app_explorer:_failing_work", (), session="local-e", slot="e")
    good = m.submit("test-good", "tests.test_app_explorer:_slow_work", (0.0,), session="local-g", slot="g")
    t0 = time.monotonic()
    while not (bad.finished and good.finished):
        assert time.monotonic() - t0 < 60
        time.sleep(0.05)
    assert bad.state == "error" and bad.error == "mesh 'q': not a mesh" and "\n" not in bad.error
    assert good.state == "done" and good.result == {"slept": 0.0}
    assert m.result("test-good") == {"slept": 0.0}


def test_machines_over_the_limit_are_refused_with_one_line(monkeypatch):
    monkeypatch.setattr(runs, "MAX_SIM_DEVICES", 4)
    at = _app("ui/pages/simulate.py", **SMALLN)
    assert len(at.error) == 1
    msg = at.error[0].value
    assert "more than the app simulates (4" in msg and "\n" not in msg


def _slow_work(seconds, progress=None):
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        progress(1, 2, "sleeping")
        time.sleep(0.05)
    return {"slept": seconds}


def _unit_work(units, seconds, progress=None):
    time.sleep(seconds)
    return {"units": units, "wall_s": seconds}


def test_the_estimate_learns_from_each_worker_job(monkeypatch):
    """Before any run the panel says its estimate is the seed's; a finished worker job sets
    the rate so that the same work is estimated at the time it took (start-up included)."""
    monkeypatch.setattr(jobs, "_RATE", dict(jobs._RATE))
    monkeypatch.setattr(jobs, "_LEARNT", set())
    assert "has not run one yet" in jobs.estimate_basis("simulate")
    m = jobs.manager()
    jobs.note_rate("simulate", 3000, 0.5)  # too short to learn from: fixed costs, mostly
    assert "has not run one yet" in jobs.estimate_basis("simulate")
    job = m.submit("test-rate-1", "tests.test_app_explorer:_unit_work", (3000, 1.1), session="local-r",
                   slot="t", label="units", estimate_s=jobs.estimate_s("simulate", 3000), kind="simulate")
    t0 = time.monotonic()
    while job.state != "done":
        assert job.state in ("waiting", "running") and time.monotonic() - t0 < 60, job.error
        time.sleep(0.05)
    waited = job.ended - job.started
    assert waited >= 1.1
    assert jobs.estimate_s("simulate", 3000) == pytest.approx(waited)
    assert jobs.estimate_basis("simulate") == "from the rate of earlier runs on this server"
    # a second run is averaged in, half each
    r1 = jobs._RATE["simulate"]
    jobs.note_rate("simulate", 3000, 0.2 + 3000 / (r1 / 2))
    assert jobs._RATE["simulate"] == pytest.approx(0.75 * r1)


def _failing_work(progress=None):
    raise synth.errors.RedistributionError("mesh 'q': not a mesh")


# -- 2. Sweeps what-if chart ---------------------------------------------------------------
def test_whatif_chart_never_joins_two_machines_and_matches_the_rows():
    rows = []
    for machine, base in (("tpu-v4:4x4x4", 1.0), ("dgx-h100:2", 3.0)):
        for planner, f in (("normal", 1.0), ("easy", 2.0)):
            for bw in (0.5, 1.0, 2.0):
                rows.append({"status": "ok", "suite": "s", "case": "c1", "machine": machine, "planner": planner,
                             "bandwidth_scale": bw, "latency_scale": 1.0, "time_s": base * f / bw})
    df = pd.DataFrame(rows)
    fig = figures.whatif_figure(df)
    assert len(fig.data) == 4
    div = fig.layout.meta["divisor"]
    assert fig.layout.yaxis.title.text == f"simulated time ({fig.layout.meta['unit']})"
    assert fig.layout.xaxis.title.text.startswith("link bandwidth scale")
    for tr in fig.data:
        g = tr.meta["group"]
        part = df[(df["machine"] == g["machine"]) & (df["planner"] == g["planner"])].sort_values("bandwidth_scale")
        assert list(tr.x) == list(part["bandwidth_scale"])
        assert list(tr.customdata) == list(part["time_s"])
        assert tr.y == pytest.approx([t / div for t in part["time_s"]])
        assert tr.name == f"{g['planner']} on {g['machine']}"
        assert all(b < a for a, b in zip(tr.y, tr.y[1:])), "more bandwidth is never slower in these rows"


# -- 3. timeline ---------------------------------------------------------------------------
def test_timeline_spec_draws_every_transfer_of_the_simulation():
    """The Simulate page's Vega-Lite timeline (``ui.charts.timeline_spec``): valid Vega-Lite,
    one bar per op on the ops row and, detailed, one bar per transfer of the simulation on
    its sender's row with its own start and end; aggregated, bars whose counts add up to
    every transfer and that span their group's transfers."""
    import altair as alt

    from ui import charts

    _plan, res = _small_sim()
    rows = list(res.trace_rows())
    div, unit = figures.time_unit(max(o["end_s"] for o in res.ops))
    spec = charts.timeline_spec(charts.timeline_rows(res))
    alt.Chart.from_dict(spec)  # valid Vega-Lite (altair's schema)
    assert spec["encoding"]["x"]["title"] == f"time ({unit})"
    meta = spec["usermeta"]["timeline"]
    assert meta["detailed"] and meta["transfers"] == len(rows)
    vals = spec["data"]["values"]
    ops = [v for v in vals if v["row"] == charts.OPS_ROW]
    assert [v["start"] for v in ops] == pytest.approx([o["start_s"] / div for o in res.ops])
    assert [v["end"] for v in ops] == pytest.approx([o["end_s"] / div for o in res.ops])
    got = sorted((v["row"], v["start"], v["end"]) for v in vals if v["row"] != charts.OPS_ROW)
    want = sorted((f"dev {r['src']}", r["start_s"] / div, r["end_s"] / div) for r in rows)
    assert len(got) == len(want) and all(g[0] == w[0] and g[1:] == pytest.approx(w[1:]) for g, w in zip(got, want))
    # aggregated: every transfer counted once, each bar from its group's first start to last end
    agg = charts.timeline_spec(charts.timeline_rows(res, max_transfers=5, max_rows=2))
    assert not agg["usermeta"]["timeline"]["detailed"] and agg["usermeta"]["timeline"]["group"] == 4
    bars = [v for v in agg["data"]["values"] if v["row"] != charts.OPS_ROW]
    assert sum(v["count"] for v in bars) == len(rows)
    for v in bars:
        lo, hi = (int(x) for x in v["row"].split()[1].split("-"))
        k = int(v["what"].split(":")[0].split()[1])
        part = [r for r in rows if r["op"] == k and lo <= r["src"] <= hi]
        assert v["count"] == len(part)
        assert (v["start"], v["end"]) == pytest.approx((min(r["start_s"] for r in part) / div,
                                                       max(r["end_s"] for r in part) / div))
    assert "group of 4" in agg["title"]["text"]


# -- 4. layout pictures -------------------------------------------------------------------
@pytest.mark.parametrize("text", ["[16{y}, 32{x}]", "[16, 32{x,y}]", "[16{x}, 32]", "[16, 32, 2{y}]"])
def test_layout_cells_match_the_blocks_devices_hold(text):
    mesh = synth.Mesh.parse(SMALL_MESH)
    t = synth.parse_type(text).check(mesh)
    info = figures.layout_cells(t, mesh)
    x = np.arange(t.num_elems()).reshape(t.shape)
    blocks = synth.scatter(x, t, mesh)
    seen = set()
    for (r, _c), devs in info["cells"].items():
        first = blocks[devs[0]]
        for d in devs:  # every holder listed for a cell holds the same block
            assert np.array_equal(blocks[d], first)
            seen.add(d)
        assert first.flat[0] == x[(r * info["row_size"],) + tuple(
            int(v) for v in np.unravel_index(0, x.shape[1:]))] or t.rank > 1
    assert seen == set(range(mesh.size))
    assert len(info["cells"]) == int(np.prod(t.splits(mesh)))


def test_layout_shows_replication_padding_and_pending_sums():
    mesh = synth.Mesh.parse(SMALL_MESH)
    rep = synth.parse_type("[16{x}, 32]").check(mesh)
    fig = figures.layout_figure(rep, mesh)
    texts = [t for t in fig.data[0].text if t]
    assert len(texts) == 2 and all(len(s.split(",")) == 4 for s in texts)
    try:
        uneven = synth.parse_type("[51{x}, 32]").check(mesh)
    except synth.errors.RedistributionError:
        pytest.skip("uneven dims are not parsed yet")
    f2 = figures.layout_figure(uneven, mesh)
    assert "padding" in f2.layout.title.text
    try:
        pend = synth.parse_type("[16{x}, 32]{U:y}").check(mesh)
    except synth.errors.RedistributionError:
        pytest.skip("pending sums are not parsed yet")
    f3 = figures.layout_figure(pend, mesh)
    assert "pending sum over y" in f3.layout.title.text
    assert all(t.startswith("partial sums") for t in f3.data[0].text if t)


def _layer_values(spec, series):
    return [layer["data"]["values"] for layer in spec["layer"]
            if layer["data"]["values"] and layer["data"]["values"][0].get("series") == series]


def _check_memory_spec(spec, plan, easy_peak_bytes=None, capacity_bytes=None):
    """The memory chart's Vega-Lite spec against the plan, value by value; returns the
    labels of its horizontal lines ``{label: bytes}``."""
    import altair as alt

    from ui import charts

    alt.LayerChart.from_dict(spec)  # valid Vega-Lite (altair's schema)
    assert spec["title"]["text"] == charts.MEMORY_TITLE
    rows = plan.rows()
    (bars,), (live,) = _layer_values(spec, charts.SHARD_SERIES), _layer_values(spec, charts.LIVE_SERIES)
    unit = spec["layer"][0]["encoding"]["y"]["title"].split("(")[-1].rstrip(")")
    div = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]
    assert [b["step"] for b in bars] == [f"{r['step']}: {r['collective']}" for r in rows]
    assert [b["value"] * div for b in bars] == [r["shard_bytes"] for r in rows]
    assert [b["type"] for b in bars] == [str(r["type"]) for r in rows]
    want_live = [rows[0]["shard_bytes"]] + [a["shard_bytes"] + b["shard_bytes"] for a, b in zip(rows, rows[1:])]
    assert [x["value"] * div for x in live] == want_live
    assert max(want_live) == plan.peak_live_bytes
    lines = {}
    for layer in spec["layer"]:
        enc = layer["encoding"]
        if layer["mark"]["type"] == "text" and "datum" in enc.get("y", {}):
            lines[enc["text"]["value"].split(" = ")[0].split(" capacity")[0]] = enc["y"]["datum"] * div
    top = spec["layer"][0]["encoding"]["y"]["scale"]["domain"][1] * div
    assert lines["shard bound max(src, dst)"] == plan.bound_bytes
    assert lines.get("live bound 2 x max(src, dst)", 2 * plan.bound_bytes) == 2 * plan.bound_bytes
    assert all(v <= top for v in lines.values()) and max(want_live) <= top
    notes = [layer["encoding"]["text"]["value"] for layer in spec["layer"]
             if layer["mark"]["type"] == "text" and "datum" not in layer["encoding"].get("y", {})]
    if easy_peak_bytes is not None and easy_peak_bytes > plan.bound_bytes:
        assert ("easy planner's largest shard" in lines) != any("off scale" in n for n in notes)
    if capacity_bytes is not None and "HBM" in lines:
        assert lines["HBM"] == capacity_bytes
    return lines


def test_plan_memory_chart_says_what_the_plan_holds():
    """Element by element: bars are the plan's shards, the line its live input + output,
    the dashed and dotted lines the two bounds; the easy plan's shard and the HBM
    capacity drawn when in range, named off scale otherwise."""
    from ui import charts
    from ui.fmt import fmt_bytes

    mesh, src, dst = "data=16,model=4", "[8192{data}, 32768{model}]", "[8192{model}, 32768{data}]"
    normal = synth.synthesize(mesh, src, dst, planner="normal", itemsize=2)
    easy = synth.synthesize(mesh, src, dst, planner="easy", itemsize=2)
    # the easy plan's 512 MiB is off the normal plan's scale: named in the corner, no line
    spec = charts.plan_memory_spec(normal, easy.max_shard_bytes, 32 * 2**30)
    lines = _check_memory_spec(spec, normal, easy.max_shard_bytes, 32 * 2**30)
    assert set(lines) == {"shard bound max(src, dst)", "live bound 2 x max(src, dst)"}
    assert any(lay["mark"]["type"] == "text" and lay["encoding"]["text"]["value"] ==
               f"easy planner's largest shard: {fmt_bytes(easy.max_shard_bytes)} (off scale)" for lay in spec["layer"])
    # in range: both drawn as lines at their values
    lines = _check_memory_spec(charts.plan_memory_spec(normal, 12 * 2**20, 20 * 2**20), normal, 12 * 2**20, 20 * 2**20)
    assert lines["easy planner's largest shard"] == 12 * 2**20 and lines["HBM"] == 20 * 2**20
    # the easy plan itself exceeds the bound: its bars pass the dashed line
    spec = charts.plan_memory_spec(easy, normal.max_shard_bytes, None)
    _check_memory_spec(spec, easy)
    assert max(b["value"] for b in _layer_values(spec, charts.SHARD_SERIES)[0]) > \
        spec["layer"][2]["encoding"]["y"]["datum"]


def test_plan_page_draws_source_target_and_each_step():
    at = _app(**SMALLN)
    _ok(at)
    # the pictures sit in tabs, only the open one drawn: the memory chart first
    assert [t.label for t in at.tabs] == ["Memory per step", "Layout", "Received bytes"]
    # the memory chart is Vega-Lite: the first paint draws no plotly chart (4.7 MB of JavaScript)
    assert not at.get("plotly_chart")
    vega = at.get("vega_lite_chart")
    assert len(vega) == 1
    _check_memory_spec(json.loads(vega[0].proto.spec), synth.synthesize(
        SMALL_MESH, SMALL_SRC, SMALL_DST, planner="normal", itemsize=2))
    assert not at.select_slider  # the Layout tab is closed: its step slider is not drawn
    # the code boxes are drawn only when opened (the highlighter is off the first paint)
    assert [x.label for x in at.expander][-2:] == ["Plan JSON", "JAX code"] and not at.code
    at.session_state["plan_json_open"] = True  # as a click on the expander sets it
    at.run()
    assert [c.language for c in at.code] == ["json"]
    assert synth.Plan.from_dict(json.loads(at.code[0].value)) == synth.synthesize(
        SMALL_MESH, SMALL_SRC, SMALL_DST, planner="normal", itemsize=2)
    at.session_state["plan_json_open"] = False
    at.session_state["plan_view"] = "Received bytes"
    at.run()
    _ok(at)
    recv = at.get("plotly_chart")
    assert [c.proto.id.endswith("plan_recv_heatmap") for c in recv] == [True]
    plan = synth.synthesize(SMALL_MESH, SMALL_SRC, SMALL_DST, planner="normal", itemsize=2)
    r = plan.recv_bytes_per_device_per_step  # row per communicating step, column per device
    div, _unit = byte_unit(float(r.max()))
    z = np.array(json.loads(recv[0].proto.spec)["data"][0]["z"])
    assert z.shape == r.shape and np.allclose(z * div, r)
    at.session_state["plan_view"] = "Layout"
    at.run()
    _ok(at)
    assert at.query_params["plan_view"] in ("Layout", ["Layout"])  # the open tab is in the link
    labels = [s.label for s in at.select_slider]
    assert "Step" in labels
    step = at.select_slider(key="layout_step")
    assert len(step.options) == len(plan.steps) + 1
    step.set_value(step.options[-1]).run()
    _ok(at)
    charts = at.get("plotly_chart")
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in charts]
    assert any(t.startswith("source " + str(plan.src)) for t in titles)
    assert any(t.startswith("target " + str(plan.dst)) for t in titles)
    assert any(t.startswith("after step") and str(plan.dst) in t for t in titles)


# -- 5/6. Chrome trace and busbw -------------------------------------------------------------
def _check_trace_matches(doc, res):
    from simulator.chrome_trace import op_bandwidths

    ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    ops = [e for e in ev if e["pid"] == 0]
    assert [e["name"] for e in ops] == [f"op {o['index']}: {o['kind']}" for o in res.ops]
    for e, o, bw in zip(ops, res.ops, op_bandwidths(res)):
        assert e["ts"] == pytest.approx(o["start_s"] * 1e6) and e["dur"] == pytest.approx(o["duration_s"] * 1e6)
        assert e["args"]["algorithm"] == (o.get("algorithm") or "local")
        if bw["busbw_Bps"] is not None:
            assert e["args"]["busbw_GBps"] == pytest.approx(bw["busbw_Bps"] / 1e9)
    dev = [e for e in ev if e["pid"] == 1]
    rows = list(res.trace_rows())
    assert len(dev) == len(rows)
    got = sorted((e["tid"], e["args"]["dst"], e["args"]["op"], round(e["ts"], 6), e["args"]["bytes"]) for e in dev)
    want = sorted((r["src"], r["dst"], r["op"], round(r["start_s"] * 1e6, 6), r["bytes"]) for r in rows)
    assert got == want
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["pid"] == 1
             and e["name"] == "thread_name"}
    assert set(names) == {r["src"] for r in rows}
    links = [e for e in ev if e["pid"] == 2]
    assert sum(e["args"]["bytes"] for e in links) == pytest.approx(float(res.link_bytes_array.sum()))
    assert doc["otherData"]["busy_links"] == int((res.link_bytes_array > 0).sum())


def test_cli_chrome_trace_and_json_bandwidths(tmp_path):
    out = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-m", "simulator", "run", "--hardware", "tpu-v4:2x2x2", "--mesh", SMALL_MESH,
                        "--src", SMALL_SRC, "--dst", SMALL_DST, "--itemsize", "2", "--chrome-trace", str(out),
                        "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    plan, res = _small_sim()
    _check_trace_matches(json.loads(out.read_text()), res)
    for o, sop in zip(d["ops"], res.schedule.ops):
        if sop.is_local:
            assert o["busbw_Bps"] is None
            continue
        n = max(len(g) for g in sop.groups) if sop.kind != "permute" else 2
        size = {"all_gather": sop.out_bytes, "permute": sop.send_bytes}.get(sop.kind, sop.in_bytes)
        factor = {"all_reduce": 2 * (n - 1) / n, "permute": 1.0}.get(sop.kind, (n - 1) / n)
        assert o["group_size"] == n and o["nccl_bytes"] == size
        assert o["algbw_Bps"] == pytest.approx(size / o["duration_s"])
        assert o["busbw_Bps"] == pytest.approx(size / o["duration_s"] * factor)
        assert o["link_peak_Bps"] > 0 and o["bus_peak_Bps"] >= o["link_peak_Bps"]


def test_simulate_page_offers_the_trace_and_shows_busbw():
    import simulator

    at = _app("ui/pages/simulate.py", **SMALLN)
    _ok(at)
    btn = [b for b in at.download_button if b.key == "sim_chrome_trace"]
    assert btn
    # sent when clicked (deferred), not with the page: the browser does not fetch it on every visit
    assert btn[0].proto.HasField("deferred_file_id") and not btn[0].proto.url
    _plan, res = _small_sim()
    view = work.simulate_view(res.schedule.to_json(), SMALL_MESH, "tpu-v4", "2x2x2")
    assert "chrome_trace" not in view  # built when the download is clicked
    _check_trace_matches(json.loads(work.chrome_trace_file(res.schedule.to_json(), SMALL_MESH, "tpu-v4", "2x2x2")),
                         res)
    # what the page's deferred data builds for its scenario: the trace of the plan it simulated
    sc = scenario.Scenario(**dict(scenario.DEFAULTS, **SMALLN))
    page_plan = compute.plan_for(sc)
    check_moves_exactly(page_plan)
    _check_trace_matches(json.loads(runs.chrome_trace(page_plan, sc)),
                         simulator.simulate_plan(page_plan, "tpu-v4:2x2x2"))
    table = [d.value for d in at.table if "busbw" in d.value.columns][0]
    for row, o in zip(table.to_dict("records"), view["ops"]):
        assert row["busbw"] == fmt_bandwidth(o["busbw_Bps"]) and row["algbw"] == fmt_bandwidth(o["algbw_Bps"])
    assert any("nccl-tests" in c.value for c in at.caption)


def test_compare_shows_busbw_and_log_ticks():
    at = _app("ui/pages/compare.py", **SMALLN)
    _ok(at)
    df = next(d.value for d in at.table if "its busbw" in d.value.columns)
    assert {"strategy", "its algbw", "its busbw", "bus peak"} <= set(df.columns)
    assert not at.get("plotly_chart")  # Vega-Lite: the page fetches no plotly.js
    import altair as alt

    from ui import charts

    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    alt.Chart.from_dict(spec)  # valid Vega-Lite (altair's schema)
    assert spec["title"]["text"] == charts.STRATEGIES_TITLE
    time_panel, mem_panel = spec["hconcat"]
    bars, rule, label = time_panel["layer"]  # the bound is drawn after the bars: in front of them
    y = bars["encoding"]["y"]
    assert y["scale"]["type"] == "log" and len(y["axis"]["values"]) >= 2
    assert y["title"].startswith("simulated time (") and mem_panel["layer"][0]["encoding"]["y"]["title"].startswith(
        "peak memory per device (")
    assert rule["mark"]["type"] == "rule" and label["data"]["values"][0]["label"].startswith("lower bound")
    # every bar is the strategy's simulated time in the axis unit, the table's value
    table = next(d.value for d in at.table if "simulated time" in d.value.columns)
    shown = {r["strategy"]: r["value"] for r in bars["data"]["values"]}
    assert list(shown) == list(table["strategy"])
    for r in bars["data"]["values"]:
        assert r["text"] == table.set_index("strategy").loc[r["strategy"], "simulated time"]


# -- 7. shareable links ---------------------------------------------------------------------
def test_a_link_reproduces_the_scenario_and_the_url_follows_edits():
    q = dict(SMALL, dtype="float32", planner="normal", sim_placement="x=X,y=Y*Z")
    at = _app(query=q)
    _ok(at)
    for k in scenario.KEYS:
        if k in q:
            w = at.sidebar.selectbox(key=k) if k in ("dtype", "planner", "machine_profile") else \
                at.sidebar.text_input(key=k)
            assert w.value == q[k], k
    plan = synth.synthesize(SMALL_MESH, SMALL_SRC, SMALL_DST, planner="normal", itemsize=4)
    assert [r["collective"] for r in _steps(at)] == [r["collective"] for r in plan.rows()]
    at.switch_page("ui/pages/simulate.py").run()
    assert at.text_input(key="sim_placement").value == "x=X,y=Y*Z"
    for k, v in q.items():
        assert at.query_params[k] == [v] or at.query_params[k] == v, k
    at.sidebar.text_input(key="dst").set_value("[16{x}, 32{y}]").run()
    got = at.query_params["dst"]
    assert (got[0] if isinstance(got, list) else got) == "[16{x}, 32{y}]"


def test_the_plan_page_has_a_plan_path():
    src = (ROOT / "app.py").read_text()
    assert 'url_path="plan"' in src and 'visibility="hidden"' in src


# -- 8. device memory -------------------------------------------------------------------------
def test_out_of_memory_plan_never_gets_a_green_badge():
    at = _app(machine_size="2x2x2", mesh="x=2,y=4", shape="2097152, 8192", src="[2097152{y}, 8192{x}]",
              dst="[2097152, 8192{x,y}]", planner="easy")
    errs = [e.value for e in at.error]
    assert any(e.startswith("Out of memory") for e in errs), errs
    largest = [m for m in at.metric if m.label == "largest shard"][0]
    assert "within" not in (largest.proto.delta or "")
    head = [m for m in at.metric if m.label == "HBM headroom"][0]
    assert head.value.endswith("short")


def test_headroom_is_capacity_minus_peak_live():
    at = _app(**SMALLN)
    _ok(at)
    import models

    cap = models.load_profile("tpu-v4:2x2x2").hbm_capacity_bytes
    plan = synth.synthesize(SMALL_MESH, SMALL_SRC, SMALL_DST, planner="normal", itemsize=2)
    head = [m for m in at.metric if m.label == "HBM headroom"][0]
    assert head.value == fmt_bytes(cap - plan.peak_live_bytes)


# -- 9. model error and the binding term --------------------------------------------------------
def test_simulate_shows_the_binding_term_and_model_error(monkeypatch):
    monkeypatch.setattr(machines, "model_error",
                        lambda spec: {"system": "TPU v4 ICI", "mape_pct": 12.5, "n": 7, "worst_pct": 30.0})
    at = _app("ui/pages/simulate.py", **SMALLN)
    _ok(at)
    _plan, res = _small_sim()
    cap = " ".join(c.value for c in at.caption)
    assert f"Lower bound binds on: **{res.lower_bound_kind}**" in cap
    from ui.texts import MACHINE_BOUND_TEXT, SEARCH_BOUND_TEXT, lower_bound_help

    assert lower_bound_help(res.lower_bound_kind) in cap
    # the machine's bound named for what it bounds, every term listed; a fixed-rule planner
    # (normal) has no search bound, so no second figure is named
    assert MACHINE_BOUND_TEXT in cap and SEARCH_BOUND_TEXT not in cap
    assert ", ".join(f"{k} {fmt_seconds(v)}" for k, v in res.lower_bound_terms.items()) in cap
    assert {m.label: m.value for m in at.metric}["lower bound"] == fmt_seconds(res.lower_bound_s)
    assert "(TPU v4 ICI): 12.5 % mean absolute error against 7 published measurements, worst 30 %" in cap


def test_simulate_names_the_plan_pages_search_bound_next_to_the_machine_bound():
    """auto's plan: the Simulate page's lower bound is the machine's (every term listed), and the
    caption names the Plan page's search bound of the same plan and what it leaves out."""
    import simulator
    from ui import plans
    from ui.texts import MACHINE_BOUND_TEXT, SEARCH_BOUND_TEXT

    at = _app("ui/pages/simulate.py", **SMALL)
    _ok(at)
    plan = plans.plan_for(scenario.Scenario(**dict(scenario.DEFAULTS, **SMALL)))
    assert plan.planner == "auto" and plan.search["lower_bound_s"] is not None
    check_moves_exactly(plan)
    res = simulator.simulate_plan(plan, "tpu-v4:2x2x2")
    cap = " ".join(c.value for c in at.caption)
    assert {m.label: m.value for m in at.metric}["lower bound"] == fmt_seconds(res.lower_bound_s)
    assert MACHINE_BOUND_TEXT in cap
    assert ", ".join(f"{k} {fmt_seconds(v)}" for k, v in res.lower_bound_terms.items()) in cap
    assert (f"The auto search's own lower bound, {fmt_seconds(plan.search['lower_bound_s'])} (the Plan page "
            f"names it when the plan is not proven optimal), is {SEARCH_BOUND_TEXT}") in cap
    # the claim on the Plan page names the same figure as the search's
    at.switch_page("ui/pages/plan.py").run()
    claims = " ".join(m.value for m in at.markdown)
    if plan.search["optimal"]:  # this small case: proven optimal, so no bound and gap are stated
        assert "Optimal over the documented move set" in claims and "lower bound (injection only" not in claims
    else:
        assert "the search's lower bound (injection only" in claims
        assert f"is {fmt_seconds(plan.search['lower_bound_s'])}, gap" in claims


def test_model_error_names_the_system_class():
    pytest.importorskip("simulator.validate")
    from simulator import validate

    machines._MODEL_ERROR.clear()
    t0 = time.monotonic()
    while (me := compute.model_error("dgx-h100:1")) == {"pending": True}:
        assert time.monotonic() - t0 < 120
        time.sleep(0.2)
    table = validate.model_error_by_system()
    system = validate.system_of_profile("dgx-h100:1")
    assert me["system"] == system and me["mape_pct"] == pytest.approx(100 * table[system]["mape"])
    assert "missing" in compute.model_error("cpu-host:8")


# -- confusing ---------------------------------------------------------------------------------
def test_units_adapt():
    assert fmt_bytes(0) == "0 B" and fmt_bytes(12) == "12 B" and fmt_bytes(8 * 2**20) == "8 MiB"
    assert fmt_bytes(1907348.63 * 2**20) == "1.82 TiB"
    assert fmt_seconds(1.8) == "1.8 s" and fmt_seconds(2.5e-7) == "250 ns" and fmt_seconds(0.0123) == "12.3 ms"
    assert fmt_bandwidth(4.5e10) == "45 GB/s"


def test_heatmap_starts_at_zero():
    plan = synth.synthesize(SMALL_MESH, SMALL_SRC, SMALL_DST, planner="normal", itemsize=2)
    hm = figures.recv_heatmap(plan).data[0]
    assert hm.zmin == 0


def test_calibration_values_say_unbounded_and_not_identifiable(tmp_path, monkeypatch):
    import importlib

    from ui.pages import calibration as _  # noqa: F401 - imported for its helpers below

    monkeypatch.setenv("APP_RESULTS_ROOT", str(tmp_path))
    d = tmp_path / "cal"
    d.mkdir()
    (d / "two.json").write_text(json.dumps({"name": "two", "params": {
        "link_bandwidth_Bps": {"value": 1e15}, "link_latency_s": {"value": 0.0},
        "nic_bandwidth_Bps": {"value": 2e9}, "nic_latency_s": {"value": 5e-5}}}))
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("ui/pages/calibration.py").run()
    at.text_input(key="calib_dir").set_value(str(d)).run()
    _ok(at)
    frames = [x.value for x in at.table]
    params = [f for f in frames if "parameter" in f.columns][0]
    vals = dict(zip(params["parameter"], params["value"]))
    assert vals["link_bandwidth_Bps"].startswith("unbounded")
    assert vals["link_latency_s"].startswith("not identifiable")
    assert vals["nic_bandwidth_Bps"] == "2 GB/s"
    classes = [f for f in frames if "bandwidth" in f.index][0]
    assert any(c.startswith("nic") for c in classes.columns) and any(c.startswith("link") for c in classes.columns)
    importlib.invalidate_caches()


def test_gb200_on_the_default_scenario_fits_the_mesh_to_the_array():
    at = _app()
    at.sidebar.selectbox(key="machine_profile").set_value("gb200-nvl72").run()
    _ok(at)
    mesh = synth.Mesh.parse(at.sidebar.text_input(key="mesh").value)
    assert mesh.size == 72
    pad = scenario._fits_array(scenario.DEFAULTS["shape"], scenario.DEFAULTS["src"], scenario.DEFAULTS["dst"])
    every = [f"data={a},model={72 // a}" for a in range(1, 73) if 72 % a == 0]
    assert pad(str(mesh)) == min(pad(m) for m in every) < float("inf")


def test_placement_error_suggestions_are_accepted():
    import re

    from models.placement import Placement

    mesh = synth.Mesh.parse(SMALL_MESH)
    import models

    m = models.load_profile("tpu-v4:2x2x2")
    for bad in ("x=Q", "x=X,y=", "nonsense", "x=X,y=YZ"):
        try:
            Placement.of(bad, mesh, m)
            continue
        except synth.errors.RedistributionError as e:
            msg = str(e)
        for sug in re.findall(r"e\.g\. '([^']+)'", msg):
            if sug.startswith("devices:"):
                continue
            names = {a.split("=")[0] for a in sug.split(",")}
            if names <= set(mesh.names):
                Placement.of(sug, mesh, m)  # does not raise


@pytest.mark.parametrize("field,value,needle", [
    ("src", "P('model','data'", "Source sharding"),
    ("dst", "[16{q}, 32]", "Target sharding"),
    ("mesh", "x=2,,y", "Mesh axes"),
])
def test_errors_name_the_field_not_internal_functions(field, value, needle):
    at = _app(**SMALLN)
    _set(at, **{field: value})
    assert len(at.error) == 1
    msg = at.error[0].value
    assert msg.startswith(needle), msg
    assert "ArrayType." not in msg and "Mesh.parse" not in msg and "from_spec" not in msg
    if field != "mesh":
        assert "[8192{data}, 32768{model}]" in msg and "P('data', 'model')" in msg


def test_changing_the_shape_keeps_a_valid_source():
    at = _app()
    at.sidebar.text_input(key="shape").set_value("4096, 1024").run()
    _ok(at)
    assert at.sidebar.text_input(key="src").value == "[4096{data}, 1024{model}]"


def test_planner_default_is_synths():
    assert scenario.DEFAULTS["planner"] == scenario.default_planner()
    assert compute.planners()[0] == scenario.default_planner()


# -- app safety (issue 12 item 7) ------------------------------------------------------------
def test_sweeps_path_outside_the_results_root_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("APP_RESULTS_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("ui/pages/sweeps.py").run()
    at.text_input(key="sweeps_dir").set_value(str(tmp_path / "elsewhere")).run()
    assert len(at.error) == 1 and "only reads and writes folders under" in at.error[0].value
    at.text_input(key="sweeps_dir").set_value("../elsewhere").run()
    assert len(at.error) == 1 and "only reads and writes folders under" in at.error[0].value
    with pytest.raises(synth.errors.RedistributionError):
        compute.build_sweep_report(str(tmp_path / "elsewhere"))


def test_default_results_root_allows_only_results_folders(monkeypatch):
    monkeypatch.delenv("APP_RESULTS_ROOT", raising=False)
    assert compute.check_results_path("results/x") == (ROOT / "results" / "x").resolve()
    for bad in ("/etc", "synth", "results/../synth", "."):
        with pytest.raises(synth.errors.RedistributionError):
            compute.check_results_path(bad)


@pytest.mark.parametrize("content", [b"\xff\xfe\x00bad", b"[1, 2, 3]", b"\"text\"", b"{not json", b"{\"params\": 3}"])
def test_calibration_folder_with_hostile_files_shows_an_error(tmp_path, monkeypatch, content):
    monkeypatch.setenv("APP_RESULTS_ROOT", str(tmp_path))
    (tmp_path / "bad.json").write_bytes(content)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("ui/pages/calibration.py").run()
    at.text_input(key="calib_dir").set_value(str(tmp_path)).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1 and "\n" not in at.error[0].value


def test_calibration_folder_outside_the_roots_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("APP_RESULTS_ROOT", str(tmp_path / "root"))
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("ui/pages/calibration.py").run()
    at.text_input(key="calib_dir").set_value("/etc").run()
    assert len(at.error) == 1 and "only reads" in at.error[0].value


def test_server_config_binds_locally_and_hides_tracebacks():
    import tomllib

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["client"]["showErrorDetails"] == "none"
    mk = (ROOT / "Makefile").read_text()
    assert "HOST ?= 127.0.0.1" in mk and "--server.address $(HOST)" in mk


def test_small_plan_export_still_moves_exactly():
    at = _app(**SMALLN)
    doc = _exported(at)
    check_moves_exactly(synth.Plan.from_dict(doc))


def test_step_table_shows_pending_sums_and_padding():
    try:
        synth.parse_type("[16{x}, 32]{U:y}").check(synth.Mesh.parse(SMALL_MESH))
    except synth.errors.RedistributionError:
        pytest.skip("pending sums are not parsed yet")
    at = _app(**dict(SMALLN, src="[16{x}, 32]{U:y}", dst="[16{x}, 32{y}]"))
    _ok(at)
    pending = [r["pending sum over"] for r in _steps(at)]
    plan = synth.synthesize(SMALL_MESH, "[16{x}, 32]{U:y}", "[16{x}, 32{y}]", planner="normal", itemsize=2)
    assert pending == [",".join(r["unreduced"]) or "-" for r in plan.rows()]
    assert pending[0] == "y" and pending[-1] == "-"
    at2 = _app(**dict(SMALLN, shape="17, 32", src="[17{y}, 32{x}]", dst="[17, 32{x,y}]"))
    _ok(at2)
    assert _steps(at2)[0]["padded"] == "yes"


@pytest.mark.parametrize("kind", ["injection", "reduction", "nic_cut", "bisection_X", "bisection_Z", "lp",
                                  "schedule:injection", "schedule:nic_cut"])
def test_every_lower_bound_kind_is_explained(kind):
    """Each binding term models.analytic names has its own sentence (not the fallback)."""
    from ui.texts import lower_bound_help

    text = lower_bound_help(kind)
    assert "see docs/simulator.md" not in text
    if kind.startswith("bisection_"):
        assert f"torus dimension {kind[-1]}" in text
    if kind.startswith("schedule:"):
        assert text.startswith("summed over the schedule's ops")
        assert lower_bound_help(kind.split(":")[1])[:-1] in text


def test_lower_bound_kinds_of_the_models_are_the_explained_ones():
    """The kinds a small torus and a small switched machine bind on are among those above."""
    import models
    import models.analytic
    from ui.texts import LOWER_BOUND_HELP

    for spec, mesh in (("tpu-v4:2x2x2", "x=4,y=2"), ("dgx-h100:2", "x=2,y=8")):
        m = models.load_profile(spec)
        plan = synth.synthesize(mesh, "[64{x}, 64{y}]", "[64{y}, 64{x}]", planner="normal", itemsize=2)
        check_moves_exactly(plan)
        _t, _k, terms = models.analytic.schedule_lower_bound(plan.to_schedule(), m, detail=True)
        for k in terms:
            base = k.split(":")[-1].split("(")[0]
            base = "bisection" if base.startswith("bisection_") else base
            assert base in LOWER_BOUND_HELP, k


def test_a_replay_the_simulator_refuses_is_one_line_before_any_job(monkeypatch):
    """4096 devices with all-to-alls over 512 devices: the simulator's replay-size limit
    is checked on the page, so no worker starts and the page says why in one line."""
    import models.collectives
    from ui import jobs

    monkeypatch.setenv("APP_INLINE_S", "0")  # anything not refused would become a job
    # large torus all-to-alls are costed in aggregate up to MAX_AGGREGATE_PAIRS pairs; lower
    # it so that this 512-device all-to-all is again a replay the simulator refuses
    monkeypatch.setattr(models.collectives, "MAX_AGGREGATE_PAIRS", 1000)
    before = {j.key for j in jobs.manager().running() + jobs.manager().waiting()}
    at = _app("ui/pages/simulate.py", machine_size="16x16x16", mesh="data=512,model=8", planner="normal")
    errs = [e.value for e in at.error]
    assert len(errs) == 1 and "above the simulator's limit" in errs[0] and "\n" not in errs[0], errs
    assert not any("background process" in str(i.value) for i in at.info)
    after = {j.key for j in jobs.manager().running() + jobs.manager().waiting()}
    assert after <= before
    assert "all_to_all over 512 devices" in errs[0]


def test_compare_simulates_the_strategies_the_simulator_accepts(monkeypatch):
    """4096 devices: the all-to-all strategies are refused by the replay-size limit, each
    with its line; the all-gather one (easy) is still simulated and shown."""
    import models.collectives

    monkeypatch.setattr(models.collectives, "MAX_AGGREGATE_PAIRS", 1000)  # as above
    at = _app("ui/pages/compare.py", machine_size="16x16x16", mesh="data=512,model=8", planner="normal")
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    warned = [str(w.value) for w in at.warning if "not simulated" in str(w.value)]
    refused = [w for w in warned if "above the simulator's limit" in w]
    # a planner that fails outright (a bug) is left out with its own line, never the page
    assert refused and all(w in refused or "planner failed" in w for w in warned)
    assert not any(w.startswith("easy:") for w in warned)
    table = at.table[0].value
    assert list(table["strategy"]) == ["easy"]
    assert all(name.split(":")[0] not in list(table["strategy"]) for name in warned)


def test_first_page_imports_no_pandas_and_the_warm_up_thread_does():
    """The default Plan page draws without pandas (its table is Markdown, its chart
    Vega-Lite), so the first load does not wait for that import; the warm-up thread
    imports it afterwards and warms the rest up without an error. A fresh interpreter,
    since this process has pandas already."""
    code = (
        "import sys, threading, logging\n"
        "logging.disable(logging.WARNING)\n"
        "from streamlit.testing.v1 import AppTest\n"
        "import ui.runs\n"
        "real = ui.runs.warm_up\n"
        "ui.runs.warm_up = lambda: None\n"
        f"at = AppTest.from_file({APP!r}, default_timeout=300)\n"
        "at.run()\n"
        "first = 'pandas' in sys.modules\n"
        "t = real()\n"
        "t.join(240)\n"
        "print(len(at.exception), len(at.error), len(at.metric) > 0, first, 'pandas' in sys.modules, t.is_alive())\n"
    )
    import os

    env = dict(os.environ, APP_WARM_UP_DELAY_S="0")  # the thread's wait for the browser: none here
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    # the page drawn without an error and without pandas; the thread imported it and finished
    assert out.stdout.split()[-6:] == ["0", "0", "True", "False", "True", "False"], out.stdout + out.stderr[-2000:]
    assert "app warm-up skipped" not in out.stderr


def test_every_module_that_uses_plotly_imports_pandas_before_it():
    """Plotly fails on a half-imported pandas, which the warm-up thread may be importing
    while a page runs (``ui.runs.warm_up``): each module of the app that imports plotly
    imports pandas first, at module level, so a page reaching plotly waits for the import."""
    import ast

    checked = []
    for path in sorted((ROOT / "ui").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = [(node.lineno, alias.name) for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names]
        names += [(node.lineno, node.module) for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module]
        plotly = [ln for ln, n in names if n.split(".")[0] == "plotly"]
        if not plotly or path.name == "runs.py":  # its warm-up imports pandas first itself, in its function
            continue
        top = [node.lineno for node in tree.body if isinstance(node, ast.Import)
               and any(a.name == "pandas" for a in node.names)]
        assert top and min(top) < min(plotly), f"{path.relative_to(ROOT)}: import pandas before plotly"
        checked.append(path.name)
    assert "figures.py" in checked
    # the pages' first pictures are Vega-Lite: these modules never reach plotly
    for name in ("charts.py", "crossmesh.py", "pages/calibration.py", "pages/compare.py", "pages/crossmesh.py",
                 "pages/simulate.py", "pages/plan.py"):
        tree = ast.parse((ROOT / "ui" / name).read_text())
        mods = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        mods += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        assert not [m for m in mods if m.split(".")[0] == "plotly"], name
