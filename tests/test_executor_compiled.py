"""One path for both sides (issue 19): every strategy compiled by the machine's own
compiler and read by the same HLO reader; Shardy's reshard-to-collectives plan as a
third baseline; compile-only work never refused for the memory running would need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import synth
from executor import tpu
from executor.compare import compiled_schedule
from executor.shardy import ShardyError, shardy_plan
from synth.interp import check_blocks, interpret

ROOT = Path(__file__).resolve().parents[1]
ISSUE = ("x=4,y=2", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]")
needs_libtpu = pytest.mark.skipif(tpu.libtpu_status() is not None, reason="needs libtpu")

SHARDY_CASES = [
    (ISSUE, ["AllToAll(2->1, x)", "AllToAll(0->1, y)"]),
    (("x=8", "[64{x}, 32]", "[64, 32]"), ["AllGather(0, x)"]),
    (("x=8", "[64, 32]", "[64{x}, 32]"), ["DynSlice(0, x)"]),
    (("x=2,y=2,z=2", "[8{x}, 8{y}, 8{z}]", "[8{z}, 8{x}, 8{y}]"), None),
    (("x=2,y=4", "[64{x}, 64{y}]", "[64{y}, 64{x}]"), None),
    (("x=8", "[64{x:(1)2}, 32{x:(2)4}]", "[64{x:(2)4}, 32{x:(1)2}]"), None),
]


def _check(plan):
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    work = plan.work_mesh
    blocks = interpret(plan.steps, plan.work_types[0], work, x)
    check_blocks(x, blocks, plan.work_types[-1], work)


@pytest.mark.parametrize("case,steps", SHARDY_CASES, ids=[c[0][1] + "->" + c[0][2] for c in SHARDY_CASES])
def test_shardy_plan_moves_exactly_the_target(case, steps):
    plan = shardy_plan(*case)
    assert plan.planner == "shardy-r2c" and plan.notes[0].startswith("Shardy reshard-to-collectives: ")
    _check(plan)  # element by element through synth's interpreter
    if steps is not None:
        assert [str(c) for c in plan.steps] == steps


def test_shardy_plan_refuses_pending_sums_in_one_line():
    with pytest.raises(ShardyError, match="even types without pending sums"):
        shardy_plan("x=4,y=2", "[64{x}, 32]{U:y}", "[64{x}, 32{y}]")


def test_shardy_plan_runs_on_devices_bit_for_bit():
    from executor.run import run_plan

    plan = shardy_plan("x=2,y=4", "[64{x}, 64{y}]", "[64{y}, 64{x}]")
    assert run_plan(plan).correct  # raises OutputMismatch on any wrong element


def test_cpu_compile_widens_bf16_and_says_so():
    f32 = compiled_schedule("cpu-host:8", "xla-gspmd", *ISSUE, dtype="float32")
    bf16 = compiled_schedule("cpu-host:8", "xla-gspmd", *ISSUE, dtype="bfloat16")
    assert f32.meta["compiler"] == bf16.meta["compiler"] == "xla-cpu"
    assert "widens bfloat16" in bf16.meta["dtype_handling"] and f32.meta["dtype_handling"] == "compiled as float32"
    assert [o.kind for o in bf16.ops] == [o.kind for o in f32.ops]
    assert [o.recv_bytes for o in bf16.ops] == [o.recv_bytes // 2 for o in f32.ops]
    assert bf16.meta["temp_bytes"] == f32.meta["temp_bytes"] // 2
    ours = compiled_schedule("cpu-host:8", "ours", *ISSUE, plan=synth.synthesize(*ISSUE), dtype="float32")
    assert ours.meta["compiler"] == "xla-cpu" and ours.meta["temp_bytes"] < f32.meta["temp_bytes"]


@needs_libtpu
def test_tpu_compiles_all_four_strategies_with_libtpu():
    plan = synth.synthesize(*ISSUE, itemsize=2)
    got = {s: compiled_schedule("tpu-v4:2x2x2", s, *ISSUE, plan=plan if s == "ours" else None, dtype="bfloat16")
           for s in ("ours", "xla-shardy", "xla-gspmd", "shardy-r2c")}
    for s, sched in got.items():
        assert sched.meta["compiler"] == "libtpu" and sched.meta["target"] == "tpu-v4:2x2x2", s
        assert isinstance(sched.meta["temp_bytes"], int) and sched.meta["dtype_handling"] == "compiled as bfloat16"
    comm = {s: [o.kind for o in g.ops if not o.is_local] for s, g in got.items()}
    assert comm["ours"] == ["all_to_all"]  # one all-to-all over (x, y), moves sharing dim 1
    assert comm["shardy-r2c"] == ["all_to_all", "all_to_all"]
    assert got["xla-shardy"].meta["full_remat"] and comm["xla-shardy"] == ["all_gather"]
    assert got["ours"].meta["temp_bytes"] <= got["xla-shardy"].meta["temp_bytes"]


def _run(*args, **kw):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          **kw)


@needs_libtpu
def test_compile_only_is_not_refused_for_running_memory():
    """A 32 GiB bfloat16 array on 8 TPU v4 chips: only compiled, so never refused for the
    memory running it would need (the executor's running path would need far more)."""
    case = ["--mesh", "x=4,y=2", "--src", "[131072{x}, 131072{y}]", "--dst", "[131072{y}, 131072{x}]",
            "--dtype", "bfloat16"]
    r = _run("executor.compiled", "--machine", "tpu-v4:2x2x2", *case, "--strategies", "xla-shardy,ours",
             env={"REDIST_MEMORY_BUDGET_BYTES": str(1 << 30), **_env()})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["compiler"] == "libtpu" and d["collectives_only"] is None
    for s in ("xla-shardy", "ours"):
        assert d["strategies"][s]["error"] is None
        assert d["strategies"][s]["schedule"]["meta"]["compiler"] == "libtpu"
    # running it is still refused, with one line
    r = _run("executor", "compare", *case, env={"REDIST_MEMORY_BUDGET_BYTES": str(1 << 30), **_env()})
    assert r.returncode == 2 and "memory" in r.stderr and "Traceback" not in r.stderr


def _env():
    import os

    return {k: v for k, v in os.environ.items() if k != "REDIST_MEMORY_BUDGET_BYTES"}


def test_gpu_rows_are_collectives_only_without_the_plugin_and_say_so():
    if tpu.gpu_plugin_status() is None:
        pytest.skip("the CUDA plugin is installed here: GPU rows are compiled (see the next test)")
    r = _run("executor.compiled", "--machine", "dgx-h100:1", "--mesh", ISSUE[0], "--src", ISSUE[1], "--dst", ISSUE[2])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert "collectives" in d["collectives_only"] and "jax-cuda12-plugin" in d["collectives_only"]
    assert d["strategies"]["ours"]["schedule"]["meta"]["compiler"] == "none"
    assert d["strategies"]["xla-shardy"]["schedule"]["meta"]["compiler"] == "xla-cpu"


@pytest.mark.skipif(tpu.gpu_plugin_status() is not None, reason="needs jax-cuda12-plugin (see docs/executor.md)")
def test_gpu_compiles_both_sides_with_xla_gpu():
    plan = synth.synthesize(*ISSUE)
    ours = compiled_schedule("dgx-h100:1", "ours", *ISSUE, plan=plan)
    xla = compiled_schedule("dgx-h100:1", "xla-shardy", *ISSUE)
    assert ours.meta["compiler"] == xla.meta["compiler"] == "xla-gpu"
    assert ours.meta["temp_bytes"] < xla.meta["temp_bytes"] and xla.meta["full_remat"]


# -- the lowering merges a reduce-scatter and the all-to-all that moves its axes ------------
RS_A2A = [("[50, 16]{U:data}", "[50{data}, 16]", "all_reduce"),     # uneven dim 0: all-reduce in place, own rows
          ("[64, 16]{U:data}", "[64{data}, 16]", "reduce_scatter")]  # even: one reduce-scatter along dim 0


def _rs_then_a2a(src, dst):
    from synth.collectives import AllToAll, ReduceScatter

    m = synth.Mesh.parse("data=8")
    return synth.Plan.build(m, synth.parse_type(src), synth.parse_type(dst),
                            (ReduceScatter(1, "data"), AllToAll(1, 0, "data")))


@pytest.mark.parametrize("src,dst,kind", RS_A2A)
def test_reduce_scatter_then_all_to_all_is_lowered_as_one_collective(src, dst, kind):
    from executor.lowering import plan_steps
    from executor.run import run_plan

    plan = _rs_then_a2a(src, dst)
    _check(plan)  # the plan itself moves exactly the target (synth.interp)
    steps = plan_steps(plan)
    assert [str(s.op) for s in steps] == ["ReduceScatter(0, data)"]
    assert steps[0].t_in == plan.work_types[0] and steps[0].t_out == plan.work_types[-1]
    assert "steps 1-2" in steps[0].comment and "lowered as one" in steps[0].comment
    r = run_plan(plan)  # every device's block checked element by element (raises otherwise)
    assert r.correct and r.collectives == [kind]


@pytest.mark.parametrize("src,dst,kind", RS_A2A)
def test_two_reduce_scatters_of_one_dim_then_the_all_to_all_are_one_collective(src, dst, kind):
    """vocab-50257-embedding-grad-8 planned for tpu-v5p:2x2x2 scatters over the two
    factors of ``data`` one after the other: the three steps are one reduce-scatter."""
    from executor.lowering import plan_steps
    from executor.run import run_plan
    from synth.collectives import AllToAll, ReduceScatter

    m = synth.Mesh.parse("data=8")
    plan = synth.Plan.build(m, synth.parse_type(src), synth.parse_type(dst),
                            (ReduceScatter(1, "data:(1)4"), ReduceScatter(1, "data:(4)2"),
                             AllToAll(1, 0, ("data:(1)4", "data:(4)2"))))
    _check(plan)
    steps = plan_steps(plan)
    assert [s.op.kind for s in steps] == ["reduce_scatter"] and steps[0].op.dim == 0
    assert len(steps[0].fused) == 3 and "steps 1-3" in steps[0].comment
    r = run_plan(plan)  # every device's block checked element by element (raises otherwise)
    assert r.correct and r.collectives == [kind]


@pytest.mark.parametrize("mesh,src,dst,steps", [
    # two dims: nothing to merge
    ("x=2,y=4", "[16, 16]{U:x,y}", "[16{x}, 16{y}]", (("reduce_scatter", 0, "x"), ("reduce_scatter", 1, "y"))),
    # one dim, no all-to-all after: kept (libtpu compiles fsdp-grad-reduce-scatter-8's two
    # with 0 B of temp, one over all 8 devices with 224 MiB)
    ("fsdp=8", "[64, 16]{U:fsdp}", "[64{fsdp}, 16]",
     (("reduce_scatter", 0, "fsdp:(1)4"), ("reduce_scatter", 0, "fsdp:(4)2")))])
def test_reduce_scatters_without_their_all_to_all_stay_apart(mesh, src, dst, steps):
    from executor.lowering import plan_steps
    from executor.run import run_plan
    from synth.collectives import ReduceScatter

    plan = synth.Plan.build(synth.Mesh.parse(mesh), synth.parse_type(src), synth.parse_type(dst),
                            tuple(ReduceScatter(d, a) for _, d, a in steps))
    _check(plan)
    assert [s.op.kind for s in plan_steps(plan)] == [k for k, _, _ in steps]
    r = run_plan(plan)
    assert r.correct and r.collectives == ["reduce_scatter", "reduce_scatter"]


def test_only_matching_axes_are_merged():
    """An all-to-all of other axes after a reduce-scatter stays a step of its own."""
    from executor.lowering import plan_steps
    from executor.run import run_plan
    from synth.collectives import AllToAll, ReduceScatter

    m = synth.Mesh.parse("x=2,y=4")
    plan = synth.Plan.build(m, synth.parse_type("[16, 16{y}]{U:x}"), synth.parse_type("[16{x,y}, 16]"),
                            (ReduceScatter(0, "x"), AllToAll(1, 0, "y")))
    _check(plan)
    assert [s.op.kind for s in plan_steps(plan)] == ["reduce_scatter", "all_to_all"]
    assert run_plan(plan).correct


def test_merged_steps_in_generated_source(tmp_path):
    from executor.codegen import generate_source

    src = generate_source(_rs_then_a2a(*RS_A2A[0][:2]))
    assert "lowered as one ReduceScatter(0, data)" in src and "all_to_all" not in src
    compile(src, "gen.py", "exec")


@pytest.mark.skipif(tpu.gpu_plugin_status() is not None, reason="needs jax-cuda12-plugin (see docs/executor.md)")
def test_merged_reduce_scatter_needs_no_more_temp_than_xla_on_gpu():
    """vocab-50257-embedding-grad-8's plan, compiled by XLA's GPU compiler: as two
    collectives ours needed 220.9 MiB of temp against XLA's 196.3 MiB (a transposed copy
    of the whole partial sum); merged, no more than XLA's."""
    plan = _rs_then_a2a("[50257, 1024]{U:data}", "[50257{data}, 1024]")
    case = ("data=8", str(plan.src), str(plan.dst))
    ours = compiled_schedule("dgx-h100:1", "ours", *case, plan=plan)
    xla = compiled_schedule("dgx-h100:1", "xla-shardy", *case)
    assert ours.meta["compiler"] == xla.meta["compiler"] == "xla-gpu"
    assert ours.meta["temp_bytes"] <= xla.meta["temp_bytes"]


# -- the lowering sends only what is kept: gather-then-slice and all-to-all-then-slice ----
def _built(mesh, src, dst, steps):
    plan = synth.Plan.build(synth.Mesh.parse(mesh), synth.parse_type(src), synth.parse_type(dst), steps)
    _check(plan)  # the plan itself moves exactly the target (synth.interp)
    return plan


def _sliced_plans():
    from synth.collectives import AllGather, AllToAll, DynSlice

    return {
        # random-0-013's plan on dgx-h100 (auto), at 1/16 of its size: gather, slice by the
        # gathered axis (an all-to-all), then a slice of its split dim (sent only)
        "random-0-013": _built("x=2,y=2,z=2", "[32, 16, 32{z}]", "[32{y,z,x}, 16, 32]",
                               (DynSlice(0, "y"), AllGather(2, "z"), DynSlice(0, "z"), DynSlice(0, "x"))),
        "a2a-slice": _built("x=2,y=4", "[16{x}, 32, 8]", "[16, 32{x,y}, 8]", (AllToAll(0, 1, "x"), DynSlice(1, "y"))),
        "a2a-slice-2-axes": _built("x=2,y=2,z=2", "[16{x}, 32, 8]", "[16, 32{x,y,z}, 8]",
                                   (AllToAll(0, 1, "x"), DynSlice(1, ("y", "z")))),
    }


def test_gather_then_slice_of_its_axes_and_a_trailing_slice_are_one_smaller_all_to_all():
    from executor.lowering import plan_steps
    from executor.run import run_plan

    plan = _sliced_plans()["random-0-013"]
    steps = plan_steps(plan)
    assert [str(s.op) for s in steps] == ["DynSlice(0, y)", "AllToAll(2->0, z)"]
    assert str(steps[1].keep) == "DynSlice(0, x)" and steps[1].t_out == plan.work_types[-1]
    assert "steps 2-4" in steps[1].comment and "sending only the DynSlice(0, x) part" in steps[1].comment
    r = run_plan(plan)  # every device's block checked element by element (raises otherwise)
    assert r.correct and r.collectives == ["all_to_all"]
    a2a = next(op for op in r.schedule.ops if op.kind == "all_to_all")  # read from the compiled HLO
    # the 16x16x16 f32 block after the y slice is 16 KiB; the exchange sends 8 KiB (the half
    # the x slice keeps) and delivers exactly the 8 KiB result, where gathering made 32 KiB
    assert a2a.in_bytes == a2a.out_bytes == plan.work_types[-1].shard_elems(plan.work_mesh) * 4 == 8192


@pytest.mark.parametrize("name", ["a2a-slice", "a2a-slice-2-axes"])
def test_slice_of_the_split_dim_is_sent_only(name):
    from executor.lowering import plan_steps
    from executor.run import run_plan

    plan = _sliced_plans()[name]
    steps = plan_steps(plan)
    assert len(steps) == 1 and steps[0].op.kind == "all_to_all" and steps[0].keep is not None
    r = run_plan(plan)
    assert r.correct and r.collectives == ["all_to_all"]
    a2a = next(op for op in r.schedule.ops if op.kind == "all_to_all")
    out = plan.work_types[-1].shard_elems(plan.work_mesh) * 4
    k = int(np.prod([plan.work_mesh.axis_size(a) for a in np.atleast_1d(steps[0].keep.axis)]))  # the slice's group
    # the exchange sends 1/k of the block (the part the slice keeps) and delivers exactly the kept block
    assert a2a.in_bytes * k == plan.work_types[0].shard_elems(plan.work_mesh) * 4
    assert a2a.in_bytes == a2a.out_bytes == out


def test_slices_that_cannot_be_sent_first_stay_steps_of_their_own():
    """A slice of the concatenated dim keeps pieces from some peers only (no equal split),
    and a slice of a padded dim is not of whole pieces: both stay after the exchange."""
    from executor.lowering import plan_steps
    from executor.run import run_plan
    from synth.collectives import AllGather, AllToAll, DynSlice

    concat = _built("x=2,y=4", "[16{x}, 32, 8]", "[16{y}, 32{x}, 8]", (AllToAll(0, 1, "x"), DynSlice(0, "y")))
    padded = _built("x=4,y=2", "[10{x}, 32, 8]", "[10, 32{x,y}, 8]", (AllToAll(0, 1, "x"), DynSlice(1, "y")))
    other = _built("x=2,y=4", "[16{x}, 32, 8]", "[16, 32{y}, 8]", (AllGather(0, "x"), DynSlice(1, "y")))
    for plan in (concat, padded, other):
        assert [s.keep for s in plan_steps(plan)] == [None, None]
        assert run_plan(plan).correct


def test_sent_only_steps_in_generated_source_run_and_check_themselves(tmp_path):
    from executor.codegen import generate_source

    src = generate_source(_sliced_plans()["random-0-013"])
    assert "send each peer only the part it keeps" in src and "all_gather" not in src
    p = tmp_path / "gen.py"
    p.write_text(src)
    env = dict(__import__("os").environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "ok", r.stderr[-2000:]


@pytest.mark.skipif(tpu.gpu_plugin_status() is not None, reason="needs jax-cuda12-plugin (see docs/executor.md)")
def test_random_0_013_needs_no_more_temp_than_xla_on_gpu():
    """random-0-013's auto plan on dgx-h100: gathered and sliced it needed 3.0 MiB of temp
    against XLA's 1.0 MiB; sent only what is kept, 0.5 MiB."""
    from synth.collectives import AllGather, DynSlice

    case = ("x=2,y=2,z=2", "[128, 64, 128{z}]", "[128{y,z,x}, 64, 128]")
    plan = _built(*case, (DynSlice(0, "y"), AllGather(2, "z"), DynSlice(0, "z"), DynSlice(0, "x")))
    ours = compiled_schedule("dgx-h100:1", "ours", *case, plan=plan)
    xla = compiled_schedule("dgx-h100:1", "xla-shardy", *case)
    assert ours.meta["compiler"] == xla.meta["compiler"] == "xla-gpu"
    assert ours.meta["temp_bytes"] <= xla.meta["temp_bytes"]
