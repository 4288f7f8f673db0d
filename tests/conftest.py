"""Shared test set-up.

JAX's CPU backend must see 8 virtual devices; the flag has to be set before the
backend starts, so it is set here, before any test module imports jax.
"""

import os

_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
