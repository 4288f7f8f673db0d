"""The synthesizer's per-call shortcuts give the answers of the general paths.

* ``schedule_cost`` under the default model sums the op times of
  ``Plan.op_bytes`` (kinds and received bytes only) instead of building the schedule:
  for plans of every kind the two sums are the same float;
* ``ArrayType._derived`` (refinements, canonical forms, search states) builds the
  value ``ArrayType(...)`` validates: equal and hashing alike;
* ``permute_sources`` and ``groups_of`` are memoised: the memo's answer is the
  computation's, and the array handed out cannot be written.
"""

from __future__ import annotations

import numpy as np
import pytest

from synth.bench import bench_cases, check_plan_exact
from synth.collectives import _SOURCES_MEMO, _groups_of, _permute_sources, groups_of, permute_sources
from synth.mesh import Mesh
from synth.planners import DefaultCost, synthesize
from synth.planners.cost import op_time, schedule_cost
from synth.planners.moves import work_mesh
from synth.types import ArrayType, Dim, refine_type


def _plans(n=40):
    out = []
    for mesh, src, dst in bench_cases(n, seed=3):
        if src.num_elems() > 20_000:  # the interpreter checks every element
            continue
        for planner in ("normal", "auto"):
            kw = {"budget_moves": 3000} if planner == "auto" else {}
            p = synthesize(mesh, src, dst, planner=planner, **kw)
            check_plan_exact(p)
            out.append(p)
    return out


def test_default_cost_from_op_bytes_is_the_schedules_sum():
    cost = DefaultCost()
    kinds = set()
    for p in _plans():
        ops = p.to_schedule().ops
        assert [(o.kind, o.recv_bytes) for o in ops] == p.op_bytes()
        slow = sum(op_time(cost, o) for o in ops)
        t, moved, ncoll = schedule_cost(p, cost)
        assert t == slow  # the same float, not approximately
        assert (moved, ncoll) == (int(sum(p.recv_bytes_per_step)), p.num_collectives)
        kinds |= {o.kind for o in ops}
    assert {"all_gather", "all_to_all", "permute", "dyn_slice"} <= kinds


def test_a_subclass_of_the_default_model_is_costed_through_the_schedule():
    class Doubled(DefaultCost):
        def op_time_s(self, op):
            return 2 * super().op_time_s(op)

    p = synthesize("x=2,y=4", "[8{x}, 8{y}]", "[8{y}, 8{x}]", planner="normal")
    check_plan_exact(p)
    assert p.num_collectives >= 1
    assert schedule_cost(p, Doubled())[0] == pytest.approx(2 * schedule_cost(p, DefaultCost())[0], rel=1e-12)


@pytest.mark.parametrize("mesh, t", [
    ("x=8,y=6", "[48{x,y}, 12]"),
    ("x=8,y=6", "[48{x:(1)2}, 12{y}]{U:x:(2)4}"),
    ("a=4,b=9,c=2", "[36{b}, 8{a:(2)2,c}, 3]{U:a:(1)2}"),
])
def test_derived_types_equal_validated_ones(mesh, t):
    mesh, t = Mesh.parse(mesh), ArrayType.parse(t)
    wm = work_mesh(mesh, [t])
    r = refine_type(t, wm)
    checked = ArrayType(tuple(Dim(d.size, d.axes) for d in r.dims), r.unreduced)
    assert r == checked and hash(r) == hash(checked) and str(r) == str(checked)
    c = r.canonical(mesh)
    again = ArrayType(tuple(Dim(d.size, d.axes) for d in c.dims), c.unreduced)
    assert c == again and hash(c) == hash(again) and c == t.canonical(mesh)


def test_memoised_sources_and_groups_are_the_computed_ones():
    mesh = Mesh.parse("x=2,y=3,z=4")
    a = ArrayType.parse("[24{x,z}, 6{y}]")
    b = ArrayType.parse("[24{z,x}, 6{y}]")
    _SOURCES_MEMO.clear()
    first = permute_sources(a, b, mesh)
    assert (first == _permute_sources(a, b, mesh)).all()
    assert permute_sources(a, b, mesh) is first  # memoised
    assert not first.flags.writeable
    with pytest.raises(ValueError):
        first[0] = 1
    assert not (first == np.arange(mesh.size)).all()  # the permute moves data
    for axis in ("x", ("z", "x"), "y", ("x", "y", "z")):
        assert groups_of(mesh, axis) == _groups_of(mesh, (axis,) if isinstance(axis, str) else tuple(axis))
    wm = work_mesh(Mesh.parse("x=4,y=2"), [ArrayType.parse("[8{x:(1)2}, 2{y}]")])
    name = [n for n, _ in wm.axes if n.startswith("x")][0]
    assert groups_of(wm, name) == _groups_of(wm, (name,))
    assert len(groups_of(wm, name)) * len(groups_of(wm, name)[0]) == wm.size


def test_a_memo_is_bounded_and_hands_out_read_only_arrays(monkeypatch):
    from synth import memo

    monkeypatch.setattr(memo, "MAX_ENTRIES", 3)
    monkeypatch.setattr(memo, "MAX_BYTES", 1000)
    m = memo.Memo("test")
    made = []

    def make(k, n):
        def f():
            made.append(k)
            return np.arange(n, dtype=np.int64)
        return f

    a = m.get("a", make("a", 10))
    assert m.get("a", make("a", 10)) is a and made == ["a"]  # the second get is the memo's
    assert not a.flags.writeable
    m.get("b", make("b", 10))
    m.get("c", make("c", 10))
    m.get("d", make("d", 10))  # a fourth entry: the memo starts afresh
    assert len(m) == 1
    m.get("big", make("big", 200))  # 1600 bytes: over the byte cap, handed out but not kept
    assert "big" not in m.values and m.nbytes <= 1000
    with pytest.raises(ZeroDivisionError):
        m.get("err", lambda: 1 // 0)
    assert "err" not in m.values  # an error is not memoised
