"""The JAX lowering of each typed collective: one table keyed by the synth ``kind``.

Each entry lowers one step two ways from the same facts:

* ``emit(block, step)``   -- the traced ``jax.lax`` call inside ``jax.shard_map``;
* ``source(step)``        -- the same call as readable Python source (for codegen).

A ``Step`` carries the collective, the type before and after, and the mesh.
``LOWERINGS`` must have an entry for every kind in :data:`synth.COLLECTIVES`
(a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.collectives import Collective
from synth.mesh import Mesh
from synth.plan import Plan
from synth.types import ArrayType


@dataclass(frozen=True)
class Step:
    index: int
    op: Collective
    t_in: ArrayType
    t_out: ArrayType
    mesh: Mesh

    @property
    def comment(self) -> str:
        return (f"step {self.index + 1}: {self.op if self.op.kind != 'all_permute' else 'AllPermute'}"
                f"  {self.t_in} -> {self.t_out}  local {self.t_in.local_shape(self.mesh)} -> "
                f"{self.t_out.local_shape(self.mesh)}")


def plan_steps(plan: Plan) -> list[Step]:
    return [Step(i, c, a, b, plan.mesh)
            for i, (c, a, b) in enumerate(zip(plan.steps, plan.all_types[:-1], plan.all_types[1:]))]


# -- permutes: rounds of partial permutations ----------------------------------------
def permute_rounds(sources: np.ndarray) -> list[list[tuple[int, int]]]:
    """Split "device d receives from sources[d]" into rounds that ``lax.ppermute`` takes.

    A ppermute needs each device to send at most once and receive at most once per
    call. Devices that keep their own block take part in no round. A holder that must
    feed several devices sends once per round; most plans need a single round."""
    pending = [(int(s), d) for d, s in enumerate(sources) if int(s) != d]
    rounds = []
    while pending:
        used, this, rest = set(), [], []
        for s, d in pending:
            (rest if s in used else this).append((s, d))
            if s not in used:
                used.add(s)
        rounds.append(this)
        pending = rest
    return rounds


def complete_round(pairs, num_devices: int):
    """``pairs`` plus ``(d, d)`` for every device that neither sends nor receives, when
    that makes a full permutation (then no device needs to keep its old block by hand);
    otherwise ``None``."""
    senders = {s for s, _ in pairs}
    receivers = {d for _, d in pairs}
    idle = [d for d in range(num_devices) if d not in receivers]
    if any(d in senders for d in idle):
        return None
    return sorted(list(pairs) + [(d, d) for d in idle], key=lambda p: p[1])


def _linear_index(mesh: Mesh):
    """Row-major device index inside shard_map, from ``lax.axis_index`` per axis."""
    from jax import lax

    idx = 0
    for name, size in zip(mesh.names, mesh.sizes):
        idx = idx * size + lax.axis_index(name)
    return idx


# -- the four kinds ---------------------------------------------------------------
class _DynSlice:
    kind = "dyn_slice"

    @staticmethod
    def emit(block, step: Step):
        from jax import lax

        c = step.op
        piece = block.shape[c.dim] // step.mesh.axis_size(c.axis)
        return lax.dynamic_slice_in_dim(block, lax.axis_index(c.axis) * piece, piece, axis=c.dim)

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        piece = step.t_out.local_shape(step.mesh)[c.dim]
        return [f"block = lax.dynamic_slice_in_dim(block, lax.axis_index({c.axis!r}) * {piece}, "
                f"{piece}, axis={c.dim})"]


class _AllGather:
    kind = "all_gather"

    @staticmethod
    def emit(block, step: Step):
        from jax import lax

        return lax.all_gather(block, step.op.axis, axis=step.op.dim, tiled=True)

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        return [f"block = lax.all_gather(block, {c.axis!r}, axis={c.dim}, tiled=True)"]


class _AllToAll:
    kind = "all_to_all"

    @staticmethod
    def emit(block, step: Step):
        from jax import lax

        c = step.op
        return lax.all_to_all(block, c.axis, split_axis=c.dst_dim, concat_axis=c.src_dim, tiled=True)

    @staticmethod
    def source(step: Step) -> list[str]:
        c = step.op
        return [f"block = lax.all_to_all(block, {c.axis!r}, split_axis={c.dst_dim}, "
                f"concat_axis={c.src_dim}, tiled=True)"]


class _AllPermute:
    kind = "all_permute"

    @staticmethod
    def rounds(step: Step):
        return permute_rounds(step.op.sources(step.t_in, step.mesh))

    @staticmethod
    def emit(block, step: Step):
        import jax.numpy as jnp
        from jax import lax

        axes = tuple(step.mesh.names)
        rounds = _AllPermute.rounds(step)
        if not rounds:
            return block
        if len(rounds) == 1:
            full = complete_round(rounds[0], step.mesh.size)
            if full is not None:
                return lax.ppermute(block, axes, full)
        me = _linear_index(step.mesh)
        out = block
        for pairs in rounds:
            got = lax.ppermute(block, axes, pairs)
            mask = np.zeros(step.mesh.size, dtype=bool)
            mask[[d for _, d in pairs]] = True
            out = jnp.where(jnp.asarray(mask)[me], got, out)
        return out

    @staticmethod
    def source(step: Step) -> list[str]:
        axes = tuple(step.mesh.names)
        rounds = _AllPermute.rounds(step)
        if not rounds:
            return ["pass  # every device already holds its new block"]
        lines = []
        if len(rounds) == 1:
            full = complete_round(rounds[0], step.mesh.size)
            if full is not None:
                return [f"block = lax.ppermute(block, {axes!r}, perm={full!r})"]
        lines.append(f"me = _device_index({axes!r})")
        lines.append("out = block")
        for pairs in rounds:
            dests = sorted(d for _, d in pairs)
            lines.append(f"got = lax.ppermute(block, {axes!r}, perm={pairs!r})")
            lines.append(f"out = jnp.where(jnp.isin(me, jnp.array({dests!r})), got, out)")
        lines.append("block = out")
        return lines


#: kind -> lowering. Keyed exactly like :data:`synth.COLLECTIVES`.
LOWERINGS = {low.kind: low for low in (_DynSlice, _AllGather, _AllToAll, _AllPermute)}


def body_for(plan: Plan):
    """The per-device function: source block in, target block out."""
    steps = plan_steps(plan)

    def body(block):
        for st in steps:
            block = LOWERINGS[st.op.kind].emit(block, st)
        return block

    return body
