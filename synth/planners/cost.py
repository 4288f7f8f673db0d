"""Cost models, budgets and the plan-level cost the search ranks by.

A cost model gives each device-level op (:class:`synth.schedule.ScheduleOp`) a time:
``op_time_s(op)``. It also states ``comm_floor_s()`` (no communicating op costs less),
``bytes_lower_bound_s(n)`` and ``plan_lower_bound_s(need_bytes)`` (no plan in which a
device must receive that much costs less). ``models.plan_cost.machine_cost`` builds one
from a machine (its analytic model, calibration and placement); without a machine the
:class:`DefaultCost` below is used.

Budgets
-------
The search is budgeted in *work*: the number of moves it examines (each successor it
generates, permute targets included), :data:`DEFAULT_BUDGET_MOVES` by default, so the
same input gives the same plan on any machine at any load. A CPU-time cap (the planning thread's CPU seconds)
(``budget_s``) stays as a safety net only; when it fires, the plan says so (its search
status and a note), since that result depends on the machine's speed.

Ties
----
The analytic model's own error is larger than the differences it predicts between many
plans. Plans whose predicted times are within :data:`TIE_TOLERANCE` of the cheapest are
treated as equally fast and ordered as an engineer would: the least peak live memory,
then the fewest collectives, then the fewest bytes received.
"""

from __future__ import annotations

import math

import numpy as np

from synth.errors import RedistributionError
from synth.schedule import LOCAL_KINDS

#: Default work budget of one ``auto`` synthesis: moves examined (see the module doc).
DEFAULT_BUDGET_MOVES = 50_000

#: Default CPU-time safety cap of one ``auto`` synthesis, in seconds. The work budget
#: decides the plan; the cap only stops a search that would take unreasonably long on
#: a very slow or overloaded machine (and the plan then says so).
DEFAULT_BUDGET_S = 10.0

#: Relative difference of predicted times treated as a tie (the model's error is
#: larger: the calibrated profiles' held-out MAPE is 15-23%, docs/executor.md). 1% is the
#: margin the sweep reports use to call a plan a loss (speedup below 0.99): the tie pass
#: never gives up more predicted time than that for less memory or fewer collectives (at
#: 2% it chose a plan 1.3% slower than XLA's on random-0-014 and a reduce-scatter plus
#: all-gather 1.4% slower than XLA's all-reduce on megatron-tp-allreduce-8, both on tpu-v4).
TIE_TOLERANCE = 0.01


class DefaultCost:
    """The documented default when no machine is chosen: an alpha-beta model.

    A communicating op costs ``alpha_s + recv_bytes / bandwidth_Bps`` where
    ``recv_bytes`` is what the most-receiving device receives; local ops (slices,
    copies) are free. ``alpha_s = 5 us`` and ``bandwidth_Bps = 50 GB/s`` (50e9 B/s) are
    generic round figures of one accelerator link, not a machine's: pick a machine
    (``--hardware``) for real costs."""

    name = "default alpha-beta (5 us + bytes / 50 GB/s per communicating op)"
    needs_devices = False
    local_free = True

    def __init__(self, alpha_s: float = 5e-6, bandwidth_Bps: float = 50e9):
        self.alpha_s = float(alpha_s)
        self.bandwidth_Bps = float(bandwidth_Bps)

    def __repr__(self):
        return f"DefaultCost(alpha_s={self.alpha_s!r}, bandwidth_Bps={self.bandwidth_Bps!r})"

    def op_time_s(self, op) -> float:
        return self.kind_time_s(op.kind, op.recv_bytes)

    def kind_time_s(self, kind: str, recv_bytes: int) -> float:
        """An op's time from its kind and received bytes alone (all this model reads)."""
        if kind in LOCAL_KINDS:
            return 0.0
        return self.alpha_s + recv_bytes / self.bandwidth_Bps

    def comm_floor_s(self) -> float:
        """No communicating op costs less (admissible bound for the search)."""
        return self.alpha_s

    def bytes_lower_bound_s(self, nbytes) -> float:
        """No plan in which some device must receive ``nbytes`` costs less: it takes at
        least one op, and the bytes must arrive (summed over ops, each op's time is at
        least its neediest device's bytes over the bandwidth)."""
        return 0.0 if nbytes <= 0 else self.alpha_s + nbytes / self.bandwidth_Bps

    def plan_lower_bound_s(self, need_bytes) -> float:
        """:meth:`bytes_lower_bound_s` of the neediest device."""
        m = int(np.max(need_bytes)) if len(need_bytes) else 0
        return self.bytes_lower_bound_s(m)


def op_time(cost, op) -> float:
    """``cost.op_time_s(op)``, or ``inf`` where the cost model refuses the op (too large to
    cost, e.g. a flat all-to-all over thousands of torus chips): the search then skips that
    move and tries the others instead of failing as a whole."""
    try:
        return float(cost.op_time_s(op))
    except RedistributionError:
        return math.inf


def cost_name(cost) -> str:
    return getattr(cost, "name", type(cost).__name__)


def schedule_cost(plan, cost) -> tuple[float, int, int]:
    """``(time_s, bytes moved, collectives)`` of a plan under a cost model: the model's
    time of each op of ``plan.to_schedule()``, summed; the received bytes of the
    most-receiving device per step, summed; the communicating steps. Every planner's
    plan, XLA's (read from HLO) and the paper's are costed by this one function."""
    if type(cost) is DefaultCost:
        # a bytes-only model: the same sum over the same ops, without building the schedule
        t = sum(cost.kind_time_s(k, rb) for k, rb in plan.op_bytes())
    else:
        t = sum(op_time(cost, op) for op in plan.to_schedule().ops)
    return t, int(sum(plan.recv_bytes_per_step)), int(plan.num_collectives)


def _need_max_bytes(work, s, d, itemsize: int) -> int:
    """The neediest device's bytes of :func:`lower_bound_need` (``need.max()``), computed
    over the grid of the axes ``s`` and ``d`` use instead of every device: a device's need
    depends on its coordinates on those axes only, and every combination of them is some
    device's. Per dim, each side's box ``[start, stop)`` is an array over the axes of that
    dim only (what :meth:`ArrayType.regions` computes per device: block index times the
    padded local size, clipped to the dim); the products over dims broadcast to the grid.
    Example, ``x=2,y=4``, ``[64{x}, 32{y}] -> [64{y}, 32{x}]`` (4-byte items): device
    (0, 0) holds rows 0..31 x cols 0..7 and needs rows 0..15 x cols 0..15, so it lacks
    16 x 8 elements; device (0, 2) holds rows 0..31 x cols 16..23 and needs rows 32..47 x
    cols 0..15, none of which it holds: 16 x 16 elements, the max, 1024 B."""
    names = [a for a, _ in work.axes if a in set(s.used_axes) | set(d.used_axes)]
    pos = {a: k for k, a in enumerate(names)}
    shape = work.shape
    coord = {}
    for a in names:
        sh = [1] * len(names)
        sh[pos[a]] = shape[a]
        coord[a] = np.arange(shape[a], dtype=np.int64).reshape(sh)

    def box(dim):
        if not dim.axes:
            return 0, dim.size
        k, idx = 1, 0
        for a in dim.axes:
            idx = idx * shape[a] + coord[a]
            k *= shape[a]
        local = -(-dim.size // k)
        start = idx * local
        stop = np.minimum(start + local, dim.size)
        return np.minimum(start, stop), stop

    block, overlap = 1, 1
    for ds, dd in zip(s.dims, d.dims):
        s0, s1 = box(ds)
        d0, d1 = box(dd)
        block = block * np.maximum(d1 - d0, 0)
        overlap = overlap * np.maximum(np.minimum(s1, d1) - np.maximum(s0, d0), 0)
    return int(np.max(block - overlap)) * itemsize


def lower_bound_need(mesh, src, dst, itemsize: int, vector: bool = True):
    """``(need, n)``: what devices must receive from ``src`` to ``dst``, whatever the plan,
    in bytes. ``need`` is the per-device vector (each device's target block less what its
    source block holds of it) where the mesh has at most 4096 devices and no sums are
    pending, else None; ``n`` the neediest device's bytes
    (:func:`synth.plan.recv_lower_bound_bytes` when ``need`` is None). Every plan's
    received bytes, summed over its steps (each step's neediest device), are at least ``n``.
    With ``vector=False`` (a cost model that reads only ``n``, as :class:`DefaultCost`)
    ``need`` is None and ``n`` the same number, found without sums pending over the used
    axes' grid instead of every device (:func:`_need_max_bytes`), on a mesh of any size."""
    from synth.plan import recv_lower_bound_bytes
    from synth.types import refine

    base = mesh.base_mesh if mesh.base else mesh
    work, (s, d) = refine(base, [src, dst])
    if not s.unreduced and not d.unreduced and not vector:
        # the same number as below (and as recv_lower_bound_bytes without pending sums,
        # on a mesh of any size), over the used axes' grid
        return None, _need_max_bytes(work, s, d, itemsize)
    if not s.unreduced and not d.unreduced and work.size <= 4096:
        s0, s1 = s.regions(work)
        d0, d1 = d.regions(work)
        block = np.maximum(d1 - d0, 0).prod(axis=1)
        overlap = np.maximum(np.minimum(s1, d1) - np.maximum(s0, d0), 0).prod(axis=1)
        need = (block - overlap) * itemsize
        return need, int(need.max()) if len(need) else 0
    return None, int(recv_lower_bound_bytes(base, src, dst, itemsize))


def lower_bound_s(mesh, src, dst, itemsize: int, cost, need=None) -> float:
    """A lower bound on the time of *every* plan from ``src`` to ``dst`` under ``cost``,
    whatever its moves: the machine's bound for the bytes some device must receive
    (:func:`lower_bound_need`: per device, through each device's own links, where the
    mesh is small and no sums are pending). ``need``: that function's result, when the
    caller has it already."""
    vec, n = lower_bound_need(mesh, src, dst, itemsize) if need is None else need
    if vec is not None and hasattr(cost, "plan_lower_bound_s"):
        return float(cost.plan_lower_bound_s(vec))
    if hasattr(cost, "bytes_lower_bound_s"):
        return float(cost.bytes_lower_bound_s(n))
    if hasattr(cost, "plan_lower_bound_s"):
        return float(cost.plan_lower_bound_s(np.array([n])))
    return float(cost.comm_floor_s()) if n > 0 else 0.0


def _positive(value):
    if isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def check_budget(value, unit: str = "s") -> float:
    """A positive, finite number (of ``unit``), or a :class:`RedistributionError`."""
    flag = "--budget-ms" if unit == "ms" else "budget_s"
    v = _positive(value)
    if v is None:
        raise RedistributionError(
            f"auto planner: the CPU-time cap ({flag}) must be a positive number of {unit}, got "
            f"{value!r}; e.g. --budget-ms 1000")
    return v


def check_budget_moves(value) -> int:
    """A positive whole number of moves, or a :class:`RedistributionError`."""
    v = _positive(value)
    if v is None or v != int(v) or v > 1e12:
        raise RedistributionError(
            f"auto planner: the work budget (--budget-moves / budget_moves) must be a positive "
            f"whole number of moves (at most 1e12), got {value!r}; e.g. --budget-moves "
            f"{DEFAULT_BUDGET_MOVES}")
    return int(v)
