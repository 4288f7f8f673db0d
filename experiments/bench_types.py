"""Ours vs XLA on the suites' pending-sum, uneven and sub-axis cases (8 CPU devices).

    python -m experiments.bench_types [--max-bytes 268435456] [--json]

For every such case of the ``transformer`` and ``pending-sums`` suites that fits on 8
devices: our ``normal`` plan (its collectives, largest shard against the memory bound
``max(src, dst)``, received bytes against the receive lower bound), then both programs
run on the CPU devices and checked bit for bit, with XLA's compiled temp bytes against
ours (``compiled.memory_analysis()``) and whether XLA materialized the whole array. A
case whose physical input (stacked partial arrays included) exceeds ``--max-bytes`` is
scaled down: its largest even dim is halved (keeping what the splits need) until it
fits; the shape used is printed. A benchmark, not a test: it prints figures.
"""

from __future__ import annotations

import json
import math

from synth.errors import RedistributionError


def _new_type_cases():
    from experiments.suites import load_suite

    out = []
    for suite in ("transformer", "pending-sums"):
        for c in load_suite(suite):
            mesh, src, dst = c.parsed()
            new = (src.unreduced or dst.unreduced or not src.is_even(mesh) or not dst.is_even(mesh)
                   or any(":" in a for a in src.all_axes + dst.all_axes))
            if new and c.num_devices <= 8:
                out.append(c)
    return out


def _fit(mesh, src, dst, itemsize, max_bytes):
    """Shrink the largest even dim (by 2, keeping the splits' needs) until it fits."""
    from synth.types import ArrayType, Dim, refine

    work, (sw, dw) = refine(mesh, [src, dst])
    nu = max(math.prod(work.shape[a] for a in sw.unreduced), 1)
    shape = list(src.shape)
    while math.prod(shape) * nu * itemsize > max_bytes:
        need = [math.lcm(sw.split(work, i), dw.split(work, i)) for i in range(len(shape))]
        cand = [i for i, n in enumerate(shape) if n % 2 == 0 and (n // 2) % need[i] == 0
                and src.dims[i].size % need[i] == 0]
        if not cand:
            break
        i = max(cand, key=lambda i: shape[i])
        shape[i] //= 2

    def mk(t):
        return ArrayType(tuple(Dim(n, d.axes) for n, d in zip(shape, t.dims)), t.unreduced)

    return mk(src), mk(dst)


def run(max_bytes: int) -> list[dict]:
    from executor._jaxsetup import ensure_devices

    ensure_devices(8)
    from executor.run import run_plan, xla_reshard
    from synth.planners import synthesize

    rows = []
    for c in _new_type_cases():
        mesh, src, dst = c.parsed()
        full = synthesize(mesh, src, dst, planner="normal", itemsize=c.itemsize)
        s2, d2 = _fit(mesh, src, dst, c.itemsize, max_bytes)
        plan = synthesize(mesh, s2, d2, planner="normal", itemsize=c.itemsize)
        ours = run_plan(plan, dtype=c.dtype, strict=False)
        row = {
            "case": f"{c.suite}:{c.name}", "mesh": c.mesh, "src": c.src, "dst": c.dst,
            "dtype": c.dtype, "steps": [str(s) for s in full.steps],
            "max_shard_bytes": full.max_shard_bytes, "bound_bytes": full.bound_bytes,
            "recv_bytes": full.recv_bytes_max_device, "recv_lower_bound_bytes": full.recv_lower_bound_bytes,
            "cpu_shape": list(s2.shape), "ours_correct": ours.correct,
            "ours_temp_bytes": ours.memory.temp_bytes, "ours_collectives": ours.collectives,
        }
        for part in ("shardy", "gspmd"):
            x = xla_reshard(mesh, s2, d2, part, dtype=c.dtype, measure=False, strict=False)
            row[f"xla_{part}_correct"] = x.correct
            row[f"xla_{part}_temp_bytes"] = x.memory.temp_bytes
            row[f"xla_{part}_full_remat"] = x.full_remat
            row[f"xla_{part}_collectives"] = x.collectives
        rows.append(row)
    return rows


def main(argv=None) -> int:
    from synth.cli import UserErrorParser

    p = UserErrorParser(prog="python -m experiments.bench_types", description=__doc__.split("\n\n")[0])
    p.add_argument("--max-bytes", type=int, default=256 << 20,
                   help="largest physical input to place on the CPU devices (default 256 MiB)")
    p.add_argument("--json", action="store_true")
    try:
        args = p.parse_args(argv)
        if args.max_bytes < 1:
            raise RedistributionError(f"--max-bytes {args.max_bytes}: must be a positive number of bytes; pass e.g. --max-bytes 268435456 (256 MiB)")
        rows = run(args.max_bytes)
    except RedistributionError as e:
        import sys

        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows))
        return 0
    from executor.fmt import fmt_bytes

    for r in rows:
        ok = all(r[k] for k in ("ours_correct", "xla_shardy_correct", "xla_gspmd_correct"))
        print(f"{r['case']}  {r['mesh']}  {r['src']} -> {r['dst']} ({r['dtype']})")
        print(f"  plan: {', '.join(r['steps'])}; max shard {fmt_bytes(r['max_shard_bytes'])} "
              f"(bound {fmt_bytes(r['bound_bytes'])}); received {fmt_bytes(r['recv_bytes'])} "
              f"(lower bound {fmt_bytes(r['recv_lower_bound_bytes'])})")
        print(f"  CPU shape {r['cpu_shape']}: temp ours {fmt_bytes(r['ours_temp_bytes'])} "
              f"{r['ours_collectives']}, XLA shardy {fmt_bytes(r['xla_shardy_temp_bytes'])} "
              f"{r['xla_shardy_collectives']}{' (whole array)' if r['xla_shardy_full_remat'] else ''}, "
              f"gspmd {fmt_bytes(r['xla_gspmd_temp_bytes'])}"
              f"{' (whole array)' if r['xla_gspmd_full_remat'] else ''}; "
              f"bit-exact: {'all' if ok else 'NO'}")
    return 0


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
