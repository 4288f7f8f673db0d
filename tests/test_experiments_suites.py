"""Suites: every case is a valid redistribution on its mesh, and every plan we would
run for it moves the data exactly (checked element by element with the numpy
interpreter on a scaled-down array with the same sharding)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments.case import Case, ExperimentError
from experiments.suites import SUITES, load_suite
from synth import ArrayType, Dim, interpret, scatter, synthesize
from synth.interp import check_blocks

ALL = [c for name in SUITES for c in load_suite(name)]


def _ids(cases):
    return [f"{c.suite}:{c.name}" for c in cases]


def test_suites_have_what_the_issue_asks():
    tr = load_suite("transformer")
    assert len(tr) >= 20
    sizes = {c.num_devices for c in tr}
    assert min(sizes) <= 8 and max(sizes) == 4096
    assert all(c.layout and c.description for c in tr)
    xi = load_suite("xla-issues")
    assert all(c.ref.startswith("https://github.com/") for c in xi)
    # The 4x2 P('y', None, 'x') -> P(None, ('x','y'), None) case, exactly.
    c = next(c for c in xi if c.name == "jax-21562-4x2")
    mesh, src, dst = c.parsed()
    assert str(mesh) == "x=4,y=2"
    assert src == ArrayType.from_spec((16, 16, 16), ("y", None, "x"))
    assert dst == ArrayType.from_spec((16, 16, 16), (None, ("x", "y"), None))


def test_suites_have_the_new_types():
    tr = {c.name: c for c in load_suite("transformer")}
    for name in ("megatron-tp-to-sp-8", "fsdp-grad-reduce-scatter-8", "vocab-50257-logits-to-seq-8",
                 "heads-6way-ulysses-6", "fsdp8-to-fsdp2-tp4-subaxes-8"):
        assert name in tr
    assert tr["megatron-tp-to-sp-8"].src == "[8{dp}, 2048, 1024]{U:tp}"
    ps = load_suite("pending-sums")
    assert len(ps) >= 10 and all("{U:" in c.src for c in ps)
    assert any(c.num_devices > 8 for c in ps) and sum(c.num_devices == 8 for c in ps) >= 6
    # the issue's Megatron TP -> SP case is one reduce-scatter that receives exactly the bound
    mesh, src, dst = tr["megatron-tp-to-sp-8"].parsed()
    plan = synthesize(mesh, src, dst, planner="normal", itemsize=2)
    assert [str(c) for c in plan.steps] == ["ReduceScatter(1, tp)"]
    assert plan.recv_bytes_max_device == plan.recv_lower_bound_bytes and plan.bound_holds


def test_case_names_are_unique_per_suite():
    for name in SUITES:
        names = [c.name for c in load_suite(name)]
        assert len(names) == len(set(names)), name


@pytest.mark.parametrize("case", ALL, ids=_ids(ALL))
def test_case_is_valid_on_its_mesh(case):
    mesh, src, dst = case.parsed()
    src.check(mesh)
    dst.check(mesh)
    assert src.shape == dst.shape
    assert src != dst
    assert case.check() is case
    assert case.itemsize in (1, 2, 4, 8)


def test_random_suite_is_seeded_and_sized():
    a = load_suite("random", count=7, seed=3, max_devices=16)
    b = load_suite("random", count=7, seed=3, max_devices=16)
    c = load_suite("random", count=7, seed=4, max_devices=16)
    assert a == b and len(a) == 7
    assert a != c
    assert all(8 <= x.num_devices <= 16 for x in a)
    assert load_suite("random", count=0) == []


def test_suite_filters_and_errors():
    small = load_suite("transformer", max_devices=64)
    assert small and all(c.num_devices <= 64 for c in small)
    two = load_suite("xla-issues", names=["jax-21562-4x2", "alpa-701-4"])
    assert [c.name for c in two] == ["jax-21562-4x2", "alpa-701-4"]
    with pytest.raises(ExperimentError, match="unknown suite"):
        load_suite("nope")
    with pytest.raises(ExperimentError, match="no case named"):
        load_suite("transformer", names=["nope"])
    with pytest.raises(ExperimentError, match="unknown parameter"):
        load_suite("transformer", count=3)
    with pytest.raises(ExperimentError, match="count"):
        load_suite("random", count=-1)
    with pytest.raises(ValueError, match="dtype"):
        Case("bad", "inline", "x=2", "[4{x}]", "[4]", dtype="float12")


# -- element-by-element checks on scaled-down arrays ------------------------------------------
MAX_ELEMS = 1 << 22


def _structure(plan):
    """The plan's steps without sizes: what must not change when the shape shrinks."""
    out = []
    for c, t in zip(plan.steps, plan.types):
        d = c.to_dict()
        d.pop("target", None)
        out.append((tuple(sorted((k, str(v)) for k, v in d.items())), tuple(x.axes for x in t.dims)))
    return out


def _scaled(case, planner):
    """A smaller array with the same sharding whose plan has the same steps as the
    full-size plan; ``(plan_full, plan_small)``."""
    mesh, src, dst = case.parsed()
    full = synthesize(mesh, src, dst, planner=planner, itemsize=case.itemsize)
    want = _structure(full)
    # Start from the least each dim needs for the source and target splits; grow
    # every dim by 2 until the plan has the same steps as at full size.
    need = [max(src.split(mesh, i), dst.split(mesh, i)) for i in range(src.rank)]
    mult = 1
    while True:
        shape = [min(d.size, n * mult) for d, n in zip(src.dims, need)]
        # an even dim keeps dividing its size; an uneven one keeps its remainder
        shape = [s if d.size % s == 0 else (min(d.size, s + d.size % n) if d.size % n else d.size)
                 for s, d, n in zip(shape, src.dims, need)]
        if math.prod(shape) > MAX_ELEMS:
            return full, None
        s2 = ArrayType(tuple(Dim(n, d.axes) for n, d in zip(shape, src.dims)), src.unreduced)
        d2 = ArrayType(tuple(Dim(n, d.axes) for n, d in zip(shape, dst.dims)), dst.unreduced)
        if s2.is_valid(mesh) and d2.is_valid(mesh):
            small = synthesize(mesh, s2, d2, planner=planner, itemsize=case.itemsize)
            if _structure(small) == want:
                return full, small
        if shape == list(src.shape):
            return full, None
        mult *= 2


#: The easy plan gathers the whole array on every device, so the interpreter holds
#: devices x elements values; above this many the data check would need many GB.
MAX_REPLICATED = 1 << 28


@pytest.mark.parametrize("planner", ["normal", "easy"])
@pytest.mark.parametrize("case", ALL, ids=_ids(ALL))
def test_plan_moves_data_exactly(case, planner):
    full, small = _scaled(case, planner)
    assert full.bound_holds or planner == "easy"
    assert small is not None, (
        f"{case.name}: no scaled-down shape up to {MAX_ELEMS} elements gives the same {planner} plan"
    )
    mesh = small.mesh
    if planner == "easy" and math.prod(small.src.shape) * mesh.size > MAX_REPLICATED:
        # Too big to hold replicated: check the types along the plan instead (every
        # step's type rule, ending exactly at the target), and the data on the
        # normal plan of the same case (the other parametrization).
        t = small.src
        for c in small.steps:
            t = c.apply(t, mesh)
        assert t == small.dst and full.max_shard_bytes == full.shard_bytes(ArrayType(
            tuple(Dim(d.size) for d in full.src.dims)))
        return
    x = np.arange(math.prod(small.src.shape), dtype=np.int64).reshape(small.src.shape)
    wm, wt = small.work_mesh, small.work_types  # sub-axes: the refined mesh
    blocks = interpret(small.steps, wt[0], wm, x)  # checks every step (pending sums summed)
    assert len(blocks) == mesh.size
    if not wt[-1].unreduced and wt[-1].is_even(wm):
        want = scatter(x, wt[-1], wm)
        for d in range(mesh.size):
            np.testing.assert_array_equal(blocks[d], want[d], err_msg=f"{case.name} device {d}")
    else:
        check_blocks(x, blocks, wt[-1], wm, case.name)
