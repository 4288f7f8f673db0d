"""The machine's cost of a plan (models.plan_cost): the per-structure memo gives the analytic
model's own time for every op, and the plans it prices move the data exactly."""

from dataclasses import replace

import pytest

from models import analytic
from models.plan_cost import machine_cost
from models.profiles import load_profile
from synth import Mesh, synthesize
from synth.bench import check_plan_exact

CASES = [  # (mesh, src, dst, itemsize): all-to-alls, gathers, permutes, pending sums
    ("x=2,y=4,z=8", "[16, 16, 16{z,x}, 16{y}]", "[16, 16, 16{y}, 16{x}]", 4),
    ("x=4,y=2,z=8", "[16, 16{x}, 16, 16]", "[16, 16{z}, 16{y,x}, 16]", 2),
    ("replica=2,fsdp=4", "[64, 32]{U:fsdp,replica}", "[64{fsdp}, 32]", 4),
]


def _ops(plan):
    return [o for o in plan.to_schedule().ops if not o.is_local]


@pytest.mark.parametrize("profile", ["tpu-v4", "dgx-h100"])
def test_memoised_op_time_is_the_analytic_models_time(profile):
    from experiments.backends import load_machine
    from synth import Mesh

    seen = 0
    for mesh, src, dst, isz in CASES:
        cost = machine_cost(load_machine(profile, Mesh.parse(mesh).size), Mesh.parse(mesh))
        plan = synthesize(mesh, src, dst, itemsize=isz, cost=cost, budget_moves=4000)
        check_plan_exact(plan)
        for op in _ops(plan):
            # the op itself, then copies of its structure at other sizes (the memo's path)
            for num, den in ((1, 1), (1, 2), (3, 1), (1, 1)):
                o = replace(op, in_bytes=op.in_bytes * num // den, out_bytes=op.out_bytes * num // den,
                            send_bytes=op.send_bytes * num // den, recv_bytes=op.recv_bytes * num // den)
                want = float(analytic.op_time_s(o, cost.machine, cost.chips))
                assert cost.op_time_s(o) == pytest.approx(want, rel=1e-12, abs=1e-18), (profile, op.kind)
                seen += 1
        # the search's own cost is the analytic model's time of the plan's schedule
        sched = plan.to_schedule()
        assert plan.search["time_s"] == pytest.approx(
            analytic.schedule_time_s(sched, cost.machine, cost.chips)["time_s"], rel=1e-9)
    assert seen >= 8


def test_the_memo_plans_one_structure_once():
    cost = machine_cost(load_profile("tpu-v4:4x4x4"), Mesh.parse("x=2,y=4,z=8"))
    plan = synthesize("x=2,y=4,z=8", "[16, 16, 16{z,x}, 16{y}]", "[16, 16, 16{y}, 16{x}]",
                      cost=cost, budget_moves=4000)
    check_plan_exact(plan)
    op = _ops(plan)[0]
    before = len(cost._struct)
    big = replace(op, in_bytes=op.in_bytes * 4, out_bytes=op.out_bytes * 4, send_bytes=op.send_bytes * 4,
                  recv_bytes=op.recv_bytes * 4)
    cost.op_time_s(big)
    assert len(cost._struct) == before  # the structure was planned already: no new routing
    # an op whose byte fields are not one scaled copy of the reference is costed by itself
    odd = replace(op, recv_bytes=op.recv_bytes + 1)
    assert cost.op_time_s(odd) == pytest.approx(float(analytic.op_time_s(odd, cost.machine, cost.chips)),
                                                 rel=1e-12)


def test_reduce_scatter_over_a_whole_tpu_slice_costs_what_libtpu_compiles():
    """libtpu compiles a reduce-scatter whose one group is every chip of the slice as an
    all-reduce and a dynamic slice (hsdp-grad-8 on tpu-v4:2x2x2); a smaller group stays a
    reduce-scatter. The machine cost prices each as compiled, so auto's plan for hsdp-grad-8's
    shape is XLA's all-reduce + slice, not a reduce-scatter that compiles to it plus a gather."""
    from experiments.backends import load_machine
    from synth.schedule import ScheduleOp

    machine = load_machine("tpu-v4", 8)
    cost = machine_cost(machine, Mesh.parse("replica=2,fsdp=4"))
    n, b = 8, 8 << 20
    rs = ScheduleOp("reduce_scatter", b, b // n, send_bytes=b * (n - 1) // n, recv_bytes=b * (n - 1) // n,
                    groups=(tuple(range(8)),))
    ar = ScheduleOp("all_reduce", b, b, send_bytes=2 * b * (n - 1) // n, recv_bytes=2 * b * (n - 1) // n,
                    groups=(tuple(range(8)),))
    ds = ScheduleOp("dyn_slice", b, b // n, groups=tuple((d,) for d in range(8)))
    want = float(analytic.op_time_s(ar, machine, cost.chips)) + float(analytic.op_time_s(ds, machine, cost.chips))
    assert cost.op_time_s(rs) == pytest.approx(want, rel=1e-12)
    assert cost.op_time_s(rs) > 1.8 * float(analytic.op_time_s(rs, machine, cost.chips))
    half = ScheduleOp("reduce_scatter", b, b // 4, send_bytes=b * 3 // 4, recv_bytes=b * 3 // 4,
                      groups=((0, 1, 2, 3), (4, 5, 6, 7)))
    assert cost.op_time_s(half) == pytest.approx(float(analytic.op_time_s(half, machine, cost.chips)), rel=1e-12)
    # hsdp-grad-8 (224 MiB of float32 partial sums): XLA's plan, one all-reduce, then slices
    plan = synthesize("replica=2,fsdp=4", "[14336, 4096]{U:fsdp,replica}", "[14336{fsdp}, 4096]", cost=cost)
    assert [type(s).__name__ for s in plan.steps if not s.local] == ["AllReduce"]
    # the same steps on a small array of the same sharding: every device's block, exactly
    import numpy as np

    from synth import parse_type
    from synth.interp import check_blocks, interpret
    from synth.types import refine_type

    m = plan.work_mesh  # the steps name factors of fsdp
    small = refine_type(parse_type("[16, 8]{U:fsdp,replica}"), m)
    x = np.arange(16 * 8, dtype=np.int64).reshape(16, 8)
    blocks = interpret(plan.steps, small, m, x)  # random partial sums, checked after every step
    check_blocks(x, blocks, refine_type(parse_type("[16{fsdp}, 8]"), m), m, "final")
    gpu = machine_cost(load_machine("dgx-h100", 8), Mesh.parse("replica=2,fsdp=4"))
    assert gpu.op_time_s(rs) == pytest.approx(float(analytic.op_time_s(rs, gpu.machine, gpu.chips)), rel=1e-12)


def test_libtpu_compiles_a_whole_slice_reduce_scatter_as_an_all_reduce():
    """The compiler fact the cost above rests on, read back from libtpu's HLO (no TPU needed)."""
    pytest.importorskip("libtpu")
    from executor.tpu import compile_plan
    from synth import parse_type
    from synth.collectives import ReduceScatter
    from synth.plan import Plan

    mesh = Mesh.parse("x=2,y=2,z=2")
    kinds = {}
    for axes in (("x", "y", "z"), ("y", "z")):
        src = parse_type("[4096, 256]{U:" + ",".join(axes) + "}")
        dst = parse_type("[4096{" + ",".join(axes) + "}, 256]")
        p = Plan.build(mesh, src, dst, [ReduceScatter(0, axes)], 4, "hand")
        sched = compile_plan("tpu-v4:2x2x2", p, dtype="float32").schedule
        kinds[axes] = [o.kind for o in sched.ops if not o.is_local]
    assert kinds[("x", "y", "z")] == ["all_reduce"]
    assert kinds[("y", "z")][0] == "reduce_scatter"
