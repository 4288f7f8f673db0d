"""Device meshes: ordered named axes with sizes, written ``x=2,y=4``.

Device ids are the row-major linear index of mesh coordinates (first axis most
significant), exactly as ``jax.make_mesh`` lays out CPU devices.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synth import limits as _limits
from synth.errors import MeshError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Mesh:
    """An ordered tuple of ``(axis_name, size)`` pairs.

    >>> Mesh.parse("x=2,y=4")
    Mesh((('x', 2), ('y', 4)))
    """

    axes: tuple[tuple[str, int], ...]

    def __post_init__(self):
        axes = tuple((str(n), s) for n, s in self.axes)
        object.__setattr__(self, "axes", axes)
        _check_axes(axes)

    # -- construction -------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> Mesh:
        """Parse ``"x=2,y=4"`` (spaces allowed)."""
        if isinstance(text, Mesh):
            return text
        if not isinstance(text, str):
            raise MeshError(f"Mesh.parse: expected a string like 'x=2,y=4', got {text!r}")
        body = text.strip()
        if not body:
            raise MeshError("Mesh.parse: empty mesh string; write axes as 'x=2,y=4'")
        axes = []
        for i, part in enumerate(body.split(",")):
            part = part.strip()
            if "=" not in part:
                raise MeshError(
                    f"Mesh.parse({text!r}): axis #{i} {part!r} is not 'name=size'; "
                    "write axes as 'x=2,y=4'"
                )
            name, _, size_s = part.partition("=")
            name, size_s = name.strip(), size_s.strip()
            try:
                size = int(_limits.check_digits(size_s, f"Mesh.parse: axis {name!r} size"))
            except ValueError as e:
                if isinstance(e, _limits.LimitError):
                    raise
                raise MeshError(
                    f"Mesh.parse({text!r}): axis {name!r} has size {size_s!r}, "
                    "which is not an integer"
                ) from None
            axes.append((name, size))
        return cls(tuple(axes))

    @classmethod
    def of(cls, mesh: Mesh | str | dict) -> Mesh:
        """Accept a Mesh, a ``'x=2,y=4'`` string or an ordered ``{name: size}`` dict."""
        if isinstance(mesh, Mesh):
            return mesh
        if isinstance(mesh, dict):
            return cls(tuple(mesh.items()))
        return cls.parse(mesh)

    # -- queries ------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @cached_property
    def shape(self) -> dict[str, int]:
        return dict(self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    def axis_size(self, name: str) -> int:
        try:
            return self.shape[name]
        except KeyError:
            raise MeshError(
                f"Mesh: no axis named {name!r}; the mesh has axes {list(self.names)}"
            ) from None

    def axis_index(self, name: str) -> int:
        self.axis_size(name)
        return self.names.index(name)

    @cached_property
    def coords(self) -> np.ndarray:
        """``coords[d, i]`` is device ``d``'s coordinate on axis ``i`` (row-major)."""
        if not self.axes:
            return np.zeros((1, 0), dtype=np.int64)
        grids = np.indices(self.sizes).reshape(len(self.axes), -1).T
        return np.ascontiguousarray(grids.astype(np.int64))

    def device_id(self, coord: dict[str, int]) -> int:
        d = 0
        for n, s in self.axes:
            d = d * s + int(coord.get(n, 0))
        return d

    def groups(self, axis: str | tuple[str, ...]) -> list[list[int]]:
        """Device groups that differ only in their coordinates on ``axis`` (one name or
        a tuple of names), each ordered by the mixed-radix index of those coordinates,
        major to minor in the order given (as ``jax.lax`` orders a tuple of axis names).
        Groups are ordered by their smallest id."""
        names = (axis,) if isinstance(axis, str) else tuple(axis)
        idx = [self.axis_index(a) for a in names]
        ids = np.arange(self.size).reshape(self.sizes)
        n = math.prod(self.sizes[i] for i in idx)
        moved = np.moveaxis(ids, idx, list(range(-len(idx), 0))).reshape(-1, n)
        return sorted((row.tolist() for row in moved), key=lambda g: g[0])

    def to_dict(self) -> dict[str, int]:
        return dict(self.axes)

    def __str__(self) -> str:
        return ",".join(f"{n}={s}" for n, s in self.axes)

    def __repr__(self) -> str:
        return f"Mesh({self.axes!r})"


def _check_axes(axes):
    if not axes:
        raise MeshError("Mesh: a mesh needs at least one axis, e.g. 'x=2'")
    seen = set()
    for n, s in axes:
        if not _IDENT.match(n):
            raise MeshError(
                f"Mesh: axis name {n!r} is not an identifier (letters, digits, '_', "
                "not starting with a digit)"
            )
        if n in seen:
            raise MeshError(f"Mesh: axis {n!r} appears twice; axis names must be unique")
        seen.add(n)
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise MeshError(f"Mesh: axis {n!r} has size {s!r}, which is not an integer")
        if s < 1:
            raise MeshError(f"Mesh: axis {n!r} has size {s}; sizes must be >= 1")
    _limits.check_mesh([s for _, s in axes], "Mesh")
