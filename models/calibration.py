"""Fitting per-kind alpha / latency / bandwidth to measured op times, with the same
cost model the simulator uses, and writing the result as a profile file.

For an op of kind ``k`` whose transfers all see per-link latency ``lat`` and
bandwidth ``bw`` (the per-kind overrides of a profile), the analytic time is

    t = alpha + a_lat * lat + a_bw / bw

where ``a_lat`` (hops along the critical path, summed over steps) and ``a_bw``
(bytes on the busiest link per step, summed over steps) depend only on the op, the
topology and the placement. :func:`cost_features` computes them; :func:`fit_kind`
solves a non-negative least-squares problem in relative error (each row divided by
its measured time) for ``(alpha, lat, 1/bw)``. The fitted :class:`KindParams` plug
into a profile's ``collectives:`` section, so the simulator reproduces the fit
(exactly when transfers do not queue).

    samples = [(schedule_op, measured_seconds), ...]     # one kind or several
    fits = fit_profile(load_profile("cpu-host:8"), samples)
    doc = calibrated_profile_doc("cpu-8", "cpu-host", fits, source="executor calibration 2026-11-29")
    write_profile(doc, "models/profiles/calibrated/cpu-8.json")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.analytic import op_time_s
from models.errors import ProfileError
from models.profiles import KindParams, load_profile

LOCAL = ("dyn_slice", "copy")

#: Fitted values outside these ranges are not a property of any machine this tool models: a
#: bandwidth above 20 TB/s per link (no NVLink, ICI or memory system comes near it; a fit lands
#: there when ``1/bw`` runs to its bound of 0) or below 100 kB/s, a launch or per-hop latency
#: above one second. A fit that ends on such a value is refused (:func:`fitted_bandwidth_Bps`
#: returns ``None`` and the kind keeps the machine's bandwidth) and flagged.
PLAUSIBLE = {"bandwidth_Bps": (1.0e5, 2.0e13), "alpha_s": (0.0, 1.0), "latency_s": (0.0, 1.0)}


def fitted_bandwidth_Bps(inv_bw: float) -> float | None:
    """``1 / inv_bw`` when that is a plausible bandwidth; ``None`` when the fit ran to its bound
    (``inv_bw`` 0: the samples do not depend on the bytes moved, so no bandwidth was measured) or
    ended outside :data:`PLAUSIBLE` -- never a sentinel such as 1e15 B/s."""
    lo, hi = PLAUSIBLE["bandwidth_Bps"]
    if not inv_bw > 0:
        return None
    bw = 1.0 / float(inv_bw)
    return bw if lo <= bw <= hi else None


def implausible_values(doc: dict) -> list[str]:
    """The fitted numbers of a profile document (``params`` and ``collectives``) that are
    outside :data:`PLAUSIBLE`, as ``"collectives.all_to_all.bandwidth_Bps = 1e+15"`` lines.
    ``write_profile`` refuses a document with any."""
    out = []

    def val(v):
        return v.get("value") if isinstance(v, dict) else v

    def check(path, key, v):
        v = val(v)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return
        rule = "bandwidth_Bps" if key.endswith("bandwidth_Bps") else (
            "latency_s" if key.endswith("latency_s") else ("alpha_s" if key in ("alpha_s", "launch_overhead_s")
                                                          else None))
        if rule is None:
            return
        lo, hi = PLAUSIBLE[rule]
        if not lo <= float(v) <= hi:
            out.append(f"{path}{key} = {float(v):.3g} (plausible: {lo:g} to {hi:g})")

    for k, v in (doc.get("params") or {}).items():
        check("params.", k, v)
    for kind, entry in (doc.get("collectives") or {}).items():
        for k, v in (entry or {}).items():
            check(f"collectives.{kind}.", k, v)
    return out


@dataclass(frozen=True)
class KindFit:
    """A fitted kind: its parameters and how well they reproduce the samples."""

    kind: str
    params: KindParams
    samples: int
    mape: float          # mean absolute percentage error of the fit on its samples (0.05 = 5%)
    max_ape: float

    def to_dict(self) -> dict:
        return {"kind": self.kind, "params": self.params.to_dict(), "samples": self.samples,
                "mape": self.mape, "max_ape": self.max_ape}


def cost_features(op, machine, chips=None) -> tuple[float, float]:
    """``(a_lat, a_bw)`` of ``op`` on ``machine``: ``t = alpha + a_lat*lat + a_bw/bw``."""
    if op.kind in LOCAL:
        from models.analytic import local_bytes

        return 0.0, float(local_bytes(op))
    m_bw = machine.with_overrides(**{op.kind: KindParams(alpha_s=0.0, bandwidth_Bps=1.0, latency_s=0.0)})
    m_lat = machine.with_overrides(**{op.kind: KindParams(alpha_s=0.0, bandwidth_Bps=1e300, latency_s=1.0)})
    return float(op_time_s(op, m_lat, chips)), float(op_time_s(op, m_bw, chips))


def fit_kind(kind: str, samples, machine, chips=None, fit_latency: bool = True) -> KindFit:
    """Fit ``alpha_s``, ``latency_s`` and ``bandwidth_Bps`` of one kind from
    ``[(ScheduleOp, seconds), ...]`` (non-negative least squares, relative error)."""
    from scipy.optimize import nnls

    rows, t = [], []
    for op, sec in samples:
        if op.kind != kind:
            raise ProfileError(f"fit_kind({kind!r}): got a sample of kind {op.kind!r}")
        if not sec > 0:
            raise ProfileError(f"fit_kind({kind!r}): measured times must be > 0, got {sec}")
        a_lat, a_bw = cost_features(op, machine, chips)
        rows.append([1.0, a_lat if fit_latency else 0.0, a_bw])
        t.append(float(sec))
    if len(rows) < 2:
        raise ProfileError(f"fit_kind({kind!r}): need at least 2 samples, got {len(rows)}")
    A, t = np.array(rows), np.array(t)
    w = 1.0 / t
    x, _ = nnls(A * w[:, None], t * w)
    alpha, lat, inv_bw = (float(v) for v in x)
    pred = A @ x
    ape = np.abs(pred - t) / t
    # a bandwidth that ran to the fit's bound (1/bw = 0) or beyond plausibility is not shipped
    params = KindParams(alpha_s=alpha, bandwidth_Bps=fitted_bandwidth_Bps(inv_bw),
                        latency_s=lat if (fit_latency and kind not in LOCAL) else None)
    return KindFit(kind, params, len(t), float(ape.mean()), float(ape.max()))


def fit_profile(machine, samples, chips=None, fit_latency: bool = True) -> dict[str, KindFit]:
    """Fit every kind present in ``samples`` (``[(ScheduleOp, seconds), ...]``)."""
    machine = load_profile(machine)
    by_kind: dict = {}
    for op, sec in samples:
        by_kind.setdefault(op.kind, []).append((op, sec))
    return {k: fit_kind(k, v, machine, chips, fit_latency) for k, v in sorted(by_kind.items())}


def calibrated_profile_doc(name: str, base: str, fits: dict, source: str, default_size: str | None = None,
                           params: dict | None = None) -> dict:
    """A profile document (see docs/simulator.md) that ``extends`` ``base`` and sets
    each fitted kind's ``alpha_s`` / ``bandwidth_Bps`` / ``latency_s`` with ``source``."""
    base_profile = load_profile(base)
    doc: dict = {"name": name, "extends": base_profile.name,
                 "description": f"{base_profile.name} calibrated: {source}",
                 "topology": {"kind": base_profile.kind,
                              "default_size": default_size or base_profile.size_str}}
    if params:
        doc["params"] = {k: {"value": v, "source": source} for k, v in params.items()}
    coll = {}
    for kind, f in fits.items():
        kp = f.params if isinstance(f, KindFit) else f
        entry = {k: {"value": v, "source": f"{source} (MAPE {f.mape:.1%} over {f.samples} runs)"
                     if isinstance(f, KindFit) else source}
                 for k, v in kp.to_dict().items()}
        if entry:
            coll[kind] = entry
    doc["collectives"] = coll
    return doc


def write_profile(doc: dict, path) -> Path:
    """Write ``doc`` as JSON after checking that it loads as a profile (raises
    ProfileError otherwise, leaving ``path`` untouched). Returns the path."""
    import os
    import tempfile

    path = Path(path)
    bad = implausible_values(doc)
    if bad:
        raise ProfileError(f"write_profile: refusing to write {path}: fitted values outside the plausible "
                           f"range ({'; '.join(bad)}); the fit ran to a bound -- refit with samples that "
                           f"vary the bytes moved, or drop that parameter")
    path.parent.mkdir(parents=True, exist_ok=True)
    # a unique temporary name in the same folder: two calibrations writing one profile
    # never share it, and os.replace makes the new profile appear whole
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".check.json")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, indent=2) + "\n")
        os.chmod(tmp, 0o644)
        load_profile(str(tmp))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
