"""Human-readable text for results (units formatted here, at the edge)."""

from __future__ import annotations


def fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0 s"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(x) >= f:
            return f"{x / f:.3f} {unit}"
    return f"{x / 1e-9:.3f} ns"


def fmt_b(x: float) -> str:
    x = float(x)
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(x) >= f:
            return f"{x / f:.2f} {unit}"
    return f"{int(x)} B"


def format_result(r) -> str:
    lines = [
        f"machine {r.machine.spec} ({r.num_devices} devices), placement {r.placement.text}",
        f"schedule: {getattr(r.schedule, 'name', '')}",
        f"simulated time     {fmt_s(r.time_s)}",
        f"analytic estimate  {fmt_s(r.analytic_s)}",
        f"lower bound        {fmt_s(r.lower_bound_s)} ({r.lower_bound_kind})"
        + (f"   ratio {r.ratio_to_bound:.2f}x" if r.ratio_to_bound else ""),
        f"peak memory        {fmt_b(r.peak_bytes_max_device)} per device (max)",
        f"busiest link       {fmt_b(r.link_bytes_max)}",
        "",
        f"{'#':>3} {'kind':<14} {'algorithm':<11} {'start':>12} {'duration':>12} {'analytic':>12}  label",
    ]
    for o in r.ops:
        lines.append(f"{o['index']:>3} {o['kind']:<14} {o['algorithm'] or '-':<11} {fmt_s(o['start_s']):>12} "
                     f"{fmt_s(o['duration_s']):>12} {fmt_s(o['analytic_s']):>12}  {o['label']}")
    for w in r.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)
