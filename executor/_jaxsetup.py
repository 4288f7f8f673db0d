"""Start JAX's backend with the device count the user asked for.

On the CPU backend, N virtual devices exist only if the count is set before the
backend starts. :func:`ensure_devices` sets both the XLA flag and the
``jax_num_cpu_devices`` option (whichever this JAX version honours), then checks.
It is the only place that decides how JAX starts; everything else calls it.
"""

from __future__ import annotations

import glob
import os
import re

from executor.errors import ExecutorError

_FLAG = "--xla_force_host_platform_device_count"
#: Device files of accelerators JAX could use, by kind (TPU VMs: /dev/accel*, /dev/vfio/N;
#: NVIDIA: /dev/nvidia0..; AMD: /dev/kfd).
_KIND_FILES = {"tpu": ("/dev/accel*", "/dev/vfio/[0-9]*"), "cuda": ("/dev/nvidia[0-9]*",), "rocm": ("/dev/kfd",)}
_ACCEL_FILES = tuple(p for ps in _KIND_FILES.values() for p in ps)
#: The JAX plugin module of each GPU platform.
_GPU_PLUGINS = {"cuda": ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13"), "rocm": ("jax_plugins.xla_rocm",)}


def accelerators() -> set[str]:
    """The accelerator kinds whose device files this machine has (``tpu``, ``cuda``, ``rocm``)."""
    return {k for k, pats in _KIND_FILES.items() if any(glob.glob(p) for p in pats)}


def has_accelerator() -> bool:
    return bool(accelerators())


def _has_plugin(kind: str) -> bool:
    import importlib.util

    for mod in _GPU_PLUGINS.get(kind, ()):
        try:
            if importlib.util.find_spec(mod) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def platforms_for_machine() -> str | None:
    """The platform list for a machine without a TPU: ``cpu``, or ``cuda,cpu`` /
    ``rocm,cpu`` where a GPU and JAX's plugin for it exist; ``None`` on a TPU machine
    (JAX's own choice). Never the TPU platform where there is no TPU, so libtpu (installed
    with ``jax[tpu]``) is not initialised and prints nothing."""
    kinds = accelerators()
    if "tpu" in kinds:
        return None
    gpus = [k for k in ("cuda", "rocm") if k in kinds and _has_plugin(k)]
    return ",".join(gpus + ["cpu"])


def default_platforms() -> str | None:
    """Start JAX on the platforms this machine has, never probing for a TPU that is not there.

    With libtpu installed, JAX would otherwise initialise it when its backend starts (slow,
    and libtpu logs ``E0000 ... INVALID_ARGUMENT`` errors about the missing TPU). On a
    machine without a TPU this sets ``JAX_PLATFORMS`` to ``cpu`` (or ``cuda,cpu`` with a GPU
    and its plugin); ``JAX_PLATFORMS`` set by the user always wins. Returns the platform list
    now in force (``None``: JAX's own choice, on a TPU machine). Compiling for a TPU topology
    (executor.tpu) does not need the TPU backend."""
    chosen = os.environ.get("JAX_PLATFORMS")
    if chosen is None:
        chosen = platforms_for_machine()
        if chosen is None:
            return None
        os.environ["JAX_PLATFORMS"] = chosen
        import sys

        if "jax" in sys.modules and not _backend_started():
            try:
                sys.modules["jax"].config.update("jax_platforms", chosen)
            except Exception:  # noqa: BLE001 - an older JAX reads the variable only
                pass
    return chosen


def set_cpu_device_count(n: int) -> None:
    """Ask for ``n`` CPU devices. Must run before JAX's backend starts."""
    if n < 1:
        raise ExecutorError(f"--devices {n}: the device count must be at least 1")
    from synth.limits import check_cpu_devices

    check_cpu_devices(n, f"--devices {n}: CPU device count")
    flags = os.environ.get("XLA_FLAGS", "")
    flags = re.sub(rf"{_FLAG}=\d+", "", flags).strip()
    os.environ["XLA_FLAGS"] = f"{flags} {_FLAG}={n}".strip()
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n)
    except Exception:  # noqa: BLE001 - the backend already started; the check below reports it
        pass


def ensure_devices(n: int | None = None):
    """Return the list of JAX devices, at least ``n`` of them.

    ``n=None`` uses whatever the backend offers. On CPU the count is set first;
    on GPU/TPU the devices that exist are used and ``n`` must not exceed them."""
    default_platforms()
    import jax

    if n is not None and not _backend_started():
        platforms = os.environ.get("JAX_PLATFORMS", "")
        if platforms in ("", "cpu") or "cpu" in platforms.split(","):
            set_cpu_device_count(n)
    devs = jax.devices()
    if n is not None and len(devs) < n:
        raise ExecutorError(
            f"need {n} devices but the {devs[0].platform} backend has {len(devs)}; on CPU, "
            f"set --devices {n} (or XLA_FLAGS={_FLAG}={n}) before JAX starts, or use a "
            f"mesh of at most {len(devs)} devices"
        )
    return devs


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # noqa: BLE001
        return False
