"""The collectives over several dims (one AllGather / AllToAll / DynSlice carrying
several moves) and the local ShardedToUnreduced: every facet of the table, each data
rule checked element by element by the interpreter (random partial sums, garbage in
the padding), on even and uneven dims, sub-axes and pending sums."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth import (
    COLLECTIVES,
    AllGather,
    AllReduce,
    AllToAll,
    ArrayType,
    Dim,
    DynSlice,
    Mesh,
    MultiAllGather,
    MultiAllToAll,
    MultiDynSlice,
    Plan,
    ShardedToUnreduced,
    fuse,
    interpret,
)
from synth.collectives import _SCHEDULE_LOWERING, Collective, collective_from_dict
from synth.errors import CollectiveError, RedistributionError
from synth.interp import InterpreterError, check_blocks

MULTI = ("multi_dyn_slice", "multi_all_gather", "multi_all_to_all", "sharded_to_unreduced")


def _check(steps, src, mesh, dst=None):
    """Run ``steps`` in the interpreter (it checks every device after every step) and
    check the final blocks against the target type on an independent array."""
    mesh = Mesh.of(mesh)
    src = ArrayType.of(src)
    t = src
    for c in steps:
        t = c.apply(t, mesh)
    if dst is not None:
        assert t == ArrayType.of(dst), (str(t), dst)
    x = np.random.default_rng(7).integers(-50, 50, size=src.shape)
    check_blocks(x, interpret(steps, src, mesh, x, seed=3), t, mesh, "final")
    return t


# -- the facets -------------------------------------------------------------------
def test_every_new_kind_has_every_facet():
    from executor.lowering import LOWERINGS  # lowering.py imports jax only inside functions

    for kind in MULTI:
        cls = COLLECTIVES[kind]
        assert issubclass(cls, Collective) and cls.kind == kind
        assert not getattr(cls, "__abstractmethods__", None)
        for facet in ("apply", "run", "recv_elems", "peak_elems", "to_dict"):
            assert getattr(cls, facet) is not getattr(Collective, facet, None) or facet == "peak_elems"
        assert kind in _SCHEDULE_LOWERING, f"{kind}: no schedule lowering"
        assert kind in LOWERINGS, f"{kind}: no JAX lowering"
        assert callable(LOWERINGS[kind].emit) and callable(LOWERINGS[kind].source)


EXAMPLES = [
    # (mesh, src, step, dst)
    ("x=2,y=4", "[16{x}, 8{y}]", MultiAllGather(((0, "x"), (1, "y"))), "[16, 8]"),
    ("x=2,y=4", "[16, 8]", MultiDynSlice(((0, "x"), (1, "y"))), "[16{x}, 8{y}]"),
    ("a=2,b=2,c=2", "[8{a,b}, 8{c}, 4, 4]", MultiAllToAll(((0, 2, "b"), (1, 3, "c"))),
     "[8{a}, 8, 4{b}, 4{c}]"),
    ("x=2", "[16{x}, 8]", ShardedToUnreduced(0, "x"), "[16, 8]{U:x}"),
]


@pytest.mark.parametrize("case", range(len(EXAMPLES)))
def test_examples_type_data_json_schedule(case):
    mesh, src, c, dst = EXAMPLES[case]
    mesh = Mesh.parse(mesh)
    _check([c], src, mesh, dst)
    back = collective_from_dict(c.to_dict())
    assert back == c and repr(back) == repr(c)
    assert eval(repr(c), {type(c).__name__: type(c)}) == c  # the repr reads like the constructor
    plan = Plan.build(mesh, src, dst, [c], itemsize=4)
    again = Plan.from_dict(plan.to_dict())
    assert again.steps == plan.steps and again.types == plan.types
    ops = plan.to_schedule().ops
    from executor.hlo import COLLECTIVE_OPCODES  # the HLO reader reads every op kind back

    assert all(op.is_local or op.kind in COLLECTIVE_OPCODES.values() for op in ops)
    assert [op.kind for op in ops] == [{"multi_dyn_slice": "dyn_slice", "multi_all_gather": "all_gather",
                                        "multi_all_to_all": "all_to_all",
                                        "sharded_to_unreduced": "copy"}[c.kind]]
    assert plan.num_collectives == (0 if c.local else 1)


def test_json_spelling_is_the_design_contract():
    assert MultiAllGather(((1, "y"), (0, "x"))).to_dict() == {
        "op": "all_gather", "moves": [{"dim": 0, "axis": "x"}, {"dim": 1, "axis": "y"}]}
    assert MultiAllToAll(((1, 3, ("c", "d")), (0, 2, "b"))).to_dict() == {
        "op": "all_to_all", "moves": [{"src_dim": 0, "dst_dim": 2, "axis": "b"},
                                      {"src_dim": 1, "dst_dim": 3, "axis": ["c", "d"]}]}
    assert ShardedToUnreduced(0, ["x"]).to_dict() == {"op": "sharded_to_unreduced", "dim": 0, "axis": "x"}
    # one move reads as the one-dim form
    assert collective_from_dict({"op": "all_gather", "moves": [{"dim": 1, "axis": "x"}]}) == AllGather(1, "x")
    assert collective_from_dict({"op": "dyn_slice", "moves": [{"dim": 0, "axis": ["x", "y"]}]}) == \
        DynSlice(0, ("x", "y"))


@pytest.mark.parametrize("bad, words", [
    ({"op": "all_gather", "moves": []}, "'moves' must be a list"),
    ({"op": "all_gather", "moves": "x"}, "'moves' must be a list"),
    ({"op": "all_gather", "moves": [{"dim": 0}]}, "missing field 'axis'"),
    ({"op": "all_to_all", "moves": [{"dim": 0, "axis": "x"}, {"dim": 1, "axis": "y"}]}, "'src_dim'"),
    ({"op": "all_gather", "moves": [{"dim": 0, "axis": "x"}, {"dim": 0, "axis": "y"}]}, "a dim appears in two moves"),
    ({"op": "all_gather", "moves": [{"dim": 0, "axis": "x"}, {"dim": 1, "axis": "x"}]}, "an axis appears in two moves"),
    ({"op": "all_gather", "moves": [{"dim": True, "axis": "x"}, {"dim": 1, "axis": "y"}]}, "must be an integer"),
    ({"op": "all_gather", "moves": [{"dim": 0, "axis": "x"}] * 65}, "1 to 64"),
    ({"op": "sharded_to_unreduced", "dim": 0}, "missing field 'axis'"),
])
def test_bad_json_is_a_user_error(bad, words):
    with pytest.raises(RedistributionError, match=words.replace("(", r"\(").replace(")", r"\)")):
        collective_from_dict(bad)


@pytest.mark.parametrize("make, words", [
    (lambda: MultiAllGather(((0, "x"),)), "at least two moves"),
    (lambda: MultiAllToAll(((0, 1, "x"), (1, 2, "y"))), "dim 1 both sends"),
    (lambda: MultiAllToAll(((0, 0, "x"), (1, 2, "y"))), "src_dim == dst_dim"),
    (lambda: MultiAllToAll(((0, 1, "x"), (0, 1, "y"))), "appears in two moves; write its axes as one"),
    (lambda: MultiAllToAll(((0, 1, "x"), (2, 1, "x"))), "an axis appears in two moves"),
    (lambda: MultiDynSlice(((0, "x"), (1, ("y", "x")))), "an axis appears in two moves"),
])
def test_malformed_moves_are_rejected(make, words):
    with pytest.raises(CollectiveError, match=words):
        make()


def test_type_rule_errors_name_the_move_and_the_fix():
    mesh = Mesh.parse("x=2,y=4")
    with pytest.raises(CollectiveError, match="minor-most axis of dim 1"):
        MultiAllGather(((0, "x"), (1, "y"))).apply(ArrayType.parse("[16{x}, 8]"), mesh)
    with pytest.raises(CollectiveError, match="already used"):
        MultiDynSlice(((0, "x"), (1, "y"))).apply(ArrayType.parse("[16{y}, 8]"), mesh)
    with pytest.raises(CollectiveError, match="out of range"):
        MultiAllGather(((0, "x"), (5, "y"))).apply(ArrayType.parse("[16{x}, 8{y}]"), mesh)
    with pytest.raises(CollectiveError, match="minor-most axis of dim 0"):
        ShardedToUnreduced(0, "x").apply(ArrayType.parse("[16{x,y}, 8]"), mesh)
    with pytest.raises(CollectiveError, match="do not hold"):  # shards that do not nest
        ShardedToUnreduced(0, "y").apply(ArrayType.parse("[10{x,y}, 8]"), mesh)


# -- behaviour ----------------------------------------------------------------------
def test_fused_gather_and_all_to_all_receive_no_more_than_the_chain():
    """One all-to-all over b*c receives (n-1)/n of the block; two chained ones
    (|b|-1)/|b| + (|c|-1)/|c|: 3/4 against 1 here. A gather receives the same either way."""
    mesh = Mesh.parse("a=2,b=2,c=2")
    src = ArrayType.parse("[8{a,b}, 8{c}, 4, 4]")
    fused = MultiAllToAll(((0, 2, "b"), (1, 3, "c")))
    p1 = Plan.build(mesh, src, fused.apply(src, mesh), [fused], itemsize=2)
    p2 = Plan.build(mesh, src, fused.apply(src, mesh), fused.singles(), itemsize=2)
    block_bytes = 2 * 4 * 4 * 4 * 2  # local [2, 4, 4, 4] of 2-byte elements
    assert p1.recv_bytes_max_device == 3 * block_bytes // 4
    assert p2.recv_bytes_max_device == 2 * (block_bytes // 2)
    assert (p1.num_collectives, p2.num_collectives) == (1, 2)
    g = MultiAllGather(((0, "a"), (1, "c")))
    t = ArrayType.parse("[8{a}, 8{c}, 4, 4]")
    assert Plan.build(mesh, t, g.apply(t, mesh), [g]).recv_bytes_max_device == \
        Plan.build(mesh, t, g.apply(t, mesh), g.singles()).recv_bytes_max_device


def test_sharded_to_unreduced_then_all_reduce_is_a_gather():
    """Shardy's identity all-gather(x, a) = all-reduce(sharded-to-unreduced(x, a), a),
    also uneven and on top of an existing pending sum."""
    _check([ShardedToUnreduced(0, "x"), AllReduce("x")], "[16{x}, 8]", "x=2", "[16, 8]")
    _check([ShardedToUnreduced(0, "x"), AllReduce("x")], "[50{x}, 3]", "x=8", "[50, 3]")
    _check([ShardedToUnreduced(1, ("y", "z")), AllReduce(("w", "y", "z"))],
           "[6{x}, 12{y,z}]{U:w}", "w=2,x=3,y=2,z=2", "[6{x}, 12]")


def test_sharded_to_unreduced_grows_the_block_and_moves_nothing():
    mesh = Mesh.parse("x=4")
    plan = Plan.build(mesh, "[16{x}, 8]", "[16, 8]{U:x}", [ShardedToUnreduced(0, "x")], itemsize=4)
    assert plan.recv_bytes_max_device == 0 and plan.num_collectives == 0
    assert plan.max_shard_bytes == 16 * 8 * 4 and plan.peak_live_bytes == (4 + 16) * 8 * 4
    blocks = interpret(plan.steps, plan.src, mesh, seed=None)
    assert np.array_equal(blocks[1][:4], 0 * blocks[1][:4]) and np.any(blocks[1][4:8])


def test_an_all_reduce_is_counted_in_place():
    """An all-reduce's output takes its input's buffer (XLA's buffer assignment gives it the
    operand's offset, on GPU and on libtpu after a fusion): one shard live, not two. The
    plan, the search's hot loop and the simulator's memory replay count it the same way."""
    from simulator import simulate
    from synth.planners.cost import DefaultCost
    from synth.planners.moves import Space
    from synth.planners.normal import MAX_FUSED_GROUP

    mesh = Mesh.parse("x=2,y=2")
    src, mid, dst = "[64{y}, 32]{U:x}", "[64{y}, 32]", "[64, 32]"
    shard = 32 * 32 * 4
    plan = Plan.build(mesh, src, dst, [AllReduce("x"), AllGather(0, "y")], itemsize=4)
    # the all-reduce holds one 4 KiB shard; the gather its input and 8 KiB output
    assert AllReduce("x").peak_elems(ArrayType.of(src), ArrayType.of(mid), mesh) == 32 * 32
    assert plan.peak_live_bytes == shard + 2 * shard
    only = Plan.build(mesh, src, mid, [AllReduce("x")], itemsize=4)
    assert only.peak_live_bytes == shard
    res = simulate(only.to_schedule(), "tpu-v4:2x2x1")
    assert res.peak_bytes_max_device == shard
    assert simulate(plan.to_schedule(), "tpu-v4:2x2x1").peak_bytes_max_device == plan.peak_live_bytes
    sp = Space(mesh, ArrayType.of(src), ArrayType.of(mid), 4, DefaultCost(), MAX_FUSED_GROUP)
    i = sp.intern(sp.S0)
    lives = [live for steps, j, _, _, live in sp.successors(i, True)
             if steps[-1][0] == "all_reduce" and sp.to_type(sp.states[j]) == ArrayType.of(mid)]
    assert lives == [32 * 32]
    for p in (plan, only):
        _check(list(p.steps), p.src, mesh, p.dst)


def test_a_wrong_data_rule_is_caught():
    """The interpreter fails a multi-dim data rule that swaps two blocks."""
    class Broken(MultiAllGather):
        def run(self, blocks, t_in, t_out, mesh):
            return [np.roll(b, 1, axis=1) for b in super().run(blocks, t_in, t_out, mesh)]

    with pytest.raises(InterpreterError):
        interpret([Broken(((0, "x"), (1, "y")))], ArrayType.parse("[4{x}, 4{y}]"), Mesh.parse("x=2,y=2"))


def test_fuse_builds_the_multi_forms():
    assert fuse([AllGather(1, "y"), AllGather(0, "x")]) == MultiAllGather(((0, "x"), (1, "y")))
    assert fuse([AllToAll(0, 2, "b"), AllToAll(1, 3, "c")]) == MultiAllToAll(((0, 2, "b"), (1, 3, "c")))
    assert fuse([MultiDynSlice(((0, "x"), (1, "y"))), DynSlice(2, "z")]) == \
        MultiDynSlice(((0, "x"), (1, "y"), (2, "z")))
    assert fuse([AllGather(0, "x")]) == AllGather(0, "x")
    with pytest.raises(CollectiveError, match="not all"):
        fuse([AllGather(0, "x"), DynSlice(1, "y")])


def test_sub_axes_refine_in_a_plan():
    """A multi-dim step over sub-axes plans on the refined mesh and runs exactly."""
    mesh = Mesh.parse("x=8")
    c = MultiAllGather(((0, "x:(1)2"), (1, "x:(2)4")))
    plan = Plan.build(mesh, "[64{x:(1)2}, 32{x:(2)4}]", "[64, 32]", [c], itemsize=4)
    check_blocks(np.arange(64 * 32).reshape(64, 32), interpret(plan.steps, plan.work_types[0], plan.work_mesh),
                 plan.work_types[-1], plan.work_mesh)
    assert plan.recv_bytes_max_device == 7 * 32 * 8 * 4
    a2a = MultiAllToAll(((0, 1, "x:(2)4"), (2, 3, "y")))
    _check([a2a], "[64{x:(1)2,x:(2)4}, 16, 8{y}, 12]", "x=8,y=3", "[64{x:(1)2}, 16{x:(2)4}, 8, 12{y}]")


# -- random cases: every multi move that applies, checked element by element ----------
SIZES = (1, 2, 3, 4)


@st.composite
def cases(draw):
    nax = draw(st.integers(2, 4))
    sizes = [draw(st.sampled_from(SIZES)) for _ in range(nax)]
    mesh = Mesh(tuple(zip("abcd", sizes)))
    rank = draw(st.integers(2, 4))
    axes = list(draw(st.permutations(list("abcd"[:nax]))))
    dims = [[] for _ in range(rank)]
    unreduced = []
    for a in axes:
        where = draw(st.integers(-2, rank - 1))  # -2: replicated, -1: pending
        if where == -1:
            unreduced.append(a)
        elif where >= 0:
            dims[where].append(a)
    shape = []
    for ax in dims:
        k = math.prod(mesh.shape[a] for a in ax)
        even = draw(st.booleans())
        shape.append(k * draw(st.integers(1, 3)) if even else draw(st.integers(1, 13)))
    t = ArrayType(tuple(Dim(s, tuple(ax)) for s, ax in zip(shape, dims)), tuple(unreduced))
    return mesh, t, draw(st.randoms(use_true_random=False))


def _candidates(t: ArrayType, mesh: Mesh, rnd):
    """Multi-dim steps built from ``t``'s own axes (they may still fail the type rule on
    uneven dims; those are skipped after the error is checked to be a CollectiveError)."""
    split = [i for i in range(t.rank) if t.dims[i].axes]
    free = [a for a in mesh.names if a not in t.all_axes]
    out = []
    if len(split) >= 2:
        pick = rnd.sample(split, 2)
        suf = [(i, t.dims[i].axes[-rnd.randint(1, len(t.dims[i].axes)):]) for i in pick]
        out.append(MultiAllGather(tuple(suf)))
        out.append(ShardedToUnreduced(*suf[0]))
        others = [i for i in range(t.rank) if i not in pick]
        if len(others) >= 2:
            out.append(MultiAllToAll(tuple((i, j, ax) for (i, ax), j in zip(suf, rnd.sample(others, 2)))))
        if others:  # two sources into one destination, in a random order
            j = rnd.choice(others)
            mv = [(i, j, ax) for i, ax in suf]
            rnd.shuffle(mv)
            out.append(MultiAllToAll(tuple(mv)))
    deep = [i for i in range(t.rank) if len(t.dims[i].axes) >= 2]
    if deep and t.rank >= 3:  # one source's two minor-most suffixes into two destinations
        i = rnd.choice(deep)
        ax = t.dims[i].axes
        cut = rnd.randint(1, len(ax) - 1)
        lo = rnd.randint(0, cut - 1)
        j, m = rnd.sample([d for d in range(t.rank) if d != i], 2)
        out.append(MultiAllToAll(((i, j, ax[cut:]), (i, m, ax[lo:cut]))))
    if len(free) >= 2 and t.rank >= 2:
        d = rnd.sample(range(t.rank), 2)
        out.append(MultiDynSlice(((d[0], free[0]), (d[1], free[1]))))
    return out


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_multi_steps_are_exact_and_match_their_chain(case):
    mesh, t, rnd = case
    for c in _candidates(t, mesh, rnd):
        try:
            out = c.apply(t, mesh)
        except CollectiveError:
            continue
        _check([c], t, mesh, out)
        if hasattr(c, "singles"):
            chain = c.singles()
            _check(chain, t, mesh, out)  # the chain of its moves: the same type and data
            t2 = t
            for s in chain:
                t2 = s.apply(t2, mesh)
            assert t2 == out  # the fused step types like the chain of its moves
            fused = c.recv_elems(t, out, mesh)
            seq, t2 = 0, t
            for s in chain:
                t3 = s.apply(t2, mesh)
                seq = seq + s.recv_elems(t2, t3, mesh)
                t2 = t3
            if t.is_even(mesh) and out.is_even(mesh):
                assert (fused <= seq).all()  # uneven: one op carries the padding the chain trims
        plan = Plan.build(mesh, t, out, [c], itemsize=2)
        assert Plan.from_dict(plan.to_dict()).steps == plan.steps
        assert sum(op.kind not in ("copy", "dyn_slice") for op in plan.to_schedule().ops) == \
            (0 if c.local or c.is_noop(t, mesh) else 1)


def test_fuse_runs_fuses_commuting_runs_and_keeps_the_rest():
    from synth.collectives import fuse_runs

    mesh = Mesh.parse("x=2,y=2,z=2")
    src = ArrayType.parse("[8{x}, 8{y}, 8{z}]")
    chain = [AllGather(0, "x"), AllGather(1, "y"), AllGather(2, "z")]
    fused = fuse_runs(chain, src, mesh)
    assert fused == [MultiAllGather(((0, "x"), (1, "y"), (2, "z")))]
    p0, p1 = Plan.build(mesh, src, "[8, 8, 8]", chain), Plan.build(mesh, src, "[8, 8, 8]", fused)
    assert (p1.num_collectives, p0.num_collectives) == (1, 3)
    assert p1.recv_bytes_max_device == p0.recv_bytes_max_device == 7 * 4 * 4 * 4 * 4
    _check(fused, src, mesh, "[8, 8, 8]")
    # slices of one dim merge into one move; a step of another kind ends the run
    steps = [DynSlice(0, "x"), DynSlice(0, "y"), DynSlice(1, "z"), AllGather(1, "z")]
    got = fuse_runs(steps, ArrayType.parse("[8, 8]"), mesh)
    assert got == [MultiDynSlice(((0, ("x", "y")), (1, "z"))), AllGather(1, "z")]
    # dependent all-to-alls (the second moves what the first brought) stay apart
    a2a = [AllToAll(0, 1, "x"), AllToAll(1, 2, "x")]
    assert fuse_runs(a2a, ArrayType.parse("[8{x}, 8, 8]"), mesh) == a2a


def test_fuse_runs_leaves_a_run_that_would_receive_more_padding():
    """On uneven dims one fused gather carries the padding the chain trims between its
    steps: [1{a}, 1{b}] on a=2,b=2 receives 3 elements fused against 2 in the chain."""
    from synth.collectives import fuse_runs

    mesh = Mesh.parse("a=2,b=2")
    chain = [AllGather(0, "a"), AllGather(1, "b")]
    assert fuse_runs(chain, ArrayType.parse("[1{a}, 1{b}]"), mesh) == chain


# -- an all-to-all whose moves share a dim -------------------------------------------
def test_shared_destination_is_one_exchange_at_the_receive_bound():
    """The issue's jax-21562 case: one all-to-all over (x, y) moves both axes into dim 1
    and receives 7/8 of the block (the bound); the chain of its moves receives 5/4."""
    mesh = Mesh.parse("x=4,y=2")
    src, dst = ArrayType.parse("[16{y}, 16, 16{x}]"), "[16, 16{x,y}, 16]"
    c = MultiAllToAll(((2, 1, "x"), (0, 1, "y")))
    assert c.axis == ("x", "y") and str(c) == "AllToAll(2->1:x, 0->1:y)"
    out = _check([c], src, mesh, dst)
    assert int(c.recv_elems(src, out, mesh).max()) == 448
    chain, t, seq = c.singles(), src, 0
    for s in chain:
        t2 = s.apply(t, mesh)
        seq += int(s.recv_elems(t, t2, mesh).max())
        t = t2
    assert t == out and seq == 640
    plan = Plan.build(mesh, src, dst, [c], itemsize=4)
    assert plan.num_collectives == 1 and plan.recv_bytes_max_device == 1792
    assert plan.peak_live_bytes == 2 * 2048  # input and output, no padding buffer
    assert [op.kind for op in plan.to_schedule().ops] == ["all_to_all"]
    op = plan.to_schedule().ops[0]
    assert op.recv_bytes == 1792 and all(len(g) == 8 for g in op.groups)
    back = Plan.from_dict(plan.to_dict())
    assert back.steps == plan.steps and back.types == plan.types
    assert c.to_dict() == {"op": "all_to_all", "moves": [{"src_dim": 2, "dst_dim": 1, "axis": "x"},
                                                         {"src_dim": 0, "dst_dim": 1, "axis": "y"}]}
    assert eval(repr(c), {"MultiAllToAll": MultiAllToAll}) == c
    assert fuse(chain) == c


def test_moves_sharing_a_dim_keep_their_order_and_others_sort():
    mesh = Mesh.parse("x=4,y=2")
    src = ArrayType.parse("[16{y}, 16, 16{x}]")
    a, b = MultiAllToAll(((2, 1, "x"), (0, 1, "y"))), MultiAllToAll(((0, 1, "y"), (2, 1, "x")))
    assert a != b and b.moves == ((0, 1, "y"), (2, 1, "x"))
    assert str(a.apply(src, mesh)) == "[16, 16{x,y}, 16]" and str(b.apply(src, mesh)) == "[16, 16{y,x}, 16]"
    _check([b], src, mesh, "[16, 16{y,x}, 16]")
    # moves sharing no dim sort by (src_dim, dst_dim); a shared pair stays as given
    m = MultiAllToAll(((3, 1, "c"), (4, 2, "z"), (0, 1, "b")))
    assert m.moves == ((3, 1, "c"), (0, 1, "b"), (4, 2, "z"))
    assert MultiAllToAll(((4, 2, "z"), (3, 1, "c"), (0, 1, "b"))) == m
    assert collective_from_dict(m.to_dict()) == m


def test_shared_source_splits_a_suffix_into_two_dims():
    mesh = Mesh.parse("a=2,b=3")
    c = MultiAllToAll(((0, 1, "b"), (0, 2, "a")))
    src = ArrayType.parse("[12{a,b}, 6, 4]")
    out = _check([c], src, mesh, "[12, 6{b}, 4{a}]")
    assert int(c.recv_elems(src, out, mesh).max()) == 2 * 6 * 4 * 5 // 6
    with pytest.raises(CollectiveError, match="move 1 of 2 does not apply.*minor-most axis of dim 0"):
        MultiAllToAll(((0, 2, "a"), (0, 1, "b"))).apply(src, mesh)  # 'a' is not minor-most first


def test_shared_dim_type_rule_follows_the_chain_on_uneven_dims():
    mesh = Mesh.parse("x=3,y=2")
    c = MultiAllToAll(((2, 1, "x"), (0, 1, "y")))
    _check([c], "[7{y}, 12, 5{x}]", mesh, "[7, 12{x,y}, 5]")  # 12 -> 4 -> 2: nests, padding elsewhere
    with pytest.raises(CollectiveError, match="move 2 of 2 does not apply after the moves before it.*"
                                              "local size 5 of dim 1 is not divisible by y=2"):
        c.apply(ArrayType.parse("[7{y}, 13, 5{x}]"), mesh)
