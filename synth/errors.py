"""The one exception family for user errors.

Every bad input the user can give (a mesh string, a type string, an impossible
divisibility, an unknown hardware profile, a malformed placement) raises a
subclass of :class:`RedistributionError`, which is a ``ValueError``. Messages name
the API, the offending input, the rule it broke and, where possible, the fix.
Command-line tools print the message and exit with status 2.
"""

from __future__ import annotations


class RedistributionError(ValueError):
    """A user error: bad input, with a message that says what to change."""


class MeshError(RedistributionError):
    """A malformed or invalid mesh."""


class TypeSpecError(RedistributionError):
    """A malformed or invalid distributed array type."""


class CollectiveError(RedistributionError):
    """A collective applied to a type it cannot take."""


class PlanError(RedistributionError):
    """No plan could be built (e.g. source and target disagree on the array)."""


class SchemaError(RedistributionError):
    """A file or document whose content breaks its schema (names the field and the rule)."""

    kind = "schema"


def kept_for_message(e: BaseException) -> BaseException:
    """``e`` as kept past its ``except`` block (in a list of errors, to report or re-raise
    later): without its traceback and chained errors, whose frames would hold that list, a
    reference cycle that keeps the call's frames and everything they hold alive until the
    cyclic collector runs (see ``synth.planners.gcpause``). Re-raised, it gets a new
    traceback from the ``raise``."""
    e.__context__ = e.__cause__ = None
    return e.with_traceback(None)
