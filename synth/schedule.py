"""Device-level schedules: what the simulator replays.

A :class:`Schedule` is a list of :class:`ScheduleOp`. Each op has a ``kind`` and
either device ``groups`` (each group ordered; the collective runs within each group)
or ``(src, dst)`` ``pairs`` (for a permute), plus per-device byte counts:

* ``in_bytes``   -- buffer each participating device holds before the op;
* ``out_bytes``  -- buffer each participating device holds after the op;
* ``send_bytes`` -- bytes each participant sends (for a permute: each pair's payload);
* ``recv_bytes`` -- bytes each participant receives (for a permute: each pair's payload).

Kinds: ``dyn_slice`` (local), ``all_gather``, ``all_to_all``, ``permute``,
``all_reduce``, ``reduce_scatter`` and ``copy`` (local). Both our plans and XLA's
compiled HLO lower to this form, so every strategy is costed the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from synth.errors import RedistributionError

SCHEDULE_KINDS = (
    "dyn_slice",
    "copy",
    "all_gather",
    "all_to_all",
    "permute",
    "all_reduce",
    "reduce_scatter",
)
LOCAL_KINDS = ("dyn_slice", "copy")
#: Kinds whose output overwrites their input (one buffer live, not two): the simulator's
#: memory replay neither allocates nor frees for them (``AllReduce.peak_elems``).
IN_PLACE_KINDS = ("all_reduce",)


@dataclass(frozen=True)
class ScheduleOp:
    kind: str
    in_bytes: int
    out_bytes: int
    send_bytes: int = 0
    recv_bytes: int = 0
    groups: tuple[tuple[int, ...], ...] = ()
    pairs: tuple[tuple[int, int], ...] = ()
    label: str = ""

    def __post_init__(self):
        if self.kind not in SCHEDULE_KINDS:
            raise RedistributionError(
                f"ScheduleOp: unknown kind {self.kind!r}; expected one of {list(SCHEDULE_KINDS)}"
            )
        object.__setattr__(self, "groups", tuple(tuple(int(x) for x in g) for g in self.groups))
        object.__setattr__(self, "pairs", tuple((int(a), int(b)) for a, b in self.pairs))

    @property
    def is_local(self) -> bool:
        return self.kind in LOCAL_KINDS

    def participants(self) -> set[int]:
        if self.kind == "permute":
            return {d for p in self.pairs for d in p}
        return {d for g in self.groups for d in g}

    def to_dict(self) -> dict:
        d = {
            "kind": self.kind,
            "in_bytes": self.in_bytes,
            "out_bytes": self.out_bytes,
            "send_bytes": self.send_bytes,
            "recv_bytes": self.recv_bytes,
            "label": self.label,
        }
        if self.kind == "permute":
            d["pairs"] = [list(p) for p in self.pairs]
        else:
            d["groups"] = [list(g) for g in self.groups]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ScheduleOp:
        try:
            return cls(
                kind=d["kind"],
                in_bytes=int(d["in_bytes"]),
                out_bytes=int(d["out_bytes"]),
                send_bytes=int(d.get("send_bytes", 0)),
                recv_bytes=int(d.get("recv_bytes", 0)),
                groups=tuple(tuple(g) for g in d.get("groups", ())),
                pairs=tuple(tuple(p) for p in d.get("pairs", ())),
                label=str(d.get("label", "")),
            )
        except KeyError as e:
            raise RedistributionError(f"ScheduleOp.from_dict: missing field {e.args[0]!r} in {d!r}") from None


@dataclass(frozen=True)
class Schedule:
    num_devices: int
    ops: tuple[ScheduleOp, ...]
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "ops", tuple(self.ops))
        for i, op in enumerate(self.ops):
            for d in op.participants():
                if not (0 <= d < self.num_devices):
                    raise RedistributionError(
                        f"Schedule {self.name!r}: op {i} ({op.kind}) names device {d}, outside "
                        f"0..{self.num_devices - 1}"
                    )

    @property
    def initial_bytes(self) -> int:
        return int(self.meta.get("initial_bytes", self.ops[0].in_bytes if self.ops else 0))

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "num_devices": self.num_devices,
            "meta": self.meta,
            "ops": [op.to_dict() for op in self.ops],
        }

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict) -> Schedule:
        if not isinstance(d, dict) or "ops" not in d or "num_devices" not in d:
            raise RedistributionError(
                "schedule: expected an object with 'num_devices' and 'ops', got "
                f"{type(d).__name__ if not isinstance(d, dict) else 'keys ' + str(sorted(map(str, d))[:8])}"
            )
        from synth.schema import ScheduleFile, check_schedule_caps, validate

        check_schedule_caps(d)
        validate(ScheduleFile, d, "schedule")  # one line naming the field, never a TypeError
        return cls(
            num_devices=int(d["num_devices"]),
            ops=tuple(ScheduleOp.from_dict(o) for o in d["ops"]),
            name=str(d.get("name", "")),
            meta=dict(d.get("meta", {})),
        )

    @classmethod
    def load(cls, path) -> Schedule:
        """Read a schedule JSON, validated by :class:`synth.schema.ScheduleFile` (UTF-8,
        non-negative integer bytes, integer device ids, no device twice in a group)."""
        from synth.schema import load_schedule_data

        return cls.from_dict(load_schedule_data(path))
