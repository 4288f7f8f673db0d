"""Seeded random redistributions (mesh, source type, target type) for tests and reports."""

from __future__ import annotations

import numpy as np

from synth.mesh import Mesh
from synth.types import ArrayType, Dim

#: Meshes of 8 devices, including a size-1 axis and a size-2 axis.
MESHES_8 = ("x=8", "x=2,y=4", "x=4,y=2", "x=2,y=2,z=2", "x=1,y=8", "x=2,y=1,z=4")


def random_type(rng: np.random.Generator, mesh: Mesh, shape: tuple[int, ...]) -> ArrayType:
    """Each mesh axis goes to a random dimension (or nowhere), in random order."""
    axes = [[] for _ in shape]
    names = list(mesh.names)
    rng.shuffle(names)
    for a in names:
        k = int(rng.integers(-1, len(shape)))
        if k >= 0:
            axes[k].append(a)
    return ArrayType(tuple(Dim(s, tuple(ax)) for s, ax in zip(shape, axes)))


def random_case(rng: np.random.Generator, meshes=MESHES_8, scale: int = 1):
    mesh = Mesh.parse(meshes[int(rng.integers(len(meshes)))])
    rank = int(rng.integers(1, 4))
    base = mesh.size
    shape = tuple(int(base * rng.choice([1, 2, 3, 4]) * scale) for _ in range(rank))
    while True:
        src, dst = random_type(rng, mesh, shape), random_type(rng, mesh, shape)
        if src != dst:
            return mesh, src, dst


def random_cases(n: int, seed: int = 0, meshes=MESHES_8, scale: int = 1):
    """``n`` seeded cases ``(mesh, src, dst)`` with ``src != dst``."""
    rng = np.random.default_rng(seed)
    return [random_case(rng, meshes, scale) for _ in range(n)]


def sized_cases(n: int, seed: int, min_bytes: int, max_bytes: int, num_devices: int = 8,
                itemsize: int = 4, meshes=MESHES_8):
    """``n`` seeded cases of rank 2-3 whose global size is log-uniform in
    ``[min_bytes, max_bytes]`` (dims stay multiples of the device count)."""
    import math

    rng = np.random.default_rng(seed)
    if num_devices != 8:
        meshes = (f"x={num_devices}",)
    out = []
    while len(out) < n:
        mesh = Mesh.parse(meshes[int(rng.integers(len(meshes)))])
        rank = int(rng.integers(2, 4))
        target = math.exp(rng.uniform(math.log(min_bytes), math.log(max_bytes))) / itemsize
        dims = [mesh.size * int(rng.choice([1, 2])) for _ in range(rank)]
        rest = int(np.prod(dims[1:]))
        dims[0] = mesh.size * max(1, round(target / rest / mesh.size))
        shape = tuple(dims)
        src, dst = random_type(rng, mesh, shape), random_type(rng, mesh, shape)
        if src != dst:
            out.append((mesh, src, dst))
    return out
