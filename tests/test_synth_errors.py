"""A corpus of malformed inputs, each asserting its error message.

Library calls raise the one family (``RedistributionError``, a ``ValueError``);
the CLI prints one line and exits with status 2, without a traceback."""

import json
import subprocess
import sys

import pytest

from synth import ArrayType, Mesh, RedistributionError, synthesize
from synth.collectives import AllGather, AllPermute, AllToAll, DynSlice
from synth.errors import CollectiveError, MeshError, PlanError, TypeSpecError

BAD_MESHES = [
    ("", MeshError, "empty mesh"),
    ("x", MeshError, "not 'name=size'"),
    ("x=2,", MeshError, "not 'name=size'"),
    ("x=two", MeshError, "not an integer"),
    ("x=0", MeshError, "sizes must be >= 1"),
    ("x=-2", MeshError, "sizes must be >= 1"),
    ("x=2,x=4", MeshError, "appears twice"),
    ("2x=2", MeshError, "not an identifier"),
    ("x y=2", MeshError, "not an identifier"),
    ("x=2.5", MeshError, "not an integer"),
]

BAD_TYPES = [
    ("8{x}", "brackets"),
    ("[]", "at least one dimension"),
    ("[8{x}", "brackets"),
    ("[8{x,}]", "empty axis name"),
    ("[8{x}, {y}]", "is not 'SIZE'"),
    ("[eight]", "is not 'SIZE'"),
    ("[8{x{y}}]", "nested braces"),
    ("[8}x{]", "unbalanced"),
    ("[8{x}, 8{x}]", "used in dims 0 and 1"),
    ("[8{x,x}]", "twice"),
    ("[0{x}]", "sizes must be >= 1"),
    ("[-4]", "sizes must be >= 1"),
    ("[8{1x}]", "not an identifier"),
    ("[8 8]", "is not 'SIZE'"),
]

MESH = Mesh.parse("x=2,y=4")


@pytest.mark.parametrize("text,exc,msg", BAD_MESHES)
def test_bad_mesh(text, exc, msg):
    with pytest.raises(exc, match=msg) as e:
        Mesh.parse(text)
    assert isinstance(e.value, RedistributionError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("text,msg", BAD_TYPES)
def test_bad_type(text, msg):
    with pytest.raises(TypeSpecError, match=msg):
        ArrayType.parse(text)


@pytest.mark.parametrize("src,dst,exc,msg", [
    ("[8{q}]", "[8]", TypeSpecError, "axis 'q', which is not in mesh"),
    ("[6{y}]", "[6]", TypeSpecError, "global size 6, not divisible by y=4"),
    ("[8]", "[6{x}, 4]", PlanError, "different global shapes"),
    ("[8, 8]", "[8{x,y}, 3{}]", PlanError, "different global shapes"),
    ("[8{x}]", "[8{x,y}, 2]", PlanError, "different global shapes"),
])
def test_bad_pairs(src, dst, exc, msg):
    with pytest.raises(exc, match=msg):
        synthesize(MESH, src, dst)


def test_bad_planner_and_itemsize():
    with pytest.raises(RedistributionError, match="unknown planner 'fast'"):
        synthesize(MESH, "[8]", "[8{x}]", planner="fast")
    with pytest.raises(RedistributionError, match="itemsize must be a positive integer"):
        synthesize(MESH, "[8]", "[8{x}]", itemsize=0)


@pytest.mark.parametrize("c,t,msg", [
    (DynSlice(0, "x"), "[8{x}]", "already used"),
    (DynSlice(1, "x"), "[8]", "out of range"),
    (DynSlice(0, "y"), "[2]", "not divisible by y=4"),
    (AllGather(0, "x"), "[8{x,y}]", "must be the minor-most"),
    (AllGather(0, "x"), "[8]", "must be the minor-most"),
    (AllToAll(0, 0, "x"), "[8{x}]", "must differ"),
    (AllToAll(0, 1, "x"), "[8{x}, 4{y}]", "not divisible by x=2"),
    (AllToAll(0, 1, "y"), "[8{y,x}, 8]", "must be the minor-most"),
    (AllPermute(ArrayType.parse("[8{y}, 8]")), "[8{x}, 8]", "local shapes differ"),
    (AllPermute(ArrayType.parse("[16{x}]")), "[8{x}]", "global shapes differ"),
    (DynSlice(0, "z"), "[8]", "no axis named 'z'"),
])
def test_type_rule_errors(c, t, msg):
    with pytest.raises(CollectiveError if "axis named" not in msg else MeshError, match=msg):
        c.apply(ArrayType.parse(t), MESH)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True)


@pytest.mark.parametrize("args,msg", [
    (["plan", "--mesh", "x=2,x=2"], "appears twice"),
    (["plan", "--mesh", "x=2", "--src", "[8{y}]", "--dst", "[8]"], "not in mesh"),
    (["plan", "--mesh", "x=2", "--src", "[8{x}", "--dst", "[8]"], "brackets"),
    (["plan", "--mesh", "x=3", "--src", "[8{x}]", "--dst", "[8]"], "not divisible"),
    (["plan", "--itemsize", "zero"], "invalid int value"),
    (["plan", "--planner", "magic"], "invalid choice"),
    (["plan", "--bogus"], "unrecognized arguments"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
    (["plan", "--itemsize", "-1"], "itemsize must be a positive integer"),
    (["bench", "--cases", "0"], "--cases must be >= 1"),
])
def test_cli_bad_input_exits_2_with_one_line(args, msg):
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert msg in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""


def test_cli_json_is_one_document_and_exact():
    import numpy as np

    from synth import Plan, interpret, scatter

    r = _cli("plan", "--mesh", "x=2,y=4", "--src", "[8{y}, 16, 8{x}]", "--dst", "[8, 16{x,y}, 8]", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["mesh"] == {"x": 2, "y": 4} and doc["planner"] == "normal"
    plan = Plan.from_dict(doc)
    x = np.arange(plan.src.num_elems()).reshape(plan.src.shape)
    for got, want in zip(interpret(plan.steps, plan.src, plan.mesh, x), scatter(x, plan.dst, plan.mesh)):
        np.testing.assert_array_equal(got, want)


def test_cli_table_and_help():
    r = _cli("plan")
    assert r.returncode == 0 and "collective" in r.stdout and "AllToAll" in r.stdout
    h = _cli("plan", "--help")
    assert h.returncode == 0 and "--planner" in h.stdout
