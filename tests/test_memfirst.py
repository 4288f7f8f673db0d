"""Memory first (issue 19): where auto's compiled temp bytes are above XLA's, the rule of
executor.memfirst picks the fastest bounded alternative whose compiled temp is not, and
says so. Stubbed compiles check the rule; libtpu compiles check it on a real case."""

from __future__ import annotations

import numpy as np
import pytest

from executor import memfirst, tpu
from synth.interp import check_blocks, interpret
from synth.planners import synthesize

needs_libtpu = pytest.mark.skipif(tpu.libtpu_status() is not None, reason="needs libtpu")

# random-0-024's shape of problem, smaller: auto's one all-to-all then a slice
CASE = ("x=2,y=4", "[16{y}, 16, 16]", "[16{x}, 16, 16{y}]")


def _check(plan):
    """Element by element through synth's interpreter, on the plan's work mesh."""
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    work = plan.work_mesh
    blocks = interpret(plan.steps, plan.work_types[0], work, x)
    check_blocks(x, blocks, plan.work_types[-1], work)


def _cost(mesh):
    from models import load_profile
    from models.plan_cost import machine_cost

    return machine_cost(load_profile("dgx-h100:1"), mesh)


@pytest.fixture(scope="module")
def problem():
    from synth.mesh import Mesh

    mesh = Mesh.of(CASE[0])
    cost = _cost(mesh)
    auto = synthesize(*CASE, cost=cost, budget_moves=3000)
    return auto, cost


def _stub_temps(auto):
    """A stand-in compiler: auto's program 16 units, a plan that slices dim 2 first 2,
    every other plan 4 (what xla-gpu does on random-0-024, in MiB)."""
    calls = []

    def compile_temp(p):
        calls.append(p)
        if memfirst._same_program_key(p) == memfirst._same_program_key(auto):
            return 16, ("compiled", p)
        return (2 if str(p.steps[0]) == "DynSlice(2, x)" else 4), ("compiled", p)

    return compile_temp, calls


def test_auto_is_kept_without_a_compile_when_its_temp_is_not_above_xla(problem):
    auto, cost = problem

    def never(p):
        raise AssertionError("no alternative may be compiled")

    for xla in (16, 17, None):  # equal, above, XLA does not fit: no constraint
        ch = memfirst.choose(auto, 16, "auto-result", xla, never, cost)
        assert ch.plan is auto and ch.label == "auto" and ch.note == "" and ch.result == "auto-result"
        assert ch.compiles == 1 and not ch.changed


def test_the_fastest_alternative_at_or_below_xla_is_chosen_and_named(problem):
    auto, cost = problem
    compile_temp, calls = _stub_temps(auto)
    cands = memfirst.alternatives(auto.mesh, auto.src, auto.dst, auto.itemsize, cost, auto)
    for _, p in cands:  # every candidate moves exactly the target, within the memory bound
        _check(p)
        assert p.max_shard_bytes <= max(auto.bound_bytes, auto.max_shard_bytes)
    ch = memfirst.choose(auto, 16, None, 2, compile_temp, cost, candidates=lambda: cands)
    assert ch.changed and ch.temp_bytes == 2 and str(ch.plan.steps[0]) == "DynSlice(2, x)"
    _check(ch.plan)
    assert ch.result[0] == "compiled" and ch.result[1].steps == ch.plan.steps  # its compile, not a second
    assert ch.plan.planner == "auto" and ch.plan.notes[0] == ch.note  # auto's choice, and it says why
    assert ch.label in dict(cands) and f"chose {ch.label} " in ch.note and ch.note.startswith("memory-first: ")
    # compiled in order of predicted time; every earlier one was above XLA's, so no
    # candidate at or below XLA's is predicted faster than the chosen one
    times = [t.predicted_s for t in ch.tried[1:]]
    assert times == sorted(times) and all(t.temp_bytes > 2 for t in ch.tried[1:-1])
    for label, p in cands:
        t = memfirst.predicted_s(p, cost)
        if t < ch.predicted_s and str(p.steps[0]) == "DynSlice(2, x)":
            pytest.fail(f"{label} is faster and fits, but was not chosen")
    assert len(calls) == ch.compiles - 1 <= memfirst.MAX_ALTERNATIVES
    assert ch.predicted_s >= memfirst.predicted_s(auto, cost)  # the price of the memory, said in the note
    assert f"{ch.predicted_s * 1e6:.1f} us" in ch.note


def test_with_none_at_or_below_xla_the_least_temp_is_chosen_and_compiles_are_bounded(problem):
    auto, cost = problem
    compile_temp, calls = _stub_temps(auto)
    ch = memfirst.choose(auto, 16, None, 1, compile_temp, cost, limit=2)
    assert len(calls) == 2 and ch.compiles == 3  # auto's own, then the bound
    least = min(t.temp_bytes for t in ch.tried)
    assert ch.temp_bytes == least < 16 and "none of the 2 alternatives" in ch.note
    _check(ch.plan)
    ch0 = memfirst.choose(auto, 16, "auto", 1, compile_temp, cost, limit=0)
    assert ch0.plan is auto and "kept auto's plan" in ch0.note


def test_xla_temp_is_the_smaller_partitioner_and_none_where_one_does_not_fit():
    assert memfirst.xla_temp(5, 3) == 3
    assert memfirst.xla_temp(5, None) is None and memfirst.xla_temp() is None


def test_same_program_key_merges_consecutive_slices():
    a = synthesize("x=4,y=8", "[64, 64, 64]", "[64{x}, 64, 64]", planner="normal")
    b = synthesize("x=4,y=8", "[64, 64, 64]", "[64{x}, 64, 64]", planner="auto")
    assert memfirst._same_program_key(a) == memfirst._same_program_key(b) == ("[64{x}, 64, 64]",)


@needs_libtpu
def test_tpu_v5p_strided_case_compiles_at_or_below_xla():
    """transformers-48802-strided on tpu-v5p (libtpu, both sides): auto's three
    all-to-alls compile to more temp than XLA's permute; the rule picks a plan that
    does not, and tpu.memory_case reports it."""
    from experiments.backends import load_machine

    mesh, src, dst = "dp=2,tp=4", "[8192{tp,dp}, 2048]", "[8192{dp,tp}, 2048]"
    spec = load_machine("tpu-v5p", 8).spec
    from executor.compare import parse_case

    row = tpu.memory_case(spec, *parse_case(mesh, src, dst), dtype="float32")
    xla = min(row["shardy_temp_bytes"], row["gspmd_temp_bytes"])
    assert row["ours_temp_bytes"] <= xla
    mf = row["memory_first"]
    assert mf["tried"][0]["label"] == "auto" and mf["compiles"] <= 1 + memfirst.MAX_ALTERNATIVES
    # libtpu of jax 0.10.2: auto's three all-to-alls need 16 MiB, XLA's permute 8.03 MiB
    assert mf["tried"][0]["temp_bytes"] > xla
    assert mf["note"].startswith("memory-first:") and mf["chosen"] in mf["note"]
    from synth.plan import Plan

    plan = Plan.from_dict(mf["plan"])  # the chosen plan, checked element by element
    assert [str(c) for c in plan.steps] == row["ours_plan_steps"] == mf["plan_steps"]
    assert plan.planner == "auto" and plan.max_shard_bytes <= plan.bound_bytes
    _check(plan)


@needs_libtpu
def test_sweep_row_names_auto_and_says_which_plan_memory_first_chose(tmp_path):
    """The sweep's auto row on tpu-v5p (libtpu both sides): temp at or below XLA's, the
    planner column still auto, the note first in the row's notes, and the report lists it."""
    from experiments import runner
    from experiments.config import parse_config
    from experiments.report import build_report

    cfg = parse_config({
        "name": "memfirst", "machines": ["tpu-v5p"], "planners": ["auto", "xla-shardy"],
        "suites": [{"xla-issues": {"names": ["transformers-48802-strided"]}}],
        "runner": {"workers": 1, "compile": ["auto"]}})
    out = tmp_path / "run"
    runner.run(cfg, out, workers=1, progress=False)
    rows = {r["planner"]: r for r in map(__import__("json").loads, (out / "rows.jsonl").read_text().splitlines())}
    auto, xla = rows["auto"], rows["xla-shardy"]
    assert auto["status"] == xla["status"] == "ok" and auto["compiler"] == xla["compiler"] == "libtpu"
    assert auto["temp_bytes"] <= xla["temp_bytes"]
    assert auto["notes"].startswith("memory-first: ") and "chose " in auto["notes"]  # as the test above
    rep = build_report(out, planner="auto")
    assert [(t["machine"], t["case"]) for t in rep.memory_first] == [("tpu-v5p", "transformers-48802-strided")]
    assert "memory-first rule chose" in rep.markdown()


@needs_libtpu
def test_executor_compiled_applies_the_rule_to_ours():
    """``python -m executor.compiled`` (the app's Compare page): ours is the chosen plan's
    compiled schedule, its meta and the document's ``memory_first`` say why."""
    from executor import compiled
    from synth.plan import Plan

    args = compiled._parser().parse_args([
        "--machine", "tpu-v5p:2x2x2", "--mesh", "dp=2,tp=4", "--src", "[8192{tp,dp}, 2048]",
        "--dst", "[8192{dp,tp}, 2048]", "--strategies", "ours,xla-shardy,xla-gspmd"])
    out = compiled.run(args)
    mf = out["memory_first"]
    temps = {k: v["schedule"]["meta"]["temp_bytes"] for k, v in out["strategies"].items()}
    assert temps["ours"] <= min(temps["xla-shardy"], temps["xla-gspmd"]) < mf["tried"][0]["temp_bytes"]
    assert out["strategies"]["ours"]["schedule"]["meta"]["memory_first"]["note"] == mf["note"]
    plan = Plan.from_dict(mf["plan"])
    assert out["strategies"]["ours"]["schedule"]["meta"]["plan_steps"] == [str(c) for c in plan.steps]
    _check(plan)
