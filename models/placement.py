"""Placement: which topology chip each mesh device runs on.

``Placement.chips[d]`` is the chip (topology node) of mesh device ``d`` (device ids
are row-major over the mesh, as in ``jax.make_mesh``). Chips are numbered row-major
over the machine's physical dimensions (``machine.dims``, last fastest).

Text forms accepted by :meth:`Placement.parse` (the ``--placement`` option):

* ``row-major`` (or empty): device ``d`` on chip ``d`` -- the last mesh axis varies
  fastest over the last physical dimension;
* ``AXIS=FACTOR*FACTOR...,AXIS=...``: each mesh axis laid over physical factors,
  major to minor. A factor is a physical dimension -- by name (``X``, ``Y``, ``Z`` on
  tori; ``node``, ``gpu`` on GPU machines; ``cpu``) or by index (``0``, ``1`` ...) --
  optionally with a size, ``X:2``. A dimension split over several factors is
  divided in the order the factors appear in the string, first = major. Examples on
  a ``4x4x4`` torus: ``x=Z,y=Y,z=X`` (reverse the axes), ``x=X*Y,y=Z`` (a 16-way
  axis over two dimensions); on an 8-chip ring: ``y=X:2,x=X:4`` (``y`` strided by 4).
  Mesh axes of size 1 and physical dimensions of size 1 may be left out.
* ``devices:3,1,0,2`` or a JSON list ``[3,1,0,2]``: the chip of each device.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np

from models.errors import PlacementError

_FACTOR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*|\d+)\s*(?::\s*(\d+))?\s*$")


@dataclass(frozen=True)
class Placement:
    """``chips[d]``: the chip of mesh device ``d``. ``text`` is how it was given."""

    chips: tuple[int, ...]
    text: str = "row-major"

    def __post_init__(self):
        object.__setattr__(self, "chips", tuple(int(c) for c in self.chips))
        if sorted(self.chips) != list(range(len(self.chips))):
            raise PlacementError(
                f"Placement {self.text!r}: chips {list(self.chips)[:16]} are not a permutation of "
                f"0..{len(self.chips) - 1}; each device needs its own chip")

    def __len__(self) -> int:
        return len(self.chips)

    def __repr__(self) -> str:
        return f"Placement(text={self.text!r}, chips={self.chips[:8]}{'...' if len(self.chips) > 8 else ''})"

    def to_dict(self) -> dict:
        return {"text": self.text, "chips": list(self.chips)}

    @classmethod
    def row_major(cls, num_devices: int) -> Placement:
        return cls(tuple(range(num_devices)), "row-major")

    @classmethod
    def of(cls, placement, mesh, machine) -> Placement:
        """Accept ``None`` (row-major), a Placement, a string, or a sequence of chips."""
        n = machine.num_devices
        if mesh is not None and mesh.size != n:
            raise PlacementError(
                f"mesh {mesh} has {mesh.size} devices but hardware {machine.spec} has {n}; size the "
                f"hardware to match (e.g. {_suggest(machine, mesh)}) or change the mesh")
        if placement is None:
            return cls.row_major(n)
        if isinstance(placement, Placement):
            p = placement
        elif isinstance(placement, str):
            p = cls.parse(placement, mesh, machine)
        else:
            p = cls(tuple(placement), "devices")
        if len(p) != n:
            raise PlacementError(f"placement {p.text!r} places {len(p)} devices; the machine has {n}")
        return p

    @classmethod
    def parse(cls, text: str, mesh, machine) -> Placement:
        t = (text or "").strip()
        n = machine.num_devices
        if t in ("", "row-major", "row_major", "default"):
            return cls.row_major(n)
        if t.startswith("[") or t.startswith("devices:"):
            body = t if t.startswith("[") else "[" + t.split(":", 1)[1] + "]"
            try:
                chips = json.loads(body)
            except json.JSONDecodeError:
                raise PlacementError(f"placement {text!r}: not a list of chip ids like 'devices:3,1,0,2'") from None
            if not isinstance(chips, list) or not all(isinstance(c, int) for c in chips):
                raise PlacementError(f"placement {text!r}: expected integer chip ids")
            if len(chips) != n:
                raise PlacementError(f"placement {text!r}: lists {len(chips)} chips; the machine has {n}")
            return cls(tuple(chips), t)
        if mesh is None:
            raise PlacementError(f"placement {text!r}: an axis mapping needs the mesh")
        return cls(tuple(_axis_mapping(t, mesh, machine)), t)


def _suggest(machine, mesh) -> str:
    size = mesh.size
    if machine.kind == "torus":
        sizes = [s for s in mesh.sizes if s > 1] or [1]
        if len(sizes) <= len(machine.dims):
            sizes += [1] * (len(machine.dims) - len(sizes))
            return f"{machine.name}:" + "x".join(str(s) for s in sizes)
        return f"{machine.name}:{size}" + "x1" * (len(machine.dims) - 1)
    if machine.kind == "switched":
        g = machine.dims[1]
        return f"{machine.name}:{size // g}" if size % g == 0 else f"{machine.name}:1x{size}"
    return f"{machine.name}:{size}"


def _dim_index(name: str, machine, text: str) -> int:
    names = [n.lower() for n in machine.dim_names]
    if name.isdigit():
        k = int(name)
        if k >= len(machine.dims):
            raise PlacementError(f"placement {text!r}: physical dim {k} does not exist; {machine.spec} has "
                                 f"dims {list(machine.dim_names)} of sizes {list(machine.dims)}")
        return k
    if name.lower() in names:
        return names.index(name.lower())
    raise PlacementError(f"placement {text!r}: unknown physical dim {name!r}; {machine.spec} has dims "
                         f"{list(machine.dim_names)} (or use indices 0..{len(machine.dims) - 1})")


def _axis_mapping(text: str, mesh, machine) -> list[int]:
    dims = machine.dims
    factors_of_axis: dict[str, list[list]] = {}
    per_dim: dict[int, list[list]] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise PlacementError(f"placement {text!r}: item {item!r} is not AXIS=DIM[*DIM...], e.g. 'x=X,y=Y*Z'")
        axis, _, rhs = item.partition("=")
        axis = axis.strip()
        if axis not in mesh.names:
            raise PlacementError(f"placement {text!r}: {axis!r} is not an axis of mesh {mesh}")
        if axis in factors_of_axis:
            raise PlacementError(f"placement {text!r}: mesh axis {axis!r} is placed twice")
        fl = []
        for f in rhs.split("*"):
            m = _FACTOR.match(f)
            if not m:
                raise PlacementError(f"placement {text!r}: factor {f.strip()!r} is not DIM or DIM:SIZE")
            k = _dim_index(m.group(1), machine, text)
            fac = [k, int(m.group(2)) if m.group(2) else None]
            fl.append(fac)
            per_dim.setdefault(k, []).append(fac)
        factors_of_axis[axis] = fl
    # resolve factor sizes per physical dim
    for k, fl in per_dim.items():
        known = [f[1] for f in fl if f[1] is not None]
        unknown = [f for f in fl if f[1] is None]
        if any(s < 1 for s in known):
            raise PlacementError(f"placement {text!r}: factor sizes must be >= 1")
        if len(unknown) > 1:
            raise PlacementError(f"placement {text!r}: physical dim {machine.dim_names[k]} is split without "
                                 "sizes; give all but one factor a size, e.g. X:2")
        rest, pk = dims[k], math.prod(known)
        if unknown:
            if rest % pk:
                raise PlacementError(f"placement {text!r}: factor sizes {known} do not divide "
                                     f"{machine.dim_names[k]}={rest}")
            unknown[0][1] = rest // pk
        elif pk != rest:
            raise PlacementError(f"placement {text!r}: factors of {machine.dim_names[k]} multiply to {pk}, "
                                 f"not its size {rest}")
    for a, s in mesh.axes:
        fl = factors_of_axis.get(a)
        if fl is None:
            if s > 1:
                raise PlacementError(f"placement {text!r}: mesh axis {a!r} (size {s}) is not placed")
            continue
        if math.prod(f[1] for f in fl) != s:
            raise PlacementError(f"placement {text!r}: mesh axis {a}={s} but its factors "
                                 f"{'*'.join(f'{machine.dim_names[f[0]]}:{f[1]}' for f in fl)} have size "
                                 f"{math.prod(f[1] for f in fl)}")
    for k, s in enumerate(dims):
        if s > 1 and k not in per_dim:
            raise PlacementError(f"placement {text!r}: physical dim {machine.dim_names[k]} (size {s}) is not "
                                 "used; every physical dim of size > 1 must be covered")
    # compute chips
    coords = mesh.coords
    P = mesh.size
    phys = np.zeros((P, len(dims)), dtype=np.int64)
    # factor coordinate of each device
    fcoord = {}
    for i, (a, _s) in enumerate(mesh.axes):
        fl = factors_of_axis.get(a)
        if not fl:
            continue
        c = coords[:, i].copy()
        for f in reversed(fl):  # minor-most first
            fcoord[id(f)] = c % f[1]
            c //= f[1]
    for k, fl in per_dim.items():
        acc = np.zeros(P, dtype=np.int64)
        for f in fl:  # first listed = major
            acc = acc * f[1] + fcoord[id(f)]
        phys[:, k] = acc
    strides = np.array([math.prod(dims[i + 1:]) for i in range(len(dims))], dtype=np.int64)
    return (phys @ strides).tolist()
