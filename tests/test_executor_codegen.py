"""The exported JAX module (executor.codegen): its self-check uses the chosen dtype,
makes the input shard by shard on the devices, checks every target shard, compiles
once, and stops with one clear line when JAX has too few devices.

Generated modules run in a subprocess on 8 CPU devices. Besides the module's own
self-check, a driver written here checks each output shard against the true array at
the shard's index (for targets without pending sums), and that the input callback only
ever made one device's block.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from executor.codegen import generate_source
from synth import synthesize
from synth.errors import RedistributionError

# (mesh, src, dst, dtype)
CASES = [
    ("x=4,y=2", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", "bfloat16"),   # all-to-all, 2-byte float
    ("x=4,y=2", "[8{y}, 16, 8{x}]", "[8{x}, 16, 8]", "int8"),         # 1-byte integers
    ("x=8", "[50{x}, 16]", "[50, 16]", "float16"),                     # uneven all-gather (padding)
    ("dp=2,tp=4", "[8{dp}, 64, 32]{U:tp}", "[8{dp}, 64{tp}, 32]", "bfloat16"),  # pending source
    ("x=8", "[50, 16]{U:x}", "[50{x}, 16]", "int32"),                  # uneven reduce-scatter
    ("x=4,y=2", "[64{x}, 32]{U:y}", "[64{x:(2)2}, 32{y}]{U:x:(1)2}", "float32"),  # pending target, sub-axes
]

DRIVER = r'''
import importlib.util, json, sys
import numpy as np
import jax
from jax.sharding import NamedSharding

out = []
for i, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"gen{i}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mesh = mod.make_mesh()
    made = []
    orig = mod._make_input
    def record(index, orig=orig):
        block = orig(index)
        made.append(list(block.shape))
        return block
    mod._make_input = record
    mod.self_check(mesh)
    mod._make_input = orig  # count the self-check's calls only
    shard_shape = NamedSharding(mesh, mod.SRC_SPEC).shard_shape(mod.SRC_SHAPE)
    checked = 0
    if True:
        if len(mod.DST_SHAPE) == len(mod.GLOBAL_SHAPE):   # no stacked parts: compare shards
            full = [(0, n) for n in mod.GLOBAL_SHAPE]
            true = np.asarray(mod._values(full))          # the array itself (small here)
            padded = np.zeros(mod.DST_SHAPE, dtype=true.dtype)
            padded[tuple(slice(0, n) for n in mod.GLOBAL_SHAPE)] = true
            x = jax.make_array_from_callback(mod.SRC_SHAPE, NamedSharding(mesh, mod.SRC_SPEC), mod._make_input)
            y = mod.redistribute(x, mesh)
            target = NamedSharding(mesh, mod.DST_SPEC)
            for shard in y.addressable_shards:
                assert shard.index == target.devices_indices_map(mod.DST_SHAPE)[shard.device]
                got = np.asarray(shard.data)
                want = padded[shard.index]
                inside = tuple(slice(0, max(0, min(s.indices(n)[1], g) - s.indices(n)[0]))
                               for s, n, g in zip(shard.index, mod.DST_SHAPE, mod.GLOBAL_SHAPE))
                assert np.array_equal(got[inside], want[inside]), (path, shard.device)
                checked += 1
    out.append({"dtype": str(mod.DTYPE), "made": made, "shard_shape": list(shard_shape),
                "devices": mesh.size, "checked": checked,
                "compiles": mod._compiled.cache_info().misses})
print(json.dumps(out))
'''


def _env(n):
    return dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}", JAX_PLATFORMS="cpu")


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _plans():
    from ui.scenario import DTYPES

    return [(synthesize(m, s, d, planner="normal", itemsize=DTYPES[dt]), dt) for m, s, d, dt in CASES]


def test_generated_modules_check_every_shard_in_their_dtype(tmp_path):
    plans = _plans()
    paths = []
    for i, (plan, dtype) in enumerate(plans):
        src = generate_source(plan, dtype=dtype)
        assert f"DTYPE = jnp.dtype({dtype!r})" in src
        paths.append(_write(tmp_path, f"gen{i}.py", src))
    driver = _write(tmp_path, "driver.py", DRIVER)
    r = subprocess.run([sys.executable, driver, *paths], capture_output=True, text=True, env=_env(8), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    for (plan, dtype), got in zip(plans, res):
        assert got["dtype"] == dtype
        assert got["compiles"] == 1                       # two calls, one jit
        # Every input block was made alone, at one device's shard shape; never the whole array.
        assert got["made"] and all(m == got["shard_shape"] for m in got["made"])
        assert len(got["made"]) <= got["devices"]
        if not plan.dst.unreduced:
            assert got["checked"] == got["devices"]       # the driver compared every shard
    # Each script also runs as pasted and prints ok.
    for p in paths[:2]:
        r = subprocess.run([sys.executable, p], capture_output=True, text=True, env=_env(8), timeout=300)
        assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "ok", r.stderr[-2000:]


def test_too_few_devices_is_one_clear_line(tmp_path):
    plan = synthesize("x=4,y=2", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", planner="normal", itemsize=2)
    path = _write(tmp_path, "gen.py", generate_source(plan, dtype="bfloat16"))
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, env=_env(4), timeout=300)
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == ["error: this plan needs 8 devices, JAX sees 4 (cpu); on CPU start Python with "
                     "XLA_FLAGS=--xla_force_host_platform_device_count=8"], r.stderr[-2000:]
    assert r.stdout == ""


def test_self_check_catches_a_wrong_plan(tmp_path):
    """A body that corrupts one element makes the self-check fail (it is not a no-op)."""
    plan = synthesize("x=4,y=2", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", planner="normal", itemsize=2)
    src = generate_source(plan, dtype="bfloat16")
    bad = src.replace("    return block\n", "    block = block.at[(0,) * block.ndim].add(1)\n    return block\n", 1)
    assert bad != src
    r = subprocess.run([sys.executable, _write(tmp_path, "bad.py", bad)], capture_output=True, text=True,
                       env=_env(8), timeout=300)
    assert r.returncode != 0 and "wrong values" in r.stderr, r.stderr[-2000:]


def test_dtype_must_match_the_plan_itemsize():
    plan = synthesize("x=4,y=2", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", planner="normal", itemsize=2)
    with pytest.raises(RedistributionError, match="disagrees"):
        generate_source(plan, dtype="float32")
    assert "DTYPE = jnp.dtype('bfloat16')" in generate_source(plan)   # 2 bytes -> bfloat16 by default
