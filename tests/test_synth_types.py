"""Meshes and distributed array types: parsing, printing, specs, blocks."""

import numpy as np
import pytest

from synth import ArrayType, Dim, Mesh, parse_type, scatter
from synth.errors import MeshError, TypeSpecError


def test_mesh_parse_keeps_order_and_prints_back():
    m = Mesh.parse(" y=4 , x=2")
    assert m.names == ("y", "x") and m.sizes == (4, 2) and m.size == 8
    assert str(m) == "y=4,x=2"
    assert eval(repr(m)) == m
    assert Mesh.of({"y": 4, "x": 2}) == m


def test_mesh_coords_are_row_major():
    m = Mesh.parse("x=2,y=3")
    assert m.coords.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    assert m.device_id({"x": 1, "y": 2}) == 5
    assert m.groups("x") == [[0, 3], [1, 4], [2, 5]]
    assert m.groups("y") == [[0, 1, 2], [3, 4, 5]]


def test_type_canonical_round_trip():
    t = ArrayType.parse("[1024{x}, 4096{ y , z }, 8{}]")
    assert str(t) == "[1024{x}, 4096{y,z}, 8]"
    assert ArrayType.parse(str(t)) == t
    assert t.dims[1] == Dim(4096, ("y", "z"))
    assert repr(t) == "ArrayType.parse('[1024{x}, 4096{y,z}, 8]')"
    assert eval(repr(t)) == t


def test_spec_round_trip():
    t = ArrayType.parse("[8{x}, 16{y,z}, 4]")
    shape, spec = t.to_spec()
    assert shape == (8, 16, 4) and spec == ("x", ("y", "z"), None)
    assert ArrayType.from_spec(shape, spec) == t
    assert ArrayType.from_spec((8, 4), ("x",)) == ArrayType.parse("[8{x}, 4]")


def test_parse_type_accepts_partition_spec_form():
    assert parse_type("P('x', None, ('y','z'))", (8, 4, 16)) == ArrayType.parse("[8{x}, 4, 16{y,z}]")
    assert parse_type("PartitionSpec(None, 'y')", (8, 4)) == ArrayType.parse("[8, 4{y}]")
    assert parse_type("[8{x}, 4]", (8, 4)) == ArrayType.parse("[8{x}, 4]")
    with pytest.raises(TypeSpecError, match="shape"):
        parse_type("[8{x}, 4]", (8, 8))


def test_local_shape_and_block_index_are_mixed_radix_major_to_minor():
    mesh = Mesh.parse("x=2,y=3")
    t = ArrayType.parse("[12{y,x}, 2]")
    assert t.local_shape(mesh) == (2, 2)
    # block index = y * 2 + x (y major, x minor)
    idx = t.block_indices(mesh)[:, 0]
    expect = [c[1] * 2 + c[0] for c in mesh.coords.tolist()]
    assert idx.tolist() == expect


def test_scatter_gives_each_device_its_block():
    mesh = Mesh.parse("x=2,y=2")
    t = ArrayType.parse("[4{x}, 4{y}]")
    x = np.arange(16).reshape(4, 4)
    blocks = scatter(x, t, mesh)
    np.testing.assert_array_equal(blocks[1], x[0:2, 2:4])  # x=0, y=1
    np.testing.assert_array_equal(blocks[2], x[2:4, 0:2])  # x=1, y=0


def test_check_against_mesh():
    mesh = Mesh.parse("x=2,y=4")
    ArrayType.parse("[8{x,y}]").check(mesh)
    with pytest.raises(TypeSpecError, match="not in mesh"):
        ArrayType.parse("[8{q}]").check(mesh)
    with pytest.raises(TypeSpecError, match="not divisible"):
        ArrayType.parse("[6{y}]").check(mesh)
    with pytest.raises(MeshError):
        Mesh.parse("x=2,x=3")


def test_layering_heavy_imports_stay_in_their_packages():
    """synth imports no jax/simpy/plotly/streamlit; models+simulator and experiments no jax."""
    import subprocess
    import sys

    code = (
        "import sys, synth, synth.search, synth.cli\n"
        "bad = [m for m in ('jax', 'simpy', 'plotly', 'streamlit') if m in sys.modules]\n"
        "assert not bad, ('synth', bad)\n"
        "import models, simulator, experiments.backends, experiments.runner\n"
        "assert 'jax' not in sys.modules, 'jax imported outside executor/'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
