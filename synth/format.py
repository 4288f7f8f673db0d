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
        out += format_search(plan)
    out += [f"note: {n}" for n in plan.notes]
    return "\n".join(out)


def format_search(plan) -> list[str]:
    """Text lines for what the ``auto`` search established (empty for other planners)."""
    s = plan.search
    if not s:
        return []

    def t(v):
        return f"{v * 1e3:.4g} ms" if v >= 1e-3 else f"{v * 1e6:.4g} us"

    work = (f"{s['moves']} of {s['budget_moves']} moves, {s['states']} states"
            if "budget_moves" in s else f"{s.get('states', 0)} states")
    out = [f"search          {s['status']} over the move set of synth.planners, under {s['cost_model']}; "
           f"{work} in {s['elapsed_s'] * 1e3:.1f} ms"]
    line = f"predicted time  {t(s['time_s'])}"
    if s.get("optimum_s") is not None and s["optimum_s"] < s["time_s"]:
        line += (f" (the fastest plan, {t(s['optimum_s'])}, is within the {s['tie_tolerance']:.0%} tie "
                 "tolerance; this one needs less memory or fewer collectives)")
    out.append(line)
    if s.get("lower_bound_s") is not None:
        out.append(f"lower bound     {t(s['lower_bound_s'])} for every plan (bytes each device must receive, "
                   f"under the same model); gap {t(s['gap_s'])}")
    if s["bound_met"]:
        out.append("memory          within the bound max(src, dst)")
    elif s.get("min_max_shard_bytes") is not None and s["min_max_shard_bytes"] == s["max_shard_bytes"]:
        out.append(f"memory          NO plan over the move set ({s.get('move_set', 'full')}) stays within the bound ({s['bound_bytes']} B); "
                   f"{s['max_shard_bytes']} B is the least largest shard such plans achieve (proven)")
    else:
        out.append(f"memory          bound of {s['bound_bytes']} B exceeded; not proven minimal")
    r = s.get("relabel")
    if r:
        perm = r["device_of_position"]
        shown = ",".join(map(str, perm[:32])) + (",..." if len(perm) > 32 else "")
        out.append(f"relabel         target {r['requested_dst']} reached as {r['reached_dst']}; "
                   f"device of mesh position p: [{shown}]")
    return out
