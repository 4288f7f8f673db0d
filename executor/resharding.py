"""``reshard(x, sharding)``: a drop-in for JAX code that moves an array to a new sharding
with a synthesized plan, eagerly or inside ``jax.jit``.

    from executor import reshard
    y = reshard(x, NamedSharding(mesh, P(None, "model")))       # eager or traced
    y, info = reshard(x, P(None, "model"), mesh=mesh, return_plan=True)

The invariants, stated once:

* **Logical in, logical out.** ``x`` is the array the program holds (e.g. ``(50257, 4096)``);
  the result has the same shape, dtype and values and the target sharding. Uneven dims are
  padded to whole shards inside the traced function and cut back after (``jnp.pad`` /
  ``lax.slice``), so the caller never pads.
* **Pending sums are JAX's own.** JAX 0.10.2 represents an unreduced array on ``Explicit``
  mesh axes: its type carries ``P(..., unreduced={'x'})`` (``jax.typeof(x).sharding``) and
  each device holds its partial block. ``reshard`` reads that set as the source's pending
  sums, and a target ``P(..., unreduced={...})`` leaves sums pending; ``shard_map`` takes and
  gives the partial blocks directly (no stacked array of partials).
* **Ours or XLA's, by measurement.** For each ``(mesh, src, dst, shape, dtype)`` the plan is
  ``synth.synthesize(..., planner="auto")`` costed on the machine at hand (or ``hardware=``),
  and both programs, ours and XLA's (``with_sharding_constraint``, or
  ``jax.sharding.reshard`` on Explicit axes), are compiled once, standalone, on an abstract
  input. Ours is used only when its compiled temp bytes are lower, or equal with a lower
  modelled time; otherwise XLA's is used and :class:`ReshardInfo` (and a logged warning when
  ``warn=True``) says why. The choice is cached: the same input gives the same program.
* **Source sharding.** A concrete ``jax.Array`` carries its own; a tracer on ``Explicit``
  axes carries it in its type; a tracer on ``Auto`` axes has none at trace time, so pass
  ``src=`` (the PartitionSpec it has there); without it XLA's reshard is used and the
  info says so.

Limits: the search runs within ``budget_ms`` (default 2000 ms; ``info.plan.search`` says
whether it was proven optimal); each distinct reshard compiles two small programs once.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass, field

import numpy as np

from executor.errors import ExecutorError

log = logging.getLogger("executor.reshard")

#: Time budget of the ``auto`` search, per distinct reshard (cached afterwards).
DEFAULT_BUDGET_MS = 2000.0

#: JAX device kind prefix -> hardware profile name (models/profiles) for ``hardware=None``.
_KIND_PROFILES = (("TPU v6", "tpu-v6e"), ("TPU v5 lite", "tpu-v5e"), ("TPU v5e", "tpu-v5e"),
                  ("TPU v5", "tpu-v5p"), ("TPU v4", "tpu-v4"), ("NVIDIA H100", "dgx-h100"),
                  ("NVIDIA H200", "dgx-h100"), ("NVIDIA A100", "dgx-a100"), ("NVIDIA GB200", "gb200-nvl72"))


@dataclass(frozen=True)
class ReshardInfo:
    """What :func:`reshard` did for one ``(mesh, src, dst)``: the strategy and why, the plan,
    its memory bound, and both programs' compiled temp bytes (per device)."""

    strategy: str  # "ours" or "xla"
    reason: str
    src: str
    dst: str
    mesh: str
    bound_bytes: int | None = None
    max_shard_bytes: int | None = None
    temp_bytes_ours: int | None = None
    temp_bytes_xla: int | None = None
    modelled_s_ours: float | None = None
    modelled_s_xla: float | None = None
    hardware: str | None = None
    plan: object = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (f"ReshardInfo(strategy={self.strategy!r}, src={self.src!r}, dst={self.dst!r}, "
                f"mesh={self.mesh!r}, bound_bytes={self.bound_bytes}, temp_bytes_ours={self.temp_bytes_ours}, "
                f"temp_bytes_xla={self.temp_bytes_xla}, reason={self.reason!r})")

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("strategy", "reason", "src", "dst", "mesh", "bound_bytes",
                                          "max_shard_bytes", "temp_bytes_ours", "temp_bytes_xla",
                                          "modelled_s_ours", "modelled_s_xla", "hardware")}
        d["steps"] = [str(s) for s in self.plan.steps] if self.plan is not None else None
        return d


# -- inputs -> synth types --------------------------------------------------------------
def synth_mesh(jmesh):
    """The synth :class:`~synth.mesh.Mesh` of a ``jax.sharding.Mesh`` (device ids are mesh
    positions, row-major, as shard_map sees them)."""
    from synth.mesh import Mesh

    return Mesh.of(",".join(f"{n}={s}" for n, s in jmesh.shape.items()))


def _entries(spec, ndim: int, who: str):
    if getattr(spec, "reduced", None):
        raise ExecutorError(f"{who}: {spec} has a reduced set; reshard takes unreduced= (pending sums) only")
    spec = tuple(getattr(spec, "partitions", spec))
    if len(spec) > ndim:
        raise ExecutorError(f"{who}: {spec!r} has {len(spec)} entries but the array has {ndim} dims; "
                            "give at most one entry per dim")
    return spec + (None,) * (ndim - len(spec))


def _array_type(shape, spec, unreduced, smesh, who: str):
    from synth.errors import RedistributionError
    from synth.types import ArrayType

    try:
        t = ArrayType.from_spec(tuple(shape), _entries(spec, len(shape), who), tuple(sorted(unreduced)))
        return t.check(smesh, who)
    except RedistributionError as e:
        raise ExecutorError(f"{who}: {e}") from None


def _resolve_target(sharding, mesh, ndim):
    """``(jax mesh, PartitionSpec)`` of the target from a NamedSharding or a PartitionSpec
    with ``mesh=`` (or the mesh set by ``jax.set_mesh``)."""
    from jax.sharding import NamedSharding, PartitionSpec

    if isinstance(sharding, NamedSharding):
        if mesh is not None and mesh != sharding.mesh:
            raise ExecutorError("reshard: mesh= differs from the NamedSharding's mesh; give one of them")
        return sharding.mesh, sharding.spec
    if isinstance(sharding, PartitionSpec | tuple):
        spec = sharding if isinstance(sharding, PartitionSpec) else PartitionSpec(*sharding)
        if mesh is None:
            mesh = _context_mesh()
        if mesh is None:
            raise ExecutorError(f"reshard: target {spec} has no mesh; pass mesh=..., a NamedSharding, "
                                "or call it under jax.set_mesh(mesh)")
        return mesh, spec
    raise ExecutorError(f"reshard: target {sharding!r} is not a NamedSharding or PartitionSpec; pass "
                        "NamedSharding(mesh, P(...)) or P(...) with mesh=mesh")


def _context_mesh():
    try:
        from jax._src import mesh as mesh_lib

        m = mesh_lib.get_concrete_mesh()
        if m is not None and not getattr(m, "empty", False) and m.shape:
            return m
    except Exception:  # noqa: BLE001 - older/newer JAX: no context mesh
        pass
    return None


def _unreduced(spec) -> frozenset:
    return frozenset(getattr(spec, "unreduced", ()) or ())


def _source_spec(x, jmesh, src):
    """The source PartitionSpec, or ``None`` when it cannot be known at trace time."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    if src is not None:
        if isinstance(src, NamedSharding):
            return src.spec
        return src if isinstance(src, PartitionSpec) else PartitionSpec(*src)
    sh = getattr(x, "sharding", None) if not isinstance(x, jax.core.Tracer) else None
    if isinstance(sh, NamedSharding):
        if sh.mesh.shape_tuple != jmesh.shape_tuple or list(sh.mesh.devices.flat) != list(jmesh.devices.flat):
            raise ExecutorError(f"reshard: x lives on mesh {dict(sh.mesh.shape)} but the target is on "
                                f"{dict(jmesh.shape)}; reshard between different meshes is not supported "
                                "here (use jax.device_put)")
        return sh.spec
    if sh is not None and hasattr(sh, "is_fully_replicated") and sh.is_fully_replicated:
        return PartitionSpec()
    try:
        aval_sh = jax.typeof(x).sharding
        if any(t == jax.sharding.AxisType.Explicit for t in aval_sh.mesh.axis_types):
            return aval_sh.spec
    except Exception:  # noqa: BLE001 - no sharding in the type (Auto axes)
        pass
    return None


# -- the decision ---------------------------------------------------------------------
def _machine_for(jmesh, hardware):
    """``(profile or None, label)`` for the cost: ``hardware`` if given, else the profile of
    the devices at hand (cpu-host on CPU)."""
    from models.profiles import load_profile

    n = jmesh.size
    hardware_given = hardware is not None
    if hardware is None:
        d = jmesh.devices.flat[0]
        if d.platform == "cpu":
            hardware = f"cpu-host:{n}"
        else:
            kind = getattr(d, "device_kind", "")
            name = next((p for k, p in _KIND_PROFILES if kind.startswith(k)), None)
            if name is None:
                return None, f"default cost model (no profile for device kind {kind!r})"
            hardware = _sized(name, list(jmesh.devices.flat))
    try:
        prof = load_profile(hardware)
    except Exception as e:  # noqa: BLE001 - a bad profile name or size: the user's input
        raise ExecutorError(f"reshard: hardware={hardware!r}: {str(e).splitlines()[0]}") from None
    if prof.num_devices != n:
        if hardware_given:
            raise ExecutorError(f"reshard: hardware={hardware!r} has {prof.num_devices} devices but the mesh has "
                                f"{n}; give a profile of {n} devices (e.g. cpu-host:{n})")
        return None, f"default cost model (profile {prof.spec} has {prof.num_devices} devices, the mesh {n})"
    return prof, prof.spec


def _sized(name: str, devices) -> str:
    """``name:SIZE`` for TPU chips from their coordinates' bounding box (``tpu-v5e:2x4``), so
    the profile has the mesh's chips; ``name`` alone when the devices carry no coordinates."""
    from models.profiles import load_profile

    coords = [getattr(d, "coords", None) for d in devices]
    if not coords or any(c is None for c in coords):
        return name
    dims = [max(c[i] for c in coords) - min(c[i] for c in coords) + 1 for i in range(len(coords[0]))]
    for cand in (dims, [n for n in dims if n > 1] or [1]):
        spec = f"{name}:{'x'.join(map(str, cand))}"
        try:
            if load_profile(spec).num_devices == len(devices):
                return spec
        except Exception:  # noqa: BLE001 - a size this profile does not take: try the next spelling
            continue
    return name


@dataclass(frozen=True, eq=False)
class _Program:
    info: ReshardInfo
    fn: object  # the function of the logical array (traceable)


def _pspec(t):
    from jax.sharding import PartitionSpec

    from executor.lowering import jax_axes

    _, spec = t.to_spec()
    spec = tuple(None if e is None else jax_axes(e) for e in spec)
    if t.unreduced:
        return PartitionSpec(*spec, unreduced=frozenset(jax_axes(a) for a in t.unreduced))
    return PartitionSpec(*spec)


def _our_fn(plan, jmesh, dst_sharding, shape):
    """The traced function of the logical array that runs ``plan`` in a shard_map."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh as JMesh

    from executor.lowering import LOWERINGS, jax_axis_name, plan_steps

    work = plan.work_mesh
    src_w, dst_w = plan.work_types[0], plan.work_types[-1]
    if work.names != tuple(jmesh.axis_names):
        wj = JMesh(np.asarray(list(jmesh.devices.flat), dtype=object).reshape(work.sizes),
                   tuple(jax_axis_name(a) for a in work.names),
                   axis_types=(jmesh.axis_types[0],) * len(work.names))
    else:
        wj = jmesh
    steps = plan_steps(plan)
    s_pad = tuple(k * n for k, n in zip(src_w.splits(work), src_w.local_shape(work)))
    d_pad = tuple(k * n for k, n in zip(dst_w.splits(work), dst_w.local_shape(work)))

    def body(block):
        for st in steps:
            block = LOWERINGS[st.op.kind].emit(block, st)
        return block

    smap = jax.shard_map(body, mesh=wj, in_specs=_pspec(src_w), out_specs=_pspec(dst_w), check_vma=False)
    uneven = s_pad != tuple(shape) or d_pad != tuple(shape)

    def fn(x):
        if s_pad != tuple(shape):  # uneven source: pad to whole shards (zeros; never read back)
            x = jnp.pad(x, [(0, p - n) for p, n in zip(s_pad, shape)])
        if wj is jmesh:
            y = smap(x)
        else:  # sub-axes: the plan's refined mesh (same devices) is the context mesh of its shard_map
            with jax.sharding.use_abstract_mesh(wj.abstract_mesh):
                y = smap(x)
        if d_pad != tuple(shape):  # uneven target: drop the padding
            y = lax.slice(y, (0,) * len(shape), tuple(shape))
        if uneven or wj is not jmesh:  # the user's mesh and spec again (equivalent: no data moves)
            y = _xla_fn(dst_sharding)(y)
        return y

    return fn


def _xla_fn(dst_sharding):
    import jax

    explicit = any(t == jax.sharding.AxisType.Explicit for t in dst_sharding.mesh.axis_types)

    def fn(x):
        if explicit:
            return jax.sharding.reshard(x, dst_sharding)
        return jax.lax.with_sharding_constraint(x, dst_sharding)

    return fn


def _compiled_temp(fn, shape, dtype, src_sharding, dst_sharding, padded_in, padded_out):
    """Compiled temp bytes per device of ``fn`` alone, on an abstract input in the source
    sharding. JAX holds no uneven array outside jit (it would gather a jit output), so an
    uneven source arrives as its padded physical array (``padded_in``: whole shards, as
    GSPMD holds it), is cut to the logical shape and constrained to the source first, and
    an uneven result is padded to whole shards (``padded_out``) and leaves in the target
    sharding, as a consumer inside a program would use it. Both programs (ours and XLA's)
    get the same prefix and suffix."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from executor.run import capture_fd2

    def prog(a):
        if padded_in is not None:
            a = jax.lax.with_sharding_constraint(lax.slice(a, (0,) * len(shape), shape), src_sharding)
        y = fn(a)
        if padded_out is not None:
            y = jax.lax.with_sharding_constraint(jnp.pad(y, [(0, p - n) for p, n in zip(padded_out, shape)]),
                                                 dst_sharding)
        return y

    sds = jax.ShapeDtypeStruct(padded_in or shape, dtype, sharding=src_sharding)
    from executor.run import _compiler_of, compile_guard

    with compile_guard(f"reshard of a {tuple(sds.shape)} {sds.dtype} array", _compiler_of(sds),
                       devices=len(src_sharding.device_set)), capture_fd2():
        c = jax.jit(prog).lower(sds).compile()
    ma = c.memory_analysis()
    return (int(ma.temp_size_in_bytes) if ma is not None else None), c


def _padded(t, mesh):
    """The physical (padded) shape of an uneven type, ``None`` for an even one."""
    return None if t.is_even(mesh) else tuple(k * n for k, n in zip(t.splits(mesh), t.local_shape(mesh)))


@functools.lru_cache(maxsize=256)
def _decide(jmesh, src_spec, dst_spec, shape, dtype_name, planner, hardware, budget_ms, force):
    import jax.numpy as jnp
    from jax.sharding import NamedSharding

    from synth.errors import RedistributionError
    from synth.planners import synthesize

    smesh = synth_mesh(jmesh)
    src = _array_type(shape, src_spec, {str(a) for a in _unreduced(src_spec)}, smesh, "reshard: the source sharding")
    dst = _array_type(shape, dst_spec, {str(a) for a in _unreduced(dst_spec)}, smesh, "reshard: the target sharding")
    import jax

    if any(t == jax.sharding.AxisType.Explicit for t in jmesh.axis_types):
        for who, t in (("source", src), ("target", dst)):
            if not t.is_even(smesh):
                raise ExecutorError(f"reshard: the {who} {t} does not divide evenly on {smesh}, and JAX's Explicit "
                                    "mesh axes need even dims; use Auto axes (jax.make_mesh(..., axis_types="
                                    "(AxisType.Auto,) * n)) for uneven shardings")
    dtype = jnp.dtype(dtype_name)
    itemsize = dtype.itemsize
    src_s, dst_s = NamedSharding(jmesh, src_spec), NamedSharding(jmesh, dst_spec)
    base = dict(src=str(src), dst=str(dst), mesh=str(smesh))
    xla = _xla_fn(dst_s)
    if force == "xla":
        return _Program(ReshardInfo("xla", "fallback='xla' was asked for", **base), xla)
    prof, label = _machine_for(jmesh, hardware)
    cost = None
    if prof is not None:
        from models.plan_cost import machine_cost

        cost = machine_cost(prof, smesh)
    base["hardware"] = label
    try:
        if planner == "auto":
            plan = synthesize(smesh, src, dst, "auto", itemsize, budget_ms=budget_ms, cost=cost)
        else:
            plan = synthesize(smesh, src, dst, planner, itemsize)
    except RedistributionError as e:
        if force == "ours":
            raise ExecutorError(f"reshard: {src} -> {dst} on {smesh}: no plan ({e})") from None
        return _Program(ReshardInfo("xla", f"no plan of ours: {e}", **base), xla)
    base.update(bound_bytes=int(plan.bound_bytes), max_shard_bytes=int(plan.max_shard_bytes), plan=plan)
    if not plan.steps:
        return _Program(ReshardInfo("ours", "nothing to move: the source already has the target sharding",
                                    temp_bytes_ours=0, **base), lambda x: x)
    ours = _our_fn(plan, jmesh, dst_s, shape)
    pads = (_padded(src, smesh), _padded(dst, smesh))
    try:
        t_ours, _ = _compiled_temp(ours, shape, dtype, src_s, dst_s, *pads)
    except Exception as e:  # noqa: BLE001 - a JAX/XLA refusal of our program: XLA's is used
        if force == "ours":
            raise ExecutorError(f"reshard: our program for {src} -> {dst} does not compile: {e}") from None
        return _Program(ReshardInfo("xla", f"our program did not compile here ({type(e).__name__}: "
                                    f"{str(e).splitlines()[0][:200]})", **base), xla)
    try:
        t_xla, c_xla = _compiled_temp(xla, shape, dtype, src_s, dst_s, *pads)
    except Exception as e:  # noqa: BLE001 - XLA's own program does not compile here (e.g. out of HBM)
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        return _Program(ReshardInfo("ours", f"XLA's reshard does not compile here ({first}); ours does "
                                    f"(temp {t_ours} B)", temp_bytes_ours=t_ours, **base), ours)
    m_ours = m_xla = None
    if cost is not None:
        from executor.hlo import hlo_to_schedule

        m_ours = float(sum(cost.op_time_s(op) for op in plan.to_schedule().ops))
        try:
            sched = hlo_to_schedule(c_xla.as_text(), num_devices=smesh.size,
                                    global_bytes=math.prod(shape) * itemsize)
            m_xla = float(sum(cost.op_time_s(op) for op in sched.ops))
        except Exception:  # noqa: BLE001 - HLO the reader does not know: compare on memory only
            m_xla = None
    base.update(temp_bytes_ours=t_ours, temp_bytes_xla=t_xla, modelled_s_ours=m_ours, modelled_s_xla=m_xla)
    if force == "ours":
        return _Program(ReshardInfo("ours", "fallback='never' was asked for", **base), ours)
    if t_ours is None or t_xla is None:
        return _Program(ReshardInfo("xla", "this backend reports no compiled memory; XLA's reshard kept", **base), xla)
    if t_ours < t_xla:
        return _Program(ReshardInfo("ours", f"compiled temp {t_ours} B < XLA's {t_xla} B", **base), ours)
    if t_ours == t_xla and m_ours is not None and m_xla is not None and m_ours < m_xla:
        return _Program(ReshardInfo("ours", f"compiled temp equal ({t_ours} B), modelled time "
                                    f"{m_ours * 1e6:.1f} us < XLA's {m_xla * 1e6:.1f} us on {label}", **base), ours)
    return _Program(ReshardInfo("xla", f"ours is not better: temp {t_ours} B vs XLA's {t_xla} B"
                                + (f", modelled {m_ours * 1e6:.1f} us vs {m_xla * 1e6:.1f} us"
                                   if m_ours is not None and m_xla is not None else ""), **base), xla)


def reshard_info(x_or_shape, sharding, *, mesh=None, src=None, dtype=None, planner: str = "auto",
                 hardware: str | None = None, budget_ms: float = DEFAULT_BUDGET_MS,
                 fallback: str = "auto") -> ReshardInfo:
    """What :func:`reshard` would do, without running it: ``x_or_shape`` is an array, a
    tracer, a ``jax.ShapeDtypeStruct`` or a shape (then give ``dtype`` and ``src``)."""
    return _prepare(x_or_shape, sharding, mesh, src, dtype, planner, hardware, budget_ms, fallback)[0].info


@functools.lru_cache(maxsize=256)
def _unknown_source(jmesh, dst_spec) -> _Program:
    """XLA's reshard for a tracer whose source sharding is unknown (cached: warned once)."""
    from jax.sharding import NamedSharding

    info = ReshardInfo("xla", "the source sharding is unknown at trace time (Auto mesh axes); pass src=P(...) "
                       "to plan it", src="?", dst=str(dst_spec), mesh=str(synth_mesh(jmesh)))
    return _Program(info, _xla_fn(NamedSharding(jmesh, dst_spec)))


def _prepare(x, sharding, mesh, src, dtype, planner, hardware, budget_ms, fallback):
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec

    if fallback not in ("auto", "xla", "never"):
        raise ExecutorError(f"reshard: fallback={fallback!r}; use 'auto' (XLA's where ours is not better), "
                            "'xla' (always XLA's) or 'never' (always ours)")
    shape = tuple(int(s) for s in (x if isinstance(x, tuple | list) else x.shape))
    dt = jnp.dtype(dtype if dtype is not None else x.dtype)
    jmesh, dst_spec = _resolve_target(sharding, mesh, len(shape))
    if isinstance(x, tuple | list):
        src_spec = _source_spec(None, jmesh, src if src is not None else PartitionSpec())
    else:
        src_spec = _source_spec(x, jmesh, src)
    if src_spec is None:
        if fallback == "never":
            raise ExecutorError("reshard: inside jax.jit on Auto mesh axes the source sharding is not known at "
                                "trace time; pass src=P(...) (the sharding x has there) with fallback='never'")
        return _unknown_source(jmesh, dst_spec), jmesh
    src_spec = PartitionSpec(*_entries(src_spec, len(shape), "reshard: src"), unreduced=_unreduced(src_spec))
    dst_spec = PartitionSpec(*_entries(dst_spec, len(shape), "reshard: the target"), unreduced=_unreduced(dst_spec))
    force = {"auto": None, "xla": "xla", "never": "ours"}[fallback]
    return _decide(jmesh, src_spec, dst_spec, shape, dt.name, planner, hardware, float(budget_ms), force), jmesh


def reshard(x, sharding, *, mesh=None, src=None, planner: str = "auto", hardware: str | None = None,
            budget_ms: float = DEFAULT_BUDGET_MS, fallback: str = "auto", return_plan: bool = False,
            warn: bool = True):
    """``x`` with the target sharding, moved by a synthesized plan (or XLA's reshard where
    ours is not better).

    ``sharding``: a ``NamedSharding``, or a ``PartitionSpec`` with ``mesh=`` (or under
    ``jax.set_mesh``); ``P(..., unreduced={...})`` leaves sums pending (Explicit axes).
    ``src``: the source PartitionSpec, needed for a tracer on Auto mesh axes.
    ``planner``: a synth planner (``auto``); ``hardware``: a profile name for the cost
    (default: the devices at hand). ``fallback``: ``'auto'``, ``'xla'`` or ``'never'``.
    ``return_plan=True`` returns ``(array, ReshardInfo)``. Works eagerly and under
    ``jax.jit``; raises :class:`executor.errors.ExecutorError` on a sharding that does not
    fit the array or the mesh."""
    import jax

    if mesh is None and not isinstance(x, jax.core.Tracer) and hasattr(getattr(x, "sharding", None), "mesh") \
            and not hasattr(sharding, "mesh"):
        mesh = x.sharding.mesh  # reshard(x, P(...)) on x's own mesh
    prog, _ = _prepare(x, sharding, mesh, src, None, planner, hardware, budget_ms, fallback)
    info = prog.info
    if warn and info.strategy == "xla" and fallback == "auto" and prog not in _WARNED:
        _WARNED.add(prog)  # once per distinct reshard (the decision is cached)
        log.warning("reshard %s -> %s: XLA's reshard used (%s)", info.src, info.dst, info.reason)
    if isinstance(x, jax.core.Tracer):
        y = prog.fn(x)
    else:
        _check_even(x.shape, info)
        y = _eager(prog)(x)
    return (y, info) if return_plan else y


def _check_even(shape, info):
    from synth.types import parse_type

    if info.dst == "?" or not info.mesh:
        return
    from synth.mesh import Mesh

    t = parse_type(info.dst, tuple(shape))
    if not t.is_even(Mesh.of(info.mesh)):
        raise ExecutorError(f"reshard: the target {info.dst} does not divide evenly on {info.mesh}, and a "
                            "jax.Array outside jit cannot hold an uneven sharding (JAX 0.10.2); call reshard "
                            "inside jax.jit, where the padding stays internal")


_WARNED: set = set()


@functools.lru_cache(maxsize=256)
def _eager_cached(prog):
    import jax

    return jax.jit(prog.fn)


def _eager(prog):
    return _eager_cached(prog)
