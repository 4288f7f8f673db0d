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


def xla_schedule(mesh, src, dst, partitioner: str = "shardy", dtype: str = "float32", with_hlo: bool = False):
    """The :class:`synth.Schedule` XLA compiles for ``src -> dst`` on ``mesh`` (with
    ``with_hlo``: ``(schedule, compiled HLO text)``)."""
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
    mem = compiled.memory_analysis()
    sched.meta.update({"mesh": str(mesh), "src": str(src), "dst": str(dst), "itemsize": itemsize,
                       "strategy": f"xla-{partitioner}", "temp_bytes": int(mem.temp_size_in_bytes),
                       "output_bytes": int(mem.output_size_in_bytes), "compile_only": True,
                       **memory_meta(mem)})
    return (sched, compiled.as_text()) if with_hlo else sched


def memory_meta(mem) -> dict:
    """What a compiled program's ``memory_analysis()`` says beyond its temp bytes, for
    the schedule's ``meta``: ``argument_bytes``, ``alias_bytes`` and ``compiled_peak_bytes``,
    the compiler's own peak of live buffers per device (arguments, outputs and
    temporaries, in every memory space; ``None`` where the backend does not report one).

    The peak is what differs where ``temp_bytes`` cannot show it: libtpu keeps small
    buffers out of HBM temporaries (in another memory space, ``S(3)`` in the HLO), so
    XLA's full-array all-gather on ``random-0-019`` (``x=8,y=2``, bfloat16
    ``[512, 16384{x}] -> [512{y}, 16384]``, tpu-v4) has 0 B of temp, as ours does, while
    its peak is 26.0 MiB against our 19.0 MiB."""
    peak = int(getattr(mem, "peak_memory_in_bytes", 0) or 0)
    return {"argument_bytes": int(mem.argument_size_in_bytes), "alias_bytes": int(mem.alias_size_in_bytes),
            "compiled_peak_bytes": peak or None}


def scale_schedule_bytes(s, num: int, den: int):
    """``s`` with every byte count scaled by ``num / den`` (an element size change)."""
    from dataclasses import replace

    from synth.schedule import Schedule

    if num == den:
        return s

    def sc(v):
        return int(v) * num // den

    ops = tuple(replace(o, in_bytes=sc(o.in_bytes), out_bytes=sc(o.out_bytes), send_bytes=sc(o.send_bytes),
                        recv_bytes=sc(o.recv_bytes)) for o in s.ops)
    meta = dict(s.meta)
    for k in ("initial_bytes", "final_bytes", "peak_pair_bytes", "temp_bytes", "output_bytes", "global_bytes",
              "argument_bytes", "alias_bytes", "compiled_peak_bytes"):
        if isinstance(meta.get(k), int):
            meta[k] = sc(meta[k])
    return Schedule(s.num_devices, ops, s.name, meta)


def plan_schedule(plan, dtype: str = "float32"):
    """Our plan's jitted ``shard_map`` program (the one :func:`executor.run.run_plan`
    runs), compiled on the local backend from an abstract input (nothing runs), read
    back from its HLO as a :class:`synth.Schedule` with ``meta['temp_bytes']``.

    The JAX backend must already have ``plan.mesh.size`` devices."""
    import time

    import jax
    import jax.numpy as jnp

    from executor.hlo import hlo_to_schedule
    from executor.lowering import body_for
    from executor.run import Layout, capture_fd2, jax_mesh, named_sharding

    work = plan.work_mesh
    src_w, dst_w = plan.work_types[0], plan.work_types[-1]
    jmesh = jax_mesh(work)
    src_s, dst_s = named_sharding(jmesh, src_w), named_sharding(jmesh, dst_w)
    fn = jax.jit(jax.shard_map(body_for(plan), mesh=jmesh, in_specs=src_s.spec, out_specs=dst_s.spec,
                               check_vma=False), out_shardings=dst_s)
    x = jax.ShapeDtypeStruct(Layout(src_w, work).shape, jnp.dtype(dtype), sharding=src_s)
    t0 = time.perf_counter()
    from executor.run import compile_guard

    with compile_guard(f"our plan {plan.src} -> {plan.dst} on {plan.mesh}", "cpu (ahead of time)",
                       devices=plan.mesh.size), \
            capture_fd2() as cap:  # a failure for memory is one line
        compiled = fn.lower(x).compile()
    compile_s = time.perf_counter() - t0
    itemsize = jnp.dtype(dtype).itemsize
    sched = hlo_to_schedule(compiled.as_text(), num_devices=plan.mesh.size,
                            global_bytes=math.prod(plan.src.shape) * itemsize,
                            name=f"ours-{plan.planner}: {plan.mesh}", log=cap["text"])
    mem = compiled.memory_analysis()
    sched.meta.update({"mesh": str(plan.mesh), "src": str(plan.src), "dst": str(plan.dst), "itemsize": itemsize,
                       "strategy": f"ours-{plan.planner}", "temp_bytes": int(mem.temp_size_in_bytes),
                       "output_bytes": int(mem.output_size_in_bytes), "compile_s": compile_s,
                       "compile_only": True, **memory_meta(mem)})
    return sched
