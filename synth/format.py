"""Human-readable forms of plans (formatting to KiB/MiB happens only here)."""

from __future__ import annotations


def fmt_bytes(n: int | float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def format_plan(plan) -> str:
    rows = plan.rows()
    head = ("step", "collective", "type after", "local shape", "shard", "received")
    body = [
        (str(r["step"]), r["collective"], r["type"],
         "x".join(map(str, r["local_shape"])) + (" (padded)" if r.get("padded") else ""),
         fmt_bytes(r["shard_bytes"]), fmt_bytes(r["recv_bytes"]))
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths))
    out = [
        f"plan ({plan.planner}) on mesh {plan.mesh}, itemsize {plan.itemsize}",
        f"  {plan.src}  ->  {plan.dst}",
        "",
        line,
        "-" * len(line),
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    m = plan.metrics()
    out += [
        "",
        f"max shard       {fmt_bytes(m['max_shard_bytes'])}  (bound max(src,dst) = "
        f"{fmt_bytes(m['bound_bytes'])}: {'holds' if m['bound_holds'] else 'EXCEEDED'})",
        f"peak live       {fmt_bytes(m['peak_live_bytes'])}",
        f"received        {fmt_bytes(m['recv_bytes_max_device'])} per device (max); lower bound "
        f"{fmt_bytes(m['recv_lower_bound_bytes'])}",
        f"collectives     {m['num_collectives']}",
    ]
    if getattr(plan, "search", None):
        from synth.auto import format_search

        out += format_search(plan)
    out += [f"note: {n}" for n in plan.notes]
    return "\n".join(out)
