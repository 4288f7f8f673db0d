"""Formatting at the edge: code works in bytes and seconds; the UI picks the unit that
fits the value (``12 B``, ``8 MiB``, ``1.86 TiB``; ``850 ns``, ``12.4 ms``, ``1.8 s``).
Bytes use binary units (KiB = 1024 B); bandwidths use decimal GB/s as nccl-tests does."""

from __future__ import annotations

import math

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def _sig(v: float, digits: int = 3) -> str:
    """``v`` with ``digits`` significant digits, no trailing zeros (``8``, ``12.5``)."""
    if v == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(v)))))
    s = f"{v:.{decimals}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def byte_unit(n) -> tuple[float, str]:
    """``(divisor, unit)`` that shows ``n`` bytes as a number between 1 and 1024."""
    v = abs(float(n or 0))
    for i, unit in enumerate(_UNITS):
        if v < 1024 ** (i + 1) or unit == _UNITS[-1]:
            return float(1024 ** i), unit
    raise AssertionError("unreachable")


def fmt_bytes(n) -> str:
    """``8388608`` -> ``'8 MiB'``; ``12`` -> ``'12 B'``; ``1.5e12`` -> ``'1.36 TiB'``."""
    if n is None:
        return "-"
    div, unit = byte_unit(n)
    if unit == "B":
        return f"{_sig(float(n), 4)} B"
    return f"{_sig(float(n) / div)} {unit}"


def time_unit(s) -> tuple[float, str]:
    """``(divisor, unit)`` that shows ``s`` seconds as a number of at least 1."""
    a = abs(float(s or 0))
    for unit, div in _TIME_UNITS:
        if a >= div:
            return div, unit
    return 1e-9, "ns"


def fmt_seconds(s) -> str:
    """Seconds in the most readable of ns/us/ms/s, three significant digits."""
    if s is None:
        return "-"
    s = float(s)
    if s == 0:
        return "0 s"
    div, unit = time_unit(s)
    return f"{_sig(s / div)} {unit}"


def fmt_bandwidth(bps) -> str:
    """Bytes per second in decimal GB/s (``'45.2 GB/s'``), MB/s below 1 GB/s."""
    if bps is None:
        return "-"
    v = float(bps)
    if math.isinf(v):
        return "unbounded"
    if abs(v) >= 1e9:
        return f"{_sig(v / 1e9)} GB/s"
    if abs(v) >= 1e6:
        return f"{_sig(v / 1e6)} MB/s"
    return f"{_sig(v / 1e3)} kB/s"


def fmt_ratio(x) -> str:
    return "-" if x is None else f"{float(x):.2f}x"


def table_cells(df):
    """``df`` for ``st.table``, which renders each cell as Markdown and every float with four
    decimals (``22.9000``): a cell that is exactly ``-`` (our "no value") would become an
    empty bullet list, so it reads ``–``; a float is written with at most 4 significant
    digits (``22.9``, ``0.1235``); a missing value reads ``–``."""
    def cell(v):
        if isinstance(v, str):
            return "\u2013" if v.strip() == "-" else v
        if isinstance(v, float):
            return "\u2013" if v != v else f"{v:.4g}"
        return v

    return df.map(cell)
