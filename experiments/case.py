"""The value types of an experiment: a named redistribution case and its dtype.

A :class:`Case` is one redistribution a suite names: a mesh, a source and a target
type (canonical text), an element type, and where it comes from. Cases are frozen
and carry only strings and numbers, so they pickle to worker processes and hash to
stable ids.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from synth.errors import RedistributionError
from synth.mesh import Mesh
from synth.types import ArrayType

#: Bytes per element of the dtypes suites use.
DTYPE_BYTES = {
    "float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "float8": 1,
    "int64": 8, "int32": 4, "int8": 1,
}


class ExperimentError(RedistributionError):
    """A user error in an experiment: a bad config, suite, case or results folder."""


def itemsize_of(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ExperimentError(
            f"dtype {dtype!r} is not known; use one of {sorted(DTYPE_BYTES)}"
        ) from None


@dataclass(frozen=True)
class Case:
    """One named redistribution: ``src`` to ``dst`` on ``mesh``.

    ``layout`` names the real layout change it comes from; ``ref`` is an issue URL
    (for the ``xla-issues`` suite) or a paper/model reference.
    """

    name: str
    suite: str
    mesh: str
    src: str
    dst: str
    dtype: str = "bfloat16"
    layout: str = ""
    description: str = ""
    ref: str = ""

    def __post_init__(self):
        # Canonicalize: the mesh and types are stored in their canonical text.
        object.__setattr__(self, "mesh", str(Mesh.of(self.mesh)))
        object.__setattr__(self, "src", str(ArrayType.of(self.src)))
        object.__setattr__(self, "dst", str(ArrayType.of(self.dst)))
        itemsize_of(self.dtype)

    @property
    def itemsize(self) -> int:
        return itemsize_of(self.dtype)

    @property
    def num_devices(self) -> int:
        return Mesh.of(self.mesh).size

    def parsed(self) -> tuple[Mesh, ArrayType, ArrayType]:
        return Mesh.of(self.mesh), ArrayType.parse(self.src), ArrayType.parse(self.dst)

    def check(self) -> Case:
        """Both types valid on the mesh, same global shape, and not equal."""
        mesh, src, dst = self.parsed()
        src.check(mesh, f"case {self.name!r}: source type")
        dst.check(mesh, f"case {self.name!r}: target type")
        if src.shape != dst.shape:
            raise ExperimentError(
                f"case {self.name!r}: source {src} and target {dst} have different shapes"
            )
        return self

    def array_bytes(self) -> int:
        return ArrayType.parse(self.src).num_elems() * self.itemsize

    def key(self) -> dict:
        """What identifies the redistribution (the name and prose do not)."""
        return {"mesh": self.mesh, "src": self.src, "dst": self.dst, "dtype": self.dtype}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Case:
        try:
            return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
        except TypeError as e:
            raise ExperimentError(f"case {d!r}: {e}") from None


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def stable_hash(obj, n: int = 16) -> str:
    """Hex digest of the canonical JSON of ``obj`` (first ``n`` characters)."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:n]
