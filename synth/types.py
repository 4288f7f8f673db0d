"""Distributed array types: per dimension, a global size and the mesh axes it is
split over, listed major to minor (the order of JAX's ``PartitionSpec``), and the set
of mesh axes over which the array is still an unreduced (pending) sum.

Canonical text: ``[1024{x}, 4096{y,z}, 8]{U:w}``. A dimension without braces (or with
``{}``) is not split; without ``{U:...}`` nothing is pending. Device ``d`` holds, along
each dimension, the block whose index is the mixed-radix number formed by ``d``'s
coordinates on that dimension's axes, major to minor.

* **Uneven dimensions** (as in JAX and GSPMD): a dim of global size ``n`` split ``k``
  ways has shards of ``ceil(n / k)`` elements; block ``i`` covers
  ``[i*s, min((i+1)*s, n))`` and the rest of the shard is padding.
* **Pending sums**: with ``{U:y}``, each device holds a partial block; the true block
  is the sum of the partial blocks of the devices that differ from it only on ``y``.
* **Sub-axes** (Shardy's notation): ``x:(pre)size`` is the factor of mesh axis ``x`` of
  size ``size`` whose major factors multiply to ``pre``; on ``x=8``, ``x:(1)2`` is the
  major factor of 2 and ``x:(2)4`` the minor factor of 4. Factors of one axis never
  overlap. Planning works on a *refined* mesh (:func:`refine`) whose axes are the
  factors every type involved needs, and types print in canonical form on the user's
  mesh (:meth:`ArrayType.canonical`).

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
from synth.memo import Memo
from synth.mesh import Mesh, factor_name, parse_axis

_DIM = re.compile(r"\s*(-?\d+)\s*(?:\{([^{}]*)\})?\s*")
_UNREDUCED = re.compile(r"\{\s*U\s*:(.*)\}", re.S)


def _axis_problem(a) -> str | None:
    """Why ``a`` is not an axis or sub-axis name (``None`` when it is one)."""
    if not isinstance(a, str):
        return f"{a!r} is not a string"
    p = parse_axis(a)
    if p is None:
        if any(ord(ch) > 127 for ch in a):
            return (f"{a!r} has non-ASCII characters; axis names are ASCII identifiers "
                    "(letters, digits, '_')")
        return (f"{a!r} is neither an axis name (an ASCII identifier) nor a sub-axis "
                "'name:(pre)size' such as 'x:(2)4'")
    _, pre, size = p
    if pre is not None and (pre < 1 or size < 2):
        return (f"sub-axis {a!r} needs pre >= 1 (the product of the sizes of the factors "
                "before it, 1 for the major factor) and size >= 2, e.g. 'x:(1)2'")
    return None


def _overlap(a, b) -> bool:
    """Two names of the same base axis overlap unless both are disjoint factors."""
    pa, pb = parse_axis(a), parse_axis(b)
    if pa[0] != pb[0]:
        return False
    if pa[1] is None or pb[1] is None:
        return True
    return not (pa[1] * pa[2] <= pb[1] or pb[1] * pb[2] <= pa[1])


@dataclass(frozen=True)
class Dim:
    """One array dimension: global ``size`` split over ``axes`` (major to minor)."""

    size: int
    axes: tuple[str, ...] = ()

    def __post_init__(self):
        axes = self.axes
        if axes is None:
            axes = ()
        elif isinstance(axes, str):
            axes = (axes,)
        else:
            try:
                axes = tuple(axes)
            except TypeError:
                raise TypeSpecError(f"Dim: axes must be a name or a tuple of names, got {axes!r}") from None
        object.__setattr__(self, "axes", axes)

    def __str__(self) -> str:
        return f"{self.size}{{{','.join(self.axes)}}}" if self.axes else str(self.size)


def _sort_key(a: str):
    base, pre, _ = parse_axis(a)
    return (base, pre or 0)


@dataclass(frozen=True)
class ArrayType:
    """A distributed array type. Immutable; ``str`` gives the canonical form.

    >>> t = ArrayType.parse("[1024{x}, 4096{y,z}, 8]{U:w}")
    >>> str(t)
    '[1024{x}, 4096{y,z}, 8]{U:w}'
    """

    dims: tuple[Dim, ...]
    #: Mesh axes over which the array is an unreduced sum (sorted).
    unreduced: tuple[str, ...] = ()

    def __post_init__(self):
        if isinstance(self.dims, (str, bytes)) or not hasattr(self.dims, "__iter__"):
            raise TypeSpecError(f"ArrayType: dims must be a tuple of Dim, got {self.dims!r}")
        dims = []
        for d in self.dims:
            if isinstance(d, Dim):
                dims.append(d)
            elif isinstance(d, (tuple, list)) and 1 <= len(d) <= 2:
                dims.append(Dim(*d))
            else:
                raise TypeSpecError(f"ArrayType: dim {d!r} is not Dim(size, axes) or (size, axes)")
        dims = tuple(dims)
        u = self.unreduced
        if u is None:
            u = ()
        elif isinstance(u, str):
            u = (u,)
        u = tuple(u)
        for a in u:
            bad = _axis_problem(a)
            if bad:
                raise TypeSpecError(f"ArrayType: unreduced axis {bad}")
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "unreduced", tuple(sorted(u, key=_sort_key)))
        _check_syntax(dims, self.unreduced)

    # -- construction -------------------------------------------------------
    @classmethod
    def _derived(cls, dims: tuple[Dim, ...], unreduced=()) -> ArrayType:
        """Internal: a type rewritten from one already validated, with the same dim
        sizes and each axis renamed to the same mesh axis or its factors, once each (a
        refinement, a canonical form, a search state): every rule ``__post_init__``
        checks holds already, so it is not checked again (the search builds thousands).
        ``dims``: Dim values. Public construction always validates."""
        t = object.__new__(cls)
        object.__setattr__(t, "dims", tuple(dims))
        object.__setattr__(t, "unreduced", tuple(sorted(unreduced, key=_sort_key)))
        return t

    @classmethod
    def parse(cls, text: str) -> ArrayType:
        if isinstance(text, ArrayType):
            return text
        if not isinstance(text, str):
            raise TypeSpecError(f"ArrayType.parse: expected a string like '[8{{x}}, 4]', got {text!r}")
        s = text.strip()
        unreduced = ()
        close = s.rfind("]")
        if s.startswith("[") and close >= 0 and s[close + 1:].strip():
            tail = s[close + 1:].strip()
            m = _UNREDUCED.fullmatch(tail)
            if not m:
                raise TypeSpecError(
                    f"ArrayType.parse({text!r}): after ']' only the unreduced set may follow, "
                    "written '{U:y,z}', e.g. '[1024{x}, 4096]{U:y}'")
            names = [a.strip() for a in m.group(1).split(",")]
            if not any(names):
                raise TypeSpecError(
                    f"ArrayType.parse({text!r}): '{{U:}}' names no axis; list the mesh axes the "
                    "sum is pending over, e.g. '{U:y}', or drop '{U:...}' when nothing is pending")
            if not all(names):
                raise TypeSpecError(f"ArrayType.parse({text!r}): the unreduced set has an empty axis name")
            for a in names:
                bad = _axis_problem(a)
                if bad:
                    raise TypeSpecError(f"ArrayType.parse({text!r}): unreduced axis {bad}")
            unreduced = tuple(names)
            s = s[:close + 1]
        if not (s.startswith("[") and s.endswith("]")):
            raise TypeSpecError(
                f"ArrayType.parse({text!r}): a type is written in brackets, "
                "e.g. '[1024{x}, 4096{y,z}, 8]' or '[1024{x}, 4096]{U:y}'"
            )
        body = s[1:-1].strip()
        if not body:
            raise TypeSpecError(f"ArrayType.parse({text!r}): a type needs at least one dimension")
        dims = []
        for i, part in enumerate(_split_dims(body, text)):
            m = _DIM.fullmatch(part)
            if not m:
                raise TypeSpecError(
                    f"ArrayType.parse({text!r}): dim {i} {part.strip()!r} is not 'SIZE' or "
                    "'SIZE{axis,...}', e.g. '4096{y,z}' or '4096{x:(2)4}'"
                )
            size = _limits.parse_int(m.group(1), f"ArrayType.parse: dim {i} size")
            axes_s = m.group(2)
            axes = tuple(a.strip() for a in axes_s.split(",")) if axes_s and axes_s.strip() else ()
            if any(not a for a in axes):
                raise TypeSpecError(
                    f"ArrayType.parse({text!r}): dim {i} has an empty axis name in {{{axes_s}}}"
                )
            for a in axes:
                bad = _axis_problem(a)
                if bad:
                    raise TypeSpecError(f"ArrayType.parse({text!r}): dim {i} axis {bad}")
            dims.append(Dim(size, axes))
        try:
            return cls(tuple(dims), unreduced)
        except TypeSpecError as e:
            raise TypeSpecError(f"ArrayType.parse({text!r}): {str(e).removeprefix('ArrayType: ')}") from None

    @classmethod
    def of(cls, t: ArrayType | str) -> ArrayType:
        return t if isinstance(t, ArrayType) else cls.parse(t)

    @classmethod
    def from_spec(cls, shape, spec, unreduced=()) -> ArrayType:
        """From a ``(shape, PartitionSpec-like)`` pair. ``spec`` entries are ``None``,
        an axis name or a tuple of names; a short spec leaves trailing dims replicated.
        ``unreduced`` is the set of axes the sum is pending over (JAX's
        ``P(..., unreduced={...})``)."""
        try:
            shape = tuple(int(_limits.check_digits(s, "ArrayType.from_spec: size") if isinstance(s, str) else s)
                          for s in shape)
            spec = tuple(spec) if spec is not None else ()
        except (TypeError, ValueError) as e:
            if isinstance(e, TypeSpecError) or isinstance(e, _limits.LimitError):
                raise
            raise TypeSpecError(f"ArrayType.from_spec: shape {shape!r} must be a sequence of integers and "
                                f"spec {spec!r} a sequence of None, names or tuples of names") from None
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
        if isinstance(unreduced, str):
            unreduced = (unreduced,)
        if unreduced is None:
            unreduced = ()
        if not isinstance(unreduced, (tuple, list, set, frozenset)) or not all(isinstance(a, str) for a in unreduced):
            raise TypeSpecError(f"ArrayType.from_spec: unreduced={unreduced!r} must be a set of axis names")
        return cls(tuple(dims), tuple(unreduced))

    def to_spec(self) -> tuple[tuple[int, ...], tuple]:
        """``(shape, spec)`` with spec entries ``None``, ``"x"`` or ``("x", "y")``
        (the unreduced set is :attr:`unreduced`)."""
        spec = tuple(
            None if not d.axes else (d.axes[0] if len(d.axes) == 1 else d.axes) for d in self.dims
        )
        return self.shape, spec

    def spec_text(self) -> str:
        """JAX's spelling: ``P('x', None, unreduced={'y','z'})``."""
        _, spec = self.to_spec()
        parts = [repr(e) for e in spec]
        if self.unreduced:
            parts.append("unreduced={" + ",".join(repr(a) for a in self.unreduced) + "}")
        return "P(" + ", ".join(parts) + ")"

    # -- structure ----------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @property
    def used_axes(self) -> tuple[str, ...]:
        """Axes that split a dimension (not the unreduced ones)."""
        out = ()
        for d in self.dims:  # (concatenation: cheaper than a generator for a few dims)
            out += d.axes
        return out

    @property
    def all_axes(self) -> tuple[str, ...]:
        """Axes that split a dimension, then the unreduced ones."""
        return self.used_axes + self.unreduced

    def dim_of(self, axis: str) -> int | None:
        for i, d in enumerate(self.dims):
            if axis in d.axes:
                return i
        return None

    def with_dim_axes(self, i: int, axes: tuple[str, ...]) -> ArrayType:
        dims = list(self.dims)
        dims[i] = Dim(dims[i].size, tuple(axes))
        return self._rewritten(tuple(dims), self.unreduced)

    def with_unreduced(self, unreduced) -> ArrayType:
        return self._rewritten(self.dims, tuple(unreduced))

    def _rewritten(self, dims: tuple[Dim, ...], unreduced: tuple) -> ArrayType:
        """``ArrayType(dims, unreduced)`` for ``dims`` of this type's sizes: where its names
        (dims and unreduced set) are distinct names of this type, every check of
        ``__post_init__`` holds already (the same rank and sizes, names that are valid and
        do not overlap), so the type is built without them (a gather, an all-to-all, a
        reduction); so too where this type names no sub-axis and the other names are whole
        axes (valid identifiers; distinct whole axes never overlap: a slice, an unreduce);
        otherwise it is checked as any type."""
        try:
            names = [a for d in dims for a in d.axes]
            names += unreduced
            distinct = set(names)
            if len(distinct) == len(names):
                old = self.all_axes
                new = distinct.difference(old)
                if not new or (not any(":" in a for a in old) and all(
                        type(a) is str and ":" not in a and parse_axis(a) is not None for a in new)):
                    return ArrayType._derived(dims, unreduced)
        except TypeError:  # an unhashable name: let the check word it
            pass
        return ArrayType(dims, unreduced)

    # -- mesh-dependent -----------------------------------------------------
    def check(self, mesh: Mesh, what: str = "type") -> ArrayType:
        """Validate against ``mesh``: known axes, sub-axes that fit their axis and do not
        overlap. Returns the canonical form (adjacent factors merged, a factor that is a
        whole axis written as the axis)."""
        names = mesh.shape.keys()
        for i, d in enumerate(self.dims):
            for a in d.axes:
                if a not in names:  # (the message is formatted only for such a name)
                    self._check_name(mesh, a, f"{what} {self}: dim {i}")
        for a in self.unreduced:
            if a not in names:
                self._check_name(mesh, a, f"{what} {self}: the unreduced set")
        if mesh.base:
            return self
        _check_cuts(self, mesh, what)
        return self.canonical(mesh)

    def _check_name(self, mesh, a, where):
        if a in mesh.shape.keys():
            return
        p = parse_axis(a)
        names = list(mesh.names)
        if p is None or p[0] not in dict(mesh.axes) or p[1] is None:
            raise TypeSpecError(
                f"{where} uses axis {a!r}, which is not in mesh {mesh} (axes {names}); "
                "use one of the mesh's axes or add it to the mesh"
            )
        try:
            mesh.shape[a]
        except Exception as e:  # MeshError from the factor check
            raise TypeSpecError(f"{where}: {e}") from None

    def is_valid(self, mesh: Mesh) -> bool:
        try:
            self.check(mesh)
        except TypeSpecError:
            return False
        return True

    def canonical(self, mesh: Mesh) -> ArrayType:
        """The canonical form on ``mesh`` (a mesh that is not refined): adjacent factors
        of one axis merge (``x:(1)2,x:(2)4`` is ``x`` on ``x=8``)."""
        if not any(":" in a for a in self.all_axes):
            return self
        if mesh.base:
            mesh = mesh.base_mesh
        dims = tuple(Dim(d.size, _merge(mesh, d.axes)) for d in self.dims)
        u = sorted(self.unreduced, key=lambda a: (mesh.names.index(parse_axis(a)[0]),
                                                  parse_axis(a)[1] or 1))
        return ArrayType._derived(dims, _merge(mesh, tuple(u)))

    def split(self, mesh: Mesh, i: int) -> int:
        return math.prod(mesh.shape[a] for a in self.dims[i].axes)

    def splits(self, mesh: Mesh) -> tuple[int, ...]:
        """Per dim, the number of blocks (product of its axes' sizes)."""
        shape = mesh.shape
        out = []
        for d in self.dims:  # (plain loops: these run for every type of every plan built)
            k = 1
            for a in d.axes:
                k *= shape[a]
            out.append(k)
        return tuple(out)

    def local_shape(self, mesh: Mesh) -> tuple[int, ...]:
        """Shard shape, padding included: ``ceil(size / split)`` per dim."""
        shape = mesh.shape
        out = []
        for d in self.dims:
            k = 1
            for a in d.axes:
                k *= shape[a]
            out.append(-(-d.size // k))
        return tuple(out)

    def is_even(self, mesh: Mesh) -> bool:
        return all(d.size % k == 0 for d, k in zip(self.dims, self.splits(mesh)))

    def shard_elems(self, mesh: Mesh) -> int:
        """Elements of one (padded) shard (the product of :meth:`local_shape`)."""
        shape = mesh.shape
        n = 1
        for d in self.dims:
            k = 1
            for a in d.axes:
                k *= shape[a]
            n *= -(-d.size // k)
        return n

    def num_elems(self) -> int:
        return math.prod(self.shape)

    def block_indices(self, mesh: Mesh) -> np.ndarray:
        """``[num_devices, rank]`` block index of every device along every dim (memoised
        per (type, mesh); read-only)."""
        return _BLOCKS_MEMO.get((self, mesh), lambda: self._block_indices(mesh))

    def _block_indices(self, mesh: Mesh) -> np.ndarray:
        out = np.zeros((mesh.size, self.rank), dtype=np.int64)
        for i, d in enumerate(self.dims):
            for a in d.axes:
                out[:, i] = out[:, i] * mesh.shape[a] + mesh.axis_coords(a)
        return out

    def unreduced_index(self, mesh: Mesh) -> np.ndarray:
        """``[num_devices]``: each device's mixed-radix index over the unreduced axes."""
        out = np.zeros(mesh.size, dtype=np.int64)
        for a in self.unreduced:
            out = out * mesh.shape[a] + mesh.axis_coords(a)
        return out

    def regions(self, mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, stops)``, each ``[num_devices, rank]``: the global box of real data
        each device holds (stops are clipped to the global size; padding is not in it).
        Memoised per (type, mesh); the arrays are read-only."""
        return _REGIONS_MEMO.get((self, mesh), lambda: self._regions(mesh))

    def _regions(self, mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
        local = np.array(self.local_shape(mesh), dtype=np.int64)
        starts = self.block_indices(mesh) * local
        stops = np.minimum(starts + local, np.array(self.shape, dtype=np.int64))
        starts = np.minimum(starts, stops)
        return starts, stops

    def block_slices(self, mesh: Mesh, device: int) -> tuple[slice, ...]:
        starts, stops = self.regions(mesh)
        return tuple(slice(int(a), int(b)) for a, b in zip(starts[device], stops[device]))

    def __str__(self) -> str:
        s = "[" + ", ".join(str(d) for d in self.dims) + "]"
        if self.unreduced:
            s += "{U:" + ",".join(self.unreduced) + "}"
        return s

    def __repr__(self) -> str:
        return f"ArrayType.parse({str(self)!r})"


_BLOCKS_MEMO = Memo("block_indices")
_REGIONS_MEMO = Memo("regions")


def _factor(mesh: Mesh, a: str) -> tuple[str, int, int]:
    base, pre, size = parse_axis(a)
    if pre is None:
        return a, 1, mesh.shape[a]
    return base, pre, size


def _name(mesh: Mesh, base: str, pre: int, size: int) -> str:
    return base if pre == 1 and size == mesh.shape[base] else factor_name(base, pre, size)


def _merge(mesh: Mesh, axes: tuple[str, ...]) -> tuple[str, ...]:
    """Merge runs of adjacent factors of one axis (major then minor) into one name."""
    out = []
    for a in axes:
        f = _factor(mesh, a)
        if out and out[-1][0] == f[0] and out[-1][1] * out[-1][2] == f[1]:
            b, p, s = out[-1]
            out[-1] = (b, p, s * f[2])
        else:
            out.append(f)
    return tuple(_name(mesh, *f) for f in out)


def _check_cuts(t: ArrayType, mesh: Mesh, what: str):
    """Factors of one axis must tile it: their boundaries form a chain of divisors."""
    cuts: dict[str, set[int]] = {}
    for a in t.all_axes:
        base, pre, size = _factor(mesh, a)
        if pre is not None and a != base:
            cuts.setdefault(base, set()).update((pre, pre * size))
    for base, c in cuts.items():
        pts = sorted(c | {1, mesh.shape[base]})
        for lo, hi in zip(pts, pts[1:]):
            if hi % lo:
                raise TypeSpecError(
                    f"{what} {t}: the sub-axes of {base}={mesh.shape[base]} do not tile it "
                    f"(boundaries {pts}: {hi} is not a multiple of {lo}); each factor's pre "
                    "must be the product of the sizes of the factors before it")


def cuts_of(mesh: Mesh, types=(), names=()) -> dict[str, set[int]]:
    """The strides at which each axis of ``mesh`` must be split for ``types`` and
    ``names`` (sub-axis names such as ``'x:(2)4'``)."""
    cuts: dict[str, set[int]] = {}
    all_names = list(names)
    for t in types:
        all_names += t.all_axes
    sizes = dict(mesh.base) if getattr(mesh, "base", None) else dict(mesh.shape)
    for a in all_names:
        p = parse_axis(a)
        if p is not None and p[1] is not None:
            base, pre, size = p
            full = sizes.get(base)
            if full is None:
                raise TypeSpecError(f"sub-axis {a!r}: mesh {mesh} has no axis {base!r}")
            # x:(pre)size on an axis of n: the factors before it (pre) times its own size
            # must divide n, e.g. on x=8: x:(2)4 fits (2*4 = 8), x:(3)4 does not (12)
            if pre < 1 or size < 1 or full % (pre * size):
                raise TypeSpecError(f"sub-axis {a!r} does not fit axis {base}={full}: {pre} x {size} = "
                                    f"{pre * size} must divide {full}")
            cuts.setdefault(base, set()).update((pre, pre * size))
    return cuts


def refine(mesh: Mesh, types=(), names=()):
    """``(work mesh, refined types)``: ``mesh`` split into the factors ``types`` and
    ``names`` need (the identity when they use no sub-axes), and each type rewritten
    on it (a whole axis becomes its factors, major to minor; a sub-axis becomes the
    factors it spans). Device ids are the same on both meshes."""
    types = tuple(types)
    cuts = cuts_of(mesh, types, names)
    work = mesh.refine(cuts) if cuts else mesh
    if work is mesh:
        return mesh, types
    return work, tuple(refine_type(t, work) for t in types)


def _atoms_of(work: Mesh) -> dict[str, list[tuple[str, int, int]]]:
    out: dict[str, list] = {}
    base_sizes = dict(work.base)
    for a in work.names:
        p = parse_axis(a)
        if p[1] is None:
            out.setdefault(a, []).append((a, 1, base_sizes[a]))
        else:
            out.setdefault(p[0], []).append((a, p[1], p[2]))
    return out


def refine_name(work: Mesh, a: str) -> tuple[str, ...]:
    """The factors of the refined mesh ``work`` that axis or sub-axis ``a`` spans."""
    if a in work.shape.keys():
        return (a,)
    base, pre, size = parse_axis(a)
    atoms = _atoms_of(work).get(base)
    if atoms is None:
        raise TypeSpecError(f"axis {a!r} is not in mesh {work.base_mesh}")
    if pre is None:
        pre, size = 1, dict(work.base)[base]
    got = tuple(n for n, p, s in atoms if pre <= p and p * s <= pre * size)
    if math.prod(s for n, p, s in atoms if n in got) != size:
        raise TypeSpecError(f"sub-axis {a!r} does not align with the factors {[n for n, _, _ in atoms]}")
    return got


def refine_type(t: ArrayType, work: Mesh) -> ArrayType:
    """``t`` rewritten on the refined mesh ``work`` (see :func:`refine`)."""
    if not work.base:
        return t
    dims = tuple(Dim(d.size, tuple(x for a in d.axes for x in refine_name(work, a))) for d in t.dims)
    return ArrayType._derived(dims, tuple(x for a in t.unreduced for x in refine_name(work, a)))


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


def _pairwise_overlap(dims, unreduced=()) -> str | None:
    """The message for the first two names of a type that are the same axis or overlapping
    factors of one axis (the dims' names, then the unreduced set), or None."""
    seen: list[tuple[str, str]] = []
    places = [(f"dim {i}", a) for i, d in enumerate(dims) for a in d.axes]
    places += [("the unreduced set", a) for a in unreduced]
    for where, a in places:
        for w0, b in seen:
            if a == b or _overlap(a, b):
                same = "the same axis" if a == b else "overlapping factors of one axis"
                at = f"{w0} and {where}" if w0 != where else f"{where} twice"
                return (f"ArrayType: {a!r} and {b!r} are {same}, used in {at}; a mesh axis (or "
                        "a factor of it) may appear at most once in a type, counting the "
                        "unreduced set")
        seen.append((where, a))
    return None


def _check_syntax(dims, unreduced=()):
    if not dims:
        raise TypeSpecError("ArrayType: a type needs at least one dimension")
    for i, d in enumerate(dims):
        if isinstance(d.size, bool) or not isinstance(d.size, (int, np.integer)):
            raise TypeSpecError(f"ArrayType: dim {i} has size {d.size!r}, not an integer")
        if d.size < 1:
            raise TypeSpecError(f"ArrayType: dim {i} has size {d.size}; sizes must be >= 1")
        for a in d.axes:
            bad = _axis_problem(a)
            if bad:
                raise TypeSpecError(f"ArrayType: dim {i} axis {bad}")
    names = [a for d in dims for a in d.axes] + list(unreduced)
    if len(set(names)) == len(names) and not any(":" in a for a in names):
        # whole axes only (every name passed _axis_problem; unreduced names are checked by
        # the caller): two overlap exactly when they are the same name, and none repeats
        _limits.check_shape([d.size for d in dims], "ArrayType")
        return
    bad = _pairwise_overlap(dims, unreduced)
    if bad:
        raise TypeSpecError(bad)
    _limits.check_shape([d.size for d in dims], "ArrayType")


def parse_type(text, shape=None) -> ArrayType:
    """Parse either the canonical form ``[8{x}, 4]{U:y}`` or a PartitionSpec form
    such as ``P('x', None, unreduced={'y'})`` / ``('x', ('y','z'))`` (which needs
    ``shape``)."""
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
    spec, unreduced = parse_partition_spec_unreduced(s)
    return ArrayType.from_spec(shape, spec, unreduced)


def parse_partition_spec(text: str) -> tuple:
    """Parse ``P('x', None, ('y','z'))`` or ``('x', None)`` without evaluating code
    (the spec entries only; see :func:`parse_partition_spec_unreduced`)."""
    return parse_partition_spec_unreduced(text)[0]


def parse_partition_spec_unreduced(text: str) -> tuple[tuple, tuple[str, ...]]:
    """``(spec, unreduced)`` from ``P('x', None, unreduced={'y','z'})``, without
    evaluating code."""
    s = text.strip()
    bad = TypeSpecError(
        f"parse_partition_spec({text!r}): not a PartitionSpec; write e.g. "
        "\"P('x', None, ('y','z'))\" or \"P('x', None, unreduced={'y'})\""
    )
    call = False
    for prefix in ("PartitionSpec", "P"):
        if s.startswith(prefix + "("):
            s = s[len(prefix):]
            call = True
            break
    try:
        node = ast.parse("f" + s if call else s, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise bad from None
    unreduced: tuple[str, ...] = ()
    try:
        if call:
            if not isinstance(node, ast.Call):
                raise bad
            args = tuple(ast.literal_eval(a) for a in node.args)
            for kw in node.keywords:
                if kw.arg != "unreduced":
                    raise TypeSpecError(
                        f"parse_partition_spec({text!r}): unknown keyword {kw.arg!r}; only "
                        "unreduced={...} is understood")
                val = ast.literal_eval(kw.value)
                if isinstance(val, str):
                    val = (val,)
                if not isinstance(val, (set, frozenset, tuple, list)) or not val:
                    raise TypeSpecError(
                        f"parse_partition_spec({text!r}): unreduced must be a non-empty set of "
                        "axis names, e.g. unreduced={'y'}")
                unreduced = tuple(val)
            val = args
        else:
            val = ast.literal_eval(node)
    except TypeSpecError:
        raise
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise bad from None
    if not isinstance(val, tuple):
        val = (val,)
    return val, unreduced
