"""Round 7's per-call shortcuts give the answers of the general paths.

* ``permute_is_noop`` (a permute's no-op test on the types alone where the unreduced sets
  and the blocks per dim are the same) and ``permute_moved`` (the receiving devices
  without assigning each its holder) against ``permute_sources``;
* ``Collective.recv_elems_max`` and ``Plan.recv_bytes_per_step`` against the maxima of
  the per-device arrays;
* ``_check_syntax``'s path for whole axes against the pairwise check it skips;
* ``parse_axis``'s cache against the parse;
* ``Budget.probe`` as one class: limits, cuts and nesting.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from synth.bench import bench_cases, check_plan_exact
from synth.collectives import AllPermute, _permute_sources, permute_is_noop, permute_moved, permute_sources
from synth.errors import TypeSpecError
from synth.memo import clear_all
from synth.mesh import Mesh, _parse_axis, parse_axis
from synth.planners import synthesize
from synth.planners.astar import Budget, OutOfWork
from synth.types import ArrayType, Dim, _pairwise_overlap, refine, refine_type


def _types(mesh: Mesh, shape, unreduced_choices=((),)):
    """Every type of ``shape`` over ``mesh``'s axes (each axis in at most one dim, any
    order, at most 2 a dim) with each of the unreduced sets given."""
    names = mesh.names
    out = []
    for u in unreduced_choices:
        free = [a for a in names if a not in u]
        for assign in itertools.product(range(len(shape) + 1), repeat=len(free)):
            per = [[a for a, k in zip(free, assign) if k == i] for i in range(len(shape))]
            if any(len(p) > 2 for p in per):
                continue
            for orders in itertools.product(*[list(itertools.permutations(p)) for p in per]):
                out.append(ArrayType(tuple(Dim(n, o) for n, o in zip(shape, orders)), u))
    return out


def _slow_noop(t_in, t_out, mesh):
    return bool((_permute_sources(t_in, t_out, mesh) == np.arange(mesh.size)).all())


@pytest.mark.parametrize("mesh, shape, unreduced", [
    ("x=2,y=1,z=2", (4, 2), ((), ("y",))),
    ("x=2,y=3,w=1", (6, 3), ((),)),
    ("x=2,y=2,w=1", (3, 5), ((),)),             # uneven: other blocks per dim
    ("x=2,y=2,z=2", (8, 2), ((), ("z",), ("x",))),  # pending sums moving to other axes
    ("a=2,b=2,u=1", (4, 4), ((), ("u",))),
])
def test_permute_noop_and_moved_are_the_sources(mesh, shape, unreduced):
    mesh = Mesh.of(mesh)
    types = _types(mesh, shape, unreduced)
    by_local = {}
    for t in types:
        by_local.setdefault((t.local_shape(mesh), len(t.unreduced)), []).append(t)
    pairs = noops = 0
    for group in by_local.values():
        for a, b in itertools.product(group, repeat=2):
            try:
                AllPermute(b).apply(a, mesh)
            except Exception:
                continue
            clear_all()
            slow = _permute_sources(a, b, mesh)
            moved = slow != np.arange(mesh.size)
            assert np.array_equal(permute_moved(a, b, mesh), moved), (a, b)
            assert permute_is_noop(a, b, mesh) == (not moved.any()), (a, b)
            assert AllPermute(b).is_noop(a, mesh) == (not moved.any())
            rows = AllPermute(b).recv_elems(a, b, mesh)
            assert np.array_equal(rows, np.where(moved, a.shard_elems(mesh), 0))
            assert AllPermute(b).recv_elems_max(a, b, mesh) == int(rows.max())
            assert np.array_equal(permute_sources(a, b, mesh), slow)
            pairs += 1
            noops += not moved.any()
    assert pairs > 20 and 0 < noops < pairs


def test_noop_test_on_the_types_alone_covers_size_one_relabels():
    mesh = Mesh.of("x=2,y=2,w=1,v=1")
    cases = [
        ("[4{x,w}, 2{v}]", "[4{w,x}, 2]", True),    # size-1 axes moved, dropped
        ("[4, 2{x}]", "[4{v}, 2{x}]", True),
        ("[4{x,y}, 2]", "[4{y,x}, 2]", False),       # same axes, another order
        ("[4{x}, 2{y}]", "[4{y}, 2{x}]", False),     # axes swapped between dims
        ("[4{x}, 2]{U:y}", "[4{x,w}, 2]{U:y}", True),
    ]
    for a, b, noop in cases:
        a, b = ArrayType.parse(a), ArrayType.parse(b)
        assert permute_is_noop(a, b, mesh) is noop and _slow_noop(a, b, mesh) is noop, (a, b)


def _bench_plans(n=60):
    out = []
    for mesh, src, dst in bench_cases(n, seed=5):
        for planner in ("normal", "auto", "easy"):
            kw = {"budget_moves": 2000} if planner == "auto" else {}
            out.append(synthesize(mesh, src, dst, planner=planner, **kw))
    return out


def test_step_maxima_are_the_per_device_rows_maxima():
    from synth.plan import Plan

    kinds = set()
    for p in _bench_plans():
        fresh = Plan(p.mesh, p.src, p.dst, p.steps, p.types, p.itemsize, p.planner)
        got = fresh.recv_bytes_max_device  # before the rows are built
        assert "recv_bytes_per_device_per_step" not in fresh.__dict__ or not p.steps
        r = fresh.recv_bytes_per_device_per_step
        assert got == (int(r.sum(axis=0).max()) if len(r) else 0)
        wm, wt = p.work_mesh, p.work_types
        rows = p.recv_bytes_per_device_per_step
        for c, a, b in zip(p.steps, wt[:-1], wt[1:]):
            slow = c.recv_elems(a, b, wm)
            assert c.recv_elems_max(a, b, wm) == int(slow.max())
            kinds.add(c.kind)
            if c.kind == "all_permute":
                assert c.is_noop(a, wm) == _slow_noop(a, ArrayType.of(c.target), wm)
        assert p.recv_bytes_per_step == ([int(v) for v in rows.max(axis=1)] if len(rows) else [])
        assert p.noop_steps == tuple(
            _slow_noop(a, ArrayType.of(c.target), wm) if c.kind == "all_permute" else c.is_noop(a, wm)
            for c, a in zip(p.steps, wt[:-1]))
    assert {"all_permute", "all_gather", "all_to_all", "dyn_slice"} <= kinds


def test_plans_stay_exact_with_the_shortcuts():
    for mesh, src, dst in bench_cases(12, seed=9):
        if src.num_elems() > 20_000:
            continue
        check_plan_exact(synthesize(mesh, src, dst, planner="auto", budget_moves=3000))


# -- type checks ------------------------------------------------------------------
def test_whole_axis_types_are_checked_as_the_pairwise_check_does():
    rng = random.Random(7)
    pool = ["x", "y", "z", "x:(1)2", "x:(2)2", "y:(1)3", "w"]
    checked = errors = 0
    for _ in range(3000):
        rank = rng.randint(1, 3)
        dims = tuple(Dim(rng.randint(1, 12), tuple(rng.sample(pool, rng.randint(0, 2)))) for _ in range(rank))
        u = tuple(rng.sample(pool, rng.randint(0, 2)))
        want = _pairwise_overlap(dims, tuple(sorted(u, key=lambda a: (parse_axis(a)[0], parse_axis(a)[1] or 0))))
        try:
            ArrayType(dims, u)
            got = None
        except TypeSpecError as e:
            got = str(e)
        assert got == want, (dims, u)
        checked += 1
        errors += got is not None
    assert checked == 3000 and 0 < errors < checked


def test_parse_axis_cache_answers_as_the_parse():
    names = ["x", "_a1", "x:(1)2", "x:(2)4", "x:(0)1", "1x", "x y", "é", "", "x:(2)", "data:(12)3"]
    for _ in range(2):
        for a in names:
            assert parse_axis(a) == _parse_axis(a)
    for bad in (None, 3, ("x",), ["x"]):
        assert parse_axis(bad) is None

    class S(str):
        pass

    assert parse_axis(S("x:(1)2")) == ("x", 1, 2)
    from synth.mesh import PARSE_AXIS_CACHE_LEN, _parse_axis_str

    long = "a" * (PARSE_AXIS_CACHE_LEN + 1)
    before = _parse_axis_str.cache_info().currsize
    assert parse_axis(long) == (long, None, None)
    assert _parse_axis_str.cache_info().currsize == before  # long names are not kept


# -- the probe ------------------------------------------------------------------------
def test_probe_limits_cuts_and_restores():
    b = Budget(100, 1e18)
    with b.probe(10) as pr:
        assert b.limit == 10
        with b.probe(50) as inner:
            assert b.limit == 10  # the tighter limit stays
        assert inner.cut is False and b.limit == 10
        b.tick(5)
        b.tick(6)  # past the probe: cut, swallowed
    assert pr.cut is True and b.limit == 100 and b.used == 11
    b2 = Budget(5, 1e18)
    with pytest.raises(OutOfWork):
        with b2.probe(10) as pr2:
            b2.tick(6)  # past the whole budget: not the probe's cut
    assert pr2.cut is False and b2.limit == 5


def test_refined_types_keep_their_noops():
    mesh = Mesh.of("x=4,w=1")
    work, (s, d) = refine(mesh, [ArrayType.parse("[8{x:(1)2}, 4{w}]"), ArrayType.parse("[8{x:(1)2}, 4]")])
    assert permute_is_noop(s, d, work) and _slow_noop(s, d, work)
    assert refine_type(s, work) == s


# -- error messages formatted on demand -----------------------------------------------
def test_type_rule_messages_are_the_eager_ones():
    from synth.collectives import (
        AllGather,
        AllReduce,
        AllToAll,
        DynSlice,
        ReduceScatter,
        ShardedToUnreduced,
        Unreduce,
    )
    from synth.errors import CollectiveError

    mesh = Mesh.of("x=2,y=3")
    t = ArrayType.parse("[6{x}, 4]{U:y}")
    cases = [
        (DynSlice(5, "y"), f"DynSlice(dim=5, axis='y') on {t}"),
        (AllGather(1, "x"), f"AllGather(dim=1, axis='x') on {t}"),
        (AllToAll(0, 0, "x"), f"AllToAll(src_dim=0, dst_dim=0, axis='x') on {t}"),
        (AllPermute(ArrayType.parse("[6, 4{x}]{U:y}")), f"AllPermute(target=[6, 4{{x}}]{{U:y}}) on {t}"),
        (AllReduce("x"), f"AllReduce(axis='x') on {t}"),
        (ReduceScatter(1, "x"), f"ReduceScatter(dim=1, axis='x') on {t}"),
        (Unreduce("x"), f"Unreduce(axis='x') on {t}"),
        (ShardedToUnreduced(1, "x"), f"ShardedToUnreduced(dim=1, axis='x') on {t}"),
    ]
    for c, who in cases:
        with pytest.raises(CollectiveError) as e:
            c.apply(t, mesh)
        assert str(e.value).startswith(who + ": "), (str(e.value), who)


def test_check_words_unknown_axes_as_before():
    with pytest.raises(TypeSpecError, match=r"source type \[4\{q\}\]: dim 0 uses axis 'q'"):
        ArrayType.parse("[4{q}]").check(Mesh.of("x=2"), "source type")
    with pytest.raises(TypeSpecError, match=r"the unreduced set uses axis 'q'"):
        ArrayType.parse("[4]{U:q}").check(Mesh.of("x=2"), "source type")
    assert ArrayType.parse("[4{x:(1)2}]").check(Mesh.of("x=4")) == ArrayType.parse("[4{x:(1)2}]")


# -- the receive bound with sums reduced on the way ---------------------------------
def _bound_from_boxes(mesh, src, dst, itemsize):
    """recv_lower_bound_bytes's reduced-sums branches from the per-device boxes."""
    import math

    from synth.collectives import groups_of

    work, (s, d) = refine(mesh.base_mesh if mesh.base else mesh, [src, dst])
    d0, d1 = d.regions(work)
    block = np.maximum(d1 - d0, 0).prod(axis=1)
    reduced = [a for a in s.unreduced if a not in d.unreduced and work.shape[a] > 1]
    assert reduced
    if not d.unreduced:
        n_r = math.prod(work.shape[a] for a in reduced)
        return max(int(block.max()), -(-(n_r - 1) * s.num_elems() // work.size)) * itemsize
    return max(-(-int(block[list(g)[0]]) // len(g)) for g in groups_of(work, d.unreduced)) * itemsize


def test_reduced_sums_bound_without_boxes_is_the_boxes_bound():
    from synth.plan import recv_lower_bound_bytes

    seen = 0
    for mesh, src, dst in bench_cases(400, seed=11):
        work, (s, d) = refine(mesh, [src, dst])
        if not any(a not in d.unreduced and work.shape[a] > 1 for a in s.unreduced):
            continue
        assert recv_lower_bound_bytes(mesh, src, dst, 4) == _bound_from_boxes(mesh, src, dst, 4), (mesh, src, dst)
        seen += 1
    for mesh, src, dst in [("x=3,y=2", "[5{x}, 3]{U:y}", "[5, 3{x}]"), ("x=4", "[7, 3]{U:x}", "[7{x}, 3]"),
                           ("x=2,y=2,z=2", "[5{x}]{U:y,z}", "[5]{U:z}"), ("a=4,b=2", "[9{a:(1)2}]{U:b}", "[9]{U:a:(2)2}")]:
        m, s_, d_ = Mesh.of(mesh), ArrayType.parse(src), ArrayType.parse(dst)
        assert recv_lower_bound_bytes(m, s_, d_, 2) == _bound_from_boxes(m, s_, d_, 2)
        seen += 1
    assert seen > 40


# -- refined meshes built without re-checking -----------------------------------------
def test_refined_mesh_is_the_checked_construction(monkeypatch):
    from synth.limits import LimitError
    from synth.planners.moves import work_mesh

    for text in ("x=12", "x=4,y=6,z=5,w=1", "a=8,b=3", "x=2,y=2@0,2,4,6", "p=30,q=7"):
        mesh = Mesh.of(text)
        w = work_mesh(mesh, [])
        if w is mesh:
            continue
        checked = Mesh(w.axes, w.base)
        assert w == checked and hash(w) == hash(checked) and repr(w) == repr(checked)
        assert w.shape == checked.shape and w.size == mesh.size and w.devices == ()
        assert np.array_equal(w.coords, checked.coords)
    # the one check a refinement can fail: more axes than the limit allows
    monkeypatch.setenv("REDIST_LIMIT_MESH_AXES", "4")
    mesh = Mesh.of("x=8,y=4")  # 3 + 2 prime factors
    with pytest.raises(LimitError) as e:
        work_mesh(mesh, [])
    with pytest.raises(LimitError) as e2:
        Mesh(tuple((f"x:({2 ** i})2", 2) for i in range(3)) + (("y:(1)2", 2), ("y:(2)2", 2)), mesh.axes)
    assert str(e.value) == str(e2.value)


# -- rewritten types built without re-checking ------------------------------------------
def test_rewritten_types_are_the_checked_ones():
    """with_dim_axes / with_unreduced give the value ArrayType(...) gives, or its error."""
    rng = random.Random(3)
    pool = ["x", "y", "z", "x:(1)2", "x:(2)2", "w", "1bad", "x:(2)2", "q", "\u00e9"]
    base = [ArrayType.parse(t) for t in ("[8{x,y}, 6{z}]{U:w}", "[8{x:(1)2}, 6{y}]{U:x:(2)2}",
                                         "[4, 2{w}, 3]{U:y,z}", "[12{y,x}]")]
    skipped = checked = added = 0
    for _ in range(4000):
        t = rng.choice(base)
        names = list(t.all_axes) + pool
        if rng.random() < 0.5:
            i = rng.randrange(t.rank)
            axes = tuple(rng.sample(names, rng.randint(0, 3)))
            dims = list(t.dims)
            dims[i] = Dim(dims[i].size, axes)
            make, args = (lambda t=t, i=i, axes=axes: t.with_dim_axes(i, axes)), (tuple(dims), t.unreduced)
        else:
            u = tuple(rng.sample(names, rng.randint(0, 3)))
            make, args = (lambda t=t, u=u: t.with_unreduced(u)), (t.dims, u)
        try:
            want = ArrayType(*args)
        except TypeSpecError as e:
            with pytest.raises(TypeSpecError) as got:
                make()
            assert str(got.value) == str(e)
            checked += 1
            continue
        got = make()
        assert got == want and hash(got) == hash(want) and str(got) == str(want)
        skipped += set(got.all_axes) <= set(t.all_axes)
        added += not set(got.all_axes) <= set(t.all_axes)
    assert skipped > 500 and checked > 500 and added > 300


def test_base_mesh_is_built_once_and_used_axes_are_in_order():
    from synth.planners.moves import work_mesh

    w = work_mesh(Mesh.of("x=12,y=2"), [])
    assert w.base_mesh is w.base_mesh and w.base_mesh == Mesh(w.base) == Mesh.of("x=12,y=2")
    plain = Mesh.of("x=2")
    assert plain.base_mesh is plain
    t = ArrayType.parse("[8{x,y}, 4, 6{z}]{U:w}")
    assert t.used_axes == ("x", "y", "z") and t.all_axes == ("x", "y", "z", "w")
    assert ArrayType.parse("[8]").used_axes == ()
    # canonical on a refined mesh: names without factors stay as they are
    assert t.canonical(work_mesh(Mesh.of("x=2,y=2,z=3,w=4"), [])) is t


def test_shard_arithmetic_is_the_products():
    import math

    for mesh, src, dst in bench_cases(300, seed=13):
        work, (s, d) = refine(mesh, [src, dst])
        for t, m in ((src, mesh), (dst, mesh), (s, work), (d, work)):
            splits = tuple(math.prod(m.shape[a] for a in dd.axes) for dd in t.dims)
            local = tuple(-(-dd.size // k) for dd, k in zip(t.dims, splits))
            assert t.splits(m) == splits and t.local_shape(m) == local
            assert t.shard_elems(m) == math.prod(local)
    # a sub-axis on the user's mesh resolves (and is checked) as before
    t = ArrayType.parse("[9{x:(2)3}, 4]")
    assert t.local_shape(Mesh.of("x=6")) == (3, 4) and t.shard_elems(Mesh.of("x=6")) == 12
    with pytest.raises(Exception) as e1:
        ArrayType.parse("[9{x:(4)3}, 4]").local_shape(Mesh.of("x=6"))
    with pytest.raises(Exception) as e2:
        math.prod(Mesh.of("x=6").shape[a] for a in ("x:(4)3",))
    assert type(e1.value) is type(e2.value) and str(e1.value) == str(e2.value)
