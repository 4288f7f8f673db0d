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
