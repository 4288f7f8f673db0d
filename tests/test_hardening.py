"""Round three's hardening of runs that span processes: the join deadline of
``jax.distributed`` (a process that never comes up makes the others fail in one line
within the deadline, never hang), SIGTERM ending the whole group, and the memory
estimate of ``--processes N --devices M`` before anything starts.

A process that "never comes up" is made real, not simulated: a ``sitecustomize`` on
``PYTHONPATH`` makes the member with ``REDIST_PROCESS_ID=1`` sleep before it imports
anything, and every member records its pid, so the test can check that none outlives
the run. No assert is about time: the deadline is small (2 s) so the run ends soon, and
the waits below have generous caps only so that a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from executor import distributed

ROOT = Path(__file__).resolve().parents[1]
CASE = ["--mesh", "x=2", "--src", "[8{x}]", "--dst", "[8]", "--devices", "2"]


def _env(**extra):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    for k in (distributed.ENV_COORD, distributed.ENV_ID, distributed.ENV_NUM, distributed.ENV_LOCAL,
              distributed.ENV_JOIN):
        env.pop(k, None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _one_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.strip() and "[Gloo]" not in x]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def _stuck_member_site(tmp_path: Path, stuck_id: str = "1") -> Path:
    """A ``sitecustomize`` that records each member's pid and makes member ``stuck_id``
    sleep before it imports anything (it never reaches the coordinator)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import os, time
        _id = os.environ.get("REDIST_PROCESS_ID")
        if _id is not None:
            with open(os.path.join({str(tmp_path)!r}, "pid" + _id), "w") as f:
                f.write(str(os.getpid()))
            if _id == {stuck_id!r}:
                time.sleep(3600)
    """))
    return site


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for(paths, cap_s=120.0):
    end = time.monotonic() + cap_s
    while not all(p.exists() and p.read_text() for p in paths):
        assert time.monotonic() < end, f"{[str(p) for p in paths if not p.exists()]} never appeared"
        time.sleep(0.1)
    return [int(p.read_text()) for p in paths]


# -- a member alone: the deadline, in one line ---------------------------------------------------
@pytest.mark.parametrize("pid", ["0", "1"])
def test_a_member_whose_peer_never_comes_up_fails_with_the_deadline_line(pid):
    """Process 0 (which hosts the coordinator) waits for a peer that never starts;
    process 1 waits for a coordinator that never starts: both end with the one line
    naming the coordinator address, the deadline and the fix, exit 2, and with --json
    one {error, kind} object on stdout."""
    coord = f"127.0.0.1:{distributed.free_port()}"
    env = _env(REDIST_COORDINATOR=coord, REDIST_NUM_PROCESSES=2, REDIST_PROCESS_ID=pid, REDIST_LOCAL_DEVICES=1,
               REDIST_JOIN_TIMEOUT_S=2)
    r = subprocess.run([sys.executable, "-m", "executor", "compare", *CASE, "--processes", "2", "--json"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    line = _one_line(r.stderr)
    assert f"process {pid} of 2 could not join the run at coordinator {coord} within 2 s" in line
    assert "--join-timeout" in line and distributed.ENV_JOIN in line
    obj = json.loads(r.stdout)
    assert obj["error"] == line.removeprefix("error: ") and obj["kind"] == "input"


def test_the_default_join_deadline_is_10_s_and_the_environment_sets_it(monkeypatch):
    monkeypatch.delenv(distributed.ENV_JOIN, raising=False)
    assert distributed.join_timeout_s() == 10.0
    monkeypatch.setenv(distributed.ENV_JOIN, "45")
    assert distributed.join_timeout_s() == 45.0
    assert distributed.join_timeout_s(3) == 3.0  # the flag wins


# -- the launcher: a member that never comes up, and SIGTERM ------------------------------------
def test_a_member_that_never_comes_up_fails_the_run_within_the_deadline(tmp_path):
    site = _stuck_member_site(tmp_path)
    env = _env(PYTHONPATH=f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    p = subprocess.Popen([sys.executable, "-m", "executor", "compare", *CASE, "--processes", "2",
                          "--join-timeout", "2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        pids = _wait_for([tmp_path / "pid0", tmp_path / "pid1"])
        out, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2, err[-3000:]
    line = _one_line(err)
    assert "process 0 of 2 could not join the run at coordinator 127.0.0.1:" in line and "within 2 s" in line
    assert out == ""
    assert not [q for q in pids if _alive(q)], "a member outlived the run"


def test_sigterm_ends_every_member(tmp_path):
    site = _stuck_member_site(tmp_path)
    env = _env(PYTHONPATH=f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    p = subprocess.Popen([sys.executable, "-m", "executor", "compare", *CASE, "--processes", "2",
                          "--join-timeout", "600"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        pids = _wait_for([tmp_path / "pid0", tmp_path / "pid1"])
        assert p.poll() is None, "the run ended before SIGTERM"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2
    assert "stopped by SIGTERM: the 2 of 2 processes started were ended" in _one_line(err)
    assert not [q for q in pids if _alive(q)], "a member outlived SIGTERM"


# -- bad deadlines and the memory estimate: one line before anything starts ---------------------
def _main(argv, monkeypatch, capsys, **env):
    from executor.cli import main

    for k in (distributed.ENV_ID, distributed.ENV_JOIN, "REDIST_MEMORY_BUDGET_BYTES"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "abc", "601", "1e308"])
def test_a_bad_join_deadline_in_the_environment_is_one_line(value, monkeypatch, capsys):
    rc, cap = _main(["compare", *CASE, "--processes", "2"], monkeypatch, capsys, REDIST_JOIN_TIMEOUT_S=value)
    assert rc == 2
    line = _one_line(cap.err)
    assert f"REDIST_JOIN_TIMEOUT_S={value!r}" in line and "between 1 and 600" in line


@pytest.mark.parametrize("value", ["0", "inf", "abc", "601"])
def test_a_bad_join_deadline_flag_is_a_usage_line(value, monkeypatch, capsys):
    rc, cap = _main(["compare", *CASE, "--processes", "2", "--join-timeout", value], monkeypatch, capsys)
    assert rc == 2
    assert "--join-timeout" in _one_line(cap.err)


def test_processes_times_devices_is_estimated_before_any_starts(monkeypatch, capsys, tmp_path):
    """``--processes 24 --devices 24`` (the issue's 2.7 GB in 6 s) against a 1 GB budget:
    refused in one line with the estimate, and no process was started (a started member
    would have written its pid through the sitecustomize)."""
    site = _stuck_member_site(tmp_path, stuck_id="none")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    rc, cap = _main(["compare", "--mesh", "x=24", "--src", "[24{x}]", "--dst", "[24]", "--devices", "24",
                     "--processes", "24"], monkeypatch, capsys, REDIST_MEMORY_BUDGET_BYTES=1e9)
    assert rc == 2
    line = _one_line(cap.err)
    need = 24 * distributed.PROCESS_BYTES + 24 * distributed.CPU_DEVICE_BYTES
    assert "--processes 24 --devices 24" in line and "memory" in line
    assert f"needs about {need / 2**30:.1f} GiB of memory" in line, line
    assert not list(tmp_path.glob("pid*")), "a process started before the estimate"
