"""``auto`` with a free device order: the target may use any assignment of mesh
positions to devices (see :func:`plan_free_order`)."""

from __future__ import annotations

import math
import time

import numpy as np

from synth.errors import RedistributionError
from synth.mesh import Mesh
from synth.plan import Plan
from synth.planners.auto import plan_auto
from synth.planners.cost import DefaultCost
from synth.planners.moves import Space
from synth.types import ArrayType


def _need_bytes(mesh, src, dst, itemsize):
    """Bytes each device lacks of its target block (an admissible bound: what it lacks must
    arrive). A target with pending axes the source lacks can be reached locally in part
    (a device may keep its data as its partial), so the bound is 0 there."""
    import numpy as np

    if set(getattr(dst, "unreduced", ())) - set(getattr(src, "unreduced", ())):
        return np.zeros(mesh.size, dtype=np.int64)
    s0, s1 = src.regions(mesh)
    d0, d1 = dst.regions(mesh)
    import numpy as np

    overlap = np.clip(np.minimum(s1, d1) - np.maximum(s0, d0), 0, None).prod(axis=1)
    return (dst.shard_elems(mesh) - overlap) * itemsize



def _unsupported(mesh: Mesh, src: ArrayType, dst: ArrayType) -> str | None:
    """Why the search cannot take these types (None when it can)."""
    for what, t in (("source", src), ("target", dst)):
        for d in t.dims:
            for a in d.axes:
                if a not in mesh.shape:
                    return f"the {what} type {t} uses the sub-axis {a}"
            if d.size % math.prod(mesh.shape[a] for a in d.axes):
                return f"the {what} type {t} has an uneven dim ({d})"
    return None



# -- free device order ----------------------------------------------------------------------
#: Largest mesh for ``free_device_order`` (its assignment problem is n x n).
FREE_ORDER_MAX_DEVICES = 4096


def plan_free_order(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4, *, cost=None,
                    budget_s: float | None = None, budget_moves: int | None = None,
                    max_candidates: int = 6) -> Plan:
    """``auto`` when the target may use any assignment of mesh positions to devices (for
    example loading a checkpoint onto a fresh job).

    Any type ``T*`` with the target's local shape holds the same blocks as the target,
    on other devices; after a plan to ``T*``, relabelling the devices gives the target.
    The candidates: the assignment of positions to devices that keeps the most source
    data in place, found with ``scipy.optimize.linear_sum_assignment`` on the
    ``n x n`` overlap of source and target blocks (COSTA's idea), when a type realises it;
    and the types of the target's local shape that leave the neediest device the least to
    receive (the target itself always among them). ``auto`` plans to each with the
    same budgets (work and CPU-time cap, each per candidate); the least largest shard,
    then the least cost wins.

    The plan ends at ``T*`` (``plan.dst``); ``plan.search["relabel"]`` holds the requested
    target and ``device_of_position``: mesh position ``p`` of the requested target is
    device ``device_of_position[p]``, which holds exactly that block after the plan."""
    cost = cost if cost is not None else DefaultCost()
    why = _unsupported(mesh, src, dst)
    if not why and (src.unreduced or dst.unreduced):
        why = "pending sums"
    if not why and any(a not in mesh.shape for t in (src, dst) for d in t.dims for a in d.axes):
        why = "sub-axes"
    if why:
        raise RedistributionError(f"free device order: {why}, which it does not handle yet; "
                                  "drop --free-device-order")
    n = mesh.size
    if n > FREE_ORDER_MAX_DEVICES:
        raise RedistributionError(
            f"free device order: mesh {mesh} has {n} devices; the assignment covers at most "
            f"{FREE_ORDER_MAX_DEVICES} (drop --free-device-order)")
    t0 = time.perf_counter()
    sr = Space(mesh, src, dst, itemsize, cost, 1 << 30)
    T = sr.T[0]
    members = [M for M in sr.class_members(sr.info(T)[0], ()) if all(
        n % k == 0 for n, k in zip(sr.shape, sr.info(M)[0]))]
    to_type = lambda M: sr.to_type((M, ()))  # noqa: E731
    dst_blocks = dst.block_indices(mesh)
    cands = []
    # COSTA: the relabelling that keeps the most data, if a type realises it
    sigma = _lsa_relabel(mesh, src, dst)
    if sigma is not None:
        want = np.empty_like(dst_blocks)
        want[sigma] = dst_blocks
        for M in members[:512]:
            if np.array_equal(to_type(M).block_indices(mesh), want):
                cands.append(M)
                break
    need = sorted(members, key=lambda M: (int(_need_bytes(mesh, src, to_type(M), itemsize).max()),
                                           M != T))
    for M in [T] + need:
        if M not in cands:
            cands.append(M)
        if len(cands) >= max_candidates:
            break
    best = None
    all_optimal, tried = True, 0
    for M in cands:
        target = to_type(M) if M != T else dst
        p = plan_auto(mesh, src, target, itemsize, cost=cost, budget_s=budget_s,
                      budget_moves=budget_moves)
        key = (p.max_shard_bytes, p.search["time_s"], p.search["bytes_moved"], p.search["collectives"])
        all_optimal = all_optimal and bool(p.search.get("optimal"))
        tried += 1
        if best is None or key < best[0]:
            best = (key, p)
    plan = best[1]
    reached = plan.dst.block_indices(mesh)
    order = _match_blocks(reached, dst_blocks)
    search = dict(plan.search)
    search["relabel"] = {
        "requested_dst": str(dst), "reached_dst": str(plan.dst),
        "device_of_position": [int(d) for d in order],
        "candidates": len(cands), "identity": bool((order == np.arange(n)).all()),
    }
    search["elapsed_s"] = float(time.perf_counter() - t0)
    # optimal over every relabelling only if every type of the target's local shape was
    # searched to the end
    proven = all_optimal and tried == len(set(cands)) and set(members) <= set(cands)
    search["optimal"] = bool(proven)
    if not proven:
        search["status"] = (f"best of {tried} relabelled target(s) (of {len(members)} with the "
                            "target's local shape)")
        search["lower_bound_s"] = None
        search["gap_s"] = None
    notes = tuple(plan.notes)
    if plan.dst != dst:
        notes += (f"free device order: the plan ends at {plan.dst}; mesh position p of the "
                  f"requested target {dst} is device device_of_position[p]",)
    return Plan(plan.mesh, plan.src, plan.dst, plan.steps, plan.types, itemsize, "auto", notes,
                search=search)


def _lsa_relabel(mesh: Mesh, src: ArrayType, dst: ArrayType):
    """``sigma[p]``: the device for mesh position ``p`` of ``dst`` that maximises the source
    data kept in place (``linear_sum_assignment`` on the overlap matrix)."""
    from scipy.optimize import linear_sum_assignment

    s0, s1 = src.regions(mesh)
    d0, d1 = dst.regions(mesh)
    # overlap[p, d]: elements of position p's target block that device d holds already
    lo = np.maximum(d0[:, None, :], s0[None, :, :])
    hi = np.minimum(d1[:, None, :], s1[None, :, :])
    overlap = np.clip(hi - lo, 0, None).prod(axis=2)
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    sigma = np.empty(mesh.size, dtype=np.int64)
    sigma[rows] = cols
    return sigma


def _match_blocks(reached, wanted):
    """``order[p]``: a distinct device whose block under the reached type is position p's
    target block (devices that already hold theirs keep their own position)."""
    n = len(wanted)
    holders: dict = {}
    for d in range(n):
        holders.setdefault(tuple(reached[d]), []).append(d)
    order = np.full(n, -1, dtype=np.int64)
    for p in range(n):  # keep devices in place first
        if tuple(reached[p]) == tuple(wanted[p]):
            order[p] = p
            holders[tuple(wanted[p])].remove(p)
    for p in range(n):
        if order[p] < 0:
            order[p] = holders[tuple(wanted[p])].pop()
    return order
