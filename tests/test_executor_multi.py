"""The multi-dim collectives and ShardedToUnreduced lowered to JAX on 8 CPU devices:
each plan runs as a jitted shard_map, every output shard is checked element by element
(strict), and XLA's compiled HLO holds exactly one collective per fused step; the
generated module of each plan passes its own shard-by-shard self-check."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

jax = pytest.importorskip("jax")

from executor.codegen import generate_source  # noqa: E402
from executor.run import run_plan  # noqa: E402
from synth import (  # noqa: E402
    AllReduce,
    ArrayType,
    Mesh,
    MultiAllGather,
    MultiAllToAll,
    MultiDynSlice,
    Plan,
    ShardedToUnreduced,
)


def _plan(mesh, src, steps, itemsize=4):
    mesh, t = Mesh.parse(mesh), ArrayType.parse(src)
    for c in steps:
        t = c.apply(t, mesh)
    return Plan.build(mesh, src, t, steps, itemsize=itemsize)


# (mesh, src, steps, HLO collectives expected)
CASES = [
    ("x=2,y=4", "[16{x}, 8{y}]", [MultiAllGather(((0, "x"), (1, "y")))], ["all_gather"]),
    ("x=2,y=4", "[16, 8, 3]", [MultiDynSlice(((0, "y"), (1, "x")))], []),
    ("a=2,b=2,c=2", "[8{a,b}, 8{c}, 4, 6]", [MultiAllToAll(((0, 2, "b"), (1, 3, "c")))], ["all_to_all"]),
    ("a=2,b=4", "[8{b}, 6, 4{a}, 4]", [MultiAllToAll(((0, 1, "b"), (2, 3, "a")))], ["all_to_all"]),
    ("x=8", "[5{x:(1)2}, 13{x:(2)4}]", [MultiAllGather(((0, "x:(1)2"), (1, "x:(2)4")))], ["all_gather"]),
    ("x=2,y=4", "[10{x}, 6, 9{y}, 2]", [MultiAllToAll(((0, 1, "x"), (2, 3, "y")))], ["all_to_all"]),
    ("x=2,y=2,z=2", "[6{x}, 4{y}]{U:z}", [MultiAllGather(((0, "x"), (1, "y")))], ["all_gather"]),
    # moves sharing a dim (jax-21562: two sources into one destination; its reverse order;
    # uneven dims; one source split into two destinations; three moves mixing both)
    ("x=4,y=2", "[16{y}, 16, 16{x}]", [MultiAllToAll(((2, 1, "x"), (0, 1, "y")))], ["all_to_all"]),
    ("x=4,y=2", "[16{y}, 16, 16{x}]", [MultiAllToAll(((0, 1, "y"), (2, 1, "x")))], ["all_to_all"]),
    ("x=2,y=3", "[7{y}, 12, 5{x}]", [MultiAllToAll(((2, 1, "x"), (0, 1, "y")))], ["all_to_all"]),
    ("a=2,b=4", "[8{a,b}, 4, 8]", [MultiAllToAll(((0, 1, "b"), (0, 2, "a")))], ["all_to_all"]),
    ("a=2,b=2,c=2", "[8{a,b}, 6{c}, 12, 5]", [MultiAllToAll(((0, 2, "b"), (0, 3, "a"), (1, 2, "c")))],
     ["all_to_all"]),
    ("x=4,y=2", "[16{x}, 8]", [ShardedToUnreduced(0, "x")], []),
    ("x=8", "[50{x}, 3]", [ShardedToUnreduced(0, "x"), AllReduce("x")], ["all_reduce"]),
    ("x=2,y=4", "[16{x,y}, 5]", [ShardedToUnreduced(0, "y")], []),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_multi_steps_run_exactly_in_one_hlo_collective(case):
    mesh, src, steps, hlo = CASES[case]
    plan = _plan(mesh, src, steps)
    r = run_plan(plan, seed=case)  # strict: raises on any wrong element of any shard
    assert r.correct and r.error is None
    assert r.collectives == hlo, (r.collectives, r.hlo_text[-3000:])


def test_generated_modules_of_multi_plans_check_themselves(tmp_path):
    paths = []
    for i, (mesh, src, steps, _) in enumerate(CASES):
        text = generate_source(_plan(mesh, src, steps))
        path = tmp_path / f"gen{i}.py"
        path.write_text(text)
        paths.append(str(path))
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import importlib.util, json, sys\n"
        "done = []\n"
        "for i, p in enumerate(sys.argv[1:]):\n"
        "    spec = importlib.util.spec_from_file_location(f'gen{i}', p)\n"
        "    mod = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(mod)\n"
        "    mod.self_check(mod.make_mesh())  # raises on any wrong target block\n"
        "    done.append(p)\n"
        "print(json.dumps(done))\n")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, str(driver), *paths], capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == paths


SHARDY_FUSED = ["all_slice_multiple_axes", "replace_major_most_axis_then_all_gather_two_dims",
                "reshard_with_propagation_barrier"]


@pytest.mark.parametrize("test", SHARDY_FUSED)
def test_shardy_fused_sequences_run_on_jax(test):
    """Shardy's own sequences with fused multi-dim ops (from synth/peers/shardy.json) run
    exactly on JAX, with one HLO collective per communicating step, as Shardy emits them."""
    from synth.peers import load_suite, peer_plan

    case = next(c for c in load_suite("shardy")["cases"] if c["test"] == test)
    plan = peer_plan(case)
    r = run_plan(plan, seed=1)
    assert r.correct and r.error is None
    assert r.collectives == [op.kind for op in plan.to_schedule().ops if not op.is_local]
