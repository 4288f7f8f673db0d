"""Config expansion, row ids, machine sizing and placements (no worker processes)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from experiments.backends import auto_size, load_machine, resolve_placement, schedule_metrics
from experiments.case import Case
from experiments.config import Knobs, parse_config
from synth import Mesh, synthesize

BASE = """
suites:
  - xla-issues: {names: [jax-21562-4x2, alpa-701-4]}
machines: [tpu-v4, dgx-h100]
planners: [normal, xla-shardy]
"""


def _cfg(extra=""):
    return parse_config(yaml.safe_load(BASE + extra), "test.yaml")


def test_units_and_rows_expand_the_config():
    c = _cfg("whatif: {bandwidth_scale: [1, 2], latency_scale: [1, 10]}")
    units = c.units()
    assert len(units) == 2 * 2  # cases x planners
    assert all(len(u.rows) == 2 * 4 for u in units)  # machines x knob combinations
    ids = [i for u in units for i in u.ids]
    assert len(ids) == len(set(ids))
    # Units that need JAX come after the others, grouped by device count.
    keys = [(u.planner.startswith("xla"), u.case.num_devices) for u in units]
    assert keys == sorted(keys)


def test_row_ids_are_stable_and_depend_on_the_spec():
    a = [i for u in _cfg().units() for i in u.ids]
    b = [i for u in _cfg().units() for i in u.ids]
    assert a == b
    c = [i for u in _cfg("whatif: {bandwidth_scale: [2]}").units() for i in u.ids]
    assert not set(a) & set(c)


def test_whatif_list_is_a_union_with_the_baseline():
    c = _cfg("whatif: [{bandwidth_scale: [0.5, 2]}, {placement: [reversed-axes]}, {itemsize: [4]}]")
    assert Knobs() in c.knobs
    assert len(c.knobs) == 1 + 2 + 1 + 1
    assert sum(k.is_baseline() for k in c.knobs) == 1
    # The itemsize knob makes its own units (one schedule per element size).
    assert len(c.units()) == 2 * 2 * 2


def test_measure_selects_small_cases_only():
    c = _cfg("measure: {enabled: true, max_devices: 8, max_bytes: 100000}")
    measured = {u.case.name for u in c.units() if u.measure}
    assert measured == {"jax-21562-4x2"}  # alpa-701-4 is 200 MB


def test_inline_cases_and_duplicates():
    c = parse_config(yaml.safe_load(
        "cases: [{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]'}]\nmachines: [cpu-host]"), "t")
    assert c.cases == (Case("a", "inline", "x=2", "[4{x}]", "[4]"),)
    with pytest.raises(ValueError, match="appears twice"):
        parse_config(yaml.safe_load(
            "cases: [{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]'}, "
            "{name: a, mesh: 'x=2', src: '[4{x}]', dst: '[4]'}]"), "t")


@pytest.mark.parametrize("kind, ndims, n, want", [
    ("torus", 3, 8, "2x2x2"), ("torus", 3, 64, "4x4x4"), ("torus", 3, 4096, "16x16x16"),
    ("torus", 3, 32, "4x4x2"), ("torus", 2, 256, "16x16"), ("switched", 2, 64, "8"),
    ("switched", 2, 4, "1x4"), ("cpu-host", 1, 8, "8"),
])
def test_auto_size(kind, ndims, n, want):
    assert auto_size(kind, ndims, n) == want


@pytest.mark.parametrize("profile, n", [("tpu-v4", 8), ("tpu-v4", 4096), ("dgx-h100", 64), ("dgx-h100", 4)])
def test_machines_are_sized_to_the_mesh(profile, n):
    m = load_machine(profile, n)
    assert m.num_devices == n
    fast = load_machine(profile, n, bandwidth_scale=2.0)
    assert fast.link_bandwidth_Bps == pytest.approx(2 * m.link_bandwidth_Bps)


def test_placements_are_permutations():
    mesh = Mesh.parse("x=2,y=4")
    assert resolve_placement("default", mesh) is None
    rev = resolve_placement("reversed-axes", mesh)
    assert sorted(rev) == list(range(8))
    # Device (x, y) sits on chip y * 2 + x: the first axis varies fastest.
    assert rev == [y * 2 + x for x in range(2) for y in range(4)]
    r0, r0b, r1 = (resolve_placement(p, mesh) for p in ("random:0", "random:0", "random:1"))
    assert sorted(r0) == list(range(8)) and r0 == r0b and r0 != r1
    assert resolve_placement("x=X", mesh) == "x=X"  # passed through to models/


def test_schedule_metrics_match_the_plan():
    p = synthesize("x=4,y=2", "[16{y}, 16, 16{x}]", "[16, 16{x,y}, 16]", itemsize=4)
    m = schedule_metrics(p.to_schedule())
    assert m["max_buffer_bytes"] == p.max_shard_bytes
    assert m["recv_bytes_max_device"] == p.recv_bytes_max_device
    assert m["num_collectives"] == p.num_collectives
    assert m["peak_pair_bytes"] == p.peak_live_bytes
    e = synthesize("x=4,y=2", "[16{y}, 16, 16{x}]", "[16, 16{x,y}, 16]", planner="easy", itemsize=4)
    me = schedule_metrics(e.to_schedule())
    assert me["max_buffer_bytes"] == 16 ** 3 * 4 == int(np.prod(e.src.shape)) * 4
