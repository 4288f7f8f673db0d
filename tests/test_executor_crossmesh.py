"""Cross-mesh plans run for real: the 20 seeded cases on 8 CPU devices in one process
(against jax.device_put) and in two processes (jax.distributed over gloo, a trainer
process and an inference process), every output checked element by element."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from synth import Mesh

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def one_process():
    from executor.crossmesh import run_cases

    return run_cases(20, seed=0, repeats=1)


def test_twenty_cases_bit_exact_in_one_process(one_process):
    res = one_process
    assert len(res["cases"]) == 20 and res["processes"] == 1
    for r in res["cases"]:
        assert r["correct"], r
        assert r["checked_shards"] == len(Mesh.parse(r["dst_mesh"]).device_ids), r
    assert {r["kind"] for r in res["cases"]} == {"disjoint", "overlapping", "reshaped"}


def test_measured_memory_within_the_plans_own_accounting(one_process):
    # the buffers the executor really holds per device never exceed what the plan states it
    # holds (XLA's temp bytes inside the programs are measured on top and reported apart)
    for r in one_process["cases"]:
        assert r["buffer_bytes_max_device"] <= r["model_live_bytes_max_device"], r["name"]
        assert r["buffer_bytes_max_device"] <= r["peak_bytes_max_device"], r["name"]


def test_inplace_transfer_never_above_device_put(one_process):
    # one process: the inplace transfer (pieces written straight into each receiver's block)
    # is compared with jax.device_put, both counted as live device buffers per device; the
    # portable p2p transfer of the same plan is checked element by element too
    compared = 0
    for r in one_process["cases"]:
        assert r["transfer"] == "inplace" and r["p2p_correct"], r["name"]
        assert r["host_staging_bytes"] == 0, r["name"]  # device_put adopted every assembled block
        assert r["p2p_buffer_bytes_max_device"] <= r["p2p_model_live_bytes_max_device"], r["name"]
        if r.get("device_put_peak_bytes_max_device") is None:
            assert r["device_put_correct"] is None  # device_put refuses uneven dims
            continue
        compared += 1
        # with pending sums in the source, device_put is handed the summed array (it cannot
        # reduce); ours adds the parts on the way and still holds no more
        assert r["peak_bytes_max_device"] <= r["device_put_peak_bytes_max_device"], r
    assert compared == 17 and one_process["peak_le_device_put"] == "17 of 17"


def test_device_put_baseline_checked(one_process):
    for r in one_process["cases"]:
        if r.get("device_put_correct") is None:  # jax.device_put refuses uneven shardings
            assert "refuses" in r["device_put_note"]
            assert any(s in r["src"] for s in ("21", "30", "35"))
        else:
            assert r["device_put_correct"], r["name"]


def test_both_transfer_lowerings_agree_in_one_process():
    from executor.crossmesh import run_crossmesh
    from synth.crossmesh import plan_crossmesh

    p = plan_crossmesh("x=2,y=2@0-3", "[48, 30{y}]{U:x}", "p=2,q=3@2-7", "[48{q}, 30]", objective="memory")
    x = (np.arange(48 * 30, dtype=np.float32).reshape(48, 30) % 17) - 8
    for kind in ("inplace", "p2p", "ppermute"):
        r = run_crossmesh(p, x, transfer=kind, measure=False, baseline=False)
        assert r["correct"] and r["checked_shards"] == 6, (kind, r)


def _env():
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    for k in ("REDIST_COORDINATOR", "REDIST_PROCESS_ID", "REDIST_NUM_PROCESSES", "REDIST_LOCAL_DEVICES"):
        env.pop(k, None)
    return env


def test_twenty_cases_bit_exact_across_two_processes():
    r = subprocess.run([sys.executable, "-m", "executor.crossmesh", "cases", "--processes", "2", "--repeats", "1",
                        "--json"], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["processes"] == 2 and res["all_correct"]
    for c in res["cases"]:
        assert c["transfer"] == "ppermute" and c["correct"]
        assert c["checked_shards"] == len(Mesh.parse(c["dst_mesh"]).device_ids), c


def test_compare_cli_dst_mesh_errors():
    r = subprocess.run([sys.executable, "-m", "executor", "compare", "--mesh", "a=4@0-3", "--src", "[8{a}]",
                        "--dst-mesh", "b=2@8-9", "--dst", "[8{b}]"], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "names device 9, but the machine has 8" in lines[0], r.stderr


def test_chunked_transfer_runs_in_every_lowering():
    # pieces cut under a staging cap (a third of the largest piece) move as chunks; the
    # output is checked element by element on every lowering, and p2p's staged bytes shrink
    from executor.crossmesh import run_crossmesh
    from synth.crossmesh import plan_crossmesh

    args = ("x=2,y=2@0-3", "[48, 48{x}, 24{y}]", "p=2,q=2@4-7", "[48, 48{p}, 24]")
    whole = plan_crossmesh(*args, objective="memory")
    cap = whole.transfer.largest_piece_bytes // 3
    p = plan_crossmesh(*args, objective="memory", staging_cap_bytes=cap)
    assert len(p.transfer.remote) > len(whole.transfer.remote) and p.transfer.largest_piece_bytes <= cap
    got = {}
    for kind in ("inplace", "p2p", "ppermute"):
        got[kind] = r = run_crossmesh(p, transfer=kind, measure=kind == "p2p", baseline=False, repeats=1)
        assert r["correct"] and r["checked_shards"] == 4, (kind, r)
    w = run_crossmesh(whole, transfer="p2p", baseline=False, repeats=1)
    r = got["p2p"]
    assert r["buffer_bytes_max_device"] <= r["model_live_bytes_max_device"]
    assert r["buffer_bytes_max_device"] < w["buffer_bytes_max_device"]


def test_summing_transfer_runs_in_every_lowering():
    # pending sums in the source kept through the transfer: each receiver adds one piece per
    # partial value into its block (no all-reduce on A), checked element by element
    from executor.crossmesh import run_crossmesh
    from synth.crossmesh import plan_crossmesh

    p = plan_crossmesh("x=2,y=4", "[24, 48{x}]{U:y}", "p=8@0,2,4,6,1,3,5,7", "[24{p}, 48]",
                       objective="memory-inplace")
    assert p.transfer.sums and not p.pre.steps
    x = (np.arange(24 * 48, dtype=np.float32).reshape(24, 48) % 13) - 6
    for kind in ("inplace", "p2p", "ppermute"):
        r = run_crossmesh(p, x, transfer=kind, measure=False, baseline=False)
        assert r["correct"] and r["checked_shards"] == 8, (kind, r)
