"""The numpy reference executor (the interpreter).

It runs typed collectives on the per-device blocks of a concrete global array,
using only each collective's data rule, and checks the type's invariant before and
after every step: every device holds exactly its block of the global array under
the current type. It can return the history of (type, blocks).
"""

from __future__ import annotations

import numpy as np

from synth.errors import RedistributionError
from synth.mesh import Mesh
from synth.types import ArrayType


class InterpreterError(AssertionError):
    """An invariant broke: a bug in a collective's data or type rule, not a user error."""


def scatter(x: np.ndarray, t: ArrayType, mesh: Mesh) -> list[np.ndarray]:
    """The block each device holds of the global array ``x`` under type ``t``."""
    if tuple(x.shape) != t.shape:
        raise RedistributionError(f"scatter: array shape {x.shape} does not match type {t}")
    starts, stops = t.regions(mesh)
    return [
        x[tuple(slice(int(a), int(b)) for a, b in zip(starts[d], stops[d]))]
        for d in range(mesh.size)
    ]


def check_blocks(x: np.ndarray, blocks, t: ArrayType, mesh: Mesh, where: str = "") -> None:
    expect = scatter(x, t, mesh)
    for d, (got, want) in enumerate(zip(blocks, expect)):
        if got.shape != want.shape:
            raise InterpreterError(
                f"{where}: device {d} holds shape {got.shape}, type {t} says {want.shape}"
            )
        if not np.array_equal(got, want):
            raise InterpreterError(f"{where}: device {d} holds the wrong data for type {t}")


def interpret(steps, src: ArrayType, mesh: Mesh, x: np.ndarray | None = None,
              history: bool = False):
    """Run ``steps`` from ``src`` on ``x`` (default: ``arange`` of the global shape).

    Returns the final blocks, or ``(blocks, [(type, blocks), ...])`` with ``history``.
    Raises :class:`InterpreterError` if any step breaks the invariant.
    """
    src = ArrayType.of(src).check(mesh, "source")
    if x is None:
        x = np.arange(src.num_elems(), dtype=np.int64).reshape(src.shape)
    blocks = scatter(x, src, mesh)
    t = src
    hist = [(t, blocks)]
    for i, c in enumerate(steps):
        check_blocks(x, blocks, t, mesh, f"before step {i} {c}")
        t_next = c.apply(t, mesh)
        blocks = c.run(blocks, t, t_next, mesh)
        t = t_next
        check_blocks(x, blocks, t, mesh, f"after step {i} {c}")
        if history:
            hist.append((t, blocks))
    return (blocks, hist) if history else blocks
