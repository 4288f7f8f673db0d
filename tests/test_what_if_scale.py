"""What-if scaling (HardwareProfile.with_scale): every latency and every interconnect bandwidth of
every shipped profile moves with its knob (issue 23/24 what-if sweeps).

A fault found in round 3: on NCCL-protocol machines the protocol, all-to-all and NVLS latencies
were not scaled, so a 4 KiB all-gather on dgx-h100 took 11.03 us at latency_scale 0, 1 and 10."""

import dataclasses
import math

import pytest

from models import load_profile
from models import profiles as profiles_mod
from models.analytic import launch_floor_s, op_bound_terms, op_time_s
from models.profiles import PROTOCOLS, SCALED_BANDWIDTHS, SCALED_LATENCIES, UNSCALED_RATES, HardwareProfile
from simulator import simulate
from synth import Schedule, ScheduleOp

#: every shipped profile, at a size whose ops cost in milliseconds of test time (two-node sizes
#: where the machine has nodes, so NIC latencies and network protocols are exercised)
SPECS = ["tpu-v4:2x2x2", "tpu-v5e:2x4", "tpu-v5p:2x2x2", "tpu-v6e:2x4", "tpu-v5p-multislice:2x4",
         "dgx-a100:2x4", "dgx-b200:2x4", "dgx-h100:1", "dgx-h100:2", "gb200-nvl72:1x8",
         "h100-multinode:2", "cpu-host:8", "cpu-cluster:2x4",
         str(profiles_mod.PROFILE_DIR / "calibrated" / "cpu-8.json")]
LAT = (0.0, 1.0, 10.0)
BW = (0.5, 1.0, 2.0)
SMALL, LARGE = 256, 64 << 20       # bytes per device block


def test_every_shipped_profile_is_covered():
    names = {p.stem for p in profiles_mod.PROFILE_DIR.glob("*.yaml")}
    assert names <= {s.split(":")[0] for s in SPECS}, names


def _ops(n: int, b: int) -> dict:
    g = (tuple(range(n)),)
    return {
        "all_gather": ScheduleOp("all_gather", b, n * b, b, (n - 1) * b, groups=g),
        "reduce_scatter": ScheduleOp("reduce_scatter", n * b, b, (n - 1) * b, (n - 1) * b, groups=g),
        "all_reduce": ScheduleOp("all_reduce", b, b, b, b, groups=g),
        "all_to_all": ScheduleOp("all_to_all", n * b, n * b, (n - 1) * b, (n - 1) * b, groups=g),
        "permute": ScheduleOp("permute", b, b, b, b, pairs=tuple((i, (i + 1) % n) for i in range(n))),
        "copy": ScheduleOp("copy", b, b, groups=tuple((d,) for d in range(n))),
        "dyn_slice": ScheduleOp("dyn_slice", 2 * b, b, groups=tuple((d,) for d in range(n))),
    }


def _slowest_rate_Bps(m: HardwareProfile) -> float:
    """The least rate any byte can move at on ``m``: the slowest stated bandwidth times the least
    efficiency times LL's wire share (half) -- a cost above bytes / this is a fixed cost."""
    rates = [getattr(m, f) for f in SCALED_BANDWIDTHS + UNSCALED_RATES if getattr(m, f) > 0]
    rates += [kp.bandwidth_Bps for _k, kp in m.overrides if kp.bandwidth_Bps]
    effs = [getattr(m, f) for f in ("link_efficiency", "nic_efficiency", "pair_efficiency", "a2a_efficiency",
                                    "a2a_pair_efficiency", "nvls_efficiency") if getattr(m, f) > 0]
    return min(rates) * min(effs + [1.0]) * min(PROTOCOLS.values())


def _le(a: float, b: float) -> bool:
    return a <= b * (1 + 1e-9) + 1e-15


@pytest.mark.parametrize("spec", SPECS)
def test_times_move_with_every_latency_and_bandwidth(spec):
    m = load_profile(spec)
    n = m.num_devices
    for size in (SMALL, LARGE):
        for kind, op in _ops(n, size).items():
            lat = [op_time_s(op, m.with_scale(latency_scale=a)) for a in LAT]
            bw = [op_time_s(op, m.with_scale(bandwidth_scale=x)) for x in BW]
            where = f"{spec} {kind} {size} B: latency {lat}, bandwidth {bw}"
            assert lat[1] == op_time_s(op, m) == bw[1], where                  # scale 1 changes nothing
            assert _le(lat[0], lat[1]) and _le(lat[1], lat[2]), where
            assert _le(bw[2], bw[1]) and _le(bw[1], bw[0]), where
            if size == SMALL:
                # every op pays a fixed cost at scale 1 (bar a local kind calibrated to alpha 0) and
                # none at 0: 0 < 1 < 10
                if not (op.is_local and m.alpha_s(kind) == 0):
                    assert lat[0] < lat[1] < lat[2], where
                # bytes alone: a ring all-reduce moves 2(n-1)/n of its buffer, the rest at most theirs;
                # on a CPU host all devices share one bus
                moved = (2 if kind == "all_reduce" else 1) * max(op.in_bytes, op.out_bytes, op.send_bytes,
                                                                 op.recv_bytes)
                moved *= n if m.kind == "cpu-host" else 1
                assert lat[0] <= moved / _slowest_rate_Bps(m), where
            elif kind in ("all_gather", "all_to_all", "permute"):
                # faster links, faster op (reductions may stay bound by the on-device reduction rate)
                assert bw[2] < bw[0], where


@pytest.mark.parametrize("spec", ["dgx-h100:1", "dgx-h100:2", "h100-multinode:2", "tpu-v4:2x2x2"])
def test_simulator_and_lower_bound_follow_the_scaled_profile(spec):
    """The flow simulator charges what the analytic model does for one uncontended op, and the
    op's lower bound (launch floor + hop floor / injection / NIC cuts) stays at or below the
    scaled op time at every scale (admissible)."""
    base = load_profile(spec)
    n = base.num_devices
    for a in LAT:
        for x in BW:
            m = base.with_scale(bandwidth_scale=x, latency_scale=a)
            assert m.has_protocols == base.has_protocols
            if a == 0:
                assert launch_floor_s(m) == 0.0
            for size in (SMALL, LARGE):
                for kind, op in _ops(n, size).items():
                    t = op_time_s(op, m)
                    where = f"{spec} x{x} lat x{a} {kind} {size} B"
                    terms = op_bound_terms(op, m, list(range(n)))
                    assert all(_le(v, t) for v in terms.values()), (where, t, terms)
                    if kind in ("all_gather", "copy"):
                        sim = simulate(Schedule(n, (op,), "probe", {"initial_bytes": op.in_bytes}), m).time_s
                        assert sim == pytest.approx(t, rel=1e-6), where


def test_every_latency_and_bandwidth_field_is_classified():
    """A new ``_s`` or ``_Bps`` field must say how with_scale treats it."""
    classified = set(SCALED_LATENCIES) | set(SCALED_BANDWIDTHS) | set(UNSCALED_RATES)
    assert len(classified) == len(SCALED_LATENCIES) + len(SCALED_BANDWIDTHS) + len(UNSCALED_RATES)
    fields = {f.name for f in dataclasses.fields(HardwareProfile) if f.name.endswith(("_s", "_Bps"))}
    assert fields == classified, fields ^ classified


def test_with_scale_scales_each_field_by_its_knob():
    m = load_profile("dgx-h100:2")
    s = m.with_scale(bandwidth_scale=2.0, latency_scale=3.0)
    for f in SCALED_LATENCIES:
        assert getattr(s, f) == pytest.approx(3.0 * getattr(m, f)), f
    for f in SCALED_BANDWIDTHS:
        assert getattr(s, f) == pytest.approx(2.0 * getattr(m, f)), f
    for f in UNSCALED_RATES:
        assert getattr(s, f) == getattr(m, f), f
    assert s.ramp_half_bytes == pytest.approx(3.0 * m.ramp_half_bytes)
    assert m.nvls_latency_s > 0 and m.a2a_latency_s > 0 and m.ll_max_bandwidth_Bps > 0   # the fields at stake
    z = m.with_scale(latency_scale=0.0)
    assert z.has_protocols and z.simple_base_latency_s == 0.0 and z.ramp_half_bytes == 0.0
    assert z.with_scale(latency_scale=5.0).has_protocols
    assert not math.isnan(op_time_s(_ops(16, SMALL)["all_reduce"], z))
    # a calibrated local-kind bandwidth replaces HBM's and stays, as HBM does
    c = load_profile(str(profiles_mod.PROFILE_DIR / "calibrated" / "cpu-8.json"))
    cs = c.with_scale(bandwidth_scale=4.0)
    for k, kp in c.overrides:
        if k in ("copy", "dyn_slice") and kp.bandwidth_Bps:
            assert cs.kind_params(k).bandwidth_Bps == kp.bandwidth_Bps
