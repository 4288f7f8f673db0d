"""models/: profiles, topology graphs, placements, analytic costs."""

import json
import math
import re

import numpy as np
import pytest

from models import HardwareProfile, KindParams, Placement, PlacementError, ProfileError, load_profile
from models import profiles as profiles_mod
from models.analytic import alpha_beta_s, lower_bound_s, need_bytes_per_device, op_time_s
from models.topology import (
    Topology,
    count_links,
    cpu_host_graph,
    multinode_graph,
    nvswitch_graph,
    ring_graph,
    torus_graph,
)
from synth import ArrayType, Mesh, RedistributionError, ScheduleOp

BUILTIN = ["tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "dgx-a100", "dgx-h100", "h100-multinode",
           "gb200-nvl72", "cpu-host"]


# -- profiles ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_profile_loads_and_every_number_has_a_source(name):
    m = load_profile(name)
    assert isinstance(m, HardwareProfile)
    assert m.unsourced() == []
    for p in ("link_bandwidth_Bps", "link_latency_s", "links_per_chip", "launch_overhead_s",
              "hbm_bandwidth_Bps", "hbm_capacity_bytes"):
        assert m.source(p) and len(m.source(p)) > 10, p
    assert m.topology.num_chips == m.num_devices
    # the profile's chips can all reach each other
    assert m.topology.route(0, m.num_devices - 1) or m.num_devices == 1
    json.dumps(m.to_dict())


def test_profile_files_give_every_number_a_source_next_to_it():
    import yaml

    for path in profiles_mod.PROFILE_DIR.glob("*.yaml"):
        raw = yaml.safe_load(path.read_text())
        for k, v in (raw.get("params") or {}).items():
            assert isinstance(v, dict) and v.get("source"), f"{path.name}: params.{k} has no source"


@pytest.mark.parametrize("spec,dims,n", [
    ("tpu-v4:4x4x4", (4, 4, 4), 64),
    ("tpu-v4:16", (16, 1, 1), 16),
    ("tpu-v5e:4x8", (4, 8), 32),
    ("dgx-h100:2", (2, 8), 16),
    ("dgx-h100:2x4", (2, 4), 8),
    ("gb200-nvl72:1", (1, 72), 72),
    ("cpu-host:8", (8,), 8),
    ("h100-multinode", (4, 8), 32),
])
def test_sizing(spec, dims, n):
    m = load_profile(spec)
    assert m.dims == dims and m.num_devices == n
    assert load_profile(m.spec) == m


def test_tpu_wraparound_follows_the_hardware_rules():
    assert load_profile("tpu-v4:4x4x4").wraparound == (True, True, True)
    assert load_profile("tpu-v4:2x2x2").wraparound == (False, False, False)
    assert load_profile("tpu-v4:4x4x8").wraparound == (True, True, True)
    assert load_profile("tpu-v5e:16x16").wraparound == (True, True)
    assert load_profile("tpu-v5e:4x16").wraparound == (False, True)
    # issue 9, Google's v4 rule: a torus only for AxBxC with A=B=C, 2A=B=C or 2A=2B=C (multiples of 4)
    assert load_profile("tpu-v4:4x8x8").wraparound == (True, True, True)
    assert load_profile("tpu-v4:4x4x16").wraparound == (False, False, False)
    assert load_profile("tpu-v4:2x2x4").wraparound == (False, False, False)
    assert load_profile("tpu-v4:8x1x1").wraparound == (False, False, False)
    # v5p: every slice of whole 4x4x4 cubes is a full 3-D torus, smaller ones are meshes
    assert load_profile("tpu-v5p:4x4x12").wraparound == (True, True, True)
    assert load_profile("tpu-v5p:2x2x4").wraparound == (False, False, False)


def test_memory_units_follow_the_vendor_documents():
    # Google lists v5e/v6e HBM in GB and v5p in GiB (95 GiB user-allocatable of 96 GiB)
    assert load_profile("tpu-v5e").hbm_capacity_bytes == 16 * 10**9
    assert load_profile("tpu-v6e").hbm_capacity_bytes == 32 * 10**9
    assert load_profile("tpu-v5p").hbm_capacity_bytes == 95 * 2**30
    assert load_profile("tpu-v4").hbm_capacity_bytes == 32 * 2**30


def test_achieved_rates_are_below_line_rates_and_sourced():
    for name in ("dgx-h100", "dgx-a100", "gb200-nvl72", "tpu-v5e"):
        m = load_profile(name)
        assert 0.5 < m.link_efficiency < 1.0 and m.source("link_efficiency")
        if m.kind == "switched":
            assert 0.5 < m.nic_efficiency < 1.0 and m.source("nic_efficiency")
            assert m.has_protocols and m.source("ll_base_latency_s")
    assert load_profile("dgx-h100").nvls_efficiency > 0 and load_profile("dgx-a100").nvls_efficiency == 0
    m = load_profile("dgx-h100")
    assert m.ramp(1 << 20, 8) < m.ramp(1 << 30, 8) < 1.0
    assert m.ramp(1 << 30, 64) < m.ramp(1 << 30, 8)


def test_schema_errors_name_the_field_value_and_rule(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("extends: dgx-h100\nparams:\n  link_efficiency: {value: -0.5, source: x}\n")
    with pytest.raises(ProfileError, match=r"params\.link_efficiency\.value.*-0\.5"):
        load_profile(str(p))
    p.write_text("extends: dgx-h100\ntopology: {kind: switched, wraparound: sometimes}\n")
    with pytest.raises(ProfileError, match=r"topology\.wraparound.*'sometimes'"):
        load_profile(str(p))
    p.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ProfileError, match=r"not UTF-8 text \(byte 0xe9 at offset 9\)") as e:
        load_profile(str(p))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("spec,needle", [
    ("nope:4", "unknown hardware profile 'nope'"),
    ("tpu-v4:4x4x4x4", "3-D torus"),
    ("tpu-v4:32x32x32", "larger than the largest"),
    ("tpu-v4:4xx4", "malformed"),
    ("tpu-v4:0x4x4", ">= 1"),
    ("dgx-h100:2x16", "has 8 GPUs"),
    ("cpu-host:2x2", "device count"),
    ("", "empty"),
    ("/no/such/file.yaml", "does not exist"),
])
def test_profile_errors_are_redistribution_errors(spec, needle):
    with pytest.raises(ProfileError) as e:
        load_profile(spec)
    assert isinstance(e.value, RedistributionError) and isinstance(e.value, ValueError)
    assert needle in str(e.value)


def test_calibrated_profile_file_with_extends_and_overrides(tmp_path, monkeypatch):
    cal = tmp_path / "calibrated"
    cal.mkdir()
    doc = {
        "name": "cpu-8", "extends": "cpu-host",
        "topology": {"kind": "cpu-host", "default_size": "8"},
        "params": {"launch_overhead_s": {"value": 4.0e-5, "source": "calibrated: test"},
                   "bus_bandwidth_Bps": 1.0e12},
        "collectives": {"all_gather": {"alpha_s": {"value": 2.0e-5, "source": "fit"}, "bandwidth_Bps": 3.0e9},
                        "dyn_slice": {"bandwidth_Bps": 8.0e9}},
    }
    (cal / "cpu-8.json").write_text(json.dumps(doc))
    monkeypatch.setattr(profiles_mod, "CALIBRATED_DIR", cal)
    for spec in ("calibrated/cpu-8", "cpu-8", str(cal / "cpu-8.json"), str(cal / "cpu-8.json") + ":4"):
        m = load_profile(spec)
        assert m.name == "cpu-8"
        assert m.launch_overhead_s == 4.0e-5 and m.source("launch_overhead_s") == "calibrated: test"
        assert m.alpha_s("all_gather") == 2.0e-5 and m.alpha_s("all_to_all") == 4.0e-5
        assert m.kind_params("all_gather").bandwidth_Bps == 3.0e9
        assert m.local_bandwidth_Bps("dyn_slice") == 8.0e9
        assert m.link_bandwidth_Bps == load_profile("cpu-host").link_bandwidth_Bps  # inherited
    assert load_profile(str(cal / "cpu-8.json") + ":4").num_devices == 4
    assert "calibrated/cpu-8" in profiles_mod.available_profiles()


@pytest.mark.parametrize("doc,needle", [
    ({"topology": {"kind": "mesh"}}, "topology.kind"),
    ({"topology": {"kind": "cpu-host", "default_size": "8"}, "params": {"link_bandwidth_Bps": 1e9}},
     "is required"),
    # issue 12 (pydantic schema): one line naming the field path, the value and the rule
    ({"extends": "cpu-host", "params": {"link_bandwith_Bps": 1e9}}, "params.link_bandwith_Bps: unknown field"),
    ({"extends": "cpu-host", "collectives": {"gather": {"alpha_s": 1}}}, "collectives.gather"),
    ({"extends": "cpu-host", "collectives": {"all_gather": {"alpha": 1}}},
     "collectives.all_gather.alpha: unknown field"),
    ({"extends": "cpu-host", "params": {"link_latency_s": "fast"}},
     "params.link_latency_s: expected a number or {value: NUMBER, source: TEXT} (got 'fast')"),
    ({"extends": "cpu-host", "params": {"link_latency_s": -1}}, ">= 0"),
    ({"extends": "cpu-host", "algorithms": {"all_gather": "tree"}}, "algorithm 'tree'"),
])
def test_malformed_profile_files(tmp_path, doc, needle):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match=re.escape(needle) if "{" in needle else needle.replace("(", r"\(")):
        load_profile(str(p))


def test_malformed_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("topology: [unclosed\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_profile(str(p))


def test_with_scale_is_a_new_value():
    m = load_profile("dgx-h100:2").with_overrides(all_gather=KindParams(alpha_s=1e-5, bandwidth_Bps=1e11))
    s = m.with_scale(bandwidth_scale=2.0, latency_scale=0.5)
    assert s is not m and m.link_bandwidth_Bps == 2.5e10
    assert s.link_bandwidth_Bps == 5e10 and s.nic_bandwidth_Bps == 2 * m.nic_bandwidth_Bps
    assert s.link_latency_s == 0.5e-6 and s.launch_overhead_s == 0.5 * m.launch_overhead_s
    assert s.alpha_s("all_gather") == 0.5e-5 and s.kind_params("all_gather").bandwidth_Bps == 2e11
    assert s.hbm_bandwidth_Bps == m.hbm_bandwidth_Bps
    assert s.topology.bandwidth.max() == 2 * m.topology.bandwidth.max()
    with pytest.raises(ProfileError):
        m.with_scale(bandwidth_scale=0)


# -- topology shapes ------------------------------------------------------------------------
@pytest.mark.parametrize("dims,wrap,edges", [
    ((4,), True, 8), ((4,), False, 6), ((3,), True, 6),
    ((2,), True, 2), ((2,), False, 2), ((1,), True, 0),
    ((4, 2, 1), True, 4 * 2 * 2 + 4 * 2), ((2, 2), True, 8), ((1, 1, 1), True, 0),
    ((4, 4, 4), True, 64 * 6), ((4, 4, 4), False, 3 * 2 * 3 * 16), ((2, 2, 2), True, 8 * 3),
])
def test_torus_link_counts(dims, wrap, edges):
    g = torus_graph(dims, 1e9, 1e-6, wraparound=wrap)
    assert g.number_of_nodes() == math.prod(dims)
    assert g.number_of_edges() == edges
    assert not any(u == v for u, v in g.edges())
    for u, v in g.edges():
        assert g.has_edge(v, u)  # every link is full duplex
        assert g.edges[u, v]["bandwidth"] == 1e9 and g.edges[u, v]["latency"] == 1e-6


def test_torus_size_two_and_one_neighbours():
    g = torus_graph((2, 1, 3), 1.0, 0.0, wraparound=True)
    # node (0,0,0) = 0: one neighbour along the size-2 dim, none along size 1, two along size 3
    assert sorted(g.successors(0)) == [1, 2, 3]
    assert g.nodes[4]["coord"] == (1, 0, 1)


def test_builders_return_new_graphs():
    a = ring_graph(4, 1.0, 0.0)
    b = ring_graph(4, 1.0, 0.0)
    a.remove_edge(0, 1)
    assert b.has_edge(0, 1)


def test_switched_and_host_graphs():
    g = nvswitch_graph(8, 4.5e11, 1e-6)
    assert count_links(g) == 16 and g.has_edge(0, "nvswitch")
    mn = multinode_graph(2, 8, 4.5e11, 1e-6, 5e10, 3e-6)
    assert count_links(mn, "nvlink") == 32 and count_links(mn, "nic") == 32
    t = Topology(mn)
    assert len(t.route(0, 1)) == 2 and t.link_name(t.route(0, 1)[0]) == "0->nvswitch0"
    assert [t.links[i] for i in t.route(0, 9)] == [(0, "fabric"), ("fabric", 9)]
    single = multinode_graph(1, 4, 1.0, 0.0, 1.0, 0.0)
    assert "fabric" not in single
    h = cpu_host_graph(4, 5e9, 2e10, 1e-6)
    assert count_links(h) == 9
    assert [Topology(h).links[i] for i in Topology(h).route(0, 3)] == [(0, "bus_in"), ("bus_in", "bus_out"),
                                                                     ("bus_out", 3)]


def test_dimension_order_routing_on_a_torus():
    t = Topology(torus_graph((4, 4), 1.0, 0.0, wraparound=True))
    # 0=(0,0) -> 15=(3,3): X first, the short way round (-1), then Y (-1)
    assert [t.links[i] for i in t.route(0, 15)] == [(0, 12), (12, 15)]
    # tie (distance 2 on a 4-ring) goes +
    assert [t.links[i] for i in t.route(0, 2)] == [(0, 1), (1, 2)]
    line = Topology(torus_graph((4,), 1.0, 0.0, wraparound=False))
    assert [line.links[i] for i in line.route(3, 0)] == [(3, 2), (2, 1), (1, 0)]


def test_machine_graph_bandwidths():
    m = load_profile("dgx-h100:1")
    assert m.topology.in_bandwidth(0) == 18 * 2.5e10
    m2 = load_profile("dgx-h100:2")
    assert m2.topology.in_bandwidth(0) == 18 * 2.5e10 + 5e10
    v4 = load_profile("tpu-v4:4x4x4")
    assert v4.topology.in_bandwidth(0) == 6 * 4.5e10


# -- placement -------------------------------------------------------------------------------
def test_placement_row_major_and_axis_mappings():
    m = load_profile("tpu-v4:4x4x4")
    mesh = Mesh.parse("x=4,y=4,z=4")
    assert Placement.of(None, mesh, m).chips == tuple(range(64))
    assert Placement.parse("x=X,y=Y,z=Z", mesh, m).chips == tuple(range(64))
    rev = Placement.parse("x=Z,y=Y,z=X", mesh, m)
    # device (x,y,z) sits on chip with physical coords (X=z, Y=y, Z=x)
    for d in range(64):
        x, y, z = (int(c) for c in mesh.coords[d])
        assert rev.chips[d] == z * 16 + y * 4 + x
    by_index = Placement.parse("x=2,y=1,z=0", mesh, m)
    assert by_index.chips == rev.chips
    mesh2 = Mesh.parse("x=4,y=16")
    p = Placement.parse("x=Z,y=X*Y", mesh2, m)
    for d in range(64):
        x, y = (int(c) for c in mesh2.coords[d])
        assert p.chips[d] == (y // 4) * 16 + (y % 4) * 4 + x


def test_placement_split_dimension_is_strided():
    m = load_profile("tpu-v4:8x1x1")
    mesh = Mesh.parse("x=4,y=2")
    p = Placement.parse("y=X:2,x=X:4", mesh, m)
    for d in range(8):
        x, y = (int(c) for c in mesh.coords[d])
        assert p.chips[d] == y * 4 + x
    assert Placement.parse("devices:7,6,5,4,3,2,1,0", mesh, m).chips == tuple(range(7, -1, -1))
    assert Placement.parse("[7,6,5,4,3,2,1,0]", mesh, m).chips == tuple(range(7, -1, -1))


@pytest.mark.parametrize("text,needle", [
    ("x=Q,y=Y,z=Z", "unknown physical dim 'Q'"),
    ("x=X,y=Y", "mesh axis 'z' (size 4) is not placed"),
    ("x=X,y=Y,z=Y", "split without sizes"),
    ("x=X,y=Y:2,z=Y:4", "multiply to 8"),
    ("x=X,x=Y,z=Z", "placed twice"),
    ("w=X,y=Y,z=Z", "not an axis"),
    ("x=X*Y,y=Z:2,z=Z:2", "have size 16"),
    ("x:X", "not AXIS=DIM"),
    ("x=X:3,y=X,z=Z", "do not divide"),
    ("x=X:3,y=Y,z=Z", "multiply to 3, not its size 4"),
    ("x=5,y=Y,z=Z", "physical dim 5 does not exist"),
    ("devices:0,0,1", "lists 3 chips"),
    ("devices:a", "not a list"),
])
def test_placement_errors(text, needle):
    m = load_profile("tpu-v4:4x4x4")
    with pytest.raises(PlacementError) as e:
        Placement.parse(text, Mesh.parse("x=4,y=4,z=4"), m)
    assert needle in str(e.value)


def test_placement_size_mismatch_message():
    with pytest.raises(PlacementError, match=r"has 64 devices but hardware tpu-v4:4x4x1 has 16.*tpu-v4:4x4x4"):
        Placement.of(None, Mesh.parse("x=4,y=4,z=4"), load_profile("tpu-v4:4x4"))
    with pytest.raises(PlacementError, match="permutation"):
        Placement((0, 0, 1, 2))


# -- analytic -------------------------------------------------------------------------------
def test_alpha_beta_closed_forms():
    a, bw, lat = 1e-5, 1e10, 1e-6
    B = 1 << 20
    assert alpha_beta_s("all_gather", 8, B, a, bw, lat, "ring") == pytest.approx(a + 7 * (lat + B / bw))
    assert alpha_beta_s("all_gather", 8, B, a, bw, lat, "bidir_ring") == pytest.approx(a + 4 * (lat + B / bw))
    assert alpha_beta_s("reduce_scatter", 8, B, a, bw, lat, "ring") == pytest.approx(a + 7 * (lat + B / 8 / bw))
    assert alpha_beta_s("all_reduce", 8, B, a, bw, lat, "ring") == pytest.approx(a + 14 * (lat + B / 8 / bw))
    assert alpha_beta_s("all_to_all", 8, B, a, bw, lat, "direct", hops=2) == pytest.approx(a + 2 * lat + B / bw)
    assert alpha_beta_s("dyn_slice", 1, B, a, bw, 0.0) == pytest.approx(a + B / bw)
    assert alpha_beta_s("all_gather", 1, B, a, bw, lat) == a


def test_topology_aware_op_time_counts_contention():
    m = load_profile("tpu-v4:8x1x1")
    # two permute flows 0->2 and 1->3 share link 1->2
    one = ScheduleOp("permute", 1 << 20, 1 << 20, 1 << 20, 1 << 20, pairs=((0, 2),))
    two = ScheduleOp("permute", 1 << 20, 1 << 20, 1 << 20, 1 << 20, pairs=((0, 2), (1, 3)))
    a = m.alpha_s("permute")
    assert op_time_s(two, m) - a == pytest.approx(2 * (op_time_s(one, m) - a) - 2e-6, rel=1e-9)


def test_lower_bound_need_bytes():
    mesh = Mesh.parse("x=2,y=4")
    src, dst = ArrayType.parse("[64{x}, 32{y}]"), ArrayType.parse("[64{y}, 32{x}]")
    need = need_bytes_per_device(mesh, src, dst, 4)
    assert need.shape == (8,)
    # device 0 holds rows 0..31 x cols 0..7 and needs rows 0..15 x cols 0..15: it lacks 16x8
    assert need[0] == 16 * 8 * 4
    m = load_profile("cpu-host:8")
    assert lower_bound_s(m, need) == pytest.approx(need.max() / m.link_bandwidth_Bps)
    assert lower_bound_s(m, np.zeros(8)) == 0.0


def check_pending_plan(plan):
    """The plan's blocks, element by element (pending groups summed), against its target."""
    from synth import interpret
    from synth.interp import check_blocks

    x = np.random.default_rng(0).integers(-99, 99, size=plan.src.shape)
    blocks = interpret(plan.steps, plan.work_types[0], plan.work_mesh, x, seed=1)
    check_blocks(x, blocks, plan.work_types[-1], plan.work_mesh, "final")


@pytest.mark.parametrize("mesh_s,src_s,dst_s,want_elems", [
    # all-reduce: every device needs a value for all 64 elements (its own partial is not the sum)
    ("x=8", "[64]{U:x}", "[64]", 64),
    # reduce-scatter: its 8-element block, and (8-1)*64/8 = 56 values merged per device at best
    ("x=8", "[64]{U:x}", "[64{x}]", 56),
    # sharded -> pending: every device can keep its own shard and zeros elsewhere
    ("x=8", "[64{x}]", "[64]{U:x}", 0),
    # reduced over x while kept sharded over y: 8 elements each (block and merge bound agree)
    ("x=2,y=4", "[64{y}]{U:x}", "[64{x,y}]", 8),
])
def test_lower_bound_counts_pending_sums_like_synth(mesh_s, src_s, dst_s, want_elems):
    from simulator import simulate_plan
    from synth import synthesize

    mesh, src, dst = Mesh.parse(mesh_s), ArrayType.parse(src_s), ArrayType.parse(dst_s)
    plan = synthesize(mesh, src, dst, planner="normal", itemsize=4)
    check_pending_plan(plan)
    assert plan.recv_lower_bound_bytes == want_elems * 4
    # one link class, no in-network reduction; no latency, so the bound is the bytes' alone
    m = load_profile("cpu-host:8").with_scale(latency_scale=0.0)
    res = simulate_plan(plan, m)
    bw = m.topology.in_bandwidth(0)
    assert res.lower_bound_s == pytest.approx(want_elems * 4 / bw, rel=1e-9)
    assert res.time_s >= res.lower_bound_s
    want_kind = {0: "injection", 56: "reduction"}.get(want_elems, "injection")
    assert res.lower_bound_kind == want_kind


def test_in_network_reduction_keeps_the_bound_below_an_nvls_all_reduce():
    from simulator import simulate_plan
    from synth import synthesize

    mesh = Mesh.parse("x=8")
    plan = synthesize(mesh, ArrayType.parse("[1048576]{U:x}"), ArrayType.parse("[1048576{x}]"),
                      planner="normal", itemsize=4)
    check_pending_plan(plan)
    from models.analytic import hop_floor_matrix_s, launch_floor_s

    nvls = load_profile("dgx-h100:1x8")
    assert nvls.nvls_efficiency > 0
    res = simulate_plan(plan, nvls)
    # the switch merges the partials: only the 1/8 block each device receives binds, after one
    # launch (LL's 6.6 us) and one protocol step from the nearest partner (0.6 us)
    assert "reduction" not in res.lower_bound_terms
    lat = launch_floor_s(nvls) + hop_floor_matrix_s(nvls, [1], [0])[0]
    assert lat == pytest.approx(7.2e-6)
    assert res.lower_bound_s == pytest.approx(lat + 1048576 // 8 * 4 / nvls.topology.in_bandwidth(0), rel=1e-9)
    assert res.time_s >= res.lower_bound_s
    # without in-network reduction the merge term binds: 7/8 of the buffer per device
    host = load_profile("cpu-host:8").with_scale(latency_scale=0.0)
    ring = simulate_plan(plan, host)
    assert ring.lower_bound_kind == "reduction"
    assert ring.lower_bound_s == pytest.approx(7 * 1048576 // 8 * 4 / host.topology.in_bandwidth(0))


# -- calibration fitting -------------------------------------------------------------------
def test_fit_recovers_parameters_the_simulator_then_reproduces(tmp_path):
    from models.calibration import calibrated_profile_doc, cost_features, fit_profile, write_profile
    from simulator import simulate
    from synth import Schedule

    base = load_profile("cpu-host:8")
    truth = base.with_overrides(
        all_gather=KindParams(alpha_s=3e-5, bandwidth_Bps=2e9, latency_s=1e-6),
        all_to_all=KindParams(alpha_s=5e-5, bandwidth_Bps=1e9, latency_s=2e-6),
        dyn_slice=KindParams(alpha_s=2e-6, bandwidth_Bps=6e9))
    groups = {2: tuple((i, i + 1) for i in range(0, 8, 2)), 4: ((0, 1, 2, 3), (4, 5, 6, 7)), 8: (tuple(range(8)),)}
    samples = []
    for n, g in groups.items():
        for b in (1 << 12, 1 << 16, 1 << 20):
            for op in (ScheduleOp("all_gather", b, n * b, b, (n - 1) * b, groups=g),
                       ScheduleOp("all_to_all", b, b, b * (n - 1) // n, b * (n - 1) // n, groups=g),
                       ScheduleOp("dyn_slice", b, b // 2, groups=tuple((d,) for d in range(8)))):
                res = simulate(Schedule(8, (op,), "probe", {"initial_bytes": b}), truth)
                samples.append((op, res.time_s))
    fits = fit_profile(base, samples)
    assert set(fits) == {"all_gather", "all_to_all", "dyn_slice"}
    for k, f in fits.items():
        assert f.mape < 0.03, (k, f)
    ag = fits["all_gather"].params
    assert ag.alpha_s == pytest.approx(3e-5, rel=0.1) and ag.bandwidth_Bps == pytest.approx(2e9, rel=0.05)
    assert fits["dyn_slice"].params.bandwidth_Bps == pytest.approx(6e9, rel=1e-6)
    a_lat, a_bw = cost_features(samples[0][0], base)
    assert a_lat > 0 and a_bw > 0
    doc = calibrated_profile_doc("cpu-8-test", "cpu-host:8", fits, source="test fit")
    path = write_profile(doc, tmp_path / "cpu-8-test.json")
    fitted = load_profile(str(path))
    assert fitted.name == "cpu-8-test" and fitted.num_devices == 8
    assert "MAPE" in fitted.source("collectives.all_gather.alpha_s")
    # the fitted profile predicts the probes
    errs = [abs(simulate(Schedule(8, (op,), "p", {"initial_bytes": op.in_bytes}), fitted).time_s - t) / t
            for op, t in samples]
    assert np.mean(errs) < 0.03
    with pytest.raises(ProfileError):
        write_profile({"topology": {"kind": "bogus"}}, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()
