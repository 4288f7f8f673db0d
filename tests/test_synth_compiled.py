"""The compiled copies of the synthesizer's hot modules (``synth.compiled``, built by
``python -m synth.build``; ``make setup`` builds them).

* in this test run every module of ``synth.compiled.MODULES`` is the compiled copy (unless
  ``SYNTH_PURE_PYTHON`` asks for pure Python): the suite runs what the benchmarks time;
* a compiled copy and its source compute the same plans: the same steps and types, the same
  search (states, moves, claims, time), each plan checked element by element; the pure run
  is a subprocess with ``SYNTH_PURE_PYTHON=1``;
* the finder uses a compiled copy only while its source's SHA-256 is the one it was built
  from: an edited source, a missing extension, a manifest of another Python, a manifest
  out of schema, too large, or a link all give the ``.py``;
* ``python -m synth.build`` refuses bad arguments and an output folder that is a link in one
  line, exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from synth import compiled
from synth.bench import bench_cases, check_plan_exact, plan_digest
from synth.planners import synthesize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PURE = os.environ.get(compiled.ENV_PURE, "") not in ("", "0")

#: bench cases (seed 0) planned both ways, each with at most 20,000 elements (the
#: interpreter checks every one): 24 quick ones and three that spend the whole work budget
#: (their search is the hot loop the compiled copies speed up)
CASES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 20, 21, 22, 23, 25, 27, 30, 31,
         297, 186, 128]
FIELDS = ("status", "optimal", "time_s", "bytes_moved", "collectives", "optimum_s", "lower_bound_s",
          "states", "moves", "ties", "max_shard_bytes", "min_max_shard_bytes", "optimal_over")

_SCRIPT = r"""
import json, sys
from synth import compiled
from synth.bench import bench_cases, plan_digest
from synth.planners import synthesize
idx = json.loads(sys.argv[1]); fields = json.loads(sys.argv[2])
cases = bench_cases(max(idx) + 1, 0)
out = {"status": compiled.status(), "plans": []}
for k in idx:
    p = synthesize(*cases[k], planner="auto")
    out["plans"].append([plan_digest(p), {f: p.search.get(f) for f in fields}])
print(json.dumps(out))
"""


def _search_fields(p):
    return {f: p.search.get(f) for f in FIELDS}


@pytest.mark.skipif(PURE, reason="SYNTH_PURE_PYTHON is set: this run checks the pure modules")
def test_every_hot_module_runs_compiled():
    st = compiled.status()
    assert st["mode"] == "compiled", (
        f"synthesizer modules not compiled: {compiled.summary()}; run `python -m synth.build` "
        "(make setup does)")
    for name in compiled.MODULES:
        assert compiled.is_compiled(sys.modules[name]), name


@pytest.mark.slow
def test_compiled_and_pure_modules_give_the_same_plans():
    env = dict(os.environ, **{compiled.ENV_PURE: "1", "PYTHONPATH": ROOT})
    r = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(CASES), json.dumps(FIELDS)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    pure = json.loads(r.stdout)
    assert pure["status"]["mode"] == "pure Python"
    assert not pure["status"]["compiled"]
    cases = bench_cases(max(CASES) + 1, 0)
    for k, (dig, fields) in zip(CASES, pure["plans"]):
        assert cases[k][1].num_elems() <= 20_000
        p = synthesize(*cases[k], planner="auto")
        check_plan_exact(p)
        assert plan_digest(p) == dig, f"bench case {k}: another plan"
        assert _search_fields(p) == fields, f"bench case {k}: another search"
    # the comparison covers real search: the budget-bound cases spent the whole budget
    spent = [f["moves"] for (_, f) in pure["plans"][-3:]]
    assert min(spent) >= 50000


def _manifest(tmp_path, name, sha, fname="m.so", suffix=None):
    return {"ext_suffix": suffix or compiled._ext_suffix(), "cython": "x",
            "modules": {name: {"sha256": sha, "file": fname}}}


def test_finder_uses_a_compiled_copy_only_while_its_source_is_unchanged(tmp_path):
    name = "synth.interp"
    sha = compiled.source_hash(name)
    (tmp_path / "m.so").write_bytes(b"\0")  # never loaded here: find_spec only names it

    f = compiled.CompiledFinder(_manifest(tmp_path, name, sha), str(tmp_path))
    spec = f.find_spec(name)
    assert spec is not None and spec.origin == str(tmp_path / "m.so") and f.why[name] == "compiled"
    assert f.find_spec("synth.bench") is None  # not in the manifest: the usual finders

    stale = compiled.CompiledFinder(_manifest(tmp_path, name, "0" * 64), str(tmp_path))
    assert stale.find_spec(name) is None and stale.why[name] == "stale"

    gone = compiled.CompiledFinder(_manifest(tmp_path, name, sha, fname="absent.so"), str(tmp_path))
    assert gone.find_spec(name) is None and gone.why[name] == "missing"

    other = compiled.CompiledFinder(_manifest(tmp_path, name, sha, suffix=".cpython-29-x.so"), str(tmp_path))
    assert other.find_spec(name) is None  # built for another Python: nothing is used

    os.symlink(tmp_path / "m.so", tmp_path / "link.so")
    linked = compiled.CompiledFinder(_manifest(tmp_path, name, sha, fname="link.so"), str(tmp_path))
    assert linked.find_spec(name) is None and linked.why[name] == "missing"


def test_manifest_has_a_schema_and_a_size_cap(tmp_path):
    p = tmp_path / compiled.MANIFEST
    good = _manifest(tmp_path, "synth.interp", "a" * 64)
    p.write_text(json.dumps(good))
    assert compiled.read_manifest(str(tmp_path)) == good
    for bad in ({"modules": {}}, {"ext_suffix": 3, "modules": {}}, [],
                {"ext_suffix": ".so", "modules": {"synth.interp": {"sha256": "a", "file": "../x.so"}}},
                {"ext_suffix": ".so", "modules": {"synth.interp": {"sha256": 1, "file": "x.so"}}}):
        p.write_text(json.dumps(bad))
        assert compiled.read_manifest(str(tmp_path)) is None, bad
    p.write_text("{not json")
    assert compiled.read_manifest(str(tmp_path)) is None
    p.write_text(json.dumps(good) + " " * compiled.MAX_MANIFEST_BYTES)
    assert compiled.read_manifest(str(tmp_path)) is None
    p.unlink()
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps(good))
    os.symlink(other, p)
    assert compiled.read_manifest(str(tmp_path)) is None


def test_build_refuses_a_linked_output_folder(tmp_path):
    from synth.build import build
    from synth.errors import RedistributionError

    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    os.symlink(real, link)
    with pytest.raises(RedistributionError, match="is a link"):
        build(out_dir=str(link))
    assert not any(real.iterdir())


@pytest.mark.parametrize("argv", [["--jobs", "0"], ["--jobs", "x"], ["--bogus"]])
def test_build_cli_bad_arguments_one_line_exit_2(argv):
    r = subprocess.run([sys.executable, "-m", "synth.build", *argv], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error: ")
    assert "Traceback" not in r.stderr


def test_build_status_reports_each_module():
    r = subprocess.run([sys.executable, "-m", "synth.build", "--status", "--json"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert sorted(st["compiled"] + list(st["pure"])) == sorted(compiled.MODULES)
    assert st["mode"] == compiled.status()["mode"]


def test_a_declaration_edit_makes_every_compiled_copy_stale(tmp_path, monkeypatch):
    # moves.pxd declares Space's C layout, which astar's compiled copy reads: each module's
    # recorded hash covers every .pxd, so editing one refuses all copies until a rebuild
    paths = compiled.pxd_paths()
    assert [os.path.relpath(p, ROOT) for p in paths] == ["synth/planners/moves.pxd",
                                                         "synth/planners/astar.pxd"]
    before = {n: compiled.source_hash(n) for n in ("synth.interp", "synth.planners.astar")}
    edited = tmp_path / "moves.pxd"
    edited.write_text(open(paths[0]).read() + "\n# edited\n")
    monkeypatch.setattr(compiled, "pxd_paths", lambda: [str(edited)] + paths[1:])
    after = {n: compiled.source_hash(n) for n in before}
    assert all(before[n] != after[n] for n in before)
    (tmp_path / "m.so").write_bytes(b"\0")
    f = compiled.CompiledFinder(_manifest(tmp_path, "synth.interp", before["synth.interp"]),
                                str(tmp_path))
    assert f.find_spec("synth.interp") is None and f.why["synth.interp"] == "stale"


@pytest.mark.skipif(PURE, reason="SYNTH_PURE_PYTHON is set: this run checks the pure modules")
def test_the_compiled_space_is_an_extension_type_with_typed_attributes():
    # moves.pxd: Space's attributes are C fields; one of a declared type takes no other
    from synth.mesh import Mesh
    from synth.planners import auto
    from synth.planners.moves import Space
    from synth.types import ArrayType

    mesh = Mesh.parse("x=2")
    sp = Space(mesh, ArrayType.parse("[4{x}]"), ArrayType.parse("[4]"), 4, auto.DefaultCost(), 4)
    assert not hasattr(sp, "__dict__")
    with pytest.raises(TypeError):
        sp.states = ()  # declared a list
    with pytest.raises(TypeError):
        Space.intern = None  # an extension type's methods are fixed (tests subclass it)
    sp.tick = len  # an object attribute takes anything
    assert sp.intern(sp.S0) == 0 and sp.states == [sp.S0]


def test_the_pure_modules_run_without_cython(tmp_path):
    # `import cython` (pure-Python mode declarations) falls back to no-op declarations
    script = ("import sys; sys.modules['cython'] = None\n"
              "from synth.planners import synthesize\n"
              "from synth.planners import moves, astar\n"
              "assert moves.cython.__name__ == 'synth.planners._nocython', moves.cython\n"
              "p = synthesize('x=2,y=2', '[4{x}, 4{y}]', '[4{y}, 4{x}]')\n"
              "print(p.search['status'], p.num_collectives)\n")
    env = dict(os.environ, **{compiled.ENV_PURE: "1", "PYTHONPATH": ROOT})
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["optimal", "1"]


def test_a_build_with_other_compiler_flags_is_stale(tmp_path):
    # the manifest records the flags it was built with: a build of other flags (or of
    # none recorded, before round 13's -O3) is rebuilt by --if-stale, one of these kept
    from synth import build

    name = "synth.interp"
    sha = compiled.source_hash(name)
    (tmp_path / "m.so").write_bytes(b"\0")
    m = _manifest(tmp_path, name, sha)
    for flags, state in ((None, "to build"), (["-O2", "-g0"], "to build"),
                         (list(build.CFLAGS), "up to date")):
        if flags is not None:
            m["cflags"] = flags
        (tmp_path / compiled.MANIFEST).write_text(json.dumps(m))
        assert build.plan_build(str(tmp_path), (name,))[name]["state"] == state, flags
