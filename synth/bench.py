"""Synthesis-time benchmark over seeded random cases (rank <= 4, <= 4 mesh axes)."""

from __future__ import annotations

import random
import time

import numpy as np

from synth.mesh import Mesh
from synth.types import ArrayType, Dim

AXIS_SIZES = (1, 2, 3, 4, 5, 6, 8)


def random_case(rng: random.Random, max_axes: int = 4, max_rank: int = 4, precondition: bool = True):
    """A random (mesh, src, dst). With ``precondition`` every dim is a multiple of
    the product of all mesh axis sizes (the normal form's guarantee holds)."""
    names = ["x", "y", "z", "w", "v"][: rng.randint(1, max_axes)]
    mesh = Mesh(tuple((n, rng.choice(AXIS_SIZES)) for n in names))
    rank = rng.randint(1, max_rank)
    total = mesh.size
    if precondition:
        shape = [total * rng.choice((1, 2)) for _ in range(rank)]
    else:
        shape = [rng.choice((1, 2, 3, 4, 6, 8, 12, 16)) for _ in range(rank)]

    def rand_type():
        while True:
            dims = [[] for _ in range(rank)]
            for n in names:
                k = rng.randint(-1, rank - 1)
                if k >= 0:
                    dims[k].append(n)
            for d in dims:
                rng.shuffle(d)
            t = ArrayType(tuple(Dim(s, tuple(a)) for s, a in zip(shape, dims)))
            if t.is_valid(mesh):
                return t

    return mesh, rand_type(), rand_type()


def run_bench(cases: int = 2000, seed: int = 0, planner: str = "normal") -> dict:
    from synth.planners import synthesize

    rng = random.Random(seed)
    inputs = [random_case(rng) for _ in range(cases)]
    synthesize(*inputs[0], planner=planner)  # warm imports
    times = []
    for mesh, src, dst in inputs:
        t0 = time.perf_counter()
        synthesize(mesh, src, dst, planner=planner)
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    return {
        "cases": cases, "seed": seed, "planner": planner,
        "median_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)),
        "max_ms": float(ms.max()), "mean_ms": float(ms.mean()),
    }
