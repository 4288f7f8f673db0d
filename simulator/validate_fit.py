"""``python -m simulator.validate_fit``: refit a profile's constants on XLA's collective table,
at the sizes that are *not* validation rows.

``simulator/data/xla_collective_perf.yaml`` holds XLA's measured curves (1 KiB - 2 GiB, every
power of two). ``published.yaml`` validates on its 4, 16, 64 and 256 MiB points; the profile
constants that come from the table (the bandwidth ramp ``ramp_half_bytes`` /
``ramp_size_exponent``, ``a2a_efficiency`` / ``a2a_latency_s`` / ``a2a_pair_efficiency``,
``reduce_input_bandwidth_Bps``, ...) are fitted on **other** points of the same curves:
:data:`FIT_SIZES` (2, 8, 32, 128, 512 MiB and 1 GiB). :func:`fit_points` refuses a size that is
also a validation row, so a fitted constant never sees a held-out point.

The objective is the mean absolute relative error of the analytic model
(:meth:`models.collectives.CollPlan.analytic_s`, which the flow replay equals on these
uncontended single-node collectives) over the points; the search is Nelder-Mead in the
logarithm of each constant, from the profile's current values (a local refit: it follows a
change elsewhere in the model, it does not search the whole space).

Worked example (round 3 of issue 23): ``ll128_hop_latency_s`` was 1.25 us, NCCL's *tree* LL128
step; the ring's is 1.9 us (``tuning.cc`` hwLat[NVLINK][Ring][LL128]). With 1.9 us the H100
ramp fitted on the 36 all-gather / reduce-scatter points went from h = 8.4 MB, g = 0.74
(7.43% there) to h = 5.77 MB, g = 0.654 (6.89%)::

    python -m simulator.validate_fit --profile dgx-h100:1 --system H100 \\
        --params ramp_half_bytes,ramp_size_exponent

Bad input (unknown profile, system, collective or parameter) prints one ``error:`` line and
exits 2. Each point costs one ``plan_op`` (about a millisecond); at most :data:`MAX_EVALS`
model evaluations per refit.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from synth.errors import RedistributionError

#: sizes (nccl-tests size, bytes) the table's constants are fitted on: none is a validation row
FIT_SIZES = (2 << 20, 8 << 20, 32 << 20, 128 << 20, 512 << 20, 1 << 30)
#: collectives whose curves the table holds
KINDS = ("all_gather", "reduce_scatter", "all_to_all", "all_reduce")
#: most objective evaluations of one refit (each is one pass over the points)
MAX_EVALS = 400


def validation_sizes(system: str) -> set[tuple[str, int, int]]:
    """``(collective, ranks, size)`` of the published rows taken from XLA's table for ``system``."""
    from simulator.validate import _XLA_SYSTEMS, load_rows

    names = {v: k for k, v in _XLA_SYSTEMS.items()}
    prof = names.get(system)
    out = set()
    for r in load_rows():
        if r.get("origin") == "xla-table" and prof and r["profile"].split(":")[0] == prof:
            out.add((r["collective"], int(r["devices"]), int(r["size_bytes"])))
    return out


def fit_points(system: str, kinds=("all_gather", "reduce_scatter"), sizes=FIT_SIZES) -> list[dict]:
    """Points of XLA's table for ``system`` (``H100`` or ``B200``) at ``sizes``, one row dict per
    (collective, group size, size) in ``published.yaml``'s form (``devices``, ``groups``,
    ``size_bytes``, ``time_s``). Refuses a size that is also a validation row."""
    from simulator.validate import _xla_curves

    curves = _xla_curves()
    systems = sorted({k[0] for k in curves})
    if system not in systems:
        raise RedistributionError(f"validate_fit: system {system!r} is not in XLA's table; one of {systems}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise RedistributionError(f"validate_fit: unknown collective(s) {bad}; use some of {list(KINDS)}")
    held = validation_sizes(system)
    out = []
    for (sys_name, kind, ranks), (log2s, algbw) in sorted(curves.items()):
        if sys_name != system or kind not in kinds:
            continue
        table = dict(zip(np.rint(2.0 ** log2s).astype(np.int64).tolist(), algbw.tolist()))
        for S in sizes:
            if (kind, ranks, S) in held:
                raise RedistributionError(f"validate_fit: {kind} over {ranks} ranks at {S} B is a validation row "
                                          f"(published.yaml); fit on other sizes")
            if S not in table:
                continue
            out.append({"id": f"fit-{system}-{kind}-{ranks}-{S}", "collective": kind, "devices": ranks,
                        "groups": 8 // ranks, "size_bytes": S, "time_s": S / table[S]})
    return out


def fit_mape(machine, points) -> float:
    """Mean |simulated / measured - 1| of the analytic model over ``points``."""
    from models.collectives import plan_op
    from simulator.validate import row_op

    err = [abs(plan_op(row_op(p, machine), machine).analytic_s() / p["time_s"] - 1.0) for p in points]
    return float(np.mean(err))


def _with(machine, values: dict):
    m = dataclasses.replace(machine, **values)
    m.__dict__.pop("topology", None)   # cached graph of the old parameters
    return m


def refit(machine, points, params) -> tuple[float, float, dict]:
    """(MAPE at the current values, MAPE after, fitted values) of ``params`` on ``points``."""
    from scipy.optimize import minimize

    bad = [p for p in params if not isinstance(getattr(machine, p, None), (int, float)) or isinstance(getattr(machine, p), bool)]
    if bad:
        raise RedistributionError(f"validate_fit: {bad} are not numeric parameters of {machine.spec}")
    x0 = np.array([float(getattr(machine, p)) for p in params])
    if np.any(x0 <= 0):
        raise RedistributionError(f"validate_fit: {dict(zip(params, x0))}: a refit starts from positive values")

    def values(z):
        return dict(zip(params, (x0 * np.exp(z)).tolist()))

    def f(z):
        try:
            return fit_mape(_with(machine, values(z)), points)
        except RedistributionError:   # a value the profile refuses (e.g. an efficiency above 1)
            return float("inf")

    before = f(np.zeros(len(params)))
    res = minimize(f, np.zeros(len(params)), method="Nelder-Mead",
                   options={"xatol": 1e-3, "fatol": 1e-5, "maxfev": MAX_EVALS})
    return before, float(res.fun), values(res.x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator.validate_fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True, help="hardware spec, e.g. dgx-h100:1")
    ap.add_argument("--system", required=True, help="XLA table system: H100 or B200")
    ap.add_argument("--params", required=True, help="comma-separated profile parameters to refit")
    ap.add_argument("--kinds", default="all_gather,reduce_scatter", help="collectives whose points to fit on")
    args = ap.parse_args(argv)
    try:
        from models import load_profile

        m = load_profile(args.profile)
        params = [p for p in args.params.split(",") if p]
        pts = fit_points(args.system, tuple(k for k in args.kinds.split(",") if k))
        if not pts:
            raise RedistributionError(f"validate_fit: no points of {args.kinds} for {args.system}")
        before, after, vals = refit(m, pts, params)
    except RedistributionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    shown = ", ".join(f"{k}={v:.4g}" for k, v in vals.items())
    print(f"{args.profile} on XLA's {args.system} table, {len(pts)} points ({args.kinds}): "
          f"MAPE {before:.2%} at the current values -> {after:.2%} with {shown}")
    return 0


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
