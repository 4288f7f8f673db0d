"""A planner call leaves no cyclic garbage.

A search builds hundreds of thousands of small objects (states, successor lists, heap
entries) while the collector is paused (``synth.planners.gcpause``). Where a closure or a
kept exception put them in a reference cycle, none of them was freed when the call
returned: the collector had to walk and free them later, in whatever code ran next (on
the bench's 2000 cases, side by side, a loop of ``synthesize`` calls took 108 s of CPU with
the cycles and 71 s without; one budget-spending call left 804,120 objects behind). The
cycles were:

* a compiled closure scope holding an inner function that refers to it (``astar``'s
  ``key`` and ``no_worse``, ``_seed_best``'s ``expand`` and ``finish``, ``_middle``'s and
  ``_plan_search_core``'s helpers): those are bound as default arguments instead;
* recursive closures (``_assign_products``, ``_subsets_with_product``, ``_fits``,
  ``_free_relabels``, ``Space.class_members``): cleared on the way out;
* errors kept in a list for their message (``plan_normal``): kept without their traceback
  and chained errors (``synth.errors.kept_for_message``; ``plan_crossmesh``'s refused
  candidates too);
* ``Mesh.shape``'s dict pointing back at its mesh.

Each case below left such garbage before (found by running this check on the code before
the fix, compiled and pure); every plan is checked element by element. The pure modules
are checked in a subprocess with ``SYNTH_PURE_PYTHON=1``.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from synth.bench import bench_cases, check_plan_exact
from synth.memo import clear_all
from synth.planners import synthesize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: bench cases (seed 0, of 2000) that left cyclic garbage before the fix: the largest
#: searches (362, 310, 33, 166), the normal planner's kept and chained errors (155, 147,
#: 343, 439, 15, 63); all within 20,000 elements so the interpreter checks every one
CASES = [362, 310, 33, 166, 155, 147, 343, 439, 15, 63]
PLANNERS = ("auto", "normal", "easy", "search")
#: auto's work budget here (362 spends it: the budget-exhausting path is covered)
BUDGET = 4000

_SCRIPT = r"""
import gc, json, sys
from synth.bench import bench_cases, check_plan_exact
from synth.memo import clear_all
from synth.planners import synthesize
cases = bench_cases(2000, 0)
idx, planners, budget = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
out = {}
for k in idx:
    for pl in planners:
        kw = {"budget_moves": budget} if pl == "auto" else {}
        clear_all(); gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            p = synthesize(*cases[k], planner=pl, **kw)
            moves = (p.search or {}).get("moves")
            check_plan_exact(p)
            del p
            gc.collect()
            out[f"{k}:{pl}"] = [len(gc.garbage), moves]
        finally:
            gc.garbage.clear(); gc.set_debug(0)
print(json.dumps(out))
"""


def _garbage_after(case, planner):
    """(objects the collector found unreachable after the call, moves, the plan)."""
    kw = {"budget_moves": BUDGET} if planner == "auto" else {}
    clear_all()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        p = synthesize(*case, planner=planner, **kw)
        moves = (p.search or {}).get("moves")
        gc.collect()
        found = [type(o).__qualname__ for o in gc.garbage]
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
    return found, moves, p


@pytest.fixture(scope="module")
def cases():
    return bench_cases(2000, 0)


@pytest.mark.parametrize("k", CASES)
def test_no_cyclic_garbage(cases, k):
    for planner in PLANNERS:
        found, moves, plan = _garbage_after(cases[k], planner)
        check_plan_exact(plan)
        assert found == [], (k, planner, len(found), sorted(set(found))[:10])
        if planner == "auto" and k == 362:
            assert moves == BUDGET  # the budget-exhausting path ran


def test_no_cyclic_garbage_pure_python():
    env = dict(os.environ, SYNTH_PURE_PYTHON="1", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(CASES), json.dumps(PLANNERS), str(BUDGET)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(out) == len(CASES) * len(PLANNERS)
    left = {key: n for key, (n, _) in out.items() if n}
    assert left == {}
    assert out["362:auto"][1] == BUDGET
