"""Errors of the executor: all are :class:`synth.errors.RedistributionError`."""

from __future__ import annotations

from synth.errors import RedistributionError


class ExecutorError(RedistributionError):
    """A user error in the executor: bad device count, dtype, HLO text, profile."""


class HloParseError(ExecutorError):
    """HLO text the reader cannot understand (names the line and what was expected)."""
