"""The machine's cost of a plan, for the ``auto`` planner.

``synth`` never imports ``models``; the planner takes a cost model object instead
(see :mod:`synth.planners`). :func:`machine_cost` builds one from a hardware profile and
a placement: each device-level op costs :func:`models.analytic.op_time_s` on the
machine's topology, so a calibrated profile or another placement changes the plan.

The bounds the search prunes with must never exceed a real plan's cost:

* ``comm_floor_s``: :func:`models.analytic.launch_floor_s` (and no more than the smallest
  ``alpha_s``): every communicating op pays at least it -- on NVIDIA profiles with NCCL
  protocols a protocol's base latency, which is below ``alpha_s``.
* ``bytes_lower_bound_s(n)``: ``floor + n / (largest incoming bandwidth of any chip)``;
  ``plan_lower_bound_s(need)``: ``floor + max_d need_d / in_bandwidth(chip of d)``. Every op
  of :func:`models.analytic.op_time_s` lasts at least as long as its slowest device takes
  to receive its bytes through all its incoming links, and what a device lacks must
  arrive over some ops. Where a profile overrides a kind's link bandwidth (a calibrated
  profile), that bound is not safe, and only the floor is used.

**Per-structure memo.** The search costs the same collective over the same device groups
many times with other byte counts (an all-to-all over one axis from every state whose
local shape differs). Where :func:`models.analytic.op_time_s` is exactly affine in the
op's bytes for a fixed structure (``kind``, ``groups``, ``pairs``), the structure is
planned once (:func:`models.collectives.plan_op`: algorithm, routes, latency) and every
other op of it costs ``latency + k * (t_ref - latency)``, ``k`` the ratio of its bytes to
the reference op's (all four byte fields in one ratio). Exactly affine means: a direct op
(all-to-all, permute) whose capacity does not depend on its size (no ``a2a_ramps`` for an
all-to-all) and that is not costed in aggregate; or a ring collective on a torus without a
bandwidth ramp (``ramp_half_bytes`` 0: the flows, the reduction arithmetic and their max
scale with the bytes). Everything else (NCCL's tuner, ramps, local ops) is costed op by op
as before. Worked example, ``random-0-007`` on ``tpu-v4:4x4x4`` at 6,000 moves: 752
distinct ops, 56 structures, so 56 routings instead of 752.
"""

from __future__ import annotations

import numpy as np

from models.analytic import op_time_s

COMM_KINDS = ("all_gather", "all_to_all", "permute", "all_reduce", "reduce_scatter")


class MachineCost:
    """Cost model of ``synth.planners.auto`` on a machine: ``op_time_s(op)`` is
    :func:`models.analytic.op_time_s` with the placement's chips."""

    needs_devices = True
    local_free = False

    def __init__(self, machine, chips=None, label: str | None = None):
        self.machine = machine
        n = machine.num_devices
        self.chips = list(chips) if chips is not None else list(range(n))
        self.name = label or f"analytic model of {machine.spec}"
        # the least fixed cost op_time_s charges a communicating op: on NVIDIA profiles with NCCL
        # protocols that is a protocol's base latency (LL 6.6 us on H100), below alpha_s (10 us)
        from models.analytic import launch_floor_s

        self._floor = min(launch_floor_s(machine), min(float(machine.alpha_s(k)) for k in COMM_KINDS))
        topo = machine.topology
        cache: dict = {}
        bw = np.empty(len(self.chips))
        for d, c in enumerate(self.chips):
            if c not in cache:
                cache[c] = topo.in_bandwidth(c)
            bw[d] = cache[c]
        self._in_bw = bw
        self._struct: dict = {}   # (kind, groups, pairs) -> (reference bytes, latency_s, time - latency)
        self._affine: dict = {}
        #: libtpu turns a reduce-scatter over a whole slice into an all-reduce and a slice
        #: (:meth:`_as_libtpu_compiles_it`); the TPU profiles are the ``tpu-*`` ones
        self._whole_slice_rs = machine.kind == "torus" and str(machine.name).startswith("tpu")
        self._bw_safe = all(machine.kind_params(k).bandwidth_Bps is None for k in COMM_KINDS) and \
            bool((bw > 0).all())

    def op_time_s(self, op) -> float:
        if op.kind == "reduce_scatter" and self._whole_slice_rs and len(op.groups) == 1 and \
                len(op.groups[0]) == self.machine.num_devices:
            return self._as_libtpu_compiles_it(op)
        if op.is_local or not self._affine_kind(op.kind):
            return float(op_time_s(op, self.machine, self.chips))
        key = (op.kind, op.groups, op.pairs)
        ref = self._struct.get(key)
        b = (op.in_bytes, op.out_bytes, op.send_bytes, op.recv_bytes)
        if ref is None:
            plan = self._plan(op) if min(b) > 0 else None
            if plan is None:
                return float(op_time_s(op, self.machine, self.chips))
            t, lat = float(plan.analytic_s()), float(plan.latency_s())
            self._struct[key] = (b, lat, t - lat)
            return t
        b0, lat, var = ref
        # one ratio for all four byte fields (else the op is not a scaled copy of the reference)
        if all(x * b0[0] == b[0] * y for x, y in zip(b, b0)) and b[0] > 0:
            return lat + (b[0] / b0[0]) * var
        return float(op_time_s(op, self.machine, self.chips))

    def _as_libtpu_compiles_it(self, op) -> float:
        """A reduce-scatter over every chip of a TPU slice, as libtpu compiles it: an all-reduce
        of the whole input, then each chip's dynamic slice (the compiled HLO of ``hsdp-grad-8``'s
        ``ReduceScatter(0, (fsdp, replica))`` on ``tpu-v4:2x2x2``: ``all-reduce``
        ``replica_groups={{0,4,1,5,2,6,3,7}}`` then a ``dynamic-slice`` fusion; the same over
        all 64 chips of ``tpu-v4:4x4x4``, while groups of 4, 8 and 16 of its chips stay one
        ``reduce-scatter``). The simulator replays that compiled program, so the search prices
        the plan it will be compared by: 3724 us + 54 us for 224 MiB on 2x2x2, not the 1865 us of
        a reduce-scatter."""
        from synth.schedule import ScheduleOp

        n = len(op.groups[0])
        moved = 2 * op.in_bytes * (n - 1) // n  # ring traffic, as synth's all-reduce lowering counts it
        ar = ScheduleOp("all_reduce", op.in_bytes, op.in_bytes, send_bytes=moved, recv_bytes=moved,
                        groups=op.groups, label=op.label)
        ds = ScheduleOp("dyn_slice", op.in_bytes, op.out_bytes, groups=tuple((d,) for d in op.groups[0]),
                        label=op.label)
        return self.op_time_s(ar) + float(op_time_s(ds, self.machine, self.chips))

    def _affine_kind(self, kind) -> bool:
        v = self._affine.get(kind)
        if v is None:
            m = self.machine
            if kind == "permute":
                v = True
            elif kind == "all_to_all":
                v = not m.a2a_ramps
            elif kind in ("all_gather", "reduce_scatter", "all_reduce"):
                v = m.kind == "torus" and m.ramp_half_bytes <= 0  # every torus algorithm is chosen by shape
            else:
                v = False
            self._affine[kind] = v
        return v

    def _plan(self, op):
        """:func:`models.collectives.plan_op` of ``op`` where :func:`op_time_s` is that plan's
        ``analytic_s()`` (not costed in aggregate, within the routing limit, with flows); else
        None (the caller costs the op itself)."""
        from models.collectives import MAX_ROUTE_LINKS, aggregated, estimated_route_links, plan_op

        m = self.machine
        if aggregated(op, m) or estimated_route_links(op, m) > MAX_ROUTE_LINKS:
            return None
        plan = plan_op(op, m, self.chips)
        return plan if plan is not None and plan.phases else None

    def comm_floor_s(self) -> float:
        return self._floor

    def bytes_lower_bound_s(self, nbytes) -> float:
        if nbytes <= 0:
            return 0.0
        if not self._bw_safe:
            return self._floor
        return self._floor + float(nbytes) / float(self._in_bw.max())

    def plan_lower_bound_s(self, need_bytes) -> float:
        need = np.asarray(need_bytes, dtype=float)
        if not len(need) or need.max() <= 0:
            return 0.0
        if not self._bw_safe:
            return self._floor
        return self._floor + float((need / self._in_bw).max())


def machine_cost(machine, mesh=None, placement=None) -> MachineCost:
    """A :class:`MachineCost` for ``machine`` (a profile or a ``NAME[:SIZE]`` spec) with
    ``placement`` (None: row-major; see :class:`models.placement.Placement`)."""
    from models.placement import Placement
    from models.profiles import load_profile

    if isinstance(machine, str):
        machine = load_profile(machine)
    place = Placement.of(placement, mesh, machine)
    label = f"analytic model of {machine.spec}" + (
        f", placement {place.text}" if place.text != "row-major" else "")
    return MachineCost(machine, place.chips, label)
