"""The one measurement protocol, used for our plans and for XLA's resharding alike.

Compile once; run ``warmup`` times; then ``repeats`` timed runs, each ended by
``block_until_ready``. Report the median and the 10th/90th percentiles. Memory comes
from ``compiled.memory_analysis()`` (per device: temp, output, temp + output) and,
where the backend has it, ``device.memory_stats()['peak_bytes_in_use']``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

DEFAULT_WARMUP = 3
DEFAULT_REPEATS = 10


@dataclass(frozen=True)
class Timing:
    time_s: float
    time_p10_s: float
    time_p90_s: float
    repeats: int
    samples_s: tuple[float, ...] = ()

    def to_dict(self, samples: bool = False) -> dict:
        d = asdict(self)
        if samples:
            d["samples_s"] = list(self.samples_s)
        else:
            d.pop("samples_s")
        return d


@dataclass(frozen=True)
class Memory:
    temp_bytes: int | None
    output_bytes: int | None
    argument_bytes: int | None
    peak_device_bytes: int | None = None

    @property
    def temp_plus_output_bytes(self) -> int | None:
        if self.temp_bytes is None or self.output_bytes is None:
            return None
        return self.temp_bytes + self.output_bytes

    def to_dict(self) -> dict:
        d = asdict(self)
        d["temp_plus_output_bytes"] = self.temp_plus_output_bytes
        return d


def time_call(fn, *args, warmup: int = DEFAULT_WARMUP, repeats: int = DEFAULT_REPEATS) -> Timing:
    """Median/p10/p90 wall time of ``fn(*args)`` with ``block_until_ready``."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    for _ in range(max(0, warmup)):
        fn(*args).block_until_ready()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args).block_until_ready()
        samples.append(time.perf_counter() - t0)
    a = np.asarray(samples)
    return Timing(float(np.median(a)), float(np.percentile(a, 10)), float(np.percentile(a, 90)),
                  repeats, tuple(float(s) for s in samples))


def memory_of(compiled, devices=()) -> Memory:
    """Per-device buffer sizes XLA planned, plus the device's own peak where reported."""
    temp = out = arg = None
    try:
        ma = compiled.memory_analysis()
        if ma is not None:
            temp = int(ma.temp_size_in_bytes)
            out = int(ma.output_size_in_bytes)
            arg = int(ma.argument_size_in_bytes)
    except Exception:  # noqa: BLE001 - some backends do not implement it
        pass
    peak = None
    for d in devices:
        try:
            stats = d.memory_stats()
        except Exception:  # noqa: BLE001
            stats = None
        if stats and "peak_bytes_in_use" in stats:
            peak = max(peak or 0, int(stats["peak_bytes_in_use"]))
    return Memory(temp, out, arg, peak)


@dataclass
class Prepared:
    """A compiled program ready for interleaved timing, and its row of results."""

    compiled: object
    make_input: object
    row: dict = field(default_factory=dict)


def interleaved_timing(progs: list[Prepared], rounds: int, per_round: int, seed: int = 0,
                       progress=None) -> None:
    """Time every program in ``rounds`` rounds, in a fresh random order each round: one
    untimed warm-up call, then ``per_round`` timed calls with ``block_until_ready``.

    Load from other processes drifts over minutes; interleaving spreads it evenly over
    all programs (fit, training and held-out alike) instead of biasing whichever ran
    during a busy spell. Sets ``time_s`` (median of all samples), ``time_p10_s``,
    ``time_p90_s``, ``repeats``, and ``time_first_half_s`` / ``time_second_half_s``
    (medians of the even and odd rounds: two independent measurements of the same
    program, whose disagreement is the noise floor)."""
    rng = np.random.default_rng(seed)
    samples = [[] for _ in progs]
    for r in range(rounds):
        for i in rng.permutation(len(progs)):
            p = progs[i]
            x = p.make_input()
            p.compiled(x).block_until_ready()
            for _ in range(per_round):
                t0 = time.perf_counter()
                p.compiled(x).block_until_ready()
                samples[i].append((r, time.perf_counter() - t0))
            del x
        if progress:
            progress(r + 1, rounds, f"round {r + 1}: {len(progs)} programs")
    for p, sm in zip(progs, samples):
        a = np.array([t for _, t in sm])
        even = np.array([t for r, t in sm if r % 2 == 0])
        odd = np.array([t for r, t in sm if r % 2 == 1])
        p.row.update(time_s=float(np.median(a)), time_p10_s=float(np.percentile(a, 10)),
                     time_p90_s=float(np.percentile(a, 90)), repeats=len(a),
                     time_first_half_s=float(np.median(even)) if len(even) else None,
                     time_second_half_s=float(np.median(odd)) if len(odd) else None)
