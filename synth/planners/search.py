"""The ``search`` planner: cheapest plan under a memory budget (Dijkstra over types).

Where ``normal`` fixes the order (slices, then all-to-alls/permutes, then gathers),
``search`` explores every typed collective from every type and keeps the cheapest
sequence whose every shard stays within ``memory_budget_bytes`` (default: the paper's
bound ``max(src shard, dst shard)``). It may slice late or gather early when that is
cheaper and still within budget.

Cost of a step is ``alpha_s + recv_bytes / bandwidth_bytes_per_s`` (an alpha-beta
model with generic defaults; pass a profile's numbers to cost for a machine). An
AllPermute may go to the target, or reorder one dim so a chosen axis becomes
minor-most (a permute reaches any type of the same local shape; these are the ones
that unlock an all-to-all, a gather or the target).

The search is bounded: the ``normal`` plan's cost is an upper bound from the start,
and after ``max_states`` expansions the best plan found so far (or ``normal``) is
returned. Every returned plan is re-checked by :meth:`Plan.build`.
"""

from __future__ import annotations

import heapq
import itertools

from synth.collectives import AllGather, AllPermute, AllToAll, DynSlice
from synth.errors import CollectiveError
from synth.mesh import Mesh
from synth.plan import Plan
from synth.types import ArrayType, Dim

DEFAULT_ALPHA_S = 5e-6
DEFAULT_BANDWIDTH_BYTES_PER_S = 5e10


def plan_cost(plan: Plan, alpha_s: float = DEFAULT_ALPHA_S,
              bandwidth_bytes_per_s: float = DEFAULT_BANDWIDTH_BYTES_PER_S) -> float:
    """The search's alpha-beta cost of a plan: per communicating step, ``alpha_s`` plus
    the step's largest per-device received bytes over ``bandwidth_bytes_per_s``."""
    return sum(
        alpha_s + r / bandwidth_bytes_per_s
        for c, r, noop in zip(plan.steps, plan.recv_bytes_per_step, plan.noop_steps)
        if c.kind != "dyn_slice" and not noop
    )


def plan_search(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4, *,
                memory_budget_bytes: int | None = None, alpha_s: float = DEFAULT_ALPHA_S,
                bandwidth_bytes_per_s: float = DEFAULT_BANDWIDTH_BYTES_PER_S,
                max_states: int = 20000) -> Plan:
    """Pending sums are reduced as the normal planner does (its candidate reductions,
    see :mod:`synth.planners`), and the rest is searched; the cheapest candidate within
    the budget wins. Sub-axes are searched on the refined mesh. Uneven dims are not
    searched: the normal plan is returned, with a note."""
    from synth.planners.normal import _candidates, _on_work_mesh, _rank, plan_normal

    wm, ws, wd = _on_work_mesh(mesh, src, dst)
    kw = dict(memory_budget_bytes=memory_budget_bytes, alpha_s=alpha_s,
              bandwidth_bytes_per_s=bandwidth_bytes_per_s, max_states=max_states)
    if not (ws.is_even(wm) and wd.is_even(wm)):
        p = plan_normal(mesh, src, dst, itemsize)
        return Plan(p.mesh, p.src, p.dst, p.steps, p.types, itemsize, "search", p.notes + (
            "search covers even dims only; an uneven dim got the normal planner's plan",))
    if not (ws.unreduced or wd.unreduced or wm.base):
        return _plan_search_core(mesh, src, dst, itemsize, **kw)
    budget = memory_budget_bytes
    if budget is None:
        budget = max(ws.shard_elems(wm), wd.shard_elems(wm)) * itemsize
    best = None

    def core(m, a, b):
        return list(_plan_search_core(m, a, b, itemsize, **kw).steps)

    for steps in _candidates(wm, ws, wd, core):
        p = Plan.build(wm, src, dst, steps, itemsize, "search")
        key = (p.max_shard_bytes > budget, plan_cost(p, alpha_s, bandwidth_bytes_per_s), _rank(p))
        if best is None or key < best[0]:
            best = (key, p)
    if best is None:
        p = plan_normal(mesh, src, dst, itemsize)
        return Plan(p.mesh, p.src, p.dst, p.steps, p.types, itemsize, "search", p.notes)
    return best[1]


def _plan_search_core(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int = 4, *,
                      memory_budget_bytes: int | None = None, alpha_s: float = DEFAULT_ALPHA_S,
                      bandwidth_bytes_per_s: float = DEFAULT_BANDWIDTH_BYTES_PER_S,
                      max_states: int = 20000) -> Plan:
    """The search between two types with the same pending sums (on a refined mesh)."""
    from synth.planners.normal import MAX_FUSED_GROUP, _normal_steps, splits_of

    msize = mesh.shape
    shape = src.shape
    total = src.num_elems()
    budget = memory_budget_bytes
    if budget is None:
        budget = max(src.shard_elems(mesh), dst.shard_elems(mesh)) * itemsize
    S0 = tuple(d.axes for d in src.dims)
    T = tuple(d.axes for d in dst.dims)

    def splits(S):
        return splits_of(S, msize)

    def shard_bytes(S, splits=splits):  # bound, not closed over: synth.planners.gcpause
        p = 1
        for v in splits(S):
            p *= v
        return total // p * itemsize

    def valid(S, splits=splits):  # bound, not closed over: synth.planners.gcpause
        return all(sz % p == 0 for sz, p in zip(shape, splits(S)))

    def cost_of(recv_b):
        return alpha_s + recv_b / bandwidth_bytes_per_s

    def strip(S):
        return tuple(tuple(a for a in axes if msize[a] > 1) for axes in S)

    def to_type(S):
        return ArrayType(tuple(Dim(sz, axes) for sz, axes in zip(shape, S)), src.unreduced)

    def moves(S, splits=splits, shard_bytes=shard_bytes, cost_of=cost_of, strip=strip):  # bound (gcpause)
        used = {a for axes in S for a in axes} | set(src.unreduced)
        sb = shard_bytes(S)
        rank = len(S)
        for i, axes in enumerate(S):
            for a in mesh.names:
                if a not in used:
                    new = S[:i] + (axes + (a,),) + S[i + 1:]
                    yield ("dyn_slice", i, a), new, 0.0
            n = 1
            for k in range(1, len(axes) + 1):
                # A minor-most suffix of dim i: gathered, or moved to another dim.
                n *= msize[axes[-k]]
                if k > 1 and n > MAX_FUSED_GROUP:
                    break
                suffix = axes[-k:]
                new = S[:i] + (axes[:-k],) + S[i + 1:]
                yield ("all_gather", i, suffix), new, cost_of((n - 1) * sb) if n > 1 else 0.0
                for j in range(rank):
                    if j != i:
                        new2 = list(new)
                        new2[j] = S[j] + suffix
                        dc = cost_of(sb * (n - 1) // n) if n > 1 else 0.0
                        yield ("all_to_all", i, j, suffix), tuple(new2), dc
            # Permutes that lift an axis of dim i to minor-most (free for a size-1 axis).
            for k in range(len(axes) - 1):
                lifted = axes[:k] + axes[k + 1:] + (axes[k],)
                new = S[:i] + (lifted,) + S[i + 1:]
                yield ("all_permute",), new, cost_of(sb) if msize[axes[k]] > 1 else 0.0
        if S != T and splits(S) == splits(T):
            same = strip(S) == strip(T)
            yield ("all_permute",), T, 0.0 if same else cost_of(sb)

    # Upper bound from the normal form.
    try:
        best_plan = Plan.build(mesh, src, dst, _normal_steps(mesh, src, dst), itemsize, "normal")
    except CollectiveError as e:
        from synth.planners.normal import _easy_steps

        best_plan = Plan.build(mesh, src, dst, _easy_steps(mesh, src, dst), itemsize, "normal", (
            f"normal form not applicable ({e}); fell back to the easy plan",))
    best_cost = float("inf")
    if best_plan.max_shard_bytes <= budget:
        best_cost = plan_cost(best_plan, alpha_s, bandwidth_bytes_per_s)
    counter = itertools.count()
    heap = [(0.0, next(counter), S0, ())]
    done = {}
    expanded = 0
    found = None
    while heap:
        c, _, S, path = heapq.heappop(heap)
        if c >= best_cost:
            break
        if S == T:
            found = path
            best_cost = c
            break
        if done.get(S, float("inf")) <= c:
            continue
        done[S] = c
        expanded += 1
        if expanded > max_states:
            break
        for mv, S2, dc in moves(S):
            if not valid(S2) or shard_bytes(S2) > budget:
                continue
            c2 = c + dc
            if c2 >= best_cost or done.get(S2, float("inf")) <= c2:
                continue
            heapq.heappush(heap, (c2, next(counter), S2, path + ((mv, S2),)))
    if found is None:
        notes = best_plan.notes
        if best_plan.max_shard_bytes > budget:
            notes += (
                f"no plan within the memory budget of {budget} bytes per device was found "
                f"(searched {expanded} types); returned the normal plan, whose largest shard "
                f"is {best_plan.max_shard_bytes} bytes",
            )
        return Plan(best_plan.mesh, best_plan.src, best_plan.dst, best_plan.steps, best_plan.types,
                    itemsize, "search", notes)
    steps = []
    for mv, S2 in found:
        if mv[0] == "dyn_slice":
            steps.append(DynSlice(mv[1], mv[2]))
        elif mv[0] == "all_gather":
            steps.append(AllGather(mv[1], mv[2]))
        elif mv[0] == "all_to_all":
            steps.append(AllToAll(mv[1], mv[2], mv[3]))
        else:
            steps.append(AllPermute(to_type(S2)))
    return Plan.build(mesh, src, dst, steps, itemsize, "search")
