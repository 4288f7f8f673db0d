"""Property tests: on random redistributions, random machines and random placements,
the simulator keeps its invariants. Every plan is checked element by element."""

import random

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from models import load_profile
from simulator import simulate_plan
from synth import interpret, scatter, synthesize
from synth.bench import random_case


def check_data(plan):
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    blocks = interpret(plan.steps, plan.src, plan.mesh, x)
    for got, want in zip(blocks, scatter(x, plan.dst, plan.mesh)):
        assert got.shape == want.shape and np.array_equal(got, want)


def machine_for(mesh, family, rng):
    sizes = [s for s in mesh.sizes]
    if family == "torus":
        dims = (sizes + [1, 1, 1])[:3] if len(sizes) <= 3 else [mesh.size, 1, 1]
        return load_profile("tpu-v4:" + "x".join(str(d) for d in dims))
    if family == "switched" and mesh.size % 2 == 0 and mesh.size // 2 <= 8:
        return load_profile(f"dgx-h100:2x{mesh.size // 2}")
    return load_profile(f"cpu-host:{mesh.size}")


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), family=st.sampled_from(["torus", "switched", "cpu"]),
       planner=st.sampled_from(["normal", "easy"]), shuffle=st.booleans())
def test_random_plans_keep_the_simulator_invariants(seed, family, planner, shuffle):
    rng = random.Random(seed)
    mesh, src, dst = random_case(rng, max_axes=3, max_rank=3)
    assume(mesh.size <= 64)
    plan = synthesize(mesh, src, dst, planner=planner, itemsize=rng.choice([1, 2, 4]))
    check_data(plan)
    m = machine_for(mesh, family, rng)
    placement = None
    if shuffle:
        chips = list(range(mesh.size))
        rng.shuffle(chips)
        placement = "devices:" + ",".join(map(str, chips))
    res = simulate_plan(plan, m, placement=placement)
    full = simulate_plan(plan, m, placement=placement, coarsen=False)
    assert res.time_s == pytest.approx(full.time_s, rel=1e-12, abs=1e-18)
    np.testing.assert_allclose(res.link_bytes_array, full.link_bytes_array)
    assert res.time_s >= res.lower_bound_s
    assert res.peak_bytes_max_device == plan.peak_live_bytes
    assert (res.memory_bytes[-1] == plan.shard_bytes(plan.dst)).all()
    # bytes on the wire: every transfer crosses each link of its route once
    df = res.trace_df()
    assert float((df.bytes * df.hops).sum()) == pytest.approx(float(res.link_bytes_array.sum()))
    # each device receives at least what the plan says it must receive
    if len(df):
        got = df.groupby("dst").bytes.sum().reindex(range(mesh.size), fill_value=0.0).to_numpy()
        need = plan.recv_bytes_per_device_per_step.sum(axis=0)
        assert (got + 1e-6 >= need).all()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), family=st.sampled_from(["torus", "switched", "cpu"]),
       planner=st.sampled_from(["normal", "easy"]))
def test_pending_sums_keep_the_bound_below_the_replay_and_match_synth(seed, family, planner):
    """Random source/target types with pending sums {U:...}: the plan is exact (pending groups
    summed), the lower bound stays below the replayed time, and on a machine with one link
    class and no in-network reduction it is synth's receive bound over a link, to one element."""
    from synth import ArrayType
    from synth.interp import check_blocks

    rng = random.Random(seed)
    mesh, src, dst = random_case(rng, max_axes=3, max_rank=2)
    assume(mesh.size <= 32)

    def pending(t):
        free = [a for a in mesh.names if a not in t.used_axes and rng.random() < 0.6]
        return ArrayType(t.dims, tuple(free))

    src, dst = pending(src), pending(dst)
    assume(src.unreduced or dst.unreduced)
    plan = synthesize(mesh, src, dst, planner=planner, itemsize=4)
    x = np.random.default_rng(seed).integers(-99, 99, size=plan.src.shape)
    blocks = interpret(plan.steps, plan.work_types[0], plan.work_mesh, x, seed=seed)
    check_blocks(x, blocks, plan.work_types[-1], plan.work_mesh, "final")
    res = simulate_plan(plan, machine_for(mesh, family, rng))
    assert res.time_s >= res.lower_bound_s
    host = load_profile(f"cpu-host:{mesh.size}")
    lb = simulate_plan(plan, host).lower_bound_s
    # synth rounds a group's share up to whole elements; the time bound splits it evenly
    assert lb * host.topology.in_bandwidth(0) >= (plan.recv_lower_bound_bytes - plan.itemsize) * (1 - 1e-9)
