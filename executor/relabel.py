"""Run a plan whose target may use any assignment of mesh positions to devices, and
check the relabelled result exactly.

``synth.synthesize(..., free_device_order=True)`` returns a plan that ends at a type
``T*`` with the target's local shape, and ``plan.search["relabel"]``: the requested
target and ``device_of_position`` (mesh position ``p`` of the requested target is device
``device_of_position[p]``). :func:`run_relabelled` runs the plan as a jitted
``shard_map`` (as :func:`executor.run.run_plan` does), checks the output against ``T*``
bit for bit, and then checks, again bit for bit, that device
``device_of_position[p]`` holds position ``p``'s block of the requested target.

A request it cannot honour (a plan without a relabelling, a permutation that is not one,
padded or pending-sum types, devices this process cannot read) raises
:class:`executor.errors.ExecutorError`: never a result that was not checked.
"""

from __future__ import annotations

import numpy as np

from executor.errors import ExecutorError
from synth.types import ArrayType


def relabelling(plan) -> tuple[ArrayType, list[int]]:
    """``(requested target, device_of_position)`` of ``plan``, validated."""
    r = (plan.search or {}).get("relabel") if getattr(plan, "search", None) else None
    if not r:
        raise ExecutorError(
            "relabelled run: the plan carries no device relabelling; synthesize it with "
            "free_device_order=True (--free-device-order)")
    requested = ArrayType.parse(r["requested_dst"]).check(plan.mesh, "requested target")
    order = [int(d) for d in r["device_of_position"]]
    n = plan.mesh.size
    if sorted(order) != list(range(n)):
        raise ExecutorError(
            f"relabelled run: device_of_position is not a permutation of the {n} devices of "
            f"mesh {plan.mesh}")
    for what, t in (("requested target", requested), ("plan's target", plan.dst)):
        if t.unreduced or not t.is_even(plan.mesh):
            raise ExecutorError(
                f"relabelled run: the {what} {t} has padded or pending-sum shards; relabelled "
                "results are checked for even, reduced types only (drop the relabelling)")
    if requested.shape != plan.dst.shape or \
            requested.local_shape(plan.mesh) != plan.dst.local_shape(plan.mesh):
        raise ExecutorError(
            f"relabelled run: the plan ends at {plan.dst}, whose shards are not those of the "
            f"requested target {requested}")
    return requested, order


def run_relabelled(plan, x: np.ndarray | None = None, *, dtype: str | None = None, devices=None,
                   seed: int = 0) -> dict:
    """Run ``plan`` and check both its own target and the relabelled requested target
    exactly. Returns ``{"correct": True, "positions_checked": n, "moved_positions": k}``;
    raises :class:`executor.run.OutputMismatch` on any wrong element."""
    from executor.run import (
        OutputMismatch,
        _bits,
        check_output,
        plan_program,
    )

    requested, order = relabelling(plan)
    mesh = plan.work_mesh
    if mesh.size != plan.mesh.size or plan.work_types[-1] != plan.dst:
        raise ExecutorError("relabelled run: plans over sub-axes are not supported with a relabelling")
    pp = plan_program(plan, x, dtype, seed, devices, "relabelled run")
    x, jmesh = pp.x, pp.jmesh
    out = pp.fn(pp.xs)
    out.block_until_ready()
    err = check_output(out, x, pp.dst_w, mesh, jmesh)
    if err:
        raise OutputMismatch(f"relabelled run: the plan's own target {plan.dst}: {err}")
    pos = {d.id: i for i, d in enumerate(jmesh.devices.flat)}
    held = {pos[sh.device.id]: np.asarray(sh.data) for sh in out.addressable_shards if sh.device.id in pos}
    missing = [d for d in order if d not in held]
    if missing:
        raise ExecutorError(
            f"relabelled run: devices {missing[:8]} are not addressable from this process; the "
            "relabelled result is checked in single-process runs only")
    starts, stops = requested.regions(plan.mesh)
    for p, d in enumerate(order):
        want = x[tuple(slice(int(a), int(b)) for a, b in zip(starts[p], stops[p]))]
        got = held[d]
        if got.shape != want.shape or not np.array_equal(_bits(got), _bits(want)):
            raise OutputMismatch(
                f"relabelled run: device {d} (mesh position {p} of {requested}) does not hold "
                "exactly that block")
    return {"correct": True, "positions_checked": len(order),
            "moved_positions": int(sum(p != d for p, d in enumerate(order)))}
