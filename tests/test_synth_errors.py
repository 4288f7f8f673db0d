"""A corpus of malformed inputs, each asserting its error message.

Library calls raise the one family (``RedistributionError``, a ``ValueError``);
the CLI prints one line and exits with status 2, without a traceback."""

import json
import subprocess
import sys

import pytest

from synth import ArrayType, Mesh, RedistributionError, synthesize
from synth.collectives import (
    AllGather,
    AllPermute,
    AllReduce,
    AllToAll,
    DynSlice,
    ReduceScatter,
    Unreduce,
)
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
    ("xé=2", MeshError, "not an identifier"),
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
    ("[8{x}, 8{x}]", "used in dim 0 and dim 1"),
    ("[8{x,x}]", "twice"),
    ("[0{x}]", "sizes must be >= 1"),
    ("[-4]", "sizes must be >= 1"),
    ("[8{1x}]", "neither an axis name"),
    ("[8 8]", "is not 'SIZE'"),
    # pending sums
    ("[8]{U:}", "'{U:}' names no axis"),
    ("[8]{U:x,}", "empty axis name"),
    ("[8]{V:x}", "only the unreduced set may follow"),
    ("[8{x}]{U:x}", "counting the unreduced set"),
    ("[8]{U:x,x}", "the same axis"),
    # sub-axes
    ("[8{x:(0)2}]", "needs pre >= 1"),
    ("[8{x:(1)1}]", "size >= 2"),
    ("[8{x:(1)2}, 4{x:(1)4}]", "overlapping factors"),
    ("[8{x}, 4{x:(2)4}]", "overlapping factors"),
    ("[8{x:(2)2}]{U:x:(1)4}", "overlapping factors"),
    ("[8{x:2}]", "neither an axis name"),
    # unicode axis names
    ("[8{é}]", "non-ASCII"),
    ("[8]{U:х}", "non-ASCII"),
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
    ("[8]{U:q}", "[8]", TypeSpecError, "the unreduced set uses axis 'q', which is not in mesh"),
    ("[8{y:(3)4}]", "[8]", TypeSpecError, "pre\\*size dividing 4"),
    ("[8{z:(1)2}]", "[8]", TypeSpecError, "not in mesh"),
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
    (DynSlice(0, "y"), "[6{x}]", "not divisible by y=4"),
    (DynSlice(0, "y"), "[8]{U:y}", "already used \\(the unreduced set\\)"),
    (AllGather(0, "x"), "[8{x,y}]", "must be the minor-most"),
    (AllGather(0, "x"), "[8]", "must be the minor-most"),
    (AllToAll(0, 0, "x"), "[8{x}]", "must differ"),
    (AllToAll(0, 1, "x"), "[8{x}, 4{y}]", "not divisible by x=2"),
    (AllToAll(0, 1, "y"), "[8{y,x}, 8]", "must be the minor-most"),
    (AllPermute(ArrayType.parse("[8{y}, 8]")), "[8{x}, 8]", "local shapes differ"),
    (AllPermute(ArrayType.parse("[16{x}]")), "[8{x}]", "global shapes differ"),
    (DynSlice(0, "z"), "[8]", "no axis named 'z'"),
    (AllReduce("x"), "[8]", "not in the unreduced set"),
    (AllReduce("x"), "[8{x}]", "not in the unreduced set"),
    (ReduceScatter(0, "y"), "[8]{U:x}", "not in the unreduced set"),
    (ReduceScatter(0, "y"), "[6{x}]{U:y}", "not divisible by y=4"),
    (ReduceScatter(2, "y"), "[8]{U:y}", "out of range"),
    (Unreduce("x"), "[8{x}]", "already used"),
    (Unreduce("y"), "[8]{U:y}", "already used"),
    (AllGather(0, "y"), "[10{x,y}]", "do not hold 4 whole shards"),
    (AllPermute(ArrayType.parse("[8{x}]")), "[8{x}]{U:y}", "unreduced sets differ"),
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
    (["plan", "--mesh", "x=2", "--src", "[8]{U:}", "--dst", "[8]"], "'{U:}' names no axis"),
    (["plan", "--mesh", "x=8", "--src", "[8{x:(0)2}]", "--dst", "[8]"], "needs pre >= 1"),
    (["plan", "--mesh", "x=8", "--src", "[8{x:(3)4}]", "--dst", "[8]"], "pre*size dividing 8"),
    (["plan", "--mesh", "x=2", "--src", "[8]{U:q}", "--dst", "[8]"], "axis 'q', which is not in mesh"),
    (["plan", "--mesh", "x=8", "--src", "[8{x:(1)4}, 4{x:(2)4}]", "--dst", "[8, 4]"], "overlapping factors"),
    (["plan", "--mesh", "x=2", "--src", "[8{\u00fc}]", "--dst", "[8]"], "non-ASCII"),
    (["plan", "--mesh", "x=2", "--src", "[8{x}]{U:x}", "--dst", "[8]"], "counting the unreduced set"),
    (["plan", "--itemsize", "zero"], "not an integer"),
    (["plan", "--planner", "magic"], "invalid choice"),
    (["plan", "--bogus"], "unrecognized arguments"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
    (["plan", "--itemsize", "-1"], "must be at least 1"),
    (["bench", "--cases", "0"], "must be at least 1"),
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

    r = _cli("plan", "--mesh", "x=2,y=4", "--src", "[8{y}, 16, 8{x}]", "--dst", "[8, 16{x,y}, 8]", "--json",
             "--planner", "normal")
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


def test_cli_accepts_the_new_forms():
    r = _cli("plan", "--mesh", "x=2,y=2", "--src", "[8]{U:x}", "--dst", "[8{x}]{U:y}", "--planner", "normal")
    assert r.returncode == 0, r.stderr
    assert "ReduceScatter(0, x)" in r.stdout and "Unreduce(y)" in r.stdout


def test_api_hostile_names_are_one_family():
    with pytest.raises(MeshError, match="not an identifier"):
        Mesh.of({"x\n": 2})
    with pytest.raises(MeshError, match="not an identifier"):
        Mesh((("x", 2), (3, 2)))
    # a string of axes is one axis name, never its letters
    t = ArrayType(((8, "xy"),))
    assert t.dims[0].axes == ("xy",) and str(t) == "[8{xy}]"
    with pytest.raises(TypeSpecError, match="not in mesh"):
        t.check(Mesh.parse("x=2,y=4"))
    with pytest.raises(TypeSpecError):
        ArrayType(((8, ("x", 3)),))
    with pytest.raises(TypeSpecError, match="non-ASCII"):
        ArrayType(((8, ()),), unreduced=("\u00fc",))
