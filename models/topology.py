"""Topology graphs (networkx) and routing.

The builders are pure functions returning a new ``networkx.DiGraph``. Nodes
``0..P-1`` are chips/devices (attribute ``coord``); other nodes are switches or
shared buses (strings). Every physical link is a pair of directed edges; each edge
carries ``bandwidth`` (bytes/s, one direction), ``latency`` (s) and ``kind``.

* :func:`ring_graph` -- a bidirectional ring (``wraparound=False`` gives a line);
* :func:`torus_graph` -- an n-D torus, row-major node numbering (last dim fastest).
  A dimension of size 1 has no links; a dimension of size 2 has one link pair per
  neighbour pair even with wraparound (the wrap link and the direct link join the
  same two chips and a DiGraph keeps one edge per direction);
* :func:`nvswitch_graph` -- one node, GPUs joined through a non-blocking switch node;
* :func:`multinode_graph` -- NVSwitch inside each node, one NIC per GPU into an
  inter-node fabric (a full-bisection fat tree abstracted as one switch node);
* :func:`cpu_host_graph` -- host-CPU devices sharing memory: each device reaches a
  shared bus through its own copy bandwidth, the bus itself is one link of the
  machine's total memory bandwidth.

:class:`Topology` wraps a graph with dense link ids, bandwidth/latency arrays and
routes: dimension-order routing on tori (shortest way round each ring, ties go
``+``), shortest paths (fewest hops, deterministic) elsewhere.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np


# -- builders ------------------------------------------------------------------------------
def ring_graph(n: int, bandwidth: float, latency: float, wraparound: bool = True) -> nx.DiGraph:
    """A ring of ``n`` chips (a line if ``wraparound`` is False)."""
    return torus_graph((n,), bandwidth, latency, wraparound=wraparound)


def torus_graph(dims, bandwidth: float, latency: float, wraparound=True, links_per_neighbor: int = 1,
                kind: str = "ici") -> nx.DiGraph:
    """An n-D torus over ``dims`` (row-major numbering, last dim fastest).

    ``wraparound`` is a bool or one bool per dim. Each directed edge has
    ``bandwidth * links_per_neighbor`` and attributes ``dim`` and ``step`` (+1/-1)."""
    dims = tuple(int(d) for d in dims)
    if not dims or any(d < 1 for d in dims):
        raise ValueError(f"torus_graph: dims must be positive, got {dims}")
    wrap = tuple(wraparound) if isinstance(wraparound, (tuple, list)) else (bool(wraparound),) * len(dims)
    if len(wrap) != len(dims):
        raise ValueError(f"torus_graph: {len(wrap)} wraparound flags for {len(dims)} dims")
    g = nx.DiGraph(kind="torus", dims=dims, wraparound=wrap)
    coords = np.indices(dims).reshape(len(dims), -1).T
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    for n, c in enumerate(coords):
        g.add_node(n, coord=tuple(int(x) for x in c), chip=True)
    bw = float(bandwidth) * int(links_per_neighbor)
    for n, c in enumerate(coords):
        for k, s in enumerate(dims):
            if s < 2:
                continue
            for step in (1, -1):
                cc = int(c[k]) + step
                if not (0 <= cc < s):
                    if not wrap[k]:
                        continue
                    cc %= s
                m = n + (cc - int(c[k])) * strides[k]
                if m != n and not g.has_edge(n, m):
                    g.add_edge(n, m, bandwidth=bw, latency=float(latency), dim=k, step=step, kind=kind)
    return g


def nvswitch_graph(num_gpus: int, gpu_bandwidth: float, latency: float, switch: str = "nvswitch") -> nx.DiGraph:
    """GPUs ``0..n-1`` joined by a non-blocking switch node; each GPU<->switch edge
    carries the GPU's total per-direction NVLink bandwidth."""
    g = nx.DiGraph(kind="nvswitch")
    for i in range(num_gpus):
        g.add_node(i, coord=(0, i), chip=True)
    g.add_node(switch, chip=False)
    for i in range(num_gpus):
        g.add_edge(i, switch, bandwidth=float(gpu_bandwidth), latency=float(latency) / 2, kind="nvlink")
        g.add_edge(switch, i, bandwidth=float(gpu_bandwidth), latency=float(latency) / 2, kind="nvlink")
    return g


def multinode_graph(nodes: int, gpus_per_node: int, nvlink_bandwidth: float, nvlink_latency: float,
                    nic_bandwidth: float, nic_latency: float, nics_per_node: int = 0) -> nx.DiGraph:
    """``nodes`` NVSwitch nodes; GPU ``node*gpus_per_node + i``; one NIC per GPU into
    one fabric switch ``"fabric"`` (full bisection). A single node has no fabric.

    With ``0 < nics_per_node < gpus_per_node`` GPUs share NICs: GPU ``i`` reaches NIC node
    ``nic{node}.{i * nics // gpus}`` over a ``pcie`` edge (of the NIC's bandwidth, no
    latency), and the NIC node joins the fabric over the ``nic`` edges."""
    g = nx.DiGraph(kind="multinode", nodes=nodes, gpus_per_node=gpus_per_node)
    for n in range(nodes):
        for i in range(gpus_per_node):
            g.add_node(n * gpus_per_node + i, coord=(n, i), chip=True)
    for n in range(nodes):
        sw = f"nvswitch{n}"
        g.add_node(sw, chip=False)
        for i in range(gpus_per_node):
            d = n * gpus_per_node + i
            g.add_edge(d, sw, bandwidth=float(nvlink_bandwidth), latency=float(nvlink_latency) / 2, kind="nvlink")
            g.add_edge(sw, d, bandwidth=float(nvlink_bandwidth), latency=float(nvlink_latency) / 2, kind="nvlink")
    if nodes > 1:
        g.add_node("fabric", chip=False)
        nics = nics_per_node if 0 < nics_per_node < gpus_per_node else 0
        for d in range(nodes * gpus_per_node):
            if nics:
                n, i = divmod(d, gpus_per_node)
                nic = f"nic{n}.{i * nics // gpus_per_node}"
                if nic not in g:
                    g.add_node(nic, chip=False)
                    g.add_edge(nic, "fabric", bandwidth=float(nic_bandwidth), latency=float(nic_latency) / 2,
                               kind="nic")
                    g.add_edge("fabric", nic, bandwidth=float(nic_bandwidth), latency=float(nic_latency) / 2,
                               kind="nic")
                g.add_edge(d, nic, bandwidth=float(nic_bandwidth), latency=0.0, kind="pcie")
                g.add_edge(nic, d, bandwidth=float(nic_bandwidth), latency=0.0, kind="pcie")
                continue
            g.add_edge(d, "fabric", bandwidth=float(nic_bandwidth), latency=float(nic_latency) / 2, kind="nic")
            g.add_edge("fabric", d, bandwidth=float(nic_bandwidth), latency=float(nic_latency) / 2, kind="nic")
    return g


def cpu_host_graph(n: int, device_bandwidth: float, bus_bandwidth: float, latency: float) -> nx.DiGraph:
    """Host-CPU devices sharing memory: ``d -> bus_in -> bus_out -> d'``."""
    g = nx.DiGraph(kind="cpu-host")
    for i in range(n):
        g.add_node(i, coord=(i,), chip=True)
    g.add_node("bus_in", chip=False)
    g.add_node("bus_out", chip=False)
    g.add_edge("bus_in", "bus_out", bandwidth=float(bus_bandwidth), latency=0.0, kind="membus")
    for i in range(n):
        g.add_edge(i, "bus_in", bandwidth=float(device_bandwidth), latency=float(latency), kind="memcpy")
        g.add_edge("bus_out", i, bandwidth=float(device_bandwidth), latency=0.0, kind="memcpy")
    return g


def machine_graph(machine) -> nx.DiGraph:
    """A new graph for a sized :class:`models.profiles.HardwareProfile`."""
    m = machine
    if m.kind == "torus":
        nd = sum(1 for d in m.dims if d > 1) or 1
        per = max(1, m.links_per_chip // (2 * max(nd, len(m.dims))))
        return torus_graph(m.dims, m.link_bandwidth_Bps, m.link_latency_s, m.wraparound, per)
    if m.kind == "switched":
        nodes, g = m.dims
        return multinode_graph(nodes, g, m.link_bandwidth_Bps * m.links_per_chip, m.link_latency_s,
                               m.nic_bandwidth_Bps, m.nic_latency_s, m.nics_per_node)
    return cpu_host_graph(m.dims[0], m.link_bandwidth_Bps, m.bus_bandwidth_Bps, m.link_latency_s)


def count_links(g: nx.DiGraph, kind: str | None = None) -> int:
    """Number of directed edges (of ``kind`` if given)."""
    return sum(1 for _, _, k in g.edges(data="kind") if kind is None or k == kind)


# -- routing ------------------------------------------------------------------------------
class Topology:
    """A graph plus dense link ids (edge order), ``bandwidth``/``latency`` arrays
    and cached routes between chips. Routes are tuples of link ids."""

    def __init__(self, graph: nx.DiGraph):
        self.graph = graph
        self.kind = graph.graph.get("kind", "")
        self.links = list(graph.edges())
        self.link_id = {e: i for i, e in enumerate(self.links)}
        self.bandwidth = np.array([graph.edges[e]["bandwidth"] for e in self.links], dtype=float)
        self.latency = np.array([graph.edges[e]["latency"] for e in self.links], dtype=float)
        self.link_key = [(d.get("kind", ""), d.get("dim", -1), d.get("step", 0))
                         for d in (graph.edges[e] for e in self.links)]
        self.num_chips = sum(1 for _, c in graph.nodes(data="chip") if c)
        self._routes: dict = {}
        self._torus = None
        if self.kind == "torus":
            dims = graph.graph["dims"]
            self._torus = (dims, graph.graph["wraparound"],
                           [math.prod(dims[i + 1:]) for i in range(len(dims))])

    def __repr__(self) -> str:
        return f"Topology(kind={self.kind!r}, chips={self.num_chips}, links={len(self.links)})"

    def route(self, a: int, b: int) -> tuple[int, ...]:
        key = (a, b)
        r = self._routes.get(key)
        if r is None:
            r = self._torus_route(a, b) if self._torus else self._path_route(a, b)
            self._routes[key] = r
        return r

    def route_split(self, a: int, b: int) -> tuple[tuple[tuple[int, ...], float], ...]:
        """``((route, share), ...)``: how traffic from ``a`` to ``b`` is spread over routes. On a
        torus, a dimension whose two ways round are equally short (distance ``s/2`` on a wrapped
        ring of even size ``s``) carries half the bytes each way, so a 4-chip ring's 2-hop
        traffic uses both directions (dimension order otherwise, as :meth:`route`); with ``t``
        such dimensions, ``2**t`` routes of ``1/2**t`` each. Elsewhere one route of share 1."""
        if not self._torus:
            return ((self.route(a, b), 1.0),)
        key = ("split", a, b)
        r = self._routes.get(key)
        if r is not None:
            return r
        dims, wrap, strides = self._torus
        ties = [k for k, s in enumerate(dims) if s > 2 and wrap[k] and s % 2 == 0
                and (((b // strides[k]) % s) - ((a // strides[k]) % s)) % s == s // 2]
        if not ties:
            r = ((self.route(a, b), 1.0),)
        else:
            out = []
            for mask in range(1 << len(ties)):
                minus = {k for i, k in enumerate(ties) if mask >> i & 1}
                out.append((self._torus_route(a, b, minus), 1.0 / (1 << len(ties))))
            r = tuple(out)
        self._routes[key] = r
        return r

    def hops(self, a: int, b: int) -> int:
        return len(self.route(a, b))

    def _torus_route(self, a: int, b: int, minus_on_tie=frozenset()) -> tuple[int, ...]:
        dims, wrap, strides = self._torus
        out, cur, lid = [], a, self.link_id
        for k, s in enumerate(dims):
            if s < 2:
                continue
            ca, cb = (cur // strides[k]) % s, (b // strides[k]) % s
            if ca == cb:
                continue
            if wrap[k]:
                fwd = (cb - ca) % s
                plus = fwd < s - fwd or (fwd == s - fwd and k not in minus_on_tie)
                step, n = (1, fwd) if plus else (-1, s - fwd)
            else:
                step, n = (1, cb - ca) if cb > ca else (-1, ca - cb)
            for _ in range(n):
                c = (cur // strides[k]) % s
                nc = (c + step) % s
                nxt = cur + (nc - c) * strides[k]
                out.append(lid[(cur, nxt)])
                cur = nxt
        return tuple(out)

    def _path_route(self, a: int, b: int) -> tuple[int, ...]:
        if a == b:
            return ()
        path = self._switch_path(a, b)
        if path is None:
            path = nx.shortest_path(self.graph, a, b)
        return tuple(self.link_id[(u, v)] for u, v in zip(path[:-1], path[1:]))

    def _switch_path(self, a: int, b: int):
        """The shortest path of the switched builders in closed form (the same path
        ``nx.shortest_path`` returns, without a search over every device: on 65536 host devices
        a breadth-first search per pair takes minutes); ``None`` for other graphs."""
        g = self.graph
        if self.kind == "cpu-host":
            path = [a, "bus_in", "bus_out", b]
        elif self.kind == "multinode":
            gpn = g.graph["gpus_per_node"]
            if a // gpn == b // gpn:
                path = [a, f"nvswitch{a // gpn}", b]
            else:  # out through the GPU's NIC (its own or a shared one), across the fabric
                up = next((v for v in g.successors(a) if not str(v).startswith("nvswitch")), None)
                down = next((u for u in g.predecessors(b) if not str(u).startswith("nvswitch")), None)
                if up is None or down is None:
                    return None
                path = [a] + ([up, "fabric"] if up != "fabric" else ["fabric"]) + \
                    ([down] if down != "fabric" else []) + [b]
        else:
            return None
        if not all(g.has_edge(u, v) for u, v in zip(path[:-1], path[1:])):
            return None
        return path

    def in_bandwidth(self, chip: int) -> float:
        """Total bandwidth into ``chip`` (its reception/injection limit)."""
        return float(sum(d for _, _, d in self.graph.in_edges(chip, data="bandwidth")))

    def out_bandwidth(self, chip: int) -> float:
        return float(sum(d for _, _, d in self.graph.out_edges(chip, data="bandwidth")))

    def link_name(self, i: int) -> str:
        u, v = self.links[i]
        return f"{u}->{v}"


def build_topology(machine) -> Topology:
    return Topology(machine_graph(machine))
