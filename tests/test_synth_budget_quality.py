"""``synth bench --quality-at``: what a work budget does to plan quality, case by case.

The comparison is a benchmark (it prints figures, it asserts nothing about them); these
tests check that what it reports is what the planner does: equal budgets give identical
plans, and a case it reports costlier at the smaller budget is costlier when replayed.
"""

from __future__ import annotations

import pytest

from synth.bench import bench_cases, check_plan_exact, format_budget_quality, run_budget_quality
from synth.cli import main
from synth.planners import synthesize

CASES, SEED = 24, 0


def test_equal_budgets_give_identical_plans():
    res = run_budget_quality(CASES, SEED, budget_moves=600, base_moves=600)
    assert res["identical_plans"] == CASES
    assert res["time"] == {"cheaper": 0, "equal": CASES, "costlier": 0}
    assert res["bound_lost"] == res["bound_gained"] == 0
    assert res["proven_optimal"][0] == res["proven_optimal"][1]


def test_a_case_reported_costlier_is_costlier_when_replayed():
    res = run_budget_quality(CASES, SEED, budget_moves=30, base_moves=3000)
    t = res["time"]
    assert t["cheaper"] + t["equal"] + t["costlier"] == CASES
    assert t["costlier"] == len(res["worst_cases"]) or len(res["worst_cases"]) == 10
    assert res["worst_cases"], "30 moves should cut some of these cases short"
    k = res["worst_cases"][0]
    mesh, src, dst = bench_cases(CASES, SEED)[k]
    big = synthesize(mesh, src, dst, budget_moves=3000)
    small = synthesize(mesh, src, dst, budget_moves=30)
    check_plan_exact(big)
    check_plan_exact(small)
    assert small.search["time_s"] > big.search["time_s"]
    assert (small.search["time_s"] / big.search["time_s"] - 1) * 100 == pytest.approx(res["costlier_max_pct"])
    text = format_budget_quality(res)
    assert f"costlier {t['costlier']}" in text and "at 30 moves" in text


def test_bad_budget_is_one_line_and_exit_2(capsys):
    assert main(["bench", "--quality-at", "1.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--quality-at" in err
