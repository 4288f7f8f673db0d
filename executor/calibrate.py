"""Calibrate the simulator's hardware profile on the JAX backend at hand.

Three stages, all driven by ``python -m executor calibrate``:

1. **Microbenchmarks** (nccl-tests style): each schedule kind (all-gather,
   all-to-all, permute, all-reduce, reduce-scatter, dyn_slice, copy) x group size x
   per-device message size, each a one-collective ``jax.shard_map`` program timed
   with :mod:`executor.measure`'s protocol; rows carry time, algbw and busbw.
2. **Fit.** Every microbenchmark's compiled HLO is read into a schedule
   (:mod:`executor.hlo`), so the surrounding copies XLA adds are costed as copies,
   not folded into the collective. Under the simulator's model a schedule's time is
   linear in each kind's ``alpha_s``, ``1/bandwidth_Bps`` and ``latency_s`` (one
   simulation per op with zero latency, one with infinite bandwidth, gives the two
   coefficients), plus one ``program_overhead_s`` per program (dispatch of a jitted
   call). Non-negative least squares on relative error (``scipy.optimize.nnls``)
   gives all parameters at once.
3. **Held-out check.** Whole redistributions (seeded random cases; our plans from
   both planners and XLA's from both partitioners, their schedules read from HLO)
   are measured and predicted by :func:`simulator.simulate` with the written
   profile (plus ``program_overhead_s``); the report gives the MAPE and the worst
   cases.

The profile is written as JSON in the schema of ``docs/simulator.md``
(``extends: cpu-host`` with fitted ``params`` and per-kind ``collectives``
overrides, each value with its source), plus a ``calibration`` block the simulator
ignores (program overhead, backend, fit quality).
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import time
from dataclasses import dataclass

import numpy as np

from executor.errors import ExecutorError

KINDS = ("all_gather", "all_to_all", "permute", "all_reduce", "reduce_scatter", "dyn_slice", "copy")
LOCAL = ("dyn_slice", "copy")

FULL_GRID = {
    "group_sizes": (2, 4, 8),
    "sizes": tuple(1 << k for k in (10, 12, 14, 16, 18, 20, 22, 24)),  # 1 KiB .. 16 MiB
    "max_out_bytes": 64 << 20,
    "repeats": 15,
    "warmup": 2,
    "train_cases": 12,
    "heldout_cases": 12,
    "heldout_bytes": (256 << 10, 32 << 20),
}
QUICK_GRID = {
    "group_sizes": (2, 8),
    "sizes": (4 << 10, 64 << 10, 1 << 20),
    "max_out_bytes": 8 << 20,
    "repeats": 10,
    "warmup": 2,
    "train_cases": 6,
    "heldout_cases": 8,
    "heldout_bytes": (64 << 10, 2 << 20),
}
TINY_GRID = {
    "group_sizes": (2,),
    "sizes": (4 << 10, 64 << 10),
    "max_out_bytes": 1 << 20,
    "repeats": 10,
    "warmup": 1,
    "train_cases": 1,
    "heldout_cases": 1,
    "heldout_bytes": (16 << 10, 64 << 10),
}

# reference values for the linear decomposition (any positive values work)
_REF_BW = 1.0e9
_REF_LAT = 1.0e-6


# -- 1. microbenchmarks --------------------------------------------------------------
@dataclass(frozen=True)
class MicroSpec:
    kind: str
    group: int
    bytes: int  # per-device input bytes

    @property
    def name(self) -> str:
        return f"{self.kind}/n{self.group}/{self.bytes}B"


def micro_specs(grid: dict, num_devices: int) -> list[MicroSpec]:
    out = []
    for kind in KINDS:
        for n in grid["group_sizes"]:
            if n > num_devices or num_devices % n:
                continue
            if kind in LOCAL and n != grid["group_sizes"][-1] and kind == "copy":
                continue  # a copy does not depend on a group
            for b in grid["sizes"]:
                outb = b * n if kind == "all_gather" else b
                if outb > grid["max_out_bytes"] or b // 4 < 16 * n:
                    continue
                out.append(MicroSpec(kind, n, b))
    return out


def _micro_program(spec: MicroSpec, devices):
    """A jitted one-op shard_map program on a ("r", "g") mesh with ``g = group``."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh as JMesh
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    P_ = len(devices)
    n = spec.group
    jm = JMesh(np.asarray(devices, dtype=object).reshape(P_ // n, n), ("r", "g"))
    elems = spec.bytes // 4
    cols = 16

    def body(x):
        k = spec.kind
        if k == "all_gather":
            return lax.all_gather(x, "g", axis=0, tiled=True)
        if k == "all_to_all":
            return lax.all_to_all(x, "g", 0, 0, tiled=True)
        if k == "permute":
            return lax.ppermute(x, "g", [(i, (i + 1) % n) for i in range(n)])
        if k == "all_reduce":
            return lax.psum(x, "g")
        if k == "reduce_scatter":
            return lax.psum_scatter(x, "g", scatter_dimension=0, tiled=True)
        if k == "dyn_slice":
            piece = x.shape[0] // n
            return lax.dynamic_slice_in_dim(x, lax.axis_index("g") * piece, piece, axis=0)
        if k == "copy":
            return jnp.transpose(x.reshape(cols, -1)).reshape(-1)
        raise AssertionError(k)

    spec_in = P(("r", "g"))
    f = jax.jit(jax.shard_map(body, mesh=jm, in_specs=spec_in, out_specs=spec_in, check_vma=False))
    x = jax.device_put(np.ones(elems * P_, np.float32), NamedSharding(jm, spec_in))
    return f, x


_BUS_FACTOR = {"all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
               "all_reduce": lambda n: 2 * (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
               "permute": lambda n: 1.0, "dyn_slice": lambda n: 1.0, "copy": lambda n: 1.0}


def run_microbenchmarks(grid: dict, devices, progress=None) -> list[dict]:
    """Measure every spec of the grid; one row per program (with its HLO schedule)."""
    from executor.hlo import hlo_to_schedule
    from executor.measure import time_call

    specs = micro_specs(grid, len(devices))
    rows = []
    for i, spec in enumerate(specs):
        f, x = _micro_program(spec, devices)
        compiled = f.lower(x).compile()
        tm = time_call(compiled, x, warmup=grid["warmup"], repeats=grid["repeats"])
        sched = hlo_to_schedule(compiled.as_text(), num_devices=len(devices), name=spec.name)
        # nccl-tests: size = the larger (output for all-gather) buffer per device
        size = spec.bytes * spec.group if spec.kind == "all_gather" else spec.bytes
        algbw = size / tm.time_s if tm.time_s > 0 else float("nan")
        rows.append({
            "kind": spec.kind, "group": spec.group, "bytes": spec.bytes, "size_bytes": size,
            "time_s": tm.time_s, "time_p10_s": tm.time_p10_s, "time_p90_s": tm.time_p90_s,
            "algbw_Bps": algbw, "busbw_Bps": algbw * _BUS_FACTOR[spec.kind](spec.group),
            "schedule": sched.to_dict(),
        })
        if progress:
            progress(i + 1, len(specs), spec.name)
    return rows


# -- 2. fit --------------------------------------------------------------------------
class _Features:
    """Per-op linear coefficients under the simulator: time = alpha + A/bw + B*lat."""

    def __init__(self, num_devices: int):
        from models import load_profile

        self.base = load_profile(f"cpu-host:{num_devices}")
        self.cache: dict = {}

    def op(self, op) -> tuple[float, float]:
        from models.analytic import local_bytes

        if op.is_local:
            return float(local_bytes(op)), 0.0
        key = (op.kind, op.in_bytes, op.out_bytes, op.send_bytes, op.groups, op.pairs)
        if key not in self.cache:
            self.cache[key] = (self._sim(op, _REF_BW, 0.0) * _REF_BW,
                               self._sim(op, 1e30, _REF_LAT) / _REF_LAT)
        return self.cache[key]

    def _sim(self, op, bw, lat) -> float:
        from models import KindParams
        from simulator import simulate
        from synth.schedule import Schedule

        m = self.base.with_overrides(**{op.kind: KindParams(alpha_s=0.0, bandwidth_Bps=bw, latency_s=lat)})
        return simulate(Schedule(self.base.num_devices, (op,)), m).time_s


def _columns():
    cols = ["program_overhead_s"]
    for k in KINDS:
        cols += [f"{k}.alpha_s", f"{k}.inv_bw"] + ([] if k in LOCAL else [f"{k}.latency_s"])
    return cols


def _design_row(sched, feats: _Features, cols: list[str]) -> np.ndarray:
    idx = {c: i for i, c in enumerate(cols)}
    row = np.zeros(len(cols))
    row[idx["program_overhead_s"]] = 1.0
    for op in sched.ops:
        a, b = feats.op(op)
        row[idx[f"{op.kind}.alpha_s"]] += 1.0
        row[idx[f"{op.kind}.inv_bw"]] += a
        if op.kind not in LOCAL:
            row[idx[f"{op.kind}.latency_s"]] += b
    return row


def fit(rows: list[dict], num_devices: int, stat: str = "time_s") -> dict:
    """Least-squares fit (relative error, non-negative) of every kind's parameters."""
    from scipy.optimize import nnls

    from synth.schedule import Schedule

    feats = _Features(num_devices)
    cols = _columns()
    X = np.stack([_design_row(Schedule.from_dict(r["schedule"]), feats, cols) for r in rows])
    y = np.array([r[stat] for r in rows])
    w = 1.0 / y
    # scale columns so the solver sees comparable magnitudes
    scale = np.where(X.max(axis=0) > 0, X.max(axis=0), 1.0)
    coef, _ = nnls((X / scale) * w[:, None], y * w, maxiter=50 * len(cols))
    coef = coef / scale
    pred = X @ coef
    rel = np.abs(pred - y) / y
    params = dict(zip(cols, coef.tolist()))
    used = X.max(axis=0) > 0
    return {"params": params, "used": dict(zip(cols, used.tolist())),
            "fit_mape": float(rel.mean()), "fit_max_rel_err": float(rel.max()), "points": len(rows),
            "pred": pred.tolist()}


def profile_from_fit(f: dict, num_devices: int, backend: str, note: str) -> dict:
    """The calibrated profile (schema of docs/simulator.md) from a fit."""
    p = f["params"]
    src = f"calibrated by `python -m executor calibrate` ({note}); NNLS fit of {f['points']} " \
          f"microbenchmarks, fit MAPE {100 * f['fit_mape']:.1f}%"

    def bw(k):
        inv = p[f"{k}.inv_bw"]
        return 1.0 / inv if inv > 1e-15 else 1.0e15

    coll = {}
    for k in KINDS:
        if not f["used"].get(f"{k}.alpha_s"):
            continue
        entry = {"alpha_s": {"value": p[f"{k}.alpha_s"], "source": src},
                 "bandwidth_Bps": {"value": bw(k), "source": src}}
        if k not in LOCAL:
            entry["latency_s"] = {"value": p[f"{k}.latency_s"], "source": src}
        coll[k] = entry
    comm = [k for k in coll if k not in LOCAL]
    link_bw = max((bw(k) for k in comm), default=5e9)
    alpha = float(np.median([p[f"{k}.alpha_s"] for k in coll])) if coll else 3e-5
    lat = float(np.median([p[f"{k}.latency_s"] for k in comm])) if comm else 2e-6
    hbm = bw("copy") if "copy" in coll else 5e9
    machine_src = (f"{src}; machine-wide value for kinds without an override "
                   "(largest fitted collective bandwidth / median alpha / median latency)")
    return {
        "name": f"cpu-{num_devices}",
        "extends": "cpu-host",
        "description": f"{num_devices} JAX {backend} devices on {platform.node() or 'this host'}, "
                       f"calibrated {note}",
        "topology": {"kind": "cpu-host", "default_size": str(num_devices)},
        "params": {
            "link_bandwidth_Bps": {"value": link_bw, "source": machine_src},
            "bus_bandwidth_Bps": {"value": link_bw, "source": machine_src},
            "link_latency_s": {"value": lat, "source": machine_src},
            "launch_overhead_s": {"value": alpha, "source": machine_src},
            "hbm_bandwidth_Bps": {"value": hbm, "source": src + " (the copy kind)"},
        },
        "collectives": coll,
        "calibration": {
            "program_overhead_s": p["program_overhead_s"],
            "program_overhead_note": "fixed cost of dispatching one jitted program; the simulator "
                                     "has no such parameter, so predictions add it once per schedule",
            "backend": backend, "devices": num_devices, "fit_mape": f["fit_mape"],
            "fit_max_rel_err": f["fit_max_rel_err"], "points": f["points"], "note": note,
        },
    }


# -- 3. held-out whole plans -----------------------------------------------------------
def heldout_cases(grid: dict, seed: int, num_devices: int, count: int):
    """Seeded (mesh, src, dst) with global array sizes log-uniform in ``heldout_bytes``."""
    from executor.cases import sized_cases

    lo, hi = grid["heldout_bytes"]
    return sized_cases(count, seed, lo, hi, num_devices)


def predict_s(schedule, profile, overhead_s: float) -> float:
    from simulator import simulate

    return simulate(schedule, profile).time_s + overhead_s


def measure_plans(cases, grid: dict, progress=None, label: str = "plans") -> list[dict]:
    """Measure whole redistributions: our plans (both planners) and XLA's (both
    partitioners), each with its schedule (ours from the plan's compiled HLO too)."""
    from executor.run import run_plan, xla_reshard
    from synth.planners import synthesize

    rows = []
    kw = dict(measure=True, warmup=grid["warmup"], repeats=grid["repeats"], strict=False)
    for ci, (mesh, src, dst) in enumerate(cases):
        runs = [run_plan(synthesize(mesh, src, dst, planner), **kw) for planner in ("normal", "easy")]
        runs += [xla_reshard(mesh, src, dst, part, **kw) for part in ("shardy", "gspmd")]
        for r in runs:
            rows.append({
                "case": ci, "mesh": str(mesh), "src": str(src), "dst": str(dst),
                "global_bytes": int(np.prod(src.shape)) * 4, "strategy": r.strategy,
                "correct": r.correct, "time_s": r.timing.time_s, "time_p10_s": r.timing.time_p10_s,
                "time_p90_s": r.timing.time_p90_s, "ops": len(r.schedule.ops),
                "collectives": r.collectives, "full_remat": r.full_remat,
                "schedule": r.schedule.to_dict(),
            })
        if progress:
            progress(ci + 1, len(cases), f"{label}: {mesh} {src} -> {dst}")
    return rows


def validate(profile_path: str, overhead_s: float, rows: list[dict]) -> list[dict]:
    """Predict measured plans with the written profile through the simulator."""
    from models import load_profile
    from synth.schedule import Schedule

    prof = load_profile(profile_path)
    out = []
    for r in rows:
        sched = Schedule.from_dict(r["schedule"])
        if sched.num_devices != prof.num_devices:
            sched = Schedule(prof.num_devices, sched.ops, sched.name, sched.meta)
        pred = predict_s(sched, prof, overhead_s)
        row = {k: v for k, v in r.items() if k != "schedule"}
        row.update(measured_s=r["time_s"], predicted_s=pred,
                   abs_pct_err=100.0 * abs(pred - r["time_s"]) / r["time_s"],
                   abs_pct_err_vs_p10=100.0 * abs(pred - r["time_p10_s"]) / r["time_p10_s"])
        out.append(row)
    return out


# -- driver --------------------------------------------------------------------------------
def calibrate(out_path: str, *, devices: int | None = 8, quick: bool = False, tiny: bool = False,
              seed: int = 0, progress=None) -> dict:
    """Run all three stages; write the profile to ``out_path`` and the report next to
    it (``*.report.json``). Returns the report."""
    from pathlib import Path

    import jax

    from executor._jaxsetup import ensure_devices

    t0 = time.perf_counter()
    devs = ensure_devices(devices)[: devices or None]
    backend = jax.default_backend()
    grid = TINY_GRID if tiny else (QUICK_GRID if quick else FULL_GRID)
    mode = "tiny" if tiny else ("quick" if quick else "full")
    out = Path(out_path)
    if out.suffix != ".json":
        raise ExecutorError(f"--out {out_path}: the calibrated profile is written as JSON; use a .json path")
    out.parent.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda *a: None)

    micro = run_microbenchmarks(grid, devs, progress=lambda i, n, s: say("microbench", i, n, s))
    train_cases = heldout_cases(grid, seed, len(devs), grid["train_cases"])
    test_cases = heldout_cases(grid, seed + 1000, len(devs), grid["heldout_cases"])
    train = measure_plans(train_cases, grid, lambda i, n, s: say("train", i, n, s), "train")
    test = measure_plans(test_cases, grid, lambda i, n, s: say("held-out", i, n, s), "held-out")
    f = fit(micro + train, len(devs))
    note = (f"{mode} grid, {backend} backend, {len(devs)} devices, jax {jax.__version__}, "
            f"{_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d')}")
    prof = profile_from_fit(f, len(devs), backend, note)
    from models.calibration import write_profile

    write_profile(prof, out)  # checks that it loads as a profile first
    for r, p in zip(micro + train, f["pred"]):
        r["fit_s"] = p
    for r in micro:
        r.pop("schedule")
    held = validate(str(out), f["params"]["program_overhead_s"], test)
    # the noise floor: the same held-out plans measured again, later
    again = measure_plans(test_cases, grid, lambda i, n, s: say("re-measure", i, n, s), "re-measure")
    for h, a in zip(held, again):
        h["remeasured_s"] = a["time_s"]
        both = 0.5 * (h["measured_s"] + a["time_s"])
        h["abs_pct_err_vs_mean_of_two"] = 100.0 * abs(h["predicted_s"] - both) / both
    retest = np.array([100 * abs(a["time_s"] - h["measured_s"]) / h["measured_s"] for h, a in zip(held, again)])
    for r in train:
        r.pop("schedule")
    errs = np.array([r["abs_pct_err"] for r in held])
    sim_only = np.array([100 * abs(r["predicted_s"] - f["params"]["program_overhead_s"] - r["measured_s"])
                         / r["measured_s"] for r in held])
    by = {}
    for r in held:
        by.setdefault(r["strategy"], []).append(r["abs_pct_err"])
    worst = sorted(held, key=lambda r: -r["abs_pct_err"])[:5]
    report = {
        "profile": str(out), "mode": mode, "backend": backend, "devices": len(devs),
        "jax_version": jax.__version__, "host": platform.node(), "seed": seed,
        "mape": float(errs.mean()) if len(errs) else None,
        "median_ape": float(np.median(errs)) if len(errs) else None,
        "mape_without_program_overhead": float(sim_only.mean()) if len(errs) else None,
        "mape_vs_p10": float(np.mean([r["abs_pct_err_vs_p10"] for r in held])) if held else None,
        "n_train_plans": len(train),
        "retest_mape": float(retest.mean()) if len(retest) else None,
        "mape_vs_mean_of_two": float(np.mean([h["abs_pct_err_vs_mean_of_two"] for h in held])) if held else None,
        "retest_note": "mean |second measurement - first| / first over the held-out plans: the error "
                       "a perfect model would still show on this host at this time",
        "n_heldout": len(held),
        "mape_by_strategy": {k: float(np.mean(v)) for k, v in by.items()},
        "worst": [{k: r[k] for k in ("mesh", "src", "dst", "strategy", "measured_s", "predicted_s",
                                     "abs_pct_err")} for r in worst],
        "fit": {"mape": f["fit_mape"], "max_rel_err": f["fit_max_rel_err"], "points": f["points"],
                "params": f["params"]},
        "microbenchmarks": micro,
        "train_plans": train,
        "heldout": held,
        "wall_s": time.perf_counter() - t0,
    }
    rp = out.with_name(out.stem + ".report.json")
    rp.write_text(json.dumps(report, indent=2) + "\n")
    report["report_path"] = str(rp)
    return report
