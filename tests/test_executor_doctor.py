"""The doctor on real programs: every collective XLA inserted, with its source line, the
full rematerialization of the jax#21562 layout found, and bad input as one line, exit 2."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

from executor import ExecutorError, ensure_devices  # noqa: E402
from executor import tpu as tpu_mod  # noqa: E402
from executor.cli import main  # noqa: E402
from executor.doctor import doctor_hlo_dir, doctor_program  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "tests" / "programs" / "transformer_block.py"
COLLECTIVE = re.compile(r"= [^=]*\b(all-gather|all-to-all|collective-permute|all-reduce|reduce-scatter)(-start)?\(")


def _line_of(marker: str) -> int:
    """The line of the program that holds ``marker`` (so the test follows edits to the file)."""
    lines = PROG.read_text().splitlines()
    hits = [i + 1 for i, ln in enumerate(lines) if marker in ln]
    assert len(hits) == 1, hits
    return hits[0]


def _compiled_text(fn_name):
    """The program compiled here, independently of the doctor: its HLO text."""
    import importlib.util

    import numpy as np
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from synth.mesh import Mesh
    from synth.types import parse_type

    sp = importlib.util.spec_from_file_location("_tb", PROG)
    mod = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(mod)
    mesh = Mesh.of(mod.DOCTOR["mesh"])
    devs = ensure_devices(8)
    jm = jax.sharding.Mesh(np.asarray(devs[:8], dtype=object).reshape(mesh.sizes), mesh.names,
                           axis_types=(AxisType.Auto,) * 2)
    sds = [jax.ShapeDtypeStruct(t.shape, np.float32, sharding=NamedSharding(jm, P(*t.to_spec()[1])))
           for t in map(parse_type, mod.DOCTOR["args"])]
    with jax.set_mesh(jm):
        return jax.jit(getattr(mod, fn_name)).lower(*sds).compile().as_text()


def _entry_collectives(text):
    entry = text[text.index("\nENTRY"):]
    entry = entry[: entry.index("\n}")]
    return COLLECTIVE.findall(entry)


@pytest.fixture(scope="module")
def report():
    ensure_devices(8)
    return doctor_program(f"{PROG}:train_step")


def test_every_collective_is_found_with_the_remat_and_its_line(report):
    found = [s.name for f in report.findings for s in f.steps]
    assert len(found) == len(set(found)) == len(_entry_collectives(_compiled_text("train_step")))
    remat = [f for f in report.findings if f.full_remat]
    assert len(remat) == 1 == report.log_remats  # and XLA's own log names one
    f = remat[0]
    assert f.line == f"transformer_block.py:{_line_of('full remat')}"
    assert (f.src, f.dst) == ("[8{y}, 64, 128{x}]", "[8, 64{x,y}, 128]")
    assert [s.opcode for s in f.steps] == ["all-gather", "all-gather"]  # the whole array on every device
    assert f.peak_bytes == 8 * 64 * 128 * 4
    assert f.ours_peak_bytes == 8 * 64 * 128 * 4 // 8 and f.ours_sim_s < f.xla_sim_s
    assert f.fix and "reshard(" in f.fix and "P(None, ('x', 'y'), None)" in f.fix


def test_each_finding_names_a_line_of_the_users_step(report):
    text = PROG.read_text().splitlines()
    for f in report.findings:
        name, _, ln = f.line.partition(":")
        assert name == "transformer_block.py" and f.function == "train_step"
        assert "o = " in text[int(ln) - 1], (f.line, text[int(ln) - 1])  # a statement of the step


def test_the_fixed_program_has_no_remat_and_less_temp(report):
    fixed = doctor_program(f"{PROG}:train_step_fixed")
    assert not any(f.full_remat for f in fixed.findings)
    assert fixed.temp_bytes < report.temp_bytes
    marker = "the doctor's suggestion"
    fixed_line = f"transformer_block.py:{_line_of(marker)}"
    ours = [f for f in fixed.findings if f.line == fixed_line]
    assert ours and all(s.opcode.startswith("all-to-all") for f in ours for s in f.steps)


def test_json_output(capsys):
    assert main(["doctor", f"{PROG}:train_step", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (rep,) = out["reports"]
    assert rep["collectives"] == sum(len(f["steps"]) for f in rep["findings"])
    assert sum(f["full_remat"] for f in rep["findings"]) == 1


@pytest.mark.parametrize("args,words", [
    ([f"{PROG}:no_such_fn"], ["no function", "no_such_fn"]),
    ([f"{ROOT}/tests/programs/broken.py:step"], ["does not compile"]),
    (["--hlo-dir", str(ROOT / "docs")], ["no optimized HLO modules"]),
    ([f"{PROG}:train_step", "--mesh", "x=4,y=4"], ["16 devices", "8"]),
    ([f"{PROG}:train_step", "--arg", "[8{z}, 64, 128]", "--arg", "[128, 512]", "--arg", "[512, 128]"],
     ["--arg", "z"]),
    ([f"{PROG}:train_step", "--arg", "[9{x}, 64, 128]", "--arg", "[128, 512]", "--arg", "[512, 128]"],
     ["does not divide", "uneven"]),
])
def test_bad_input_is_one_line_exit_2(args, words, capsys):
    assert main(["doctor", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    for w in words:
        assert w in err[0], err[0]


def test_api_raises_the_project_error():
    with pytest.raises(ExecutorError):
        doctor_program(f"{PROG}:train_step", mesh="x=4,y=4")


def test_hlo_dump_folder_without_jax_noise(tmp_path):
    """A dump from XLA_FLAGS=--xla_dump_to: the same collectives and the remat's line; and a
    run without JAX_PLATFORMS prints no libtpu initialisation noise."""
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               XLA_FLAGS=f"--xla_force_host_platform_device_count=8 --xla_dump_to={tmp_path}")
    env.pop("JAX_PLATFORMS", None)
    r = subprocess.run([sys.executable, "-m", "executor", "doctor", f"{PROG}:train_step", "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "E0000" not in r.stderr and "libtpu" not in r.stderr.lower(), r.stderr[-2000:]
    live = json.loads(r.stdout)["reports"][0]
    reports = [rep for rep in doctor_hlo_dir(str(tmp_path)) if "train_step" in rep.program]
    assert len(reports) == 1
    dumped = reports[0]
    assert sum(len(f.steps) for f in dumped.findings) == live["collectives"]
    remat = [f for f in dumped.findings if f.full_remat]
    assert [f.line for f in remat] == [f"transformer_block.py:{_line_of('full remat')}"]


#: the test program at a size where a TPU needs temporaries (compile only: nothing is allocated)
LARGE = ["[32{y}, 2048{x}, 1024]", "[1024, 4096{x}]", "[4096{x}, 1024]"]


@pytest.mark.skipif(tpu_mod.libtpu_status() is not None, reason="needs libtpu (AOT compile for a TPU slice)")
def test_tpu_target_finds_the_remat_line_and_reshard_lowers_temp():
    rep = doctor_program(f"{PROG}:train_step", target="tpu-v5e:2x4", args=LARGE)
    remat = [f for f in rep.findings if f.full_remat]
    assert [f.line for f in remat] == [f"transformer_block.py:{_line_of('full remat')}"]
    fixed = doctor_program(f"{PROG}:train_step_fixed", target="tpu-v5e:2x4", args=LARGE)
    assert not any(f.full_remat for f in fixed.findings)
    assert fixed.temp_bytes < rep.temp_bytes, (fixed.temp_bytes, rep.temp_bytes)


def test_a_remat_inside_a_nested_jit_is_found_with_its_shardings():
    rep = doctor_program(f"{PROG}:train_step_nested")
    remat = [f for f in rep.findings if f.full_remat]
    assert len(remat) == 1
    f = remat[0]
    assert f.line == f"transformer_block.py:{_line_of('the remat happens inside this call')}"
    inner, helper = _line_of("return jax.lax.with_sharding_constraint"), _line_of("nested jit: the same layout")
    assert f.innermost == f"transformer_block.py:{inner} (_constrain)"
    assert f"transformer_block.py:{helper} _relayout" in f.chain
    assert (f.src, f.dst) == ("[8{y}, 64, 128{x}]", "[8, 64{x,y}, 128]") and f.fix


def test_hlo_folder_files_are_checked(tmp_path, monkeypatch):
    from executor import doctor
    from synth.errors import RedistributionError

    (tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt").write_text("not HLO at all\n")
    with pytest.raises(RedistributionError, match="HLO"):
        doctor_hlo_dir(str(tmp_path))
    (tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt").write_text("HloModule m\n" + "x" * 4096)
    monkeypatch.setattr(doctor, "MAX_HLO_BYTES", 1024)
    with pytest.raises(RedistributionError, match="limit"):
        doctor_hlo_dir(str(tmp_path))
    # a link is not followed out of the folder: only the link's target outside is there
    (tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt").unlink()
    outside = tmp_path.parent / f"{tmp_path.name}_outside.txt"
    outside.write_text("HloModule m\n")
    (tmp_path / "module_0002.jit_g.cpu_after_optimizations.txt").symlink_to(outside)
    with pytest.raises(ExecutorError, match="no optimized HLO modules"):
        doctor_hlo_dir(str(tmp_path))
