"""python -m simulator: run / profiles / bench / agreement, errors exit 2 with one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simulator.cli import main
from synth import Plan, interpret, scatter, synthesize

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def check_data(plan):
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    blocks = interpret(plan.steps, plan.src, plan.mesh, x)
    for got, want in zip(blocks, scatter(x, plan.dst, plan.mesh)):
        assert np.array_equal(got, want)


def test_run_json_document(capsys):
    args = ["run", "--hardware", "tpu-v4:4x4x4", "--mesh", "x=4,y=4,z=4", "--src", "[1024{x}, 4096{y,z}]",
            "--dst", "[1024{y}, 4096{z,x}]", "--json"]
    rc, out, err = run_cli(capsys, *args)
    assert rc == 0 and err == ""
    d = json.loads(out)
    for k in ("time_s", "lower_bound_s", "peak_bytes_max_device", "link_bytes_max", "ops", "plan"):
        assert k in d
    assert all({"kind", "start_s", "end_s"} <= set(o) for o in d["ops"])
    assert d["time_s"] >= d["lower_bound_s"] > 0
    plan = synthesize("x=4,y=4,z=4", "[1024{x}, 4096{y,z}]", "[1024{y}, 4096{z,x}]")
    check_data(plan)
    assert d["peak_bytes_max_device"] == plan.peak_live_bytes
    assert [o["kind"] for o in d["ops"]] == [op.kind for op in plan.to_schedule().ops]


def test_run_text_placement_scales_and_trace(capsys, tmp_path):
    trace = tmp_path / "t.csv"
    args = ["run", "--hardware", "tpu-v4:8x1x1", "--mesh", "x=4,y=2", "--src", "[64{y}, 32{x}]",
            "--dst", "[64, 32{x}]", "--placement", "y=X:2,x=X:4"]
    rc, out, err = run_cli(capsys, *args, "--bandwidth-scale", "2", "--trace", str(trace))
    assert rc == 0, err
    assert "simulated time" in out and "placement y=X:2,x=X:4" in out
    assert trace.read_text().startswith("op,kind,unit,step")
    # the plan the CLI simulated moves the data exactly
    _, base, _ = run_cli(capsys, *args, "--latency-scale", "0", "--json")
    base = json.loads(base)
    check_data(Plan.from_dict(base["plan"]))
    # --bandwidth-scale reaches the simulation: without latency, twice the bandwidth is half
    # the time, over the same link bytes
    _, fast, _ = run_cli(capsys, *args, "--latency-scale", "0", "--bandwidth-scale", "2", "--json")
    fast = json.loads(fast)
    # the same plan (its steps; a cost-model planner's search notes carry the scaled machine's times)
    assert fast["plan"]["steps"] == base["plan"]["steps"]
    assert fast["link_bytes_max"] == base["link_bytes_max"] > 0
    assert fast["time_s"] == pytest.approx(base["time_s"] / 2, rel=1e-9)


def test_run_what_if_scale_speeds_up(capsys):
    base = ["run", "--hardware", "tpu-v4:4x4x4", "--json"]
    _, a, _ = run_cli(capsys, *base)
    _, b, _ = run_cli(capsys, *base, "--bandwidth-scale", "4", "--latency-scale", "0")
    assert json.loads(b)["time_s"] < json.loads(a)["time_s"]


def test_run_schedule_file(capsys, tmp_path):
    plan = synthesize("x=2,y=4", "[64{y}, 32, 16{x}]", "[64, 32{x,y}, 16]", itemsize=64)
    check_data(plan)
    f = tmp_path / "s.json"
    f.write_text(plan.to_schedule().to_json())
    rc, out, err = run_cli(capsys, "run", "--hardware", "cpu-host:8", "--schedule", str(f), "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["peak_bytes_max_device"] == plan.peak_live_bytes
    # issue 9: the kind names the binding term of the redistribution bound
    assert d["lower_bound_kind"] in d["lower_bound_terms"]
    assert d["lower_bound_s"] == pytest.approx(max(d["lower_bound_terms"].values()))
    assert all(o["algorithm"] for o in d["ops"] if o["kind"] not in ("dyn_slice", "copy"))


@pytest.mark.parametrize("argv,needle", [
    (["run", "--hardware", "tpu-v9:4x4x4"], "unknown hardware profile 'tpu-v9'"),
    (["run", "--hardware", "tpu-v4:4x4"], "mesh x=4,y=4,z=4 has 64 devices but hardware tpu-v4:4x4x1 has 16"),
    (["run", "--placement", "x=X,y=W,z=Z"], "unknown physical dim 'W'"),
    (["run", "--placement", "x=X"], "is not placed"),
    (["run", "--hardware", "tpu-v4:4x4x"], "malformed"),
    (["run", "--schedule", "/no/such.json", "--hardware", "cpu-host:8"], "does not exist"),
    (["run", "--src", "[1024{q}, 4096]"], "q"),
    (["run", "--itemsize", "0"], "--itemsize"),
    (["run", "--bogus"], "unrecognized arguments"),
    (["run", "--engine", "fast"], "invalid choice: 'fast'"),
    (["validate", "--data", "/no/such/published.yaml"], "validate: cannot read /no/such/published.yaml"),
    (["validate", "--data", "/dev/zero"], "not a regular file"),     # must not read forever
    (["bench", "--flat", "7"], "--flat takes one of [512, 4096] or 0"),
    (["bench", "--sizes", "300"], "no benchmark shape for 300"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, needle):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert needle in err


def test_profiles_listing(capsys):
    rc, out, _ = run_cli(capsys, "profiles", "--json")
    assert rc == 0
    names = {p["name"] for p in json.loads(out)["profiles"]}
    assert {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "dgx-a100", "dgx-h100", "h100-multinode",
            "gb200-nvl72", "cpu-host"} <= names


def test_bench_small_sizes_print_figures(capsys):
    rc, out, _ = run_cli(capsys, "bench", "--sizes", "64", "--json")
    assert rc == 0
    c = json.loads(out)["cases"][0]
    assert c["chips"] == 64 and c["events"] > 0 and c["events_per_s"] > 0 and c["sim_time_s"] > 0


def test_module_entry_point_help_and_error():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ok = subprocess.run([sys.executable, "-m", "simulator", "run", "--help"], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "--hardware" in ok.stdout and "--placement" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "simulator", "run", "--hardware", "nope"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
