"""Distributed array types: per dimension, a global size and the mesh axes it is
split over, listed major to minor (the order of JAX's ``PartitionSpec``).

Canonical text: ``[1024{x}, 4096{y,z}, 8]``. A dimension without braces (or with
``{}``) is not split. Device ``d`` holds, along each dimension, the block whose index
is the mixed-radix number formed by ``d``'s coordinates on that dimension's axes,
major to minor.

This module never imports jax; specs are plain ``None`` / ``"x"`` / ``("x", "y")``.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

import numpy as np

from synth import limits as _limits
from synth.errors import TypeSpecError
from synth.mesh import Mesh

_DIM = re.compile(r"^\s*(-?\d+)\s*(?:\{([^{}]*)\})?\s*$")


@dataclass(frozen=True)
class Dim:
    """One array dimension: global ``size`` split over ``axes`` (major to minor)."""

    size: int
    axes: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "axes", tuple(self.axes))

    def __str__(self) -> str:
        return f"{self.size}{{{','.join(self.axes)}}}" if self.axes else str(self.size)


@dataclass(frozen=True)
class ArrayType:
    """A distributed array type. Immutable; ``str`` gives the canonical form.

    >>> t = ArrayType.parse("[1024{x}, 4096{y,z}, 8]")
    >>> str(t)
    '[1024{x}, 4096{y,z}, 8]'
    """

    dims: tuple[Dim, ...]

    def __post_init__(self):
        dims = tuple(d if isinstance(d, Dim) else Dim(*d) for d in self.dims)
        object.__setattr__(self, "dims", dims)
        _check_syntax(dims)

    # -- construction -------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> ArrayType:
        if isinstance(text, ArrayType):
            return text
        if not isinstance(text, str):
            raise TypeSpecError(f"ArrayType.parse: expected a string like '[8{{x}}, 4]', got {text!r}")
        s = text.strip()
        if not (s.startswith("[") and s.endswith("]")):
            raise TypeSpecError(
                f"ArrayType.parse({text!r}): a type is written in brackets, "
                "e.g. '[1024{x}, 4096{y,z}, 8]'"
            )
        body = s[1:-1].strip()
        if not body:
            raise TypeSpecError(f"ArrayType.parse({text!r}): a type needs at least one dimension")
        dims = []
        for i, part in enumerate(_split_dims(body, text)):
            m = _DIM.match(part)
            if not m:
                raise TypeSpecError(
                    f"ArrayType.parse({text!r}): dim {i} {part.strip()!r} is not 'SIZE' or "
                    "'SIZE{axis,...}', e.g. '4096{y,z}'"
                )
            size = _limits.parse_int(m.group(1), f"ArrayType.parse: dim {i} size")
            axes_s = m.group(2)
            axes = tuple(a.strip() for a in axes_s.split(",")) if axes_s and axes_s.strip() else ()
            if any(not a for a in axes):
                raise TypeSpecError(
                    f"ArrayType.parse({text!r}): dim {i} has an empty axis name in {{{axes_s}}}"
                )
            dims.append(Dim(size, axes))
        return cls(tuple(dims))

    @classmethod
    def of(cls, t: ArrayType | str) -> ArrayType:
        return t if isinstance(t, ArrayType) else cls.parse(t)

    @classmethod
    def from_spec(cls, shape, spec) -> ArrayType:
        """From a ``(shape, PartitionSpec-like)`` pair. ``spec`` entries are ``None``,
        an axis name or a tuple of names; a short spec leaves trailing dims replicated."""
        shape = tuple(int(s) for s in shape)
        spec = tuple(spec) if spec is not None else ()
        if len(spec) > len(shape):
            raise TypeSpecError(
                f"ArrayType.from_spec: spec {spec!r} has {len(spec)} entries but the shape "
                f"{shape} has rank {len(shape)}"
            )
        dims = []
        for i, size in enumerate(shape):
            e = spec[i] if i < len(spec) else None
            if e is None:
                axes = ()
            elif isinstance(e, str):
                axes = (e,)
            elif isinstance(e, (tuple, list)) and all(isinstance(a, str) for a in e):
                axes = tuple(e)
            else:
                raise TypeSpecError(
                    f"ArrayType.from_spec: spec entry {i} is {e!r}; use None, an axis name "
                    "or a tuple of axis names"
                )
            dims.append(Dim(size, axes))
        return cls(tuple(dims))

    def to_spec(self) -> tuple[tuple[int, ...], tuple]:
        """``(shape, spec)`` with spec entries ``None``, ``"x"`` or ``("x", "y")``."""
        spec = tuple(
            None if not d.axes else (d.axes[0] if len(d.axes) == 1 else d.axes) for d in self.dims
        )
        return self.shape, spec

    # -- structure ----------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @property
    def used_axes(self) -> tuple[str, ...]:
        return tuple(a for d in self.dims for a in d.axes)

    def dim_of(self, axis: str) -> int | None:
        for i, d in enumerate(self.dims):
            if axis in d.axes:
                return i
        return None

    def with_dim_axes(self, i: int, axes: tuple[str, ...]) -> ArrayType:
        dims = list(self.dims)
        dims[i] = Dim(dims[i].size, tuple(axes))
        return ArrayType(tuple(dims))

    # -- mesh-dependent -----------------------------------------------------
    def check(self, mesh: Mesh, what: str = "type") -> ArrayType:
        """Validate against ``mesh``: known axes, divisibility. Returns self."""
        for i, d in enumerate(self.dims):
            for a in d.axes:
                if a not in mesh.shape:
                    raise TypeSpecError(
                        f"{what} {self}: dim {i} uses axis {a!r}, which is not in mesh "
                        f"{mesh} (axes {list(mesh.names)})"
                    )
            n = math.prod(mesh.shape[a] for a in d.axes)
            if d.size % n:
                raise TypeSpecError(
                    f"{what} {self}: dim {i} has global size {d.size}, not divisible by "
                    f"{'*'.join(f'{a}={mesh.shape[a]}' for a in d.axes)} = {n}; choose a size "
                    f"that is a multiple of {n} or split it over fewer axes"
                )
        return self

    def is_valid(self, mesh: Mesh) -> bool:
        for d in self.dims:
            n = 1
            for a in d.axes:
                if a not in mesh.shape:
                    return False
                n *= mesh.shape[a]
            if d.size % n:
                return False
        return True

    def split(self, mesh: Mesh, i: int) -> int:
        return math.prod(mesh.shape[a] for a in self.dims[i].axes)

    def local_shape(self, mesh: Mesh) -> tuple[int, ...]:
        return tuple(d.size // math.prod(mesh.shape[a] for a in d.axes) for d in self.dims)

    def shard_elems(self, mesh: Mesh) -> int:
        return math.prod(self.local_shape(mesh))

    def num_elems(self) -> int:
        return math.prod(self.shape)

    def block_indices(self, mesh: Mesh) -> np.ndarray:
        """``[num_devices, rank]`` block index of every device along every dim."""
        coords = mesh.coords
        out = np.zeros((mesh.size, self.rank), dtype=np.int64)
        for i, d in enumerate(self.dims):
            for a in d.axes:
                k = mesh.names.index(a)
                out[:, i] = out[:, i] * mesh.sizes[k] + coords[:, k]
        return out

    def regions(self, mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, stops)``, each ``[num_devices, rank]``: the global box each device holds."""
        local = np.array(self.local_shape(mesh), dtype=np.int64)
        starts = self.block_indices(mesh) * local
        return starts, starts + local

    def block_slices(self, mesh: Mesh, device: int) -> tuple[slice, ...]:
        starts, stops = self.regions(mesh)
        return tuple(slice(int(a), int(b)) for a, b in zip(starts[device], stops[device]))

    def __str__(self) -> str:
        return "[" + ", ".join(str(d) for d in self.dims) + "]"

    def __repr__(self) -> str:
        return f"ArrayType.parse({str(self)!r})"


def _split_dims(body: str, text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in body:
        if ch == "{":
            depth += 1
            if depth > 1:
                raise TypeSpecError(f"ArrayType.parse({text!r}): nested braces are not allowed")
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise TypeSpecError(f"ArrayType.parse({text!r}): unbalanced '}}'")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise TypeSpecError(f"ArrayType.parse({text!r}): unbalanced '{{'")
    parts.append("".join(cur))
    return parts


def _check_syntax(dims):
    if not dims:
        raise TypeSpecError("ArrayType: a type needs at least one dimension")
    seen = {}
    for i, d in enumerate(dims):
        if isinstance(d.size, bool) or not isinstance(d.size, (int, np.integer)):
            raise TypeSpecError(f"ArrayType: dim {i} has size {d.size!r}, not an integer")
        if d.size < 1:
            raise TypeSpecError(f"ArrayType: dim {i} has size {d.size}; sizes must be >= 1")
        for a in d.axes:
            if not isinstance(a, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", a):
                raise TypeSpecError(f"ArrayType: dim {i} axis {a!r} is not an identifier")
            if a in seen:
                where = f"dims {seen[a]} and {i}" if seen[a] != i else f"dim {i} twice"
                raise TypeSpecError(
                    f"ArrayType: axis {a!r} is used in {where}; a mesh axis may appear at "
                    "most once in a type"
                )
            seen[a] = i
    _limits.check_shape([d.size for d in dims], "ArrayType")


def parse_type(text, shape=None) -> ArrayType:
    """Parse either the canonical form ``[8{x}, 4]`` or a PartitionSpec form
    such as ``P('x', None)`` / ``('x', ('y','z'))`` (which needs ``shape``)."""
    if isinstance(text, ArrayType):
        return text
    s = str(text).strip()
    if s.startswith("["):
        t = ArrayType.parse(s)
        if shape is not None and tuple(shape) != t.shape:
            raise TypeSpecError(
                f"type {t} has shape {t.shape}, but the array's shape is {tuple(shape)}"
            )
        return t
    if shape is None:
        raise TypeSpecError(
            f"parse_type({text!r}): a PartitionSpec needs the array shape; or write the "
            "canonical form '[8{x}, 4]'"
        )
    return ArrayType.from_spec(shape, parse_partition_spec(s))


def parse_partition_spec(text: str) -> tuple:
    """Parse ``P('x', None, ('y','z'))`` or ``('x', None)`` without evaluating code."""
    s = text.strip()
    for prefix in ("PartitionSpec", "P"):
        if s.startswith(prefix + "("):
            s = s[len(prefix):]
            break
    try:
        val = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        raise TypeSpecError(
            f"parse_partition_spec({text!r}): not a PartitionSpec; write e.g. "
            "\"P('x', None, ('y','z'))\""
        ) from None
    if not isinstance(val, tuple):
        val = (val,)
    return val
