"""Issue 9: collectives as NCCL and TPU ICI run them, the flow-level engine against the
per-transfer replay, the topology lower bound, and the published-measurement validation."""

import dataclasses

import numpy as np
import pytest

from models import load_profile
from models.analytic import launch_floor_s, op_bound_terms, op_time_s
from simulator import simulate, simulate_plan
from synth import Schedule, ScheduleOp, interpret, scatter, synthesize


def check_data(plan) -> None:
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    for got, want in zip(interpret(plan.steps, plan.src, plan.mesh, x), scatter(x, plan.dst, plan.mesh)):
        np.testing.assert_array_equal(got, want)


def one_op(kind, n, size, groups=None):
    """A schedule of one collective over ``n`` devices of nccl-tests ``size`` bytes."""
    g = groups or (tuple(range(n)),)
    k = len(g[0])
    blk = size // k
    io = {"all_gather": (blk, size), "reduce_scatter": (size, blk), "all_reduce": (size, size),
          "all_to_all": (size, size)}[kind]
    send = size if kind == "all_reduce" else blk * (k - 1)
    return Schedule(n, (ScheduleOp(kind, io[0], io[1], send, send, g, label=kind),), kind)


# -- the flow-level engine agrees with the exact per-transfer replay ---------------------------------
@pytest.mark.parametrize("hw,kind,size,groups,tol", [
    ("tpu-v5e:16x1", "all_gather", 16 << 20, None, 1e-6),                 # bidirectional ring
    ("tpu-v4:4x4x4", "all_to_all", 8 << 20, None, 0.02),                  # 64-way direct, contended
    ("tpu-v4:4x4x4", "all_gather", 4 << 20, tuple(tuple(range(i, 64, 16)) for i in range(16)), 1e-6),
    # NVIDIA: the flow model charges NCCL's per-step protocol latency, the replay the links' latency
    ("dgx-h100:1", "all_to_all", 64 << 20, None, 0.03),
])
def test_flow_model_agrees_with_the_per_transfer_replay(hw, kind, size, groups, tol):
    m = load_profile(hw)
    s = one_op(kind, m.num_devices, size, groups)
    flow = simulate(s, m)
    packet = simulate(s, m, engine="packet")
    assert packet.ops[0]["engine"] == "packet" and flow.ops[0]["engine"] == "flow"
    assert flow.ops[0]["algorithm"] == packet.ops[0]["algorithm"]
    assert flow.time_s == pytest.approx(packet.time_s, rel=tol)
    np.testing.assert_allclose(flow.link_bytes_array, packet.link_bytes_array)


def test_flows_sharing_a_link_split_it_fairly():
    m = load_profile("tpu-v4:8x1x1")          # an open line of 8 chips
    nb = 8 << 20
    op = lambda pairs: Schedule(8, (ScheduleOp("permute", nb, nb, nb, nb, pairs=pairs),), "p")  # noqa: E731
    alone = simulate(op(((0, 2),)), m)
    both = simulate(op(((0, 2), (1, 3))), m)  # share link 1->2
    packet = simulate(op(((0, 2), (1, 3))), m, engine="packet")
    xfer = lambda r: r.time_s - m.alpha_s("permute") - 2 * m.link_latency_s  # noqa: E731
    assert xfer(both) == pytest.approx(2 * xfer(alone), rel=1e-9)
    assert packet.time_s == pytest.approx(both.time_s, rel=0.05)


# -- NCCL's algorithms and protocols -----------------------------------------------------------------
def test_nccl_tuner_picks_algorithm_and_protocol_by_size():
    m = load_profile("dgx-h100:1")
    small = simulate(one_op("all_reduce", 8, 4096), m)
    large = simulate(one_op("all_reduce", 8, 8 << 30), m)
    assert small.ops[0]["algorithm"] == "ring/LL"
    assert large.ops[0]["algorithm"] == "nvls/Simple"
    # A100 has no NVLink SHARP: rings
    assert simulate(one_op("all_reduce", 8, 8 << 30), "dgx-a100:1").ops[0]["algorithm"] == "ring/Simple"
    # forcing the ring (NCCL_ALGO=Ring) is slower than NVLS for a large buffer
    ring = simulate(one_op("all_reduce", 8, 8 << 30), m.with_algorithm(all_reduce="ring"))
    assert ring.ops[0]["algorithm"] == "ring/Simple" and ring.time_s > large.time_s
    # every op's choice is reported, and the analytic model makes the same one
    op = one_op("all_reduce", 8, 8 << 30).ops[0]
    assert op_time_s(op, m) == pytest.approx(large.ops[0]["duration_s"], rel=1e-9)


def test_multi_ring_uses_one_rail_per_nic_across_nodes():
    m = load_profile("h100-multinode:2")
    S = 8 << 30
    res = simulate(one_op("all_gather", 16, S), m)
    assert res.ops[0]["algorithm"].startswith("ring x8 rails")
    topo = m.topology
    nic_out = [i for i, (u, v) in enumerate(topo.links) if v == "fabric"]
    assert len(nic_out) == 16 and (res.link_bytes_array[nic_out] > 0).all()   # every NIC carries a ring
    # bus bandwidth about 8 NICs x their achieved rate (nccl-tests: busbw = S/t * (n-1)/n)
    busbw = S / res.time_s * 15 / 16
    assert 0.8 * 8 * m.nic_bandwidth_Bps * m.nic_efficiency < busbw <= 8 * m.nic_bandwidth_Bps
    # the old single ring through one NIC per node boundary would be 8x slower
    assert res.time_s < S * 15 / 16 / m.nic_bandwidth_Bps / 4
    # the hierarchical form, when forced, runs rings inside the nodes and one per local rank across
    hier = simulate(one_op("all_gather", 16, S), m.with_algorithm(all_gather="hier_ring"))
    assert hier.ops[0]["algorithm"].startswith("hier_ring/")
    assert hier.lower_bound_s <= hier.time_s
    np.testing.assert_allclose(hier.link_bytes_array[nic_out].sum(), S / 2 * 2)   # each node takes in S/2


def test_tpu_multi_axis_collective_drives_every_dimension():
    m = load_profile("tpu-v4:4x4x4")
    S = 64 << 20
    xy = simulate(one_op("all_gather", 64, S, tuple(tuple(range(i * 16, i * 16 + 16)) for i in range(4))), m)
    assert xy.ops[0]["algorithm"] == "multi_axis(Y,Z)"
    ring = simulate(one_op("all_gather", 64, S, tuple(tuple(range(i * 16, i * 16 + 16)) for i in range(4))),
                    m.with_algorithm(all_gather="ring"))
    assert xy.time_s < 0.6 * ring.time_s
    assert xy.time_s >= xy.lower_bound_s


def test_reduce_scatter_plans_cost_like_one_reduce_scatter():
    # issue 10 item 6: Megatron TP -> SP on one DGX H100 node
    plan = synthesize("dp=2,tp=4", "[8{dp}, 2048, 1024]{U:tp}", "[8{dp}, 2048{tp}, 1024]", itemsize=2)
    small = synthesize("dp=2,tp=4", "[8{dp}, 64, 32]{U:tp}", "[8{dp}, 64{tp}, 32]", itemsize=2)
    assert [str(s) for s in small.steps] == [str(s) for s in plan.steps]
    check_data(small)   # the same steps, checked element by element on a smaller array
    res = simulate_plan(plan, "dgx-h100:1")
    rs = [o for o in plan.to_schedule().ops if o.kind == "reduce_scatter"]
    assert rs
    single = simulate(Schedule(8, (rs[0],), "rs"), "dgx-h100:1")
    assert res.time_s == pytest.approx(single.time_s, rel=0.10)
    assert res.ops[[o["kind"] for o in res.ops].index("reduce_scatter")]["algorithm"].startswith("ring")


# -- lower bounds --------------------------------------------------------------------------------------
def test_all_to_all_over_a_torus_is_bounded_by_its_bisection():
    plan = synthesize("x=4,y=4,z=4", "[4096{x,y,z}, 256]", "[4096, 256{x,y,z}]", itemsize=4)
    check_data(plan)
    res = simulate_plan(plan, load_profile("tpu-v4:4x4x4").with_scale(latency_scale=0.0))   # bytes alone
    t = res.lower_bound_terms
    assert t["bisection_X"] > 2 * t["injection"]
    assert res.lower_bound_kind in ("bisection_X", "bisection_Y", "bisection_Z", "lp")
    assert res.lower_bound_s <= res.time_s
    # with latency every term pays one launch (5 us) and the injection term the hop from the
    # nearest holder (1 us): the bound moves up by at least the launch
    lat = simulate_plan(plan, "tpu-v4:4x4x4")
    assert lat.lower_bound_s >= res.lower_bound_s + 5e-6 * (1 - 1e-9)
    assert lat.lower_bound_terms["latency"] == pytest.approx(5e-6 + 1e-6)
    assert lat.lower_bound_s <= lat.time_s


def test_lp_bound_is_at_least_the_cuts_on_a_small_machine():
    plan = synthesize("x=2,y=4", "[64{x,y}, 64]", "[64, 64{y,x}]", itemsize=4)
    check_data(plan)
    res = simulate_plan(plan, "tpu-v4:2x4x1", lp_bound=True)
    t = res.lower_bound_terms
    assert "lp" in t
    # the LP is at least every cut (both pay the same launch); the injection and latency terms
    # add the hops from the nearest holder, which the LP does not count
    assert t["lp"] >= max(v for k, v in t.items() if k.startswith("bisection")) * (1 - 1e-5)
    assert t["lp"] <= res.time_s


def test_in_network_reduction_lowers_the_all_reduce_bound():
    m = load_profile("dgx-h100:1")
    op = one_op("all_reduce", 8, 1 << 30).ops[0]
    with_nvls = op_bound_terms(op, m, range(8))["injection"]
    plain = dataclasses.replace(m, nvls_efficiency=0.0)
    without = op_bound_terms(op, plain, range(8))["injection"]
    launch = launch_floor_s(m)                    # both pay one launch on top of the bytes
    assert with_nvls - launch == pytest.approx((without - launch) / 2)


def test_nic_cut_binds_across_nodes():
    # an all-reduce over 4 nodes: each node must take in 2(m-1)/m of the buffer through 8 NICs
    res = simulate(one_op("all_reduce", 32, 1 << 30), "h100-multinode:4")
    assert res.lower_bound_kind == "schedule:nic_cut"
    launch = launch_floor_s(res.machine)
    assert res.lower_bound_s == pytest.approx(launch + 2 * 3 / 4 * (1 << 30) / (8 * 50e9))
    assert res.lower_bound_s <= res.time_s


# -- scale ---------------------------------------------------------------------------------------------
def test_a_flat_collective_over_4096_devices_replays():
    res = simulate(one_op("all_gather", 4096, 1 << 30), "tpu-v4:16x16x16")
    assert res.ops[0]["algorithm"] == "multi_axis(X,Y,Z)"
    assert res.lower_bound_s <= res.time_s < 3 * res.lower_bound_s


def test_a_replay_too_large_to_finish_is_refused_before_it_starts(monkeypatch):
    import subprocess
    import sys
    import time

    import models.collectives as mc
    from models.collectives import MAX_ROUTE_LINKS, check_replay_size
    from models.errors import SimulationError
    from synth import RedistributionError

    big = one_op("all_to_all", 4096, 1 << 30)          # 16.8M flows of about 12 hops
    t0 = time.perf_counter()
    # above the aggregate path's own limit (lowered here; 2e7 pairs by default) the refusal is the guard
    monkeypatch.setattr(mc, "MAX_AGGREGATE_PAIRS", 1_000_000)
    with pytest.raises(SimulationError, match=r"2\.01e\+08 flow-hops .*smaller machine"):
        simulate(big, "tpu-v4:16x16x16")
    with pytest.raises(SimulationError, match="above the limit"):
        op_time_s(big.ops[0], load_profile("tpu-v4:16x16x16"))
    assert time.perf_counter() - t0 < 30                # refused, not replayed (minutes)
    monkeypatch.undo()
    assert issubclass(SimulationError, RedistributionError)
    # an all-to-all over 256 chips is well inside the limit and replays
    small = one_op("all_to_all", 256, 1 << 20)
    assert check_replay_size(small, load_profile("tpu-v4:4x4x16")) < MAX_ROUTE_LINKS
    assert simulate(small, "tpu-v4:4x4x16").time_s > 0
    # the CLI: an all-to-all over a whole 8960-chip pod (80M pairs, above MAX_AGGREGATE_PAIRS):
    # one line, exit 2
    r = subprocess.run([sys.executable, "-m", "simulator", "run", "--hardware", "tpu-v5p:16x20x28", "--mesh",
                        "x=8960", "--src", "[8960{x}, 8960]", "--dst", "[8960, 8960{x}]", "--planner", "normal"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "8960 devices" in r.stderr and "smaller machine" in r.stderr


def test_all_to_all_costed_per_node_equals_the_routed_flows():
    import random

    from models.collectives import direct_all_to_all_s, plan_op

    rng = random.Random(1)
    for spec in ("cpu-host:6", "dgx-h100:1", "dgx-h100:3", "h100-multinode:4", "gb200-nvl72", "dgx-a100:2"):
        m = load_profile(spec)
        P = m.num_devices
        for n in sorted({2, P // 2, P} - {1}):
            if P % n:
                continue
            chips, ids = list(range(P)), list(range(P))
            rng.shuffle(chips)
            rng.shuffle(ids)
            groups = tuple(tuple(ids[i:i + n]) for i in range(0, P, n))
            op = ScheduleOp("all_to_all", 1 << 20, 1 << 20, (1 << 20) * (n - 1) // n, (1 << 20) * (n - 1) // n,
                            groups=groups)
            want = plan_op(op, m, chips).analytic_s()
            assert direct_all_to_all_s(op, m, chips) == pytest.approx(want, rel=1e-12), (spec, n)
    assert direct_all_to_all_s(one_op("all_gather", 8, 1 << 20).ops[0], load_profile("tpu-v4:2x2x2")) is None
    # above the routing limit op_time_s takes the per-node count: a 4096-GPU all-to-all costs in a second
    big = one_op("all_to_all", 4096, 1 << 30).ops[0]
    m = load_profile("h100-multinode:512")
    assert op_time_s(big, m) == direct_all_to_all_s(big, m) > 0


def test_switched_routes_in_closed_form_match_the_shortest_paths():
    import itertools

    import networkx as nx

    for spec in ("cpu-host:6", "dgx-h100:1", "dgx-h100:3", "h100-multinode:2", "gb200-nvl72", "dgx-a100:2"):
        topo = load_profile(spec).topology
        for a, b in itertools.product(range(topo.num_chips), repeat=2):
            if a != b:
                path = nx.shortest_path(topo.graph, a, b)
                assert topo.route(a, b) == tuple(topo.link_id[e] for e in zip(path[:-1], path[1:]))


# -- validation against published measurements ---------------------------------------------------------
def test_validate_against_published_measurements(tmp_path, monkeypatch):
    from simulator import validate as vmod
    from simulator.validate import load_rows, model_error_by_system, system_of_profile, validate

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))   # the summary cache goes here
    vmod._cached.cache_clear()

    rows = load_rows()
    assert len(rows) >= 25 and all(r["source"].startswith("https://") for r in rows)
    res = validate()
    systems = set(res["systems"])
    assert {"H100/H200 NVLink node", "A100 NVLink node", "H100 multi-node InfiniBand", "GB200 NVL72 rack",
            "TPU ICI"} <= systems
    assert res["overall"]["mape"] <= 0.20
    for r in res["rows"]:
        assert 0.5 <= r["ratio"] <= 2.0, r["id"]
        assert r["lower_bound_s"] <= r["measured_s"], r["id"]
        assert r["algorithm"], r["id"]
    err = model_error_by_system()
    assert set(err) == systems and all({"mape", "n", "worst"} <= set(v) for v in err.values())
    assert err["TPU ICI"]["mape"] == pytest.approx(res["systems"]["TPU ICI"]["mape"])
    assert list(tmp_path.glob("redistribution-simulator/validate-*.json"))
    vmod._cached.cache_clear()
    assert model_error_by_system() == err                 # read back from the cache file
    assert system_of_profile("dgx-h100:2") == "H100 multi-node InfiniBand"
    assert system_of_profile("dgx-h100:1") == "H100/H200 NVLink node"
    assert system_of_profile("tpu-v4:4x4x4") == "TPU ICI"
    assert system_of_profile("cpu-host:8") is None


# -- large all-to-alls on tori: per-link loads in aggregate --------------------------------------
@pytest.mark.parametrize("spec", ["tpu-v4:2x2x2", "tpu-v4:4x4x4", "tpu-v4:2x4x8", "tpu-v5e:4x4", "tpu-v5e:2x8"])
def test_torus_all_to_all_in_aggregate_equals_the_routed_flows(spec):
    """The vectorised loads equal routing every flow (shuffled placements and groups, wrapped and
    open dimensions, size-2 rings), the time equals plan_op's analytic time and the max-min replay."""
    import random

    from models.collectives import direct_all_to_all_loads, plan_op
    from models.flow import maxmin_replay

    rng = random.Random(7)
    m = load_profile(spec)
    P = m.num_devices
    for n in sorted({2, 4, P // 2, P} - {1}):
        chips, ids = list(range(P)), list(range(P))
        rng.shuffle(chips)
        rng.shuffle(ids)
        groups = tuple(tuple(ids[i:i + n]) for i in range(0, P, n))
        op = ScheduleOp("all_to_all", 1 << 20, 1 << 20, (1 << 20) * (n - 1) // n, (1 << 20) * (n - 1) // n,
                        groups=groups)
        plan = plan_op(op, m, chips)
        routed = np.zeros(len(m.topology.links))
        for ph in plan.phases:
            for r, b, w in zip(ph.routes, ph.nbytes, ph.weights):
                routed[list(r)] += b * w
        agg = direct_all_to_all_loads(op, m, chips)
        # a tie on a wrapped ring is two half-flows, in the aggregate as in the routed plan
        assert agg["flows"] == plan.num_flows() >= P * (n - 1)
        np.testing.assert_allclose(agg["load"], routed, rtol=1e-12, atol=1e-6)
        t = agg["alpha_s"] + agg["latency_s"] + agg["xfer_s"]
        assert t == pytest.approx(plan.analytic_s(), rel=1e-12), (spec, n)
        replay = sum(maxmin_replay(ph.routes, ph.nbytes, ph.weights, plan.capacity)[0] for ph in plan.phases)
        # the busiest link's time bounds the max-min replay from below; with ties on wrapped rings
        # split into half-flows of unequal sizes the replay can run a few percent longer
        assert agg["xfer_s"] <= replay * (1 + 1e-9) and replay <= agg["xfer_s"] * 1.05, (spec, n)


def test_simulator_takes_large_all_to_alls_in_aggregate(monkeypatch):
    """Above AGGREGATE_ROUTE_LINKS the simulator labels the op ``aggregate`` and its time, link
    bytes and busy times equal the flow-by-flow replay of the same op."""
    import models.collectives as mc

    sched = synthesize("data=16,model=4", "[256{data}, 512{model}]", "[256{model}, 512{data}]",
                       planner="normal")
    want = simulate(sched, "tpu-v4:4x4x4")
    assert all(o["engine"] in (None, "flow") for o in want.ops)
    monkeypatch.setattr(mc, "AGGREGATE_ROUTE_LINKS", 0)
    got = simulate(sched, "tpu-v4:4x4x4")
    a2a = [o for o in got.ops if o["kind"] == "all_to_all"]
    assert a2a and all(o["engine"] == "aggregate" and o["algorithm"] == "direct(agg)" for o in a2a)
    assert got.time_s == pytest.approx(want.time_s, rel=1e-6)
    for o, w in zip(got.ops, want.ops):
        assert o["duration_s"] == pytest.approx(w["duration_s"], rel=1e-6)
        assert o["flows"] == w["flows"]
    np.testing.assert_allclose(got.link_bytes_array, want.link_bytes_array, rtol=1e-9)
    np.testing.assert_allclose(got.link_busy_array, want.link_busy_array, rtol=1e-9)


def test_aggregate_ops_are_named_where_their_transfers_are_missing(monkeypatch):
    """An all-to-all costed in aggregate has an ops row but no transfer rows; the result lists
    it in ``aggregate_ops``, the Chrome trace's otherData names it, and so does the timeline's
    title (the ops row shows it while no device row has a bar for it)."""
    import models.collectives as mc
    from simulator.chrome_trace import chrome_trace
    from ui import charts

    def timeline(res):  # the Simulate page's timeline (Vega-Lite): its title and subtitle, its meta
        spec = charts.timeline_spec(charts.timeline_rows(res))
        return spec["title"]["text"] + " " + spec["title"].get("subtitle", ""), spec["usermeta"]["timeline"]

    sched = synthesize("data=16,model=4", "[256{data}, 512{model}]", "[256{model}, 512{data}]",
                       planner="normal")
    check_data(sched)
    plain = simulate(sched, "tpu-v4:4x4x4")
    assert plain.aggregate_ops == [] and "aggregate" not in timeline(plain)[0]
    monkeypatch.setattr(mc, "AGGREGATE_ROUTE_LINKS", 0)
    got = simulate(sched, "tpu-v4:4x4x4")
    agg = [o for o in got.ops if o["engine"] == "aggregate"]
    assert agg and got.aggregate_ops == [{"op": o["index"], "kind": "all_to_all", "flows": o["flows"]} for o in agg]
    traced = {r["op"] for r in got.trace_rows()}
    assert traced.isdisjoint(o["index"] for o in agg)
    assert traced == {o["index"] for o in got.ops if o["engine"] == "flow"}
    other = chrome_trace(got)["otherData"]
    assert other["aggregate_ops"] == got.aggregate_ops
    title, meta = timeline(got)
    for o in agg:
        assert f"op {o['index']} (all_to_all, {o['flows']:,} flows)" in title and f"op {o['index']} (" in other["note"]
    assert "costed in aggregate" in title and "no per-transfer rows" in title
    assert meta["aggregate_ops"] == [o["index"] for o in agg]


def test_the_apps_4096_chip_scenario_simulates():
    """tpu-v4:16x16x16 with data=512,model=8 (an all-to-all over 512-chip groups, 2.6e7 flow-hops)
    is no longer refused: the all-to-alls are taken in aggregate."""
    sched = synthesize("data=512,model=8", "[8192{data}, 32768{model}]", "[8192{model}, 32768{data}]",
                       planner="normal")
    res = simulate(sched, "tpu-v4:16x16x16", lp_bound=False)
    # (flows: 4096 x 511 pairs, and the second half-flow of each pair tied on a wrapped ring)
    big = [o for o in res.ops if o["kind"] == "all_to_all" and o["flows"] >= 4096 * 511]
    assert big and big[0]["engine"] == "aggregate"
    assert res.time_s == pytest.approx(sum(o["duration_s"] for o in res.ops))
    # the other ops replay max-min; half-flows of ring ties can finish a little after the
    # busiest link's time the analytic model charges
    assert res.analytic_s * (1 - 1e-9) <= res.time_s <= res.analytic_s * 1.03
    assert res.time_s >= res.lower_bound_s > 0
