"""User errors raised by models/ and simulator/ (all subclass RedistributionError)."""

from __future__ import annotations

from synth.errors import RedistributionError


class ProfileError(RedistributionError):
    """An unknown, malformed or wrongly sized hardware profile."""

    kind = "profile"  # the ``kind`` of a CLI's --json error object (synth.cliutil)


class PlacementError(RedistributionError):
    """A placement string or mapping that does not fit the mesh and the machine."""

    kind = "placement"


class SimulationError(RedistributionError):
    """A schedule the simulator cannot replay on the given machine."""
