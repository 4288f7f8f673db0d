"""synth.fileio, synth.limits and synth.schema: atomic writes, early output checks,
UTF-8 reads, the documented caps and the schedule schema."""

from __future__ import annotations

import errno
import json
import os
import threading

import pytest

from synth import fileio, limits
from synth.errors import RedistributionError
from synth.fileio import FileError
from synth.limits import LimitError


# -- output checks ---------------------------------------------------------------------------
@pytest.mark.parametrize("target, words", [
    ("{d}", "is a folder"),
    ("{d}/no/such/out.json", "does not exist"),
    ("/dev/full", "not a regular file"),
    ("", "empty path"),
    ("{d}/a\x00b", "NUL"),
])
def test_check_output_file_refuses_early(tmp_path, target, words):
    with pytest.raises(FileError, match=words) as e:
        fileio.check_output_file(target.replace("{d}", str(tmp_path)), "--out")
    assert "\n" not in str(e.value)


def test_check_output_file_with_parents(tmp_path):
    p = tmp_path / "a" / "b" / "out.json"
    assert fileio.check_output_file(p, make_parents=True) == str(p)
    assert not (tmp_path / "a").exists()  # checking creates nothing
    with pytest.raises(FileError, match="not a folder"):
        (tmp_path / "f").write_text("x")
        fileio.check_output_file(tmp_path / "f" / "out.json", make_parents=True)


@pytest.mark.parametrize("err, words", [(errno.EROFS, "read-only"), (errno.ENOSPC, "no space left"),
                                        (errno.EACCES, "permission denied")])
def test_unwritable_folders_give_one_line(tmp_path, monkeypatch, err, words):
    def refuse(*a, **k):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(fileio.tempfile, "mkstemp", refuse)
    with pytest.raises(FileError, match=words) as e:
        fileio.check_output_file(tmp_path / "x.json", "--trace")
    assert str(e.value).startswith("--trace ") and "\n" not in str(e.value)


def test_disk_full_during_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "fsync", full)
    with pytest.raises(FileError, match="no space left"):
        fileio.atomic_write_text(target, "new" * 1000)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_error_inside_the_writer_keeps_the_old_file(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old")
    with pytest.raises(ZeroDivisionError):
        with fileio.atomic_writer(target) as f:
            f.write("half")
            1 / 0  # noqa: B018
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_concurrent_writers_never_tear_the_file(tmp_path):
    target = tmp_path / "shared.json"
    payloads = [json.dumps({"writer": i, "data": [i] * 20000}) for i in range(8)]
    errors = []

    def write(i):
        try:
            for _ in range(5):
                fileio.atomic_write_text(target, payloads[i])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert target.read_text() in payloads  # one writer's whole document, never a mix
    assert [p.name for p in tmp_path.iterdir()] == ["shared.json"]  # no temporary left


def test_atomic_write_keeps_umask_permissions(tmp_path):
    p = fileio.atomic_write_text(tmp_path / "x.txt", "hi")
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(p).st_mode & 0o777 == 0o666 & ~umask


# -- reads ---------------------------------------------------------------------------------
def test_read_text_refuses_non_utf8_folders_devices(tmp_path):
    (tmp_path / "bad.yaml").write_bytes(b"name: caf\xe9\n")
    with pytest.raises(FileError, match=r"not UTF-8 text \(byte 0xe9 at offset 9\)") as e:
        fileio.read_text(tmp_path / "bad.yaml", "config file")
    assert "\n" not in str(e.value)
    with pytest.raises(FileError, match="is a folder"):
        fileio.read_text(tmp_path)
    with pytest.raises(FileError, match="not a regular file"):
        fileio.read_text("/dev/zero")
    with pytest.raises(FileError, match="does not exist"):
        fileio.read_text(tmp_path / "nope")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    assert fileio.read_text(tmp_path / "bom.txt") == "hello"


def test_read_json_errors_are_one_line(tmp_path):
    (tmp_path / "a.json").write_text('{"a": [1, 2,\n')
    with pytest.raises(FileError, match=r"not valid JSON: .* at line 2") as e:
        fileio.read_json(tmp_path / "a.json", "schedule file")
    assert "\n" not in str(e.value)
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(FileError):
        fileio.read_json(tmp_path / "deep.json")


# -- limits --------------------------------------------------------------------------------
def test_default_limits_serve_65536_devices():
    import synth

    assert limits.limit("devices") == 65536
    plan = synth.synthesize("x=256,y=256", "[65536{x}, 512{y}]", "[65536{y}, 512{x}]")
    assert plan.mesh.size == 65536 and plan.num_collectives >= 1
    with pytest.raises(LimitError, match="65,536 devices"):
        synth.Mesh.parse("x=65537")


def test_limits_are_overridable_by_environment(monkeypatch):
    import synth

    monkeypatch.setenv("REDIST_LIMIT_DEVICES", "16")
    with pytest.raises(LimitError, match="the limit is 16 devices"):
        synth.Mesh.parse("x=32")
    monkeypatch.setenv("REDIST_LIMIT_DEVICES", "nope")
    with pytest.raises(LimitError, match="not an integer"):
        limits.limit("devices")


@pytest.mark.parametrize("text, words", [
    ("9" * 31, "31 digits"), ("9" * 5000, "5000 digits"), ("-" + "9" * 40, "40 digits"), ("abc", "not an integer"),
])
def test_parse_int_refuses_before_converting(text, words):
    with pytest.raises(LimitError, match=words):
        limits.parse_int(text, "size")


def test_memory_check_refuses_what_cannot_fit(monkeypatch):
    monkeypatch.setenv("REDIST_MEMORY_BUDGET_BYTES", str(1 << 30))
    limits.check_array_memory(1 << 20, 4, 8, "ok")  # 32 MiB
    with pytest.raises(LimitError, match=r"needs about 32.0 GiB of memory but 1.0 GiB is available"):
        limits.check_array_memory(1 << 30, 4, 8, "compare [1073741824]")
    monkeypatch.delenv("REDIST_MEMORY_BUDGET_BYTES")
    assert limits.available_memory_bytes() > 0


@pytest.mark.parametrize("text, ok", [("4", True), ("0", False), ("inf", False), ("nan", False), ("-1", False),
                                      ("1e400", False), ("2.5", True)])
def test_float_arg_refuses_non_finite(text, ok):
    import argparse

    conv = limits.float_arg(positive=True)
    if ok:
        assert conv(text) == float(text)
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            conv(text)


# -- schedule schema -----------------------------------------------------------------------
def _sched(**op_change):
    op = {"kind": "all_gather", "in_bytes": 4, "out_bytes": 8, "send_bytes": 4, "recv_bytes": 4,
          "groups": [[0, 1], [2, 3]], "label": ""}
    op.update(op_change)
    return {"name": "s", "num_devices": 4, "meta": {}, "ops": [op]}


@pytest.mark.parametrize("change, where", [
    ({"recv_bytes": -4}, "ops[0].recv_bytes"),
    ({"groups": [[0, 1.0]]}, "ops[0].groups[0][1]"),
    ({"groups": [[0, 0]]}, "device 0 twice"),
    ({"groups": [[0, 1], [1, 2]]}, "device 1 is in two groups"),
    ({"groups": [[0, 9]]}, "outside 0..3"),
    ({"kind": "teleport"}, "ops[0].kind"),
    ({"in_bytes": True}, "ops[0].in_bytes"),
    ({"in_bytes": 10**30}, "ops[0].in_bytes"),
    ({"kind": "permute", "pairs": [[0, 1], [2, 1]], "groups": []}, "two sources"),
])
def test_schedule_files_are_validated(tmp_path, change, where):
    from synth import Schedule

    f = tmp_path / "s.json"
    f.write_text(json.dumps(_sched(**change)))
    with pytest.raises(RedistributionError, match=r"^schedule file .*s\.json: ") as e:
        Schedule.load(f)
    assert where in str(e.value) and "\n" not in str(e.value)


def test_our_plans_and_their_schedules_pass_the_schema(tmp_path):
    import synth
    from synth.schema import ScheduleFile, validate

    for planner in ("easy", "normal"):
        plan = synth.synthesize("x=2,y=4", "[64{y}, 32, 16{x}]", "[64, 32{x,y}, 16]", planner=planner)
        d = json.loads(plan.to_schedule().to_json())
        validate(ScheduleFile, d, "s")
        f = tmp_path / f"{planner}.json"
        f.write_text(json.dumps(d))
        assert synth.Schedule.load(f).to_dict() == plan.to_schedule().to_dict()


def test_pydantic_stays_out_of_import_synth():
    import subprocess
    import sys

    code = "import sys, synth, synth.limits, synth.fileio; print('pydantic' in sys.modules, 'yaml' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


# == issue 22: links, FIFOs and folders in place of every file the tool writes or shows ==========
import hashlib  # noqa: E402
import json as _json  # noqa: E402
from pathlib import Path  # noqa: E402


def _sha(p) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _precious(tmp_path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    p = outside / "precious.txt"
    p.write_text("data that lives outside the output folder\n")
    return p


def _writers():
    """Every way the tools write a file, each ``fn(path)``: the atomic writer behind
    run.json, config.yaml, results.csv/.parquet, report.html, --trace, --chrome-trace,
    codegen/xla-schedule/calibrate --out; the journal (rows.jsonl) and the folder lock."""
    from experiments.runner import FolderLock, Journal

    def journal(p):
        Journal(p.parent).append([{"id": "x"}])

    def lock(p):
        with FolderLock(p.parent):
            pass

    def compile_slot(p):  # the host's compile slot: REDIST_CACHE_DIR/compile.lock
        from executor import run

        old = os.environ.get("REDIST_CACHE_DIR")
        os.environ["REDIST_CACHE_DIR"] = str(p.parent)
        try:
            run._take_compile_slot("case", 1)
        finally:
            run.release_compile_slot()
            if old is None:
                os.environ.pop("REDIST_CACHE_DIR", None)
            else:
                os.environ["REDIST_CACHE_DIR"] = old

    return {
        "atomic_write_text": lambda p: fileio.atomic_write_text(p, "new", "--out"),
        "atomic_write_bytes": lambda p: fileio.atomic_write_bytes(p, b"new", "--out"),
        "atomic_write_json": lambda p: fileio.atomic_write_json(p, {"a": 1}, "--out"),
        "open_for_append": lambda p: fileio.open_for_append(p, "--out").write("new"),
        "open_lock_file": lambda p: fileio.open_lock_file(p).write("new"),
        "rows.jsonl": journal,
        ".lock": lock,
        "compile.lock": compile_slot,
    }


_NAMES = {"rows.jsonl": "rows.jsonl", ".lock": ".lock", "compile.lock": "compile.lock"}


@pytest.mark.parametrize("writer", list(_NAMES) + ["atomic_write_text", "atomic_write_bytes", "atomic_write_json",
                                                   "open_for_append", "open_lock_file"])
@pytest.mark.parametrize("kind", ["link", "dangling-link", "fifo", "folder", "devzero-link"])
def test_writes_refuse_links_fifos_folders_and_leave_the_target_unchanged(tmp_path, writer, kind):
    from experiments.case import ExperimentError

    out = tmp_path / "out"
    out.mkdir()
    target = out / _NAMES.get(writer, "file.out")
    precious = _precious(tmp_path)
    before = _sha(precious)
    if kind == "link":
        os.symlink(precious, target)
    elif kind == "dangling-link":
        os.symlink(tmp_path / "outside" / "never-created", target)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    else:
        os.symlink("/dev/zero", target)
    words = {"link": "symbolic link", "dangling-link": "symbolic link", "devzero-link": "symbolic link",
             "fifo": "pipe", "folder": "folder"}[kind]
    with pytest.raises((FileError, ExperimentError), match=words) as e:
        _writers()[writer](target)
    assert "\n" not in str(e.value)
    assert _sha(precious) == before  # byte for byte
    assert not (tmp_path / "outside" / "never-created").exists()
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["precious.txt"]


@pytest.mark.parametrize("kind", ["link", "fifo", "folder", "devzero-link"])
def test_rows_are_never_read_through_a_link_fifo_or_folder(tmp_path, kind):
    from experiments.case import ExperimentError
    from experiments.runner import read_journal

    d = tmp_path / "res"
    d.mkdir()
    precious = _precious(tmp_path)
    rows = d / "rows.jsonl"
    if kind == "link":
        precious.write_text('{"id": "from-outside"}\n')
        os.symlink(precious, rows)
    elif kind == "fifo":
        os.mkfifo(rows)
    elif kind == "folder":
        rows.mkdir()
    else:
        os.symlink("/dev/zero", rows)
    with pytest.raises(ExperimentError) as e:
        read_journal(d)  # a FIFO would block a plain open(); it must return at once
    assert "\n" not in str(e.value)


def test_the_journal_repairs_a_torn_line_without_reading_the_file_whole(tmp_path):
    from experiments.runner import Journal, read_journal

    (tmp_path / "rows.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "tor')
    j = Journal(tmp_path)
    j.append([{"id": "d"}])
    j.close()
    assert (tmp_path / "rows.jsonl").read_text() == '{"id": "a"}\n{"id": "b"}\n{"id": "d"}\n'
    assert sorted(read_journal(tmp_path)) == ["a", "b", "d"]


def test_check_inside_refuses_links_below_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "rows.jsonl").write_text("{}\n")
    assert fileio.check_inside(root / "a" / "rows.jsonl", root) == str(root / "a" / "rows.jsonl")
    os.symlink(tmp_path, root / "b")
    with pytest.raises(FileError, match="symbolic link"):
        fileio.check_inside(root / "b" / "rows.jsonl", root)
    with pytest.raises(FileError, match="outside"):
        fileio.check_inside(tmp_path / "x", root)
    os.symlink(root / "a" / "rows.jsonl", root / "a" / "r2.jsonl")
    with pytest.raises(FileError, match="symbolic link"):
        fileio.read_bytes(root / "a" / "r2.jsonl", inside=root)


# -- the one reader ------------------------------------------------------------------------------
def test_reader_caps_before_reading_and_refuses_special_files(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(3 * 10**9)  # sparse: 3 GB that takes no disk
    with pytest.raises(FileError, match="limit is 33,554,432"):
        fileio.read_json(big, "schedule file")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(FileError, match="pipe"):
        fileio.read_yaml(fifo, "profile file")  # returns at once: opened O_NONBLOCK, then fstat
    monkeypatch.setenv("REDIST_LIMIT_FILE_BYTES", "10")
    (tmp_path / "s.json").write_text('{"a": [1, 2, 3, 4, 5]}')
    with pytest.raises(FileError, match="REDIST_LIMIT_FILE_BYTES"):
        fileio.read_json(tmp_path / "s.json")


def test_read_validated_names_the_field_and_refuses_non_finite(tmp_path):
    from pydantic import BaseModel, Field

    class M(BaseModel):
        n: int = Field(ge=1, le=10)

    (tmp_path / "ok.json").write_text('{"n": 3}')
    data, m = fileio.read_validated(tmp_path / "ok.json", M, "test file")
    assert data == {"n": 3} and m.n == 3
    (tmp_path / "bad.yaml").write_text("n: 0\n")
    with pytest.raises(RedistributionError, match=r"test file .*bad.yaml: n: .*greater than or equal to 1"):
        fileio.read_validated(tmp_path / "bad.yaml", M, "test file")
    (tmp_path / "nan.json").write_text('{"n": NaN}')
    with pytest.raises(FileError, match="NaN is not a finite number"):
        fileio.read_validated(tmp_path / "nan.json", M, "test file")
    (tmp_path / "tag.yaml").write_text("n: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(FileError, match="not valid YAML"):
        fileio.read_validated(tmp_path / "tag.yaml", M, "test file")


def test_schedule_caps_and_meta(tmp_path, monkeypatch):
    from synth import Schedule

    op = {"kind": "all_gather", "in_bytes": 4, "out_bytes": 8, "groups": [[0, 1]]}
    d = {"num_devices": 2, "meta": {"initial_bytes": 4, "itemsize": 2, "note": "kept"}, "ops": [op, op]}
    s = Schedule.from_dict(d)
    assert s.initial_bytes == 4 and s.meta["note"] == "kept" and len(s.ops) == 2
    monkeypatch.setenv("REDIST_LIMIT_SCHEDULE_OPS", "1")
    with pytest.raises(LimitError, match="2 ops; the limit is 1"):
        Schedule.from_dict(d)
    monkeypatch.delenv("REDIST_LIMIT_SCHEDULE_OPS")
    monkeypatch.setenv("REDIST_LIMIT_SCHEDULE_IDS", "3")
    with pytest.raises(LimitError, match="4 device ids"):
        Schedule.from_dict(d)
    monkeypatch.delenv("REDIST_LIMIT_SCHEDULE_IDS")
    for meta, field in (({"initial_bytes": "abc"}, "initial_bytes"), ({"initial_bytes": -5}, "initial_bytes"),
                        ({"itemsize": [4]}, "itemsize"), ({"itemsize": 10**40}, "itemsize")):
        with pytest.raises(RedistributionError, match=f"meta.{field}"):
            Schedule.from_dict(dict(d, meta=meta))


@pytest.mark.parametrize("param, value, ok", [
    ("bus_bandwidth_Bps", 0, False), ("nic_bandwidth_Bps", 0, False), ("ramp_ranks_exponent", 1e308, False),
    ("link_latency_s", 1e308, False), ("link_latency_s", 0, True), ("link_efficiency", 0, False),
    ("link_efficiency", 1.5, False), ("hbm_capacity_bytes", 2**60, False), ("ramp_ranks_exponent", 0.4, True),
])
def test_profile_numbers_are_finite_positive_and_bounded(tmp_path, param, value, ok):
    from models import load_profile
    from models.errors import ProfileError

    base = "cpu-host" if param == "bus_bandwidth_Bps" else "dgx-h100"
    p = tmp_path / "p.yaml"
    p.write_text(f"extends: {base}\nparams:\n  {param}: {value!r}\n")
    if ok:
        prof = load_profile(f"{p}:{'8' if base == 'cpu-host' else '1'}")
        assert prof.num_devices == 8
        return
    with pytest.raises(ProfileError, match=param) as e:
        load_profile(f"{p}:1")
    assert "\n" not in str(e.value)


def test_profile_extends_chain_is_capped(tmp_path):
    from models import load_profile
    from models.errors import ProfileError

    files = [tmp_path / f"c{i}.yaml" for i in range(20)]
    for i, f in enumerate(files):
        f.write_text(f"extends: {files[i + 1] if i + 1 < len(files) else 'cpu-host'}\n")
    with pytest.raises(ProfileError, match="over 8 files deep"):
        load_profile(f"{files[0]}:8")
    assert load_profile(f"{files[14]}:8").num_devices == 8  # 6 files deep: fine


# -- addresses, escaping, the CLI contract ---------------------------------------------------
@pytest.mark.parametrize("text, ok", [("127.0.0.1:6379", True), ("ray://head-1.example:10001", True),
                                      ("[::1]:6379", True), ("a" * 300 + ":1", False), ("a" * 64 + ".x:1", False),
                                      ("héad:1", False), ("h:0", False), ("h:65536", False), ("h", False),
                                      ("not a host:1", False)])
def test_addresses_are_checked_before_connecting(text, ok):
    if ok:
        host, port = limits.parse_address(text)
        assert port in (6379, 10001) and host
    else:
        with pytest.raises(LimitError) as e:
            limits.parse_address(text)
        assert "\n" not in str(e.value)


def test_ray_address_that_is_not_ray_is_refused_within_the_deadline():
    import socket
    import time

    from experiments.case import ExperimentError
    from experiments.runner import _check_reachable

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)  # accepts (the kernel's backlog) and never answers
    try:
        t0 = time.monotonic()
        with pytest.raises(ExperimentError, match="does not answer like a Ray head"):
            _check_reachable(f"127.0.0.1:{s.getsockname()[1]}", timeout_s=0.5)
        assert time.monotonic() - t0 < 30  # a deadline, not Ray's minutes of retries (generous: loaded CI)
    finally:
        s.close()


def test_escape_md_keeps_types_and_breaks_links():
    from ui.errors import escape_md

    assert escape_md("[8192{data}, 32768] P('data', None)") == "[8192{data}, 32768] P('data', None)"
    for t in ("![x](http://h/p.png)", "[click](http://h)", "<http://h>", "www.h.example", "$x$", ":red[a]"):
        e = escape_md(t)
        assert "](" not in e and "http://" not in e and "www." not in e and ":red[" not in e
        assert "$" not in e.replace("\\$", "")


def test_report_error_json_and_public_names(capsys):
    from synth.cliutil import public_message, report_error
    from synth.errors import TypeSpecError

    e = TypeSpecError("ArrayType.parse('[8{q}]'): dim 0 axis 'q' is not in the mesh")
    assert report_error(e, ["plan", "--json"]) == 2
    out, err = capsys.readouterr()
    assert err == "error: type '[8{q}]': dim 0 axis 'q' is not in the mesh\n"
    assert _json.loads(out) == {"error": "type '[8{q}]': dim 0 axis 'q' is not in the mesh", "kind": "type"}
    assert report_error(LimitError("too big"), ["plan"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "error: too big\n"
    assert public_message("load_profile('x'): unknown") == "hardware 'x': unknown"
    assert public_message("--mesh Mesh.parse: empty mesh string") == "--mesh: empty mesh string"


def test_memory_budget_env_must_be_finite(monkeypatch):
    for v in ("inf", "nan", "-5", "abc", "0", "1e400"):
        monkeypatch.setenv("REDIST_MEMORY_BUDGET_BYTES", v)
        with pytest.raises(LimitError, match="REDIST_MEMORY_BUDGET_BYTES"):
            limits.available_memory_bytes()
    monkeypatch.setenv("REDIST_MEMORY_BUDGET_BYTES", "8e9")
    assert limits.available_memory_bytes() == 8 * 10**9


def test_compiles_that_would_not_fit_together_take_the_host_slot(monkeypatch, tmp_path):
    """One fits, two do not: the first guard takes the host's compile slot (an exclusive
    flock on REDIST_CACHE_DIR/compile.lock) and keeps it for the process; a second guard in
    the same process does not wait for itself; another process waits (across processes:
    tests/test_hardening.py::test_two_runs_that_do_not_fit_together_run_one_at_a_time)."""
    import fcntl

    from executor import run

    monkeypatch.setenv("REDIST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(run, "_SLOT", None)
    est = run.compile_host_bytes(64 << 20)
    monkeypatch.setenv("REDIST_MEMORY_BUDGET_BYTES", str(int(1.5 * est)))  # one fits, two do not
    try:
        with run.compile_guard("case A", "cpu", 64 << 20):
            pass
        with run.compile_guard("case B", "cpu", 64 << 20):  # same process: no wait on itself
            pass
        lock = tmp_path / "cache" / "compile.lock"
        assert run._SLOT is not None and lock.is_file() and not lock.is_symlink()
        with open(lock) as other:  # another open file description: the slot is taken
            with pytest.raises(BlockingIOError):
                fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert run.release_compile_slot() is True
        with open(lock) as other:
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    finally:
        run.release_compile_slot()
    monkeypatch.setenv("REDIST_MEMORY_BUDGET_BYTES", str(est // 2))
    with pytest.raises(LimitError, match="case C: the cpu compile needs about"):
        with run.compile_guard("case C", "cpu", 64 << 20):
            pass


def test_compile_memory_failures_are_one_line():
    from executor.errors import ExecutorError
    from executor.run import compile_guard

    with pytest.raises(ExecutorError, match=r"case T: the tpu compile failed for memory: the program needs "
                                            r"72.03 GiB of hbm per device") as e:
        with compile_guard("case T", "tpu"):
            raise RuntimeError("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
                               "space hbm. Used 72.03G of 31.25G hbm. Exceeded hbm capacity by 40.78G.\n"
                               "Program hbm requirement 72.03G: ...")
    assert "\n" not in str(e.value)
    with pytest.raises(KeyError):  # anything else passes through unchanged
        with compile_guard("case K", "cpu", 1 << 10):
            raise KeyError("x")


def test_ray_address_auto_without_a_cluster_is_refused_at_once(monkeypatch, tmp_path):
    from experiments import runner
    from experiments.case import ExperimentError

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(runner, "RAY_CLUSTER_FILE", str(tmp_path / "ray_current_cluster"))
    with pytest.raises(ExperimentError, match="no Ray cluster runs on this host"):
        runner._resolve_auto()
    (tmp_path / "ray_current_cluster").write_text("10.0.0.7:6379\n")
    assert runner._resolve_auto() == "10.0.0.7:6379"
    monkeypatch.setenv("RAY_ADDRESS", "head.example:6379")
    assert runner._resolve_auto() == "head.example:6379"


def test_member_variables_are_checked_together(monkeypatch):
    from executor import distributed
    from executor.errors import ExecutorError

    for k in (distributed.ENV_COORD, distributed.ENV_NUM, distributed.ENV_LOCAL):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(distributed.ENV_ID, "0")
    with pytest.raises(ExecutorError, match="REDIST_PROCESS_ID is set but REDIST_COORDINATOR"):
        distributed.member_layout()
    monkeypatch.setenv(distributed.ENV_COORD, "127.0.0.1:1234")
    monkeypatch.setenv(distributed.ENV_NUM, "2")
    monkeypatch.setenv(distributed.ENV_LOCAL, "4")
    assert distributed.member_layout() == ("127.0.0.1:1234", 2, 0, 4)
    monkeypatch.setenv(distributed.ENV_ID, "2")
    with pytest.raises(ExecutorError, match="0 <= id < processes"):
        distributed.member_layout()


def test_connection_deadline_fires_and_keeps_an_enclosing_alarm():
    import signal
    import time

    from experiments.case import ExperimentError
    from experiments.runner import _deadline

    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with pytest.raises(ExperimentError, match="joining X did not finish within 0.2 s"):
            with _deadline(0.2, "joining X"):
                for _ in range(2000):  # at most 20 s, then pytest.raises fails
                    time.sleep(0.01)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 30  # the enclosing alarm still runs
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not fired
