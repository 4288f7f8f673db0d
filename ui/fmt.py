"""Formatting at the edge: code works in bytes and seconds, the UI shows MiB and us."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def fmt_bytes(n) -> str:
    """``8388608`` -> ``'8.00 MiB'``; exact for small values (``'12 B'``)."""
    if n is None:
        return "-"
    v = float(n)
    for unit in _UNITS:
        if abs(v) < 1024 or unit == _UNITS[-1]:
            return f"{int(v)} {unit}" if unit == "B" else f"{v:.2f} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


def fmt_seconds(s) -> str:
    """Seconds to the most readable of ns/us/ms/s."""
    if s is None:
        return "-"
    s = float(s)
    a = abs(s)
    if a == 0:
        return "0 s"
    if a < 1e-6:
        return f"{s * 1e9:.1f} ns"
    if a < 1e-3:
        return f"{s * 1e6:.1f} us"
    if a < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def fmt_ratio(x) -> str:
    return "-" if x is None else f"{float(x):.2f}x"
