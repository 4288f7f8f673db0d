"""The one ``Plan`` type every planner returns, with its metrics."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from synth.collectives import Collective, collective_from_dict, schedule_op
from synth.errors import PlanError
from synth.mesh import Mesh
from synth.schedule import Schedule
from synth.types import ArrayType


@dataclass(frozen=True)
class Plan:
    """Source and target type on a mesh, the steps, and the type after each step.

    Metrics are bytes per device (see :meth:`metrics`)."""

    mesh: Mesh
    src: ArrayType
    dst: ArrayType
    steps: tuple[Collective, ...]
    types: tuple[ArrayType, ...]
    itemsize: int = 4
    planner: str = "normal"
    notes: tuple[str, ...] = field(default=(), compare=False)
    #: What the ``auto`` planner's search established (status, optimal, cost, lower
    #: bound and gap, memory bound met or least achievable); None for other planners.
    search: dict | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "types", tuple(self.types))
        if len(self.steps) != len(self.types):
            raise PlanError("Plan: need exactly one type after each step")

    @classmethod
    def build(cls, mesh, src, dst, steps, itemsize=4, planner="normal", notes=()) -> Plan:
        """Apply the type rule of each step from ``src``; check it ends at ``dst``."""
        types, t = [], src
        for c in steps:
            t = c.apply(t, mesh)
            types.append(t)
        if t != dst:
            raise PlanError(f"Plan.build: the steps end at {t}, not at the target {dst}")
        return cls(mesh, src, dst, tuple(steps), tuple(types), itemsize, planner, tuple(notes))

    # -- metrics --------------------------------------------------------------
    @property
    def all_types(self) -> tuple[ArrayType, ...]:
        return (self.src,) + self.types

    def shard_bytes(self, t: ArrayType) -> int:
        return t.shard_elems(self.mesh) * self.itemsize

    @property
    def bound_bytes(self) -> int:
        """The paper's memory bound: ``max(src shard, dst shard)``."""
        return max(self.shard_bytes(self.src), self.shard_bytes(self.dst))

    @cached_property
    def max_shard_bytes(self) -> int:
        return max(self.shard_bytes(t) for t in self.all_types)

    @cached_property
    def noop_steps(self) -> tuple[bool, ...]:
        """Per step: True when it changes no device's data (a relabelling, such as a
        collective over size-1 axes). Such steps allocate, move and count nothing."""
        return tuple(c.is_noop(a, self.mesh) for c, a in zip(self.steps, self.all_types[:-1]))

    @cached_property
    def peak_live_bytes(self) -> int:
        """Largest input+output pair live during one step (the input alone if no steps).
        Relabelling steps (:attr:`noop_steps`) allocate nothing and are skipped; a run of
        consecutive DynSlices is one local slice (see :meth:`device_steps`)."""
        peak = self.shard_bytes(self.src)
        for first, last in self.device_steps():
            peak = max(peak, self.shard_bytes(self.all_types[first])
                       + self.shard_bytes(self.all_types[last + 1]))
        return peak

    def device_steps(self) -> list[tuple[int, int]]:
        """The steps as a device runs them, as ``(first, last)`` step indices:
        relabelling steps are dropped, and consecutive DynSlices (with only relabelling
        between them) are one slice of the input, as XLA fuses them."""
        runs: list[list[int]] = []
        for i, (c, noop) in enumerate(zip(self.steps, self.noop_steps)):
            if noop:
                continue
            if c.kind == "dyn_slice" and runs and self.steps[runs[-1][1]].kind == "dyn_slice":
                runs[-1][1] = i
            else:
                runs.append([i, i])
        return [(a, b) for a, b in runs]

    @cached_property
    def recv_bytes_per_device_per_step(self) -> np.ndarray:
        """``[num_steps, num_devices]`` bytes received."""
        rows = [
            c.recv_elems(a, b, self.mesh) * self.itemsize
            for c, a, b in zip(self.steps, self.all_types[:-1], self.all_types[1:])
        ]
        if not rows:
            return np.zeros((0, self.mesh.size), dtype=np.int64)
        return np.stack(rows)

    @property
    def recv_bytes_per_step(self) -> list[int]:
        """Max over devices of the bytes received in each step."""
        r = self.recv_bytes_per_device_per_step
        return [int(v) for v in r.max(axis=1)] if len(r) else []

    @cached_property
    def recv_bytes_max_device(self) -> int:
        r = self.recv_bytes_per_device_per_step
        return int(r.sum(axis=0).max()) if len(r) else 0

    @cached_property
    def recv_lower_bound_bytes(self) -> int:
        return recv_lower_bound_bytes(self.mesh, self.src, self.dst, self.itemsize)

    @property
    def num_collectives(self) -> int:
        """Communicating steps: DynSlices (local) and relabelling steps do not count."""
        return sum(1 for c, noop in zip(self.steps, self.noop_steps)
                   if c.kind != "dyn_slice" and not noop)

    @property
    def bound_holds(self) -> bool:
        return self.max_shard_bytes <= self.bound_bytes

    def metrics(self) -> dict:
        return {
            "max_shard_bytes": int(self.max_shard_bytes),
            "peak_live_bytes": int(self.peak_live_bytes),
            "recv_bytes_max_device": int(self.recv_bytes_max_device),
            "recv_bytes_per_step": self.recv_bytes_per_step,
            "recv_lower_bound_bytes": int(self.recv_lower_bound_bytes),
            "num_collectives": int(self.num_collectives),
            "bound_bytes": int(self.bound_bytes),
            "bound_holds": bool(self.bound_holds),
        }

    # -- forms ------------------------------------------------------------------
    def to_dict(self) -> dict:
        steps = []
        for c, t in zip(self.steps, self.types):
            d = c.to_dict()
            d["type"] = str(t)
            steps.append(d)
        out = {
            "mesh": self.mesh.to_dict(),
            "itemsize": self.itemsize,
            "src": str(self.src),
            "dst": str(self.dst),
            "planner": self.planner,
            "steps": steps,
            "metrics": self.metrics(),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.search is not None:
            out["search"] = dict(self.search)
        return out

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict) -> Plan:
        mesh = Mesh.of(dict(d["mesh"]))
        src, dst = ArrayType.parse(d["src"]), ArrayType.parse(d["dst"])
        steps = [collective_from_dict(s) for s in d["steps"]]
        return cls.build(mesh, src, dst, steps, int(d.get("itemsize", 4)), d.get("planner", "normal"))

    def rows(self) -> list[dict]:
        """One row per step (step 0 is the source): for tables."""
        rows = [{
            "step": 0, "collective": "(source)", "type": str(self.src),
            "local_shape": self.src.local_shape(self.mesh),
            "shard_bytes": self.shard_bytes(self.src), "recv_bytes": 0,
        }]
        recv = self.recv_bytes_per_step
        for i, (c, t) in enumerate(zip(self.steps, self.types)):
            rows.append({
                "step": i + 1,
                "collective": (str(c) if c.kind != "all_permute" else "AllPermute")
                + (" (relabel)" if self.noop_steps[i] else ""),
                "type": str(t), "local_shape": t.local_shape(self.mesh),
                "shard_bytes": self.shard_bytes(t), "recv_bytes": recv[i],
            })
        return rows

    def to_schedule(self) -> Schedule:
        ops = []
        for first, last in self.device_steps():
            t_out = self.all_types[last + 1]
            op = schedule_op(self.steps[first], self.all_types[first], self.all_types[first + 1],
                             self.mesh, self.itemsize)
            if last > first:  # a fused slice: read the first input, write the last output
                op = replace(op, out_bytes=self.shard_bytes(t_out), label=" + ".join(
                    str(c) for c, noop in zip(self.steps[first:last + 1], self.noop_steps[first:last + 1])
                    if not noop))
            ops.append(op)
        return Schedule(
            num_devices=self.mesh.size,
            ops=ops,
            name=f"{self.planner}: {self.src} -> {self.dst}",
            meta={"initial_bytes": self.shard_bytes(self.src), "mesh": str(self.mesh),
                  "src": str(self.src), "dst": str(self.dst), "planner": self.planner,
                  "itemsize": self.itemsize},
        )

    def __str__(self) -> str:
        from synth.format import format_plan

        return format_plan(self)


def recv_lower_bound_bytes(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int) -> int:
    """Max over devices of the bytes of its target block that its source block lacks."""
    s0, s1 = src.regions(mesh)
    d0, d1 = dst.regions(mesh)
    overlap = np.clip(np.minimum(s1, d1) - np.maximum(s0, d0), 0, None).prod(axis=1)
    need = dst.shard_elems(mesh) - overlap
    return int(need.max()) * itemsize
