"""Planners: ``auto`` (the default: a complete A* search over the move set below),
``normal`` (the paper's normal form), ``easy`` (gather everything, then slice) and
``search`` (the older Dijkstra), all returning :class:`synth.plan.Plan`.

Layout (imports point down this list only; none imports this package's ``__init__``):

* :mod:`~synth.planners.cost` -- cost models (:class:`DefaultCost`), the plan-level cost
  (:func:`schedule_cost`), the bound over every plan (:func:`lower_bound_s`), budgets and
  the tie tolerance;
* :mod:`~synth.planners.normal` -- ``easy`` and ``normal``;
* :mod:`~synth.planners.search` -- the older ``search`` planner;
* :mod:`~synth.planners.moves` -- integer-coded types and the move table;
* :mod:`~synth.planners.astar` -- the A* engine, budgeted in work;
* :mod:`~synth.planners.auto` -- the ``auto`` planner's phases and its claims;
* :mod:`~synth.planners.freeorder` -- ``auto`` with a free device order.

The move set of ``auto``
------------------------
``auto`` plans on the *work mesh*: the user's mesh with every axis split into its prime
factors, ascending, major first (inside any factor the types name): on ``data=4`` the
sub-axes ``data:(1)2`` and ``data:(2)2``; on ``x=12`` ``x:(1)2, x:(2)2, x:(4)3``. Axes of
size 1 are dropped (relabelling steps at either end). From a type, with its pending sums
``U``, the moves are exactly:

* ``DynSlice(i, a)``: an unused, not pending factor ``a`` becomes the minor-most of dim
  ``i``; on a whole dim also an ordered pair at once where one-at-a-time would not nest;
* ``AllGather(i, X)`` and ``AllToAll(i, j, X)``: ``X`` any ordered subset of at most 3
  of dim ``i``'s factors, or any minor-most suffix; when ``X`` is not the suffix in that
  order, a permute that makes it so comes first (one move, both costed). An all-to-all
  group that spans factors of more than one mesh axis holds at most 64 devices
  (``MAX_FUSED_GROUP``; gathers are not capped);
* ``AllGather`` over several dims: one minor-most suffix on each of two or more dims, one
  collective (at most ``MAX_MULTI_GATHERS`` = 64 combinations a type, in a fixed order);
* ``AllToAll`` carrying two suffix moves, one collective over the product group: on four
  distinct dims; two source dims into one destination dim (either order, the first more
  major there); or a suffix of dim ``i`` and then a suffix of what remains of it into two
  other dims. A dim never both sends and receives; the group cap above applies; at most
  ``MAX_MULTI_ALL_TO_ALLS`` = 64 pairs a type, in the fixed order of
  :func:`~synth.planners.moves._multi_a2a_moves`. On ``x=4,y=2``,
  ``[16{y}, 16, 16{x}] -> [16, 16{x,y}, 16]`` is one ``AllToAll(2->1:x, 0->1:y)``;
* ``AllPermute``: to *any* type with the same number of blocks per dim and the same
  pending sums; where a dim is uneven in the source or the target, also to any type of
  the same local shape with other blocks per dim (the extra blocks are empty: on
  ``x=y=z=w=2``, ``[8{y,z,w}] -> [8{x,y,z,w}]`` moves nothing);
* ``AllReduce(X)`` for any subset ``X`` of ``U``; ``ReduceScatter(j, X)`` for any
  ordered subset (all orders up to 3 axes) into any dim ``j``;
* ``Unreduce``: a replicated factor that the target leaves pending (one, or all at once);
* ``ShardedToUnreduced`` (local): a minor-most suffix of a dim leaves it and joins ``U``.

Every move obeys its collective's type rule in :mod:`synth.collectives`, uneven dims
included (divisibility of the local size, the nesting rule; re-padding buffers are in
the schedule and costed). Consecutive DynSlices are one local op.

What "optimal" means
--------------------
``optimal``: no plan built from these moves, with every type within the memory cap
(the bound ``max(src, dst)``, or the proven least largest shard where no bounded plan
exists), costs less under the stated cost model than ``search["optimum_s"]``; the plan
returned costs at most :data:`~synth.planners.cost.TIE_TOLERANCE` (1%) more, where that
buys less peak memory, fewer collectives or fewer bytes. The lower bound printed with a
plan bounds every plan, whatever its moves (:func:`lower_bound_s`). The search is
budgeted in moves examined (:data:`DEFAULT_BUDGET_MOVES`), so the answer does not depend
on the machine's load; the CPU-time cap is a safety net and the plan says when it fired.
"""

from __future__ import annotations

from synth.mesh import Mesh
from synth.plan import Plan
from synth.planners.auto import MOVE_SETS, check_move_set, plan_auto
from synth.planners.cost import (
    DEFAULT_BUDGET_MOVES,
    DEFAULT_BUDGET_S,
    TIE_TOLERANCE,
    DefaultCost,
    check_budget,
    check_budget_moves,
    lower_bound_s,
    schedule_cost,
)
from synth.planners.freeorder import plan_free_order
from synth.planners.normal import (
    MAX_FUSED_GATHER,
    MAX_FUSED_GROUP,
    _candidates,
    _merge_permutes,
    _on_work_mesh,
    _rank,
    fused_gathers,
    plan_easy,
    plan_normal,
)
from synth.planners.search import plan_search
from synth.types import ArrayType


def _plan_search(mesh, src, dst, itemsize=4):
    return plan_search(mesh, src, dst, itemsize)


def _plan_auto(mesh, src, dst, itemsize=4, *, budget_s=None, budget_moves=None, cost=None,
               move_set="full"):
    return plan_auto(mesh, src, dst, itemsize, cost=cost, budget_s=budget_s, budget_moves=budget_moves,
                     move_set=move_set)


PLANNERS = {"auto": _plan_auto, "easy": plan_easy, "normal": plan_normal, "search": _plan_search}


def synthesize(mesh, src, dst, planner: str = "auto", itemsize: int = 4, *,
               budget_s: float | None = None, budget_ms: float | None = None,
               budget_moves: int | None = None, cost=None, free_device_order: bool = False,
               move_set: str | None = None) -> Plan:
    """Synthesize a plan from ``src`` to ``dst`` on ``mesh``.

    ``mesh`` is a :class:`Mesh` or ``'x=2,y=4'``; ``src``/``dst`` are
    :class:`ArrayType` or canonical strings like ``'[1024{x}, 4096{y}]'``.
    ``planner`` is ``auto`` (default), ``normal``, ``easy`` or ``search``. For ``auto``:
    ``budget_moves`` is the work budget (moves examined, default
    :data:`DEFAULT_BUDGET_MOVES`; it decides the plan), ``budget_s`` (or ``budget_ms``) the
    CPU-time safety cap (default 10 s), ``cost`` the cost model (default
    :class:`DefaultCost`; a machine's is ``models.plan_cost.machine_cost(machine, mesh,
    placement)``), ``move_set`` its moves (``"full"``, the default, or ``"whole-axes"``:
    see :data:`synth.planners.auto.MOVE_SETS`). With ``free_device_order`` (auto only) the target may use any
    assignment of mesh positions to devices: see :func:`plan_free_order`.
    """
    from synth.errors import PlanError, RedistributionError
    from synth.limits import check_itemsize

    mesh = Mesh.of(mesh)
    src = ArrayType.of(src).check(mesh, "source type")
    dst = ArrayType.of(dst).check(mesh, "target type")
    if src.shape != dst.shape:
        raise PlanError(
            f"synthesize: source {src} and target {dst} have different global shapes "
            f"{src.shape} and {dst.shape}; a redistribution keeps the array"
        )
    if isinstance(itemsize, bool) or not isinstance(itemsize, int) or itemsize < 1:
        raise RedistributionError(f"synthesize: itemsize must be a positive integer, got {itemsize!r}")
    check_itemsize(itemsize, "synthesize: itemsize")
    try:
        fn = PLANNERS[planner]
    except (KeyError, TypeError):  # TypeError: an unhashable planner value
        raise RedistributionError(
            f"synthesize: unknown planner {planner!r}; choose one of {sorted(PLANNERS)}"
        ) from None
    if budget_ms is not None:
        if budget_s is not None:
            raise RedistributionError("synthesize: give budget_s or budget_ms, not both")
        budget_s = check_budget(budget_ms, "ms") / 1e3
    if budget_s is not None:
        budget_s = check_budget(budget_s)
    if budget_moves is not None:
        budget_moves = check_budget_moves(budget_moves)
    if move_set is not None:
        move_set = check_move_set(move_set)
    if planner != "auto" and (budget_s is not None or budget_moves is not None or cost is not None
                              or free_device_order or move_set is not None):
        raise RedistributionError(
            f"synthesize: a budget, a cost model and a free device order apply to the auto "
            f"planner only, not to {planner!r}")
    if free_device_order:
        return plan_free_order(mesh, src, dst, itemsize, cost=cost, budget_s=budget_s,
                               budget_moves=budget_moves)
    if planner == "auto":
        return fn(mesh, src, dst, itemsize, budget_s=budget_s, budget_moves=budget_moves, cost=cost,
                  move_set=move_set or "full")
    return fn(mesh, src, dst, itemsize)


__all__ = [
    "DEFAULT_BUDGET_MOVES", "DEFAULT_BUDGET_S", "MOVE_SETS", "check_move_set", "MAX_FUSED_GATHER", "MAX_FUSED_GROUP", "PLANNERS",
    "TIE_TOLERANCE", "DefaultCost", "check_budget", "check_budget_moves", "fused_gathers",
    "lower_bound_s", "plan_auto", "plan_easy", "plan_free_order", "plan_normal", "plan_search",
    "schedule_cost", "synthesize", "_candidates", "_merge_permutes", "_on_work_mesh", "_rank",
]
