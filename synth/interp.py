"""The numpy reference executor (the interpreter).

It runs typed collectives on the per-device blocks of a concrete global array,
using only each collective's data rule, and checks the type's invariant before and
after every step: every device holds its (padded) block of the global array under
the current type, and where sums are pending, the blocks of each group of devices
that differ only on the unreduced axes sum to the true block. Padding holds garbage
(it never reaches the result). It can return the history of (type, blocks).
"""

from __future__ import annotations

import numpy as np

from synth.errors import RedistributionError
from synth.mesh import Mesh
from synth.types import ArrayType

#: What the interpreter writes into padding, so a data rule that lets padding reach
#: the result is caught.
PAD_GARBAGE = -987654321


class InterpreterError(AssertionError):
    """An invariant broke: a bug in a collective's data or type rule, not a user error."""


def _valid(t: ArrayType, mesh: Mesh, d: int, starts, stops) -> tuple[slice, ...]:
    return tuple(slice(0, int(b - a)) for a, b in zip(starts[d], stops[d]))


def unreduced_groups(t: ArrayType, mesh: Mesh) -> list[list[int]]:
    """Groups of devices that differ only on ``t``'s unreduced axes (singletons when
    nothing is pending)."""
    if not t.unreduced:
        return [[d] for d in range(mesh.size)]
    from synth.collectives import groups_of

    return [list(g) for g in groups_of(mesh, t.unreduced)]


def scatter(x: np.ndarray, t: ArrayType, mesh: Mesh, rng: np.random.Generator | None = None,
            pad=0) -> list[np.ndarray]:
    """The block each device holds of the global array ``x`` under type ``t``, padded
    to the local shape with ``pad``. Where sums are pending, each group's blocks sum to
    the true block: random integers from ``rng`` (the last member holds the rest), or,
    without ``rng``, the true block on the group's first device and zeros elsewhere."""
    if tuple(x.shape) != t.shape:
        raise RedistributionError(f"scatter: array shape {x.shape} does not match type {t}")
    starts, stops = t.regions(mesh)
    local = t.local_shape(mesh)
    blocks = []
    for d in range(mesh.size):
        b = np.full(local, pad, dtype=x.dtype)
        b[_valid(t, mesh, d, starts, stops)] = x[tuple(slice(int(a), int(c))
                                                       for a, c in zip(starts[d], stops[d]))]
        blocks.append(b)
    if t.unreduced:
        for g in unreduced_groups(t, mesh):
            whole = blocks[g[0]]
            rest = whole.copy()
            for d in g[:-1]:
                if rng is None:
                    part = whole if d == g[0] else np.zeros_like(whole)
                else:
                    part = rng.integers(-1000, 1000, size=whole.shape).astype(x.dtype)
                blocks[d] = part
                rest = rest - part
            blocks[g[-1]] = rest if len(g) > 1 else whole
    return blocks


def check_blocks(x: np.ndarray, blocks, t: ArrayType, mesh: Mesh, where: str = "") -> None:
    starts, stops = t.regions(mesh)
    local = t.local_shape(mesh)
    for g in unreduced_groups(t, mesh):
        for d in g:
            if tuple(blocks[d].shape) != tuple(local):
                raise InterpreterError(
                    f"{where}: device {d} holds shape {blocks[d].shape}, type {t} says {local}")
        d0 = g[0]
        valid = _valid(t, mesh, d0, starts, stops)
        got = sum(blocks[d][valid] for d in g)
        want = x[tuple(slice(int(a), int(c)) for a, c in zip(starts[d0], stops[d0]))]
        if not np.array_equal(got, want):
            who = f"device {d0}" if len(g) == 1 else f"devices {g} (summed)"
            raise InterpreterError(f"{where}: {who} hold(s) the wrong data for type {t}")


def interpret(steps, src: ArrayType, mesh: Mesh, x: np.ndarray | None = None,
              history: bool = False, seed: int | None = 0):
    """Run ``steps`` from ``src`` on ``x`` (default: ``arange`` of the global shape).

    Pending sums start as random integer partial blocks (``seed``; ``None``: the true
    block on one device of each group, zeros elsewhere); padding starts as garbage.
    Returns the final blocks, or ``(blocks, [(type, blocks), ...])`` with ``history``.
    Raises :class:`InterpreterError` if any step breaks the invariant.
    """
    src = ArrayType.of(src)
    src.check(mesh, "source")
    if x is None:
        x = np.arange(src.num_elems(), dtype=np.int64).reshape(src.shape)
    rng = np.random.default_rng(seed) if seed is not None else None
    blocks = scatter(x, src, mesh, rng, pad=PAD_GARBAGE if x.dtype.kind in "iu" else np.nan)
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
