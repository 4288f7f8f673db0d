"""Compatibility alias: the ``search`` planner lives in :mod:`synth.planners.search`."""

from synth.planners.search import plan_cost, plan_search  # noqa: F401
