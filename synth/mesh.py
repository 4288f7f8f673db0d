"""Device meshes: ordered named axes with sizes, written ``x=2,y=4``.

Device ids are the row-major linear index of mesh coordinates (first axis most
significant), exactly as ``jax.make_mesh`` lays out CPU devices.

A mesh may name the machine's devices it runs on after ``@``: ``a=4@4-7`` or
``x=2,y=2@0,2,4,6`` (listed in row-major order of the mesh positions; the default is
``0..n-1``). Planning on one mesh always uses the positions ``0..n-1``
(:attr:`Mesh.device_ids` maps them to machine devices); two meshes with different device
ids are what :mod:`synth.crossmesh` plans between.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from synth import limits as _limits
from synth.errors import MeshError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A sub-axis in Shardy's notation ``name:(pre)size`` (see :func:`parse_axis`).
_FACTOR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):\((\d+)\)(\d+)")


def is_identifier(name) -> bool:
    """An ASCII identifier (letters, digits, '_', not starting with a digit)."""
    return isinstance(name, str) and _IDENT.fullmatch(name) is not None


def parse_axis(name: str):
    """``(base, pre, size)`` for a sub-axis ``'x:(pre)size'``, ``(name, None, None)``
    for a whole axis, ``None`` for anything else (memoised for short strings: a type's
    checks parse the same few names many times)."""
    if type(name) is str and len(name) <= PARSE_AXIS_CACHE_LEN:
        return _parse_axis_str(name)
    if not isinstance(name, str):
        return None
    return _parse_axis(name)


def _parse_axis(name: str):
    if _IDENT.fullmatch(name):
        return name, None, None
    m = _FACTOR.fullmatch(name)
    if not m:
        return None
    return m.group(1), int(m.group(2)), int(m.group(3))


#: Names :func:`parse_axis` keeps (a bounded cache: the answers are immutable), and the
#: longest name it keeps (a longer one, e.g. from a hostile file, is parsed each time).
PARSE_AXIS_CACHE = 4096
PARSE_AXIS_CACHE_LEN = 64
_parse_axis_str = functools.lru_cache(maxsize=PARSE_AXIS_CACHE)(_parse_axis)


def factor_name(base: str, pre: int, size: int) -> str:
    return f"{base}:({pre}){size}"


class _Shape(dict):
    """``{axis: size}``; a sub-axis name of a base axis resolves to the factor's size. It
    holds no reference to its mesh (the mesh keeps this dict: that would be a cycle)."""

    def __missing__(self, key):
        p = parse_axis(key)
        if p is None or p[1] is None or p[0] not in self:
            raise KeyError(key)
        _check_factor(self, key, p)
        return p[2]


def _check_factor(sizes, name: str, parsed=None):
    """A sub-axis ``name`` (``'x:(pre)size'``) fits its axis in ``sizes`` (``{axis:
    size}``), else MeshError."""
    base, pre, size = parsed or parse_axis(name)
    n = sizes[base]
    if pre < 1 or size < 2 or n % (pre * size):
        raise MeshError(
            f"sub-axis {name!r}: on mesh axis {base}={n} a sub-axis {base}:(pre)size needs "
            f"pre >= 1, size >= 2 and pre*size dividing {n} (here pre*size = {pre * size}); "
            f"e.g. {base}:(1){_smallest_factor(n)}"
        )


@dataclass(frozen=True)
class Mesh:
    """An ordered tuple of ``(axis_name, size)`` pairs.

    >>> Mesh.parse("x=2,y=4")
    Mesh((('x', 2), ('y', 4)))
    """

    axes: tuple[tuple[str, int], ...]
    #: For a mesh refined into sub-axes (:meth:`refine`): the axes of the mesh it refines.
    base: tuple[tuple[str, int], ...] = ()
    #: The machine devices of the mesh positions in row-major order; ``()`` is ``0..n-1``.
    devices: tuple[int, ...] = ()

    def __post_init__(self):
        if isinstance(self.axes, (str, bytes)) or not hasattr(self.axes, "__iter__"):
            raise MeshError(f"Mesh: axes must be (name, size) pairs, got {self.axes!r}")
        try:
            axes = tuple((n, s) for n, s in self.axes)
        except (TypeError, ValueError):
            raise MeshError(f"Mesh: axes must be (name, size) pairs, got {self.axes!r}") from None
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "base", tuple(self.base))
        _check_axes(axes, refined=bool(self.base))
        if isinstance(self.devices, (str, bytes)) or not hasattr(self.devices, "__iter__"):
            raise MeshError(f"Mesh: devices must be a tuple of device ids, got {self.devices!r}")
        devs = tuple(self.devices)
        if devs:
            _check_devices(devs, math.prod(s for _, s in axes), str(Mesh(axes)))
            if devs == tuple(range(len(devs))):
                devs = ()  # the default, written once
        object.__setattr__(self, "devices", tuple(int(d) for d in devs))

    # -- construction -------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> Mesh:
        """Parse ``"x=2,y=4"`` (spaces allowed)."""
        if isinstance(text, Mesh):
            return text
        if not isinstance(text, str):
            raise MeshError(f"Mesh.parse: expected a string like 'x=2,y=4', got {text!r}")
        if "@" in text:
            axes_text, _, dev_text = text.partition("@")
            m = cls.parse(axes_text)
            return cls(m.axes, devices=parse_device_ids(dev_text, m.size, text))
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
        """``{axis: size}``. On a mesh that is not refined, a sub-axis name such as
        ``'x:(2)4'`` also resolves (to 4), after checking it fits its axis."""
        return _Shape(self.axes)

    @cached_property
    def base_mesh(self) -> Mesh:
        """The mesh this one refines (itself when it is not refined; built once)."""
        return Mesh(self.base) if self.base else self

    def refine(self, cuts: dict[str, set[int]]) -> Mesh:
        """This mesh with axis ``x`` split at the strides in ``cuts[x]`` (products of the
        sizes of the major factors) into sub-axes named ``x:(pre)size``, major first.
        Device ids do not change: splitting an axis into major and minor factors keeps
        the row-major order."""
        if self.base:
            raise MeshError("Mesh.refine: the mesh is already refined")
        if not any(len(c - {1, self.shape[a]}) for a, c in cuts.items()):
            return self
        axes = []
        for name, n in self.axes:
            for pre, size in _atoms(n, cuts.get(name, ())):
                axes.append((name if size == n else factor_name(name, pre, size), size))
        # the checks of Mesh(axes, self.axes) that can fail on a refinement of a checked
        # mesh: the names are factor names of its identifiers (distinct), each size divides
        # an axis size and the device count is the same; only the number of axes grows
        _limits.check("mesh_axes", len(axes), "Mesh: number of axes")
        m = object.__new__(Mesh)
        object.__setattr__(m, "axes", tuple(axes))
        object.__setattr__(m, "base", self.axes)
        object.__setattr__(m, "devices", ())
        return m

    def axis_coords(self, name: str) -> np.ndarray:
        """``[num_devices]``: every device's coordinate on ``name`` (an axis or a sub-axis)."""
        if name in dict(self.axes):
            return self.coords[:, self.names.index(name)]
        p = parse_axis(name)
        if p is None or p[1] is None or p[0] not in dict(self.axes):
            self.axis_size(name)
        base, pre, size = p
        sizes = dict(self.axes)
        _check_factor(sizes, name, p)
        n = sizes[base]
        c = self.coords[:, self.names.index(base)]
        return (c // (n // (pre * size))) % size

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    @property
    def device_ids(self) -> tuple[int, ...]:
        """The machine device of each mesh position (row-major): ``devices`` or ``0..n-1``."""
        return self.devices or tuple(range(self.size))

    def local(self) -> Mesh:
        """This mesh on positions ``0..n-1`` (what single-mesh planning works on)."""
        return Mesh(self.axes, self.base) if self.devices else self

    def axis_size(self, name: str) -> int:
        try:
            return self.shape[name]
        except (KeyError, TypeError):
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

    def factor_of(self, name: str) -> tuple[str, int, int]:
        """``(base axis, pre, size)`` of an axis or sub-axis name of this mesh: a whole
        axis ``x`` of size ``n`` is ``(x, 1, n)``."""
        p = parse_axis(name)
        if p is None:
            self.axis_size(name)
        base, pre, size = p
        if pre is None:
            return name, 1, self.axis_size(name)
        self.axis_size(name)
        return base, pre, size

    def __str__(self) -> str:
        text = ",".join(f"{n}={s}" for n, s in self.axes)
        return f"{text}@{format_device_ids(self.devices)}" if self.devices else text

    def __repr__(self) -> str:
        dev = f", devices={self.devices!r}" if self.devices else ""
        if self.base:
            return f"Mesh({self.axes!r}, {self.base!r}{dev})"
        return f"Mesh({self.axes!r}{dev})"


def _smallest_factor(n: int) -> int:
    for k in range(2, n + 1):
        if n % k == 0:
            return k
    return n


def _atoms(n: int, cuts) -> list[tuple[int, int]]:
    """``(pre, size)`` of the factors of an axis of size ``n`` cut at ``cuts``."""
    pts = sorted({1, n} | {int(c) for c in cuts if 1 <= int(c) <= n})
    return [(a, b // a) for a, b in zip(pts, pts[1:])] or [(1, n)]


def _check_axes(axes, refined=False):
    if not axes:
        raise MeshError("Mesh: a mesh needs at least one axis, e.g. 'x=2'")
    seen = set()
    for n, s in axes:
        if not isinstance(n, str) or not (
                _IDENT.fullmatch(n) or (refined and _FACTOR.fullmatch(n))):
            raise MeshError(
                f"Mesh: axis name {n!r} is not an identifier (ASCII letters, digits, '_', "
                "not starting with a digit); rename the axis, e.g. 'x'"
            )
        if n in seen:
            raise MeshError(f"Mesh: axis {n!r} appears twice; axis names must be unique")
        seen.add(n)
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise MeshError(f"Mesh: axis {n!r} has size {s!r}, which is not an integer")
        if s < 1:
            raise MeshError(f"Mesh: axis {n!r} has size {s}; sizes must be >= 1")
    _limits.check_mesh([s for _, s in axes], "Mesh")


def parse_device_ids(text: str, size: int, where: str = "") -> tuple[int, ...]:
    """``'4-7'`` or ``'0,2,4,6'`` (ranges and single ids, comma-separated) as a tuple of
    ``size`` distinct device ids.

    >>> parse_device_ids("0,2,4-5", 4)
    (0, 2, 4, 5)
    """
    what = f"Mesh.parse({where!r})" if where else "device ids"
    body = text.strip() if isinstance(text, str) else ""
    if not body:
        raise MeshError(f"{what}: no device ids after '@'; write them as '4-7' or '0,2,4,6'")
    ids: list[int] = []
    for part in body.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            a = int(_limits.check_digits(lo.strip(), f"{what}: device id"))
            b = int(_limits.check_digits(hi.strip(), f"{what}: device id")) if sep else a
        except ValueError as e:
            if isinstance(e, _limits.LimitError):
                raise
            raise MeshError(f"{what}: device item {part.strip()!r} is not an id or a range 'a-b' of "
                            "non-negative integers; write them as '4-7' or '0,2,4,6'") from None
        if b < a:
            raise MeshError(f"{what}: device range {part.strip()!r} runs backwards; write 'low-high'")
        if len(ids) + b - a + 1 > size:
            raise MeshError(f"{what}: the device ids name more than the mesh's {size} devices; "
                            f"list exactly {size}")
        ids.extend(range(a, b + 1))
    _check_devices(tuple(ids), size, where or "the mesh")
    return tuple(ids)


def format_device_ids(ids) -> str:
    """The short text of device ids: runs of 3 or more consecutive ids as ``a-b``."""
    ids = list(ids)
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{ids[i]}-{ids[j]}")
            i = j + 1
        else:
            out.append(str(ids[i]))
            i += 1
    return ",".join(out)


def _check_devices(ids: tuple, size: int, where: str) -> None:
    for d in ids:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise MeshError(f"Mesh {where}: device id {d!r} is not a non-negative integer")
    if len(ids) != size:
        raise MeshError(f"Mesh {where}: {len(ids)} device ids for a mesh of {size} devices; "
                        f"list exactly {size} (e.g. '@0-{size - 1}')")
    if len(set(ids)) != len(ids):
        rep = sorted({d for d in ids if ids.count(d) > 1})
        raise MeshError(f"Mesh {where}: device id(s) {rep} appear more than once; a device holds "
                        "one mesh position")
    _limits.check_devices(max(ids) + 1, f"Mesh {where}: device ids")
