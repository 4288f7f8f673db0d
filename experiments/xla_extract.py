"""STOPGAP -- belongs in executor/: XLA's resharding schedule from a compile only.

``executor.xla_reshard`` materializes the input and executes the program. Neither is
possible for the suites' arrays (up to a TiB) or meshes (executing a 2048-device
all-to-all on 2 host cores hits XLA's 40 s rendezvous timeout and aborts). This
module lowers an abstract ``jax.ShapeDtypeStruct`` and compiles, never runs, then
hands the HLO text to the executor's own reader (``executor.hlo.hlo_to_schedule``)
and reuses its mesh/sharding helpers, so the schedule is read exactly as the
executor reads it.

It is the one place outside executor/ that touches jax, imported only inside worker
processes; :func:`experiments.backends.xla_schedule` prefers ``executor.xla_schedule``
as soon as the executor offers it, and then this file can go.
"""

from __future__ import annotations

import math


def xla_schedule_abstract(mesh, src, dst, partitioner: str, dtype: str = "float32"):
    import jax
    import jax.numpy as jnp

    from executor.hlo import hlo_to_schedule
    from executor.run import capture_fd2, jax_mesh, named_sharding

    jmesh = jax_mesh(mesh)
    src_s, dst_s = named_sharding(jmesh, src), named_sharding(jmesh, dst)
    x = jax.ShapeDtypeStruct(src.shape, jnp.dtype(dtype), sharding=src_s)
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    try:
        fn = jax.jit(lambda a: a, out_shardings=dst_s)
        with capture_fd2() as cap:
            compiled = fn.lower(x).compile()
    finally:
        jax.config.update("jax_use_shardy_partitioner", old)
    itemsize = jnp.dtype(dtype).itemsize
    sched = hlo_to_schedule(compiled.as_text(), num_devices=mesh.size,
                            global_bytes=math.prod(src.shape) * itemsize,
                            name=f"xla-{partitioner}: {mesh}", log=cap["text"])
    sched.meta.update({"mesh": str(mesh), "dst": str(dst), "itemsize": itemsize,
                       "strategy": f"xla-{partitioner}"})
    return sched
