"""``python -m ui.serve``: the default Plan page's caches filled at server start, so the
first visitor's script run computes no plan and generates no code.

The default scenario (512 MiB array) is swapped for a small one here, so that the plan
the warm-up computed can be checked element by element against the target.
"""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import synth  # noqa: E402
from tests.test_app import SMALL, check_moves_exactly  # noqa: E402
from ui import plans, scenario, serve  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


@pytest.fixture
def small_default(monkeypatch):
    """The built-in scenario replaced by SMALL (tpu-v4 2x2x2, mesh x=2,y=4, 16 x 32); a
    warm-up thread an earlier test started has ended first (its calls are not this test's)."""
    from ui import runs

    assert runs.join_warm_up(120)
    for k, v in SMALL.items():
        monkeypatch.setitem(scenario.DEFAULTS, k, v)
    monkeypatch.setattr(scenario, "DEFAULT_SCENARIO", scenario.Scenario(**scenario.DEFAULTS))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield scenario.DEFAULT_SCENARIO
    st.cache_data.clear()
    st.cache_resource.clear()


def _count_calls(monkeypatch, module, name) -> list:
    calls = []
    real = getattr(module, name)

    @functools.wraps(real)
    def counted(*a, **kw):
        calls.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_first_script_run_after_the_warm_up_plans_nothing(small_default, monkeypatch):
    from ui import runs

    monkeypatch.setattr(runs, "warm_up", lambda: None)  # its own tiny plan is not the page's
    serve.warm_first_page()
    import executor.codegen as codegen

    planned = _count_calls(monkeypatch, synth, "synthesize")
    coded = _count_calls(monkeypatch, codegen, "generate_source")
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert at.title[0].value == "Plan"
    assert planned == [] and coded == [], "the first page recomputed what the warm-up had cached"
    # the page shows the warm-up's plan, and that plan moves every element to its target
    plan = plans.plan_for(small_default)
    assert planned == []
    assert plan.planner == small_default.planner
    assert at.markdown[0].value.startswith(f"**{plan.src}** &rarr; **{plan.dst}**")
    assert {m.label: m.value for m in at.metric}["collectives"] == str(plan.num_collectives)
    check_moves_exactly(plan)
    exported = at.get("download_button")
    assert [b.proto.label for b in exported][:2] == ["Download plan JSON", "Download JAX code"]


def test_a_failing_warm_up_logs_one_line_and_the_page_still_plans(small_default, monkeypatch, caplog):
    def broken(*a, **kw):
        raise RuntimeError("models table missing")

    monkeypatch.setattr(plans, "plan_for", broken)
    monkeypatch.setattr(serve, "warm_other_pages", lambda: (0.0, ""))
    serve.FIRST_PAGE_WARM.clear()
    with caplog.at_level(logging.WARNING, logger="ui.serve"):
        serve._warm(other_after_s=0.0)
    assert serve.FIRST_PAGE_WARM.is_set()
    lines = [r.getMessage() for r in caplog.records if r.name == "ui.serve"]
    assert lines == ["ui.serve: first-page warm-up skipped: RuntimeError: models table missing"]
    monkeypatch.undo()  # the real planner again; the page computes its plan itself
    from ui import runs

    for k, v in SMALL.items():
        monkeypatch.setitem(scenario.DEFAULTS, k, v)
    monkeypatch.setattr(runs, "warm_up", lambda: None)
    planned = _count_calls(monkeypatch, synth, "synthesize")
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception and not at.error
    assert len(planned) >= 1
    check_moves_exactly(plans.plan_for(scenario.Scenario(**scenario.DEFAULTS)))


def test_the_default_simulation_is_ready_before_the_first_visit_to_simulate(small_default, monkeypatch):
    """``warm_other_pages`` simulates the default scenario into the cache the Simulate page
    serves inline work from: the first visit runs no simulation and shows the simulator's
    figures for the warm-up's plan."""
    import simulator
    from ui import runs, work

    monkeypatch.setattr(runs, "warm_up", lambda: None)
    monkeypatch.setenv("APP_INLINE_S", "0")  # even work estimated for a worker is served from the cache
    runs._INLINE_KEYS.clear()
    serve.warm_first_page()
    serve.warm_other_pages()
    simulated = _count_calls(monkeypatch, work, "simulate_view")
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("ui/pages/simulate.py").run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert simulated == [], "the first visit to Simulate simulated again"
    assert not any("background process" in str(i.value) for i in at.info)
    plan = plans.plan_for(small_default)
    check_moves_exactly(plan)
    res = simulator.simulate_plan(plan, small_default.machine)
    from ui.fmt import fmt_seconds

    metrics = {m.label: m.value for m in at.metric}
    assert metrics["simulated time"] == fmt_seconds(res.time_s)
    assert metrics["lower bound"] == fmt_seconds(res.lower_bound_s)


def test_the_default_compare_is_ready_before_the_first_visit(small_default, monkeypatch):
    """``warm_other_pages`` also simulates the Compare page's strategies of the default
    scenario (what-if knobs at their defaults): its first visit simulates nothing and shows
    the simulator's time of every strategy."""
    import simulator
    from ui import runs, work, xla_compare
    from ui.fmt import fmt_seconds

    monkeypatch.setattr(runs, "warm_up", lambda: None)
    monkeypatch.setenv("APP_INLINE_S", "0")  # even work estimated for a worker is served from the cache
    # a fresh server: XLA's rows of this case, compiled by an earlier test, would join the page's
    # strategies (a different simulation from the warm-up's, which has none)
    monkeypatch.setattr(xla_compare, "_DONE", {})
    runs._INLINE_KEYS.clear()
    serve.warm_first_page()
    steps = runs.warm_pages()
    assert "Compare (default scenario)" in steps and "Cross-mesh (its example)" in steps
    compared = _count_calls(monkeypatch, work, "compare_view")
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("ui/pages/compare.py").run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert compared == [], "the first visit to Compare simulated again"
    table = next(d.value for d in at.table if "simulated time" in d.value.columns)
    ours = plans.plan_for(small_default)
    assert len(table) == len(synth.PLANNERS)
    for name, shown in zip(table["strategy"], table["simulated time"]):
        planner = name.split("(")[1].rstrip(")") if name.startswith("ours") else name
        plan = synth.synthesize(str(ours.mesh), str(ours.src), str(ours.dst), planner=planner,
                                itemsize=ours.itemsize) if planner != ours.planner else ours
        check_moves_exactly(plan)
        assert shown == fmt_seconds(simulator.simulate_plan(plan, small_default.machine).time_s), name


def test_one_warm_up_per_server(monkeypatch):
    """Under ``ui.serve`` (its thread owns the warm-up) the app's ``ui.runs.warm_up`` only
    says that the first page is drawn and starts no second thread doing the same work."""
    import threading

    from ui import runs

    monkeypatch.setattr(runs, "SERVE_OWNS_WARM_UP", threading.Event())
    monkeypatch.setattr(runs, "FIRST_PAGE_DRAWN", threading.Event())
    runs.SERVE_OWNS_WARM_UP.set()
    st.cache_resource.clear()
    before = list(runs._THREADS)
    assert runs.warm_up() is None
    assert runs.FIRST_PAGE_DRAWN.is_set() and runs._THREADS == before
    st.cache_resource.clear()


def test_the_warm_up_stops_between_steps_when_asked(monkeypatch):
    """A stop (the interpreter's exit sets it) ends the warm-up before its next step."""
    import threading

    from ui import runs

    ran = []
    monkeypatch.setattr(runs, "warm_steps", lambda: [("a", lambda: ran.append("a")), ("b", lambda: ran.append("b"))])
    stop = threading.Event()
    stop.set()
    assert runs.warm_pages(stop) == {} and ran == []
    assert list(runs.warm_pages(threading.Event())) == ["a", "b"] and ran == ["a", "b"]
