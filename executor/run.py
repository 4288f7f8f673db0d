"""Run plans and XLA's own resharding on the JAX devices at hand, and check them.

* :func:`run_plan` lowers a :class:`synth.Plan` to a jitted ``jax.shard_map``, places
  the input with the source ``NamedSharding``, runs it, and checks that the output is
  exactly the input array with exactly the target sharding, shard by shard.
* :func:`xla_reshard` compiles ``jax.jit(identity, out_shardings=dst)`` under either
  partitioner (Shardy, JAX's default, or GSPMD), checks and measures it the same way,
  and reads XLA's plan out of the compiled HLO (:mod:`executor.hlo`).

**The new types on devices** (see :class:`Layout`). JAX arrays here must divide evenly
and have no pending sums (JAX 0.10.2 rejects uneven shardings, and ``unreduced`` needs
``Explicit`` mesh axes), so both programs take and give the *physical* array: each
uneven dim padded to ``split * shard`` (every device's shard is its padded block, as in
GSPMD), and, with pending sums, a leading stacking dim of ``prod(unreduced sizes)``
sharded over the unreduced axes (each device holds its partial block). Sub-axes run
on the refined mesh: each factor is a JAX mesh axis (``x:(2)4`` is ``x_sub2_4``), same
devices in the same order. Pending-sum inputs are small integers, so every order of
summation is exact. XLA's baseline for these types is a jitted function that drops the
padding, sums the stacked partials over the reduced axes (zeros for axes the target
adds) and pads again, with ``out_shardings`` = the target: XLA chooses the collectives.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass, field

import numpy as np

from executor.errors import ExecutorError
from executor.measure import Memory, Timing, memory_of, time_call
from synth.interp import unreduced_groups
from synth.mesh import Mesh
from synth.plan import Plan
from synth.schedule import Schedule
from synth.types import ArrayType, refine

PARTITIONERS = ("shardy", "gspmd")

_DTYPES = {
    "float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2,
    "int8": 1, "uint8": 1, "float64": 8, "int64": 8,
}
_DEFAULT_DTYPE = {1: "int8", 2: "bfloat16", 4: "float32", 8: "float64"}


class OutputMismatch(AssertionError):
    """The program ran but its output is not the input in the target sharding (a bug)."""


def resolve_dtype(dtype: str | None, itemsize: int | None) -> tuple[str, int]:
    """``(dtype name, itemsize)`` from either; they must agree when both are given."""
    if dtype is None:
        size = 4 if itemsize is None else int(itemsize)
        if size not in _DEFAULT_DTYPE:
            raise ExecutorError(f"--itemsize {size}: use 1, 2, 4 or 8 bytes (or pick --dtype)")
        return _DEFAULT_DTYPE[size], size
    if dtype not in _DTYPES:
        raise ExecutorError(f"--dtype {dtype!r}: unknown; use one of {sorted(_DTYPES)}")
    if itemsize is not None and int(itemsize) != _DTYPES[dtype]:
        raise ExecutorError(
            f"--itemsize {itemsize} disagrees with --dtype {dtype} ({_DTYPES[dtype]} bytes); "
            "give one of them"
        )
    return dtype, _DTYPES[dtype]


def _np_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _enable_x64_if(name: str):
    if name in ("float64", "int64"):
        import jax

        jax.config.update("jax_enable_x64", True)


def make_input(t: ArrayType, dtype: str = "float32", seed: int = 0) -> np.ndarray:
    """A seeded array of ``t``'s global shape whose values are (nearly always) distinct
    and survive ``x + 0`` exactly: positive normal floats from random bits, or random
    integers. Distinct values make a misplaced element visible. With pending sums:
    small random integers (see :func:`physical_input`), so every sum is exact."""
    dt = _np_dtype(dtype)
    n = t.num_elems()
    from synth.limits import check_array_memory

    # the uint64 draw, its cast, and the device copies made from it
    check_array_memory(n, 8 + 2 * dt.itemsize, 1, f"the input array of {t}")
    # the whole run over it (programs, outputs, checks): estimated, and one big run at a time
    reserve_host_memory(f"a run over {t} ({dtype})", n * dt.itemsize)
    rng = np.random.default_rng(seed)
    if t.unreduced:
        return rng.integers(-_PART, _PART, size=t.shape, endpoint=True).astype(dt)
    if dt.kind == "f" or dtype == "bfloat16":
        bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
        nbits = 8 * dt.itemsize
        mant = {"bfloat16": 7, "float16": 10, "float32": 23, "float64": 52}[dtype]
        exp_bits = nbits - 1 - mant
        lo, hi = 1 << mant, ((1 << exp_bits) - 2) << mant  # smallest/largest normal exponent
        raw = rng.integers(lo, hi, size=n, dtype=np.uint64).astype(bits)
        return raw.view(dt).reshape(t.shape)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dt).reshape(t.shape)


_PART = 64  # pending-sum inputs and their parts are integers in [-_PART, _PART]


@dataclass(frozen=True)
class Layout:
    """How an array of type ``t`` (written on the work mesh ``mesh``) lives on devices."""

    t: ArrayType
    mesh: Mesh

    @property
    def n_unreduced(self) -> int:
        n = 1
        for a in self.t.unreduced:
            n *= self.mesh.shape[a]
        return n

    @property
    def shape(self) -> tuple[int, ...]:
        """The physical global shape: padded dims, after a stacking dim if sums are pending."""
        padded = tuple(k * n for k, n in zip(self.t.splits(self.mesh), self.t.local_shape(self.mesh)))
        return ((self.n_unreduced,) if self.t.unreduced else ()) + padded

    @property
    def plain(self) -> bool:
        """No stacking, no padding: the physical array is the array."""
        return not self.t.unreduced and self.t.is_even(self.mesh)

    def spec(self) -> tuple:
        from executor.lowering import jax_axes

        _, spec = self.t.to_spec()
        spec = tuple(None if e is None else jax_axes(e) for e in spec)
        if self.t.unreduced:
            spec = (jax_axes(self.t.unreduced),) + spec
        return spec

    def pad(self, core: np.ndarray) -> np.ndarray:
        """``core`` (the array, or stacked parts) padded with zeros to :attr:`shape`."""
        lead = 1 if self.t.unreduced else 0
        return np.pad(core, [(0, 0)] * lead + [(0, p - n) for p, n in zip(self.shape[lead:], self.t.shape)])


def physical_input(x: np.ndarray, t: ArrayType, mesh: Mesh, seed: int = 0) -> np.ndarray:
    """The physical source array for ``x`` under ``t`` (on the work mesh): padded; with
    pending sums, random small integer parts stacked along a leading dim whose sum is
    ``x`` (the last part holds the rest; ``x`` must itself be small integers, as
    :func:`make_input` makes it for such types)."""
    lay = Layout(t, mesh)
    if not t.unreduced:
        return lay.pad(x)
    n = lay.n_unreduced
    rng = np.random.default_rng(seed + 104729)
    parts = rng.integers(-_PART, _PART, size=(n,) + t.shape, endpoint=True).astype(x.dtype)
    parts[-1] = x - parts[:-1].sum(axis=0, dtype=x.dtype)
    return lay.pad(parts)


def jax_mesh(mesh: Mesh, devices=None):
    """A ``jax.sharding.Mesh`` whose row-major device order is device id order, as in synth.
    A refined mesh's factors get identifier names (:func:`executor.lowering.jax_axis_name`)."""
    import jax
    from jax.sharding import Mesh as JMesh

    from executor._jaxsetup import ensure_devices

    devs = list(devices) if devices is not None else ensure_devices(mesh.size)
    if len(devs) < mesh.size:
        raise ExecutorError(
            f"mesh {mesh} needs {mesh.size} devices but {len(devs)} are available "
            f"({jax.default_backend()} backend); use --devices {mesh.size} on CPU"
        )
    from executor.lowering import jax_axis_name

    return JMesh(np.asarray(devs[: mesh.size], dtype=object).reshape(mesh.sizes),
                 tuple(jax_axis_name(a) for a in mesh.names))


def named_sharding(jmesh, t: ArrayType, mesh: Mesh | None = None):
    """The sharding of ``t``'s physical array (:class:`Layout`) on ``jmesh``."""
    from jax.sharding import NamedSharding, PartitionSpec

    from executor.lowering import jax_axes

    _, spec = t.to_spec()
    spec = tuple(None if e is None else jax_axes(e) for e in spec)
    if t.unreduced:
        spec = (jax_axes(t.unreduced),) + spec
    return NamedSharding(jmesh, PartitionSpec(*spec))


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def check_output(out, x: np.ndarray, t: ArrayType, mesh: Mesh, jmesh) -> str | None:
    """``None`` if ``out`` is exactly ``x`` with exactly the sharding of ``t``, else why not.

    ``t`` and ``mesh`` are the work type and mesh. Checks the sharding (equivalent to the
    target ``NamedSharding`` of the physical array, :class:`Layout`) and every device's
    shard against the block ``t`` assigns it, bit for bit; padding is ignored, and where
    sums are pending the shards of each group of devices that differ only on the
    unreduced axes must sum exactly to the block."""
    lay = Layout(t, mesh)
    target = named_sharding(jmesh, t)
    if tuple(out.shape) != lay.shape:
        return f"output shape {tuple(out.shape)} is not the {'' if lay.plain else 'physical '}" \
               f"shape {lay.shape} of {t}"
    if not out.sharding.is_equivalent_to(target, len(lay.shape)):
        return f"output sharding {out.sharding} is not the target {target}"
    pos = {d.id: i for i, d in enumerate(jmesh.devices.flat)}
    local = tuple(t.local_shape(mesh))
    starts, stops = t.regions(mesh)

    def block(i):
        return x[tuple(slice(int(a), int(b)) for a, b in zip(starts[i], stops[i]))]

    got = {}
    for sh in out.addressable_shards:
        i = pos.get(sh.device.id)
        if i is None:
            return f"a shard lives on device {sh.device}, outside the mesh"
        data = np.asarray(sh.data)
        if t.unreduced:
            data = data[0]
        if tuple(data.shape) != local:
            return f"device {i} holds shape {data.shape}; the target type {t} gives {local}"
        got[i] = data[tuple(slice(0, int(b - a)) for a, b in zip(starts[i], stops[i]))]
        if not t.unreduced and not np.array_equal(_bits(got[i]), _bits(block(i))):
            bad = int((_bits(got[i]) != _bits(block(i))).sum())
            return f"device {i} holds {bad} wrong element(s) of its target block"
    for grp in (unreduced_groups(t, mesh) if t.unreduced else ()):
        if all(d in got for d in grp):  # (in a multi-process run, groups split over processes are skipped)
            total = sum(got[d].astype(np.float64) for d in grp)
            if not np.array_equal(total, block(grp[0]).astype(np.float64)):
                return f"devices {grp} hold partial blocks that do not sum to their target block"
    seen = set(got)
    # in a multi-process run each process holds (and checks) the shards of its own devices
    import jax

    mine = {i for i, d in enumerate(jmesh.devices.flat) if d.process_index == jax.process_index()}
    if seen != mine:
        missing = sorted(mine - seen)
        return f"no shard was found for devices {missing}"
    return None


@contextlib.contextmanager
def capture_fd2():
    """Collect what native code writes to stderr (XLA's log) inside the block."""
    buf = {"text": ""}
    try:
        fd = os.dup(2)
    except OSError:
        yield buf
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield buf
        finally:
            os.dup2(fd, 2)
            os.close(fd)
            tmp.seek(0)
            buf["text"] = tmp.read().decode("utf-8", "replace")


# -- compile memory ---------------------------------------------------------------------------
#: The host memory of a process that compiles *and runs* programs over a real array on
#: JAX's CPU backend: XLA's compile itself is flat in the array size (an ahead-of-time
#: compile of the same program peaks at ~220 MiB from 8 MiB to 8 GiB, below), so what grows
#: is the buffers: the host input, its device shards, each program's output and the
#: element-by-element check. Measured as the peak RSS of the whole process tree (sampled
#: every 20 ms; loaded 2-core host, JAX 0.10.2), the app's default layout
#: ``[R{data}, 32768{model}] -> P('model','data')`` on ``data=16,model=4`` (64 CPU devices),
#: bfloat16:
#:
#: ==========  =============================  ===================================
#: array       ``executor compare`` (3 runs)  ``executor xla-schedule --check``
#: ==========  =============================  ===================================
#:   8 MiB     0.415 GiB                      0.272 GiB
#:  32 MiB     0.575 GiB                      0.423 GiB
#: 128 MiB     1.589 GiB                      1.035 GiB
#: 256 MiB     2.955 GiB                      --
#: ==========  =============================  ===================================
#:
#: ``compare`` grows by 10.7-10.9 bytes per array byte (the worst local path), and every
#: CPU device costs about 1.5 MiB in any compile (below), so the estimate is 288 MiB +
#: 1.5 MiB a device + 12 bytes per array byte (64 devices: 384 MiB + 12 B/B; the issue's
#: 512 MiB case: 6.4 GiB). The previous 256 MiB + 8 B/B was below ``compare``'s measured
#: 2.955 GiB at 256 MiB.
COMPILE_BASE_BYTES = 288 << 20
COMPILE_BYTES_PER_ARRAY_BYTE = 12

#: Ahead-of-time compiles (``jax.ShapeDtypeStruct`` input: no buffer exists) are flat in
#: the array size and grow with the device count; measured peak RSS (same host and
#: sampling), ``xla-schedule`` without ``--check``:
#:
#: * XLA's CPU backend, app layout on 64 devices: 0.218-0.219 GiB for 8 MiB, 512 MiB and
#:   8 GiB arrays; ``--mesh x=N``, ``[64N{x}, 1024] -> [64N, 1024{x}]``: 0.211 GiB at N = 8,
#:   0.777 GiB at 512, 2.807 GiB at 2048 (1.15-1.35 MiB a device: the CPU client's devices);
#: * libtpu (``--target``): app layout on ``tpu-v4:4x4x4``, 0.377-0.384 GiB for the same
#:   three sizes; ``x=N`` on ``tpu-v4:2x2x2`` (8) 0.382 GiB, ``tpu-v4:8x8x8`` (512) 0.410 GiB,
#:   ``tpu-v5p:16x16x8`` (2048) 0.465 GiB (~40 KiB a chip);
#: * XLA's GPU compiler: not measured here (no CUDA plugin installed); libtpu's figures
#:   are used.
#:
#: Estimate: base + per device, each rounded up from the measurements.
AOT_BASE_BYTES = {"cpu": 256 << 20, "tpu": 448 << 20, "gpu": 448 << 20}
AOT_BYTES_PER_DEVICE = {"cpu": 1536 << 10, "tpu": 64 << 10, "gpu": 64 << 10}
#: The layout the per-array-byte figure was measured on (its devices are in the base).
_CALIBRATED_DEVICES = 64


def compile_host_bytes(global_bytes: int, devices: int = _CALIBRATED_DEVICES) -> int:
    """Estimated peak host memory of a process that compiles and runs CPU programs over
    an array of ``global_bytes`` on ``devices`` CPU devices (see ``COMPILE_BASE_BYTES``).
    Example: 512 MiB on 64 devices -> 288 MiB + 96 MiB + 6 GiB = 6.375 GiB."""
    return (COMPILE_BASE_BYTES + AOT_BYTES_PER_DEVICE["cpu"] * max(1, int(devices))
            + COMPILE_BYTES_PER_ARRAY_BYTE * int(global_bytes))


def aot_compile_host_bytes(compiler: str, devices: int = 1) -> int:
    """Estimated peak host memory of one ahead-of-time compile by ``compiler`` (``cpu``,
    ``tpu``/``libtpu``, ``gpu``, or a target spec such as ``tpu-v4:2x2x2``) for ``devices``
    devices. Example: libtpu, 64 chips -> 448 MiB + 4 MiB; CPU, 2048 devices -> 256 MiB +
    3 GiB."""
    kind = _compiler_kind(compiler)
    return AOT_BASE_BYTES[kind] + AOT_BYTES_PER_DEVICE[kind] * max(1, int(devices))


def _compiler_kind(compiler: str) -> str:
    """``cpu``, ``tpu`` or ``gpu`` for a compiler or target name (``cpu (ahead of time)``,
    ``tpu-v4:2x2x2``, ``libtpu``, ``dgx-h100:8``, ``xla-gpu``); unknown names count as ``tpu``
    (the largest base)."""
    c = str(compiler).lower().removeprefix("calibrated/").removeprefix("xla-")
    if c.startswith("cpu"):
        return "cpu"
    if "tpu" in c:
        return "tpu"
    if c.startswith(("gpu", "cuda", "rocm", "dgx", "gb200", "h100")):
        return "gpu"
    return "tpu"


def compile_lock_path() -> str:
    """The host's compile lock: ``compile.lock`` in the cache folder (``REDIST_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/redistribution-explorer``, else ``~/.cache/redistribution-explorer``),
    a real folder of this user, never a link (one line otherwise); a per-user folder in the
    temp folder when the cache cannot be created (read-only home)."""
    import stat

    from synth.fileio import FileError

    env = os.environ.get("REDIST_CACHE_DIR", "").strip()
    cands = [env] if env else [
        os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                     "redistribution-explorer"),
        os.path.join(tempfile.gettempdir(), f"redistribution-explorer-{os.getuid()}")]
    last = None
    for d in cands:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            st = os.lstat(d)
        except OSError as e:
            last = e
            continue
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise FileError(f"compile cache folder {d} is a symbolic link or not a folder; remove it, or set "
                            "REDIST_CACHE_DIR to a folder of yours")
        if st.st_uid != os.getuid():
            raise FileError(f"compile cache folder {d} belongs to another user; set REDIST_CACHE_DIR to a "
                            "folder of yours")
        return os.path.join(d, "compile.lock")
    raise FileError(f"no compile cache folder could be created ({last}); set REDIST_CACHE_DIR to a "
                    "writable folder")


#: The open lock file while this process holds the host's compile slot (kept until the
#: process exits: its buffers outlive each compile, so the next big process waits for it).
_SLOT = None


def _take_compile_slot(what: str, need: int) -> None:
    """Hold the host's compile slot (an exclusive ``flock``) for the rest of this process,
    waiting at most ``COMPILE_WAIT_S`` for another process that holds it; says once on
    stderr that it waits."""
    global _SLOT
    if _SLOT is not None:
        return
    import fcntl
    import sys
    import time

    from synth.fileio import open_lock_file
    from synth.limits import limit

    wait_s = limit("compile_wait_s")
    f = open_lock_file(compile_lock_path(), "compile lock file")
    t0, said = time.monotonic(), False
    while True:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if not said:
                print(f"{what}: waiting for another big compile or run on this host to finish (two need about "
                      f"{_fmt_b(2 * need)}, more than is available)", file=sys.stderr, flush=True)
                said = True
            if time.monotonic() - t0 > wait_s:
                f.close()
                raise CompileMemoryError(f"{what}: waited {wait_s:,} s for another big compile or run on this host "
                                         f"(it needs about {_fmt_b(need)}, two do not fit); try again when it "
                                         "has finished, or raise REDIST_LIMIT_COMPILE_WAIT_S") from None
            time.sleep(0.2)
    _SLOT = f


def reserve_host_memory(what: str, global_bytes: int, devices: int = _CALIBRATED_DEVICES) -> int:
    """Before the buffers of a CPU run over an array of ``global_bytes`` exist: refuse in
    one line when :func:`compile_host_bytes` exceeds the memory available, and take the
    host's compile slot when two such runs would not fit together (so a second big run
    waits before it allocates anything, not after). Returns the estimate. Other backends
    keep their buffers on the device: nothing is reserved."""
    import sys

    from synth.limits import available_memory_bytes, check_memory

    jax = sys.modules.get("jax")
    if jax is not None and jax.default_backend() != "cpu":
        return 0
    est = compile_host_bytes(global_bytes, devices)
    check_memory(est, f"{what}: the cpu compile and run")
    if 2 * est > available_memory_bytes():
        _take_compile_slot(what, est)
    return est


def release_compile_slot() -> bool:
    """Give the host's compile slot back (a long-lived process, e.g. a sweep worker, when
    its big run's buffers are gone); True if this process held it."""
    global _SLOT
    f, _SLOT = _SLOT, None
    if f is None:
        return False
    f.close()
    return True


def _fmt_b(n) -> str:
    from executor.fmt import fmt_bytes

    return fmt_bytes(n)


#: libtpu's two wordings: "Used 72.03G of 31.25G hbm." and "the total memory required for
#: HLO temporaries (96.00G) exceeds available HBM (30.75G)."
_HBM_REQUIRED = re.compile(r"required for ([\w ]+?) \(([0-9.]+)([KMGT]?)\) exceeds available (\w+) "
                           r"\(([0-9.]+)([KMGT]?)\)")
_HBM_USED = re.compile(r"Used ([0-9.]+)([KMGT]?) of ([0-9.]+)([KMGT]?) (\w+)")


def _memory_failure(e: BaseException) -> str | None:
    """A one-line reason when ``e`` is a compile that ran out of memory, else None."""
    if isinstance(e, MemoryError):
        return "the host ran out of memory"
    text = str(e)
    if "RESOURCE_EXHAUSTED" not in text and "Ran out of memory" not in text and "out of memory" not in text.lower():
        return None
    unit = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    m = _HBM_USED.search(text)
    if m:
        used, cap, space = float(m.group(1)) * unit[m.group(2)], float(m.group(3)) * unit[m.group(4)], m.group(5)
    else:
        m = _HBM_REQUIRED.search(text)
        if not m:
            return "it ran out of memory (RESOURCE_EXHAUSTED)"
        used, cap = float(m.group(2)) * unit[m.group(3)], float(m.group(5)) * unit[m.group(6)]
        space = f"{m.group(4)} for {m.group(1)}"
    return (f"the program needs {_fmt_b(used)} of {space} per device, {_fmt_b(used - cap)} more than "
            f"the {_fmt_b(cap)} a device has")


class CompileMemoryError(ExecutorError):
    """A compile that failed (or would fail) for memory. ``device_memory`` is True when the
    compiler itself found the program too big for the device's memory (libtpu's
    ``RESOURCE_EXHAUSTED``): a verdict about the program, which ``tpu-memory`` reports as
    an out-of-memory row, not a failure of the host."""

    kind = "memory"
    device_memory = False


@contextlib.contextmanager
def compile_guard(what: str, compiler: str, global_bytes: int | None = None, devices: int | None = None, *,
                  rewrite: bool = True):
    """Around every XLA compile the tool makes (``what`` names the case, ``compiler`` the
    compiler: ``cpu``, ``tpu-v4:2x2x2``, ...):

    1. the host memory is estimated -- :func:`compile_host_bytes` when the program is
       compiled over a real CPU array of ``global_bytes``, else (ahead of time, no buffer)
       :func:`aot_compile_host_bytes` for ``devices`` -- and refused in one line (case,
       compiler, bytes) when it exceeds the memory available;
    2. when two such processes would not fit together, this one takes the host's compile
       slot (:func:`compile_lock_path`) and keeps it until it exits: a second big process
       waits before its first compile;
    3. a compile that fails for memory (``RESOURCE_EXHAUSTED``, ``MemoryError``) becomes one
       :class:`CompileMemoryError` line: the case, the compiler and the bytes needed --
       never a traceback (``rewrite=False`` leaves the failure to a caller that reads
       XLA's own figures from it).

    Example: 512 MiB on 64 CPU devices with 4 GiB available -> ``compare [8192{data},
    32768{model}]: the cpu compile needs about 6.4 GiB of memory but 4.0 GiB is available
    ...``."""
    from synth.limits import available_memory_bytes, check_memory

    if global_bytes is not None and _compiler_kind(compiler) == "cpu":
        est = compile_host_bytes(global_bytes, devices or _CALIBRATED_DEVICES)
    else:
        est = aot_compile_host_bytes(compiler, devices or 1)
    check_memory(est, f"{what}: the {compiler} compile")
    if 2 * est > available_memory_bytes():  # two would not fit: one at a time
        _take_compile_slot(what, est)
    try:
        yield est
    except Exception as e:  # noqa: BLE001 - only memory failures are rewritten
        why = _memory_failure(e) if rewrite else None
        if why is None:
            raise
        host = _compiler_kind(compiler) == "cpu" or isinstance(e, MemoryError)  # else: the device's memory
        need = f" (estimated {_fmt_b(est)} of host memory)" if host else ""
        err = CompileMemoryError(f"{what}: the {compiler} compile failed for memory: {why}{need}; choose a "
                                 "smaller array or a larger machine")
        err.device_memory = not host
        raise err from None


def killed_line(what: str, compiler: str, need_bytes: int | None, returncode: int) -> str:
    """One line for a compile subprocess that died (``returncode`` < 0: a signal; 137 and
    -9 are the kernel's out-of-memory killer): the case, the compiler and the bytes the
    estimate says it needs, instead of "exit status -9"."""
    from synth.limits import available_memory_bytes

    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else None
    need = f"; it needs about {_fmt_b(need_bytes)}" if need_bytes else ""
    if sig == 9:
        return (f"{what}: the {compiler} compile was killed by signal 9, most likely for memory{need} and "
                f"{_fmt_b(available_memory_bytes())} is available now; choose a smaller array, or close "
                "other work and try again")
    how = f"killed by signal {sig}" if sig else f"exit status {returncode}"
    return f"{what}: the {compiler} compile ended ({how}){need}; try again, or a smaller array"


def nbytes_and_devices(x) -> tuple[int | None, int]:
    """``(bytes of a real array's buffers or None for an abstract one, devices)`` of a
    compile's input (what :func:`compile_guard` estimates from)."""
    try:
        devs = len(x.sharding.device_set)
    except Exception:  # noqa: BLE001
        devs = 1
    return _nbytes(x), devs


def _compiler_of(x) -> str:
    """``cpu``, ``tpu`` ... of the devices an array (or abstract array) lives on."""
    try:
        devs = x.sharding.device_set
        return str(next(iter(devs)).platform)
    except Exception:  # noqa: BLE001
        return "XLA"


def _nbytes(x) -> int | None:
    """Bytes of a real array's buffers; None for an abstract one (``jax.ShapeDtypeStruct``:
    an ahead-of-time compile allocates no buffers, so its host memory is not estimated)."""
    import jax

    if not isinstance(x, jax.Array):
        return None
    try:
        return int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize
    except Exception:  # noqa: BLE001
        return None


@dataclass(frozen=True)
class RunResult:
    """One run of one strategy: correctness, time, memory and XLA's compiled program."""

    strategy: str
    correct: bool
    error: str | None
    timing: Timing | None
    memory: Memory
    schedule: Schedule
    full_remat: bool
    hlo_text: str = field(default="", repr=False)
    log: str = field(default="", repr=False)
    compiled: object = field(default=None, repr=False, compare=False)
    input_sharding: object = field(default=None, repr=False, compare=False)
    input_shape: tuple = ()
    input_dtype: str = ""

    def make_input(self):
        """A fresh device array the compiled program takes (zeros; for re-timing)."""
        import jax
        import jax.numpy as jnp

        shape, dt, sh = self.input_shape, self.input_dtype, self.input_sharding
        return jax.jit(lambda: jnp.zeros(shape, dt), out_shardings=sh)()

    @property
    def collectives(self) -> list[str]:
        return [op.kind for op in self.schedule.ops if not op.is_local]

    def to_dict(self) -> dict:
        d = {"correct": self.correct}
        if self.timing is not None:
            d.update(self.timing.to_dict())
        d["temp_bytes"] = self.memory.temp_bytes
        d["temp_plus_output_bytes"] = self.memory.temp_plus_output_bytes
        d["peak_device_bytes"] = self.memory.peak_device_bytes
        d["full_remat"] = self.full_remat
        d["collectives"] = self.collectives
        if self.error:
            d["error"] = self.error
        return d


def _finish(strategy, fn, compiled, xs, x, dst, mesh, jmesh, measure, warmup, repeats, strict,
            log, global_bytes, itemsize):
    from executor.hlo import hlo_to_schedule

    out = fn(xs)
    out.block_until_ready()
    err = check_output(out, x, dst, mesh, jmesh)
    if err and strict:
        raise OutputMismatch(f"{strategy}: {err}")
    timing = time_call(fn, xs, warmup=warmup, repeats=repeats) if measure else None
    text = compiled.as_text()
    sched = hlo_to_schedule(text, num_devices=mesh.size, global_bytes=global_bytes,
                            name=f"{strategy}: {mesh}", log=log)
    sched.meta.update({"mesh": str(mesh), "dst": str(dst), "itemsize": itemsize, "strategy": strategy})
    return RunResult(strategy, err is None, err, timing, memory_of(compiled, list(jmesh.devices.flat)),
                     sched, bool(sched.meta.get("full_remat")), text, log, compiled, xs.sharding,
                     tuple(xs.shape), str(x.dtype))


@dataclass(frozen=True)
class PlanProgram:
    """A plan's jitted ``shard_map`` program and its placed input (:func:`plan_program`)."""

    fn: object
    xs: object
    x: np.ndarray
    mesh: Mesh
    jmesh: object
    dst_w: object
    itemsize: int


def plan_program(plan: Plan, x, dtype, seed: int, devices, who: str) -> PlanProgram:
    """The jitted program of ``plan`` over its working mesh (the user's mesh refined into
    the sub-axes the plan uses) and the physical input placed in the source sharding;
    ``x`` defaults to a seeded array of the plan's shape and dtype."""
    import jax

    from executor.lowering import body_for

    mesh = plan.work_mesh
    src_w, dst_w = plan.work_types[0], plan.work_types[-1]
    dtype, itemsize = resolve_dtype(dtype if x is None else str(x.dtype), None if x is not None else plan.itemsize)
    _enable_x64_if(dtype)
    if x is None:
        x = make_input(plan.src, dtype, seed)
    elif tuple(x.shape) != plan.src.shape:
        raise ExecutorError(f"{who}: x has shape {tuple(x.shape)}, the plan's array is {plan.src.shape}")
    jmesh = jax_mesh(mesh, devices)
    src_s, dst_s = named_sharding(jmesh, src_w), named_sharding(jmesh, dst_w)
    fn = jax.jit(jax.shard_map(body_for(plan), mesh=jmesh, in_specs=src_s.spec,
                               out_specs=dst_s.spec, check_vma=False),
                 out_shardings=dst_s)
    xs = jax.device_put(physical_input(x, src_w, mesh, seed), src_s)
    return PlanProgram(fn, xs, x, mesh, jmesh, dst_w, itemsize)


def run_plan(plan: Plan, x: np.ndarray | None = None, *, dtype: str | None = None,
             measure: bool = False, warmup: int = 3, repeats: int = 10, strict: bool = True,
             devices=None, seed: int = 0) -> RunResult:
    """Run ``plan`` as a jitted ``jax.shard_map`` and check the result element by element.

    ``x`` defaults to a seeded array of the plan's global shape and dtype (float32 for
    itemsize 4). With ``strict`` (default) a wrong output raises :class:`OutputMismatch`;
    otherwise the result says ``correct=False`` and why."""
    pp = plan_program(plan, x, dtype, seed, devices, "run_plan")
    fn, xs, x, dst_w, mesh, jmesh, itemsize = pp.fn, pp.xs, pp.x, pp.dst_w, pp.mesh, pp.jmesh, pp.itemsize
    global_bytes = int(np.prod(plan.src.shape)) * itemsize
    with compile_guard(f"our plan {plan.src} -> {plan.dst} on {plan.mesh}", _compiler_of(xs), global_bytes,
                       plan.mesh.size), \
            capture_fd2() as cap:
        compiled = fn.lower(xs).compile()
    return _finish(f"ours-{plan.planner}", compiled, compiled, xs, x, dst_w, mesh, jmesh, measure,
                   warmup, repeats, strict, cap["text"], global_bytes, itemsize)


def xla_reshard(mesh, src, dst, partitioner: str = "shardy", x: np.ndarray | None = None, *,
                dtype: str | None = None, itemsize: int | None = None, measure: bool = True,
                warmup: int = 3, repeats: int = 10, strict: bool = False, devices=None,
                seed: int = 0) -> RunResult:
    """XLA's own resharding: ``jax.jit(identity, out_shardings=dst)`` from ``src``.

    ``partitioner`` is ``"shardy"`` (JAX's default) or ``"gspmd"``. The compiled HLO
    is parsed into a :class:`synth.Schedule` (``result.schedule``); ``full_remat``
    says whether XLA replicated the whole array on the way (from the HLO, and from
    XLA's "Involuntary full rematerialization" log line when it prints one)."""
    import jax

    from synth.types import parse_type

    if partitioner not in PARTITIONERS:
        raise ExecutorError(f"partitioner {partitioner!r}: use one of {list(PARTITIONERS)}")
    mesh = Mesh.of(mesh)
    src = parse_type(src) if isinstance(src, str) else src
    dst = parse_type(dst, src.shape) if isinstance(dst, str) else dst
    src.check(mesh, "source")
    dst.check(mesh, "target")
    if src.shape != dst.shape:
        raise ExecutorError(f"source {src} and target {dst} have different global shapes")
    dtype, itemsize = resolve_dtype(dtype if x is None else str(x.dtype), itemsize if x is None else None)
    _enable_x64_if(dtype)
    if x is None:
        x = make_input(src, dtype, seed)
    src, dst = src.check(mesh), dst.check(mesh)
    work, (src_w, dst_w) = refine(mesh, [src, dst])
    jmesh = jax_mesh(work, devices)
    src_s, dst_s = named_sharding(jmesh, src_w), named_sharding(jmesh, dst_w)
    xs = jax.device_put(physical_input(x, src_w, work, seed), src_s)
    if Layout(src_w, work).plain and Layout(dst_w, work).plain:
        compiled, log = compile_identity(xs, dst_s, partitioner)
    else:
        compiled, log = compile_reduction(xs, src_w, dst_w, work, dst_s, partitioner)
    global_bytes = int(np.prod(src.shape)) * itemsize
    return _finish(f"xla-{partitioner}", compiled, compiled, xs, x, dst_w, work, jmesh, measure,
                   warmup, repeats, strict, log, global_bytes, itemsize)


def reduction_fn(src: ArrayType, dst: ArrayType, mesh: Mesh):
    """XLA's baseline for the new types (on the work ``mesh``), as a function of the
    physical source array: drop the padding, sum the stacked parts over the axes the
    target reduces, put zeros in the parts of axes only the target leaves pending, and
    pad to the target's physical shape. With ``out_shardings`` = the target, XLA's
    partitioner chooses the collectives."""
    import jax.numpy as jnp

    s_lay, d_lay = Layout(src, mesh), Layout(dst, mesh)
    su, du = list(src.unreduced), list(dst.unreduced)

    def f(a):
        lead = 1 if su else 0
        a = a[(slice(None),) * lead + tuple(slice(0, n) for n in src.shape)]
        if su:
            a = a.reshape(tuple(mesh.shape[u] for u in su) + src.shape)
            gone = tuple(i for i, u in enumerate(su) if u not in du)
            if gone:
                a = a.sum(axis=gone)
            kept = [u for u in su if u in du]
        else:
            kept = []
        if du:
            for u in du:  # axes only the target leaves pending: the value on index 0
                if u not in kept:
                    n = mesh.shape[u]
                    a = jnp.concatenate([a[None], jnp.zeros((n - 1,) + a.shape, a.dtype)], axis=0)
                    kept = [u] + kept
            order = [kept.index(u) for u in du]
            a = jnp.transpose(a, order + list(range(len(du), a.ndim)))
            a = a.reshape((d_lay.n_unreduced,) + dst.shape)
        lead = 1 if du else 0
        pad = [(0, 0)] * lead + [(0, p - n) for p, n in zip(d_lay.shape[lead:], dst.shape)]
        return jnp.pad(a, pad) if any(p for _, p in pad) else a

    return f, s_lay, d_lay


def compile_reduction(x, src: ArrayType, dst: ArrayType, mesh: Mesh, dst_sharding, partitioner: str):
    """Compile :func:`reduction_fn` under ``partitioner`` (see :func:`compile_identity`)."""
    import jax

    f, _, _ = reduction_fn(src, dst, mesh)
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    try:
        fn = jax.jit(f, out_shardings=dst_sharding)
        with compile_guard(f"XLA's reshard ({partitioner}) {src} -> {dst} on {mesh}", _compiler_of(x),
                           *nbytes_and_devices(x)), \
                capture_fd2() as cap:
            compiled = fn.lower(x).compile()
    finally:
        jax.config.update("jax_use_shardy_partitioner", old)
    return compiled, cap["text"]


def compile_identity(x, dst_sharding, partitioner: str):
    """Compile XLA's own resharding, ``jax.jit(identity, out_shardings=dst)``, of ``x``
    (an array or an abstract ``jax.ShapeDtypeStruct`` carrying its sharding) under
    ``partitioner``. Returns the compiled program and XLA's log of the compile."""
    import jax

    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    try:
        fn = jax.jit(lambda a: a, out_shardings=dst_sharding)
        what = f"XLA's reshard ({partitioner}) of a {tuple(x.shape)} {x.dtype} array"
        with compile_guard(what, _compiler_of(x), *nbytes_and_devices(x)), capture_fd2() as cap:
            compiled = fn.lower(x).compile()
    finally:
        jax.config.update("jax_use_shardy_partitioner", old)
    return compiled, cap["text"]
