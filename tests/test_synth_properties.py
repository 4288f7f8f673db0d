"""Property tests of the planners (hypothesis, >= 500 random cases per run).

For every case and planner: the plan ends at the target type, the numpy reference
executor gives exactly the target blocks (checked element by element, after every
step), the ``normal`` memory guarantee holds under its precondition, and the
``normal`` plan never receives more bytes than the ``easy`` plan; the ``search`` plan is
exact, within budget whenever ``normal`` is, and never costlier than ``normal``.
"""

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth import ArrayType, Dim, Mesh, interpret, scatter, synthesize

AXIS_SIZES = (1, 2, 3, 4, 5, 6, 8)
NAMES = ("a", "b", "c", "d", "e")
MAX_DEVICES = 128


@st.composite
def meshes(draw, max_devices=MAX_DEVICES):
    n = draw(st.integers(1, 5))
    sizes = []
    for _ in range(n):
        room = max_devices // math.prod(sizes) if sizes else max_devices
        sizes.append(draw(st.sampled_from([s for s in AXIS_SIZES if s <= room])))
    return Mesh(tuple(zip(NAMES, sizes)))


def _placement(draw, mesh, rank):
    """Assign every mesh axis to a dim or to nothing, in a random order per dim."""
    dims = [[] for _ in range(rank)]
    for name in draw(st.permutations(mesh.names)):
        k = draw(st.integers(-1, rank - 1))
        if k >= 0:
            dims[k].append(name)
    return [tuple(d) for d in dims]


@st.composite
def general_cases(draw):
    """Any valid pair of types: each dim a multiple of what both types split it by."""
    mesh = draw(meshes())
    rank = draw(st.integers(1, 4))
    s_axes, d_axes = _placement(draw, mesh, rank), _placement(draw, mesh, rank)
    shape = []
    for sa, da in zip(s_axes, d_axes):
        need = math.lcm(math.prod(mesh.shape[a] for a in sa), math.prod(mesh.shape[a] for a in da))
        shape.append(need * draw(st.sampled_from((1, 1, 2, 3))))
    src = ArrayType(tuple(Dim(s, a) for s, a in zip(shape, s_axes)))
    dst = ArrayType(tuple(Dim(s, a) for s, a in zip(shape, d_axes)))
    return mesh, src, dst


@st.composite
def precondition_cases(draw):
    """Every dim divisible by the product of all mesh axis sizes."""
    mesh = draw(meshes(max_devices=64))
    p = mesh.size
    max_rank = max(r for r in (1, 2, 3, 4) if p**r <= 1 << 16)
    rank = draw(st.integers(1, max_rank))
    shape = [p * draw(st.sampled_from((1, 2))) for _ in range(rank)]
    s_axes, d_axes = _placement(draw, mesh, rank), _placement(draw, mesh, rank)
    src = ArrayType(tuple(Dim(s, a) for s, a in zip(shape, s_axes)))
    dst = ArrayType(tuple(Dim(s, a) for s, a in zip(shape, d_axes)))
    return mesh, src, dst


def check_plan_exact(plan):
    """Run the plan on a concrete array and compare every device's block."""
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    blocks = interpret(plan.steps, plan.src, plan.mesh, x)
    expect = scatter(x, plan.dst, plan.mesh)
    assert len(blocks) == plan.mesh.size
    for got, want in zip(blocks, expect):
        np.testing.assert_array_equal(got, want)


def check_both_planners(mesh, src, dst):
    plans = {p: synthesize(mesh, src, dst, planner=p) for p in ("easy", "normal")}
    for plan in plans.values():
        assert plan.types[-1] == dst if plan.steps else src == dst
        check_plan_exact(plan)
        assert plan.recv_bytes_max_device >= plan.recv_lower_bound_bytes
    assert plans["normal"].recv_bytes_max_device <= plans["easy"].recv_bytes_max_device, (
        [str(s) for s in plans["normal"].steps], [str(s) for s in plans["easy"].steps]
    )
    search = synthesize(mesh, src, dst, planner="search")
    check_plan_exact(search)
    from synth.planners.search import plan_cost

    if plans["normal"].bound_holds:
        # normal is a candidate within the budget, so the search can only do better
        assert search.bound_holds
        assert plan_cost(search) <= plan_cost(plans["normal"]) + 1e-12
    plans["search"] = search
    return plans


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(general_cases())
def test_general_cases_exact_and_no_worse_than_easy(case):
    check_both_planners(*case)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(precondition_cases())
def test_normal_memory_guarantee_under_precondition(case):
    mesh, src, dst = case
    plans = check_both_planners(mesh, src, dst)
    normal = plans["normal"]
    assert not normal.notes, normal.notes
    assert normal.bound_holds
    assert normal.max_shard_bytes <= max(src.shard_elems(mesh), dst.shard_elems(mesh)) * 4
    # Normal form: slices, then all-to-alls/permutes, then gathers; at most one permute.
    order = {"dyn_slice": 0, "all_to_all": 1, "all_permute": 1, "all_gather": 2}
    # (relabelling steps over size-1 axes move nothing and may sit at either end)
    phases = [order[s.kind] for s, noop in zip(normal.steps, normal.noop_steps) if not noop]
    assert phases == sorted(phases)
    real_permutes = [s for s, noop in zip(normal.steps, normal.noop_steps)
                     if s.kind == "all_permute" and not noop]
    assert len(real_permutes) <= 1
