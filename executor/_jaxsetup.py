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
#: Device files of accelerators JAX could use (TPU VMs: /dev/accel*, /dev/vfio/N;
#: NVIDIA: /dev/nvidia0..; AMD: /dev/kfd).
_ACCEL_FILES = ("/dev/accel*", "/dev/vfio/[0-9]*", "/dev/nvidia[0-9]*", "/dev/kfd")


def has_accelerator() -> bool:
    return any(glob.glob(p) for p in _ACCEL_FILES)


def default_platforms() -> str | None:
    """Use the CPU backend unless the machine has an accelerator or the user chose.

    With libtpu installed, JAX would otherwise probe for a TPU when its backend starts
    (slow, and libtpu logs warnings about the missing TPU). ``JAX_PLATFORMS`` set by
    the user always wins. Returns the platform list now in force (``None``: JAX's own
    choice). Compiling for a TPU topology (executor.tpu) does not need the TPU backend."""
    chosen = os.environ.get("JAX_PLATFORMS")
    if chosen is None and not has_accelerator():
        os.environ["JAX_PLATFORMS"] = chosen = "cpu"
        import sys

        if "jax" in sys.modules and not _backend_started():
            try:
                sys.modules["jax"].config.update("jax_platforms", "cpu")
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
