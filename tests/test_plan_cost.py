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
