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

A *work unit* is one (case, planner, itemsize): it synthesizes or extracts one
schedule, then simulates it on every machine x bandwidth x latency x placement, and
yields one row for each. A row's id is the hash of its canonical JSON spec.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

from experiments.backends import PLANNERS, XLA_MAX_DEVICES, XLA_PLANNERS
from experiments.case import Case, ExperimentError, stable_hash

_TOP_KEYS = {"name", "description", "suites", "cases", "machines", "planners", "whatif", "measure", "runner"}
_WHATIF_KEYS = {"bandwidth_scale", "latency_scale", "itemsize", "placement"}
_MEASURE_KEYS = {"enabled", "max_devices", "max_bytes", "warmup", "repeats"}
_RUNNER_KEYS = {"workers", "timeout_s", "xla_max_devices", "unit_delay_s", "simulator"}


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


# -- loading ---------------------------------------------------------------------------------
def load_config(path) -> Config:
    import yaml

    p = Path(path)
    if not p.exists():
        raise ExperimentError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ExperimentError(f"config {path}: not valid YAML: {e}") from None
    return parse_config(data, str(p))


def parse_config(data, where: str = "config") -> Config:
    if not isinstance(data, dict):
        raise ExperimentError(f"{where}: the top level must be a mapping with 'suites', 'machines', ...")
    _no_unknown(data, _TOP_KEYS, where)
    cases = _load_cases(data, where)
    machines = tuple(_machine(m, f"{where}: machines[{i}]") for i, m in enumerate(_list(data, "machines", where, ["tpu-v4"])))
    if not machines:
        raise ExperimentError(f"{where}: 'machines' is empty; name at least one profile, e.g. [tpu-v4]")
    planners = tuple(_list(data, "planners", where, list(PLANNERS)))
    for pl in planners:
        if pl not in PLANNERS:
            raise ExperimentError(f"{where}: unknown planner {pl!r}; choose from {list(PLANNERS)}")
    if len(set(planners)) != len(planners):
        raise ExperimentError(f"{where}: planners {list(planners)} lists one twice")
    knobs = _knobs(data.get("whatif") or {}, where)
    measure = dict(data.get("measure") or {})
    _no_unknown(measure, _MEASURE_KEYS, f"{where}: measure")
    runner = dict(data.get("runner") or {})
    _no_unknown(runner, _RUNNER_KEYS, f"{where}: runner")
    for k in ("workers", "xla_max_devices"):
        if k in runner and (not isinstance(runner[k], int) or runner[k] < 1):
            raise ExperimentError(f"{where}: runner.{k} must be a positive integer, got {runner[k]!r}")
    if runner.get("simulator", "simpy") not in ("simpy", "analytic"):
        raise ExperimentError(f"{where}: runner.simulator must be 'simpy' (event replay) or 'analytic', "
                              f"got {runner['simulator']!r}")
    if "timeout_s" in runner and not (isinstance(runner["timeout_s"], (int, float)) and runner["timeout_s"] > 0):
        raise ExperimentError(f"{where}: runner.timeout_s must be a positive number of seconds")
    return Config(
        name=str(data.get("name", Path(where).stem)), cases=cases, machines=machines,
        planners=planners, knobs=knobs, measure=measure, runner=runner,
        description=str(data.get("description", "")), path=where,
    )


def _no_unknown(d: dict, allowed: set, where: str):
    bad = sorted(set(d) - allowed)
    if bad:
        raise ExperimentError(f"{where}: unknown key(s) {bad}; allowed: {sorted(allowed)}")


def _list(data, key, where, default):
    v = data.get(key, default)
    if v is None:
        return default
    if not isinstance(v, list):
        raise ExperimentError(f"{where}: '{key}' must be a list, got {type(v).__name__}")
    return v


def _load_cases(data, where) -> tuple[Case, ...]:
    from experiments.suites import load_suite

    out: list[Case] = []
    for i, item in enumerate(_list(data, "suites", where, [])):
        if isinstance(item, str):
            name, params = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            name, params = next(iter(item.items()))
            params = params or {}
            if not isinstance(params, dict):
                raise ExperimentError(f"{where}: suites[{i}] {name!r}: parameters must be a mapping")
        else:
            raise ExperimentError(
                f"{where}: suites[{i}] must be a suite name or {{name: {{params}}}}, got {item!r}"
            )
        out += load_suite(name, **params)
    for i, c in enumerate(_list(data, "cases", where, [])):
        if not isinstance(c, dict) or not {"name", "mesh", "src", "dst"} <= set(c):
            raise ExperimentError(f"{where}: cases[{i}] needs name, mesh, src and dst, got {c!r}")
        c = {"suite": "inline", **c}
        out.append(Case.from_dict(c))
    if not out:
        raise ExperimentError(f"{where}: no cases; list at least one suite under 'suites' or add 'cases'")
    seen = {}
    for c in out:
        key = (c.suite, c.name)
        if key in seen:
            raise ExperimentError(f"{where}: case {c.name!r} of suite {c.suite!r} appears twice")
        seen[key] = c
    return tuple(out)


def _machine(m, where) -> Machine:
    if isinstance(m, str):
        return Machine(m)
    if isinstance(m, dict) and "profile" in m:
        _no_unknown(m, {"profile", "sizes"}, where)
        sizes = m.get("sizes") or {}
        if not isinstance(sizes, dict):
            raise ExperimentError(f"{where}: sizes must map a device count to a shape, e.g. {{64: '4x4x4'}}")
        return Machine(str(m["profile"]), tuple(sorted((int(k), str(v)) for k, v in sizes.items())))
    raise ExperimentError(f"{where}: a machine is a profile name or {{profile: NAME, sizes: {{...}}}}, got {m!r}")


def _knobs(w, where) -> tuple[Knobs, ...]:
    """A mapping is the product of its value lists; a list of mappings is the union of
    their products (vary one knob at a time), always with the baseline included."""
    if isinstance(w, list):
        out = [Knobs()]
        for i, part in enumerate(w):
            for k in _knobs(part, f"{where}: whatif[{i}]" if where else where):
                if k not in out:
                    out.append(k)
        return tuple(out)
    if not isinstance(w, dict):
        raise ExperimentError(f"{where}: 'whatif' must be a mapping of knob -> list of values, "
                              "or a list of such mappings")
    _no_unknown(w, _WHATIF_KEYS, f"{where}: whatif")
    vals = {}
    for k, default in (("bandwidth_scale", [1.0]), ("latency_scale", [1.0]), ("itemsize", [None]),
                       ("placement", ["default"])):
        v = w.get(k, default)
        if not isinstance(v, list) or not v:
            v = [v]
        vals[k] = v
    for k in ("bandwidth_scale", "latency_scale"):
        for x in vals[k]:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or x <= 0:
                raise ExperimentError(f"{where}: whatif.{k} values must be positive numbers, got {x!r}")
    for x in vals["itemsize"]:
        if x is not None and (isinstance(x, bool) or not isinstance(x, int) or x < 1):
            raise ExperimentError(f"{where}: whatif.itemsize values must be positive integers or null, got {x!r}")
    return tuple(
        Knobs(float(b), float(lat), it, str(pl) if pl is not None else "default")
        for b, lat, it, pl in itertools.product(vals["bandwidth_scale"], vals["latency_scale"],
                                                vals["itemsize"], vals["placement"])
    )
