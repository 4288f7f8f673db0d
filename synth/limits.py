"""Resource limits: the largest inputs the tools accept, checked before any work.

A hostile or mistyped input (a 10**9-device mesh, ``--cases 1e30``, a 5000-digit
size) must end in one clear line, never in a run that eats the machine's memory or
never ends. Every entry point (the CLIs, :func:`synth.synthesize`, ``Mesh``,
``ArrayType``, the sweep configs, schedule and profile files) checks its input
against these limits. The defaults serve machines of 65,536 devices:

=================  ==============  ==============================================
limit              default         what it bounds
=================  ==============  ==============================================
``devices``        65,536          devices of a mesh, a machine profile, a schedule
``cpu_devices``    8,192           virtual CPU devices JAX creates (``--devices``)
``mesh_axes``      16              axes of a mesh
``rank``           32              dimensions of an array type
``elements``       2**53           elements of one global array (exact in float64)
``itemsize``       64              bytes per element
``cases``          100,000         cases of a benchmark, report or random suite
``repeats``        10,000          timed or warm-up runs of one measurement
``digits``         30              digits of any integer the user types
``file_bytes``     33,554,432      bytes of one input file read whole (32 MiB):
                                   schedules, profiles, calibration files
``yaml_bytes``     4,194,304       bytes of one YAML file (configs, profiles,
                                   ``validate --data``; 4 MiB)
``rows_bytes``     1,073,741,824   bytes of a ``rows.jsonl`` (read line by line,
                                   1 MiB a line; 1 GiB)
``schedule_ops``   100,000         ops of one schedule file
``schedule_ids``   4,000,000       device ids over all groups and pairs of a
                                   schedule file
``extends_depth``  8               ``extends`` chain of a profile file
``options``        1,000           entries of an option list the app builds
                                   from user input (e.g. mesh shapes)
``connect_s``      10              seconds one connection attempt may take
                                   (Ray)
``compile_wait_s`` 1,800           seconds a big CPU compile and run waits for
                                   the host's compile slot (another big one)
=================  ==============  ==============================================

The join deadline of ``jax.distributed`` (10 s) is ``--join-timeout`` /
``REDIST_JOIN_TIMEOUT_S`` (1 to 600 s; :mod:`executor.distributed`).

Each can be raised (or lowered) with an environment variable
``REDIST_LIMIT_<NAME>`` (e.g. ``REDIST_LIMIT_DEVICES=131072``). Work whose memory
grows with the input is estimated first and refused when the estimate exceeds the
memory budget: the memory the operating system reports available (``MemAvailable``),
or ``REDIST_MEMORY_BUDGET_BYTES`` when set.

All failures raise :class:`LimitError` (a ``RedistributionError``), so
the CLIs print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import math
import os
import re

from synth.errors import RedistributionError


class LimitError(RedistributionError):
    """An input beyond a documented resource limit."""


class MemoryLimitError(LimitError):
    """Work estimated not to fit in the memory budget."""

    kind = "memory"


_DEFAULTS = {
    "devices": 65_536,
    "cpu_devices": 8_192,
    "mesh_axes": 16,
    "rank": 32,
    "elements": 2**53,
    "itemsize": 64,
    "cases": 100_000,
    "repeats": 10_000,
    "digits": 30,
    "file_bytes": 32 << 20,
    "yaml_bytes": 4 << 20,
    "rows_bytes": 1 << 30,
    "schedule_ops": 100_000,
    "schedule_ids": 4_000_000,
    "extends_depth": 8,
    "options": 1_000,
    "connect_s": 10,
    "compile_wait_s": 1800,
}

#: One line per limit, for error messages and ``--help`` texts.
DESCRIPTIONS = {
    "devices": "devices in a mesh, machine or schedule",
    "cpu_devices": "virtual CPU devices JAX creates",
    "mesh_axes": "axes of a mesh",
    "rank": "dimensions of an array type",
    "elements": "elements of one global array",
    "itemsize": "bytes per element",
    "cases": "cases of one benchmark, report or suite",
    "repeats": "timed or warm-up runs",
    "digits": "digits of an integer",
    "file_bytes": "bytes of one input file",
    "yaml_bytes": "bytes of one YAML file",
    "rows_bytes": "bytes of one rows.jsonl",
    "schedule_ops": "ops of one schedule file",
    "schedule_ids": "device ids over a schedule file's groups and pairs",
    "extends_depth": "profile files in one 'extends' chain",
    "options": "entries of one option list",
    "connect_s": "seconds per connection attempt",
    "compile_wait_s": "seconds a big compile waits for another to finish",
}


def limit(name: str) -> int:
    """The current value of limit ``name`` (the environment overrides the default)."""
    default = _DEFAULTS[name]
    env = os.environ.get(f"REDIST_LIMIT_{name.upper()}")
    if env is None:
        return default
    text = env.strip().replace("_", "")
    if not text.isdigit() or len(text) > 15:  # at most 10**15: far above any machine
        raise LimitError(f"REDIST_LIMIT_{name.upper()}={env[:40]!r} is not an integer of at most 15 digits; "
                         f"unset it or give a positive integer (default {default})")
    v = int(text)
    if v < 1:
        raise LimitError(f"REDIST_LIMIT_{name.upper()}={v} must be >= 1 (default {default})")
    return v


def limits() -> dict[str, int]:
    """Every limit's current value."""
    return {k: limit(k) for k in _DEFAULTS}


def _fix(name: str) -> str:
    return f"the limit is {limit(name):,} {DESCRIPTIONS[name]} (set REDIST_LIMIT_{name.upper()} to change it)"


def check(name: str, value: int, what: str) -> int:
    """Refuse ``value`` above limit ``name``; ``what`` names the input."""
    if value > limit(name):
        shown = f"{value:,}" if value < 10**30 else f"about 10^{len(str(value)) - 1}"
        raise LimitError(f"{what} is {shown}; {_fix(name)}")
    return value


def check_devices(n: int, what: str = "the mesh") -> int:
    return check("devices", n, f"{what}: device count")


def check_cpu_devices(n: int, what: str = "--devices") -> int:
    return check("cpu_devices", n, what)


def check_mesh(sizes, what: str = "Mesh") -> None:
    """Axis count and device count of a mesh with axis ``sizes``."""
    sizes = list(sizes)
    check("mesh_axes", len(sizes), f"{what}: number of axes")
    for s in sizes:
        check("devices", int(s), f"{what}: axis size")
    check_devices(math.prod(int(s) for s in sizes), what)


def check_shape(shape, what: str = "ArrayType") -> None:
    """Rank and element count of a global array shape."""
    shape = list(shape)
    check("rank", len(shape), f"{what}: rank")
    most = limit("elements")  # read once (every type built checks this); check() words a refusal
    for s in shape:
        if int(s) > most:
            check("elements", int(s), f"{what}: dimension size")
    total = math.prod(int(s) for s in shape)
    if total > most:
        check("elements", total, f"{what}: element count")


def check_itemsize(n, what: str = "itemsize") -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LimitError(f"{what} must be a positive integer number of bytes, got {n!r}")
    return check("itemsize", n, what)


def check_count(n, what: str, name: str = "cases", minimum: int = 1) -> int:
    """A count (cases, repeats): an integer in ``[minimum, limit]``."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise LimitError(f"{what} must be an integer, got {n!r}")
    if n < minimum:
        raise LimitError(f"{what} must be >= {minimum}, got {n}")
    return check(name, n, what)


def check_digits(text: str, what: str) -> str:
    """Refuse user-typed integer text with more than ``digits`` digits (before any
    ``int()``, which Python itself refuses at 4300 digits with a ValueError)."""
    s = str(text).strip()
    digits = s.lstrip("+-").replace("_", "")
    if len(digits) > limit("digits") and digits.isdigit():
        raise LimitError(f"{what}: {s[:12]}... has {len(digits)} digits; {_fix('digits')}")
    return s


def parse_int(text: str, what: str) -> int:
    """``int(text)`` for user-typed text, refusing more than ``digits`` digits before
    converting (Python refuses 4300+ digits with a ValueError of its own)."""
    s = check_digits(text, what)
    try:
        return int(s)
    except ValueError:
        raise LimitError(f"{what}: {s[:40]!r} is not an integer") from None


# -- argparse types --------------------------------------------------------------------------
def int_arg(minimum: int | None = None, name: str | None = None, maximum: int | None = None):
    """An argparse ``type=`` for integers in ``[minimum, limit(name) or maximum]``: every
    out-of-range value becomes one usage line (status 2 through UserErrorParser)."""

    def conv(text: str) -> int:
        try:
            v = parse_int(text, "value")
        except LimitError as e:
            raise argparse.ArgumentTypeError(str(e).replace("value: ", "")) from None
        if minimum is not None and v < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {v}")
        hi = limit(name) if name else maximum
        if hi is not None and v > hi:
            extra = f" ({_fix(name)})" if name else ""
            raise argparse.ArgumentTypeError(f"{v} is above the maximum {hi:,}{extra}")
        return v

    conv.__name__ = "integer"
    return conv


def float_arg(minimum: float | None = None, maximum: float | None = None, positive: bool = False):
    """An argparse ``type=`` for finite floats (``inf``/``nan`` refused)."""

    def conv(text: str) -> float:
        try:
            v = float(str(text)[:64])
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number")
        if positive and v <= 0:
            raise argparse.ArgumentTypeError(f"{v} must be > 0")
        if minimum is not None and v < minimum:
            raise argparse.ArgumentTypeError(f"{v} is below the minimum {minimum}")
        if maximum is not None and v > maximum:
            raise argparse.ArgumentTypeError(f"{v} is above the maximum {maximum}")
        return v

    conv.__name__ = "number"
    return conv


# -- memory ----------------------------------------------------------------------------------
def available_memory_bytes() -> int:
    """The memory budget: ``REDIST_MEMORY_BUDGET_BYTES`` if set, else what the OS reports
    available (``MemAvailable`` on Linux; physical pages elsewhere)."""
    env = os.environ.get("REDIST_MEMORY_BUDGET_BYTES")
    if env:
        try:
            v = float(env.strip()[:40])
        except ValueError:
            v = float("nan")
        if not math.isfinite(v) or v < 1:
            raise LimitError(f"REDIST_MEMORY_BUDGET_BYTES={env[:40]!r} must be a finite, positive number of bytes "
                             "(e.g. 8e9); unset it to use the memory the system reports available")
        return int(min(v, 2.0**62))
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return 1 << 62


def _fmt_bytes(n: float) -> str:
    for unit, k in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{int(n)} B"


def check_memory(nbytes: float, what: str) -> float:
    """Refuse work estimated to need ``nbytes`` of host memory when it cannot fit."""
    avail = available_memory_bytes()
    if nbytes > avail:
        raise MemoryLimitError(f"{what} needs about {_fmt_bytes(nbytes)} of memory but {_fmt_bytes(avail)} is "
                         f"available; choose a smaller input (or set REDIST_MEMORY_BUDGET_BYTES)")
    return nbytes


def check_array_memory(num_elems: int, itemsize: int, copies: float, what: str) -> float:
    """``copies`` live copies of a ``num_elems x itemsize`` array must fit."""
    return check_memory(float(num_elems) * itemsize * copies, what)


# -- network addresses ------------------------------------------------------------------------
_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def parse_address(text, what: str = "--address", default_port: int | None = None) -> tuple[str, int]:
    """``HOST:PORT`` (also ``scheme://HOST:PORT`` and ``[IPv6]:PORT``) -> ``(host, port)``,
    checked before anything connects: a host name of at most 253 characters in labels of
    1-63 letters, digits or hyphens (what DNS allows; a 300-character name would make the
    resolver raise ``UnicodeError``), or an IP address; a port in 1..65535."""
    import ipaddress

    s = str(text).strip() if text is not None else ""
    if not s or len(s) > 300 or any(c.isspace() or not c.isprintable() for c in s):
        raise LimitError(f"{what} {s[:60]!r}: write HOST:PORT (a host name or IP address, and a port)")
    rest = s.split("://", 1)[-1].rstrip("/")
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port_s = tail[1:] if tail.startswith(":") else ""
    else:
        host, sep, port_s = rest.rpartition(":")
        if not sep:
            host, port_s = rest, ""
    if not port_s:
        if default_port is None:
            raise LimitError(f"{what} {s[:60]!r}: no port; write HOST:PORT")
        port = default_port
    elif not port_s.isdigit() or not 0 < int(port_s[:6]) < 65536:
        raise LimitError(f"{what} {s[:60]!r}: port {port_s[:12]!r} must be an integer in 1..65535")
    else:
        port = int(port_s)
    try:
        ipaddress.ip_address(host)
        return host, port
    except ValueError:
        pass
    if len(host) > 253 or not host or not all(_LABEL.match(lab) for lab in host.rstrip(".").split(".")):
        raise LimitError(f"{what} {s[:60]!r}: {host[:40]!r}{'...' if len(host) > 40 else ''} is not a valid "
                         "host name (letters, digits and hyphens, labels of 1-63 characters, 253 in all) "
                         "or IP address")
    return host, port
