"""Compatibility alias: the ``auto`` planner lives in :mod:`synth.planners` (this module
only re-exports names older callers import; it imports nothing else)."""

from synth.planners.auto import plan_auto  # noqa: F401
from synth.planners.cost import (  # noqa: F401
    DEFAULT_BUDGET_MOVES,
    DEFAULT_BUDGET_S,
    DefaultCost,
    check_budget,
    check_budget_moves,
    schedule_cost,
)
from synth.planners.freeorder import plan_free_order  # noqa: F401
