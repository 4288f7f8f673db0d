"""Pending sums, uneven dims and sub-axes, mixed with the old forms, for every planner
(hypothesis, >= 500 random cases per run).

For each case and planner: the plan ends at the target type; the reference executor
runs it from random integer partial blocks (whose group sums are the true array) with
garbage in the padding, and checks every device's block after every step; the plan
receives at least the receive bound; it round-trips through JSON; its schedule carries
one op per collective. Under the paper's precondition (dims divisible by the mesh)
the normal plan keeps the memory bound on pending-sum cases, and reducing early never
receives more than the easy plan's all-reduce first.
"""

import math

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from synth import ArrayType, Dim, Mesh, Plan, interpret, synthesize
from synth.interp import check_blocks
from synth.types import refine_type

NAMES = ("a", "b", "c", "d")
SIZES = (1, 2, 3, 4, 6, 8)
PLANNERS = ("easy", "normal", "search", "auto")


@st.composite
def meshes(draw, max_devices=32):
    n = draw(st.integers(1, 4))
    sizes = []
    for _ in range(n):
        room = max_devices // math.prod(sizes) if sizes else max_devices
        sizes.append(draw(st.sampled_from([s for s in SIZES if s <= room])))
    return Mesh(tuple(zip(NAMES, sizes)))


def _atoms(draw, mesh, split):
    """The axis names one type uses: each axis whole, or (for ``split``) as its factors."""
    out = []
    for name, n in mesh.axes:
        if name in split and draw(st.booleans()):
            f = split[name]
            out += [(f"{name}:(1){f}", f), (f"{name}:({f}){n // f}", n // f)]
        else:
            out.append((name, n))
    return out


def _place(draw, atoms, rank, pending):
    """Each name goes to a dim, to nothing, or (with ``pending``) to the unreduced set."""
    dims, unreduced = [[] for _ in range(rank)], []
    lo = -2 if pending else -1
    for name, _ in draw(st.permutations(atoms)):
        k = draw(st.integers(lo, rank - 1))
        if k == -2:
            unreduced.append(name)
        elif k >= 0:
            dims[k].append(name)
    return dims, unreduced


@st.composite
def cases(draw, precondition=False):
    mesh = draw(meshes(max_devices=16 if precondition else 32))
    composite = {n: s for n, s in mesh.axes if s in (4, 6, 8)}
    split = {}
    if composite and draw(st.booleans()):
        name = draw(st.sampled_from(sorted(composite)))
        n = composite[name]
        split[name] = draw(st.sampled_from([f for f in range(2, n) if n % f == 0]))
    rank = draw(st.integers(1, 2 if precondition else 3))
    pending = draw(st.booleans())
    sd, su = _place(draw, _atoms(draw, mesh, split), rank, pending)
    dd, du = _place(draw, _atoms(draw, mesh, split), rank, pending)
    sizes = {name: s for name, s in _atoms_all(mesh, split)}
    shape = []
    for a, b in zip(sd, dd):
        need = math.lcm(math.prod(sizes[x] for x in a), math.prod(sizes[x] for x in b))
        if precondition:
            shape.append(mesh.size * draw(st.sampled_from((1, 2))))
        elif draw(st.integers(0, 2)) == 0:  # uneven
            shape.append(draw(st.integers(1, 2 * need + 3)))
        else:
            shape.append(need * draw(st.sampled_from((1, 2))))
    assume(math.prod(shape) <= 1 << 13)
    src = ArrayType(tuple(Dim(s, tuple(a)) for s, a in zip(shape, sd)), tuple(su))
    dst = ArrayType(tuple(Dim(s, tuple(a)) for s, a in zip(shape, dd)), tuple(du))
    return mesh, src, dst


def _atoms_all(mesh, split):
    out = []
    for name, n in mesh.axes:
        out.append((name, n))
        if name in split:
            f = split[name]
            out += [(f"{name}:(1){f}", f), (f"{name}:({f}){n // f}", n // f)]
    return out


def check_exact(plan: Plan, dst: ArrayType, seed: int):
    wm, wt = plan.work_mesh, plan.work_types
    assert wt[-1] == refine_type(dst, wm)
    assert plan.dst == dst.canonical(plan.mesh) and (not plan.steps or plan.types[-1] == plan.dst)
    x = np.random.default_rng(seed).integers(-99, 99, size=plan.src.shape)
    blocks = interpret(plan.steps, wt[0], wm, x, seed=seed)  # checks after every step
    check_blocks(x, blocks, wt[-1], wm, "final")
    assert plan.recv_bytes_max_device >= plan.recv_lower_bound_bytes
    assert Plan.from_dict(plan.to_dict()) == plan
    sched = plan.to_schedule()
    assert sum(1 for op in sched.ops if not op.is_local) == plan.num_collectives


def plans_for(mesh, src, dst):
    out = {}
    for p in PLANNERS:
        # a work budget, not wall time: the same case gives the same plan at any load
        kw = {"budget_moves": 2000} if p == "auto" else {}
        out[p] = synthesize(mesh, src, dst, planner=p, **kw)
    return out


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])
@given(cases(), st.integers(0, 2**16))
def test_every_planner_is_exact_on_the_new_types(case, seed):
    mesh, src, dst = case
    src, dst = src.check(mesh), dst.check(mesh)
    assume(src.shape == dst.shape)
    plans = plans_for(mesh, src, dst)
    for plan in plans.values():
        check_exact(plan, dst, seed)
    assert plans["normal"].max_shard_bytes <= plans["easy"].max_shard_bytes


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])
@given(cases(precondition=True))
def test_pending_sums_keep_the_memory_bound_under_the_precondition(case):
    mesh, src, dst = case
    src, dst = src.check(mesh), dst.check(mesh)
    normal = synthesize(mesh, src, dst, planner="normal")
    easy = synthesize(mesh, src, dst, planner="easy")
    check_exact(normal, dst, 0)
    assert not normal.notes, normal.notes
    assert normal.bound_holds, [str(s) for s in normal.steps]
    assert normal.recv_bytes_max_device <= easy.recv_bytes_max_device
