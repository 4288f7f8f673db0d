"""AppTest checks of every page of app.py.

Every plan the app shows or exports here is checked element by element: run through
the numpy interpreter, each device's final block must equal its block of the input
array under the target sharding.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

# The AppTests run simulations inline (the worker-process path has its own tests in
# tests/test_app_explorer.py).
os.environ.setdefault("APP_INLINE_S", "1e9")
# No browser draws these pages: the warm-up thread (ui.runs.warm_up) starts at once, so it has
# finished its imports before a short test run's interpreter exits.
os.environ.setdefault("APP_WARM_UP_DELAY_S", "0")

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # app.py and ui/ live at the root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import synth  # noqa: E402
from ui.fmt import fmt_bytes  # noqa: E402
from ui.scenario import DEFAULTS  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = ["ui/pages/plan.py", "ui/pages/simulate.py", "ui/pages/compare.py",
         "ui/pages/calibration.py", "ui/pages/sweeps.py"]

#: A small scenario (8 devices) whose exported plan is checked at full size.
SMALL = {"machine_size": "2x2x2", "mesh": "x=2,y=4", "shape": "16, 32",
         "src": "[16{y}, 32{x}]", "dst": "P(None, ('x', 'y'))"}


@pytest.fixture(autouse=True)
def _clear_caches():
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=120)


def _set(at: AppTest, **values) -> AppTest:
    for k, v in values.items():
        w = at.sidebar.text_input(key=k) if k not in ("dtype", "planner", "machine_profile") \
            else at.sidebar.selectbox(key=k)
        w.set_value(v)
    return at.run()


def _ok(at: AppTest):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def check_moves_exactly(plan: synth.Plan, x: np.ndarray | None = None):
    """Run the plan's steps on real data and compare every device's block."""
    if x is None:
        x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    # steps over sub-axes (``data:(4)4``) run on the plan's refined mesh, same device order
    blocks = synth.interpret(plan.steps, plan.work_types[0], plan.work_mesh, x)
    want = synth.scatter(x, plan.dst, plan.mesh)
    assert len(blocks) == len(want) == plan.mesh.size
    for d, (got, exp) in enumerate(zip(blocks, want)):
        assert got.shape == exp.shape, (d, got.shape, exp.shape)
        assert np.array_equal(got, exp), f"device {d} ends with the wrong block"


def _open_code(at: AppTest, key: str) -> None:
    """Open a code box of the Plan page (drawn only when open), as a click on it does."""
    if not (key in at.session_state and at.session_state[key]):
        at.session_state[key] = True
        at.run()


def _exported(at: AppTest) -> dict:
    _open_code(at, "plan_json_open")
    codes = [c.value for c in at.code if c.language == "json"]
    assert len(codes) == 1, "the Plan page shows the exported JSON once"
    return json.loads(codes[0])


def _steps(at: AppTest) -> list[dict]:
    """The Plan page's step table (a Markdown table), one dict per row, code spans unwrapped;
    asserts there is exactly one."""
    tables = [m.value for m in at.markdown if m.value.startswith("| step | collective |")]
    assert len(tables) == 1, f"{len(tables)} step tables"
    lines = tables[0].splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert set(lines[1].replace("|", "")) == {"-"}
    return [dict(zip(head, (c.strip().strip("`").replace("\u00a0", " ") for c in line.strip("|").split(" | ")),
                     strict=True))
            for line in lines[2:]]


def _table_collectives(at: AppTest) -> list[str]:
    return [r["collective"] for r in _steps(at)]


# -- Plan page ------------------------------------------------------------------------
def test_plan_default_render_shows_the_default_plan():
    at = _app().run()
    _ok(at)
    assert at.sidebar.text_input(key="src").value == DEFAULTS["src"]
    # the plan the page shows is the one it exports (auto's search has a wall-clock budget,
    # so a plan synthesized again here could differ on a loaded machine)
    plan = synth.Plan.from_dict(_exported(at))
    assert (str(plan.mesh), str(plan.src), str(plan.dst), plan.planner) == (
        "data=16,model=4", "[8192{data}, 32768{model}]", "[8192{model}, 32768{data}]", DEFAULTS["planner"])
    rows = plan.rows()
    steps = _steps(at)
    assert [r["collective"] for r in steps] == [r["collective"] for r in rows]
    assert [r["type after"] for r in steps] == [r["type"] for r in rows]
    assert [r["local shape"] for r in steps] == [str(tuple(r["local_shape"])) for r in rows]
    assert [r["shard bytes"] for r in steps] == [fmt_bytes(r["shard_bytes"]) for r in rows]
    assert len(at.get("vega_lite_chart")) == 1  # the memory chart (Vega-Lite, not plotly)
    assert [b.key for b in at.download_button][0] == "export_json"
    doc = _exported(at)
    assert synth.Plan.from_dict(doc) == plan
    assert doc["metrics"] == plan.metrics()
    # The default weight is 512 MiB; check the exported steps element by element on
    # the same types scaled down (every dim still divisible by all 64 devices): the
    # data movement of each step depends only on the types' axes.
    exported = synth.Plan.from_dict(doc)

    def shrink(t):
        return synth.ArrayType(tuple(synth.Dim(d.size // 64, d.axes) for d in t.dims))

    steps = [synth.AllPermute(shrink(c.target)) if c.kind == "all_permute" else c
             for c in exported.steps]
    small = synth.Plan.build(exported.mesh, shrink(exported.src), shrink(exported.dst), steps)
    assert [c.kind for c in small.steps] == [c.kind for c in exported.steps]
    check_moves_exactly(small)


def test_plan_changes_with_inputs_and_export_is_exact():
    at = _app().run()
    before = _table_collectives(at)
    _set(at, **SMALL)
    _ok(at)
    after = _table_collectives(at)
    assert after != before
    want = synth.synthesize("x=2,y=4", "[16{y}, 32{x}]", "[16, 32{x,y}]", itemsize=2)
    assert after == [r["collective"] for r in want.rows()]
    doc = _exported(at)
    plan = synth.Plan.from_dict(doc)
    assert plan == want
    assert doc["partition_specs"] == {"src": "P('y', 'x')", "dst": "P(None, ('x', 'y'))"}
    check_moves_exactly(plan)


@pytest.mark.parametrize("planner", ["easy", "normal"])
def test_plan_planner_choice(planner):
    at = _app().run()
    _set(at, **SMALL, planner=planner)
    _ok(at)
    doc = _exported(at)
    assert doc["planner"] == planner
    plan = synth.Plan.from_dict(doc)
    assert plan == synth.synthesize("x=2,y=4", "[16{y}, 32{x}]", "[16, 32{x,y}]", planner, 2)
    check_moves_exactly(plan)


def test_plan_dtype_changes_bytes():
    at = _app().run()
    _set(at, **SMALL, dtype="float32")
    _ok(at)
    doc = _exported(at)
    assert doc["itemsize"] == 4 and doc["dtype"] == "float32"
    assert doc["metrics"]["bound_bytes"] == 16 * 32 // 8 * 4


@pytest.mark.parametrize("values,needle", [
    ({"src": "[8192{data}, 32768{model}"}, "brackets"),
    ({"dst": "[8192{nope}, 32768]"}, "'nope'"),
    ({"src": "P('data', 'data')"}, "at most once"),
    ({"dst": "P('model'"}, "PartitionSpec"),
    ({"mesh": "data=16,model="}, "not an integer"),
    ({"mesh": "data=8,model=4"}, "machine has 64"),
    ({"shape": "8192, abc"}, "not an integer"),
    ({"dst": "[8192{model}, 1000{data}]"}, "Target sharding"),
    ({"src": "P('data', 'model', 'x')"}, "Source sharding"),
    ({"dst": "[8192, 32768, 2]"}, "shape"),
    ({"machine_size": "4xfour"}, "'4xfour'"),
])
def test_plan_bad_input_shows_error_and_keeps_running(values, needle):
    at = _app().run()
    _set(at, **values)
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1
    assert needle in at.error[0].value
    assert not [m for m in at.markdown if m.value.startswith("| step |")]
    # The page is alive: fixing the input brings the plan back.
    _set(at, **{k: DEFAULTS[k] for k in values})
    _ok(at)
    assert len(_steps(at)) >= 1


def test_switching_machine_takes_its_size_and_fits_the_mesh():
    at = _app().run()
    profiles = at.sidebar.selectbox(key="machine_profile").options
    assert "tpu-v4" in profiles and "dgx-h100" in profiles
    _set(at, machine_profile="dgx-h100")
    _ok(at)
    assert at.sidebar.text_input(key="machine_size").value == "1x8"
    assert at.sidebar.text_input(key="mesh").value == "data=2,model=4"
    doc = _exported(at)
    assert doc["mesh"] == {"data": 2, "model": 4}
    assert doc["machine"] == "dgx-h100:1x8"


def test_reset_restores_default_scenario():
    at = _app().run()
    _set(at, **SMALL)
    at.sidebar.button(key="reset_scenario").click().run()
    _ok(at)
    for k, v in DEFAULTS.items():
        w = at.sidebar.selectbox(key=k) if k in ("dtype", "planner", "machine_profile") \
            else at.sidebar.text_input(key=k)
        assert w.value == v


def test_scenario_survives_a_visit_to_another_page():
    at = _app().run()
    _set(at, **SMALL)
    at.switch_page("ui/pages/calibration.py").run()
    assert not at.exception
    at.switch_page("ui/pages/plan.py").run()
    _ok(at)
    assert at.sidebar.text_input(key="mesh").value == "x=2,y=4"
    assert _exported(at)["mesh"] == {"x": 2, "y": 4}


# -- every page -----------------------------------------------------------------------
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_by_default(page):
    at = _app().run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.title) == 1


@pytest.mark.parametrize("page", ["ui/pages/simulate.py", "ui/pages/compare.py"])
def test_scenario_pages_show_bad_input_as_error(page):
    at = _app().run()
    at.switch_page(page).run()
    _set(at, src="[8192{data}, 32768{data}]")
    assert not at.exception, [e.value for e in at.exception]
    assert any("at most once" in e.value for e in at.error)


def test_jax_code_export_runs_and_moves_data_exactly(tmp_path):
    """The exported JAX program, run on 8 CPU devices, checks its own output element
    by element against the target sharding and prints ok."""
    import os
    import subprocess
    import sys

    at = _app().run()
    _set(at, **dict(SMALL, dtype="float16"))
    _ok(at)
    assert at.download_button(key="export_jax").label == "Download JAX code"
    _open_code(at, "plan_code_open")
    code = [c.value for c in at.code if c.language == "python"]
    assert len(code) == 1
    assert "DTYPE = jnp.dtype('float16')" in code[0]   # the scenario's dtype, not float32
    plan = synth.Plan.from_dict(_exported(at))
    check_moves_exactly(plan)
    path = tmp_path / "reshard_plan.py"
    path.write_text(code[0])
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=8")
    out = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "ok"
    for c in plan.steps:
        if c.kind != "dyn_slice":
            assert {"all_to_all": "lax.all_to_all", "all_gather": "lax.all_gather",
                    "all_permute": "lax.ppermute"}[c.kind] in code[0]


def test_simulate_trace_download_does_not_rerun():
    """The Chrome trace button's data is deferred (a callable, registered under a new id on
    every run; a run's end drops the previous run's id), so a click must not rerun the page:
    the browser asks for the file by the id it drew, and a click's rerun ending first (a
    loaded machine) left the request nothing to build, and no download."""
    at = _app().run()
    _set(at, **SMALL)
    at.switch_page("ui/pages/simulate.py").run()
    _ok(at)
    btn = at.download_button(key="sim_chrome_trace")
    assert btn.label == "Download Chrome trace (Perfetto)"
    assert btn.proto.ignore_rerun


def test_same_source_and_target_is_a_plan_with_no_steps():
    at = _app().run()
    _set(at, dst=DEFAULTS["src"])
    _ok(at)
    assert any("nothing moves" in i.value for i in at.info)
    doc = _exported(at)
    assert doc["steps"] == []
    plan = synth.Plan.from_dict(doc)
    small = synth.Plan.build(plan.mesh, synth.ArrayType.parse("[128{data}, 256{model}]"),
                             synth.ArrayType.parse("[128{data}, 256{model}]"), [])
    check_moves_exactly(small)
    at.switch_page("ui/pages/simulate.py").run()
    _ok(at)
    assert any("nothing to replay" in i.value for i in at.info)
    at.switch_page("ui/pages/compare.py").run()
    _ok(at)


def test_error_names_the_input():
    at = _app().run()
    _set(at, dst="P('data', 'data')")
    assert len(at.error) == 1
    assert at.error[0].value.startswith("Target sharding \"P('data', 'data')\"")


def test_machine_list_holds_loadable_profiles_only():
    import models

    at = _app().run()
    options = at.sidebar.selectbox(key="machine_profile").options
    assert "tpu-v4" in options
    for name in options:
        assert models.load_profile(name).num_devices >= 1


def test_auto_plan_is_costed_on_the_scenarios_machine():
    """Issue 11: the app's auto plan is the machine's, not one plan for every machine."""
    from models.plan_cost import machine_cost
    from synth.auto import schedule_cost
    from ui import compute

    args = ("x=8,y=4", "", "[256, 128{y}, 256{x}]", "[256, 128, 256]")
    torus = compute.make_plan(*args, "auto", 64, 32, "tpu-v4", "2x4x4")
    normal = compute.make_plan(*args, "normal", 64, 32, "tpu-v4", "2x4x4")
    cost = machine_cost(compute.machine("tpu-v4", "2x4x4"), torus.mesh)
    t_auto, t_normal = schedule_cost(torus, cost)[0], schedule_cost(normal, cost)[0]
    assert t_auto < t_normal, (t_auto, t_normal)
    assert torus.max_shard_bytes <= max(torus.src.shard_elems(torus.mesh), torus.dst.shard_elems(torus.mesh)) * 64
    check_moves_exactly(torus)
