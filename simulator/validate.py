"""``python -m simulator validate``: the machine model against published measurements.

``simulator/data/published.yaml`` holds collective measurements that vendors and users published
(nccl-tests tables in GitHub issues, NVIDIA engineers' figures, the JAX scaling book). Each row
is simulated as one schedule op on its profile (all groups at once, as the benchmark ran them),
and compared with the measured time (busbw/algbw converted with nccl-tests' conventions).

* :func:`validate` -> ``{"rows": [...], "systems": {...}, "overall": {...}}``;
* :func:`model_error_by_system` -> ``{system: {"mape", "n", "worst"}}`` (cached: cheap to call);
* :func:`system_of_profile` -> the system class a profile name belongs to (for the app).
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from synth.errors import RedistributionError

DATA = Path(__file__).resolve().parent / "data" / "published.yaml"

#: profile name -> system class; multi-node sizes of switched profiles get their own class.
_SYSTEMS = {
    "dgx-h100": "H100/H200 NVLink node",
    "dgx-a100": "A100 NVLink node",
    "dgx-b200": "B200 NVLink node",
    "h100-multinode": "H100 multi-node InfiniBand",
    "gb200-nvl72": "GB200 NVL72 rack",
    "tpu-v4": "TPU ICI", "tpu-v5e": "TPU ICI", "tpu-v5p": "TPU ICI", "tpu-v6e": "TPU ICI",
}
_MULTI = {
    "dgx-h100": "H100 multi-node InfiniBand",
    "dgx-a100": "A100 multi-node InfiniBand",
    "dgx-b200": "B200 multi-node InfiniBand",
    "gb200-nvl72": "GB200 multi-rack InfiniBand",
}


def system_of_profile(spec) -> str | None:
    """The validation system class of a hardware spec or profile (``None`` if the published set
    has no measurement for that kind of machine, e.g. CPU hosts)."""
    from models import load_profile

    try:
        m = load_profile(spec)
    except RedistributionError:
        return None
    base = m.name
    if base not in _SYSTEMS:
        # calibrated / derived profiles: follow `extends` lineage by name prefix
        base = next((k for k in _SYSTEMS if m.name.startswith(k)), None)
        if base is None:
            return None
    if m.kind == "switched" and m.dims[0] > 1 and base in _MULTI:
        return _MULTI[base]
    return _SYSTEMS[base]


#: the largest validation file read (bytes); rows are a few hundred bytes each
MAX_DATA_BYTES = 4 << 20
#: the most rows one file may hold
MAX_ROWS = 10_000
COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


@lru_cache(maxsize=1)
def _row_schema():
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

    Pos = Field(default=None, gt=0, allow_inf_nan=False)

    class Row(BaseModel):
        """One published measurement (see the header of ``simulator/data/published.yaml``)."""

        model_config = ConfigDict(extra="forbid", strict=False)
        id: str = Field(min_length=1, max_length=80)
        source: str = Field(min_length=1, max_length=2000)
        system: str = Field(min_length=1, max_length=300)
        profile: str = Field(min_length=1, max_length=200)
        collective: Literal[COLLECTIVES]
        devices: int = Field(gt=0, le=65536)
        groups: int = Field(default=1, gt=0, le=65536)
        size_bytes: int = Field(gt=0, le=1 << 50)
        time_s: float | None = Pos
        busbw_GBps: float | None = Pos
        algbw_GBps: float | None = Pos
        groups_along: str | None = Field(default=None, max_length=16)
        algorithm: str | None = Field(default=None, max_length=40)
        overrides: dict[str, int | float] | None = None
        fit: bool = False
        origin: str | None = Field(default=None, max_length=40)
        note: str | None = Field(default=None, max_length=2000)

        @field_validator("devices", "groups", "size_bytes", mode="before")
        @classmethod
        def _whole(cls, v):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError("expected a whole number")
            return v

        @field_validator("time_s", "busbw_GBps", "algbw_GBps", mode="before")
        @classmethod
        def _number(cls, v):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError("expected a number")
            return v

        @model_validator(mode="after")
        def _one_figure(self):
            given = [k for k in ("time_s", "busbw_GBps", "algbw_GBps") if getattr(self, k) is not None]
            if len(given) != 1:
                raise ValueError(f"give exactly one of time_s, busbw_GBps, algbw_GBps (got {given or 'none'})")
            if self.devices < 2:
                raise ValueError("a collective needs at least 2 devices")
            return self

    return Row


def _schema_error(e, path, i, raw) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err.get("loc", ())) or "row"
    rid = raw.get("id", f"#{i}") if isinstance(raw, dict) else f"#{i}"
    got = ""
    if isinstance(raw, dict) and err.get("loc") and err["loc"][0] in raw:
        got = f" (got {str(raw[err['loc'][0]])[:60]!r})"
    msg = err.get("msg", "invalid").replace("Value error, ", "")
    return f"validate: {path}: row {rid}: {loc}: {msg}{got}; fix the row (see the header of {DATA.name})"


def load_rows(path=DATA) -> list[dict]:
    """The rows of a validation file, checked by a pydantic schema: a mapping with a non-empty
    ``rows`` list of mappings, known keys only, positive finite sizes / times / bandwidths / device
    counts, one measured figure per row, known collectives, unique ids (group names -- ``groups_along``
    -- and group counts are checked against the machine in :func:`row_op`).
    Read through :func:`synth.fileio.read_yaml` (regular files only, UTF-8, safe YAML, at most
    :data:`MAX_DATA_BYTES`, checked before reading); raises :class:`RedistributionError` with
    one line naming the row."""
    from pydantic import ValidationError

    from synth.fileio import read_yaml

    try:
        # the project's capped reader: regular files only, size checked before reading, safe YAML
        raw = read_yaml(Path(path), "data file", max_bytes=MAX_DATA_BYTES)
    except RedistributionError as e:
        raise RedistributionError(f"validate: cannot read {path}: {e}") from None
    rows = raw.get("rows") if isinstance(raw, dict) else None
    if not isinstance(rows, list) or not rows:
        raise RedistributionError(f"validate: {path} has no 'rows' list (a mapping with a non-empty list "
                                  f"under 'rows' is expected)")
    if len(rows) > MAX_ROWS:
        raise RedistributionError(f"validate: {path} has {len(rows):,} rows, above the limit of {MAX_ROWS:,}")
    schema = _row_schema()
    out, seen = [], set()
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise RedistributionError(f"validate: {path}: row #{i} is {type(r).__name__}, not a mapping; "
                                      f"write each row as {{id: ..., source: ..., ...}}")
        try:
            row = schema.model_validate(r).model_dump(exclude_none=True)
        except ValidationError as e:
            raise RedistributionError(_schema_error(e, path, i, r)) from None
        if row["id"] in seen:
            raise RedistributionError(f"validate: {path}: row id {row['id']!r} appears twice; ids are unique")
        seen.add(row["id"])
        out.append(row)
    return out


def measured_time_s(row) -> float:
    """The row's measurement as seconds (nccl-tests: algbw = size/time, busbw = algbw*factor)."""
    from models.collectives import bus_factor

    if "time_s" in row:
        return float(row["time_s"])
    S = float(row["size_bytes"])
    if "algbw_GBps" in row:
        return S / (float(row["algbw_GBps"]) * 1e9)
    return S * bus_factor(row["collective"], int(row["devices"])) / (float(row["busbw_GBps"]) * 1e9)


def row_machine(row):
    from models import load_profile

    m = load_profile(row["profile"])
    ov = dict(row.get("overrides") or {})
    if ov:
        m = dataclasses.replace(m, **ov)
        m.__dict__.pop("topology", None)
    if row.get("algorithm"):
        m = m.with_algorithm(**{row["collective"]: row["algorithm"]})
    return m


def row_op(row, machine):
    """The schedule op of one row: one group of ``devices`` (all devices of the machine), or,
    with ``groups_along: DIM`` on a torus, every line along that physical dimension at once."""
    from synth import ScheduleOp

    n, S, c = int(row["devices"]), int(row["size_bytes"]), row["collective"]
    if row.get("groups_along"):
        if row["groups_along"] not in machine.dim_names:
            raise RedistributionError(f"validate: row {row['id']}: groups_along {row['groups_along']!r} is not a "
                                      f"dimension of {machine.spec} (one of {list(machine.dim_names)})")
        k = list(machine.dim_names).index(row["groups_along"])
        ids = np.arange(machine.num_devices).reshape(machine.dims)
        groups = tuple(tuple(int(x) for x in g) for g in np.moveaxis(ids, k, -1).reshape(-1, machine.dims[k]))
    else:
        ng = int(row.get("groups", 1))
        if n * ng != machine.num_devices:
            raise RedistributionError(f"validate: row {row['id']}: {ng} group(s) of {n} devices but {machine.spec} "
                                      f"has {machine.num_devices}")
        # XLA's iota replica groups: consecutive blocks of n devices, all at once
        groups = tuple(tuple(range(g * n, (g + 1) * n)) for g in range(ng))
    blk = S // n
    if c == "all_gather":
        return ScheduleOp(c, blk, S, blk * (n - 1), blk * (n - 1), groups, label=row["id"])
    if c == "reduce_scatter":
        return ScheduleOp(c, S, blk, blk * (n - 1), blk * (n - 1), groups, label=row["id"])
    if c == "all_reduce":
        return ScheduleOp(c, S, S, S, S, groups, label=row["id"])
    if c == "all_to_all":
        return ScheduleOp(c, S, S, blk * (n - 1), blk * (n - 1), groups, label=row["id"])
    raise RedistributionError(f"validate: row {row['id']}: unknown collective {c!r}")


def simulate_row(row) -> dict:
    from simulator.engine import simulate
    from synth import Schedule

    m = row_machine(row)
    op = row_op(row, m)
    res = simulate(Schedule(m.num_devices, (op,), name=row["id"]), m)
    o = res.ops[0]
    return {"sim_s": res.time_s, "analytic_s": res.analytic_s, "lower_bound_s": res.lower_bound_s,
            "lower_bound_kind": res.lower_bound_kind, "algorithm": o.get("algorithm")}


#: size bands by bytes per rank (the shard of an all-gather / reduce-scatter, the buffer of an
#: all-reduce or all-to-all): resharding plans live in the middle one
BANDS = (("small (< 1 MiB/rank)", 0, 1 << 20), ("mid (1-256 MiB/rank)", 1 << 20, (256 << 20) + 1),
         ("large (> 256 MiB/rank)", (256 << 20) + 1, 1 << 62))
XLA_DATA = Path(__file__).resolve().parent / "data" / "xla_collective_perf.yaml"
#: the published profiles XLA's table measured (8 GPUs of one host) -> its system in the table file
_XLA_SYSTEMS = {"dgx-h100": "H100", "dgx-b200": "B200"}


def per_rank_bytes(row) -> int:
    """Bytes each rank holds of a row's collective: the shard (nccl-tests size / n) of an
    all-gather or reduce-scatter, the buffer of an all-reduce or all-to-all."""
    S, n = int(row["size_bytes"]), int(row["devices"])
    return S // n if row["collective"] in ("all_gather", "reduce_scatter") else S


def size_band(row) -> str:
    b = per_rank_bytes(row)
    return next(name for name, lo, hi in BANDS if lo <= b < hi)


@lru_cache(maxsize=1)
def _xla_curves() -> dict:
    """``{(system, collective, ranks): (log2 sizes, algbw)}`` from XLA's collective table."""
    from synth.fileio import read_yaml

    raw = read_yaml(XLA_DATA, "validate: XLA table", max_bytes=MAX_DATA_BYTES)
    out = {}
    for name, sysd in raw["systems"].items():
        for cv in sysd["curves"]:
            pts = np.array(sorted(cv["points"]), dtype=float)
            out[(name, cv["collective"], int(cv["ranks"]))] = (np.log2(pts[:, 0]), pts[:, 1])
    return out


def xla_interpolator_s(row) -> float | None:
    """XLA's GPU collective interpolator as a peer model: the time its table predicts for a row,
    ``size / algbw(size)`` with ``algbw`` interpolated linearly in ``log2(size)`` between the
    table's points (held at the end values beyond them), for the op and group size measured on
    8 GPUs of one host (XLA's exact interpolator keys on the op and replica groups). Our
    re-implementation of its lookup on its data; ``None`` where the table has no such entry
    (other machines, multi-node groups, other group sizes)."""
    from models import load_profile

    try:
        m = load_profile(row["profile"])
    except RedistributionError:
        return None
    system = _XLA_SYSTEMS.get(m.name)
    n, groups = int(row["devices"]), int(row.get("groups", 1))
    if system is None or m.kind != "switched" or m.num_devices != 8 or n * groups != 8 or row.get("groups_along"):
        return None
    curve = _xla_curves().get((system, row["collective"], n))
    if curve is None:
        return None
    x, bw = curve
    S = float(row["size_bytes"])
    return S / float(np.interp(np.log2(S), x, bw))


def validate(path=DATA, on_row=None) -> dict:
    """Every row simulated and compared with its measurement: ``{"rows", "systems", "bands",
    "splits", "xla", "overall", ...}``. ``splits`` separates rows that set a profile constant
    (``fit``), the rest (``held_out``) and the held-out rows from sources no constant was fitted
    on at any size (``held_out_other_sources``: not XLA's table); ``xla`` compares our error with
    XLA's interpolator's on the rows its table covers."""
    rows = load_rows(path)
    out = []
    for r in rows:
        meas = measured_time_s(r)
        s = simulate_row(r)
        err = (s["sim_s"] - meas) / meas
        xla = xla_interpolator_s(r)
        row = {"id": r["id"], "system": system_of_profile(r["profile"]) or r["profile"], "profile": r["profile"],
               "collective": r["collective"], "devices": int(r["devices"]), "groups": int(r.get("groups", 1)),
               "size_bytes": int(r["size_bytes"]), "per_rank_bytes": per_rank_bytes(r), "band": size_band(r),
               "measured_s": meas, **s, "rel_err": err, "ratio": s["sim_s"] / meas,
               "bound_ok": s["lower_bound_s"] <= meas * (1 + 1e-9), "fit": bool(r.get("fit")),
               "origin": r.get("origin", "published"), "source": r["source"],
               "xla_s": xla, "xla_rel_err": None if xla is None else (xla - meas) / meas}
        out.append(row)
        if on_row is not None:
            on_row(row)
    systems: dict = {}
    bands: dict = {}
    for row in out:
        systems.setdefault(row["system"], []).append(row)
        bands.setdefault(row["band"], []).append(row)
    splits = {"fit": [r for r in out if r["fit"]], "held_out": [r for r in out if not r["fit"]],
              "held_out_other_sources": [r for r in out if not r["fit"] and r["origin"] != "xla-table"]}
    covered = [r for r in out if r["xla_s"] is not None]
    xla = {}
    for name, sub in (("all covered", covered), ("not from XLA's table", [r for r in covered
                                                                          if r["origin"] != "xla-table"])):
        if sub:
            xla[name] = {"n": len(sub), "ours_mape": float(np.mean([abs(r["rel_err"]) for r in sub])),
                         "xla_mape": float(np.mean([abs(r["xla_rel_err"]) for r in sub]))}
    return {"rows": out, "systems": {k: _summary(v) for k, v in systems.items()},
            "bands": {k: _summary(v) for k, v in bands.items()},
            "splits": {k: _summary(v) for k, v in splits.items() if v}, "xla": xla,
            "overall": _summary(out), "data": str(path),
            "targets": "MAPE <= 10% overall, <= 12% held out, <= 15% in the mid band; every point within 1.5x; "
                       "lower bound <= measurement"}


def _summary(rows) -> dict:
    errs = [abs(r["rel_err"]) for r in rows]
    worst = max(rows, key=lambda r: abs(r["rel_err"]))
    return {"n": len(rows), "mape": float(np.mean(errs)), "worst": float(max(errs)), "worst_id": worst["id"],
            "within_1_5x": all(1 / 1.5 <= r["ratio"] <= 1.5 for r in rows),
            "within_2x": all(0.5 <= r["ratio"] <= 2.0 for r in rows),
            "bound_ok": all(r["bound_ok"] for r in rows)}


def _model_key() -> str:
    """A hash of everything the validation result depends on (data, profiles, model code)."""
    import hashlib

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    files = [DATA] + sorted((root / "models" / "profiles").glob("*.yaml")) + sorted((root / "models").glob("*.py"))
    files += [root / "simulator" / "engine.py", Path(__file__)]
    for f in files:
        try:
            h.update(f.read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def _cached() -> dict:
    """The systems summary, from a per-user cache file keyed by :func:`_model_key` when one
    exists (so the app pays the few seconds of simulation once per model version)."""
    import json
    import os

    cache_dir = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "redistribution-simulator"
    path = cache_dir / f"validate-{_model_key()}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    res = validate()
    out = {"systems": res["systems"], "overall": res["overall"]}
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(out))
        tmp.replace(path)
    except OSError:
        pass
    return out


def model_error_by_system() -> dict:
    """``{system: {"mape": float, "n": int, "worst": float}}`` over the published set. Computed
    once per model version (a few seconds) and then read from a small cache file. Pair it
    with :func:`system_of_profile` to show a profile's model error."""
    res = _cached()
    return {k: {"mape": v["mape"], "n": v["n"], "worst": v["worst"]} for k, v in res["systems"].items()}


def _fmt_size(b: int) -> str:
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= f:
            return f"{b / f:g} {unit}"
    return f"{b} B"


def print_validate(res: dict) -> None:
    from simulator.format import fmt_s

    print(f"{'id':<22} {'system':<28} {'coll':<14} {'n':>5} {'size':>10} {'measured':>10} {'simulated':>10} "
          f"{'err':>7} {'xla':>7} {'bound':>10} {'binds':<18} algorithm")
    for r in res["rows"]:
        xe = "" if r["xla_rel_err"] is None else f"{r['xla_rel_err'] * 100:+.0f}%"
        grp = f"{r['groups']}x{r['devices']}" if r["groups"] > 1 else str(r["devices"])
        print(f"{r['id']:<22} {r['system'][:28]:<28} {r['collective']:<14} {grp:>5} "
              f"{_fmt_size(r['size_bytes']):>10} {fmt_s(r['measured_s']):>10} {fmt_s(r['sim_s']):>10} "
              f"{r['rel_err'] * 100:>+6.0f}% {xe:>7} {fmt_s(r['lower_bound_s']):>10} {r['lower_bound_kind']:<18} "
              f"{r['algorithm']}{'' if r['bound_ok'] else '  BOUND ABOVE MEASUREMENT'}{'  (fit)' if r['fit'] else ''}")

    def table(title, summ):
        print()
        print(f"{title:<32} {'n':>3} {'MAPE':>7} {'worst':>7} {'within 1.5x':>12} {'bound ok':>9}")
        for k, v in summ:
            print(f"{k:<32} {v['n']:>3} {v['mape'] * 100:>6.1f}% {v['worst'] * 100:>6.1f}% "
                  f"{str(v['within_1_5x']):>12} {str(v['bound_ok']):>9}")

    table("system", sorted(res["systems"].items()))
    table("size band", [(k, res["bands"][k]) for k, _lo, _hi in BANDS if k in res["bands"]])
    table("rows", list(res["splits"].items()) + [("overall", res["overall"])])
    if res["xla"]:
        print()
        print(f"{'XLA interpolator (peer model)':<32} {'n':>3} {'ours':>7} {'XLA':>7}")
        for k, v in res["xla"].items():
            print(f"{k:<32} {v['n']:>3} {v['ours_mape'] * 100:>6.1f}% {v['xla_mape'] * 100:>6.1f}%")
    print(f"targets: {res['targets']}; '(fit)' rows also set a profile constant (in-sample); 'xla' is XLA's "
          f"collective interpolator on its own table (simulator/data/xla_collective_perf.yaml)")


def _isfinite(x) -> bool:
    return isinstance(x, float) and math.isfinite(x)
