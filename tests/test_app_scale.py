"""Issue 24: the explorer legible at every scale, its charts and claims meaning what
they say, and useful on a fresh clone.

* the Plan page's claims (bound, peak live, received bytes, optimality) against the
  plan's own fields and ``Plan.search``; the textbook reduce-scatter without a warning;
* layout summaries: each tile's block checked against ``synth.scatter`` of the type;
* the aggregated link load: each tile's value is the hottest link of its line;
* Sweeps on a fresh clone: the bundled example with its charts (time over a bound
  that no row beats, the memory measures against their own bounds), and the smoke
  sweep started and cancelled as a background job;
* Calibration: the shipped profiles' overview and the implausible fitted values.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import synth  # noqa: E402
from tests.test_app import SMALL, _set, check_moves_exactly  # noqa: E402
from ui import figures, files, jobs, plans  # noqa: E402
from ui.fmt import fmt_bytes, fmt_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TP_SP = ("dp=2,tp=4", "[8{dp}, 2048, 1024]{U:tp}", "[8{dp}, 2048{tp}, 1024]")


@pytest.fixture(autouse=True)
def _clear_caches(monkeypatch, tmp_path):
    monkeypatch.setenv("APP_RESULTS_ROOT", str(tmp_path))  # a fresh clone: no results yet
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _app(page=None, **values) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    if values:
        _set(at, **values)
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _title(chart) -> str:
    spec = json.loads(chart.proto.spec)
    if "layout" not in spec:  # Vega-Lite
        return spec["title"]["text"]
    return spec["layout"]["title"]["text"].split("<br>")[0]


def _strip(spec) -> tuple[list[dict], list[float]]:
    """A Sweeps strip chart (Vega-Lite, ``ui.charts.sweep_strip_spec``): its points and its
    bound rules' values, read from the spec the page sent."""
    import altair as alt

    alt.Chart.from_dict(spec)  # valid Vega-Lite (altair's schema)
    points = [v for layer in spec["layer"] if layer["mark"]["type"] == "point" for v in layer["data"]["values"]]
    rules = [v["value"] for layer in spec["layer"] if layer["mark"]["type"] == "rule" for v in layer["data"]["values"]]
    return points, rules


# -- claims ---------------------------------------------------------------------------------
def test_textbook_reduce_scatter_is_claimed_optimal_without_a_warning():
    at = _app(**dict(SMALL, machine_profile="dgx-h100", machine_size="1", mesh=TP_SP[0],
                     shape="8, 2048, 1024", src=TP_SP[1], dst=TP_SP[2]))
    assert not at.error and not at.warning, [w.value for w in at.warning]
    plan = synth.synthesize(*TP_SP, planner=at.sidebar.selectbox(key="planner").value, itemsize=2)
    assert [str(c) for c in plan.steps] == ["ReduceScatter(1, tp)"]
    # the same steps on a small array of the same sharding move every element exactly
    small = synth.Plan.build(synth.Mesh.parse(TP_SP[0]), "[8{dp}, 16, 8]{U:tp}", "[8{dp}, 16{tp}, 8]",
                             plan.steps, 2)
    check_moves_exactly(small)
    text = " ".join(m.value for m in at.markdown)
    assert "Textbook optimum" in text and ":orange[" not in text
    assert f"Within the bound: the largest shard per device, {fmt_bytes(plan.max_shard_bytes)}" in text
    assert (f"Received bytes: {fmt_bytes(plan.recv_bytes_max_device)} per device (busiest device), equal "
            "to the receive lower bound") in text


def test_claims_follow_the_plan_and_its_search():
    mesh, src, dst = "data=16,model=4", "[64{data}, 128{model}]", "[64{model}, 128{data}]"
    easy = synth.synthesize(mesh, src, dst, planner="easy", itemsize=2)
    check_moves_exactly(easy)
    c = {t: (lvl, s) for t, lvl, s in plans.plan_claims(easy, fmt_bytes, fmt_seconds)}
    assert c["memory"][0] == "warn" and f"{easy.max_shard_bytes / easy.bound_bytes:.3g}x" in c["memory"][1]
    assert c["optimality"][0] == "info" and "does not search" in c["optimality"][1]
    assert f"{easy.recv_bytes_max_device / easy.recv_lower_bound_bytes:.3g}x" in c["received"][1]
    auto = synth.synthesize(mesh, src, dst, planner="auto", itemsize=2, budget_s=5.0)
    check_moves_exactly(auto)
    claims = plans.plan_claims(auto, fmt_bytes, fmt_seconds)
    opt = [s for t, _lvl, s in claims if t == "optimality"]
    s = auto.search
    if s["optimal"]:
        assert any(x.startswith("Optimal over the documented move set") and fmt_seconds(s["time_s"]) in x
                   for x in opt)
    else:
        assert any(fmt_seconds(s["gap_s"]) in x for x in opt) or s["gap_s"] is None
    live = [s for t, _lvl, s in claims if t == "live"][0]
    assert fmt_bytes(auto.peak_live_bytes) in live and fmt_bytes(2 * auto.bound_bytes) in live


def test_a_plan_cut_by_the_work_budget_states_its_bound_and_gap():
    """auto with a small work budget on the machine's cost: 'best found within the work
    budget', and the Plan page says so with the proven lower bound and the gap."""
    import models
    from models.plan_cost import machine_cost

    mesh, src, dst = "data=16,model=4", "[64{data}, 128{model}]", "[64{model}, 128{data}]"
    m = models.load_profile("tpu-v4:4x4x4")
    plan = synth.synthesize(mesh, src, dst, planner="auto", itemsize=2, budget_moves=16,
                            cost=machine_cost(m, synth.Mesh.parse(mesh)))
    check_moves_exactly(plan)
    s = plan.search
    assert s["status"] == "best found within the work budget" and not s["optimal"]
    opt = [x for t, _lvl, x in plans.plan_claims(plan, fmt_bytes, fmt_seconds) if t == "optimality"]
    assert len(opt) == 1 and opt[0].startswith(
        f"Best found within the search's work budget: {fmt_seconds(s['time_s'])} under the {s['cost_model']}; "
        "the search's lower bound (injection only")
    # the bound is named for what it bounds, and told apart from the Simulate page's machine bound
    assert (f"is {fmt_seconds(s['lower_bound_s'])}, gap {fmt_seconds(s['gap_s'])} "
            f"({100 * s['gap_s'] / s['time_s']:.3g} % of its time)") in opt[0]
    assert "no hop latency or cut" in opt[0] and "the Simulate page's machine lower bound" in opt[0]


# -- layout summaries -----------------------------------------------------------------------
@pytest.mark.parametrize("mesh,t", [("data=16,model=4", "[8, 256{data,model}]"),
                                    ("data=512,model=8", "[512{data}, 16{model}]"),
                                    ("x=2,y=4", "[16, 32]{U:y}")])
def test_layout_summary_tiles_hold_the_blocks_the_devices_hold(mesh, t):
    m = synth.Mesh.parse(mesh)
    typ = synth.parse_type(t).check(m)
    fig = figures.layout_summary_figure(typ, m, "x")
    z = np.asarray(fig.data[0].z)
    rows, cols = m.sizes[0], m.size // m.sizes[0]
    assert z.shape == (rows, cols) and fig.layout.meta["summary"]
    x = np.arange(typ.num_elems(), dtype=np.int64).reshape(typ.shape)
    blocks = synth.scatter(x, typ, m)
    splits = typ.splits(m)
    ncb = int(np.prod(splits[1:])) if len(splits) > 1 else 1
    local = typ.local_shape(m)
    for d in range(m.size):
        b = int(z[d // cols, d % cols])
        r, c = divmod(b, ncb)
        # the tile's block (row r of dim 0, column c of the other dims) is the device's data
        first = blocks[d].reshape(-1)[0] if blocks[d].size else None
        col_idx = np.unravel_index(c, splits[1:]) if len(splits) > 1 else ()
        origin = (r * local[0],) + tuple(int(ci) * lo for ci, lo in zip(col_idx, local[1:]))
        assert first == x[origin], (d, b)
        if m.size <= 256:
            assert fig.data[0].text[d // cols][d % cols] == f"{r},{c}"
    big = figures.layout_needs_summary(typ, m)
    assert big == (mesh != "x=2,y=4")


def test_plan_page_switches_to_the_summary_and_back():
    at = _app(dst="[8192, 32768{data,model}]")
    assert not any(c.value.startswith("Summary of a grid") for c in at.caption)  # Layout tab closed
    at.session_state["plan_view"] = "Layout"
    at.run()
    cap = [c.value for c in at.caption if c.value.startswith("Summary of a grid")]
    assert cap and "dim 1: 32768 in 64 blocks of 512 (data=16,model=4)" in cap[0]
    meta = {c.proto.id: json.loads(c.proto.spec)["layout"].get("meta") for c in at.get("plotly_chart")}
    assert any(m and m.get("summary") for m in meta.values())
    at.toggle(key="layout_exact").set_value(True).run()
    assert not at.exception and not any(c.value.startswith("Summary of a grid") for c in at.caption)
    assert not any((json.loads(c.proto.spec)["layout"].get("meta") or {}).get("summary")
                   for c in at.get("plotly_chart"))


# -- aggregated link load ---------------------------------------------------------------------
def test_aggregated_link_load_shows_each_lines_hottest_link():
    import simulator

    plan = synth.synthesize("data=4,model=16", "[64{data}, 64{model}]", "[64{model}, 64{data}]",
                            planner="normal", itemsize=2)
    check_moves_exactly(plan)
    res = simulator.simulate_plan(plan, "tpu-v4:4x4x4")
    fig = figures.topology_summary_figure(res)
    topo, g = res.machine.topology, res.machine.topology.graph
    lb = np.asarray(res.link_bytes_array)
    assert fig.layout.meta["aggregated"] and len(fig.data) == 3  # one panel per torus dimension
    for k, tr in enumerate(fig.data):
        z = np.asarray(tr.z) * 1.0
        want = np.zeros_like(z)
        for i, (u, v) in enumerate(topo.links):
            if g.edges[u, v]["dim"] == k:
                c = [g.nodes[u]["coord"][d] for d in range(3) if d != k]
                want[c[0], c[1]] = max(want[c[0], c[1]], lb[i])
        div = lb.max() / tr.zmax
        assert z * div == pytest.approx(want)
    hot = figures.hot_links(res, 3)
    assert [h["bytes"] for h in hot] == sorted(lb, reverse=True)[:3]


# -- Sweeps on a fresh clone ----------------------------------------------------------------
SWEEP_VIEWS = ("Time over the lower bound", "Largest shard", "Peak live", "What if")


def sweep_charts(at) -> dict:
    """Every chart of the Sweeps page, title -> spec: one tab at a time (only the open tab
    is drawn, so each run shows at most one chart)."""
    assert [t.label for t in at.tabs] == list(SWEEP_VIEWS)
    out = {}
    for view in SWEEP_VIEWS:
        at.session_state["sweeps_view"] = view
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        charts = at.get("plotly_chart") + at.get("vega_lite_chart")
        assert len(charts) <= 1, [_title(c) for c in charts]
        out.update({_title(c): json.loads(c.proto.spec) for c in charts})
    at.session_state["sweeps_view"] = SWEEP_VIEWS[0]
    at.run()
    return out


def test_sweeps_fresh_clone_shows_the_bundled_example_with_honest_charts():
    at = _app("ui/pages/sweeps.py")
    assert not at.error
    assert any("Bundled example, not your results" in w.value for w in at.warning)
    rows = [json.loads(line) for line in (files.EXAMPLE_DIR / "rows.jsonl").read_text().splitlines() if line]
    assert {m.label: m.value for m in at.metric}["rows"] == str(len(rows))
    charts = sweep_charts(at)
    time_chart = charts["Simulated time over its lower bound (baseline knobs)"]
    points, rules = _strip(time_chart)
    ys = [p["value"] for p in points]
    assert ys and min(ys) >= 1.0 - 1e-9, "no simulated time is below its lower bound"
    assert rules == [1.0]
    ours = [p["value"] for p in points if p["planner"] in ("auto", "normal")]
    assert max(ours) < 50, "with the latency floor small cases are not reported at 10,000x"
    assert time_chart["layer"][0]["encoding"]["y"]["title"] == "simulated time / lower bound (x)"
    mem = charts["Largest shard per device over max(src, dst) (baseline knobs)"]
    points, rules = _strip(mem)
    assert rules == [1.0]
    ok = [r for r in rows if r["status"] == "ok" and r["baseline"]]
    assert sorted((p["case"], p["planner"], p["machine"], p["value"]) for p in points) == sorted(
        (str(r["case"]), r["planner"], r["machine"], r["max_shard_over_bound"]) for r in ok)
    assert "Peak live bytes (input + output of a step) over max(src, dst)" in charts
    what = [t for t in charts if t.startswith("What if: simulated time of case ")]
    assert len(what) == 1


def test_sweeps_smoke_run_starts_in_the_background_and_cancels(tmp_path):
    at = _app("ui/pages/sweeps.py")
    at.button(key="sweeps_run_button").click().run()
    assert not at.exception and not at.error
    assert any("background process" in i.value for i in at.info)
    t0 = time.monotonic()
    job = None
    while time.monotonic() - t0 < 60:
        job = next((j for j in jobs.manager().running() if j.func == "ui.work:run_sweep"), None)
        if job is not None and job._proc is not None and job._proc.is_alive():
            break
        time.sleep(0.2)
        at.run()
    assert job is not None, "the smoke sweep job did not start"
    time.sleep(2.0)
    at.button(key="sweep_cancel_job").click().run()
    job._proc.join(5)
    assert not job._proc.is_alive(), (job.state, [e.value for e in at.error])
    assert any("cancelled" in i.value for i in at.info)
    # the runner's processes went with it: nothing writes to the folder any more
    rows = tmp_path / "smoke" / "rows.jsonl"
    n = rows.stat().st_size if rows.exists() else 0
    time.sleep(3.0)
    assert (rows.stat().st_size if rows.exists() else 0) == n


# -- Calibration ----------------------------------------------------------------------------
def test_calibration_overview_and_implausible_values(tmp_path):
    at = _app("ui/pages/calibration.py")
    assert not at.error
    over = at.table[0].value  # the overview comes first
    shipped = files.calibrated_profiles(files.calibrated_dir())
    assert list(over["profile"]) == [Path(p).stem for p in shipped]
    for p in shipped:  # the count the overview shows is the flags of that file
        n = len(files.calibration_flags(json.loads(Path(p).read_text())))
        assert int(over[over["profile"] == Path(p).stem]["implausible values"].iloc[0]) == n
    # a fit that ran to its cap (the 1e15 B/s = 1,000,000 GB/s cpu-8 once shipped) is flagged
    prof = json.loads(Path(shipped[-1]).read_text())
    prof["name"] = "capped"
    prof["params"]["link_bandwidth_Bps"] = {"value": 1e15, "source": "test"}
    prof["params"]["link_latency_s"] = {"value": 0.5, "source": "test"}
    folder = tmp_path / "calib"
    folder.mkdir()
    (folder / "capped.json").write_text(json.dumps(prof))
    flags = {(f["scope"], f["parameter"]): f["why"] for f in files.calibration_flags(prof)}
    assert "1,000,000 GB/s is at the fit's cap" in flags[("machine", "link_bandwidth_Bps")]
    assert "longer than any collective's start-up" in flags[("machine", "link_latency_s")]
    at.text_input(key="calib_dir").set_value(str(folder)).run()
    assert not at.exception and not at.error
    warn = [w.value for w in at.warning if "implausible" in w.value]
    assert warn and "`machine.link_bandwidth_Bps`: 1,000,000 GB/s is at the fit's cap" in warn[0]
    table = at.table[-1].value
    row = table[(table["scope"] == "machine") & (table["parameter"] == "link_bandwidth_Bps")]
    assert row["implausible"].iloc[0] == flags[("machine", "link_bandwidth_Bps")]


# -- job workers --------------------------------------------------------------------------------
def test_a_worker_does_not_rerun_the_pages_script(tmp_path, monkeypatch):
    """While a page runs, Streamlit's ``__main__`` is the page's script; a worker started
    then must not re-run it (``ui.jobs._start_without_main``). Without the guard the same
    start re-runs it: the check can fail."""
    import types

    marker = tmp_path / "ran"
    script = tmp_path / "fake_page.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('the page ran again')\n")
    fake = types.ModuleType("__main__")
    fake.__file__ = str(script)
    fake.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", fake)
    ctx = jobs._context()
    p = ctx.Process(target=time.sleep, args=(0,))
    jobs._start_without_main(p)
    p.join(60)
    assert p.exitcode == 0 and not marker.exists()
    p = ctx.Process(target=time.sleep, args=(0,))
    p.start()  # what a plain start does
    p.join(60)
    assert marker.exists()
