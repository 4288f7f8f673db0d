"""Compile for a TPU slice without a TPU: ahead-of-time compilation through libtpu.

``jax.experimental.topologies.get_topology_desc`` gives abstract ("compile-only")
devices of any TPU slice libtpu knows; a program whose shardings live on them lowers
and compiles with the real TPU compiler, on this CPU-only machine. Nothing runs, so
the results are the compiled program's schedule and its memory
(``compiled.memory_analysis()``), never times.

* :func:`parse_target` -- ``tpu-v5p:16x16x16`` -> :class:`Target` (the simulator's
  profile and size, and libtpu's topology name);
* :func:`tpu_mesh` -- a ``jax.sharding.Mesh`` over the slice's devices, with mesh
  device ``d`` on the chip the simulator's placement gives it;
* :func:`compile_xla` -- XLA's own resharding (Shardy or GSPMD) compiled for the slice;
* :func:`compile_plan` -- our plan's ``shard_map`` program compiled for the slice.

**Placement.** The simulator numbers a torus's chips row-major over the profile's
dimensions ``X, Y, Z`` (``models.placement``); libtpu gives each chip its
coordinates ``(x, y, z)``. Chip ``c`` is the TPU device whose coordinates are
``numpy.unravel_index(c, dims)``. With the default (row-major) placement, mesh device
``d`` sits on chip ``d``, the same chip the simulator puts it on; any
``models.placement`` string (``x=Z,y=Y,z=X``, ``devices:...``) moves both alike.
Device ids in the compiled HLO are positions in the mesh (synth's row-major ids), so
the extracted schedule replays on the simulator with the same placement.

**TPU v4 megacore.** libtpu describes a v4 chip as two TensorCores by default; JAX on
a v4 runs one device per chip (megacore). The v4 topology is requested with
``chip_config_name="megacore"``, which gives one device per chip.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from executor.errors import ExecutorError

#: Simulator profile -> (libtpu's name, chip config). Sizes are the profile's sizes.
TPU_TARGETS = {
    "tpu-v5p": ("v5p", None),
    "tpu-v4": ("v4", "megacore"),
    "tpu-v5e": ("v5e", None),
    "tpu-v6e": ("v6e", None),
}
EXAMPLES = "tpu-v5p:16x16x16, tpu-v4:4x4x4, tpu-v5e:16x16, tpu-v6e:8x8, dgx-h100:1"

# -- GPU targets ------------------------------------------------------------------------
# XLA's GPU compiler compiles without a GPU when the CUDA PJRT plugin is given the GPU's
# description as a GpuTargetConfigProto (text format, option ``target_config``) and the
# shape of the machine (option ``topology``, "slices x hosts x devices per host").
# The descriptions below are written from NVIDIA's published specifications; XLA uses
# them for its heuristics (fusion, tiling), not for the collectives or the buffers.
_H100_SXM = """gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_block_optin: 232448
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 3350000000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 85899345920
  cuda_compute_capability { major: 9 minor: 0 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 1 patch: 0 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""
# Sources: NVIDIA H100 Tensor Core GPU datasheet (H100 SXM5: 132 SMs, 80 GB HBM3,
# 3.35 TB/s, 50 MB L2, 1.98 GHz boost); CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability" (9.0: 1024 threads/block, 2048 threads/SM,
# 64 K registers, 228 KB shared memory per SM, 227 KB per block opt-in).
_A100_SXM = """gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_block_optin: 166912
  shared_memory_per_core: 167936
  threads_per_core_limit: 2048
  core_count: 108
  fpus_per_core: 64
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 2039000000000
  l2_cache_size: 41943040
  clock_rate_ghz: 1.41
  device_memory_size: 85899345920
  cuda_compute_capability { major: 8 minor: 0 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 1 patch: 0 }
device_description_str: "NVIDIA A100-SXM4-80GB"
"""
# Sources: NVIDIA A100 Tensor Core GPU datasheet (A100 SXM4 80 GB: 108 SMs, 2,039 GB/s,
# 40 MB L2, 1.41 GHz boost); CUDA C++ Programming Guide (8.0: 164 KB shared memory per
# SM, 163 KB per block opt-in).

#: Simulator profile -> (GPU, target description). Sizes are the profile's sizes
#: (``dgx-h100:2`` = two 8-GPU nodes, ``dgx-h100:1x4`` = four GPUs of one node).
GPU_TARGETS = {
    "dgx-h100": ("h100", _H100_SXM),
    "h100-multinode": ("h100", _H100_SXM),
    "dgx-a100": ("a100", _A100_SXM),
}


def gpu_install_hint() -> str:
    try:
        from importlib.metadata import version

        v = version("jax")
    except Exception:  # noqa: BLE001
        v = "<your jax version>"
    return (f"pip install jax-cuda12-plugin=={v} jax-cuda12-pjrt=={v} (XLA's GPU compiler; no GPU, CUDA "
            "driver or NVIDIA libraries needed to compile; about 480 MB installed)")
INSTALL_HINT = ("pip install -U 'jax[tpu]' (or: pip install libtpu, the version jax's "
                "requirements pin; about 690 MB installed)")


class TargetError(ExecutorError):
    """A ``--target`` the TPU compiler cannot take (names the input and the choices)."""


@dataclass(frozen=True)
class Target:
    """A TPU slice to compile for: the simulator's ``profile`` and ``size``."""

    profile: str
    size: str
    libtpu_name: str
    chip_config: str | None = None
    platform: str = "tpu"          # "tpu" (libtpu) or "cuda" (XLA's GPU compiler)

    @property
    def compiler(self) -> str:
        """The compiler id every row and figure names: ``libtpu`` or ``xla-gpu``."""
        return "libtpu" if self.platform == "tpu" else "xla-gpu"

    @property
    def compiler_text(self) -> str:
        return COMPILER_TEXT[self.compiler]

    @property
    def spec(self) -> str:
        return f"{self.profile}:{self.size}"

    @property
    def topology_name(self) -> str:
        if self.platform == "cuda":
            return f"{self.libtpu_name}:1x{self.size}"
        return f"{self.libtpu_name}:{self.size}"

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(v) for v in self.size.split("x"))

    @property
    def num_chips(self) -> int:
        return math.prod(self.dims)

    def machine(self):
        import models

        return models.load_profile(self.profile, self.size)

    def __str__(self) -> str:
        return self.spec


#: What each compiler id means (rows, reports and the app print the id).
COMPILER_TEXT = {
    "libtpu": "XLA's TPU compiler (libtpu), ahead of time for the slice",
    "xla-gpu": "XLA's GPU compiler (JAX's CUDA plugin), ahead of time for the GPUs",
    "xla-cpu": "XLA's CPU backend on this host's virtual CPU devices",
    "none": "not compiled: the plan's own device-level schedule",
}


def compiler_for_profile(profile: str) -> str:
    """The compiler that compiles programs for a machine profile: ``libtpu`` for TPU
    profiles, ``xla-gpu`` for GPU profiles, ``xla-cpu`` for ``cpu-*`` profiles."""
    p = str(profile).split(":", 1)[0].strip().lower()
    if p.startswith("calibrated/"):
        p = p.split("/", 1)[1]
    if p in TPU_TARGETS or p.startswith("tpu-"):
        return "libtpu"
    if p.startswith("cpu"):
        return "xla-cpu"
    return "xla-gpu"


def compiler_missing(profile: str) -> str | None:
    """``None`` when the target's own compiler can compile for ``profile`` here, else why
    not (one line): then a comparison on that machine is collectives-only."""
    p = str(profile).split(":", 1)[0].strip().lower()
    c = compiler_for_profile(p)
    if c == "xla-cpu":
        return None
    if c == "libtpu":
        if p not in TPU_TARGETS:
            return f"libtpu has no topology name for profile {p!r} (known: {sorted(TPU_TARGETS)})"
        why = libtpu_status()
        return f"{why}; {INSTALL_HINT}" if why else None
    if p not in GPU_TARGETS:
        return f"no GPU description for profile {p!r} to compile for (known: {sorted(GPU_TARGETS)})"
    why = gpu_plugin_status()
    return f"{why}; {gpu_install_hint()}" if why else None


def is_tpu_target(text) -> bool:
    return isinstance(text, str) and text.strip().lower().startswith("tpu-")


def _choices() -> str:
    return f"{sorted(TPU_TARGETS) + sorted(GPU_TARGETS)}"


def parse_target(text: str) -> Target:
    """``PROFILE:SIZE`` -> :class:`Target`; the size is checked by the simulator's profile."""
    raw = str(text).strip()
    prof, _, size = raw.partition(":")
    prof = prof.strip().lower()
    if prof not in TPU_TARGETS and prof not in GPU_TARGETS:
        raise TargetError(f"--target {raw!r}: unknown target; use PROFILE:SIZE with PROFILE one of "
                          f"{_choices()}, e.g. {EXAMPLES}")
    if not size.strip():
        eg = "1" if prof in GPU_TARGETS else "4x4x4" if prof in ("tpu-v5p", "tpu-v4") else "4x4"
        raise TargetError(f"--target {raw!r}: give the size, e.g. {prof}:{eg}")
    import models

    try:
        m = models.load_profile(prof, size.strip())
    except ValueError as e:
        raise TargetError(f"--target {raw!r}: {e}") from None
    if prof in GPU_TARGETS:
        return Target(prof, "x".join(str(d) for d in m.dims), GPU_TARGETS[prof][0], None, "cuda")
    name, chip = TPU_TARGETS[prof]
    return Target(prof, "x".join(str(d) for d in m.dims), name, chip)


def target_of(text_or_target) -> Target:
    return text_or_target if isinstance(text_or_target, Target) else parse_target(text_or_target)


# -- libtpu ---------------------------------------------------------------------------
def _quiet_env() -> None:
    """Keep libtpu from probing for a TPU and from logging about not finding one, and let
    several processes load it at once (compile-only use never opens a TPU; by default
    libtpu takes /tmp/libtpu_lockfile and a second process fails)."""
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def libtpu_status() -> str | None:
    """``None`` when libtpu can be found, else why not (one line)."""
    try:
        import importlib.util

        if importlib.util.find_spec("libtpu") is None:
            return "libtpu is not installed"
    except (ImportError, ValueError) as e:
        return f"libtpu cannot be found ({e})"
    return None


def gpu_plugin_status() -> str | None:
    """``None`` when JAX's CUDA plugin can be found, else why not (one line)."""
    import importlib.util

    try:
        if importlib.util.find_spec("jax_plugins.xla_cuda12") is None:
            return "JAX's CUDA plugin (jax-cuda12-plugin, jax-cuda12-pjrt) is not installed"
    except (ImportError, ValueError):
        return "JAX's CUDA plugin (jax-cuda12-plugin, jax-cuda12-pjrt) is not installed"
    return None


@lru_cache(maxsize=16)
def _topology(topology_name: str, chip_config: str | None, platform: str = "tpu"):
    from executor._jaxsetup import default_platforms
    from executor.run import capture_fd2

    default_platforms()
    _quiet_env()
    from jax.experimental import topologies

    kw = {"chip_config_name": chip_config} if chip_config else {}
    if platform == "cuda":
        gpu, _, shape = topology_name.partition(":")
        kw = {"target_config": next(c for g, c in GPU_TARGETS.values() if g == gpu), "topology": shape}
    with capture_fd2() as cap:
        try:
            topo = topologies.get_topology_desc(topology_name=topology_name, platform=platform, **kw)
            err = None
        except Exception as e:  # noqa: BLE001 - reported below as one line
            err = e
    if err is not None:
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return None, msg, cap["text"]
    return topo, None, cap["text"]


def topology(target) -> object:
    """The compiler's description of the slice or GPU machine (compile-only devices);
    errors are one line."""
    t = target_of(target)
    if t.platform == "cuda":
        why = gpu_plugin_status()
        if why:
            raise TargetError(f"--target {t.spec}: {why}; install it with: {gpu_install_hint()}")
        topo, err, _ = _topology(t.topology_name, None, "cuda")
        if topo is None:
            raise TargetError(f"--target {t.spec}: XLA's GPU compiler could not describe {t.topology_name!r} "
                              f"({err}); check that the plugin matches jax: {gpu_install_hint()}")
        if len(topo.devices) != t.num_chips:
            raise TargetError(f"--target {t.spec}: the CUDA plugin describes {len(topo.devices)} GPUs, "
                              f"expected {t.num_chips}")
        return topo
    why = libtpu_status()
    if why:
        raise TargetError(f"--target {t.spec}: {why}; the TPU compiler comes from libtpu: {INSTALL_HINT}")
    topo, err, log = _topology(t.topology_name, t.chip_config)
    if topo is None:
        low = err.lower()
        if any(s in low for s in ("libtpu", "plugin", "not found", "unable to load", "cannot open")) \
                and "topology" not in low:
            raise TargetError(f"--target {t.spec}: libtpu could not load ({err}); install it with: {INSTALL_HINT}")
        raise TargetError(f"--target {t.spec}: libtpu rejects topology {t.topology_name!r} ({err}); "
                          f"use a slice libtpu supports, e.g. {EXAMPLES}")
    if len(topo.devices) != t.num_chips:
        raise TargetError(f"--target {t.spec}: libtpu describes {len(topo.devices)} devices for "
                          f"{t.num_chips} chips; expected one device per chip")
    return topo


def chip_devices(target) -> list:
    """The slice's devices in the simulator's chip order (row-major over the dims)."""
    t = target_of(target)
    topo = topology(t)
    if t.platform == "cuda":  # GPUs numbered node-major, as the simulator numbers them
        return sorted(topo.devices, key=lambda d: d.id)
    by_coords = {tuple(d.coords): d for d in topo.devices}
    dims3 = tuple(t.dims) + (1,) * (3 - len(t.dims))
    out = []
    for c in range(t.num_chips):
        xyz = tuple(int(v) for v in np.unravel_index(c, dims3))
        if xyz not in by_coords:
            raise TargetError(f"--target {t.spec}: libtpu has no chip at coordinates {list(xyz)}")
        out.append(by_coords[xyz])
    return out


def placement_chips(target, mesh, placement=None) -> tuple[int, ...]:
    """Chip of each mesh device, as the simulator places it (``models.placement``)."""
    from models.placement import Placement

    t = target_of(target)
    if mesh.size != t.num_chips:
        raise TargetError(
            f"mesh {mesh} has {mesh.size} devices but --target {t.spec} has {t.num_chips} chips; use a "
            f"mesh of {t.num_chips} devices or a target with {mesh.size} chips ({_size_hint(t, mesh.size)})")
    return Placement.of(placement, mesh, t.machine()).chips


def _size_hint(t: Target, n: int) -> str:
    from models.profiles import load_profile

    base = load_profile(t.profile)
    dims = [1] * len(base.dims)
    rest, k = n, 0
    while rest > 1:
        f = next(p for p in range(2, rest + 1) if rest % p == 0)
        k = min(range(len(dims)), key=lambda i: (dims[i], i))
        dims[k] *= f
        rest //= f
    return f"e.g. {t.profile}:{'x'.join(str(d) for d in sorted(dims, reverse=True))}"


def tpu_mesh(target, mesh, placement=None, work=None):
    """A ``jax.sharding.Mesh`` of ``mesh``'s shape over the slice: device ``d`` (row-major
    over the mesh, synth's id) on the chip the simulator's placement gives it.

    ``work`` is ``mesh`` refined into the sub-axes a type uses (``synth.types.refine``);
    refining keeps the row-major device order, so the same devices are laid over it."""
    from executor.run import jax_mesh

    chips = placement_chips(target, mesh, placement)
    devs = chip_devices(target)
    return jax_mesh(work if work is not None else mesh, devices=[devs[c] for c in chips])


# -- compiling ---------------------------------------------------------------------------
@dataclass
class TpuCompiled:
    """One program compiled for a TPU slice: its schedule and memory, no times."""

    strategy: str
    target: str
    schedule: object
    temp_bytes: int
    argument_bytes: int
    output_bytes: int
    compile_s: float
    full_remat: bool
    hlo_text: str = field(default="", repr=False)
    log: str = field(default="", repr=False)
    compiler: str = "libtpu"
    #: the compiler's peak of live buffers per device (``memory_analysis().peak_memory_in_bytes``:
    #: arguments, outputs, temporaries, every memory space); None where it reports none
    peak_bytes: int | None = None

    @property
    def collectives(self) -> list[str]:
        return [op.kind for op in self.schedule.ops if not op.is_local]

    @property
    def remat_reason(self) -> str:
        return str(self.schedule.meta.get("full_remat_reason", ""))

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "target": self.target, "compiler": self.compiler,
                "compile_only": True, "temp_bytes": self.temp_bytes, "argument_bytes": self.argument_bytes,
                "output_bytes": self.output_bytes, "peak_bytes": self.peak_bytes, "full_remat": self.full_remat,
                "full_remat_reason": self.remat_reason, "collectives": self.collectives,
                "compile_s": self.compile_s}


def _abstract_input(jmesh, src, dtype, work):
    """The physical input (padded, stacked partial sums) as an abstract array on ``jmesh``."""
    import jax
    import jax.numpy as jnp

    from executor.run import Layout, named_sharding

    return jax.ShapeDtypeStruct(Layout(src, work).shape, jnp.dtype(dtype), sharding=named_sharding(jmesh, src))


def _finish(strategy, t, compiled, log, mesh, src, dst, itemsize, compile_s) -> TpuCompiled:
    from executor.hlo import hlo_to_schedule

    text = compiled.as_text()
    sched = hlo_to_schedule(text, num_devices=mesh.size, global_bytes=math.prod(src.shape) * itemsize,
                            name=f"{strategy} on {t.spec}: {mesh}", log=log)
    from executor.extract import memory_meta

    mem = compiled.memory_analysis()
    sched.meta.update({"mesh": str(mesh), "src": str(src), "dst": str(dst), "itemsize": itemsize,
                       "strategy": strategy, "compiler": t.compiler, "target": t.spec,
                       "temp_bytes": int(mem.temp_size_in_bytes), "output_bytes": int(mem.output_size_in_bytes),
                       "compile_s": compile_s, "compile_only": True, **memory_meta(mem)})
    return TpuCompiled(strategy, t.spec, sched, int(mem.temp_size_in_bytes), int(mem.argument_size_in_bytes),
                       int(mem.output_size_in_bytes), compile_s, bool(sched.meta.get("full_remat")), text, log,
                       t.compiler, sched.meta["compiled_peak_bytes"])


def _dtype(dtype, itemsize):
    from executor.run import resolve_dtype

    return resolve_dtype(dtype, itemsize)


def compile_xla(target, mesh, src, dst, partitioner: str = "shardy", *, dtype: str | None = None,
                itemsize: int | None = None, placement=None) -> TpuCompiled:
    """XLA's resharding ``jax.jit(identity, out_shardings=dst)`` compiled for the slice."""
    from executor.run import PARTITIONERS, Layout, compile_identity, compile_reduction, named_sharding
    from synth.types import refine

    if partitioner not in PARTITIONERS:
        raise ExecutorError(f"partitioner {partitioner!r}: use one of {list(PARTITIONERS)}")
    t = target_of(target)
    dtype, itemsize = _dtype(dtype, itemsize)
    # pending sums, uneven dims and sub-axes: the physical arrays on the refined mesh,
    # reduced by XLA as executor.xla_reshard does
    work, (src_w, dst_w) = refine(mesh, [src.check(mesh), dst.check(mesh)])
    jmesh = tpu_mesh(t, mesh, placement, work)
    dst_s = named_sharding(jmesh, dst_w)
    x = _abstract_input(jmesh, src_w, dtype, work)
    t0 = time.perf_counter()
    if Layout(src_w, work).plain and Layout(dst_w, work).plain:
        compiled, log = compile_identity(x, dst_s, partitioner)
    else:
        compiled, log = compile_reduction(x, src_w, dst_w, work, dst_s, partitioner)
    return _finish(f"xla-{partitioner}", t, compiled, log, mesh, src, dst, itemsize, time.perf_counter() - t0)


def compile_plan(target, plan, *, dtype: str | None = None, placement=None) -> TpuCompiled:
    """Our plan's ``jax.shard_map`` program (the one :func:`executor.run.run_plan` runs)
    compiled for the slice."""
    import jax

    from executor.lowering import body_for
    from executor.run import capture_fd2, named_sharding

    t = target_of(target)
    dtype, itemsize = _dtype(dtype, None if dtype else plan.itemsize)
    mesh, work = plan.mesh, plan.work_mesh  # work: refined into the sub-axes the plan uses
    src_w, dst_w = plan.work_types[0], plan.work_types[-1]
    jmesh = tpu_mesh(t, mesh, placement, work)
    src_s, dst_s = named_sharding(jmesh, src_w), named_sharding(jmesh, dst_w)
    fn = jax.jit(jax.shard_map(body_for(plan), mesh=jmesh, in_specs=src_s.spec, out_specs=dst_s.spec,
                               check_vma=False), out_shardings=dst_s)
    x = _abstract_input(jmesh, src_w, dtype, work)
    t0 = time.perf_counter()
    from executor.run import compile_guard

    with compile_guard(f"our plan {plan.src} -> {plan.dst} on {mesh}", t.spec, devices=mesh.size), \
            capture_fd2() as cap:
        compiled = fn.lower(x).compile()
    return _finish(f"ours-{plan.planner}", t, compiled, cap["text"], mesh, plan.src, plan.dst, itemsize,
                   time.perf_counter() - t0)


def xla_schedule(target, mesh, src, dst, partitioner: str = "shardy", dtype: str = "float32", placement=None):
    """XLA's schedule for ``src -> dst`` compiled for the slice (``meta['compiler']``,
    ``meta['temp_bytes']``, ``meta['full_remat']``)."""
    r = compile_xla(target, mesh, src, dst, partitioner, dtype=dtype, placement=placement)
    r.schedule.meta.update({"temp_bytes": r.temp_bytes, "compile_s": r.compile_s})
    return r.schedule


def compare_on_target(target, mesh, src, dst, *, itemsize: int | None = None, dtype: str | None = None,
                      planner: str = "auto", placement=None) -> dict:
    """Our plan and XLA's resharding (Shardy and GSPMD) compiled for the same TPU slice.

    Compile-only: the result holds each program's temp/output bytes (from
    ``compiled.memory_analysis()``), its collectives (from its HLO) and whether it
    rematerialized the whole array; no times (nothing runs)."""
    from executor.compare import parse_case

    t = target_of(target)
    mesh, src, dst = parse_case(mesh, src, dst)
    dtype, itemsize = _dtype(dtype, itemsize)
    plan = plan_for_target(t, mesh, src, dst, planner=planner, itemsize=itemsize, placement=placement)
    out = {"target": t.spec, "compiler": t.compiler, "compile_only": True, "times": None,
           "mesh": str(mesh), "src": str(src), "dst": str(dst), "dtype": dtype,
           "placement": placement or "row-major"}
    ours = compile_plan(t, plan, dtype=dtype, placement=placement)
    for p in ("shardy", "gspmd"):
        out[f"xla_{p}"] = compile_xla(t, mesh, src, dst, p, dtype=dtype, placement=placement).to_dict()
    mf = None
    if planner == "auto":  # memory first (executor.memfirst): above XLA's temp, another bounded plan
        mf = memory_first(t, plan, ours, xla_temp_bytes=(out["xla_shardy"]["temp_bytes"],
                                                          out["xla_gspmd"]["temp_bytes"]),
                          dtype=dtype, placement=placement).choice
        plan, ours = mf.plan, mf.result
    out["ours"] = ours.to_dict()
    out["ours"]["plan_steps"] = [str(c) if c.kind != "all_permute" else "AllPermute" for c in plan.steps]
    out["ours"]["plan_peak_live_bytes"] = plan.peak_live_bytes
    out["ours"]["memory_first"] = mf.to_dict() if mf is not None else None
    from executor.shardy import ShardyError, shardy_plan

    try:  # Shardy's own reshard-to-collectives plan, compiled like ours (executor.shardy)
        sp = shardy_plan(mesh, src, dst, itemsize)
        out["shardy_r2c"] = compile_plan(t, sp, dtype=dtype, placement=placement).to_dict()
        out["shardy_r2c"]["plan_steps"] = [str(c) for c in sp.steps]
    except ShardyError as e:
        out["shardy_r2c"] = {"error": str(e)}
    return out


def plan_for_target(target, mesh, src, dst, *, planner: str = "auto", itemsize: int = 4,
                    placement=None, **kw):
    """Our plan for the target as the sweeps plan it: ``auto`` under the target
    machine's cost (``models.plan_cost.machine_cost``, with ``placement``), not synth's
    default alpha-beta; other planners take no cost model. ``kw``: ``synthesize``'s
    budgets (``budget_moves``, ``budget_s``)."""
    from synth.planners import synthesize

    t = target_of(target)
    if planner == "auto":
        from models.plan_cost import machine_cost

        kw["cost"] = machine_cost(t.machine(), mesh, placement)
    return synthesize(mesh, src, dst, planner=planner, itemsize=itemsize, **kw)


def memory_case(target, mesh, src, dst, *, dtype: str = "float32", planner: str = "auto",
                placement=None, plan=None, cost=None) -> dict:
    """Temp bytes of our plan and of XLA's reshard (both partitioners), all compiled by
    the target's compiler, with XLA's rematerialization verdicts.

    Our plan is ``plan`` when given (the sweeps pass theirs), else
    :func:`plan_for_target` (``auto`` under the target machine's cost).
    A program the compiler rejects because it does not fit in the chip's memory
    ("RESOURCE_EXHAUSTED: Ran out of memory") gets ``*_temp_bytes = None`` and
    ``*_oom`` = the compiler's message: it needs more than the whole HBM.

    An ``auto`` plan goes through the memory-first rule (:func:`memory_first`): where its
    temp bytes are above XLA's, the ``ours_*`` fields are the chosen plan's and
    ``memory_first`` says which and why (``cost``: the model ranking the alternatives)."""
    t = target_of(target)
    dtype, itemsize = _dtype(dtype, None)
    if plan is None:
        plan = plan_for_target(t, mesh, src, dst, planner=planner, itemsize=itemsize, placement=placement)
    row = {"target": t.spec, "mesh": str(mesh), "src": str(src), "dst": str(dst), "dtype": dtype,
           "planner": plan.planner, "ours_cost_model": plan.search.get("cost_model") if plan.search else None,
           "ours_plan_steps": [str(c) for c in plan.steps], "compile_s": 0.0}
    progs = [("ours", lambda: compile_plan(t, plan, dtype=dtype, placement=placement))]
    progs += [(p, lambda p=p: compile_xla(t, mesh, src, dst, p, dtype=dtype, placement=placement))
              for p in ("shardy", "gspmd")]
    ours = None
    for key, build in progs:
        try:
            r = build()
        except Exception as e:  # noqa: BLE001 - only the compiler's out-of-memory verdict is kept
            from executor.run import CompileMemoryError

            device_oom = isinstance(e, CompileMemoryError) and e.device_memory  # compile_guard's rewrite
            if not device_oom and "RESOURCE_EXHAUSTED" not in str(e):
                raise
            row.update({f"{key}_temp_bytes": None, f"{key}_peak_bytes": None,
                        f"{key}_oom": str(e).strip().splitlines()[0][:300],
                        f"{key}_full_remat": None, f"{key}_collectives": []})
            continue
        row.update({f"{key}_temp_bytes": r.temp_bytes, f"{key}_peak_bytes": r.peak_bytes, f"{key}_oom": None,
                    f"{key}_full_remat": r.full_remat, f"{key}_collectives": r.collectives})
        row["compile_s"] += r.compile_s
        if key == "ours":
            ours = r
    row["memory_first"] = None
    if plan.planner == "auto" and ours is not None:
        ch = memory_first(t, plan, ours, xla_temp_bytes=(row["shardy_temp_bytes"], row["gspmd_temp_bytes"]),
                          dtype=dtype, placement=placement, cost=cost)
        row["compile_s"] += sum(r.compile_s for r in ch.compiled_alternatives)
        if ch.choice.changed:
            r = ch.choice.result
            row.update({"ours_temp_bytes": r.temp_bytes, "ours_peak_bytes": r.peak_bytes,
                        "ours_full_remat": r.full_remat, "ours_collectives": r.collectives,
                        "ours_plan_steps": [str(c) for c in ch.choice.plan.steps]})
        row["memory_first"] = ch.choice.to_dict()
    return row


@dataclass
class MemoryFirst:
    """:func:`memory_first`'s answer: the choice and the programs compiled for it."""

    choice: object
    compiled_alternatives: list


def memory_first(target, plan, ours: TpuCompiled, *, xla_temp_bytes, dtype: str, placement=None,
                 cost=None) -> MemoryFirst:
    """The memory-first rule (:mod:`executor.memfirst`) on a compiled target: ``ours`` is
    ``plan`` (auto's) compiled; ``xla_temp_bytes`` XLA's compiled temp bytes (Shardy,
    GSPMD; None for one that does not fit). ``cost``: the machine's cost model (default
    ``machine_cost`` of the target). At most ``memfirst.MAX_ALTERNATIVES`` more compiles."""
    from executor import memfirst

    t = target_of(target)
    if cost is None:
        from models.plan_cost import machine_cost

        cost = machine_cost(t.machine(), plan.mesh, placement)
    done = []

    def compile_temp(p):
        try:
            r = compile_plan(t, p, dtype=dtype, placement=placement)
        except Exception:  # noqa: BLE001 - an alternative that does not compile is not chosen
            return None, None
        done.append(r)
        return r.temp_bytes, r

    ch = memfirst.choose(plan, ours.temp_bytes, ours, memfirst.xla_temp(*xla_temp_bytes), compile_temp, cost)
    return MemoryFirst(ch, done)
