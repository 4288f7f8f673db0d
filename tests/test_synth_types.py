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
    # uneven dims are valid (ceil-div padding, as JAX/GSPMD)
    assert ArrayType.parse("[6{y}]").check(mesh).local_shape(mesh) == (2,)
    with pytest.raises(MeshError):
        Mesh.parse("x=2,x=3")


def test_layering_heavy_imports_stay_in_their_packages():
    """synth imports no jax/simpy/plotly/streamlit; models+simulator and experiments no jax."""
    import subprocess
    import sys

    code = (
        "import sys, synth, synth.planners, synth.cli\n"
        "bad = [m for m in ('jax', 'simpy', 'plotly', 'streamlit') if m in sys.modules]\n"
        "assert not bad, ('synth', bad)\n"
        "import models, simulator, experiments.backends, experiments.runner\n"
        "assert 'jax' not in sys.modules, 'jax imported outside executor/'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_pending_sums_print_canonically_and_round_trip_through_partition_spec():
    t = ArrayType.parse("[1024{x}, 4096]{U: z , y}")
    assert str(t) == "[1024{x}, 4096]{U:y,z}" and t.unreduced == ("y", "z")
    assert ArrayType.parse(str(t)) == t and eval(repr(t)) == t
    assert t.spec_text() == "P('x', None, unreduced={'y','z'})"
    assert parse_type(t.spec_text(), t.shape) == t
    assert parse_type("PartitionSpec('x', unreduced={'z', 'y'})", (1024, 4096)) == t
    shape, spec = t.to_spec()
    assert ArrayType.from_spec(shape, spec, unreduced={"z", "y"}) == t
    assert t != ArrayType.parse("[1024{x}, 4096]")
    assert t.all_axes == ("x", "y", "z") and t.used_axes == ("x",)
    with pytest.raises(TypeSpecError, match="unknown keyword"):
        parse_type("P('x', reduced={'y'})", (8,))


def test_uneven_dims_pad_like_gspmd():
    mesh = Mesh.parse("x=8")
    t = ArrayType.parse("[50257{x}, 4]").check(mesh)
    assert str(t) == "[50257{x}, 4]" and t.local_shape(mesh) == (6283, 4) and not t.is_even(mesh)
    starts, stops = t.regions(mesh)
    assert starts[:, 0].tolist() == [i * 6283 for i in range(8)]
    assert stops[:, 0].tolist() == [min((i + 1) * 6283, 50257) for i in range(8)]
    # a trailing device may hold only padding
    t2 = ArrayType.parse("[3{x}]")
    s2, e2 = t2.regions(mesh)
    assert t2.local_shape(mesh) == (1,) and (e2 - s2)[:, 0].tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    blocks = scatter(np.arange(3), t2, mesh, pad=-1)
    assert [b.tolist() for b in blocks] == [[0], [1], [2]] + [[-1]] * 5


def test_sub_axes_blocks_and_canonical_form():
    mesh = Mesh.parse("x=8")
    t = ArrayType.parse("[16{x:(1)2}, 32{x:(2)4}]").check(mesh)
    assert t.local_shape(mesh) == (8, 8)
    idx = t.block_indices(mesh)
    assert idx[:, 0].tolist() == [d // 4 for d in range(8)]
    assert idx[:, 1].tolist() == [d % 4 for d in range(8)]
    # adjacent factors of one axis are the axis; a whole-axis factor is the axis
    assert str(ArrayType.parse("[16{x:(1)2,x:(2)4}]").check(mesh)) == "[16{x}]"
    assert str(ArrayType.parse("[16{x:(1)8}]").check(mesh)) == "[16{x}]"
    assert str(ArrayType.parse("[16]{U:x:(2)4,x:(1)2}").check(mesh)) == "[16]{U:x}"
    # the refined mesh keeps device ids; a whole axis becomes its factors
    from synth.types import refine

    work, (r,) = refine(mesh, [ArrayType.parse("[16{x}]")], names=["x:(2)4"])
    assert work.names == ("x:(1)2", "x:(2)4") and work.size == 8
    assert str(r) == "[16{x:(1)2,x:(2)4}]"
    assert (r.block_indices(work) == ArrayType.parse("[16{x}]").block_indices(mesh)).all()
    with pytest.raises(TypeSpecError, match="pre\\*size dividing 8"):
        ArrayType.parse("[8{x:(3)4}]").check(mesh)
    with pytest.raises(TypeSpecError, match="do not tile"):
        ArrayType.parse("[8{x:(1)2}, 8{x:(3)2}]").check(Mesh.parse("x=12"))


def test_pending_scatter_sums_to_the_truth():
    from synth.interp import check_blocks, unreduced_groups

    mesh = Mesh.parse("x=2,y=4")
    t = ArrayType.parse("[8{x}, 6]{U:y}")
    x = np.arange(48).reshape(8, 6)
    blocks = scatter(x, t, mesh, rng=np.random.default_rng(1))
    groups = unreduced_groups(t, mesh)
    assert groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert not np.array_equal(blocks[0], x[:4])  # random parts, not the block itself
    np.testing.assert_array_equal(sum(blocks[d] for d in groups[1]), x[4:])
    check_blocks(x, blocks, t, mesh)
