"""models: hardware profiles, topology graphs, placements and analytic costs.

Imports synth (never jax/simpy/plotly). networkx and yaml are imported where used.
"""

from models.errors import PlacementError, ProfileError, SimulationError
from models.placement import Placement
from models.profiles import (
    HardwareProfile,
    KindParams,
    Machine,
    available_profiles,
    load_profile,
)

__all__ = [
    "HardwareProfile", "KindParams", "Machine", "Placement", "PlacementError", "ProfileError",
    "SimulationError", "available_profiles", "load_profile",
]
