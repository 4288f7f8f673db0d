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


# -- compiles: estimated, one at a time when two do not fit, one line when they fail -------------
APP_LAYOUT = ["--mesh", "data=16,model=4", "--dst", "P('model','data')", "--dtype", "bfloat16", "--devices", "64"]


def test_a_cpu_run_over_the_memory_is_refused_before_jax_starts(monkeypatch, capsys):
    """The issue's 512 MiB case on 64 CPU devices (measured ~5.8 GiB for `compare`) with
    4 GB available: one line with the case, the compiler and the estimate."""
    from executor.run import compile_host_bytes

    rc, cap = _main(["xla-schedule", "--check", "--src", "[8192{data}, 32768{model}]", *APP_LAYOUT],
                    monkeypatch, capsys, REDIST_MEMORY_BUDGET_BYTES=4e9)
    assert rc == 2
    line = _one_line(cap.err)
    need = compile_host_bytes(8192 * 32768 * 2)
    assert need == (384 << 20) + 12 * 512 * 2**20
    assert "[8192{data}, 32768{model}]" in line and "CPU compile" in line
    assert f"needs about {need / 2**30:.1f} GiB of memory" in line, line


@pytest.mark.parametrize("compiler,devices", [("tpu-v4:2x2x2", 8), ("cpu (ahead of time)", 64), ("dgx-h100:8", 8)])
def test_an_ahead_of_time_compile_is_estimated_and_refused_in_one_line(compiler, devices, monkeypatch):
    from executor.run import aot_compile_host_bytes, compile_guard
    from synth.limits import MemoryLimitError

    monkeypatch.setenv("REDIST_MEMORY_BUDGET_BYTES", "1e8")
    ran = []
    with pytest.raises(MemoryLimitError) as e:
        with compile_guard("XLA's reshard of case 7", compiler, devices=devices):
            ran.append(1)
    assert not ran, "the compile ran although its estimate did not fit"
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"XLA's reshard of case 7: the {compiler} compile needs about")
    need = aot_compile_host_bytes(compiler, devices)
    assert need > 1e8 and f"{need / 2**20:.1f} MiB" in msg


@pytest.mark.parametrize("text,needs", [
    ("RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 72.03G of 31.25G hbm. Exceeded hbm "
     "capacity by 40.78G.", "needs 72.03 GiB of hbm per device, 40.78 GiB more than the 31.25 GiB"),
    ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. the total memory required for HLO temporaries "
     "(96.00G) exceeds available HBM (30.75G).", "needs 96.00 GiB of HBM for HLO temporaries per device"),
])
def test_a_compile_that_fails_for_memory_is_one_line_with_case_compiler_and_bytes(text, needs):
    from executor.run import CompileMemoryError, compile_guard

    with pytest.raises(CompileMemoryError) as e:
        with compile_guard("XLA's reshard (shardy) of a (8, 8589934592) float32 array", "tpu-v4:2x2x2", devices=8):
            raise RuntimeError(text + "\nTraceback-like second line")
    msg = str(e.value)
    assert "\n" not in msg and e.value.kind == "memory"
    assert msg.startswith("XLA's reshard (shardy) of a (8, 8589934592) float32 array: the tpu-v4:2x2x2 compile "
                          "failed for memory: ") and needs in msg, msg


def test_a_compile_that_fails_otherwise_is_not_rewritten():
    from executor.run import compile_guard

    with pytest.raises(ValueError, match="shapes do not match"):
        with compile_guard("case", "tpu-v4:2x2x2", devices=8):
            raise ValueError("shapes do not match")


def test_the_subprocess_killed_for_memory_is_one_line_with_case_compiler_and_bytes():
    """The app's 'exit status -9': a compile subprocess killed by signal 9 (here it kills
    itself; the out-of-memory killer sends the same signal)."""
    from ui.runs import WorkerError, _run_executor

    cmd = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "compare",
           "--mesh", "data=16,model=4", "--src", "[8192{data}, 32768{model}]", "--dst", "[8192{model}, 32768{data}]",
           "--dtype", "bfloat16"]
    with pytest.raises(WorkerError) as e:
        _run_executor([cmd], timeout_s=120)
    msg = str(e.value)
    assert "exit status" not in msg and "\n" not in msg
    assert "[8192{data}, 32768{model}] -> [8192{model}, 32768{data}] on data=16,model=4" in msg
    from executor.fmt import fmt_bytes
    from executor.run import compile_host_bytes

    need = fmt_bytes(compile_host_bytes(8192 * 32768 * 2))
    assert f"the cpu compile was killed by signal 9, most likely for memory; it needs about {need}" in msg, msg


def test_the_app_compile_subprocess_killed_for_memory_names_machine_and_bytes(monkeypatch):
    import numpy as np

    import synth
    from synth.interp import check_blocks, interpret
    from ui import xla_compare
    from ui.compute import WorkerError

    mesh = synth.Mesh.parse("data=16,model=4")
    plan = synth.synthesize(mesh, synth.ArrayType.parse("[64{data}, 128{model}]"),
                            synth.ArrayType.parse("[64{model}, 128{data}]"), itemsize=2)
    x = np.arange(64 * 128).reshape(64, 128)
    check_blocks(x, interpret(plan.steps, plan.work_types[0], plan.work_mesh, x), plan.work_types[-1],
                 plan.work_mesh)  # the plan is right element by element before its compile is "killed"

    def killed(cmd, **kw):
        return subprocess.CompletedProcess(cmd, -9, "", "")

    monkeypatch.setattr(subprocess, "run", killed)
    with pytest.raises(WorkerError) as e:
        xla_compare.compiled_strategies("k-killed", "tpu-v4:4x4x4", "data=16,model=4", plan, "bfloat16")
    msg = str(e.value)
    assert "exit status -9" not in msg and "\n" not in msg
    assert msg.startswith("compiling [64{data}, 128{model}] -> [64{model}, 128{data}] on data=16,model=4: the "
                          "tpu-v4:4x4x4 compile was killed by signal 9, most likely for memory"), msg
    from executor.fmt import fmt_bytes
    from executor.run import aot_compile_host_bytes

    assert aot_compile_host_bytes("tpu-v4:4x4x4", 64) == (448 << 20) + 64 * (64 << 10)
    assert f"it needs about {fmt_bytes((448 << 20) + 64 * (64 << 10))}" in msg, msg


def _holder(tmp_path, env):
    """A process that holds the host's compile slot until its stdin closes."""
    code = ("import sys; from executor.run import _take_compile_slot; _take_compile_slot('holder', 1); "
            "print('held', flush=True); sys.stdin.read()")
    h = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert h.stdout.readline().strip() == "held"
    return h


def test_two_runs_that_do_not_fit_together_run_one_at_a_time(tmp_path):
    """A run whose estimate fits alone but not twice waits for the one holding the slot
    (it says so on stderr), and finishes correctly once that one is done."""
    from executor.run import compile_host_bytes

    need = compile_host_bytes(256 * 32768 * 2)  # 16 MiB bfloat16
    env = _env(REDIST_CACHE_DIR=tmp_path / "cache", REDIST_MEMORY_BUDGET_BYTES=int(1.5 * need))
    h = _holder(tmp_path, env)
    try:
        b = subprocess.Popen([sys.executable, "-m", "executor", "xla-schedule", "--check", "--src",
                              "[256{data}, 32768{model}]", *APP_LAYOUT, "--json"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = b.stderr.readline()
        assert "waiting for another big compile or run on this host to finish" in first, first
        assert b.poll() is None, "the second run did not wait"
    finally:
        h.stdin.close()
        h.wait(timeout=60)
    out, err = b.communicate(timeout=300)
    assert b.returncode == 0, err[-2000:]
    d = json.loads(out)
    assert d["meta"]["correct"] is True  # every element of every shard checked against the target


def test_a_run_that_waits_too_long_for_the_slot_fails_in_one_line(tmp_path):
    from executor.run import compile_host_bytes

    need = compile_host_bytes(256 * 32768 * 2)
    env = _env(REDIST_CACHE_DIR=tmp_path / "cache", REDIST_MEMORY_BUDGET_BYTES=int(1.5 * need),
               REDIST_LIMIT_COMPILE_WAIT_S=1)
    h = _holder(tmp_path, env)
    try:
        r = subprocess.run([sys.executable, "-m", "executor", "xla-schedule", "--check", "--src",
                            "[256{data}, 32768{model}]", *APP_LAYOUT, "--json"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    finally:
        h.stdin.close()
        h.wait(timeout=60)
    assert r.returncode == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 2 and "waiting for another big compile" in lines[0], r.stderr[-2000:]
    assert lines[1].startswith("error: ") and "waited 1 s for another big compile or run" in lines[1]
    assert "REDIST_LIMIT_COMPILE_WAIT_S" in lines[1] and json.loads(r.stdout)["kind"] == "memory"


def test_the_compile_lock_never_follows_a_link(tmp_path, monkeypatch):
    import hashlib

    from executor import run
    from synth.fileio import FileError

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n" * 100)
    before = hashlib.sha256(victim.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "compile.lock").symlink_to(victim)
    monkeypatch.setenv("REDIST_CACHE_DIR", str(cache))
    monkeypatch.setattr(run, "_SLOT", None)
    with pytest.raises(FileError, match="link"):
        run._take_compile_slot("case", 1)
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before
    folder_link = tmp_path / "cache-link"
    folder_link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("REDIST_CACHE_DIR", str(folder_link))
    with pytest.raises(FileError, match="symbolic link or not a folder"):
        run.compile_lock_path()
    assert not list((tmp_path / "elsewhere").iterdir())
