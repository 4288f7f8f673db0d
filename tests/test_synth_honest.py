"""Honest claims of ``auto`` (issue 18): a plan it calls optimal is never beaten, under
the same cost model and within the same memory cap, by XLA's own plan or the paper's
(``normal``) plan; its printed lower bound is below every plan; and it answers the same
whatever the machine's load.

XLA's plans are compiled here on 8 CPU devices (``executor.extract.xla_schedule``, both
partitioners) and read back from the HLO, so only the suite cases with at most 8 devices
are compiled; the paper's plans are costed on every case."""

from __future__ import annotations

import pytest

from synth import synthesize
from synth.bench import check_plan_exact, cpu_burners, plan_digest
from synth.planners import DefaultCost, lower_bound_s, schedule_cost
from synth.types import ArrayType

COST = DefaultCost()
#: (case, partitioner, compared) for every XLA plan compiled in this run
_XLA_SEEN: list = []


def _suite_cases():
    from experiments.suites import transformer, xla_issues

    return [pytest.param(c.mesh, c.src, c.dst, id=f"{s}:{c.name}")
            for s, mod in (("xla", xla_issues), ("transformer", transformer)) for c in mod.cases()]


def _auto(mesh, src, dst, itemsize=4):
    p = synthesize(mesh, src, dst, itemsize=itemsize, budget_moves=100_000)
    if p.mesh.size <= 64 and p.src.num_elems() <= 1 << 16:
        check_plan_exact(p)
    return p


def _schedule_time_s(sched) -> float:
    return sum(COST.op_time_s(op) for op in sched.ops)


def _schedule_max_buffer(sched) -> int:
    return max([op.out_bytes for op in sched.ops] + [op.in_bytes for op in sched.ops] + [0])


@pytest.mark.parametrize("mesh,src,dst", _suite_cases())
def test_no_paper_plan_beats_a_plan_called_optimal(mesh, src, dst):
    p = _auto(mesh, src, dst)
    n = synthesize(mesh, src, dst, planner="normal")
    lb = lower_bound_s(p.mesh, p.src, p.dst, p.itemsize, COST)
    tn = schedule_cost(n, COST)[0]
    # the bound printed with the plan is below every plan, the paper's included
    assert p.search["lower_bound_s"] == pytest.approx(lb) and lb <= tn * (1 + 1e-12)
    assert lb <= p.search["time_s"] * (1 + 1e-12)
    cap = p.search["min_max_shard_bytes"]
    if p.search["optimal"] and n.max_shard_bytes <= cap:
        assert p.search["optimum_s"] <= tn * (1 + 1e-9), (str(p), str(n))


def _scaled(mesh, src, dst, target_elems=1 << 20):
    """The case with its dims halved while each stays a multiple of the mesh size (or of
    both types' splits), down to about ``target_elems``: the same divisibility structure,
    small enough for XLA's CPU compile."""
    import math

    from synth.types import Dim

    shape = list(src.shape)
    for i in range(len(shape)):
        a, b = src.split(mesh, i), dst.split(mesh, i)
        unit = mesh.size if shape[i] % mesh.size == 0 else math.lcm(a, b)
        while shape[i] % unit == 0 and shape[i] % 2 == 0 and (shape[i] // 2) % unit == 0 \
                and math.prod(shape) > target_elems:
            shape[i] //= 2

    def re(t):
        return ArrayType(tuple(Dim(n, d.axes) for n, d in zip(shape, t.dims)), t.unreduced)

    return re(src), re(dst)


@pytest.mark.parametrize("mesh,src,dst", _suite_cases())
def test_no_xla_plan_beats_a_plan_called_optimal(mesh, src, dst):
    from synth import Mesh, parse_type

    if Mesh.parse(mesh).size > 8:
        pytest.skip("XLA's plan is compiled on the 8 CPU devices of this run")
    m = Mesh.parse(mesh)
    src, dst = _scaled(m, parse_type(src), parse_type(dst))
    if src.num_elems() > 1 << 24:
        pytest.skip("XLA's CPU compile of an array over 64 MiB does not fit this run's memory")
    pytest.importorskip("jax")
    from executor.extract import xla_schedule

    p = _auto(m, src, dst)
    for part in ("shardy", "gspmd"):
        s = xla_schedule(m, src, dst, partitioner=part, dtype="float32")
        tx = _schedule_time_s(s)
        assert p.search["lower_bound_s"] <= tx * (1 + 1e-12), (part, s)
        # XLA's plan is comparable when every buffer its ops read or write fits the memory
        # cap our plan was searched within (XLA may exceed the bound; ours may not)
        compared = p.search["optimal"] and _schedule_max_buffer(s) <= p.search["min_max_shard_bytes"]
        _XLA_SEEN.append((mesh, part, compared))
        if compared:
            assert p.search["optimum_s"] <= tx * (1 + 1e-9), (part, str(p), [str(o) for o in s.ops])


def test_xla_plans_were_compared():
    # the check above runs on most compiled cases (30 of 36 when written): XLA's plans
    # that exceed the memory bound are the only ones left out
    if len(_XLA_SEEN) < 30:
        pytest.skip("the XLA cases did not all run in this session")
    assert sum(c for _, _, c in _XLA_SEEN) >= 20


def test_issue_example_data4_model2_beats_three_all_to_alls():
    # issue 18: three all-to-alls receiving 15 MiB were called optimal; XLA's plan (an
    # all-to-all over a factor of data, then a permute) receives 12 MiB in 2 collectives
    p = _auto("data=4,model=2", "[8192{data}, 4096{model}]", "[8192{model}, 4096{data}]", itemsize=2)
    assert p.search["optimal"] and p.num_collectives == 2
    assert p.recv_bytes_max_device == 12 * 2**20
    assert p.search["time_s"] == pytest.approx(261.7e-6, rel=1e-3)
    assert p.search["lower_bound_s"] < p.search["time_s"]  # the bound is the receive bound


def test_issue_example_gather_ties_go_to_less_memory():
    # issue 18: two AllGathers (1.25 GiB peak) where one 8-way gather (1.125 GiB) is within
    # the model's error; on the default model the fused gather is also cheaper
    p = _auto("data=2,model=4", "[32768{data,model}, 8192]", "[32768, 8192]")
    assert p.num_collectives == 1
    assert p.peak_live_bytes == 32768 * 8192 * 4 // 8 + 32768 * 8192 * 4


def test_same_plan_with_a_cpu_burner_beside_it():
    cases = [("a=3,b=2,c=4,d=2,e=3,f=2", "[12{a,c}, 6{e}, 4{d,f}, 2{b}]", "[12{d}, 6{b}, 4, 2]"),
             ("data=4,model=2", "[8192{data}, 4096{model}]", "[8192{model}, 4096{data}]"),
             ("a=3,b=5", "[100{a}, 70{b}]", "[100{b}, 70{a}]"),
             ("x=4,y=2", "[64{x}, 32]{U:y}", "[64, 32{y}]")]
    quiet = [synthesize(*c) for c in cases]
    with cpu_burners(2):
        loaded = [synthesize(*c) for c in cases]
    for a, b in zip(quiet, loaded):
        assert not a.search["cap_fired"] and not b.search["cap_fired"]
        assert plan_digest(a) == plan_digest(b), (str(a), str(b))
        assert a.search["moves"] == b.search["moves"] and a.search["status"] == b.search["status"]
        check_plan_exact(a)


def test_the_search_cost_is_the_schedule_cost():
    # the default model's step costs are the schedule's, uneven and pending cases included
    for mesh, src, dst in [("x=4", "[6{x}]", "[6]"), ("a=3,b=5", "[100{a}, 70{b}]", "[100{b}, 70{a}]"),
                           ("x=4,y=2", "[64{x}, 32]{U:y}", "[64, 32{y}]"),
                           ("x=2,y=4", "[8{x}, 8{y}, 4, 4]", "[8, 8, 4{x}, 4{y}]")]:
        p = _auto(mesh, src, dst)
        assert p.search["time_s"] == pytest.approx(schedule_cost(p, COST)[0], rel=1e-9)
        assert ArrayType.of(p.dst) == ArrayType.parse(dst)


def test_issue_example_six_axes_is_within_the_bound_on_the_default_budget():
    # issue 18: 4x over max(src, dst) when the 100 ms clock ran out; then over it at the
    # default work budget (the exact passes spent it on short plans over the bound). The
    # greedy first pass (synth.planners.auto._greedy_incumbent) seeds them with a plan
    # within it; the plan is checked element by element and honest about the budget.
    p = synthesize("a=3,b=2,c=4,d=2,e=3,f=2", "[12{a,c}, 6{e}, 4{d,f}, 2{b}]", "[12{d}, 6{b}, 4, 2]")
    check_plan_exact(p)
    assert p.search["bound_met"] and p.max_shard_bytes <= p.bound_bytes == 576
    assert p.num_collectives <= 2 and p.search["moves"] <= p.search["budget_moves"]
    assert p.search["optimal"] or any("not proven optimal" in n for n in p.notes)
