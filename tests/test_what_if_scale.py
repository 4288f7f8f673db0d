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


# -- the Sweeps page's what-if chart follows the latency knob on a GPU machine ---------------
LATENCY_SWEEP = """\
name: latency-whatif
description: one case on dgx-h100, two planners, the latency knob alone
cases:
  - {name: small-transpose, mesh: "x=2,y=4", src: "[64{x}, 64{y}]", dst: "[64{y}, 64{x}]", dtype: float32}
machines: [dgx-h100]
planners: [auto, normal]
whatif:
  latency_scale: [0.1, 1.0, 10.0]
runner:
  workers: 1
  timeout_s: 120
"""


def test_whatif_figure_puts_either_knob_on_its_x_axis():
    import pandas as pd

    from ui import figures

    rows = [{"status": "ok", "case": "c", "machine": "dgx-h100:1", "planner": p, "bandwidth_scale": bw,
             "latency_scale": lat, "time_s": f * (lat + 1.0) / bw}
            for p, f in (("auto", 1.0), ("normal", 2.0)) for bw in (1.0, 2.0) for lat in (0.1, 1.0, 10.0)]
    df = pd.DataFrame(rows)
    fig = figures.whatif_figure(df, x="latency_scale")
    assert fig.layout.xaxis.title.text.startswith("latency scale") and "vs latency" in fig.layout.title.text
    assert len(fig.data) == 4                         # planner x bandwidth: a line never joins two bandwidths
    for tr in fig.data:
        g = tr.meta["group"]
        part = df[(df["planner"] == g["planner"]) & (df["bandwidth_scale"].astype(str) == g["bandwidth_scale"])]
        part = part.sort_values("latency_scale")
        assert list(tr.x) == list(part["latency_scale"]) and list(tr.customdata) == list(part["time_s"])
        assert "latency x%{x}" in tr.hovertemplate
    assert figures.whatif_figure(df[df["latency_scale"] == 1.0]).layout.title.text.split("<br>")[0].endswith(
        "vs link bandwidth")


def test_sweeps_page_charts_a_latency_sweep_on_a_gpu_machine(tmp_path, monkeypatch):
    import json
    import subprocess
    import sys
    from pathlib import Path

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("APP_RESULTS_ROOT", str(tmp_path))
    (tmp_path / "lat.yaml").write_text(LATENCY_SWEEP)
    subprocess.run([sys.executable, "-m", "experiments", "run", str(tmp_path / "lat.yaml"), "--out",
                    str(tmp_path / "out"), "--no-progress", "--json"], cwd=root, check=True, timeout=600,
                   capture_output=True)
    rows = [json.loads(line) for line in (tmp_path / "out" / "rows.jsonl").read_text().splitlines() if line]
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    st.cache_data.clear()
    at = AppTest.from_file(str(root / "app.py"), default_timeout=300).run()
    at.switch_page("ui/pages/sweeps.py").run()
    at.text_input(key="sweeps_dir").set_value(str(tmp_path / "out")).run()
    at.session_state["sweeps_view"] = "What if"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 1
    fig = charts[0]
    assert fig["layout"]["title"]["text"].startswith("What if: simulated time of case small-transpose vs latency")
    assert len(fig["data"]) == 2
    for tr in fig["data"]:
        planner = tr["name"].split(" on ")[0]
        mine = sorted((r["latency_scale"], r["time_s"]) for r in rows if r["planner"] == planner)
        assert list(tr["x"]) == [x for x, _ in mine] and list(tr["customdata"]) == [t for _, t in mine]
        t = tr["customdata"]
        # every latency of the GPU profile scales: 10x the latency is at least 5x the time here
        assert t[0] < t[1] < t[2] and t[2] > 5 * t[1], tr["name"]
    st.cache_data.clear()
