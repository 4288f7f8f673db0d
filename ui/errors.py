"""User errors raised by the UI's own input parsing (same family as synth's)."""

from synth.errors import RedistributionError


class InputError(RedistributionError):
    """A scenario input the UI could not parse (shape, dtype, machine size...)."""
