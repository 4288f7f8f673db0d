"""XLA's resharding schedule from a compile only (no array, no execution).

``xla_reshard`` materializes the input and runs the program, which is impossible for
arrays of up to a TiB or for meshes of thousands of virtual CPU devices (executing a
2048-device all-to-all on a small host hits XLA's rendezvous timeout). This lowers an
abstract ``jax.ShapeDtypeStruct`` with the source sharding, compiles
``jax.jit(identity, out_shardings=dst)`` under the chosen partitioner, never runs it,
and reads the HLO with :func:`executor.hlo.hlo_to_schedule` (which also gives the
full-rematerialization verdict in ``meta['full_remat']``).

The JAX backend must already have ``mesh.size`` devices.
"""

from __future__ import annotations

import math

from executor.errors import ExecutorError


def xla_schedule(mesh, src, dst, partitioner: str = "shardy", dtype: str = "float32"):
    """The :class:`synth.Schedule` XLA compiles for ``src -> dst`` on ``mesh``."""
    import jax
    import jax.numpy as jnp

    from executor.hlo import hlo_to_schedule
    from executor.run import (
        PARTITIONERS,
        Layout,
        compile_identity,
        compile_reduction,
        jax_mesh,
        named_sharding,
    )
    from synth.types import refine

    if partitioner not in PARTITIONERS:
        raise ExecutorError(f"xla_schedule: unknown partitioner {partitioner!r}; choose one of {list(PARTITIONERS)}")
    # pending sums, uneven dims and sub-axes: the physical arrays on the refined mesh
    work, (src_w, dst_w) = refine(mesh, [src.check(mesh), dst.check(mesh)])
    jmesh = jax_mesh(work)
    src_s, dst_s = named_sharding(jmesh, src_w), named_sharding(jmesh, dst_w)
    x = jax.ShapeDtypeStruct(Layout(src_w, work).shape, jnp.dtype(dtype), sharding=src_s)
    if Layout(src_w, work).plain and Layout(dst_w, work).plain:
        compiled, log = compile_identity(x, dst_s, partitioner)
    else:
        compiled, log = compile_reduction(x, src_w, dst_w, work, dst_s, partitioner)
    itemsize = jnp.dtype(dtype).itemsize
    sched = hlo_to_schedule(compiled.as_text(), num_devices=mesh.size,
                            global_bytes=math.prod(src.shape) * itemsize,
                            name=f"xla-{partitioner}: {mesh}", log=log)
    sched.meta.update({"mesh": str(mesh), "dst": str(dst), "itemsize": itemsize,
                       "strategy": f"xla-{partitioner}"})
    return sched
