"""synth: meshes, distributed array types, typed collectives, planners and schedules.

Pure Python + numpy. Imports nothing from jax, simpy, plotly or streamlit. Where
``python -m synth.compiled build`` has compiled the hot modules (Cython), their compiled
copies run while they match their sources (:mod:`synth.compiled`).
"""

from synth import compiled as _compiled

_compiled.install()  # before any other submodule is imported


from synth.collectives import (
    COLLECTIVES,
    AllGather,
    AllPermute,
    AllReduce,
    AllToAll,
    Collective,
    DynSlice,
    MultiAllGather,
    MultiAllToAll,
    MultiDynSlice,
    ReduceScatter,
    ShardedToUnreduced,
    Unreduce,
    fuse,
)
from synth.errors import (
    CollectiveError,
    MeshError,
    PlanError,
    RedistributionError,
    TypeSpecError,
)
from synth.interp import interpret, scatter
from synth.mesh import Mesh
from synth.plan import Plan, recv_lower_bound_bytes
from synth.planners import PLANNERS, plan_easy, plan_normal, synthesize
from synth.schedule import Schedule, ScheduleOp
from synth.types import ArrayType, Dim, parse_partition_spec, parse_type, refine

__all__ = [
    "COLLECTIVES", "AllGather", "AllPermute", "AllReduce", "AllToAll", "ArrayType", "Collective",
    "MultiAllGather", "MultiAllToAll", "MultiDynSlice", "ReduceScatter", "ShardedToUnreduced",
    "Unreduce", "fuse", "refine",
    "CollectiveError", "Dim", "DynSlice", "Mesh", "MeshError", "PLANNERS", "Plan", "PlanError",
    "RedistributionError", "Schedule", "ScheduleOp", "TypeSpecError", "interpret",
    "parse_partition_spec", "parse_type", "plan_easy", "plan_normal", "recv_lower_bound_bytes",
    "scatter", "synthesize",
]
