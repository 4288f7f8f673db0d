"""The one ``Plan`` type every planner returns, with its metrics."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from synth.collectives import AllPermute, Collective, bytes_op, collective_from_dict, schedule_ops
from synth.errors import PlanError, RedistributionError
from synth.mesh import Mesh
from synth.schedule import Schedule
from synth.types import ArrayType, refine, refine_name, refine_type


@dataclass(frozen=True)
class Plan:
    """Source and target type on a mesh, the steps, and the type after each step.

    ``mesh``, ``src``, ``dst`` and ``types`` are what the user wrote, in canonical form.
    Where types use sub-axes, the steps are planned and measured on the refined mesh
    (:attr:`work_mesh`, whose axes are the factors; :attr:`work_types`); its device ids
    are the same. Metrics are bytes per device (see :meth:`metrics`)."""

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
        """Apply the type rule of each step from ``src``; check it ends at ``dst``.

        ``mesh`` may be the user's mesh or its refinement (see :func:`synth.types.refine`;
        ``src``/``dst`` may be written on either); steps may name sub-axes coarser than
        the refined factors."""
        base = mesh.base_mesh if mesh.base else mesh
        src, dst = ArrayType.of(src), ArrayType.of(dst)
        names = [a for c in steps for a in _step_names(c)] + list(mesh.names if mesh.base else ())
        work, (src_w, dst_w) = refine(base, [src, dst], names)
        steps = tuple(_refine_step(c, work) for c in steps)
        types, t = [], src_w
        for c in steps:
            t = c.apply(t, work)
            types.append(t)
        if t != dst_w:
            raise PlanError(f"Plan.build: the steps end at {t.canonical(base)}, not at the target "
                            f"{dst.canonical(base)}")
        p = cls(base, src.canonical(base), dst.canonical(base), steps,
                tuple(x.canonical(base) for x in types), itemsize, planner, tuple(notes))
        p.__dict__["_work"] = (work, (src_w,) + tuple(types))
        return p

    @cached_property
    def _work(self):
        names = [a for c in self.steps for a in _step_names(c)]
        work, (src_w,) = refine(self.mesh, [self.src], names)
        if work is self.mesh:
            return work, (self.src,) + self.types
        types, t = [src_w], src_w
        for c in self.steps:
            t = c.apply(t, work)
            types.append(t)
        return work, tuple(types)

    @property
    def work_mesh(self) -> Mesh:
        """The mesh the steps run on: :attr:`mesh`, refined into the sub-axes the types use."""
        return self._work[0]

    @property
    def work_types(self) -> tuple[ArrayType, ...]:
        """The source and the type after each step, written on :attr:`work_mesh`."""
        return self._work[1]

    # -- metrics --------------------------------------------------------------
    @property
    def all_types(self) -> tuple[ArrayType, ...]:
        return (self.src,) + self.types

    def shard_bytes(self, t: ArrayType) -> int:
        """Bytes of one (padded) shard of ``t`` (on :attr:`mesh` or :attr:`work_mesh`)."""
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
        return tuple(c.is_noop(a, self.work_mesh) for c, a in zip(self.steps, self.work_types[:-1]))

    @cached_property
    def peak_live_bytes(self) -> int:
        """Largest input+output pair live during one step (the input alone if no steps),
        with an uneven dim's re-padding buffer where a step needs one, and one buffer for
        an all-reduce, which runs in place (:meth:`Collective.peak_elems`). Relabelling steps (:attr:`noop_steps`) allocate
        nothing and are skipped; a run of consecutive DynSlices is one local slice (see
        :meth:`device_steps`)."""
        peak = self.shard_bytes(self.src)
        wm, wt = self.work_mesh, self.work_types
        for first, last in self.device_steps():
            if first == last:
                live = self.steps[first].peak_elems(wt[first], wt[first + 1], wm) * self.itemsize
            else:
                live = (wt[first].shard_elems(wm) + wt[last + 1].shard_elems(wm)) * self.itemsize
                live = max([live] + [self.steps[i].peak_elems(wt[i], wt[i + 1], wm) * self.itemsize
                                     for i in range(first, last + 1) if not self.noop_steps[i]
                                     and self.steps[i].repad_elems(wt[i], wt[i + 1], wm)])
            peak = max(peak, live)
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
        wt = self.work_types
        rows = [
            c.recv_elems(a, b, self.work_mesh) * self.itemsize
            for c, a, b in zip(self.steps, wt[:-1], wt[1:])
        ]
        if not rows:
            return np.zeros((0, self.mesh.size), dtype=np.int64)
        return np.stack(rows)

    @property
    def recv_bytes_per_step(self) -> list[int]:
        """Max over devices of the bytes received in each step (the maxima of
        :attr:`recv_bytes_per_device_per_step`'s rows, found without building the rows)."""
        return list(self._recv_bytes_per_step)

    @cached_property
    def _recv_bytes_per_step(self) -> tuple[int, ...]:
        wt, wm = self.work_types, self.work_mesh
        return tuple(c.recv_elems_max(a, b, wm) * self.itemsize
                     for c, a, b in zip(self.steps, wt[:-1], wt[1:]))

    @cached_property
    def recv_bytes_max_device(self) -> int:
        """Max over devices of the bytes received over all steps: the sum of
        :attr:`recv_bytes_per_device_per_step`'s rows, its maximum (steps whose every device
        receives the same add their maximum to each device, without a row)."""
        r = self.__dict__.get("recv_bytes_per_device_per_step")
        if r is not None or not self.steps:
            r = self.recv_bytes_per_device_per_step
            return int(r.sum(axis=0).max()) if len(r) else 0
        wt, wm, isz = self.work_types, self.work_mesh, self.itemsize
        same, rows = 0, None
        for c, a, b in zip(self.steps, wt[:-1], wt[1:]):
            if type(c).recv_elems is Collective._recv_uniform:
                same += c.recv_elems_max(a, b, wm) * isz
            else:
                row = c.recv_elems(a, b, wm) * isz
                rows = row if rows is None else rows + row
        return same + (int(rows.max()) if rows is not None else 0)

    @cached_property
    def recv_lower_bound_bytes(self) -> int:
        return recv_lower_bound_bytes(self.mesh, self.src, self.dst, self.itemsize)

    @property
    def num_collectives(self) -> int:
        """Communicating steps: local ones (DynSlice, Unreduce) and relabelling steps do
        not count."""
        return sum(1 for c, noop in zip(self.steps, self.noop_steps)
                   if not c.local and not noop)

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
        if not isinstance(d, dict):
            raise PlanError(f"plan JSON: expected an object with mesh, src, dst and steps, got "
                            f"{type(d).__name__}")
        try:
            mesh = Mesh.of(d["mesh"] if isinstance(d["mesh"], str) else dict(d["mesh"]))
            src = ArrayType.parse(d["src"]).check(mesh, "plan source")
            dst = ArrayType.parse(d["dst"]).check(mesh, "plan target")
            if not isinstance(d["steps"], list):
                raise PlanError(f"plan JSON: 'steps' must be a list, got {type(d['steps']).__name__}")
            steps = [collective_from_dict(s) for s in d["steps"]]
            from synth.limits import check_itemsize

            itemsize = check_itemsize(d.get("itemsize", 4), "plan JSON: itemsize")
            planner = d.get("planner", "normal")
            if not isinstance(planner, str):
                raise PlanError(f"plan JSON: 'planner' must be a name, got {type(planner).__name__}")
            return cls.build(mesh, src, dst, steps, itemsize, planner)
        except KeyError as e:
            raise PlanError(f"plan JSON: missing field {e.args[0]!r}") from None
        except RedistributionError:
            raise
        except (TypeError, AttributeError, ValueError, IndexError, RecursionError) as e:
            raise PlanError(f"plan JSON: malformed plan ({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})") from None

    def rows(self) -> list[dict]:
        """One row per step (step 0 is the source): for tables."""
        rows = [{
            "step": 0, "collective": "(source)", "type": str(self.src),
            "local_shape": self.src.local_shape(self.mesh),
            "shard_bytes": self.shard_bytes(self.src), "recv_bytes": 0,
            "unreduced": list(self.src.unreduced), "padded": not self.src.is_even(self.mesh),
        }]
        recv = self.recv_bytes_per_step
        for i, (c, t) in enumerate(zip(self.steps, self.types)):
            rows.append({
                "step": i + 1,
                "collective": (str(c) if c.kind != "all_permute" else "AllPermute")
                + (" (relabel)" if self.noop_steps[i] else ""),
                "type": str(t), "local_shape": t.local_shape(self.mesh),
                "shard_bytes": self.shard_bytes(t), "recv_bytes": recv[i],
                "unreduced": list(t.unreduced), "padded": not t.is_even(self.mesh),
            })
        return rows

    def op_bytes(self) -> list[tuple[str, int]]:
        """``(kind, recv_bytes)`` of each op of :meth:`to_schedule`, in its order, without
        building the ops (what a cost model that reads only those needs; a fused slice's
        byte counts change only its output, not what it receives)."""
        out = []
        wm, wt = self.work_mesh, self.work_types
        for first, _last in self.device_steps():
            out += schedule_ops(self.steps[first], wt[first], wt[first + 1], wm, self.itemsize, op=bytes_op)
        return out

    def to_schedule(self) -> Schedule:
        ops = []
        wm, wt = self.work_mesh, self.work_types
        for first, last in self.device_steps():
            t_out = wt[last + 1]
            step_ops = schedule_ops(self.steps[first], wt[first], wt[first + 1], wm, self.itemsize)
            if last > first:  # a fused slice: read the first input, write the last output
                op = step_ops[-1]
                step_ops[-1] = replace(op, out_bytes=t_out.shard_elems(wm) * self.itemsize,
                                       label=" + ".join(
                    str(c) for c, noop in zip(self.steps[first:last + 1], self.noop_steps[first:last + 1])
                    if not noop))
            ops += step_ops
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


def _step_names(c: Collective) -> list[str]:
    if isinstance(c, AllPermute):
        return list(ArrayType.of(c.target).all_axes)
    axis = getattr(c, "axis", ())
    return [axis] if isinstance(axis, str) else list(axis)


def _refine_step(c: Collective, work: Mesh) -> Collective:
    """``c`` with every axis name written as the factors of ``work`` it spans."""
    if not work.base:
        return c
    if isinstance(c, AllPermute):
        return AllPermute(refine_type(ArrayType.of(c.target), work))
    return c.map_axes(lambda a: refine_name(work, a))


def recv_lower_bound_bytes(mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int) -> int:
    """The receive bound: max over devices of the bytes a device must receive.

    Without pending sums, a device must receive every element of its target block
    that its source block lacks. With pending sums, let ``R`` be the axes (of size > 1)
    reduced on the way (unreduced in ``src``, not in ``dst``) and ``G`` the group of
    devices that differ from a device only on ``dst``'s unreduced axes (one device when
    ``dst`` has none); ``G``'s partial target blocks must sum to the truth. When ``R`` is
    not empty, the partial values of each element held outside ``G`` are unknown to
    ``G``, so ``G`` receives at least one value per element of its target block. When
    ``R`` is empty, ``G`` can produce an element locally exactly when one of its members
    holds it in its source block. Either way ``G`` needs ``need(G)`` values in all, so
    its busiest member receives at least ``ceil(need(G) / |G|)``. Padding is not
    counted (it carries nothing), so the bound never exceeds what a plan moves.

    When nothing stays pending in ``dst`` there is a second bound: the ``nR`` partial
    values of an element sit on ``nR`` different devices (``nR`` = product of the sizes
    of ``R``), and combining them takes at least ``nR - 1`` received values (each
    received value is one partial sum of one element); over the whole array that is
    ``(nR - 1) * N`` values, so some device receives at least ``(nR - 1) * N / P`` of
    them (``P`` devices). For a reduce-scatter this equals what a ring receives."""
    work, (src, dst) = refine(mesh.base_mesh if mesh.base else mesh, [src, dst])
    reduced = [a for a in src.unreduced if a not in dst.unreduced and work.shape[a] > 1]
    if not dst.unreduced and reduced:
        # Each element's nR partials sit on nR devices; combining them takes at
        # least nR - 1 received values, spread at best evenly over all devices.
        n_r = math.prod(work.shape[a] for a in reduced)
        total = -(-(n_r - 1) * src.num_elems() // work.size)
        # the largest target block is device 0's (block 0 of every dim is its whole
        # local size, no other block is longer): the target's shard, without the
        # per-device boxes
        return max(dst.shard_elems(work), total) * itemsize
    names = work.names
    if dst.unreduced and reduced and all(a in names for a in dst.unreduced):
        # _pending_bound_elems with R not empty: each group needs its whole block, the
        # largest of which is the target's shard (as above)
        g_size = math.prod(work.shape[a] for a in dst.unreduced)
        return -(-dst.shard_elems(work) // g_size) * itemsize
    s0, s1 = src.regions(work)
    d0, d1 = dst.regions(work)
    block = np.maximum(d1 - d0, 0).prod(axis=1)
    if not dst.unreduced:
        overlap = np.maximum(np.minimum(s1, d1) - np.maximum(s0, d0), 0).prod(axis=1)
        return int((block - overlap).max()) * itemsize
    if all(a in names for a in dst.unreduced):
        return _pending_bound_elems(work, src, dst, s0, s1, d0, d1, block, reduced) * itemsize
    from synth.collectives import groups_of

    best = 0
    for g in groups_of(work, dst.unreduced):
        g = list(g)
        need = int(block[g[0]])
        if not reduced:
            boxes = {}
            for d in g:  # distinct source blocks of one type are disjoint
                boxes[tuple(s0[d]) + tuple(s1[d])] = d
            have = sum(int(np.maximum(np.minimum(s1[d], d1[g[0]]) - np.maximum(s0[d], d0[g[0]]),
                                      0).prod()) for d in boxes.values())
            need -= have
        best = max(best, -(-max(need, 0) // len(g)))
    return best * itemsize


def _pending_bound_elems(work, src, dst, s0, s1, d0, d1, block, reduced) -> int:
    """:func:`recv_lower_bound_bytes`'s bound where ``dst`` keeps pending sums, in
    elements, over every group ``G`` at once (arrays on the mesh's grid, one axis per mesh
    axis; ``G`` spans ``dst``'s unreduced axes). ``G``'s members share ``dst``'s block
    (those axes split no dim of it). With ``R`` empty, ``G`` holds what its distinct source
    blocks hold of that block: a member's source block depends on its coordinates on the
    axes that split ``src``'s dims, so each distinct block appears ``m`` times in ``G``,
    ``m`` = the product of the sizes of ``dst``'s unreduced axes that split no dim of
    ``src``; the sum of the members' overlaps over ``m`` is what the distinct blocks hold.
    Example, ``x=2,y=2``, ``[8{x}] -> [8{y}]{U:x}``: each group {x=0, x=1} needs its 4
    elements and its two members hold them all (``m`` = 1): the bound is 0."""
    grid = tuple(work.sizes)
    upos = tuple(work.names.index(a) for a in dst.unreduced)
    g_size = math.prod(grid[k] for k in upos)
    if reduced:  # no member's partials are known to the group: it needs its whole block
        return -(-int(block.max()) // g_size)
    overlap = np.maximum(np.minimum(s1, d1) - np.maximum(s0, d0), 0).prod(axis=1)
    used = set(src.used_axes)
    m = math.prod(work.shape[a] for a in dst.unreduced if a not in used)
    have = overlap.reshape(grid).sum(axis=upos) // m
    need = np.maximum(block.reshape(grid).max(axis=upos) - have, 0)
    return int((-(-need // g_size)).max())
