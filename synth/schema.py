"""Schemas (pydantic v2) for the files users hand the tools, and one-line errors.

* :func:`error_line` turns a pydantic ``ValidationError`` into one line naming the
  field path, the value and the rule it broke, e.g.
  ``ops[2].groups[0][1]: 1.5 is not an integer``.
* :class:`ScheduleFile` is the schema of a schedule JSON (``simulator run
  --schedule``, what ``executor xla-schedule --out`` writes); :func:`load_schedule_data`
  reads and validates one (UTF-8, size-limited, see :mod:`synth.fileio`).

Imported lazily (pydantic is not needed to ``import synth``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from synth.errors import RedistributionError, SchemaError
from synth.limits import limit
from synth.schedule import SCHEDULE_KINDS

#: The largest byte count a schedule may name (far above any real buffer; keeps sums in int64).
MAX_BYTES = 2**62


def _loc(loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _short(v, n: int = 60) -> str:
    r = repr(v)
    r = r.replace("\n", "\\n").replace("\r", "\\r")
    return r if len(r) <= n else r[: n - 3] + "..."


def _real_path(loc, data) -> list:
    """The parts of a pydantic ``loc`` that index into ``data`` (dropping union-branch
    tags such as ``function-after[...]`` or ``int``)."""
    out, cur = [], data
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, (list, tuple)) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
    return out


def error_line(e: ValidationError, where: str, data=None) -> str:
    """One line for the most specific error of ``e`` (the one reaching deepest into
    ``data``) and how many more there are."""
    errs = e.errors(include_url=False)
    if data is not None:
        first = max(errs, key=lambda x: len(_real_path(x.get("loc", ()), data)))
        loc = _real_path(first.get("loc", ()), data)
    else:
        first = errs[0]
        loc = list(first.get("loc", ()))
    msg = str(first.get("msg", "invalid")).replace("\n", " ")
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    msg = re.sub(r" or instance of \w+", "", msg)
    if first.get("type") == "missing" and first.get("loc"):
        loc = loc + [first["loc"][-1]]
    inp = first.get("input")
    shown = "" if first.get("type") in ("missing",) or isinstance(inp, (dict, list)) else f" (value {_short(inp)})"
    return f"{where}: {_loc(loc)}: {msg}{shown}"


_Bytes = Field(default=0, ge=0, le=MAX_BYTES)


class _Op(BaseModel):
    model_config = ConfigDict(extra="allow")

    kind: Literal[SCHEDULE_KINDS]  # type: ignore[valid-type]
    in_bytes: StrictInt = Field(ge=0, le=MAX_BYTES)
    out_bytes: StrictInt = Field(ge=0, le=MAX_BYTES)
    send_bytes: StrictInt = _Bytes
    recv_bytes: StrictInt = _Bytes
    groups: list[list[StrictInt]] = []
    pairs: list[tuple[StrictInt, StrictInt]] = []
    label: str = ""

    @field_validator("groups")
    @classmethod
    def _groups(cls, gs):
        for i, g in enumerate(gs):
            if not g:
                raise ValueError(f"group {i} is empty")
            if len(set(g)) != len(g):
                dup = next(d for d in g if g.count(d) > 1)
                raise ValueError(f"group {i} names device {dup} twice")
            if min(g) < 0:
                raise ValueError(f"group {i} names a negative device id")
        return gs

    @field_validator("pairs")
    @classmethod
    def _pairs(cls, ps):
        for i, (a, b) in enumerate(ps):
            if a < 0 or b < 0:
                raise ValueError(f"pair {i} names a negative device id")
        if len({b for _, b in ps}) != len(ps):
            raise ValueError("a device receives from two sources in one permute")
        return ps

    @model_validator(mode="after")
    def _shape(self):
        if self.kind == "permute" and self.groups:
            raise ValueError("a permute lists 'pairs', not 'groups'")
        if self.kind != "permute" and self.pairs:
            raise ValueError(f"a {self.kind} lists 'groups', not 'pairs'")
        if self.groups:
            seen: set[int] = set()
            for g in self.groups:
                both = seen.intersection(g)
                if both:
                    raise ValueError(f"device {min(both)} is in two groups of one op")
                seen.update(g)
        return self


class _Meta(BaseModel):
    """The fields of ``meta`` the tools read; others are kept as notes."""

    model_config = ConfigDict(extra="allow")

    initial_bytes: StrictInt | None = Field(default=None, ge=0, le=MAX_BYTES)
    itemsize: StrictInt | None = Field(default=None, ge=1, le=64)
    temp_bytes: StrictInt | None = Field(default=None, ge=0, le=MAX_BYTES)
    mesh: str | dict[str, StrictInt] | None = None
    src: str | None = None
    dst: str | None = None
    full_remat: bool | None = None
    full_remat_reason: str | None = None
    compiler: str | None = None


class ScheduleFile(BaseModel):
    """A schedule JSON: ``{name, num_devices, meta, ops: [...]}`` (see synth.schedule).
    At most ``schedule_ops`` ops and ``schedule_ids`` device ids over all groups and pairs
    (synth.limits), checked before the ops are validated."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    num_devices: StrictInt = Field(ge=1)
    meta: _Meta = _Meta()
    ops: list[_Op]

    @model_validator(mode="before")
    @classmethod
    def _caps(cls, d):
        check_schedule_caps(d)
        return d

    @field_validator("num_devices")
    @classmethod
    def _devices(cls, n):
        if n > limit("devices"):
            raise ValueError(f"{n:,} devices is above the limit of {limit('devices'):,} "
                             "(set REDIST_LIMIT_DEVICES to change it)")
        return n

    @model_validator(mode="after")
    def _ids(self):
        for i, op in enumerate(self.ops):
            ids = [d for g in op.groups for d in g] + [d for p in op.pairs for d in p]
            if ids and max(ids) >= self.num_devices:
                raise ValueError(f"ops[{i}] names device {max(ids)}, outside 0..{self.num_devices - 1}")
        return self


def check_schedule_caps(d, where: str = "schedule") -> None:
    """Refuse more than ``schedule_ops`` ops or ``schedule_ids`` device ids (cheap counts
    before any per-op work: 2,000,000 tiny ops must not take 2 GB to refuse)."""
    from synth.limits import LimitError

    if not isinstance(d, dict) or not isinstance(d.get("ops"), list):
        return
    ops = d["ops"]
    if len(ops) > limit("schedule_ops"):
        raise LimitError(f"{where}: {len(ops):,} ops; the limit is {limit('schedule_ops'):,} "
                         "(set REDIST_LIMIT_SCHEDULE_OPS to change it)")
    ids = 0
    for op in ops:
        if isinstance(op, dict):
            for key in ("groups", "pairs"):
                v = op.get(key)
                if isinstance(v, list):
                    ids += sum(len(g) if isinstance(g, (list, tuple)) else 1 for g in v)
    if ids > limit("schedule_ids"):
        raise LimitError(f"{where}: {ids:,} device ids over its groups and pairs; the limit is "
                         f"{limit('schedule_ids'):,} (set REDIST_LIMIT_SCHEDULE_IDS to change it)")


def validate(model: type[BaseModel], data, where: str):
    """``model.model_validate(data)`` with a one-line :class:`RedistributionError`."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise SchemaError(error_line(e, where, data)) from None
    except RecursionError:
        raise SchemaError(f"{where}: nested too deeply") from None


def load_schedule_data(path) -> dict:
    """Read and validate a schedule file; returns the JSON object (validated)."""
    from synth.fileio import read_json

    where = f"schedule file {path}"
    data = read_json(path, "schedule file", finite=True)
    if not isinstance(data, dict):
        raise RedistributionError(f"{where}: the top level must be an object with 'num_devices' and 'ops', "
                                  f"got {type(data).__name__}")
    check_schedule_caps(data, where)
    validate(ScheduleFile, data, where)
    return data
