"""simulator/: the SimPy replay. Every plan simulated here is also checked element
by element (the data each device ends with is exactly the target sharding)."""

import dataclasses
import json
import random

import numpy as np
import pytest

from models import KindParams, load_profile
from models.analytic import alpha_beta_s, op_time_s
from simulator import simulate, simulate_plan
from synth import (
    AllGather,
    AllToAll,
    ArrayType,
    Mesh,
    Plan,
    Schedule,
    ScheduleOp,
    interpret,
    scatter,
    synthesize,
)
from synth.bench import random_case


def check_data(plan: Plan) -> None:
    """Run the plan on a concrete array and compare every device's block."""
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    # the steps run on the refined mesh (sub-axes the plan moves, same device ids)
    mesh, src, dst = plan.work_mesh, plan.work_types[0], plan.work_types[-1]
    blocks = interpret(plan.steps, src, mesh, x)
    assert len(blocks) == plan.mesh.size
    if dst.unreduced:  # partial blocks: each group must sum to the true block
        from synth.interp import check_blocks

        check_blocks(x, blocks, dst, mesh, "final")
    else:
        want = scatter(x, dst, mesh)
        for d, (got, exp) in enumerate(zip(blocks, want)):
            assert got.shape == exp.shape, d
            assert np.array_equal(got, exp), d


def gather_plan(mesh: str, axis: str, rows: int = 1024, cols: int = 64, itemsize: int = 4) -> Plan:
    m = Mesh.parse(mesh)
    others = [a for a in m.names if a != axis]
    src = ArrayType.parse(f"[{rows}{{{axis}}}, {cols}{{{','.join(others)}}}]" if others else f"[{rows}{{{axis}}}, {cols}]")
    dst = ArrayType.parse(f"[{rows}, {cols}{{{','.join(others)}}}]" if others else f"[{rows}, {cols}]")
    p = Plan.build(m, src, dst, [AllGather(0, axis)], itemsize=itemsize)
    check_data(p)
    return p


def with_algorithm(machine, kind, algo):
    d = dict(machine.algorithms)
    d[kind] = algo
    return dataclasses.replace(machine, algorithms=tuple(sorted(d.items())))


# -- the tests ------------------------------------------------------------------------
@pytest.mark.parametrize("hw,algo", [("tpu-v5e:16x1", "ring"), ("tpu-v5e:16x1", "bidir_ring"),
                                     ("tpu-v4:4x4x4", "bidir_ring")])
def test_uncontended_ring_all_gather_matches_analytic(hw, algo):
    # issue 9: links deliver line rate x the profile's achieved fraction (link_efficiency);
    # rings need wraparound, which these axes have (v5e: a full 16-chip axis; v4: a 4x4x4 cube)
    m = with_algorithm(load_profile(hw), "all_gather", algo)
    n = m.dims[0]
    mesh = f"x={n}" if m.num_devices == n else f"x={n},y={m.num_devices // n}"
    plan = gather_plan(mesh, "x", rows=64 * n, cols=1024, itemsize=4)
    res = simulate_plan(plan, m)
    op = plan.to_schedule().ops[0]
    textbook = alpha_beta_s("all_gather", n, op.in_bytes, m.alpha_s("all_gather"),
                            m.link_bandwidth_Bps * m.link_efficiency, m.link_latency_s, algo)
    assert res.time_s == pytest.approx(textbook, rel=0.02)
    assert res.time_s == pytest.approx(res.analytic_s, rel=0.02)
    assert res.time_s >= res.lower_bound_s
    assert res.ops[0]["algorithm"] == ("ring" if algo == "ring" else "bidir_ring(X)")


def _two_flow_schedule(pairs, nbytes=8 << 20):
    op = ScheduleOp("permute", nbytes, nbytes, nbytes, nbytes, pairs=tuple(pairs), label="p")
    return Schedule(8, (op,), "two flows", {"initial_bytes": nbytes})


def test_two_flows_through_one_link_each_take_about_twice_as_long():
    m = load_profile("tpu-v4:8x1x1")
    # on the 8-ring, 0->2 uses links 0->1, 1->2 and 1->3 uses 1->2, 2->3: they share 1->2
    alone_a = simulate(_two_flow_schedule([(0, 2)]), m).trace_df()
    alone_b = simulate(_two_flow_schedule([(1, 3)]), m).trace_df()
    both = simulate(_two_flow_schedule([(0, 2), (1, 3)]), m).trace_df()
    dur = lambda df, s: float((df[df.src == s].end_s - df[df.src == s].start_s).iloc[0])  # noqa: E731
    ta, tb = dur(alone_a, 0), dur(alone_b, 1)
    assert ta == pytest.approx(tb)
    for s, t in ((0, ta), (1, tb)):
        ratio = dur(both, s) / t
        assert 1.8 <= ratio <= 2.05, (s, ratio)
    # flows on disjoint links do not slow each other down
    apart = simulate(_two_flow_schedule([(0, 2), (4, 6)]), m).trace_df()
    assert dur(apart, 0) == pytest.approx(ta) and dur(apart, 4) == pytest.approx(ta)


def test_axis_along_a_ring_beats_the_same_axis_strided_across_it():
    m = load_profile("tpu-v4:8x1x1")
    plan = gather_plan("x=4,y=2", "y", rows=512, cols=256)
    along = simulate_plan(plan, m)                               # y-groups are neighbours
    strided = simulate_plan(plan, m, placement="y=X:2,x=X:4")    # y-groups 4 hops apart
    assert strided.time_s > 1.5 * along.time_s
    assert strided.link_bytes_max > along.link_bytes_max
    assert strided.time_s >= strided.lower_bound_s and along.time_s >= along.lower_bound_s
    # on a 4x4 mesh: an axis on one physical line vs the same 4 devices as a 2x2 sub-grid; the
    # sub-grid runs a multi-axis collective that drives both dimensions at once (issue 9)
    m2 = load_profile("tpu-v4:4x4x1")
    p2 = gather_plan("x=4,y=4", "y", rows=1024, cols=256)
    line = simulate_plan(p2, m2)
    grid = simulate_plan(p2, m2, placement="x=X:2*Y:2,y=X:2*Y:2")
    assert line.ops[0]["algorithm"] == "line(Y)" and grid.ops[0]["algorithm"] == "multi_axis(X,Y)"
    assert grid.time_s < line.time_s


def test_bidirectional_ring_roughly_halves_large_all_gathers():
    base = load_profile("tpu-v5e:16x1")          # a full v5e axis closes its ring
    plan = gather_plan("x=16", "x", rows=16 * 64, cols=256, itemsize=64)  # 1 MiB per device
    uni = simulate_plan(plan, with_algorithm(base, "all_gather", "ring"))
    bi = simulate_plan(plan, with_algorithm(base, "all_gather", "bidir_ring"))
    assert 0.45 <= bi.time_s / uni.time_s <= 0.6
    # same bytes on the wire, spread over both directions
    assert sum(bi.link_bytes.values()) == pytest.approx(sum(uni.link_bytes.values()))


NORMAL_CASES = [
    ("tpu-v4:4x4x4", "x=4,y=4,z=4", "[1024{x}, 4096{y,z}]", "[1024{y}, 4096{z,x}]"),
    ("tpu-v4:4x4x4", "x=4,y=4,z=4", "[256{x,y}, 1024{z}]", "[256{z}, 1024{x,y}]"),
    ("tpu-v4:4x4x4", "x=4,y=16", "[256{x}, 512, 64{y}]", "[256{y}, 512{x}, 64]"),
    ("tpu-v5e:4x4", "x=4,y=4", "[512{x}, 512]", "[512, 512{x,y}]"),
    ("dgx-h100:2", "x=2,y=8", "[256{x,y}, 128]", "[256{y}, 128{x}]"),
    ("h100-multinode:2x4", "x=2,y=4", "[64{y}, 64{x}]", "[64{x}, 64{y}]"),
    ("gb200-nvl72:1x16", "x=4,y=4", "[256{x}, 64{y}]", "[256, 64{y,x}]"),
    ("cpu-host:8", "x=2,y=4", "[64{y}, 32, 16{x}]", "[64, 32{x,y}, 16]"),
    ("cpu-host:6", "x=2,y=3", "[36{x,y}, 12]", "[36, 12{y}]"),
]


@pytest.mark.parametrize("hw,mesh,src,dst", NORMAL_CASES)
def test_normal_plans_peak_memory_equals_peak_live_bytes_and_time_is_above_the_bound(hw, mesh, src, dst):
    plan = synthesize(mesh, src, dst, planner="normal", itemsize=4)
    check_data(plan)
    res = simulate_plan(plan, hw)
    assert res.peak_bytes_max_device == plan.peak_live_bytes
    assert (res.peak_bytes == plan.peak_live_bytes).all()
    assert res.time_s >= res.lower_bound_s > 0
    # issue 9: the kind names the term that binds (injection, a cut, or the LP)
    assert res.lower_bound_kind in res.lower_bound_terms
    assert res.lower_bound_s == max(res.lower_bound_terms.values())
    # ops are back to back and cover the whole time
    assert res.ops[0]["start_s"] == 0.0 and res.ops[-1]["end_s"] == pytest.approx(res.time_s)
    for a, b in zip(res.ops, res.ops[1:]):
        assert b["start_s"] == pytest.approx(a["end_s"])
    # memory returns to the target shard
    assert (res.memory_bytes[-1] == plan.shard_bytes(plan.dst)).all()
    assert (res.memory_bytes[0] == plan.shard_bytes(plan.src)).all()


def test_random_normal_plans_memory_and_bound():
    rng = random.Random(7)
    for _ in range(12):
        mesh, src, dst = random_case(rng, max_axes=3, max_rank=3)
        if mesh.size > 64:
            continue
        plan = synthesize(mesh, src, dst, planner="normal", itemsize=2)
        check_data(plan)
        res = simulate_plan(plan, f"cpu-host:{mesh.size}")
        assert res.peak_bytes_max_device == plan.peak_live_bytes
        assert res.time_s >= res.lower_bound_s


def test_easy_plans_use_more_memory_and_time_than_normal_ones():
    mesh, src, dst = "x=4,y=4,z=4", "[256{x}, 1024{y,z}]", "[256{y}, 1024{z,x}]"
    normal = synthesize(mesh, src, dst, planner="normal", itemsize=16)
    easy = synthesize(mesh, src, dst, planner="easy", itemsize=16)
    check_data(normal)
    check_data(easy)
    rn, re_ = simulate_plan(normal, "tpu-v4:4x4x4"), simulate_plan(easy, "tpu-v4:4x4x4")
    assert re_.peak_bytes_max_device == easy.peak_live_bytes > rn.peak_bytes_max_device
    assert re_.time_s > rn.time_s >= rn.lower_bound_s


def test_determinism():
    plan = synthesize("x=4,y=4,z=4", "[256{x,y}, 1024{z}]", "[256{z}, 1024{x,y}]")
    check_data(plan)
    a = simulate_plan(plan, "tpu-v4:4x4x4").to_dict(full=True)
    b = simulate_plan(plan, "tpu-v4:4x4x4").to_dict(full=True)
    a.pop("wall_s")
    b.pop("wall_s")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# -- coarsening is exact -----------------------------------------------------------------------
@pytest.mark.parametrize("hw,mesh,src,dst,placement", [
    ("tpu-v4:4x4x4", "x=4,y=4,z=4", "[256{x,y}, 1024{z}]", "[256{z}, 1024{x,y}]", None),
    ("tpu-v4:4x4x4", "x=4,y=4,z=4", "[1024{x}, 4096{y,z}]", "[1024{y}, 4096{z,x}]", "x=Z,y=X,z=Y"),
    ("dgx-h100:2", "x=2,y=8", "[256{x,y}, 128]", "[256{y}, 128{x}]", None),
])
def test_coarsened_and_full_simulation_agree(hw, mesh, src, dst, placement):
    plan = synthesize(mesh, src, dst)
    check_data(plan)
    c = simulate_plan(plan, hw, placement=placement, engine="packet")
    f = simulate_plan(plan, hw, placement=placement, coarsen=False, engine="packet")
    assert c.time_s == pytest.approx(f.time_s, rel=1e-12)
    assert [o["end_s"] for o in c.ops] == pytest.approx([o["end_s"] for o in f.ops], rel=1e-12)
    np.testing.assert_allclose(c.link_bytes_array, f.link_bytes_array)
    tc = c.trace_df().sort_values(["op", "src", "dst", "step", "direction"]).reset_index(drop=True)
    tf = f.trace_df().sort_values(["op", "src", "dst", "step", "direction"]).reset_index(drop=True)
    assert len(tc) == len(tf)
    for col in ("src", "dst", "bytes", "hops"):
        assert (tc[col].to_numpy() == tf[col].to_numpy()).all(), col
    np.testing.assert_allclose(tc.end_s.to_numpy(), tf.end_s.to_numpy(), rtol=1e-12)
    assert sum(o["simulated"] for o in c.ops) <= sum(o["simulated"] for o in f.ops)


# -- results ----------------------------------------------------------------------------------
def test_trace_and_link_bytes_are_consistent():
    plan = synthesize("x=2,y=4", "[64{y}, 64{x}]", "[64{x}, 64{y}]", itemsize=4)
    check_data(plan)
    m = load_profile("tpu-v4:2x4")
    res = simulate_plan(plan, m)
    df = res.trace_df()
    assert len(df) > 0
    assert (df.end_s > df.start_s).all()
    # every transfer's bytes crossed each link of its route once
    assert float((df.bytes * df.hops).sum()) == pytest.approx(float(res.link_bytes_array.sum()))
    assert res.link_bytes_max == max(res.link_bytes.values())
    assert all(0 < u <= 1.0 + 1e-9 for u in res.link_util.values())
    for o in res.ops:
        ops_rows = df[df.op == o["index"]]
        if len(ops_rows):
            assert ops_rows.start_s.min() >= o["start_s"] and ops_rows.end_s.max() <= o["end_s"] + 1e-15
    d = res.to_dict()
    json.dumps(d)
    for k in ("time_s", "lower_bound_s", "peak_bytes_max_device", "link_bytes_max", "ops"):
        assert k in d
    assert {"kind", "start_s", "end_s"} <= set(d["ops"][0])
    assert "trace" not in d and "trace" in res.to_dict(full=True)
    mem = res.memory_df(devices=[0])
    assert mem.bytes.max() == res.peak_bytes[0]


def test_all_gather_trace_rows_count_ring_steps():
    plan = gather_plan("x=4,y=2", "x", rows=256, cols=64)
    m = with_algorithm(load_profile("tpu-v4:4x2x1"), "all_gather", "ring")
    df = simulate_plan(plan, m, engine="packet").trace_df()
    assert len(df) == 2 * 4 * 3  # 2 rings of 4, 3 steps each
    assert set(df.step) == {0, 1, 2}
    for s in range(2):
        assert (df[df.step == s + 1].start_s.min()) >= df[df.step == s].end_s.min()
    # the flow engine: one flow per neighbour pair carrying all three steps
    fl = simulate_plan(plan, m).trace_df()
    assert len(fl) == 2 * 4 and fl.bytes.sum() == pytest.approx(df.bytes.sum())


def test_local_ops_cost_hbm_time_and_per_kind_overrides_apply():
    mesh = Mesh.parse("x=8")
    src, dst = ArrayType.parse("[1024, 256]"), ArrayType.parse("[1024{x}, 256]")
    plan = synthesize(mesh, src, dst)
    check_data(plan)
    m = load_profile("tpu-v4:8x1x1")
    res = simulate_plan(plan, m)
    out = plan.shard_bytes(dst)
    assert res.time_s == pytest.approx(m.alpha_s("dyn_slice") + 2 * out / m.hbm_bandwidth_Bps)
    m2 = m.with_overrides(dyn_slice=KindParams(alpha_s=0.0, bandwidth_Bps=1e9))
    assert simulate_plan(plan, m2).time_s == pytest.approx(2 * out / 1e9)
    # a fitted all-gather bandwidth/latency replaces the link parameters for that kind only
    gp = gather_plan("x=16", "x", rows=512, cols=512)
    m3 = with_algorithm(load_profile("tpu-v5e:16x1"), "all_gather", "ring").with_overrides(
        all_gather=KindParams(alpha_s=1e-5, bandwidth_Bps=1e9, latency_s=2e-6))
    op = gp.to_schedule().ops[0]
    # a fitted bandwidth is an achieved rate: no efficiency factor is applied on top
    expect = alpha_beta_s("all_gather", 16, op.in_bytes, 1e-5, 1e9, 2e-6, "ring")
    assert simulate_plan(gp, m3).time_s == pytest.approx(expect, rel=1e-9)
    assert op_time_s(op, m3) == pytest.approx(expect, rel=1e-9)


def test_multinode_all_gather_over_nodes_is_slower_than_within_a_node():
    m = load_profile("dgx-h100:2")
    plan = gather_plan("x=2,y=8", "x", rows=1024, cols=1024)
    across = simulate_plan(plan, m)                                     # x = the node dim
    within = simulate_plan(plan, m, placement="x=gpu:2,y=node*gpu:4")   # x pairs inside a node
    assert across.time_s > within.time_s
    assert [lk for lk in across.link_bytes if "fabric" in lk]
    assert not [lk for lk in within.link_bytes if "fabric" in lk]
    assert across.ops[0]["algorithm"].startswith("ring x1 rails")
    op = plan.to_schedule().ops[0]
    # each pair crosses one NIC: no faster than its line rate, no slower than twice its achieved rate
    assert across.time_s >= op.in_bytes / m.nic_bandwidth_Bps
    assert across.time_s <= 2 * op.in_bytes / (m.nic_bandwidth_Bps * m.nic_efficiency) + 1e-4


def test_reduce_scatter_and_all_reduce_schedules():
    g = (tuple(range(16)),)
    ops = (ScheduleOp("reduce_scatter", 16 << 20, 1 << 20, 15 << 20, 15 << 20, groups=g),
           ScheduleOp("all_reduce", 1 << 20, 1 << 20, 1 << 20, 1 << 20, groups=g))
    s = Schedule(16, ops, "rs+ar", {"initial_bytes": 16 << 20})
    m = with_algorithm(with_algorithm(load_profile("tpu-v5e:16x1"), "reduce_scatter", "ring"), "all_reduce", "ring")
    res = simulate(s, m)
    a = m.alpha_s("all_gather")
    bw, lat = m.link_bandwidth_Bps * m.link_efficiency, m.link_latency_s
    assert res.ops[0]["duration_s"] == pytest.approx(a + 15 * (lat + (16 << 20) / 16 / bw), rel=1e-9)
    assert res.ops[1]["duration_s"] == pytest.approx(a + 30 * (lat + (1 << 20) / 16 / bw), rel=1e-9)
    assert res.lower_bound_kind.startswith("schedule:") and res.time_s >= res.lower_bound_s
    assert res.peak_bytes_max_device == (16 << 20) + (1 << 20)
    # the reduction arithmetic bounds a reduce-scatter when the links are fast
    fast = dataclasses.replace(m, link_bandwidth_Bps=1e15, reduce_bandwidth_Bps=1e9)
    fast.__dict__.pop("topology", None)
    r2 = simulate(Schedule(16, ops[:1], "rs", {"initial_bytes": 16 << 20}), fast)
    assert r2.time_s >= 15 / 16 * (16 << 20) / 1e9


def test_oom_warning_and_schedule_errors():
    plan = synthesize("x=8", "[2048{x}, 1024]", "[2048, 1024]", itemsize=8)
    check_data(plan)
    m = dataclasses.replace(load_profile("cpu-host:8"), hbm_capacity_bytes=1 << 20)
    res = simulate_plan(plan, m)
    assert res.warnings and "exceeds" in res.warnings[0]
    from models import SimulationError

    bare = Schedule(8, plan.to_schedule().ops, "bare", {"initial_bytes": plan.shard_bytes(plan.src)})
    with pytest.raises(SimulationError, match="runs on 8 devices but hardware cpu-host:4 has 4"):
        simulate(bare, "cpu-host:4")
    with pytest.raises(ValueError, match="mesh x=8 has 8 devices"):
        simulate(plan.to_schedule(), "cpu-host:4")
    with pytest.raises(ValueError, match="mesh x=8 has 8 devices"):
        simulate_plan(plan, "cpu-host:4")


def test_plots_build():
    pytest.importorskip("plotly")
    from simulator.plots import memory_figure, timeline_figure, topology_figure

    for hw, mesh in (("tpu-v4:4x4x4", "x=4,y=16"), ("dgx-h100:2", "x=2,y=8"), ("cpu-host:8", "x=2,y=4")):
        plan = synthesize(mesh, "[1024{x}, 256{y}]", "[1024{y}, 256{x}]")
        check_data(plan)
        res = simulate_plan(plan, hw)
        for fig in (timeline_figure(res), memory_figure(res), topology_figure(res.machine, res),
                    topology_figure(res.machine)):
            assert fig.to_dict()["data"]


def test_all_to_all_direct_on_a_switch_matches_analytic():
    m = load_profile("dgx-h100:1")
    mesh = Mesh.parse("x=8")
    plan = Plan.build(mesh, ArrayType.parse("[1024{x}, 1024]"), ArrayType.parse("[1024, 1024{x}]"),
                      [AllToAll(0, 1, "x")])
    check_data(plan)
    res = simulate_plan(plan, m)
    op = plan.to_schedule().ops[0]
    assert res.ops[0]["algorithm"] == "direct"
    assert res.time_s == pytest.approx(res.analytic_s, rel=1e-9)
    assert res.time_s == pytest.approx(op_time_s(op, m), rel=1e-9)
    bw = m.link_bandwidth_Bps * m.links_per_chip
    assert op.send_bytes / bw <= res.lower_bound_s <= res.time_s


def test_every_schedule_kind_and_every_collective_kind_is_simulated():
    from synth.collectives import COLLECTIVES
    from synth.schedule import IN_PLACE_KINDS, SCHEDULE_KINDS

    m = load_profile("tpu-v4:4x1x1")
    g = ((0, 1, 2, 3),)
    b = 1 << 16
    ops = {
        "dyn_slice": ScheduleOp("dyn_slice", b, b // 4, groups=tuple((d,) for d in range(4))),
        "copy": ScheduleOp("copy", b, b, groups=tuple((d,) for d in range(4))),
        "all_gather": ScheduleOp("all_gather", b, 4 * b, b, 3 * b, groups=g),
        "all_to_all": ScheduleOp("all_to_all", b, b, 3 * b // 4, 3 * b // 4, groups=g),
        "permute": ScheduleOp("permute", b, b, b, b, pairs=((0, 1), (1, 2), (2, 3), (3, 0))),
        "all_reduce": ScheduleOp("all_reduce", b, b, b, b, groups=g),
        "reduce_scatter": ScheduleOp("reduce_scatter", b, b // 4, b, b, groups=g),
    }
    assert set(ops) == set(SCHEDULE_KINDS)
    for kind, op in ops.items():
        res = simulate(Schedule(4, (op,), kind, {"initial_bytes": b}), m)
        assert res.time_s > m.alpha_s(kind), kind
        assert res.ops[0]["analytic_s"] > 0
        # an all-reduce runs in place (one buffer); every other kind holds input + output
        want = op.in_bytes if kind in IN_PLACE_KINDS else op.in_bytes + op.out_bytes
        assert res.peak_bytes_max_device == want, kind
        if not op.is_local:
            assert res.link_bytes_max > 0 and len(res.trace_df()) > 0
    # every typed collective lowers to a schedule op the simulator replays
    mesh = Mesh.parse("x=2,y=2")
    cases = {
        "dyn_slice": ("[64, 16]", "[64{x}, 16]"),
        "all_gather": ("[64{x}, 16]", "[64, 16]"),
        "all_to_all": ("[64{x}, 16]", "[64, 16{x}]"),
        "all_permute": ("[64{x}, 16{y}]", None),
        "all_reduce": ("[64{x}, 16]{U:y}", "[64{x}, 16]"),
        "reduce_scatter": ("[64{x}, 16]{U:y}", "[64{x}, 16{y}]"),
        "unreduce": ("[64{x}, 16]", "[64{x}, 16]{U:y}"),
        "multi_dyn_slice": ("[64, 16]", "[64{x}, 16{y}]"),
        "multi_all_gather": ("[64{x}, 16{y}]", "[64, 16]"),
        "multi_all_to_all": ("[64{x}, 16{y}, 4, 4]", "[64, 16, 4{x}, 4{y}]"),
        "sharded_to_unreduced": ("[64{x}, 16]", "[64, 16]{U:x}"),
    }
    assert set(cases) == set(COLLECTIVES)
    from synth import AllPermute, DynSlice
    from synth.collectives import (
        AllReduce,
        MultiAllGather,
        MultiAllToAll,
        MultiDynSlice,
        ReduceScatter,
        ShardedToUnreduced,
        Unreduce,
    )

    steps = {"dyn_slice": [DynSlice(0, "x")], "all_gather": [AllGather(0, "x")],
             "all_to_all": [AllToAll(0, 1, "x")],
             "all_permute": [AllPermute(ArrayType.parse("[64{y}, 16{x}]"))],
             "all_reduce": [AllReduce("y")], "reduce_scatter": [ReduceScatter(1, "y")],
             "unreduce": [Unreduce("y")],
             "multi_dyn_slice": [MultiDynSlice(((0, "x"), (1, "y")))],
             "multi_all_gather": [MultiAllGather(((0, "x"), (1, "y")))],
             "multi_all_to_all": [MultiAllToAll(((0, 2, "x"), (1, 3, "y")))],
             "sharded_to_unreduced": [ShardedToUnreduced(0, "x")]}
    for kind, (src, dst) in cases.items():
        s = ArrayType.parse(src)
        plan = Plan.build(mesh, s, steps[kind][0].apply(s, mesh) if dst is None else ArrayType.parse(dst), steps[kind])
        check_data(plan)
        res = simulate_plan(plan, m)
        assert res.time_s > 0 and res.peak_bytes_max_device == plan.peak_live_bytes
