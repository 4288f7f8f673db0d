"""Snapshots of a few plans: their steps and per-step shard sizes.

Every snapshot plan is also run through the reference executor and compared
element by element with the target sharding."""

import math

import numpy as np
import pytest

from synth import interpret, refine, scatter, synthesize
from synth.interp import check_blocks

SNAPSHOTS = [
    # Megatron: tensor-parallel columns -> sequence-parallel rows (one all-to-all).
    ("x=2,y=4", "[64{y}, 32, 16{x}]", "[64, 32{x,y}, 16]", "normal",
     ["AllToAll(2->1, x)", "AllToAll(0->1, y)"], [4096, 4096, 4096]),
    # The XLA 4x2 "involuntary full rematerialization" case, scaled down.
    ("x=4,y=2", "[16{y}, 8, 16{x}]", "[16, 8{x,y}, 16]", "normal",
     ["AllToAll(2->1, x)", "AllToAll(0->1, y)"], [256, 256, 256]),
    # FSDP gather: sharded over two axes -> replicated.
    ("x=2,y=2", "[64{x,y}, 32]", "[64, 32]", "normal",
     ["AllGather(0, (x,y))"], [512, 2048]),
    # Two axes move together in one all-to-all over their combined group; the size-1
    # axis y is dropped and put back by relabelling permutes that move nothing.
    ("x=2,y=1,z=4", "[16, 8{y}, 8{x,z}]", "[16, 8{x,z,y}, 8]", "normal",
     ["AllPermute([16, 8, 8{x,z}])", "AllToAll(2->1, (x,z))", "AllPermute([16, 8{x,z,y}, 8])"],
     [128, 128, 128, 128]),
    # Replicated -> sharded needs no communication.
    ("x=2,y=2", "[64, 32]", "[64{y}, 32{x}]", "normal",
     ["DynSlice(0, y)", "DynSlice(1, x)"], [2048, 1024, 512]),
    # Axis swap of equal sizes: one permute.
    ("x=2,y=2", "[8{x}, 8{y}]", "[8{y}, 8{x}]", "normal",
     ["AllPermute([8{y}, 8{x}])"], [16, 16]),
    # Swap with unequal sizes: three all-to-alls (the middle one over both axes) move
    # less data than all-to-all, permute, all-to-all.
    ("a=2,b=4", "[16{a}, 16{b}]", "[16{b}, 16{a}]", "normal",
     ["AllToAll(0->1, a)", "AllToAll(1->0, (b,a))", "AllToAll(0->1, a)"], [32, 32, 32, 32]),
    # The easy plan gathers everything first.
    ("x=2,y=4", "[64{y}, 32, 16{x}]", "[64, 32{x,y}, 16]", "easy",
     ["AllGather(0, y)", "AllGather(2, x)", "DynSlice(1, x)", "DynSlice(1, y)"],
     [4096, 16384, 32768, 16384, 4096]),
    ("x=2,y=2", "[8{y,x}, 8]", "[8, 8{x}]", "easy",
     ["AllGather(0, x)", "AllGather(0, y)", "DynSlice(1, x)"], [16, 32, 64, 32]),
    # Megatron TP -> SP: the row-parallel matmul's pending sum is one reduce-scatter.
    ("dp=2,tp=4", "[8{dp}, 64, 32]{U:tp}", "[8{dp}, 64{tp}, 32]", "normal",
     ["ReduceScatter(1, tp)"], [8192, 2048]),
    # FSDP gradient: the data-parallel pending sum reduce-scatters into the FSDP shards.
    ("fsdp=8", "[64, 16]{U:fsdp}", "[64{fsdp}, 16]", "normal",
     ["ReduceScatter(0, fsdp)"], [1024, 128]),
    # Reduce early: reduce-scatter first, so the all-to-all moves a quarter of the data.
    ("dp=2,tp=4", "[8{dp}, 64, 32]{U:tp}", "[8, 64{tp}, 32{dp}]", "normal",
     ["ReduceScatter(1, tp)", "AllToAll(0->2, dp)"], [8192, 2048, 2048]),
    # A pending sum the target replicates: one all-reduce.
    ("dp=2,tp=4", "[8{dp}, 64, 32]{U:tp}", "[8{dp}, 64, 32]", "normal",
     ["AllReduce(tp)"], [8192, 8192]),
    # Uneven vocabulary: 50 rows over 8 devices, shards of 7 (the last holds 1 row).
    ("x=8", "[50, 4]{U:x}", "[50{x}, 4]", "normal", ["ReduceScatter(0, x)"], [200, 28]),
    ("x=8", "[50{x}, 4]", "[50, 4{x}]", "normal", ["AllToAll(0->1, x)"], [28, 50]),
    # 6-way heads on 2x6: uneven nowhere, a 6-way axis moves with one all-to-all.
    ("d=2,h=6", "[12, 30{h}, 16]", "[12{h}, 30, 16{d}]", "normal",
     ["DynSlice(2, d)", "AllToAll(1->0, h)"], [960, 480, 480]),
    # Sub-axes: 8-way FSDP -> 2 x 4, moving only the minor factor.
    ("x=8", "[64{x}, 32]", "[64{x:(1)2}, 32{x:(2)4}]", "normal",
     ["AllToAll(0->1, x:(2)4)"], [256, 256]),
    # Pending sum kept while the dims move; a new one added locally at the end.
    ("x=2,y=2,z=2", "[8{x}, 8]{U:y}", "[8, 8{x}]{U:y,z}", "normal",
     ["AllToAll(0->1, x)", "Unreduce(z)"], [32, 32, 32]),
]


@pytest.mark.parametrize("mesh,src,dst,planner,steps,shards", SNAPSHOTS)
def test_snapshot(mesh, src, dst, planner, steps, shards):
    plan = synthesize(mesh, src, dst, planner=planner, itemsize=1)
    assert [str(s) for s in plan.steps] == steps
    assert [plan.shard_bytes(t) for t in plan.all_types] == shards
    assert [r["shard_bytes"] for r in plan.rows()] == shards
    x = np.arange(plan.src.num_elems()).reshape(plan.src.shape)
    wm, wt = plan.work_mesh, plan.work_types
    # The interpreter checks every device's block (group sums where sums are pending;
    # padding excluded) after every step; check the final blocks against the target once more.
    got = interpret(plan.steps, wt[0], wm, x)
    assert wt[-1] == refine(plan.mesh, [plan.src, plan.dst])[1][1]
    check_blocks(x, got, wt[-1], wm, "final")


def test_plan_json_shape_and_round_trip():
    from synth import Plan

    plan = synthesize("x=2,y=4", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", planner="normal")
    d = plan.to_dict()
    assert list(d) == ["mesh", "itemsize", "src", "dst", "planner", "steps", "metrics"]
    assert list(d["mesh"]) == ["x", "y"]
    assert d["steps"][-1]["type"] == "[8, 16{x,y}, 8]"
    assert set(d["metrics"]) >= {"max_shard_bytes", "peak_live_bytes", "recv_bytes_max_device",
                                 "recv_lower_bound_bytes", "num_collectives", "bound_holds"}
    assert Plan.from_dict(d) == plan


def test_metrics_of_a_gather_plan():
    plan = synthesize("x=4", "[64{x}]", "[64]", itemsize=2, planner="normal")
    m = plan.metrics()
    assert m["max_shard_bytes"] == 128
    assert m["peak_live_bytes"] == 32 + 128
    assert m["recv_bytes_max_device"] == 96 == m["recv_lower_bound_bytes"]
    assert m["num_collectives"] == 1 and m["bound_holds"]


def test_permute_receives_only_on_moved_devices():
    plan = synthesize("x=2,y=2", "[8{x}, 8{y}]", "[8{y}, 8{x}]", itemsize=1, planner="normal")
    per_dev = plan.recv_bytes_per_device_per_step[0]
    # devices (0,0) and (1,1) keep their block; (0,1) and (1,0) swap.
    assert per_dev.tolist() == [0, 16, 16, 0]


def test_relabel_steps_move_and_count_nothing():
    plan = synthesize("x=2,y=1,z=4", "[16, 8{y}, 8{x,z}]", "[16, 8{x,z,y}, 8]", itemsize=1, planner="normal")
    assert plan.noop_steps == (True, False, True)
    assert plan.num_collectives == 1
    assert plan.recv_bytes_per_step == [0, 112, 0]
    assert plan.peak_live_bytes == 256
    assert [op.kind for op in plan.to_schedule().ops] == ["all_to_all"]
    assert plan.rows()[1]["collective"] == "AllPermute (relabel)"


def test_multi_axis_collectives_round_trip_json():
    from synth import AllGather, AllToAll, Plan

    assert AllToAll(0, 1, ["x"]) == AllToAll(0, 1, "x")
    assert AllGather(0, ("x", "y")).to_dict() == {"op": "all_gather", "dim": 0, "axis": ["x", "y"]}
    plan = synthesize("x=2,y=2", "[8{x,y}, 8]", "[8, 8{x,y}]", planner="normal")
    assert [str(s) for s in plan.steps] == ["AllToAll(0->1, (x,y))"]
    assert Plan.from_dict(plan.to_dict()) == plan


def test_fused_groups_are_capped():
    from synth.planners import MAX_FUSED_GATHER

    # issue 9: gathers are no longer split at 64 devices (the cap was only for the simulator)
    plan = synthesize("x=8,y=8,z=8", "[512{x,y,z}, 2]", "[512, 2]", itemsize=1, planner="normal")
    assert [str(s) for s in plan.steps] == ["AllGather(0, (x,y,z))"]
    assert all(math.prod(plan.mesh.shape[a] for a in ((s.axis,) if isinstance(s.axis, str) else s.axis))
               <= MAX_FUSED_GATHER for s in plan.steps)
    x = np.arange(plan.src.num_elems()).reshape(plan.src.shape)
    for got, want in zip(interpret(plan.steps, plan.src, plan.mesh, x), scatter(x, plan.dst, plan.mesh)):
        np.testing.assert_array_equal(got, want)


def test_consecutive_slices_are_one_local_op():
    plan = synthesize("x=8,y=2,z=4", "[256, 64, 128]", "[256, 64{z,y}, 128{x}]", itemsize=1, planner="normal")
    assert [s.kind for s in plan.steps] == ["dyn_slice"] * 3
    assert plan.device_steps() == [(0, 2)]
    (op,) = plan.to_schedule().ops
    assert op.kind == "dyn_slice" and op.in_bytes == 256 * 64 * 128 and op.out_bytes == 256 * 8 * 16
    assert plan.peak_live_bytes == op.in_bytes + op.out_bytes


def test_schedule_lowering():
    plan = synthesize("x=2,y=4", "[8{y}, 16, 8{x}]", "[8, 16{x,y}, 8]", itemsize=4, planner="normal")
    sch = plan.to_schedule()
    assert sch.num_devices == 8 and len(sch.ops) == len(plan.steps)
    op = sch.ops[0]
    assert op.kind == "all_to_all" and op.groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert op.in_bytes == op.out_bytes == 8 * 16 * 8 * 4 // 8
    assert op.recv_bytes == op.in_bytes // 2
    assert sch.meta["initial_bytes"] == plan.shard_bytes(plan.src)
    from synth import Schedule

    assert Schedule.from_dict(sch.to_dict()) == sch
    perm = synthesize("x=2,y=2", "[8{x}, 8{y}]", "[8{y}, 8{x}]", planner="normal").to_schedule().ops[0]
    assert perm.kind == "permute" and sorted(perm.pairs) == [(1, 2), (2, 1)]


def test_every_collective_kind_has_every_synth_facet():
    from synth.collectives import _SCHEDULE_LOWERING, COLLECTIVES, Collective

    for kind, cls in COLLECTIVES.items():
        assert issubclass(cls, Collective) and cls.kind == kind
        assert not getattr(cls, "__abstractmethods__", None), kind
        assert kind in _SCHEDULE_LOWERING, f"{kind} has no schedule lowering"


def test_every_collective_kind_round_trips_json_and_lowers():
    """One instance of every kind, on a type it applies to: JSON form, type rule, data
    rule (checked by the interpreter), received elements and schedule ops."""
    from synth import COLLECTIVES, ArrayType, Mesh, Plan
    from synth.collectives import (
        AllGather,
        AllPermute,
        AllReduce,
        AllToAll,
        DynSlice,
        MultiAllGather,
        MultiAllToAll,
        MultiDynSlice,
        ReduceScatter,
        ShardedToUnreduced,
        Unreduce,
        collective_from_dict,
    )

    mesh = Mesh.parse("x=2,y=2,z=2")
    t = ArrayType.parse("[8{x}, 4]{U:y}")
    examples = {
        "dyn_slice": DynSlice(1, "z"), "all_gather": AllGather(0, "x"),
        "all_to_all": AllToAll(0, 1, "x"), "all_permute": AllPermute(ArrayType.parse("[8{z}, 4]{U:y}")),
        "all_reduce": AllReduce("y"), "reduce_scatter": ReduceScatter(1, "y"), "unreduce": Unreduce("z"),
        "multi_dyn_slice": MultiDynSlice(((0, "x"), (1, "z"))),
        "multi_all_gather": MultiAllGather(((0, "x"), (1, "z"))),
        "multi_all_to_all": MultiAllToAll(((0, 2, "x"), (1, 3, "z"))),
        "sharded_to_unreduced": ShardedToUnreduced(0, "x"),
    }
    types = {"multi_dyn_slice": "[8, 4]{U:y}", "multi_all_gather": "[8{x}, 4{z}]{U:y}",
             "multi_all_to_all": "[8{x}, 4{z}, 2, 2]{U:y}"}
    assert set(examples) == set(COLLECTIVES), "a new kind needs an example here"
    for kind, c in examples.items():
        tt = ArrayType.parse(types.get(kind, str(t)))
        out = c.apply(tt, mesh)
        d = dict(c.to_dict(), type=str(out))
        assert d["op"] == getattr(c, "op", kind) and collective_from_dict(d) == c
        plan = Plan.build(mesh, tt, out, [c], itemsize=4)
        x = np.arange(math.prod(tt.shape)).reshape(tt.shape)
        check_blocks(x, interpret(plan.steps, tt, mesh, x), out, mesh, kind)
        assert len(plan.recv_bytes_per_device_per_step[0]) == mesh.size
        ops = plan.to_schedule().ops
        assert ops and all(op.kind in ("copy", "dyn_slice") or op.kind == getattr(c, "op", c.kind) or
                           (kind == "all_permute" and op.kind == "permute") for op in ops)
