"""Sweep configs: YAML (``yaml.safe_load``) -> a :class:`Config` -> work units.

Schema (every key but ``suites``/``cases`` has a default)::

    name: smoke                         # free text, shown in the report
    suites:                             # a list; each item a name or {name: {params}}
      - transformer: {max_devices: 64}
      - xla-issues
      - random: {count: 10, seed: 0, max_devices: 32}
    cases:                              # optional inline cases (same fields as Case)
      - {name: mine, mesh: "x=2,y=4", src: "[64{x}, 64{y}]", dst: "[64{y}, 64{x}]"}
    machines:                           # profile names, or {profile, sizes: {devices: shape}}
      - tpu-v4
      - {profile: h100-dgx, sizes: {64: "8x8"}}
    planners: [easy, normal, xla-shardy, xla-gspmd]
    whatif:                             # every combination is run
      bandwidth_scale: [1.0, 2.0]
      latency_scale: [1.0]
      itemsize: [null]                  # null = the case's dtype
      placement: [default]              # default, reversed-axes, random[:SEED], or a
                                        # models placement string (x=Z,y=Y)
    # ... or a list of such mappings: the union of their products plus the baseline,
    # e.g. [{bandwidth_scale: [0.5, 2]}, {placement: [reversed-axes]}]
    measure:                            # the executor's compare on the local JAX backend
      enabled: false
      max_devices: 8                    # only cases this small are measured
      max_bytes: 67108864               # ... and arrays at most this large
    runner:
      workers: 2                        # default: number of CPUs
      timeout_s: 300                    # per work unit
      xla_max_devices: 2048
      simulator: simpy                  # or 'analytic' (closed-form costs, no queueing)

The schema is checked by pydantic v2 models (:class:`ConfigSchema` and its parts); every
error is one line naming the field path, the value and the rule, e.g.
``c.yaml: suites[0].random.count: must be at most 100,000 (...) (value 100000000)``.
Machines are loaded when the config is (an unknown profile is a config error). Counts are
capped by :mod:`synth.limits` (cases, devices, itemsize, repeats); a config may expand to
at most 10x the cases limit rows.

A *work unit* is one (case, planner, itemsize): it synthesizes or extracts one
schedule, then simulates it on every machine x bandwidth x latency x placement, and
yields one row for each. A row's id is the hash of its canonical JSON spec.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

from experiments.backends import PLANNERS, XLA_MAX_DEVICES, XLA_PLANNERS
from experiments.case import Case, ExperimentError, stable_hash
from synth.limits import limit

#: Most values in one what-if list, machines and planners in one config.
MAX_LIST = 1000


@dataclass(frozen=True)
class Machine:
    profile: str
    sizes: tuple[tuple[int, str], ...] = ()

    @property
    def label(self) -> str:
        return self.profile

    def sizes_dict(self) -> dict:
        return dict(self.sizes)


@dataclass(frozen=True)
class Knobs:
    bandwidth_scale: float = 1.0
    latency_scale: float = 1.0
    itemsize: int | None = None
    placement: str = "default"

    def is_baseline(self) -> bool:
        return self.bandwidth_scale == 1.0 and self.latency_scale == 1.0 and \
            self.itemsize is None and self.placement == "default"


@dataclass(frozen=True)
class Unit:
    """One schedule to build (case x planner x itemsize) and the rows it yields."""

    case: Case
    planner: str
    itemsize: int
    itemsize_knob: int | None
    rows: tuple[tuple[str, Machine, Knobs], ...]  # (row id, machine, knobs)
    measure: bool = False

    @property
    def ids(self) -> list[str]:
        return [r[0] for r in self.rows]


@dataclass(frozen=True)
class Config:
    name: str
    cases: tuple[Case, ...]
    machines: tuple[Machine, ...]
    planners: tuple[str, ...]
    knobs: tuple[Knobs, ...]
    measure: dict = field(default_factory=dict)
    runner: dict = field(default_factory=dict)
    description: str = ""
    path: str = ""

    def units(self) -> list[Unit]:
        """All work units, ordered by (needs jax, device count) so that workers with
        the same JAX device count run together."""
        out = []
        for case in self.cases:
            for planner in self.planners:
                by_item: dict = {}
                for k in self.knobs:
                    by_item.setdefault(k.itemsize, []).append(k)
                for item_knob, ks in by_item.items():
                    itemsize = item_knob or case.itemsize
                    do_measure = self._measure_case(case, itemsize)
                    rows = []
                    for m in self.machines:
                        for k in ks:
                            rows.append((row_id(case, m, planner, k, do_measure), m, k))
                    out.append(Unit(case, planner, itemsize, item_knob, tuple(rows), do_measure))
        out.sort(key=lambda u: (u.planner in XLA_PLANNERS or u.measure, u.case.num_devices))
        return out

    def _measure_case(self, case: Case, itemsize: int) -> bool:
        m = self.measure
        if not m.get("enabled"):
            return False
        try:
            nbytes = case.array_bytes() // case.itemsize * itemsize
        except ExperimentError:
            return False
        return case.num_devices <= int(m.get("max_devices", 8)) and nbytes <= int(m.get("max_bytes", 64 << 20))

    @property
    def workers(self) -> int:
        return int(self.runner.get("workers") or os.cpu_count() or 1)

    @property
    def timeout_s(self) -> float:
        return float(self.runner.get("timeout_s", 300))

    @property
    def xla_max_devices(self) -> int:
        return int(self.runner.get("xla_max_devices", XLA_MAX_DEVICES))


def row_id(case: Case, machine: Machine, planner: str, knobs: Knobs, measure: bool) -> str:
    spec = {
        "case": case.to_dict(), "machine": {"profile": machine.profile, "sizes": dict(machine.sizes)},
        "planner": planner, "knobs": knobs.__dict__, "measure": measure,
    }
    return stable_hash(spec)


# -- schema (pydantic v2) ----------------------------------------------------------------------
def _finite_positive(v):
    if not math.isfinite(v) or v <= 0:
        raise ValueError("must be a positive finite number")
    return float(v)


def _finite_nonneg(v):
    if not math.isfinite(v) or v < 0:
        raise ValueError("must be a finite number >= 0")
    return float(v)


def _max(name: str):
    def check(v):
        if v > limit(name):
            raise ValueError(f"must be at most {limit(name):,} (the {name} limit; set "
                             f"REDIST_LIMIT_{name.upper()} to change it)")
        return v
    return check


def _as_list(v):
    return v if isinstance(v, list) and v else [v]


def _str_or_number(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return v


_Number = StrictInt | StrictFloat
_PositiveScale = Annotated[_Number, AfterValidator(_finite_positive), Field(le=1e6)]
_Text = Annotated[str, BeforeValidator(_str_or_number), Field(max_length=10_000)]
_Name = Annotated[str, BeforeValidator(_str_or_number), Field(min_length=1, max_length=200)]
_PosInt = Annotated[StrictInt, Field(ge=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WhatIfSchema(_Strict):
    """One what-if mapping: each knob a value or a list of values (their product is run)."""

    bandwidth_scale: Annotated[list[_PositiveScale], BeforeValidator(_as_list), Field(max_length=MAX_LIST)] = [1.0]
    latency_scale: Annotated[list[_PositiveScale], BeforeValidator(_as_list), Field(max_length=MAX_LIST)] = [1.0]
    itemsize: Annotated[list[Annotated[_PosInt, AfterValidator(_max("itemsize"))] | None],
                        BeforeValidator(_as_list), Field(max_length=MAX_LIST)] = [None]
    placement: Annotated[list[Annotated[str, Field(min_length=1, max_length=1000)] | None],
                         BeforeValidator(_as_list), Field(max_length=MAX_LIST)] = ["default"]


class MeasureSchema(_Strict):
    enabled: StrictBool = False
    max_devices: Annotated[_PosInt, AfterValidator(_max("cpu_devices"))] = 8
    max_bytes: Annotated[_PosInt, Field(le=2**62)] = 64 << 20
    warmup: Annotated[StrictInt, Field(ge=0), AfterValidator(_max("repeats"))] = 3
    repeats: Annotated[_PosInt, AfterValidator(_max("repeats"))] = 10


class RunnerSchema(_Strict):
    workers: Annotated[_PosInt, Field(le=1024)] | None = None
    timeout_s: Annotated[_Number, AfterValidator(_finite_positive), Field(le=7 * 86400)] = 300
    xla_max_devices: Annotated[_PosInt, AfterValidator(_max("cpu_devices"))] = XLA_MAX_DEVICES
    unit_delay_s: Annotated[_Number, AfterValidator(_finite_nonneg), Field(le=3600)] = 0.0
    simulator: str = "simpy"
    #: Our planners whose plans are compiled by each machine's own compiler (the others
    #: keep the plan's own schedule, ``compiler = none``; their totals are not compared
    #: with XLA's, only their collectives).
    compile: Annotated[list[str], Field(max_length=MAX_LIST)] = ["auto"]

    @field_validator("compile")
    @classmethod
    def _compile(cls, v):
        from experiments.backends import OUR_PLANNERS

        for pl in v:
            if pl not in OUR_PLANNERS:
                raise ValueError(f"runner.compile: {pl!r} is not one of our planners {list(OUR_PLANNERS)}")
        return v

    @field_validator("simulator")
    @classmethod
    def _sim(cls, v):
        if v not in ("simpy", "analytic"):
            raise ValueError("runner.simulator must be 'simpy' (event replay) or 'analytic'")
        return v


class SuiteParamsSchema(_Strict):
    """Generator parameters and filters of a suite (which apply to which suite is
    checked by :func:`experiments.suites.load_suite`)."""

    count: Annotated[StrictInt, Field(ge=0), AfterValidator(_max("cases"))] | None = None
    seed: Annotated[StrictInt, Field(ge=0, lt=2**63)] | None = None
    max_devices: Annotated[_PosInt, AfterValidator(_max("devices"))] | None = None
    min_devices: Annotated[_PosInt, AfterValidator(_max("devices"))] | None = None
    names: Annotated[list[_Name], Field(max_length=100_000)] | None = None


class CaseSchema(_Strict):
    name: _Name
    mesh: Annotated[str, Field(min_length=1, max_length=1000)]
    src: Annotated[str, Field(min_length=1, max_length=10_000)]
    dst: Annotated[str, Field(min_length=1, max_length=10_000)]
    suite: _Name = "inline"
    dtype: str = "bfloat16"
    layout: _Text = ""
    description: _Text = ""
    ref: _Text = ""


class MachineSchema(_Strict):
    profile: Annotated[str, Field(min_length=1, max_length=1000)]
    sizes: dict[Annotated[_PosInt, AfterValidator(_max("devices"))],
                Annotated[str, BeforeValidator(_str_or_number), Field(max_length=100)]] | None = None


class ConfigSchema(_Strict):
    name: _Text | None = None
    description: _Text | None = None
    suites: Annotated[list[_Name | dict[_Name, SuiteParamsSchema | None]], Field(max_length=MAX_LIST)] | None = None
    cases: Annotated[list[CaseSchema], Field(max_length=100_000)] | None = None
    machines: Annotated[list[Annotated[str, Field(min_length=1, max_length=1000)] | MachineSchema],
                        Field(max_length=MAX_LIST)] | None = None
    planners: Annotated[list[str], Field(max_length=MAX_LIST)] | None = None
    whatif: WhatIfSchema | Annotated[list[WhatIfSchema], Field(max_length=MAX_LIST)] | None = None
    measure: MeasureSchema | None = None
    runner: RunnerSchema | None = None

    @field_validator("suites")
    @classmethod
    def _suites(cls, v):
        for i, item in enumerate(v or []):
            if isinstance(item, dict) and len(item) != 1:
                raise ValueError(f"suites[{i}] must be a suite name or {{name: {{params}}}} with one name, "
                                 f"got {len(item)} names")
        return v

    @field_validator("planners")
    @classmethod
    def _planners(cls, v):
        for pl in v or []:
            if pl not in PLANNERS:
                raise ValueError(f"unknown planner {pl!r}; choose from {list(PLANNERS)}")
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"planners {v} lists one twice")
        return v


def _submodel(model, loc):
    """The pydantic model that the (string) parts of ``loc`` lead to, for naming the
    keys it allows."""
    import typing

    def models_in(tp):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [tp]
        return [m for a in typing.get_args(tp) for m in models_in(a)]

    cur = model
    for part in loc:
        if not isinstance(part, str) or part not in cur.model_fields:
            continue
        inner = models_in(cur.model_fields[part].annotation)
        if not inner:
            break
        cur = inner[0]
    return cur


def _error_line(e: ValidationError, where: str, data) -> str:
    from synth.schema import error_line

    first = e.errors(include_url=False)[0]
    if first.get("type") == "extra_forbidden":
        loc = first["loc"]
        owner = _submodel(ConfigSchema, loc[:-1])
        path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc[:-1]).replace(".[", "[")
        at = f" in {path}" if path else ""
        return f"{where}: unknown key {loc[-1]!r}{at}; allowed: {sorted(owner.model_fields)}"
    return error_line(e, where, data)


# -- loading ---------------------------------------------------------------------------------
def load_config(path) -> Config:
    """Read a YAML config (UTF-8) and validate it; every error is one line."""
    import yaml

    from synth.fileio import read_text

    text = read_text(path, "config file", limit_name="yaml_bytes")  # a regular file, capped before reading
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        problem = " ".join(str(getattr(e, "problem", None) or getattr(e, "context", None) or
                               type(e).__name__).split())
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ExperimentError(f"config {path}: not valid YAML: {problem}{at}") from None
    except RecursionError:
        raise ExperimentError(f"config {path}: nested too deeply") from None
    return parse_config(data, str(path))


def parse_config(data, where: str = "config") -> Config:
    if not isinstance(data, dict):
        raise ExperimentError(f"{where}: the top level must be a mapping with 'suites', 'machines', ..., "
                              f"got {type(data).__name__}")
    try:
        cfg = ConfigSchema.model_validate(data)
    except ValidationError as e:
        raise ExperimentError(_error_line(e, where, data)) from None
    except RecursionError:
        raise ExperimentError(f"{where}: nested too deeply") from None
    cases = _load_cases(cfg, where)
    machines = tuple(_machine(m, f"{where}: machines[{i}]")
                     for i, m in enumerate(cfg.machines if cfg.machines is not None else ["tpu-v4"]))
    if not machines:
        raise ExperimentError(f"{where}: 'machines' is empty; name at least one profile, e.g. [tpu-v4]")
    planners = tuple(cfg.planners if cfg.planners is not None else PLANNERS)
    if not planners:
        raise ExperimentError(f"{where}: 'planners' is empty; choose from {list(PLANNERS)}")
    knobs = _knobs(cfg.whatif)
    rows = len(cases) * len(machines) * len(planners) * len(knobs)
    if rows > 10 * limit("cases"):
        raise ExperimentError(f"{where}: {len(cases)} cases x {len(machines)} machines x {len(planners)} "
                              f"planners x {len(knobs)} what-if combinations = {rows:,} rows; the limit is "
                              f"{10 * limit('cases'):,} (10 x the cases limit; set REDIST_LIMIT_CASES)")
    measure = cfg.measure.model_dump(exclude_unset=True) if cfg.measure is not None else {}
    runner = cfg.runner.model_dump(exclude_unset=True) if cfg.runner is not None else {}
    return Config(
        name=cfg.name if cfg.name is not None else Path(where).stem, cases=cases, machines=machines,
        planners=planners, knobs=knobs, measure=measure, runner=runner,
        description=cfg.description or "", path=where,
    )


def _load_cases(cfg: ConfigSchema, where) -> tuple[Case, ...]:
    from experiments.suites import load_suite

    out: list[Case] = []
    for item in cfg.suites or []:
        if isinstance(item, str):
            name, params = item, {}
        else:
            name, p = next(iter(item.items()))
            params = p.model_dump(exclude_none=True) if p is not None else {}
        try:
            out += load_suite(name, **params)
        except ExperimentError as e:
            raise ExperimentError(f"{where}: {e}") from None
        if len(out) > limit("cases"):
            break
    for i, c in enumerate(cfg.cases or []):
        try:
            out.append(Case.from_dict(c.model_dump()))
        except ExperimentError as e:
            raise ExperimentError(f"{where}: cases[{i}]: {e}") from None
        except ValueError as e:  # RedistributionError from the mesh or types
            raise ExperimentError(f"{where}: cases[{i}] {c.name!r}: {e}") from None
    if not out:
        raise ExperimentError(f"{where}: no cases; list at least one suite under 'suites' or add 'cases'")
    if len(out) > limit("cases"):
        raise ExperimentError(f"{where}: more than {limit('cases'):,} cases; the limit is {limit('cases'):,} "
                              "cases of one suite or config (set REDIST_LIMIT_CASES to change it)")
    seen = {}
    for c in out:
        key = (c.suite, c.name)
        if key in seen:
            raise ExperimentError(f"{where}: case {c.name!r} of suite {c.suite!r} appears twice")
        seen[key] = c
    return tuple(out)


def _machine(m, where: str) -> Machine:
    """A machine whose profile loads (an unknown name or a broken profile file is a
    config error, exit 2, not an error row per case); explicit sizes must load too.
    A case that the profile cannot be sized for stays an error row of that case."""
    import models

    machine = Machine(m) if isinstance(m, str) else Machine(m.profile, tuple(sorted((m.sizes or {}).items())))
    try:
        models.load_profile(machine.profile)
        for n, size in machine.sizes:
            prof = models.load_profile(machine.profile, size)
            if prof.num_devices != n:
                raise ExperimentError(f"size {size!r} gives {prof.num_devices} devices, not {n}")
    except ValueError as e:  # RedistributionError from models
        raise ExperimentError(f"{where}: {e}") from None
    return machine


def _knobs(w) -> tuple[Knobs, ...]:
    """A mapping is the product of its value lists; a list of mappings is the union of
    their products (vary one knob at a time), always with the baseline included."""
    if w is None:
        return (Knobs(),)
    if isinstance(w, list):
        out = [Knobs()]
        for part in w:
            for k in _knobs(part):
                if k not in out:
                    out.append(k)
        return tuple(out)
    n = len(w.bandwidth_scale) * len(w.latency_scale) * len(w.itemsize) * len(w.placement)
    if n > 10 * limit("cases"):
        raise ExperimentError(f"whatif: {n:,} combinations; the limit is {10 * limit('cases'):,}")
    return tuple(
        Knobs(float(b), float(lat), it, str(pl) if pl is not None else "default")
        for b, lat, it, pl in itertools.product(w.bandwidth_scale, w.latency_scale, w.itemsize, w.placement)
    )
