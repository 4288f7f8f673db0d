"""The executor CLI, the code generator and calibration end to end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from executor.codegen import generate_source
from synth import AllPermute, Mesh, Plan, parse_type, synthesize

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("XLA_FLAGS", None)  # the CLI must set the device count itself
    return subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)


# -- codegen -------------------------------------------------------------------------------
CODEGEN_CASES = [
    ("x=4,y=2", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", "normal"),
    ("x=4,y=2", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", "easy"),
    ("x=2,y=2,z=2", "[16{z}, 32, 32{x,y}]", "[16, 32, 32{z}]", "normal"),
    ("x=2,y=4", "[16{x}, 8{y}]", "[16{y}, 8{x}]", "normal"),
]


@pytest.mark.parametrize("mesh,src,dst,planner", CODEGEN_CASES)
def test_generated_source_runs_and_is_exact(mesh, src, dst, planner):
    jax = pytest.importorskip("jax")
    from executor.run import check_output, jax_mesh, make_input

    plan = synthesize(Mesh.parse(mesh), parse_type(src), parse_type(dst), planner)
    code = generate_source(plan)
    compile(code, "<generated>", "exec")
    ns = {"__name__": "generated"}
    exec(code, ns)  # noqa: S102 - the point of the test
    m = Mesh.parse(mesh)
    jm = ns["make_mesh"]()
    assert tuple(jm.axis_names) == m.names and tuple(jm.devices.shape) == m.sizes
    x = make_input(plan.src, "float32", 7)
    y = ns["redistribute"](x, jm)
    assert check_output(y, x, plan.dst, m, jax_mesh(m)) is None
    # the source names each step, in order, with the lax call the executor uses
    for c in plan.steps:
        want = {"all_gather": "lax.all_gather", "all_to_all": "lax.all_to_all",
                "dyn_slice": "lax.dynamic_slice_in_dim", "all_permute": "lax.ppermute"}[c.kind]
        assert want in code
    # the result is a jax array laid out over every device of the mesh, as the target says
    assert isinstance(y, jax.Array) and y.shape == plan.dst.shape
    assert len(y.sharding.device_set) == m.size
    for shard in y.addressable_shards:
        assert shard.data.shape == plan.dst.local_shape(m)


def test_generated_permute_with_several_rounds():
    pytest.importorskip("jax")
    from executor.lowering import permute_rounds
    from executor.run import check_output, jax_mesh, make_input

    m = Mesh.parse("a=2,b=2,c=2")
    t = parse_type("[8{b,c}, 4]")
    plan = Plan.build(m, parse_type("[8{a,b}, 4]"), t, (AllPermute(t),))
    assert len(permute_rounds(plan.steps[0].sources(plan.src, m))) >= 1
    ns = {"__name__": "generated"}
    exec(generate_source(plan), ns)  # noqa: S102
    x = make_input(plan.src, "float32", 1)
    assert check_output(ns["redistribute"](x, ns["make_mesh"]()), x, t, m, jax_mesh(m)) is None


def test_codegen_cli_writes_a_script_that_checks_itself(tmp_path):
    out = tmp_path / "reshard.py"
    r = _cli("codegen", "--mesh", "x=4,y=2", "--src", "P('y', None, 'x')", "--shape", "8,16,8",
             "--dst", "P(None, ('x','y'), None)", "--out", str(out))
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "ok"


# -- CLI --------------------------------------------------------------------------------
def test_compare_json_from_a_clean_environment():
    r = _cli("compare", "--mesh", "x=4,y=2", "--src", "P('y', None, 'x')", "--shape", "8,16,8",
             "--dst", "P(None, ('x','y'), None)", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) >= {"ours", "xla_shardy", "xla_gspmd"}
    for k in ("ours", "xla_shardy", "xla_gspmd"):
        assert d[k]["correct"] is True
        assert d[k]["time_s"] > 0 and d[k]["time_p10_s"] <= d[k]["time_s"] <= d[k]["time_p90_s"]
        assert isinstance(d[k]["temp_bytes"], int) and isinstance(d[k]["collectives"], list)
    assert d["ours"]["collectives"] == ["all_to_all"] and not d["ours"]["full_remat"]  # one over (x, y)
    assert d["xla_shardy"]["full_remat"] and d["xla_gspmd"]["full_remat"]
    assert d["ours"]["temp_bytes"] < d["xla_shardy"]["temp_bytes"]


def test_xla_schedule_json_loads_as_a_schedule(tmp_path):
    from synth import Schedule

    out = tmp_path / "s.json"
    r = _cli("xla-schedule", "--mesh", "x=4,y=2", "--src", "[8{y}, 16, 8{x}]", "--dst", "[8, 16{x,y}, 8]",
             "--partitioner", "gspmd", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    s = Schedule.from_dict(json.loads(r.stdout))
    assert s.num_devices == 8 and s.meta["full_remat"]
    assert [op.kind for op in s.ops if not op.is_local] == ["all_gather", "all_gather"]
    assert Schedule.load(out) == s


@pytest.mark.parametrize("args,words", [
    (["compare", "--mesh", "x=4,y=3", "--src", "[8{y}, 6{y}]", "--dst", "[8, 6]"], "at most once"),
    (["compare", "--mesh", "x=16", "--src", "[16{x}]", "--dst", "[16]"], "devices"),
    (["compare", "--mesh", "x=8", "--src", "[8{x}]", "--dst", "[8]", "--dtype", "float32", "--itemsize", "2"],
     "itemsize"),
    (["compare", "--mesh", "x=8", "--src", "[8{x}]", "--dst", "[8]", "--repeats", "3"], "at least 10"),
    (["codegen", "--mesh", "x=8", "--src", "[8{q}]", "--dst", "[8]"], "q"),
    (["xla-schedule", "--mesh", "x=8", "--src", "[8{x}]"], "--dst"),
    (["calibrate", "--out", "/tmp/x.yaml", "--tiny"], ".json"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exits_2_with_one_line(args, words):
    r = _cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("cmd", ["compare", "codegen", "xla-schedule", "calibrate", "report"])
def test_help(cmd):
    r = _cli(cmd, "--help")
    assert r.returncode == 0 and "--json" in r.stdout


# -- calibration end to end on a tiny grid ----------------------------------------------------
def test_calibration_end_to_end_tiny(tmp_path):
    out = tmp_path / "cal" / "cpu-8.json"
    r = _cli("calibrate", "--devices", "8", "--tiny", "--out", str(out), "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)
    rep = json.loads(out.with_name("cpu-8.report.json").read_text())
    assert rep["n_heldout"] == summary["n_heldout"] == 4 and len(rep["heldout"]) == 4
    assert all(h["correct"] for h in rep["heldout"])
    assert rep["mape"] == pytest.approx(np.mean([h["abs_pct_err"] for h in rep["heldout"]]))
    for h in rep["heldout"]:
        assert h["abs_pct_err"] == pytest.approx(100 * abs(h["predicted_s"] - h["measured_s"]) / h["measured_s"])
    kinds = {m["kind"] for m in rep["microbenchmarks"]}
    assert kinds == {"all_gather", "all_to_all", "permute", "all_reduce", "reduce_scatter", "dyn_slice", "copy"}
    for m in rep["microbenchmarks"]:
        assert m["time_s"] > 0 and m["algbw_Bps"] > 0 and m["busbw_Bps"] > 0
    # the profile loads through the models API and drives the simulator
    from models import load_profile
    from simulator import simulate

    prof = load_profile(str(out))
    assert prof.num_devices == 8 and not prof.unsourced()
    plan = synthesize(Mesh.parse("x=2,y=4"), parse_type("[64{x}, 32{y}]"), parse_type("[64{y}, 32{x}]"))
    assert simulate(plan.to_schedule(), prof).time_s > 0
    data = json.loads(out.read_text())
    assert data["calibration"]["program_overhead_s"] >= 0
    for kind, kp in data["collectives"].items():
        for field, v in kp.items():
            assert v["source"] and v["value"] >= 0, (kind, field)
