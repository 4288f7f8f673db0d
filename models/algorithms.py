"""Collective algorithms: how a schedule op becomes point-to-point transfers.

Shared by the analytic model and the simulator so both cost exactly the same
transfers. An op expands into *units* that run side by side:

* ``ring`` -- one per device group. Unidirectional ring (``ring``): ``steps_fwd``
  steps; in step ``s`` member ``i`` sends a block of ``block_bytes`` to member
  ``i+1`` once it has received step ``s-1`` from member ``i-1``.
  Bidirectional ring (``bidir_ring``) adds the reverse ring (member ``i`` to
  ``i-1``) with ``steps_bwd`` steps.

  - all-gather, ring: ``n-1`` steps of the input block. bidir_ring: each device's
    block travels both ways, ``ceil((n-1)/2)`` steps forward and ``floor((n-1)/2)``
    backward (same bytes, about half the time).
  - reduce-scatter: ``n-1`` steps of ``in/n`` (bidir: ``n-1`` steps of ``in/(2n)``
    each way); all-reduce: twice as many steps (reduce-scatter then all-gather).

* ``direct`` -- explicit ``(src, dst, bytes)`` flows that all start at once.
  All-to-all: each member sends ``send_bytes/(n-1)`` to each other member (in
  the order ``i+1, i+2, ...``); permute: one flow per ``(src, dst)`` pair.

Devices are mesh device ids; ``placement.chips`` maps them onto topology chips and
routes are tuples of link ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Unit:
    algo: str                 # "ring" | "direct"
    devices: tuple            # participating devices (ring: in ring order)
    block_bytes: float = 0.0  # ring: bytes per step per member
    steps_fwd: int = 0
    steps_bwd: int = 0
    routes_fwd: tuple = ()    # ring: route member i -> i+1
    routes_bwd: tuple = ()    # ring: route member i -> i-1
    flows: tuple = ()         # direct: (src_dev, dst_dev, bytes, route)
    links: set = field(default_factory=set)

    def transfers(self):
        """Every transfer as (src_dev, dst_dev, bytes, route, step, direction)."""
        n = len(self.devices)
        if self.algo == "ring":
            for s in range(self.steps_fwd):
                for i in range(n):
                    yield self.devices[i], self.devices[(i + 1) % n], self.block_bytes, self.routes_fwd[i], s, 1
            for s in range(self.steps_bwd):
                for i in range(n):
                    yield self.devices[i], self.devices[(i - 1) % n], self.block_bytes, self.routes_bwd[i], s, -1
        else:
            for f in self.flows:
                yield f[0], f[1], f[2], f[3], 0, 0

    def link_bytes(self):
        """(link, bytes) pairs summed over all transfers."""
        if self.algo == "ring":
            for r in self.routes_fwd:
                for lk in r:
                    yield lk, self.block_bytes * self.steps_fwd
            for r in self.routes_bwd:
                for lk in r:
                    yield lk, self.block_bytes * self.steps_bwd
        else:
            for f in self.flows:
                for lk in f[3]:
                    yield lk, f[2]


def ring_steps(kind: str, algorithm: str, n: int, in_bytes: float, out_bytes: float):
    """(block_bytes, steps_fwd, steps_bwd) of a ring algorithm over ``n`` devices."""
    if n < 2:
        return 0.0, 0, 0
    bidir = algorithm == "bidir_ring"
    if kind == "all_gather":
        if bidir:
            return float(in_bytes), (n - 1 + 1) // 2, (n - 1) // 2
        return float(in_bytes), n - 1, 0
    mult = 2 if kind == "all_reduce" else 1
    if bidir:
        b = in_bytes / (2 * n)
        return float(b), mult * (n - 1), mult * (n - 1)
    return float(in_bytes / n), mult * (n - 1), 0


def expand(op, topo, chips, algorithm: str) -> list[Unit]:
    """The units of one schedule op (local ops have none)."""
    units: list[Unit] = []
    route = topo.route
    if op.kind in ("all_gather", "reduce_scatter", "all_reduce"):
        for g in op.groups:
            n = len(g)
            b, sf, sb = ring_steps(op.kind, algorithm, n, op.in_bytes, op.out_bytes)
            if n < 2 or (sf == 0 and sb == 0):
                continue
            cs = [chips[d] for d in g]
            rf = tuple(route(cs[i], cs[(i + 1) % n]) for i in range(n)) if sf else ()
            rb = tuple(route(cs[i], cs[(i - 1) % n]) for i in range(n)) if sb else ()
            u = Unit("ring", tuple(g), b, sf, sb, rf, rb)
            u.links = {lk for r in rf + rb for lk in r}
            units.append(u)
    elif op.kind == "all_to_all":
        for g in op.groups:
            n = len(g)
            if n < 2:
                continue
            per = op.send_bytes / (n - 1)
            flows = []
            split = topo.route_split      # ties on a wrapped ring: half the bytes each way
            for i in range(n):
                for j in range(1, n):
                    a, b = g[i], g[(i + j) % n]
                    for r, share in split(chips[a], chips[b]):
                        flows.append((a, b, per * share, r))
            u = Unit("direct", tuple(g), flows=tuple(flows))
            u.links = {lk for f in flows for lk in f[3]}
            units.append(u)
    elif op.kind == "permute":
        for a, b in op.pairs:
            if a == b:
                continue
            fl = tuple((a, b, float(op.send_bytes) * share, r) for r, share in topo.route_split(chips[a], chips[b]))
            u = Unit("direct", (a, b), flows=fl)
            u.links = {lk for f in fl for lk in f[3]}
            units.append(u)
    return units


def components(units: list[Unit]) -> list[list[Unit]]:
    """Group units that share a link (union-find); each component is independent
    of the others. Components keep the op's unit order."""
    parent = list(range(len(units)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    for i, u in enumerate(units):
        for lk in u.links:
            j = owner.get(lk)
            if j is None:
                owner[lk] = i
            else:
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
    comps: dict[int, list[Unit]] = {}
    for i, u in enumerate(units):
        comps.setdefault(find(i), []).append(u)
    return list(comps.values())


def unit_key(u: Unit, link_key) -> tuple:
    """A placement-free description of a unit's routes: the kind/dim/step of each
    link crossed, in order (tori), or the link kinds (switched machines)."""
    routes = (u.routes_fwd or u.routes_bwd) if u.algo == "ring" else tuple(f[3] for f in u.flows)
    return (u.algo,) + tuple(tuple(link_key[lk] for lk in r) for r in routes)


def order_component(comp: list[Unit], link_key) -> list[Unit]:
    """The units of a component in a canonical order (by :func:`unit_key`, stable).

    The simulator starts a component's units in this order, so two components that
    are the same up to renaming links line up unit by unit and get equal
    signatures (translations of one pattern across a torus, say)."""
    if len(comp) < 2:
        return comp
    return sorted(comp, key=lambda u: unit_key(u, link_key))


def signature(comp: list[Unit], bw, lat) -> tuple:
    """A key equal for components that take the same time from the same start:
    same units, same transfer sizes, same route shapes over links of the same
    bandwidth and latency (link ids renamed by first use)."""
    canon: dict[int, int] = {}
    params = []

    def c(r):
        out = []
        for lk in r:
            k = canon.get(lk)
            if k is None:
                k = canon[lk] = len(canon)
                params.append((bw[lk], lat[lk]))
            out.append(k)
        return tuple(out)

    parts = []
    for u in comp:
        if u.algo == "ring":
            parts.append(("ring", len(u.devices), u.block_bytes, u.steps_fwd, u.steps_bwd,
                          tuple(c(r) for r in u.routes_fwd), tuple(c(r) for r in u.routes_bwd)))
        else:
            parts.append(("direct", tuple((f[2], c(f[3])) for f in u.flows)))
    return tuple(parts), tuple(params)
