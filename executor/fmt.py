"""Formatting at the edges: bytes and seconds to text."""

from __future__ import annotations


def fmt_bytes(b) -> str:
    if b is None:
        return "n/a"
    b = float(b)
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(b) >= k:
            return f"{b / k:.2f} {unit}"
    return f"{int(b)} B"


def fmt_time(s) -> str:
    if s is None:
        return "n/a"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)
