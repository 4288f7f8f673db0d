"""Benchmark of ``executor.reshard`` inside ``jax.jit`` against XLA's own reshard.

    python -m experiments.reshard_bench                    # 8 CPU devices, compile + run
    python -m experiments.reshard_bench --target tpu-v5e:2x4   # AOT for a TPU slice, compile only

For every case of the ``transformer``, ``xla-issues`` and ``pending-sums`` suites on at
most 8 devices, both programs are the same jitted step: build the source array from a
placed input (a ``with_sharding_constraint``; for pending sums a ``shard_map`` that turns
stacked parts into JAX's unreduced array on Explicit axes), reshard it, and a trivial
consumer. The step with ``executor.reshard`` and the step with
``jax.lax.with_sharding_constraint`` (``jax.sharding.reshard`` on Explicit axes) are both
compiled, and their compiled temp bytes per device compared; on CPU both are run and the
outputs checked element by element against the target sharding
(:func:`executor.run.check_output`). Arrays larger than ``--max-mib`` are scaled down
(dims halved while they still divide), and the row says so. Printed, not asserted: a
table row per case and the totals (bit-exact, temp <= XLA's, strictly lower where XLA
rematerializes).

Cases skipped, with the reason printed: sub-axes (no PartitionSpec on the user's mesh),
pending sums with uneven dims (JAX's Explicit axes need even dims), meshes over 8 devices.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass

import numpy as np

from experiments.case import ExperimentError
from synth.errors import RedistributionError

SUITES = ("transformer", "xla-issues", "pending-sums")


@dataclass
class Row:
    suite: str
    name: str
    shape: tuple
    strategy: str = ""
    temp_ours: int | None = None
    temp_xla: int | None = None
    xla_remat: bool = False
    exact: bool | None = None
    skipped: str = ""
    scaled: bool = False
    xla_oom: bool = False

    @property
    def ok(self) -> bool:
        if self.skipped or self.temp_ours is None or self.temp_xla is None:
            return False
        if self.exact is False:
            return False
        return self.temp_ours <= self.temp_xla and (not self.xla_remat or self.temp_ours < self.temp_xla)


def _shrink(t, mesh, itemsize, max_bytes):
    """``t`` with dims halved (keeping each split divisible and uneven dims as they are)
    until the array is at most ``max_bytes``; ``(type, scaled?)``."""
    from synth.types import ArrayType

    shape = list(t.shape)
    splits = t.splits(mesh)
    scaled = False
    while math.prod(shape) * itemsize > max_bytes:
        cands = [i for i, (n, k) in enumerate(zip(shape, splits)) if n % (2 * k) == 0 and n // 2 >= k]
        if not cands:
            break
        i = max(cands, key=lambda j: shape[j])
        shape[i] //= 2
        scaled = True
    _, spec = t.to_spec()
    return ArrayType.from_spec(tuple(shape), spec, t.unreduced).check(mesh), scaled


def step_program(jm, src, dst, mesh, use_ours, hardware=None):
    """``(step, input shape, input PartitionSpec)``: the jitted step of the module docstring
    around ``executor.reshard`` (``use_ours``) or XLA's reshard, for types on the work mesh.

    * even types: the input arrives in the source sharding;
    * uneven types: JAX holds no uneven array outside jit, so the input is the padded
      physical array (whole shards, as GSPMD holds them), cut to the logical shape and
      constrained to the source inside the step; an uneven result is padded back and leaves
      in the target sharding (a jit output would otherwise be gathered);
    * pending sums (Explicit axes): the input is the stacked parts (one per device of each
      unreduced group), turned into JAX's unreduced array by a ``shard_map``; a result with
      pending sums goes back to stacked parts the same way.

    Everything but the reshard itself is the same in both programs."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from executor import reshard
    from executor.run import Layout

    s_parts, d_parts = src.to_spec()[1], dst.to_spec()[1]
    s_spec, d_spec = P(*s_parts), P(*d_parts)
    if src.unreduced:
        su, du = tuple(src.unreduced), tuple(dst.unreduced)
        s_red = P(*s_parts, unreduced=frozenset(su))
        d_red = P(*d_parts, unreduced=frozenset(du)) if du else d_spec
        to_unreduced = jax.shard_map(lambda b: b[0], mesh=jm, in_specs=P(su, *s_parts), out_specs=s_red,
                                     check_vma=False)
        back = (jax.shard_map(lambda b: b[None], mesh=jm, in_specs=d_red, out_specs=P(du, *d_parts),
                              check_vma=False) if du else (lambda y: y))

        def step(parts):
            x = to_unreduced(parts)
            y = reshard(x, d_red, warn=False, hardware=hardware) if use_ours else jax.sharding.reshard(x, NamedSharding(jm, d_red))
            return back(y)

        return step, Layout(src, mesh).shape, P(su, *s_parts)
    shape = src.shape
    s_lay, d_lay = Layout(src, mesh), Layout(dst, mesh)

    def step(a):
        if not s_lay.plain:
            a = jax.lax.with_sharding_constraint(lax.slice(a, (0,) * len(shape), shape), NamedSharding(jm, s_spec))
        if use_ours:
            y = reshard(a, d_spec, mesh=jm, src=s_spec, warn=False, hardware=hardware)
        else:
            y = jax.lax.with_sharding_constraint(a, NamedSharding(jm, d_spec))
        if not d_lay.plain:
            y = jax.lax.with_sharding_constraint(jnp.pad(y, [(0, p - n) for p, n in zip(d_lay.shape, shape)]),
                                                 NamedSharding(jm, d_spec))
        return y

    return step, s_lay.shape, s_spec


def bench_case(case, jm_for, max_bytes, run: bool, itemsize_of, hardware=None) -> Row:
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from executor.run import check_output, make_input, physical_input
    from synth.mesh import Mesh
    from synth.types import parse_type

    mesh = Mesh.of(case.mesh)
    src = parse_type(case.src).check(mesh)
    dst = parse_type(case.dst, src.shape).check(mesh)
    row = Row(case.suite, case.name, src.shape)
    if mesh.size > 8:
        row.skipped = f"needs {mesh.size} devices"
        return row
    if any(":" in a for t in (src, dst) for d in t.dims for a in d.axes):
        row.skipped = "sub-axes have no PartitionSpec on the user's mesh"
        return row
    if (src.unreduced or dst.unreduced) and not (src.is_even(mesh) and dst.is_even(mesh)):
        row.skipped = "pending sums with uneven dims: JAX's Explicit axes need even dims"
        return row
    if dst.unreduced and not src.unreduced:
        row.skipped = "the source has no pending sum to start from"
        return row
    itemsize = itemsize_of(case.dtype)
    src, row.scaled = _shrink(src, mesh, itemsize, max_bytes)
    dst = type(dst).from_spec(src.shape, dst.to_spec()[1], dst.unreduced).check(mesh)
    row.shape = src.shape
    dtype = jnp.dtype(case.dtype)
    kind = AxisType.Explicit if src.unreduced else AxisType.Auto
    try:
        jm = jm_for(mesh, kind)
    except RedistributionError as e:  # e.g. a mesh that does not fill the TPU slice
        row.skipped = str(e).splitlines()[0][:120]
        return row
    step_ours, in_shape, in_spec = step_program(jm, src, dst, mesh, True, hardware)
    step_xla, _, _ = step_program(jm, src, dst, mesh, False)
    sds = jax.ShapeDtypeStruct(in_shape, dtype, sharding=NamedSharding(jm, in_spec))
    ctx = jax.set_mesh(jm)
    with ctx:
        try:
            from executor.run import _compiler_of, capture_fd2, compile_guard

            with compile_guard(f"XLA's reshard {src} -> {dst} on {mesh}", _compiler_of(sds), devices=jm.size,
                               rewrite=False), capture_fd2() as cap:  # the row reads XLA's own figure
                c_xla = jax.jit(step_xla).lower(sds).compile()
            row.temp_xla = int(c_xla.memory_analysis().temp_size_in_bytes)
            row.xla_remat = full_remat(c_xla.as_text(), cap["text"], src, dst, mesh)
        except Exception as e:  # noqa: BLE001 - XLA/JAX refusing its own reshard: the row says so
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            oom = re.search(r"HLO temporaries \(([0-9.]+)([KMGT])\)", msg)
            if not oom:
                row.skipped = f"XLA's reshard does not compile: {type(e).__name__}: {msg[:120]}"
                return row
            # XLA's program does not fit the chip: its temporaries as the compiler reports them
            row.temp_xla = int(float(oom.group(1)) * 1024 ** " KMGT".index(oom.group(2)))
            row.xla_remat = True
            row.xla_oom = True
        from executor.resharding import reshard_info

        info = reshard_info(src.shape, P(*dst.to_spec()[1], unreduced=frozenset(dst.unreduced)), mesh=jm,
                            src=P(*src.to_spec()[1], unreduced=frozenset(src.unreduced)), dtype=dtype,
                            hardware=hardware)
        row.strategy = info.strategy
        with compile_guard(f"jax.sharding.reshard {src} -> {dst} on {mesh}", _compiler_of(sds), devices=jm.size):
            c_ours = jax.jit(step_ours).lower(sds).compile()
        row.temp_ours = int(c_ours.memory_analysis().temp_size_in_bytes)
        if run:
            x = make_input(src, case.dtype if case.dtype != "float8" else "int8", seed=7)
            xs = jax.device_put(physical_input(x, src, mesh, seed=7), NamedSharding(jm, in_spec))
            row.exact = check_output(c_ours(xs), x, dst, mesh, jm) is None  # shard by shard, padding ignored
    return row


def full_remat(text: str, log: str, src, dst, mesh) -> bool:
    """Whether XLA replicated the whole array on the way: its log says "Involuntary full
    rematerialization", or a collective's result holds as many elements as the whole array
    while neither end is replicated. Counted in elements, not bytes: the CPU backend runs
    bfloat16 collectives in float32, so a byte count would flag a half-array gather."""
    from executor.hlo import REMAT_LOG, _base_opcode, parse_module, shape_arrays

    if REMAT_LOG in log:
        return True
    whole = math.prod(src.shape)
    if max(math.prod(src.local_shape(mesh)), math.prod(dst.local_shape(mesh))) >= whole:
        return False
    for comp in parse_module(text).values():
        for ins in comp.instrs:
            if _base_opcode(ins.opcode) and any(math.prod(d) >= whole for _, d in shape_arrays(ins.shape)):
                return True
    return False


def _cpu_mesh(devs):
    def make(mesh, kind):
        import jax

        return jax.sharding.Mesh(np.asarray(devs[: mesh.size], dtype=object).reshape(mesh.sizes), mesh.names,
                                 axis_types=(kind,) * len(mesh.names))
    return make


def _tpu_mesh(target):
    def make(mesh, kind):
        import jax

        from executor.tpu import tpu_mesh

        m = tpu_mesh(target, mesh)
        return jax.sharding.Mesh(m.devices, m.axis_names, axis_types=(kind,) * len(m.axis_names))
    return make


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.reshard_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", action="append", choices=SUITES, help="suites (default: all three)")
    p.add_argument("--max-mib", type=float, default=16.0, help="scale arrays down to at most this (default 16)")
    p.add_argument("--target", default=None, help="AOT for a TPU slice, e.g. tpu-v5e:2x4 (compile only)")
    p.add_argument("--names", default=None, help="comma-separated case names to keep")
    args = p.parse_args(argv)
    try:
        rows = run_bench(args.suite or list(SUITES), args.max_mib, args.target,
                         set(args.names.split(",")) if args.names else None)
    except ExperimentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(rows, args.target))
    return 0


def run_bench(suites, max_mib, target=None, names=None, progress=True):
    from executor import ensure_devices
    from experiments.case import itemsize_of
    from experiments.suites import load_suite

    if target:
        from executor.tpu import _quiet_env

        _quiet_env()
        make = _tpu_mesh(target)
    else:
        make = _cpu_mesh(ensure_devices(8))
    rows = []
    for s in suites:
        for c in load_suite(s):
            if names and c.name not in names:
                continue
            r = bench_case(c, make, int(max_mib * 2**20), run=target is None, itemsize_of=itemsize_of, hardware=target)
            if progress:
                print(f"  {s}/{c.name}: {r.skipped or r.strategy}", file=sys.stderr, flush=True)
            rows.append(r)
    return rows


def _mib(n):
    return "-" if n is None else f"{n / 2**20:.2f}"


def table(rows, target=None) -> str:
    where = f"AOT for {target} (compile only)" if target else "8 CPU devices (compiled and run)"
    out = [f"reshard inside jit vs XLA's reshard, {where}; temp = compiled temp MiB per device",
           "| suite | case | shape | ours used | temp ours | temp XLA | XLA remat | bit-exact | ok |",
           "|---|---|---|---|---|---|---|---|---|"]
    done = [r for r in rows if not r.skipped]
    for r in rows:
        if r.skipped:
            out.append(f"| {r.suite} | {r.name} | {r.shape} | skipped: {r.skipped} | | | | | |")
            continue
        ex = "-" if r.exact is None else ("yes" if r.exact else "NO")
        out.append(f"| {r.suite} | {r.name} | {r.shape}{' (scaled)' if r.scaled else ''} | {r.strategy} | "
                   f"{_mib(r.temp_ours)} | {_mib(r.temp_xla)}{' (does not fit: OOM)' if r.xla_oom else ''} | {'yes' if r.xla_remat else 'no'} | {ex} | "
                   f"{'yes' if r.ok else 'NO'} |")
    remat = [r for r in done if r.xla_remat]
    out.append(f"cases: {len(done)} measured, {len(rows) - len(done)} skipped; temp <= XLA's: "
               f"{sum(r.temp_ours <= r.temp_xla for r in done)}/{len(done)}; strictly lower where XLA "
               f"rematerializes: {sum(r.temp_ours < r.temp_xla for r in remat)}/{len(remat)}; bit-exact: "
               + (f"{sum(bool(r.exact) for r in done)}/{len(done)}" if not target else "not run (AOT)"))
    return "\n".join(out)


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
