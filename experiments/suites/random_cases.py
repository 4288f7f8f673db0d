"""``random``: seeded random redistributions.

``cases(count=20, seed=0, max_devices=64, min_devices=8)`` draws a mesh of 1 to 3
axes (sizes 2, 4 or 8), an array of rank 2 to 4 whose every dimension is divisible
by the mesh size (the paper's precondition, so the normal form applies), and two
different shardings. The same ``(count, seed, ...)`` always gives the same cases.
"""

from __future__ import annotations

import math

import numpy as np

from experiments.case import Case, ExperimentError

SUITE = "random"


def _mesh(rng, min_devices, max_devices):
    for _ in range(1000):
        naxes = int(rng.integers(1, 4))
        sizes = [int(rng.choice([2, 4, 8])) for _ in range(naxes)]
        if min_devices <= math.prod(sizes) <= max_devices:
            return list(zip("xyz"[:naxes], sizes))
    raise ExperimentError(
        f"random suite: no mesh of sizes 2/4/8 with {min_devices}..{max_devices} devices"
    )


def _sharding(rng, names, rank):
    dims = [[] for _ in range(rank)]
    for a in rng.permutation(names):
        k = int(rng.integers(-1, rank))  # -1: the axis replicates
        if k >= 0:
            dims[k].append(str(a))
    return dims


def _text(shape, dims):
    return "[" + ", ".join(f"{s}{{{','.join(d)}}}" if d else str(s) for s, d in zip(shape, dims)) + "]"


def cases(count: int = 20, seed: int = 0, max_devices: int = 64, min_devices: int = 8) -> list[Case]:
    if not isinstance(count, int) or count < 0:
        raise ExperimentError(f"random suite: count must be a non-negative integer, got {count!r}")
    if min_devices > max_devices:
        raise ExperimentError(
            f"random suite: min_devices {min_devices} is above max_devices {max_devices}"
        )
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        axes = _mesh(rng, min_devices, max_devices)
        names = [n for n, _ in axes]
        p = math.prod(s for _, s in axes)
        rank = int(rng.integers(2, 5))
        dtype = str(rng.choice(["float32", "bfloat16"]))
        # Each dim is a multiple of the mesh size; total size 2^20..2^27 elements.
        budget = int(rng.integers(20, 28))
        extra = rng.multinomial(max(budget - rank * int(math.log2(p)), rank), [1 / rank] * rank)
        shape = [p * 2 ** int(e) for e in extra]
        src, dst = _sharding(rng, names, rank), _sharding(rng, names, rank)
        if src == dst:
            continue
        mesh = ",".join(f"{n}={s}" for n, s in axes)
        out.append(Case(
            name=f"random-{seed}-{len(out):03d}", suite=SUITE, mesh=mesh,
            src=_text(shape, src), dst=_text(shape, dst), dtype=dtype,
            layout="random", description=f"seed {seed}, case {len(out)}",
        ))
    return out
