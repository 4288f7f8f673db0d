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
