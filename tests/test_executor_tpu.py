"""Ahead-of-time compilation for TPU slices through libtpu (executor.tpu): no TPU here.

Every compile targets a small slice (v5p:2x2x2, v4:2x2x2 in megacore mode, v5e:2x4)
and its extracted schedule is checked against what the simulator expects: the
collectives of our plan's own schedule, and, for XLA, the single full-array all-gather
of jax issue 21562.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from executor import tpu
from executor.errors import ExecutorError
from executor.hlo import hlo_to_schedule
from synth import Mesh, parse_type, synthesize

ROOT = Path(__file__).resolve().parents[1]
MESH = Mesh.parse("x=4,y=2")
ISSUE_SRC = parse_type("P('y', None, 'x')", (8, 16, 8))
ISSUE_DST = parse_type("P(None, ('x','y'), None)", (8, 16, 8))


def _comm(sched):
    return [(o.kind, tuple(sorted(tuple(g) for g in o.groups)), o.in_bytes, o.out_bytes, o.recv_bytes)
            for o in sched.ops if not o.is_local]


# -- targets -------------------------------------------------------------------------------
def test_parse_target_maps_profiles_to_libtpu_names():
    t = tpu.parse_target("tpu-v5p:16x16x16")
    assert (t.profile, t.size, t.topology_name, t.num_chips) == ("tpu-v5p", "16x16x16", "v5p:16x16x16", 4096)
    v4 = tpu.parse_target("TPU-v4:4x4x4")
    assert v4.topology_name == "v4:4x4x4" and v4.chip_config == "megacore"
    assert tpu.parse_target("tpu-v5e:16x16").topology_name == "v5e:16x16"
    assert tpu.parse_target("tpu-v6e:8x8").dims == (8, 8)


@pytest.mark.parametrize("text,words", [
    ("tpu-v9:2x2", ["tpu-v9", "tpu-v5p", "tpu-v4"]),
    ("tpu-v5p", ["give the size"]),
    ("gb200-nvl72:1", ["gb200-nvl72", "dgx-h100", "tpu-v5p:16x16x16"]),
    ("tpu-v5p:banana", ["tpu-v5p:banana"]),
])
def test_bad_targets_name_the_input_and_the_choices(text, words):
    with pytest.raises(ExecutorError) as e:
        tpu.parse_target(text)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_mesh_that_does_not_fit_the_slice():
    with pytest.raises(ExecutorError, match=r"64 chips.*tpu-v5p:2x2x2"):
        tpu.compile_xla("tpu-v5p:4x4x4", MESH, ISSUE_SRC, ISSUE_DST)


def test_topology_libtpu_rejects_is_one_line():
    mesh = Mesh.parse("x=3,y=9")
    src, dst = parse_type("[9{x}, 9{y}]"), parse_type("[9{y}, 9{x}]")
    with pytest.raises(ExecutorError) as e:
        tpu.compile_xla("tpu-v5p:3x3x3", mesh, src, dst)
    msg = str(e.value)
    assert "libtpu rejects topology 'v5p:3x3x3'" in msg and "tpu-v5p:16x16x16" in msg and "\n" not in msg


def test_missing_libtpu_says_how_to_install(monkeypatch):
    monkeypatch.setattr(tpu, "libtpu_status", lambda: "libtpu is not installed")
    with pytest.raises(ExecutorError, match=r"libtpu is not installed.*pip install"):
        tpu.topology("tpu-v5p:2x2x2")


# -- placement -----------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["tpu-v5p:2x2x2", "tpu-v4:2x2x2", "tpu-v5e:2x4"])
def test_chips_in_simulator_order_one_device_per_chip(target):
    t = tpu.parse_target(target)
    devs = tpu.chip_devices(t)
    assert len(devs) == t.num_chips == len({d.id for d in devs})
    dims3 = t.dims + (1,) * (3 - len(t.dims))
    for c, d in enumerate(devs):
        assert tuple(d.coords) == tuple(int(v) for v in np.unravel_index(c, dims3))
    assert {d.core_on_chip for d in devs} == {0}  # v4: megacore, one device per chip


def test_mesh_devices_follow_the_simulators_placement():
    from models.placement import Placement

    t = tpu.parse_target("tpu-v5p:2x2x2")
    mesh = Mesh.parse("x=2,y=2,z=2")
    devs = tpu.chip_devices(t)
    for text in (None, "x=Z,y=Y,z=X"):
        jm = tpu.tpu_mesh(t, mesh, text)
        chips = Placement.of(text, mesh, t.machine()).chips
        assert [d.id for d in jm.devices.flat] == [devs[c].id for c in chips]
    assert chips != tuple(range(8))  # the reversed placement really moved devices


# -- compiled schedules --------------------------------------------------------------------
@pytest.mark.parametrize("target", ["tpu-v5p:2x2x2", "tpu-v4:2x2x2"])
def test_issue_21562_is_one_full_array_all_gather_on_tpu(target):
    """P('y',None,'x') -> P(None,('x','y'),None): XLA's TPU compiler, under both
    partitioners, gathers the whole array on every chip in one all-gather, then slices;
    our plan compiles to the one all-to-all of its own schedule and needs less temp."""
    plan = synthesize(MESH, ISSUE_SRC, ISSUE_DST)
    ours = tpu.compile_plan(target, plan)
    assert _comm(ours.schedule) == _comm(plan.to_schedule())
    assert ours.collectives == ["all_to_all"] and not ours.full_remat  # one over (x, y)
    whole = 8 * 16 * 8 * 4
    for part in ("shardy", "gspmd"):
        x = tpu.compile_xla(target, MESH, ISSUE_SRC, ISSUE_DST, part)
        comm = [o for o in x.schedule.ops if not o.is_local]
        assert len(comm) == 1 and comm[0].kind == "all_gather"
        assert comm[0].groups == ((0, 2, 4, 6, 1, 3, 5, 7),) and comm[0].out_bytes == whole
        assert x.full_remat and "whole array" in x.remat_reason
        assert x.schedule.meta["compiler"] == "libtpu" and x.schedule.meta["target"] == target
        assert any(o.kind == "dyn_slice" and o.out_bytes == whole // 8 for o in x.schedule.ops)
        assert ours.temp_bytes <= x.temp_bytes


def test_all_to_all_case_matches_our_schedule_and_xla_does_not_remat():
    mesh = Mesh.parse("x=2,y=4")
    src, dst = parse_type("[1024{x}, 512{y}]"), parse_type("[1024{y}, 512{x}]")
    plan = synthesize(mesh, src, dst)
    ours = tpu.compile_plan("tpu-v5p:2x2x2", plan)
    assert _comm(ours.schedule) == _comm(plan.to_schedule())
    x = tpu.compile_xla("tpu-v5p:2x2x2", mesh, src, dst, "shardy")
    assert not x.full_remat and x.collectives and "all_gather" not in x.collectives
    # the schedule read back from the text alone is the same
    again = hlo_to_schedule(x.hlo_text, num_devices=8)
    assert _comm(again) == _comm(x.schedule)


def test_xla_schedule_replays_on_the_simulator_with_the_same_placement():
    import simulator

    t = tpu.parse_target("tpu-v5p:2x2x2")
    sched = tpu.xla_schedule(t, MESH, ISSUE_SRC, ISSUE_DST)
    assert isinstance(sched.meta["temp_bytes"], int) and sched.meta["compiler"] == "libtpu"
    r = simulator.simulate(sched, t.machine(), mesh=MESH)
    assert r.time_s > 0 and r.peak_bytes_max_device >= 8 * 16 * 8 * 4


# -- command line --------------------------------------------------------------------------
def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("XLA_FLAGS", None)
    env.pop("JAX_PLATFORMS", None)  # the executor must choose CPU itself, without probing a TPU
    return subprocess.run([sys.executable, "-m", "executor", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)


ISSUE_ARGS = ["--mesh", "x=4,y=2", "--src", "P('y', None, 'x')", "--shape", "8,16,8",
              "--dst", "P(None, ('x','y'), None)"]


def test_compare_target_json_is_compile_only():
    r = _cli("compare", "--target", "tpu-v5p:2x2x2", *ISSUE_ARGS, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["compile_only"] is True and d["times"] is None and d["target"] == "tpu-v5p:2x2x2"
    for k in ("ours", "xla_shardy", "xla_gspmd"):
        assert not any(f.startswith("time") for f in d[k])
        assert d[k]["temp_bytes"] >= 0
    assert d["ours"]["collectives"] == ["all_to_all"]
    assert d["xla_shardy"]["full_remat"] and d["xla_gspmd"]["collectives"] == ["all_gather"]
    assert d["ours"]["temp_bytes"] < d["xla_shardy"]["temp_bytes"]
    # libtpu's start-up chatter about the missing TPU does not reach the user
    assert "TPU_ACCELERATOR_TYPE" not in r.stderr and "InitGoogle" not in r.stderr


def test_compare_target_text_says_no_times():
    r = _cli("compare", "--target", "tpu-v4:2x2x2", *ISSUE_ARGS)
    assert r.returncode == 0, r.stderr
    assert "compile-only" in r.stdout and "no times" in r.stdout and "time " not in r.stdout.split("\n")[1]


def test_xla_schedule_target_json(tmp_path):
    from synth.schedule import Schedule

    out = tmp_path / "s.json"
    r = _cli("xla-schedule", "--target", "tpu-v5p:2x2x2", *ISSUE_ARGS, "--partitioner", "gspmd",
             "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["meta"]["compiler"] == "libtpu" and d["meta"]["full_remat"] is True
    assert d["meta"]["compile_only"] is True and isinstance(d["meta"]["temp_bytes"], int)
    s = Schedule.from_dict(json.loads(out.read_text()))
    assert [o.kind for o in s.ops if not o.is_local] == ["all_gather"]


@pytest.mark.parametrize("args,words", [
    (["--target", "tpu-v9:2x2"], ["tpu-v9", "tpu-v5p:16x16x16"]),
    (["--target", "tpu-v5p:4x4x4"], ["64 chips", "tpu-v5p:2x2x2"]),
    (["--placement", "x=Z"], ["--placement", "--target"]),
])
def test_bad_target_input_exits_2_with_one_line(args, words):
    r = _cli("xla-schedule", *ISSUE_ARGS, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    for w in words:
        assert w in lines[0]


def test_cpu_work_does_not_probe_a_tpu():
    """Without JAX_PLATFORMS, the executor starts JAX on CPU (libtpu is installed here
    and would otherwise be probed, with warnings)."""
    code = ("import executor, os; from executor._jaxsetup import ensure_devices; d = ensure_devices(2); "
            "print(os.environ['JAX_PLATFORMS'], d[0].platform, len(d))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("JAX_PLATFORMS", None)
    env.pop("XLA_FLAGS", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cpu", "cpu", "2"]
    assert "TPU" not in r.stderr


# -- GPU targets (XLA's GPU compiler through JAX's CUDA plugin, no GPU) ----------------------
def test_gpu_target_parses_to_the_profiles_nodes():
    t = tpu.parse_target("dgx-h100:2")
    assert (t.platform, t.size, t.num_chips, t.topology_name) == ("cuda", "2x8", 16, "h100:1x2x8")
    assert tpu.parse_target("dgx-a100:1x4").num_chips == 4


@pytest.mark.skipif(tpu.gpu_plugin_status() is None, reason="JAX's CUDA plugin is installed here")
def test_gpu_target_without_the_plugin_says_how_to_install_it():
    r = _cli("xla-schedule", *ISSUE_ARGS, "--target", "dgx-h100:1")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "dgx-h100:1x8" in lines[0] and "pip install jax-cuda12-plugin==" in lines[0]


@pytest.mark.skipif(tpu.gpu_plugin_status() is not None, reason="needs jax-cuda12-plugin (see docs/executor.md)")
def test_gpu_compile_of_the_issue_case_without_a_gpu():
    """The CUDA plugin compiles for 8 H100s with no GPU: XLA's GPU compiler also
    rematerializes the whole array for the issue's case; ours is one all-to-all."""
    plan = synthesize(MESH, ISSUE_SRC, ISSUE_DST)
    ours = tpu.compile_plan("dgx-h100:1", plan)
    assert _comm(ours.schedule) == _comm(plan.to_schedule())
    for part in ("shardy", "gspmd"):
        x = tpu.compile_xla("dgx-h100:1", MESH, ISSUE_SRC, ISSUE_DST, part)
        assert x.full_remat and x.schedule.meta["compiler"] == "xla-gpu"
        assert ours.temp_bytes < x.temp_bytes


# -- experiments: TPU rows compiled by libtpu, the memory table ---------------------------------
def test_experiment_rows_name_their_xla_compiler():
    from experiments import backends
    from experiments.suites import load_suite

    case = next(c for c in load_suite("xla-issues") if c.name == "jax-21562-4x2")
    tpu_m = backends.load_machine("tpu-v4", case.num_devices)
    s = backends.xla_schedule(case, "xla-gspmd", case.itemsize, machine=tpu_m)
    assert s.meta["compiler"] == "libtpu" and s.meta["target"] == "tpu-v4:2x2x2"
    assert s.meta["full_remat"] and [o.kind for o in s.ops if not o.is_local] == ["all_gather"]
    cache = {}
    a = backends.xla_schedule_cached(cache, case, "xla-gspmd", case.itemsize, 2048, tpu_m)
    assert backends.xla_schedule_cached(cache, case, "xla-gspmd", case.itemsize, 2048, tpu_m) is a
    gpu = backends.load_machine("dgx-h100", 8)
    assert backends.compiler_for(gpu) == "xla-gpu"
    assert backends.xla_compiler_for(gpu) == ("xla-gpu" if tpu.gpu_plugin_status() is None else "xla-cpu")


def test_tpu_memory_counts():
    from experiments import backends
    from experiments.suites import load_suite

    cases = [c for c in load_suite("xla-issues") if c.name in ("jax-21562-4x2", "dtensor-132751-3d")]
    rep = backends.tpu_memory(profiles=("tpu-v5p",), cases=cases)
    assert [r["status"] for r in rep["rows"]] == ["ok", "ok"]
    (sh, gs) = rep["summary"]
    assert sh["cases"] == 2 and sh["ours_le_xla"] == 2 and sh["xla_remat"] == 1
    assert sh["ours_lt_xla_where_remat"] == 1 and gs["partitioner"] == "gspmd"
    row = next(r for r in rep["rows"] if r["case"] == "jax-21562-4x2")
    assert row["shardy_full_remat"] and row["ours_temp_bytes"] < row["shardy_temp_bytes"]
    # the compiler's peak (every memory space) is counted where XLA rematerialises, too
    assert 0 < row["ours_peak_bytes"] < row["shardy_peak_bytes"] and sh["ours_peak_lt_xla_where_remat"] == 1
    # a program the compiler rejects as larger than HBM counts as needing more than ours
    fake = [{"profile": "p", "status": "ok", "ours_temp_bytes": 5, "shardy_temp_bytes": None,
             "shardy_full_remat": None, "gspmd_temp_bytes": 4, "gspmd_full_remat": False}]
    s1, s2 = backends.tpu_memory_summary(fake)
    assert (s1["ours_le_xla"], s1["ours_lt_xla"], s1["xla_oom"], s1["xla_remat"]) == (1, 1, 1, 1)
    assert (s2["ours_le_xla"], s2["ours_lt_xla"], s2["xla_oom"]) == (0, 0, 0)


def test_memory_case_keeps_the_compilers_out_of_memory_verdict_through_the_guard():
    # libtpu rejects XLA's reshard of the realistic jax-21562 array (72 GiB of temporaries);
    # compile_guard rewrites that into one line, and tpu-memory must still read it as XLA's
    # out-of-memory verdict (a row), not as a failure of the run
    from synth.cliutil import parse_case

    mesh, src, dst = parse_case("x=4,y=2", "[1024{y}, 4096, 4096{x}]", "[1024, 4096{x,y}, 4096]")
    row = tpu.memory_case("tpu-v4:2x2x2", mesh, src, dst, dtype="bfloat16")
    # ours is one all-to-all over (x, y) (two moves into dim 1): libtpu keeps two 4 GiB
    # temporaries around it, where the two-all-to-all chain kept one (docs/executor.md)
    assert row["ours_oom"] is None and row["ours_temp_bytes"] == 8 << 30
    for p in ("shardy", "gspmd"):
        assert row[f"{p}_temp_bytes"] is None and "failed for memory" in row[f"{p}_oom"]
        assert "72.00 GiB of HBM" in row[f"{p}_oom"]


def test_memory_case_plans_auto_for_the_target_machine():
    # issue 19: tpu-memory planned auto under synth's default cost, where reduce-scatter,
    # permute, all-gather (16 MiB of temp on v5p) tied with one all-reduce counted out of
    # place; under the v5p's own cost, with the all-reduce in place, it is one all-reduce
    from experiments.suites import load_suite
    from synth.bench import check_plan_exact

    case = next(c for c in load_suite("transformer") if c.name == "megatron-tp-allreduce-8")
    mesh, src, dst = case.parsed()
    plan = tpu.plan_for_target("tpu-v5p:2x2x2", mesh, src, dst, itemsize=case.itemsize)
    check_plan_exact(plan)
    assert plan.search["cost_model"].startswith("analytic model of tpu-v5p")
    assert [c.kind for c in plan.steps] == ["all_reduce"]
    assert plan.peak_live_bytes == plan.max_shard_bytes  # in place: one buffer
    row = tpu.memory_case("tpu-v5p:2x2x2", mesh, src, dst, dtype=case.dtype)
    assert row["ours_plan_steps"] == [str(c) for c in plan.steps]
    assert row["ours_cost_model"] == plan.search["cost_model"]
    assert row["ours_collectives"] == ["all_reduce"]
    assert row["ours_temp_bytes"] <= min(row["shardy_temp_bytes"], row["gspmd_temp_bytes"])


# -- the new types: pending sums, sub-axes, uneven dims ---------------------------------------
NEW_TYPES = [
    ("x=4,y=2", "[1024{x}, 4096]{U:y}", "[1024{x}, 4096{y}]", "reduce_scatter"),
    ("x=4,y=2", "[1024{x}, 4096]{U:y}", "[1024{x}, 4096]", "all_reduce"),
    ("x=8", "[1024{x:(1)2}, 4096{x:(2)4}]", "[1024{x}, 4096]", "all_to_all"),
    ("x=8", "[50257{x}, 1024]", "[50257, 1024{x}]", "all_to_all"),
]


@pytest.mark.parametrize("mesh,src,dst,kind", NEW_TYPES)
def test_new_types_compile_for_tpu(mesh, src, dst, kind):
    """Pending sums, sub-axes and uneven dims compile for the slice: our program's
    collectives are its own schedule's, and XLA's reshard (which reduces the stacked
    partial sums as executor.xla_reshard does) reads back as the same kind of collective,
    including TPU's fused all-reduce-scatter."""
    mesh, src = Mesh.parse(mesh), parse_type(src)
    dst = parse_type(dst, src.shape)
    plan = synthesize(mesh, src, dst)
    ours = tpu.compile_plan("tpu-v5p:2x2x2", plan)
    assert _comm(ours.schedule) == _comm(plan.to_schedule())
    assert [o.kind for o in plan.to_schedule().ops if not o.is_local] == [kind]
    for part in ("shardy", "gspmd"):
        x = tpu.compile_xla("tpu-v5p:2x2x2", mesh, src, dst, part)
        assert [o.kind for o in x.schedule.ops if not o.is_local] == [kind]
        assert not x.full_remat
