"""Fluid (flow-level) network model: max-min fair sharing of links among concurrent flows.

A *flow* is ``(route, bytes, weight)``: ``route`` a sequence of link ids, ``weight`` the number
of identical sub-flows it stands for (a merged flow gets ``weight`` fair shares). All flows of a
phase start together. Rates follow max-min fairness (progressive filling): every unfrozen flow's
rate per unit weight grows at the same pace until some link is full; the flows crossing a full
link freeze. Rates are recomputed only when a flow finishes, so a phase of ``F`` flows costs at
most ``F`` (in practice a handful of) rate computations, each a few sparse matrix products.

:func:`bottleneck_time_s` is the closed form the analytic model uses: the busiest link's bytes
over its capacity. When every flow of a phase is equally loaded (a ring, a symmetric
all-to-all) both give the same time; with uneven sharing the max-min replay is longer.
"""

from __future__ import annotations

import numpy as np


def _incidence(routes, nlinks_hint=None):
    from scipy.sparse import csr_matrix

    lens = np.fromiter((len(r) for r in routes), dtype=np.int64, count=len(routes))
    indptr = np.zeros(len(routes) + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    idx = np.fromiter((lk for r in routes for lk in r), dtype=np.int64, count=int(indptr[-1]))
    links, local = np.unique(idx, return_inverse=True)
    a = csr_matrix((np.ones(len(idx)), local, indptr), shape=(len(routes), len(links)))
    return a, links


def bottleneck_time_s(routes, nbytes, weights, capacity) -> float:
    """``max over links(bytes crossing it / capacity)`` (0 without flows)."""
    if not len(routes):
        return 0.0
    load: dict = {}
    for r, b, w in zip(routes, nbytes, weights):
        for lk in r:
            load[lk] = load.get(lk, 0.0) + b * w
    if not load:
        return 0.0
    ids = np.fromiter(load.keys(), dtype=np.int64)
    vals = np.fromiter(load.values(), dtype=float)
    return float((vals / capacity[ids]).max())


def maxmin_rates(a, cap, weights, active):
    """Max-min fair rate (bytes/s) of every flow; ``a`` is the flow x link incidence matrix."""
    f = a.shape[0]
    unit = np.zeros(f)
    frozen = ~active.copy()
    remcap = cap.astype(float).copy()
    at = a.T.tocsr()
    eps = 1e-12
    for _ in range(f + 1):
        w = np.where(frozen, 0.0, weights)
        cnt = at @ w
        used = cnt > 0
        if not used.any():
            break
        share = np.full(len(cap), np.inf)
        share[used] = remcap[used] / cnt[used]
        d = float(share.min())
        if not np.isfinite(d):
            break
        unit[~frozen] += d
        remcap[used] -= d * cnt[used]
        sat = used & (remcap <= eps * cap + 1e-30)
        if not sat.any():  # numerical guard: saturate the tightest link
            sat = used & (share <= d * (1 + 1e-9))
        newly = (a @ sat.astype(float) > 0) & ~frozen
        frozen |= newly
        if frozen.all():
            break
    return unit * weights


def maxmin_finish_time_s(routes, nbytes, weights, capacity) -> tuple[float, int]:
    """Time until the last flow finishes under max-min fair sharing, and the number of
    rate computations (events). Flows with an empty route finish at once."""
    t, events, _fin = maxmin_replay(routes, nbytes, weights, capacity)
    return t, events


def _components(a):
    """Component label of every flow in the flow--link graph of incidence ``a`` (flows
    linked through shared links), and the number of components.

    Example: flows ``0: [l0, l1]``, ``1: [l1]``, ``2: [l5]``, ``3: [l7, l5]`` -> labels
    ``[0, 0, 1, 1]``. Max-min fairness decomposes over components: a flow's rate depends only
    on the flows it is linked to through shared links."""
    from scipy.sparse import bmat
    from scipy.sparse.csgraph import connected_components

    f = a.shape[0]
    n, lab = connected_components(bmat([[None, a], [a.T, None]], format="csr"), directed=False)
    flab = lab[:f]
    _, flab = np.unique(flab, return_inverse=True)  # links-only components carry no flow
    return flab.astype(np.int64), int(flab.max()) + 1 if f else 0


def maxmin_replay(routes, nbytes, weights, capacity, *, by_component: bool = True):
    """(makespan, rate computations, finish time of every flow).

    Invariant: ``rates`` always holds the max-min fair rates of the active flows. The phase's
    flow--link graph is labelled once into connected components (:func:`_components`). The
    first event fills the whole phase, as :func:`maxmin_replay_reference` does; after it, only
    the components that lost a flow are refilled, together in one progressive filling over
    their rows and links; the others keep their rates (they share no link with the finished
    flows). Example: a permute on a 16x16x16 torus of 4904 flows in 16 components, 627
    events: each event after the first refills one component of ~300 flows instead of all
    4904. Events and finish times equal the reference's (to rounding: a refill sums fewer fill
    levels). ``by_component=False`` refills the whole phase at every event (the plain
    replay, :func:`maxmin_replay_reference`)."""
    routes = list(routes)
    nbytes = np.asarray(nbytes, dtype=float)
    weights = np.asarray(weights, dtype=float)
    finish = np.zeros(len(routes))
    keep = np.array([len(r) > 0 and b > 0 for r, b in zip(routes, nbytes)], dtype=bool)
    if not keep.any():
        return 0.0, 0, finish
    routes = [r for r, k in zip(routes, keep) if k]
    total = nbytes[keep] * weights[keep]
    weights = weights[keep]
    a, links = _incidence(routes)
    cap = np.asarray(capacity, dtype=float)[links]
    comp_of, ncomp = _components(a)
    rem = total.copy()
    active = np.ones(len(routes), dtype=bool)
    fin_k = np.zeros(len(routes))
    rates = maxmin_rates(a, cap, weights, active)
    t = 0.0
    events = 0
    while True:
        events += 1
        ra = rates[active]
        if not (ra > 0).all():
            raise RuntimeError("flow model: an active flow got no bandwidth")
        dt = float((rem[active] / ra).min())
        t += dt
        rem[active] -= ra * dt
        done = active & (rem <= 1e-9 * total)
        fin_k[done] = t
        active &= ~done
        rates[done] = 0.0
        if not active.any():
            break
        dirty = np.zeros(ncomp, dtype=bool)
        dirty[comp_of[done]] = True
        if dirty.all() or not by_component:
            rates = maxmin_rates(a, cap, weights, active)
            continue
        rows = np.flatnonzero(dirty[comp_of] & active)
        if not len(rows):
            continue
        sub = a[rows]
        cols = np.unique(sub.indices)
        rates[rows] = maxmin_rates(sub[:, cols], cap[cols], weights[rows], np.ones(len(rows), dtype=bool))
    finish[keep] = fin_k
    return t, events, finish


def maxmin_replay_reference(routes, nbytes, weights, capacity):
    """The plain replay: one progressive filling over the whole phase at every event. Same
    answer as :func:`maxmin_replay` (its equivalence tests and ``python -m
    simulator.flowcheck`` compare the two); slow on phases of thousands of flows."""
    return maxmin_replay(routes, nbytes, weights, capacity, by_component=False)
