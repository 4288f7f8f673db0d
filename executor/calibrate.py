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
import os
import platform
import time
from dataclasses import dataclass

import numpy as np

from executor.errors import ExecutorError
from executor.measure import Prepared, interleaved_timing

KINDS = ("all_gather", "all_to_all", "permute", "all_reduce", "reduce_scatter", "dyn_slice", "copy")
LOCAL = ("dyn_slice", "copy")

FULL_GRID = {
    "group_sizes": (2, 4, 8),
    "sizes": tuple(1 << k for k in (10, 12, 14, 16, 18, 20, 22, 24)),  # 1 KiB .. 16 MiB
    "max_out_bytes": 64 << 20,
    "rounds": 6,
    "per_round": 3,
    "train_cases": 12,
    "heldout_cases": 12,
    "heldout_bytes": (256 << 10, 32 << 20),
}
QUICK_GRID = {
    "group_sizes": (2, 8),
    "sizes": (4 << 10, 64 << 10, 1 << 20),
    "max_out_bytes": 8 << 20,
    "rounds": 4,
    "per_round": 3,
    "train_cases": 6,
    "heldout_cases": 8,
    "heldout_bytes": (64 << 10, 2 << 20),
}
TINY_GRID = {
    "group_sizes": (2,),
    "sizes": (4 << 10, 64 << 10),
    "max_out_bytes": 1 << 20,
    "rounds": 4,
    "per_round": 3,
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
    #: "" (one process), or where the groups lie on a multi-process machine: "intra"
    #: (consecutive devices of one process), "inter" (one device of each process),
    #: "all" (every device)
    level: str = ""

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.level + '-' if self.level else ''}n{self.group}/{self.bytes}B"


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


def micro_specs_two_level(grid: dict, processes: int, local: int) -> list[MicroSpec]:
    """Microbenchmarks of a machine of ``processes`` x ``local`` devices: each kind on
    groups inside one process (every grid group size up to ``local``), on groups of
    one device per process, and on all devices."""
    out = []
    levels = [("intra", n) for n in grid["group_sizes"] if n <= local and local % n == 0]
    levels += [("inter", processes), ("all", processes * local)]
    for kind in KINDS:
        for level, n in levels:
            if kind in LOCAL and level != "intra":
                continue  # local work does not depend on where the groups lie
            if kind == "copy" and n != levels[0][1]:
                continue  # a copy does not depend on a group
            for b in grid["sizes"]:
                outb = b * n if kind == "all_gather" else b
                if outb > grid["max_out_bytes"] or b // 4 < 16 * n:
                    continue
                out.append(MicroSpec(kind, n, b, level))
    return out


def _micro_program(spec: MicroSpec, devices, processes: int = 1):
    """A jitted one-op shard_map program on a ("r", "g") mesh with ``g = group``;
    for ``level == "inter"`` the ``g`` axis runs across the processes."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh as JMesh
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    P_ = len(devices)
    n = spec.group
    if spec.level == "inter":
        jm = JMesh(np.asarray(devices, dtype=object).reshape(processes, P_ // processes), ("g", "r"))
    else:
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
    sh = NamedSharding(jm, spec_in)
    x = jax.jit(lambda: jnp.ones((elems * P_,), jnp.float32), out_shardings=sh)()
    return f, x


_BUS_FACTOR = {"all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
               "all_reduce": lambda n: 2 * (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
               "permute": lambda n: 1.0, "dyn_slice": lambda n: 1.0, "copy": lambda n: 1.0}


def prepare_microbenchmarks(grid: dict, devices, progress=None, processes: int = 1) -> list[Prepared]:
    """Compile every spec of the grid and read its schedule from the HLO."""
    import jax

    from executor.hlo import hlo_to_schedule

    if processes > 1:
        specs = micro_specs_two_level(grid, processes, len(devices) // processes)
    else:
        specs = micro_specs(grid, len(devices))
    out = []
    for i, spec in enumerate(specs):
        f, x = _micro_program(spec, devices, processes)
        from executor.run import _compiler_of, compile_guard, nbytes_and_devices

        with compile_guard(f"calibration microbenchmark {spec.name}", _compiler_of(x), *nbytes_and_devices(x)):
            compiled = f.lower(x).compile()
        sched = hlo_to_schedule(compiled.as_text(), num_devices=len(devices), name=spec.name)
        shape, sharding = x.shape, x.sharding
        del x
        size = spec.bytes * spec.group if spec.kind == "all_gather" else spec.bytes
        row = {"kind": spec.kind, "group": spec.group, "bytes": spec.bytes, "size_bytes": size,
               "schedule": sched.to_dict()}
        if spec.level:
            row["level"] = spec.level

        def make(shape=shape, sharding=sharding):
            import jax.numpy as jnp

            return jax.jit(lambda: jnp.ones(shape, jnp.float32), out_shardings=sharding)()

        out.append(Prepared(compiled, make, row))
        if progress:
            progress(i + 1, len(specs), spec.name)
    return out


def finish_microbenchmark(p: Prepared) -> dict:
    r = p.row
    t = r["time_s"]
    r["algbw_Bps"] = r["size_bytes"] / t if t > 0 else float("nan")
    r["busbw_Bps"] = r["algbw_Bps"] * _BUS_FACTOR[r["kind"]](r["group"])
    return r


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
          f"measured programs ({f.get('n_micro', '?')} microbenchmarks + {f.get('n_train', '?')} " \
          f"training plans), fit MAPE {100 * f['fit_mape']:.1f}%"

    from models.calibration import fitted_bandwidth_Bps

    def bw(k):
        # None where the fit ran to its bound (1/bw = 0) or left the plausible range: not shipped
        return fitted_bandwidth_Bps(p[f"{k}.inv_bw"])

    coll = {}
    flags = []
    for k in KINDS:
        if not f["used"].get(f"{k}.alpha_s"):
            continue
        entry = {"alpha_s": {"value": p[f"{k}.alpha_s"], "source": src}}
        if bw(k) is not None:
            entry["bandwidth_Bps"] = {"value": bw(k), "source": src}
        else:
            flags.append(f"{k}: fitted 1/bandwidth = {p[f'{k}.inv_bw']:.3g} s/B (at the fit's bound or "
                         f"implausible); no bandwidth override shipped, the kind uses the machine's")
        if k not in LOCAL:
            entry["latency_s"] = {"value": p[f"{k}.latency_s"], "source": src}
        if not p[f"{k}.alpha_s"] > 0:
            flags.append(f"{k}: alpha_s = 0 (at the fit's bound); kept, flagged")
        coll[k] = entry
    comm = [k for k in coll if k not in LOCAL]
    link_bw = max((bw(k) for k in comm if bw(k) is not None), default=5e9)
    alpha = float(np.median([p[f"{k}.alpha_s"] for k in coll])) if coll else 3e-5
    lat = float(np.median([p[f"{k}.latency_s"] for k in comm])) if comm else 2e-6
    hbm = (bw("copy") or 5e9) if "copy" in coll else 5e9
    machine_src = (f"{src}; machine-wide value for kinds without an override "
                   "(largest plausible fitted collective bandwidth / median alpha / median latency)")
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
            "flags": flags,
        },
    }


# -- 2b. fit of a two-level machine (processes x devices) ------------------------------
#: The two link classes of a cpu-cluster machine: the profile params that hold them.
LINK_CLASSES = {
    "intra_process": {"bandwidth": "link_bandwidth_Bps", "latency": "link_latency_s",
                      "medium": "transfers between the CPU devices of one JAX process"},
    "inter_process": {"bandwidth": "nic_bandwidth_Bps", "latency": "nic_latency_s",
                      "medium": "gloo collectives over TCP (loopback here) between JAX processes"},
}
_THETA = ("intra_process.inv_bw", "intra_process.latency_s", "inter_process.inv_bw", "inter_process.latency_s")
_THETA0 = (1 / 5e9, 2e-6, 1 / 1e9, 5e-5)  # starting point (the cpu-cluster placeholders)
_MIN_STEP = (1e-13, 1e-8, 1e-13, 1e-8)  # finite-difference floor: 1/(10 TB/s), 10 ns
_COLLECTIVES = tuple(k for k in KINDS if k not in LOCAL)


class _TwoLevelFeatures:
    """Per-op coefficients of the link parameters on a ``cpu-cluster`` machine.

    With every alpha at zero, the simulated time of a collective is homogeneous of
    degree one and piecewise linear in ``theta = (1/bw, latency)`` of both link
    classes (each step waits for its slowest link), so at a given ``theta`` it equals
    ``sum_j dT/dtheta_j * theta_j``. The gradients come from finite differences; the
    fit alternates them with a linear least-squares solve until ``theta`` settles."""

    def __init__(self, processes: int, local: int):
        from models import KindParams, load_profile

        self.base = load_profile(f"cpu-cluster:{processes}x{local}").with_overrides(
            **{k: KindParams(alpha_s=0.0) for k in _COLLECTIVES})
        self.cache: dict = {}

    def machine(self, theta):
        import dataclasses

        return dataclasses.replace(self.base, link_bandwidth_Bps=1.0 / theta[0], link_latency_s=theta[1],
                                   nic_bandwidth_Bps=1.0 / theta[2], nic_latency_s=theta[3])

    def _t(self, op, theta) -> float:
        from simulator import simulate
        from synth.schedule import Schedule

        return simulate(Schedule(self.base.num_devices, (op,)), self.machine(theta)).time_s

    def grad(self, op, theta) -> tuple[np.ndarray, float]:
        key = (op.kind, op.in_bytes, op.out_bytes, op.send_bytes, op.groups, op.pairs, tuple(theta))
        if key not in self.cache:
            t0 = self._t(op, theta)
            g = np.zeros(4)
            for j in range(4):
                th = list(theta)
                h = max(theta[j] * 0.01, _MIN_STEP[j])  # a parameter may sit at zero
                th[j] += h
                g[j] = (self._t(op, th) - t0) / h
            self.cache[key] = (g, t0 - float(g @ np.asarray(theta)))
        return self.cache[key]


def _two_level_columns():
    return (["program_overhead_s"] + [f"{k}.alpha_s" for k in KINDS] + [f"{k}.inv_bw" for k in LOCAL]
            + list(_THETA))


def fit_two_level(rows: list[dict], processes: int, local: int, stat: str = "time_s", iters: int = 6) -> dict:
    """NNLS fit (relative error) of per-kind alphas, local bandwidths, one program
    overhead, and bandwidth and latency of both link classes."""
    from scipy.optimize import nnls

    from models.analytic import local_bytes
    from synth.schedule import Schedule

    feats = _TwoLevelFeatures(processes, local)
    cols = _two_level_columns()
    idx = {c: i for i, c in enumerate(cols)}
    scheds = [Schedule.from_dict(r["schedule"]) for r in rows]
    y = np.array([r[stat] for r in rows])
    w = 1.0 / y
    def design(theta):
        X = np.zeros((len(rows), len(cols)))
        off = np.zeros(len(rows))
        for i, sched in enumerate(scheds):
            X[i, idx["program_overhead_s"]] = 1.0
            for op in sched.ops:
                X[i, idx[f"{op.kind}.alpha_s"]] += 1.0
                if op.is_local:
                    X[i, idx[f"{op.kind}.inv_bw"]] += float(local_bytes(op))
                else:
                    g, o = feats.grad(op, theta)
                    X[i, -4:] += g
                    off[i] += o
        return X, off

    theta = np.array(_THETA0)
    history = []
    for _ in range(iters):
        X, off = design(theta)
        scale = np.where(X.max(axis=0) > 0, X.max(axis=0), 1.0)
        coef, _ = nnls((X / scale) * w[:, None], (y - off) * w, maxiter=50 * len(cols))
        coef = coef / scale
        new = coef[-4:].copy()
        # a class no benchmark constrains keeps its previous value; never exactly zero
        floor = np.array([1e-13, 0.0, 1e-13, 0.0])
        new = np.where(X[:, -4:].max(axis=0) > 0, np.maximum(new, floor), theta)
        new[[0, 2]] = np.maximum(new[[0, 2]], 1e-13)
        history.append(new.tolist())
        done = np.allclose(new, theta, rtol=1e-3, atol=1e-12)
        theta = new
        if done:
            break
    X, off = design(theta)  # the model at the final link parameters
    coef[-4:] = theta
    pred = X @ coef + off
    rel = np.abs(pred - y) / y
    params = dict(zip(cols, coef.tolist()))
    used = X.max(axis=0) > 0
    return {"params": params, "used": dict(zip(cols, used.tolist())), "fit_mape": float(rel.mean()),
            "fit_max_rel_err": float(rel.max()), "points": len(rows), "pred": pred.tolist(),
            "iterations": len(history), "theta_history": history}


def link_classes(f: dict) -> dict:
    """The fitted link classes, named, with units in the keys (for reports and the app)."""
    p = f["params"]
    out = {}
    for name, c in LINK_CLASSES.items():
        inv = p[f"{name}.inv_bw"]
        out[name] = {"bandwidth_Bps": 1.0 / inv, "latency_s": p[f"{name}.latency_s"],
                     "profile_params": {"bandwidth_Bps": c["bandwidth"], "latency_s": c["latency"]},
                     "medium": c["medium"]}
    return out


def profile_from_two_level_fit(f: dict, processes: int, local: int, backend: str, note: str) -> dict:
    """A ``cpu-cluster`` profile (``extends: cpu-cluster``, sized PROCESSESxLOCAL) from a fit."""
    p = f["params"]
    src = f"calibrated by `python -m executor calibrate --processes {processes}` ({note}); NNLS fit of " \
          f"{f['points']} measured programs ({f.get('n_micro', '?')} microbenchmarks + " \
          f"{f.get('n_train', '?')} training plans), fit MAPE {100 * f['fit_mape']:.1f}%"
    lc = link_classes(f)
    coll = {}
    for k in KINDS:
        if not f["used"].get(f"{k}.alpha_s"):
            continue
        coll[k] = {"alpha_s": {"value": p[f"{k}.alpha_s"], "source": src}}
        if k in LOCAL:
            inv = p[f"{k}.inv_bw"]
            from models.calibration import fitted_bandwidth_Bps

            if fitted_bandwidth_Bps(inv) is not None:   # a fit at its bound ships no bandwidth
                coll[k]["bandwidth_Bps"] = {"value": fitted_bandwidth_Bps(inv), "source": src}
    alpha = float(np.median([p[f"{k}.alpha_s"] for k in coll])) if coll else 3e-5
    # the copy kind's fitted rate; where it was not fitted or was withheld (a fit at its bound
    # ships no bandwidth), the cpu-cluster default's 5 GB/s
    hbm = coll.get("copy", {}).get("bandwidth_Bps", {}).get("value", 5e9)
    per = lambda c: f"{src}; the {c} link class"  # noqa: E731
    return {
        "name": f"cpu-{processes}x{local}",
        "extends": "cpu-cluster",
        "description": f"{processes} JAX {backend} processes x {local} devices (jax.distributed, gloo) on "
                       f"{platform.node() or 'this host'}, calibrated {note}",
        "topology": {"kind": "switched", "default_size": f"{processes}x{local}"},
        "params": {
            "gpus_per_node": {"value": local, "source": "devices per process of the calibrated run"},
            "link_bandwidth_Bps": {"value": lc["intra_process"]["bandwidth_Bps"], "source": per("intra-process")},
            "link_latency_s": {"value": lc["intra_process"]["latency_s"], "source": per("intra-process")},
            "nic_bandwidth_Bps": {"value": lc["inter_process"]["bandwidth_Bps"], "source": per("inter-process")},
            "nic_latency_s": {"value": lc["inter_process"]["latency_s"], "source": per("inter-process")},
            "launch_overhead_s": {"value": alpha, "source": f"{src}; median of the fitted per-kind alphas, "
                                                           "for kinds without an override"},
            "hbm_bandwidth_Bps": {"value": hbm, "source": src + " (the copy kind)"},
        },
        "collectives": coll,
        "calibration": {
            "program_overhead_s": p["program_overhead_s"],
            "program_overhead_note": "fixed cost of dispatching one jitted program; the simulator "
                                     "has no such parameter, so predictions add it once per schedule",
            "link_classes": lc,
            "processes": processes, "devices_per_process": local,
            "backend": backend, "devices": processes * local, "fit_mape": f["fit_mape"],
            "fit_max_rel_err": f["fit_max_rel_err"], "points": f["points"], "note": note,
        },
    }


def link_class_lines(report: dict) -> list[str]:
    """Text lines for the link classes and the crossing/within MAPE of a two-level report."""
    lc = report.get("link_classes")
    if not lc:
        return []
    out = [f"link classes ({report['processes']} processes x {report['devices_per_process']} devices):"]
    for name, c in lc.items():
        out.append(f"  {name:14s} {c['bandwidth_Bps'] / 1e6:9.1f} MB/s  latency {c['latency_s'] * 1e6:8.1f} us"
                   f"  ({c['medium']})")
    cross, within = report.get("mape_crossing"), report.get("mape_within_process")
    out.append(f"  held-out plans that cross processes: {report.get('n_heldout_crossing')}, MAPE "
               + (f"{cross:.1f}%" if cross is not None else "-") + "; within one process: MAPE "
               + (f"{within:.1f}%" if within is not None else "-"))
    return out


def crosses_processes(schedule, local: int) -> bool:
    """Whether any collective of ``schedule`` moves data between processes of ``local`` devices."""
    for op in schedule.ops:
        if op.kind == "permute":
            if any(a // local != b // local for a, b in op.pairs):
                return True
        elif not op.is_local and any(len({d // local for d in g}) > 1 for g in op.groups):
            return True
    return False


# -- 3. held-out whole plans -----------------------------------------------------------
def heldout_cases(grid: dict, seed: int, num_devices: int, count: int):
    """Seeded (mesh, src, dst) with global array sizes log-uniform in ``heldout_bytes``."""
    from executor.cases import sized_cases

    lo, hi = grid["heldout_bytes"]
    return sized_cases(count, seed, lo, hi, num_devices)


def predict_s(schedule, profile, overhead_s: float) -> float:
    from simulator import simulate

    return simulate(schedule, profile).time_s + overhead_s


def prepare_plans(cases, progress=None, label: str = "plans") -> list[Prepared]:
    """Compile (and check) whole redistributions: our plans from both planners and
    XLA's from both partitioners, each with its schedule read from the compiled HLO."""
    from executor.run import run_plan, xla_reshard
    from synth.planners import synthesize

    out = []
    for ci, (mesh, src, dst) in enumerate(cases):
        runs = [run_plan(synthesize(mesh, src, dst, planner), strict=False) for planner in ("normal", "easy")]
        runs += [xla_reshard(mesh, src, dst, part, measure=False) for part in ("shardy", "gspmd")]
        for r in runs:
            row = {
                "case": ci, "mesh": str(mesh), "src": str(src), "dst": str(dst),
                "global_bytes": int(np.prod(src.shape)) * 4, "strategy": r.strategy,
                "correct": r.correct, "ops": len(r.schedule.ops),
                "collectives": r.collectives, "full_remat": r.full_remat,
                "schedule": r.schedule.to_dict(),
            }
            out.append(Prepared(r.compiled, r.make_input, row))
        if progress:
            progress(ci + 1, len(cases), f"{label}: {mesh} {src} -> {dst}")
    return out


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
        if prof.kind == "switched":
            row["crosses_processes"] = crosses_processes(sched, prof.dims[1])
        row.update(measured_s=r["time_s"], predicted_s=pred,
                   abs_pct_err=100.0 * abs(pred - r["time_s"]) / r["time_s"],
                   abs_pct_err_vs_p10=100.0 * abs(pred - r["time_p10_s"]) / r["time_p10_s"])
        a, b = r.get("time_first_half_s"), r.get("time_second_half_s")
        if a and b:
            row["retest_pct"] = 100.0 * abs(a - b) / (0.5 * (a + b))
        out.append(row)
    return out


def _crossing_summary(held: list[dict], f: dict) -> dict:
    cross = [r["abs_pct_err"] for r in held if r.get("crosses_processes")]
    within = [r["abs_pct_err"] for r in held if not r.get("crosses_processes")]
    return {"link_classes": link_classes(f), "fit_iterations": f.get("iterations"),
            "n_heldout_crossing": len(cross),
            "mape_crossing": float(np.mean(cross)) if cross else None,
            "mape_within_process": float(np.mean(within)) if within else None}


# -- driver --------------------------------------------------------------------------------
def calibrate(out_path: str, *, devices: int | None = 8, quick: bool = False, tiny: bool = False,
              seed: int = 0, progress=None) -> dict:
    """Run all three stages; write the profile to ``out_path`` and the report next to
    it (``*.report.json``). Returns the report."""
    from pathlib import Path

    import jax

    from executor._jaxsetup import ensure_devices

    out = Path(out_path)
    if out.suffix != ".json":
        raise ExecutorError(f"--out {out_path}: the calibrated profile is written as JSON; use a .json path")
    t0 = time.perf_counter()
    devs = ensure_devices(devices)[: devices or None]
    backend = jax.default_backend()
    grid = TINY_GRID if tiny else (QUICK_GRID if quick else FULL_GRID)
    mode = "tiny" if tiny else ("quick" if quick else "full")
    nproc = jax.process_count()
    local = len(devs) // nproc
    if nproc > 1 and (len(devs) % nproc or any(d.process_index != i // local for i, d in enumerate(devs))):
        raise ExecutorError(f"calibrate: {len(devs)} devices do not split into {nproc} processes of equal, "
                            "consecutive blocks; use --devices equal to all devices of the run")
    me = jax.process_index()
    if me == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
    say = progress if (progress and me == 0) else (lambda *a: None)

    micro = prepare_microbenchmarks(grid, devs, progress=lambda i, n, s: say("compile microbenchmarks", i, n, s),
                                    processes=nproc)
    train_cases = heldout_cases(grid, seed, len(devs), grid["train_cases"])
    test_cases = heldout_cases(grid, seed + 1000, len(devs), grid["heldout_cases"])
    train = prepare_plans(train_cases, lambda i, n, s: say("compile training plans", i, n, s), "train")
    test = prepare_plans(test_cases, lambda i, n, s: say("compile held-out plans", i, n, s), "held-out")
    interleaved_timing(micro + train + test, grid["rounds"], grid["per_round"], seed,
                       progress=lambda i, n, s: say("timing rounds", i, n, s))
    micro_rows = [finish_microbenchmark(p) for p in micro]
    train_rows = [p.row for p in train]
    test_rows = [p.row for p in test]
    jax_version = jax.__version__
    if nproc > 1:
        from executor import distributed

        # each process checked the shards it holds; a plan is correct when it is on all
        flags = distributed.gather_flags([bool(r["correct"]) for r in train_rows + test_rows])
        for j, r in enumerate(train_rows + test_rows):
            r["correct"] = all(fl[j] for fl in flags)
        del micro, train, test
        distributed.shutdown()  # the rest is arithmetic on process 0's timings
        if me != 0:
            return None
    else:
        del micro, train, test
    raw = os.environ.get("REDIST_CALIBRATION_RAW")
    if raw:  # the measured rows with their schedules, to re-fit without measuring again
        Path(raw).write_text(json.dumps({"micro": micro_rows, "train": train_rows, "test": test_rows}))
    note = (f"{mode} grid, {backend} backend, {len(devs)} devices"
            + (f" in {nproc} processes of {local}" if nproc > 1 else "")
            + f", jax {jax_version}, {_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d')}")
    if nproc > 1:
        f = fit_two_level(micro_rows + train_rows, nproc, local)
        f.update(n_micro=len(micro_rows), n_train=len(train_rows))
        prof = profile_from_two_level_fit(f, nproc, local, backend, note)
    else:
        f = fit(micro_rows + train_rows, len(devs))
        f.update(n_micro=len(micro_rows), n_train=len(train_rows))
        prof = profile_from_fit(f, len(devs), backend, note)
    from models.calibration import write_profile

    write_profile(prof, out)  # checks that it loads as a profile first
    for r, p in zip(micro_rows + train_rows, f["pred"]):
        r["fit_s"] = p
    for r in micro_rows + train_rows:
        r.pop("schedule")
    held = validate(str(out), f["params"]["program_overhead_s"], test_rows)
    retest = np.array([h["retest_pct"] for h in held if "retest_pct" in h])
    errs = np.array([r["abs_pct_err"] for r in held])
    sim_only = np.array([100 * abs(r["predicted_s"] - f["params"]["program_overhead_s"] - r["measured_s"])
                         / r["measured_s"] for r in held])
    train = train_rows
    micro = micro_rows
    by = {}
    for r in held:
        by.setdefault(r["strategy"], []).append(r["abs_pct_err"])
    worst = sorted(held, key=lambda r: -r["abs_pct_err"])[:5]
    report = {
        "profile": str(out), "mode": mode, "backend": backend, "devices": len(devs),
        "jax_version": jax_version, "host": platform.node(), "seed": seed,
        "processes": nproc, "devices_per_process": local,
        "mape": float(errs.mean()) if len(errs) else None,
        "median_ape": float(np.median(errs)) if len(errs) else None,
        "mape_without_program_overhead": float(sim_only.mean()) if len(errs) else None,
        "mape_vs_p10": float(np.mean([r["abs_pct_err_vs_p10"] for r in held])) if held else None,
        "n_train_plans": len(train),
        "retest_mape": float(retest.mean()) if len(retest) else None,
        "retest_note": "mean |t_even - t_odd| / mean(t_even, t_odd) over the held-out plans, where "
                       "t_even and t_odd are the medians of the even and odd timing rounds: two "
                       "independent measurements of the same program taken in the same interleaved "
                       "session; the error a perfect model would still show on this host",
        "n_heldout": len(held),
        "mape_by_strategy": {k: float(np.mean(v)) for k, v in by.items()},
        **(_crossing_summary(held, f) if nproc > 1 else {}),
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
    from synth.fileio import atomic_write_text

    atomic_write_text(rp, json.dumps(report, indent=2) + "\n", "--out (report)")
    report["report_path"] = str(rp)
    return report
