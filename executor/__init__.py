"""executor: run plans and XLA's own resharding on real JAX devices.

The only package that imports jax, and only inside functions: ``import executor``
stays fast. Entry points:

* :func:`run_plan` -- a ``synth.Plan`` as a jitted ``jax.shard_map``, checked element
  by element against the target sharding, optionally timed;
* :func:`xla_reshard` -- ``jax.jit(identity, out_shardings=dst)`` under Shardy or
  GSPMD, checked, timed, and read back from its HLO as a ``synth.Schedule``;
* :func:`hlo_to_schedule` -- the HLO reader (pure text);
* :func:`xla_schedule` -- XLA's schedule from a compile only (abstract input, never run);
* :func:`generate_source` -- standalone JAX source for a plan;
* :func:`compare` -- ours vs both XLA partitioners, with one measurement protocol;
* :func:`reshard` -- a drop-in for JAX code (eager or under ``jax.jit``), see docs/reshard.md;
* ``python -m executor {compare,codegen,xla-schedule,calibrate,report,doctor}`` (``doctor``:
  the collectives XLA inserted in a program, by source line, see docs/reshard.md).
"""

from __future__ import annotations

import importlib

_LAZY = {
    "run_plan": "executor.run",
    "xla_reshard": "executor.run",
    "check_output": "executor.run",
    "OutputMismatch": "executor.run",
    "RunResult": "executor.run",
    "hlo_to_schedule": "executor.hlo",
    "xla_schedule": "executor.extract",
    "parse_replica_groups": "executor.hlo",
    "generate_source": "executor.codegen",
    "compare": "executor.compare",
    "LOWERINGS": "executor.lowering",
    "ensure_devices": "executor._jaxsetup",
    "reshard": "executor.resharding",
    "reshard_info": "executor.resharding",
    "ReshardInfo": "executor.resharding",
    "ExecutorError": "executor.errors",
    "HloParseError": "executor.errors",
}

__all__ = sorted(_LAZY)

# CPU work never probes for a TPU: without an accelerator (and without the user's own
# JAX_PLATFORMS) JAX starts its CPU backend only. Cheap: a few glob()s, no jax import.
from executor._jaxsetup import default_platforms as _default_platforms  # noqa: E402

_default_platforms()


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'executor' has no attribute {name!r}")
