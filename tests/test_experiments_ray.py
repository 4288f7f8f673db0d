"""The Ray engine: a real local Ray (2 CPUs) runs the smoke config, resumes, and gives
the same result columns as the local engine; a bad --address fails fast and cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from experiments.config import load_config

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "experiments" / "configs" / "smoke.yaml"
#: columns that are measured wall-clock times, so differ from run to run
TIMED = {"wall_s", "schedule_s", "measured_time_s"}

pytest.importorskip("ray")


def _cli(*args, timeout=900):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "experiments", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _lines(d: Path) -> list[dict]:
    return [json.loads(x) for x in (d / "rows.jsonl").read_text().splitlines() if x.strip()]


def test_ray_run_resumes_and_matches_the_local_engine(tmp_path):
    local, ray = tmp_path / "local", tmp_path / "ray"
    r = _cli("run", SMOKE, "--out", local, "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    s_local = json.loads(r.stdout)
    # Ray, in two goes: 8 units, then the rest (a resume)
    r = _cli("run", SMOKE, "--out", ray, "--json", "--no-progress", "--engine", "ray", "--limit", "8")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    assert first["engine"] == "ray" and first["units_run"] == 8
    r = _cli("run", SMOKE, "--out", ray, "--json", "--no-progress", "--engine", "ray")
    assert r.returncode == 0, r.stderr
    s_ray = json.loads(r.stdout)
    assert s_ray["units_skipped"] == 8 and s_ray["units_run"] == s_local["units_run"] - 8
    print(f"\nsmoke wall time: local {s_local['wall_s']:.1f} s, ray {first['wall_s'] + s_ray['wall_s']:.1f} s "
          f"(two runs: {first['wall_s']:.1f} + {s_ray['wall_s']:.1f} s, each starting its own Ray)")

    expected = {i for u in load_config(SMOKE).units() for i in u.ids}
    ids = [x["id"] for x in _lines(ray)]
    assert len(ids) == len(set(ids)) and set(ids) == expected
    a = pd.read_parquet(local / "results.parquet").set_index("id").sort_index()
    b = pd.read_parquet(ray / "results.parquet").set_index("id").sort_index()
    assert list(a.columns) == list(b.columns) and list(a.index) == list(b.index)
    assert (a["status"] == "ok").all() and (b["status"] == "ok").all()
    cols = [c for c in a.columns if c not in TIMED]
    pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=True)
    # the measured columns are there on both sides (the smoke config measures its small cases)
    assert a["measured_time_s"].notna().sum() == b["measured_time_s"].notna().sum() > 0


def test_unreachable_address_is_one_line_exit_2_and_rows_stay(tmp_path):
    out = tmp_path / "o"
    r = _cli("run", SMOKE, "--out", out, "--json", "--no-progress", "--limit", "2")
    assert r.returncode == 0, r.stderr
    before = (out / "rows.jsonl").read_bytes()
    r = _cli("run", SMOKE, "--out", out, "--no-progress", "--engine", "ray", "--address", "127.0.0.1:9",
             timeout=120)
    assert r.returncode == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "--address 127.0.0.1:9" in lines[0] and "nothing answers" in lines[0], r.stderr
    assert (out / "rows.jsonl").read_bytes() == before
    r = _cli("run", SMOKE, "--out", out, "--engine", "ray", "--address", "no-port-here")
    assert r.returncode == 2 and "HOST:PORT" in r.stderr and "Traceback" not in r.stderr
    r = _cli("run", SMOKE, "--out", out, "--address", "127.0.0.1:6379")
    assert r.returncode == 2 and "--engine ray" in r.stderr


FAST = """
name: fast
suites:
  - random: {count: 6, seed: 5, max_devices: 16}
machines: [tpu-v4]
planners: [easy, normal]
runner: {workers: 2, timeout_s: 120, simulator: analytic}
"""


def test_joins_an_existing_cluster_with_token_auth(tmp_path):
    """`ray start --head` (token authentication on, as `ray start` does by default in
    Ray 2.60), then --address: without the token mode the run stops with one line that
    says what to set; with it, the units run on the cluster (the project's packages
    travel as py_modules)."""
    import signal
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "fast.yaml"
    cfg.write_text(FAST)
    env = dict(os.environ, RAY_AUTH_MODE="token")
    env.pop("RAY_ADDRESS", None)
    ray_bin = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen([ray_bin, "start", "--head", "--port", str(port), "--num-cpus", "2",
                             "--include-dashboard=false", "--disable-usage-stats", "--block"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not come up in 120 s")
        bare = dict(os.environ)
        bare.pop("RAY_AUTH_MODE", None)
        bare.pop("XLA_FLAGS", None)
        r = subprocess.run([sys.executable, "-m", "experiments", "run", str(cfg), "--out", str(tmp_path / "a"),
                            "--no-progress", "--engine", "ray", "--address", f"127.0.0.1:{port}"],
                           cwd=ROOT, env=bare, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and "RAY_AUTH_MODE=token" in lines[0], r.stderr[-2000:]
        ok = dict(bare, RAY_AUTH_MODE="token")
        r = subprocess.run([sys.executable, "-m", "experiments", "run", str(cfg), "--out", str(tmp_path / "b"),
                            "--no-progress", "--json", "--engine", "ray", "--address", f"127.0.0.1:{port}"],
                           cwd=ROOT, env=ok, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        s = json.loads(r.stdout)
        expected = {i for u in load_config(cfg).units() for i in u.ids}
        assert s["engine"] == "ray" and s["rows_ok"] == len(expected)
        assert {x["id"] for x in _lines(tmp_path / "b")} == expected
    finally:
        try:
            os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops what it started
            head.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_ray_cancels_units_past_the_timeout(tmp_path):
    """On Ray, a unit past runner.timeout_s is cancelled and recorded as timeout rows,
    as with the local engine, and the run goes on and ends."""
    cfg = tmp_path / "slow.yaml"
    cfg.write_text("""
name: slow
cases:
  - {name: a, mesh: "x=4", src: "[8{x}, 8]", dst: "[8, 8{x}]"}
  - {name: b, mesh: "x=2", src: "[8{x}, 8]", dst: "[8, 8{x}]"}
machines: [tpu-v4]
planners: [normal]
runner: {workers: 2, timeout_s: 4, unit_delay_s: 30, simulator: analytic}
""")
    r = _cli("run", cfg, "--out", tmp_path / "o", "--json", "--no-progress", "--engine", "ray", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = _lines(tmp_path / "o")
    assert len(rows) == 2 and all(x["status"] == "timeout" for x in rows)
    assert all("timed out after 4 s" in x["error"] for x in rows)
    s = json.loads(r.stdout)
    assert s["rows_timeout"] == 2 and s["engine"] == "ray"
    assert s["wall_s"] < 120  # the 30 s units were cancelled, not waited for
