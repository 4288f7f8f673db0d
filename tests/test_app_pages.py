"""AppTest checks of the Simulate, Compare, Calibration and Sweeps pages.

Figures shown are compared with direct calls to the packages (not with fixed
numbers); every plan a page shows is also run through the interpreter and checked
element by element.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # app.py and ui/ live at the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import synth  # noqa: E402
from tests.test_app import SMALL, _set, check_moves_exactly  # noqa: E402
from ui.fmt import fmt_bytes, fmt_ratio, fmt_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
DEFAULT = ("data=16,model=4", "[8192{data}, 32768{model}]", "[8192{model}, 32768{data}]")


@pytest.fixture(autouse=True)
def _clear_caches(monkeypatch, tmp_path_factory):
    # the Sweeps and Calibration pages read folders under the results root only
    monkeypatch.setenv("APP_RESULTS_ROOT", str(tmp_path_factory.getbasetemp()))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _app(page: str | None = None, **scenario) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    if scenario:
        _set(at, **scenario)
    if page:
        at.switch_page(page).run()
    return at


def _ok(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def _shrunk(plan: synth.Plan) -> synth.Plan:
    """The same steps on a small array: every dim that is a multiple of the device count
    becomes the device count (every product of mesh axes still divides it, so every
    step's type stays valid); other dims keep their size."""
    n = plan.mesh.size

    def shrink(t):
        return synth.ArrayType(tuple(synth.Dim(n if d.size % n == 0 else d.size, d.axes)
                                     for d in t.dims))

    steps = [synth.AllPermute(shrink(c.target)) if c.kind == "all_permute" else c for c in plan.steps]
    small = synth.Plan.build(plan.mesh, shrink(plan.src), shrink(plan.dst), steps)
    assert [c.kind for c in small.steps] == [c.kind for c in plan.steps]
    return small


# -- Simulate ---------------------------------------------------------------------------
def test_simulate_default_matches_the_simulator():
    import simulator

    # planner normal: auto's search has a wall-clock budget, so its plan synthesized again
    # here could differ from the page's on a loaded machine
    at = _app("ui/pages/simulate.py", planner="normal")
    _ok(at)
    plan = synth.synthesize(*DEFAULT, planner="normal", itemsize=2)
    check_moves_exactly(_shrunk(plan))
    res = simulator.simulate_plan(plan, "tpu-v4:4x4x4")
    m = _metrics(at)
    assert m["simulated time"] == fmt_seconds(res.time_s)
    assert m["lower bound"] == fmt_seconds(res.lower_bound_s)
    assert m["peak memory"] == fmt_bytes(res.peak_bytes_max_device)
    # the pictures sit in tabs, only the open one drawn: timeline, link load, memory over time
    assert [t.label for t in at.tabs] == ["Timeline", "Link load", "Memory over time"]
    drawn = []
    for view, key in (("Timeline", "sim_timeline"), ("Link load", "sim_topology"), ("Memory over time", "sim_memory")):
        at.session_state["sim_view"] = view
        at.run()
        _ok(at)
        # the default tab is Vega-Lite (its first visit fetches no plotly.js), the others plotly
        charts = at.get("vega_lite_chart" if view == "Timeline" else "plotly_chart")
        assert len(charts) == 1, [c.proto for c in charts]
        assert view == "Timeline" or charts[0].proto.id.endswith(key), charts[0].proto.id  # Vega-Lite has no id
        assert len(at.get("plotly_chart" if view == "Timeline" else "vega_lite_chart")) == 0
        drawn.append(json.loads(charts[0].proto.spec))
    assert drawn[0]["title"]["text"].startswith("Timeline: ")
    assert drawn[1]["layout"]["title"]["text"].startswith("Link load on tpu-v4:4x4x4")
    ops = at.table[0].value
    assert list(ops["kind"]) == [o["kind"] for o in res.ops]


def test_simulate_follows_scenario_and_placement():
    import simulator

    at = _app("ui/pages/simulate.py", **SMALL)
    _ok(at)
    plan = synth.synthesize("x=2,y=4", "[16{y}, 32{x}]", "[16, 32{x,y}]", itemsize=2)
    check_moves_exactly(plan)
    res = simulator.simulate_plan(plan, "tpu-v4:2x2x2")
    assert _metrics(at)["simulated time"] == fmt_seconds(res.time_s)

    at.text_input(key="sim_placement").set_value("x=Z,y=X*Y").run()
    _ok(at)
    res2 = simulator.simulate_plan(plan, "tpu-v4:2x2x2", placement="x=Z,y=X*Y")
    assert _metrics(at)["simulated time"] == fmt_seconds(res2.time_s)
    assert "x=Z,y=X*Y" in " ".join(md.value for md in at.markdown)

    at.text_input(key="sim_placement").set_value("x=X").run()
    assert not at.exception
    assert len(at.error) == 1 and "x=X" in at.error[0].value


# -- Compare ----------------------------------------------------------------------------
def _table(at) -> dict:
    """The Compare page's strategies table, its three parts (Time, Memory, Links) joined
    by strategy; each part lists the same strategies in the same order."""
    from ui.texts import COMPARE_TABLES as TABLES

    parts = [d.value for d in at.table[:len(TABLES)]]
    assert [list(p.columns) for p in parts] == [["strategy", *cols] for _t, cols, _n in TABLES]
    assert all(list(p["strategy"]) == list(parts[0]["strategy"]) for p in parts)
    rows: dict = {}
    for p in parts:
        for r in p.to_dict("records"):
            rows.setdefault(r["strategy"], {}).update(r)
    return rows


def test_compare_default_simulates_every_planner():
    import simulator

    at = _app("ui/pages/compare.py")
    _ok(at)
    rows = _table(at)
    assert set(rows) == {"ours (auto)"} | {p for p in synth.PLANNERS if p != "auto"}
    for name in rows:
        if name.startswith("ours"):  # the page's own auto plan (its search is wall-clock budgeted)
            plan = synth.Plan.from_dict(at.session_state["cmp_plan"])
        else:
            plan = synth.synthesize(*DEFAULT, planner=name, itemsize=2)
        check_moves_exactly(_shrunk(plan))
        res = simulator.simulate_plan(plan, "tpu-v4:4x4x4")
        assert rows[name]["simulated time"] == fmt_seconds(res.time_s)
        assert rows[name]["peak memory per device"] == fmt_bytes(res.peak_bytes_max_device)
    assert len(at.button) >= 2  # XLA and measure buttons, nothing run yet
    assert len(at.get("vega_lite_chart")) == 1 and not at.get("plotly_chart")


def test_compare_whatif_bandwidth_and_mesh():
    import models
    import simulator

    at = _app("ui/pages/compare.py")
    at.select_slider(key="cmp_bw_scale").set_value(4.0).run()
    _ok(at)
    plan = synth.Plan.from_dict(at.session_state["cmp_plan"])  # the page's own plan
    check_moves_exactly(_shrunk(plan))
    fast = models.load_profile("tpu-v4:4x4x4").with_scale(bandwidth_scale=4.0)
    res = simulator.simulate_plan(plan, fast)
    assert _table(at)["ours (auto)"]["simulated time"] == fmt_seconds(res.time_s)

    at.selectbox(key="cmp_mesh").set_value("data=8,model=8").run()
    _ok(at)
    plan8 = synth.Plan.from_dict(at.session_state["cmp_plan"])
    assert str(plan8.mesh) == str(synth.Mesh.parse("data=8,model=8"))
    assert (str(plan8.src), str(plan8.dst)) == (str(plan.src), str(plan.dst))
    check_moves_exactly(_shrunk(plan8))
    res8 = simulator.simulate_plan(plan8, fast)
    row = _table(at)["ours (auto)"]
    assert row["collectives"] == plan8.num_collectives
    assert row["simulated time"] == fmt_seconds(res8.time_s)
    assert row["time / lower bound"] == fmt_ratio(res8.time_s / res8.lower_bound_s)


def test_compare_xla_compiled_by_the_machines_compiler_and_local_measurement():
    """On a TPU machine every compiled row (ours, XLA Shardy/GSPMD, Shardy's
    reshard-to-collectives plan) comes from libtpu, with the figures the executor gives
    for the same compile; XLA's step table explains the rematerialisation; the link keeps
    XLA's rows; local measurement still works."""
    from executor.compare import compiled_schedule
    from ui import xla_compare

    xla_compare._DONE.clear()
    at = _app("ui/pages/compare.py", **SMALL)
    _ok(at)
    plan = synth.Plan.from_dict(at.session_state["cmp_plan"])  # the page's own plan
    assert (str(plan.mesh), str(plan.src), str(plan.dst)) == ("x=2,y=4", "[16{y}, 32{x}]", "[16, 32{x,y}]")
    check_moves_exactly(plan)
    at.button(key="cmp_xla_button").click().run()
    _ok(at)
    rows = _table(at)
    named = {"ours (compiled)": "ours", "xla shardy": "xla-shardy", "xla gspmd": "xla-gspmd",
             "shardy r2c": "shardy-r2c"}
    assert set(named) <= set(rows)
    shardy = xla_compare.schedules(xla_compare.done(next(iter(xla_compare._DONE))))[0]
    for name, strategy in named.items():
        assert rows[name]["compiler"] == "libtpu", name
        s = compiled_schedule("tpu-v4:2x2x2", strategy, plan.mesh, plan.src, plan.dst,
                              plan=plan if strategy == "ours" else None, dtype="bfloat16")
        assert rows[name]["collectives"] == sum(1 for o in s.ops if not o.is_local), name
        assert rows[name]["compiled temp"] == fmt_bytes(s.meta["temp_bytes"]), name
        assert rows[name]["compiled peak"] == fmt_bytes(s.meta["compiled_peak_bytes"]), name
        assert [o.kind for o in shardy[name].ops] == [o.kind for o in s.ops], name
    for name in ("ours (compiled)", "shardy r2c"):
        assert rows[name]["full rematerialization"] == "\u2013"  # st.table: "-" would render as a bullet
    text = " ".join(m.value for m in at.markdown)
    assert "`libtpu`" in text and "compiled as bfloat16" in text
    # XLA's step table, one per partitioner, one row per op of its compiled schedule
    steps = [d.value for d in at.dataframe if "HLO op" in d.value.columns]
    xs = compiled_schedule("tpu-v4:2x2x2", "xla-shardy", plan.mesh, plan.src, plan.dst, dtype="bfloat16")
    assert len(steps) == 2 and len(steps[0]) == len(xs.ops)
    assert list(steps[0]["kind"]) == [o.kind for o in xs.ops]
    remat = [w.value for w in at.warning if w.value.startswith("Rematerialisation")]
    assert bool(remat) == bool(xs.meta["full_remat"])
    if remat:  # names the op and the growth to the whole array
        assert "the whole array" in remat[0] and "grows each device's buffer" in remat[0]
        # where the compiled program keeps it: its temp and the compiler's peak, against ours
        assert f"a peak of {fmt_bytes(xs.meta['compiled_peak_bytes'])} per device" in remat[0]
        assert f"Ours: a peak of {rows['ours (compiled)']['compiled peak']} per device" in remat[0]
    assert rows["xla shardy"]["full rematerialization"] == ("YES" if xs.meta["full_remat"] else "no")
    # the memory-first rule (executor.memfirst) kept auto's plan here: no note; where it
    # replaces the plan, the page says so and names the plan the 'ours (compiled)' row is
    key = next(iter(xla_compare._DONE))
    got = xla_compare._DONE[key]
    assert not (got.get("memory_first") or {}).get("plan")
    assert not [i for i in at.info if "Memory first" in i.value]
    swapped = synth.synthesize(plan.mesh, plan.src, plan.dst, planner="normal", itemsize=plan.itemsize)
    check_moves_exactly(swapped)
    xla_compare._DONE[key] = dict(got, memory_first={
        "chosen": "normal", "note": "memory-first: the fastest plan needed 4 KiB temp, XLA 2 KiB; chose normal",
        "plan_steps": [str(c) for c in swapped.steps], "plan": swapped.to_dict()})
    at.run()
    _ok(at)
    info = [i.value for i in at.info if "Memory first" in i.value]
    assert len(info) == 1 and "chose normal" in info[0]
    assert all(str(c) in info[0] for c in swapped.steps)
    xla_compare._DONE[key] = got
    at.run()
    # the shared link carries XLA's rows into a new session
    assert at.query_params["cmp_xla"] in ("1", ["1"])
    link = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    xla_compare._DONE.clear()
    st.cache_data.clear()
    fresh = AppTest.from_file(APP, default_timeout=300)
    for k, v in link.items():
        fresh.query_params[k] = v
    fresh.run()
    fresh.switch_page("ui/pages/compare.py").run()
    _ok(fresh)
    again = _table(fresh)
    assert {k: again[k]["simulated time"] for k in named} == {k: rows[k]["simulated time"] for k in named}

    at.button(key="cmp_measure_button").click().run()
    _ok(at)
    measured = next(d.value for d in at.dataframe if "xla_shardy" in set(d.value.get("strategy", [])))
    measured = {r["strategy"]: r for r in measured.to_dict("records")}
    assert set(measured) == {"ours", "xla_shardy", "xla_gspmd"}
    assert all(r["correct"] is True or r["correct"] == "True" for r in measured.values())


def test_compare_bad_placement_is_an_error():
    at = _app("ui/pages/compare.py")
    at.text_input(key="cmp_placement").set_value("data=Q").run()
    assert not at.exception
    assert len(at.error) == 1 and "data=Q" in at.error[0].value


# -- Calibration -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A real (tiny) calibration on 8 CPU devices, written by the executor."""
    out = tmp_path_factory.mktemp("calib") / "cpu-8.json"
    code = ("from executor.calibrate import calibrate; "
            f"calibrate({str(out)!r}, devices=8, tiny=True)")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=600,
                   capture_output=True)
    return out


def test_calibration_without_profiles_says_how_to_make_one(tmp_path):
    at = _app("ui/pages/calibration.py")
    at.text_input(key="calib_dir").set_value(str(tmp_path)).run()
    _ok(at)
    assert any("executor calibrate" in i.value for i in at.info)


def test_calibration_shows_report_and_parameters(calibrated):
    at = _app("ui/pages/calibration.py")
    at.text_input(key="calib_dir").set_value(str(calibrated.parent)).run()
    _ok(at)
    rep = json.loads(calibrated.with_name("cpu-8.report.json").read_text())
    prof = json.loads(calibrated.read_text())
    m = _metrics(at)
    assert m["held-out MAPE"] == f"{rep['mape']:.1f} %"
    assert m["held-out plans"] == str(rep["n_heldout"])
    assert not at.get("plotly_chart")  # Vega-Lite: the page fetches no plotly.js
    held, fit = (json.loads(c.proto.spec) for c in at.get("vega_lite_chart"))
    import altair as alt

    for spec in (held, fit):
        alt.Chart.from_dict(spec)  # valid Vega-Lite (altair's schema)
    # every held-out plan of the report is one point, at its measured and predicted seconds
    unit = held["layer"][1]["encoding"]["x"]["title"].rsplit("(", 1)[1].rstrip(")")
    div = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]
    pts = held["layer"][1]["data"]["values"]
    got = sorted((p["measured"] * div, p["predicted"] * div) for p in pts)
    want = sorted((r["measured_s"], r["predicted_s"]) for r in rep["heldout"])
    assert len(got) == len(want) and all(g == pytest.approx(w) for g, w in zip(got, want))
    assert {p["group"] for p in pts} == {r["strategy"] for r in rep["heldout"]}
    params = at.table[-1].value
    assert set(params["scope"]) >= {"machine"} | set(prof["collectives"])
    assert all(params["source"].str.len() > 0)


def test_calibration_bad_file_is_an_error(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    at = _app("ui/pages/calibration.py")
    at.text_input(key="calib_dir").set_value(str(tmp_path)).run()
    assert not at.exception
    assert len(at.error) == 1 and "not valid JSON" in at.error[0].value


# -- Sweeps -------------------------------------------------------------------------------
TINY = """\
name: app-tiny
description: two transformer cases, two planners, one what-if knob
suites:
  - transformer:
      names: [megatron-sp-to-tp-8, tp8-to-tp4-fsdp2-8]
machines: [tpu-v4]
planners: [easy, normal]
whatif:
  bandwidth_scale: [1.0, 2.0]
runner:
  workers: 1
  timeout_s: 120
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    (d / "tiny.yaml").write_text(TINY)
    subprocess.run([sys.executable, "-m", "experiments", "run", str(d / "tiny.yaml"), "--out",
                    str(d / "out"), "--no-progress", "--json"], cwd=ROOT, check=True, timeout=600,
                   capture_output=True)
    return d / "out"


def test_sweeps_browse_filter_and_report(results):
    rows = [json.loads(line) for line in (results / "rows.jsonl").read_text().splitlines() if line]
    at = _app("ui/pages/sweeps.py")
    _ok(at)
    at.text_input(key="sweeps_dir").set_value(str(results)).run()
    _ok(at)
    m = _metrics(at)
    assert m["rows"] == str(len(rows))
    assert m["ok"] == str(sum(r["status"] == "ok" for r in rows))
    assert m["cases"] == str(len({r["case"] for r in rows}))
    from tests.test_app_scale import sweep_charts

    charts = set(sweep_charts(at))
    assert charts == {"Simulated time over its lower bound (baseline knobs)",
                      "Largest shard per device over max(src, dst) (baseline knobs)",
                      "Peak live bytes (input + output of a step) over max(src, dst)",
                      f"What if: simulated time of case {sorted({r['case'] for r in rows})[0]} vs link bandwidth"}
    assert len(at.dataframe[0].value) == len(rows)
    at.multiselect(key="sweeps_planner").set_value(["normal"]).run()
    _ok(at)
    assert len(at.dataframe[0].value) == sum(r["planner"] == "normal" for r in rows)
    # Every plan of the sweep that the page lists is exact: the plan checked element by
    # element is the one the rows (and so the page) describe, figure for figure.
    listed = at.dataframe[0].value
    for r in rows:
        if r["planner"] in synth.PLANNERS and r["status"] == "ok":
            plan = synth.synthesize(r["mesh"], r["src"], r["dst"], r["planner"], r["itemsize"])
            assert (r["num_collectives"], r["max_shard_bytes"], r["peak_live_bytes"],
                    r["recv_bytes_max_device"]) == (plan.num_collectives, plan.max_shard_bytes,
                                                    plan.peak_live_bytes, plan.recv_bytes_max_device)
            check_moves_exactly(_shrunk(plan))
    assert len(listed) == sum(r["planner"] == "normal" for r in rows)
    at.button(key="sweeps_build_report").click().run()
    _ok(at)
    assert (results / "report.html").stat().st_size > 1000
    assert at.download_button(key="sweeps_download_report").label == "Download report.html"


def test_sweeps_switching_folder_keeps_only_valid_filters(results, tmp_path):
    at = _app("ui/pages/sweeps.py")
    at.text_input(key="sweeps_dir").set_value(str(results)).run()
    at.multiselect(key="sweeps_planner").set_value(["easy"]).run()
    _ok(at)
    # a second folder with the normal planner only
    other = tmp_path / "normal-only"
    other.mkdir()
    lines = [line for line in (results / "rows.jsonl").read_text().splitlines()
             if line and json.loads(line)["planner"] == "normal"]
    (other / "rows.jsonl").write_text("\n".join(lines) + "\n")
    at.text_input(key="sweeps_dir").set_value(str(other)).run()
    _ok(at)
    assert at.multiselect(key="sweeps_planner").value == []
    assert len(at.dataframe[0].value) == len(lines)


def test_sweeps_bad_folder_is_an_error(tmp_path):
    at = _app("ui/pages/sweeps.py")
    at.text_input(key="sweeps_dir").set_value(str(tmp_path / "nope")).run()
    assert not at.exception
    assert len(at.error) == 1 and "not a results folder" in at.error[0].value
