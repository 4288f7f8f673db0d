"""The component-wise max-min replay (models.flow.maxmin_replay) against the plain one
(maxmin_replay_reference): same events, same finish times, on phases whose flows fall
into several link-disjoint groups with uneven sharing inside each."""

import numpy as np
import pytest

from models.flow import _components, _incidence, maxmin_replay, maxmin_replay_reference


def _random_phase(seed, groups=5, flows_per_group=12, links_per_group=9):
    rng = np.random.default_rng(seed)
    routes, nbytes, weights = [], [], []
    for g in range(groups):
        base = g * links_per_group
        for _ in range(flows_per_group):
            hops = rng.integers(1, 5)
            routes.append(list(base + rng.choice(links_per_group, size=hops, replace=False)))
            nbytes.append(float(rng.choice([4096, 65536, 131072, 1e6])))
            weights.append(float(rng.integers(1, 4)))
    routes.append([])  # an empty route finishes at once
    nbytes.append(100.0)
    weights.append(1.0)
    cap = rng.uniform(1e9, 5e10, size=groups * links_per_group)
    return routes, nbytes, weights, cap


@pytest.mark.parametrize("seed", range(6))
def test_component_replay_equals_reference(seed):
    routes, nbytes, weights, cap = _random_phase(seed)
    t, ev, fin = maxmin_replay(routes, nbytes, weights, cap)
    t0, ev0, fin0 = maxmin_replay_reference(routes, nbytes, weights, cap)
    assert ev == ev0
    assert t == pytest.approx(t0, rel=1e-9)
    np.testing.assert_allclose(fin, fin0, rtol=1e-9, atol=0)
    assert fin[-1] == 0.0 and ev > 1


def test_components_split_link_disjoint_flows():
    a, _links = _incidence([[0, 1], [1], [5], [7, 5], [9]])
    lab, n = _components(a)
    assert n == 3
    assert lab[0] == lab[1] and lab[2] == lab[3] and len({lab[0], lab[2], lab[4]}) == 3


def test_one_shared_link_couples_everything():
    routes = [[0, i + 1] for i in range(6)]  # all cross link 0
    a, _ = _incidence(routes)
    assert _components(a)[1] == 1
    t, ev, fin = maxmin_replay(routes, [1e6] * 6, [1.0] * 6, np.full(7, 1e9))
    assert ev == 1 and t == pytest.approx(6e6 / 1e9, rel=1e-12)


@pytest.mark.parametrize("bad", ["12", "256,x"])
def test_flowcheck_names_a_bad_size_in_one_line(bad, capsys):
    from simulator import flowcheck

    assert flowcheck.main(["--sizes", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--sizes" in err and "256" in err
