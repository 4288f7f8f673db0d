"""Collective algorithms as NCCL and XLA on TPU run them, expressed as phases of fluid flows.

:func:`plan_op` turns one schedule op into a :class:`CollPlan`: the algorithm (and, on NVIDIA
machines, the NCCL protocol) it runs, a fixed latency, and *phases*; each phase is a set of
concurrent flows over the machine's links plus the latency of its algorithm steps. The analytic
model (:func:`models.analytic.op_time_s`) costs a plan as ``alpha + sum(phase latency) +
max(sum(busiest-link time of each phase), reduction time)``; the simulator replays the same flows
with max-min fair sharing (:mod:`models.flow`), which also captures contention between groups.

Algorithms (``algorithm`` names the one chosen; docs/simulator.md has the derivations):

* **NVIDIA (switched) machines** -- chosen per op and size by a tuner that, like NCCL's, costs
  every algorithm x protocol and keeps the fastest:

  - ``ring``: one ring per group inside a node; across nodes NCCL's *multi-ring*: ``R`` rings
    (``R`` = min(members per node, NICs per node, ``max_net_rings``)), each entering and leaving
    every node through a different GPU and hence a different NIC (rail), each carrying ``1/R``
    of the data. All-gather / reduce-scatter: ``n-1`` steps of ``S/n``; all-reduce ``2(n-1)``.
  - ``tree`` (all-reduce): a chain through each node plus NCCL's two binary trees over the
    nodes (each with half the data, spread over the node's rails); ``2(k-1) + 2 log2(m)`` steps.
  - ``nvls`` (all-reduce inside one NVSwitch domain, profiles with ``nvls_efficiency``): NVLink
    SHARP -- every GPU sends its buffer to the switch, which reduces and multicasts it back.
  - ``nvls_tree`` (all-reduce across nodes): NVLS inside each node plus the inter-node trees.
  - ``sharp`` (all-reduce, profiles with ``sharp: 1``): InfiniBand SHARP -- reduce-scatter in
    the node, in-fabric all-reduce of each GPU's shard through its NIC, all-gather in the node.
  - ``hier_ring`` (only when forced, e.g. ``with_algorithm(all_gather="hier_ring")``): a ring
    inside each node and one ring per local rank across the nodes on ``1/k`` of the data.
  - protocols ``LL`` / ``LL128`` / ``Simple``: their own fixed and per-step latency (profile) and
    the share of the wire left for data (50%, 120/128, 100%). NVLS/SHARP run ``Simple``.
  - bandwidth: line rate x ``link_efficiency`` (NVLink) or ``nic_efficiency`` (NIC) x protocol
    share x the ramp ``S/(S+h)`` (``h = ramp_half_bytes * (n/8)**ramp_ranks_exponent``).

* **TPU tori** -- a group along one torus dimension runs a ``bidir_ring`` when the dimension
  closes (wraparound, whole axis) and a ``line`` otherwise (every block travels both ways along
  the open line); a group spanning several dimensions (a full sub-grid) runs ``multi_axis``:
  ``D`` concurrent sub-collectives, each on ``1/D`` of the data and each walking the dimensions
  in a rotated order, so all dimensions carry traffic at once. Irregular groups fall back to a
  unidirectional ``ring`` in group order.
* **all-to-all** and **permute**: ``direct`` -- one flow per pair, routed by dimension-ordered
  routing on tori and through the switches elsewhere.
* Reductions (reduce-scatter, all-reduce) also cost ``(n-1)/n * S / reduce_bandwidth`` of
  arithmetic, overlapped with the transfers, except where the switch reduces (NVLS, SHARP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from models.flow import bottleneck_time_s

RING_KINDS = ("all_gather", "reduce_scatter", "all_reduce")


@dataclass
class Phase:
    routes: list = field(default_factory=list)     # tuple of link ids per flow
    nbytes: list = field(default_factory=list)     # bytes per flow (per unit of weight)
    weights: list = field(default_factory=list)    # identical sub-flows merged into one
    latency_s: float = 0.0                         # latency of the algorithm steps in this phase

    def add(self, route, nbytes, weight=1.0):
        if nbytes > 0 and len(route):
            self.routes.append(tuple(route))
            self.nbytes.append(float(nbytes))
            self.weights.append(float(weight))


@dataclass
class CollPlan:
    algorithm: str
    protocol: str | None
    alpha_s: float
    phases: list
    capacity: np.ndarray          # bytes/s per link for this op (line rate x efficiency x ...)
    reduce_s: float = 0.0
    size_bytes: float = 0.0       # nccl-tests "size" of one group

    @property
    def label(self) -> str:
        return self.algorithm if not self.protocol else f"{self.algorithm}/{self.protocol}"

    def latency_s(self) -> float:
        return self.alpha_s + sum(p.latency_s for p in self.phases)

    def analytic_s(self) -> float:
        xfer = sum(bottleneck_time_s(p.routes, p.nbytes, p.weights, self.capacity) for p in self.phases)
        return self.latency_s() + max(xfer, self.reduce_s)

    def num_flows(self) -> int:
        return sum(len(p.routes) for p in self.phases)


def size_bytes(op) -> float:
    """nccl-tests' "size" of one group: the all-gather output, the reduce-scatter input, the
    all-reduce buffer, the per-rank all-to-all buffer."""
    if op.kind == "all_gather":
        return float(op.out_bytes)
    return float(op.in_bytes)


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests busbw = algbw * factor."""
    if n < 2:
        return 0.0
    return 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n


# -- link capacities -----------------------------------------------------------------------------
def _kind_params(machine, topo, kind):
    kp = machine.kind_params(kind)
    bw = topo.bandwidth if kp.bandwidth_Bps is None else np.full(len(topo.links), kp.bandwidth_Bps)
    lat = topo.latency if kp.latency_s is None else np.full(len(topo.links), kp.latency_s)
    return bw, lat, kp.bandwidth_Bps is not None


def _link_kinds(topo):
    k = getattr(topo, "_link_kinds", None)
    if k is None:
        k = np.array([lk[0] for lk in topo.link_key])
        topo._link_kinds = k
    return k


def capacity(machine, topo, kind, proto_frac=1.0, ramp=1.0, nvls=False, ranks=None) -> np.ndarray:
    """Bytes/s each link delivers to this op: line rate x achieved fraction of its class x
    protocol share x ramp. The fraction: ``nvls_efficiency`` for NVLink under NVLS; for an
    all-to-all ``a2a_efficiency`` (when the profile gives one); otherwise
    ``machine.group_link_efficiency(ranks)`` for NVLink/ICI (``link_efficiency``, lower for
    2- and 4-rank groups where the profile says so); ``nic_efficiency`` for NICs. A per-kind
    ``bandwidth_Bps`` override (a fitted calibration) replaces the line rate and is taken as
    achieved."""
    bw, _lat, overridden = _kind_params(machine, topo, kind)
    if overridden:
        return bw * proto_frac * ramp
    kinds = _link_kinds(topo)
    eff = np.ones(len(bw))
    if nvls:
        link_eff = machine.nvls_efficiency
    elif kind == "all_to_all" and machine.a2a_efficiency > 0:
        link_eff = machine.group_a2a_efficiency(ranks)
    else:
        link_eff = machine.group_link_efficiency(ranks) if ranks else machine.link_efficiency
    eff[(kinds == "nvlink") | (kinds == "ici")] = link_eff
    eff[kinds == "nic"] = machine.nic_efficiency
    return bw * eff * proto_frac * ramp


def a2a_ramp(machine, op) -> float:
    """The bandwidth ramp of an all-to-all: 1 unless the profile sets ``a2a_ramps`` (NCCL sends
    an all-to-all as chunked Simple-protocol sends, which climb to their rate like a ring). ``S``
    is the per-rank buffer; the half size is the 8-rank one whatever the group (XLA's H100
    table: 2-rank all-to-alls climb no faster than 8-rank ones -- 32 MiB reaches 48% / 62% of
    the 1 GiB rate -- while 2-rank rings do; with the group's own size the fit is 16.7% MAPE
    against 14.4%)."""
    if op.kind != "all_to_all" or not machine.a2a_ramps or not op.groups:
        return 1.0
    return machine.ramp(float(op.in_bytes), 8)


# -- helpers ---------------------------------------------------------------------------------------
def _route(topo, a, b):
    return topo.route(a, b)


def _route_latency(lat, route) -> float:
    return float(sum(lat[lk] for lk in route))


def _protocols(machine, algo, kind, multi_node=False):
    """(name, bandwidth share, fixed latency, step latency, ramps?) per protocol to try.

    Shares follow NCCL's tuner (src/graph/tuning.cc, ``ncclTopoTuneModel``): a ring's LL bus
    bandwidth is 1/3 of the Simple one inside a node for all-gather / reduce-scatter and 1/4 for
    all-reduce or across nodes (LL moves 8-byte lines of 4 data + 4 flag bytes and runs fewer
    threads), capped at ``ll_max_bandwidth_Bps`` per GPU; LL128 keeps 120 of every 128 bytes;
    Simple all of them. LL does not ramp (its cost is latency); LL128 and Simple pipeline large
    chunks and follow the profile's bandwidth ramp."""
    if not machine.has_protocols:
        return [(None, 1.0, machine.alpha_s(kind), None, True)]
    from models.profiles import PROTOCOLS

    names = ["Simple"] if algo in ("nvls", "nvls_tree", "sharp") else ["LL", "LL128", "Simple"]
    out = []
    gpu_bw = machine.link_bandwidth_Bps * machine.links_per_chip * machine.link_efficiency
    if not machine.ll128:
        # NCCL enables LL128 by default only on the GPUs its tuner lists (tuning.cc: compute
        # capability 7.0-9.0 in the version whose MNNVL rules gb200-nvl72 follows)
        names = [p for p in names if p != "LL128"]
    for p in names:
        base, hop = machine.protocol_latency_s(p)
        if p == "Simple" and algo == "tree" and machine.tree_simple_hop_latency_s > 0:
            hop = machine.tree_simple_hop_latency_s   # tuning.cc hwLat[NVLINK][Tree][Simple]
        frac = PROTOCOLS[p]
        if p == "LL":
            frac = 0.25 if (multi_node or kind == "all_reduce") else 1.0 / 3.0
            if machine.ll_max_bandwidth_Bps > 0:
                frac = min(frac, machine.ll_max_bandwidth_Bps / gpu_bw)
        out.append((p, frac, base, hop, p != "LL"))
    return out


# -- switched (NVIDIA) machines ----------------------------------------------------------------------
def _nodes_of(machine, chips, group):
    g = machine.dims[1]
    by: dict = {}
    for d in group:
        by.setdefault(chips[d] // g, []).append(d)
    return by


def _ring_flows(phase, topo, chips, order, nbytes_pair, weight=1.0):
    n = len(order)
    for i in range(n):
        a, b = chips[order[i]], chips[order[(i + 1) % n]]
        phase.add(_route(topo, a, b), nbytes_pair, weight)


def _switched_ring(op, machine, topo, chips, group, by_node, S, proto):
    """Multi-ring over the nodes of one group (a single ring inside one node)."""
    n = len(group)
    kind = op.kind
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    nodes = list(by_node.values())
    k = min(len(v) for v in nodes)
    multi = len(nodes) > 1
    ph = Phase()
    if not multi:
        _ring_flows(ph, topo, chips, list(group), steps * S / n)
        return ph, steps, 1, False
    R = max(1, min(k, machine.nics or k, machine.max_net_rings or k))
    merged: dict = {}
    for r in range(R):
        off = (r * k) // R
        order = [m for v in nodes for m in (v[off:] + v[:off])]
        for i in range(n):
            a, b = chips[order[i]], chips[order[(i + 1) % n]]
            key = (a, b)
            merged[key] = merged.get(key, 0.0) + steps * S / (n * R)
    for (a, b), nb in merged.items():
        ph.add(_route(topo, a, b), nb)
    return ph, steps, R, True


def _tree_flows(ph, topo, chips, nodes, per_tree_bytes, R):
    """NCCL's two binary trees over the nodes (mirrored), each edge spread over ``R`` rails, up
    (reduce) and down (broadcast)."""
    m = len(nodes)
    for t in range(2):
        for c in range(1, m):
            p = (c - 1) // 2
            cc, pp = (c, p) if t == 0 else (m - 1 - c, m - 1 - p)
            for r in range(R):   # rail r: a GPU on a different NIC of each node
                a = chips[nodes[cc][(r * len(nodes[cc])) // R]]
                b = chips[nodes[pp][(r * len(nodes[pp])) // R]]
                ph.add(_route(topo, a, b), per_tree_bytes / R)
                ph.add(_route(topo, b, a), per_tree_bytes / R)


def _switch_link(topo, chip, up: bool):
    """The GPU <-> NVSwitch link of ``chip`` (up: to the switch)."""
    g = topo.graph
    for u, v, d in (g.out_edges(chip, data=True) if up else g.in_edges(chip, data=True)):
        if d.get("kind") == "nvlink":
            return topo.link_id[(u, v)]
    return None


def _switched_flows(op, machine, topo, chips, algo, S, k):
    """(phase with the algorithm's flows, steps inside a node, steps crossing the network,
    rails) for all groups of ``op``; latency is filled in per protocol by the caller."""
    kind = op.kind
    ph = Phase()
    by0 = _nodes_of(machine, chips, op.groups[0])
    m = len(by0)
    depth = math.ceil(math.log2(m)) if m > 1 else 0
    R = max(1, min(k, machine.nics or k, machine.max_net_rings or k))
    if algo == "ring":
        steps = 0
        for g in op.groups:
            p1, steps, R, multi = _switched_ring(op, machine, topo, chips, g, _nodes_of(machine, chips, g), S, None)
            ph.routes += p1.routes
            ph.nbytes += p1.nbytes
            ph.weights += p1.weights
        return (ph, steps, 0, R) if m == 1 else (ph, 0, steps, R)
    if algo == "tree":
        for g in op.groups:
            nodes = list(_nodes_of(machine, chips, g).values())
            for v in nodes:  # chain through the node: reduce up, broadcast down
                for i in range(len(v) - 1):
                    ph.add(_route(topo, chips[v[i]], chips[v[i + 1]]), S)
                    ph.add(_route(topo, chips[v[i + 1]], chips[v[i]]), S)
            if len(nodes) > 1:
                _tree_flows(ph, topo, chips, nodes, S / 2, R)
        return ph, 2 * (k - 1), 2 * depth, R
    if algo in ("nvls", "nvls_tree"):
        for g in op.groups:
            nodes = list(_nodes_of(machine, chips, g).values())
            for d in g:
                up, down = _switch_link(topo, chips[d], True), _switch_link(topo, chips[d], False)
                if up is not None:
                    ph.add((up,), S)
                    ph.add((down,), S)
            if len(nodes) > 1:
                _tree_flows(ph, topo, chips, nodes, S / 2, R)
        return ph, 2, 2 * depth, R
    if algo == "hier_ring":
        # hierarchical: the node's part in a ring inside each node, the network part as one
        # ring per local rank across the nodes (each on 1/k of the data), run concurrently
        steps_node = 2 * (k - 1) if kind == "all_reduce" else k - 1
        steps_net = 2 * (m - 1) if kind == "all_reduce" else m - 1
        for g in op.groups:
            nodes = list(_nodes_of(machine, chips, g).values())
            for v in nodes:
                _ring_flows(ph, topo, chips, v, steps_node * S / k)   # blocks of S/k (all-gather: m*S/n)
            for r in range(k):
                _ring_flows(ph, topo, chips, [v[r] for v in nodes], steps_net * S / (k * m))
        return ph, steps_node, steps_net, k
    if algo == "sharp":
        for g in op.groups:
            for v in _nodes_of(machine, chips, g).values():
                _ring_flows(ph, topo, chips, v, 2 * (len(v) - 1) * S / len(v))
                for d in v:  # each GPU's shard through its NIC into the fabric and back
                    r = _route(topo, chips[d], chips[(v[0] + k) % machine.num_devices])
                    ph.add(r, S / len(v))
        return ph, 2 * (k - 1), 2, R
    return None


def _plan_switched(op, machine, topo, chips, forced):
    """Candidates for every group (all groups of an op are the same shape) -> best plan."""
    group0 = op.groups[0]
    n = len(group0)
    S = size_bytes(op)
    by0 = _nodes_of(machine, chips, group0)
    m = len(by0)
    k = min(len(v) for v in by0.values())
    uniform = len({len(v) for v in by0.values()}) == 1
    kind = op.kind
    cands = ["ring"]
    if m > 1 and forced == "hier_ring":
        # not a tuner candidate: NCCL's own hierarchy is the tree / NVLS tree, and the
        # published large-scale runs are slower than a hierarchical ring would be
        cands.append("hier_ring")
    if kind == "all_reduce":
        cands.append("tree")
        # NCCL disables NVLS tree when the NVLink domain is multi-node (tuning.cc: "MNNVL: NVLS
        # not yet supported"): GB200 NVL72 racks joined by InfiniBand run ring or tree across racks
        if machine.nvls_efficiency > 0 and n >= 2 and (m == 1 or not machine.mnnvl):
            cands.append("nvls" if m == 1 else "nvls_tree")
        if machine.sharp and m > 1:
            cands.append("sharp")
    if forced and forced != "auto":
        cands = [c for c in cands if c == forced] or ["ring"]
    if not uniform:
        cands = ["ring"]
    bw_line, lat, _ = _kind_params(machine, topo, kind)
    nic_lat = machine.nic_latency_s if m > 1 else 0.0
    depth = math.ceil(math.log2(m)) if m > 1 else 0
    best = None
    for algo in cands:
        # ranks a chunk is pipelined through: the ring, or a node's chain/NVLS plus the tree
        pipe = n if algo == "ring" else (k + m if algo == "hier_ring" else k + 2 * depth)
        rho = 1.0
        if algo == "ring" and m > 1:
            # a NIC-bound multi-ring fills its pipeline at the NICs' pace: the half-bandwidth
            # size shrinks with the ratio of its network rate to the NVLink rate per GPU
            R = max(1, min(k, machine.nics or k, machine.max_net_rings or k))
            net = R * machine.nic_bandwidth_Bps * machine.nic_efficiency / k
            node = machine.link_bandwidth_Bps * machine.links_per_chip * machine.link_efficiency
            rho = min(1.0, net / node) if node > 0 else 1.0
        flows = _switched_flows(op, machine, topo, chips, algo, S, k)
        if flows is None:
            continue
        ph, steps_in, steps_net, R = flows
        name = f"ring x{R} rails" if algo == "ring" and m > 1 else algo
        gpu_reduces = algo not in ("nvls", "nvls_tree", "sharp")   # else the switch / fabric reduces
        cap0 = capacity(machine, topo, kind, 1.0, 1.0, nvls=algo in ("nvls", "nvls_tree"), ranks=n)
        xfer0 = bottleneck_time_s(ph.routes, ph.nbytes, ph.weights, cap0)
        if algo == "nvls_tree":
            # NCCL caps an NVLS tree's bus bandwidth per channel (tuning.cc perChMaxNVLSTreeBws,
            # lower from 4 nodes on); the cap binds at the NICs, where the inter-node tree's
            # chunks wait. e.g. H100, 4 nodes, 8 GiB: the flows alone give busbw ~490 GB/s,
            # the cap 364 (measured 310-350). Links are slowed uniformly so the replay agrees.
            cap_bus = machine.nvls_tree_busbw_2node_Bps if m == 2 else machine.nvls_tree_busbw_Bps
            floor = bus_factor(kind, n) * S / cap_bus if cap_bus > 0 else 0.0
            if xfer0 < floor:
                cap0 = cap0 * (xfer0 / floor)
                xfer0 = floor
        for proto, frac, base, hop, ramps in _protocols(machine, algo, kind, multi_node=m > 1):
            ramp = machine.ramp(S / rho, pipe) if ramps else 1.0
            # the reduction kernel runs in the pipeline's chunks: it climbs to its rate with them
            reduce_s = machine.reduce_time_s(kind, S, n, ramp) if gpu_reduces else 0.0
            if hop is None:
                hop_in = _step_latency(topo, lat, chips, group0) if algo == "ring" else machine.link_latency_s
                lat_s = (steps_in + steps_net) * hop_in
            else:
                lat_s = steps_in * hop + steps_net * (hop + nic_lat)
            if algo in ("nvls", "nvls_tree") and machine.nvls_latency_s > 0:
                # NCCL's tuner: NVLS costs hwLat[NVLINK][NVLS] in the node, whole (no base, no
                # per-step term), plus the tree's network steps for NVLS tree
                base, lat_s = machine.nvls_latency_s, steps_net * (hop + nic_lat)
            t = base + lat_s + max(xfer0 / (frac * ramp), reduce_s)
            if best is None or t < best[0]:
                phase = Phase(ph.routes, ph.nbytes, ph.weights, lat_s)
                best = (t, CollPlan(name, proto, base, [phase], cap0 * frac * ramp, reduce_s, S))
    return best[1]


def _step_latency(topo, lat, chips, group):
    n = len(group)
    return max(_route_latency(lat, _route(topo, chips[group[i]], chips[group[(i + 1) % n]])) for i in range(n))


# -- tori ------------------------------------------------------------------------------------------
def _torus_shape(machine, chips, group):
    """(varying dims, sizes, full) of a group of chips, or None if it is not a full sub-grid."""
    dims = machine.dims
    coords = np.array(np.unravel_index(np.asarray([chips[d] for d in group]), dims)).T
    vary = [k for k in range(len(dims)) if len(np.unique(coords[:, k])) > 1]
    sizes = [len(np.unique(coords[:, k])) for k in vary]
    if math.prod(sizes) != len(group):
        return None
    for k, s in zip(vary, sizes):
        vals = np.unique(coords[:, k])
        if vals[-1] - vals[0] + 1 != s:   # not contiguous
            return None
    return vary, coords


def _line_flows(ph, topo, chips_line, block, kind, wrap_full, mult=1):
    """Flows of one collective along one torus line (chips in coordinate order).

    ``wrap_full``: the line is a whole closed ring -> bidirectional ring; otherwise the open
    line: every block crosses each link towards every member beyond it."""
    n = len(chips_line)
    if n < 2:
        return 0
    if wrap_full and n > 2:
        if kind == "all_gather":
            fwd, bwd = (n - 1 + 1) // 2, (n - 1) // 2
            for i in range(n):
                ph.add(_route(topo, chips_line[i], chips_line[(i + 1) % n]), fwd * block * mult)
                if bwd:
                    ph.add(_route(topo, chips_line[i], chips_line[(i - 1) % n]), bwd * block * mult)
            return fwd
        # reduce-scatter of an input of n*block: n-1 steps of block/2 each way
        for i in range(n):
            ph.add(_route(topo, chips_line[i], chips_line[(i + 1) % n]), (n - 1) * block / 2 * mult)
            ph.add(_route(topo, chips_line[i], chips_line[(i - 1) % n]), (n - 1) * block / 2 * mult)
        return n - 1
    for i in range(n - 1):
        a, b = chips_line[i], chips_line[i + 1]
        if kind == "all_gather":
            ph.add(_route(topo, a, b), (i + 1) * block * mult)
            ph.add(_route(topo, b, a), (n - 1 - i) * block * mult)
        else:  # reduce-scatter: partial sums flow towards their owners
            ph.add(_route(topo, a, b), (n - 1 - i) * block * mult)
            ph.add(_route(topo, b, a), (i + 1) * block * mult)
    return n - 1


def _plan_torus(op, machine, topo, chips, forced):
    kind = op.kind
    S = size_bytes(op)
    bw, lat, _ = _kind_params(machine, topo, kind)
    hop = float(np.median(lat)) if len(lat) else 0.0
    group0 = op.groups[0]
    n = len(group0)
    shape = _torus_shape(machine, chips, group0) if forced in (None, "auto", "bidir_ring") else None
    if shape is not None:
        # every group must be the same kind of sub-grid (a shuffled placement may break that)
        want = (shape[0], [len(np.unique(shape[1][:, k])) for k in shape[0]])
        for g in op.groups[1:]:
            sh = _torus_shape(machine, chips, g)
            if sh is None or (sh[0], [len(np.unique(sh[1][:, k])) for k in sh[0]]) != want:
                shape = None
                break
    reduce_s = machine.reduce_time_s(kind, S, n)
    cap = capacity(machine, topo, kind, 1.0, machine.ramp(S, n), ranks=n)
    if shape is None or not shape[0]:
        ph = Phase()
        steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
        for g in op.groups:
            _ring_flows(ph, topo, chips, list(g), steps * S / n)
        ph.latency_s = steps * _step_latency(topo, lat, chips, group0)
        return CollPlan("ring", None, machine.alpha_s(kind), [ph], cap, reduce_s, S)
    vary, _ = shape
    dims = machine.dims
    names = [machine.dim_names[k] for k in vary]

    def lines_along(g, k):
        """The lines of group ``g`` along physical dim ``k`` (chips in coordinate order)."""
        cs = np.array([chips[d] for d in g])
        co = np.array(np.unravel_index(cs, dims)).T
        other = [j for j in range(len(dims)) if j != k]
        keyv = co[:, other]
        out: dict = {}
        for row, c, cc in zip(map(tuple, keyv), cs, co[:, k]):
            out.setdefault(row, []).append((cc, c))
        return [[c for _cc, c in sorted(v)] for v in out.values()]

    D = len(vary)
    sizes = {k: None for k in vary}
    gl = {}
    for g in op.groups:
        for k in vary:
            gl.setdefault(k, []).extend(lines_along(g, k))
    for k in vary:
        sizes[k] = len(gl[k][0])
    wrapfull = {k: machine.wraparound[k] and sizes[k] == dims[k] for k in vary}

    def one_kind(sub_kind, in_per_sub):
        """Phases of a D-way multi-axis all-gather or reduce-scatter (per sub: 1/D of data)."""
        phases = []
        for t in range(D):
            ph = Phase()
            steps_max = 0
            for j in range(D):
                k = vary[(j + t) % D] if sub_kind == "all_gather" else vary[(j - t) % D]
                if sub_kind == "all_gather":
                    done = math.prod(sizes[vary[(j + u) % D]] for u in range(t))
                    block = in_per_sub * done
                else:
                    done = math.prod(sizes[vary[(j - u) % D]] for u in range(t))
                    block = in_per_sub / (done * sizes[k])
                for line in gl[k]:
                    st = _line_flows(ph, topo, line, block, sub_kind, wrapfull[k])
                    steps_max = max(steps_max, st)
            ph.latency_s = steps_max * hop
            phases.append(ph)
        return phases

    if kind == "all_gather":
        phases = one_kind("all_gather", op.in_bytes / D)
    elif kind == "reduce_scatter":
        phases = one_kind("reduce_scatter", op.in_bytes / D)
    else:
        phases = one_kind("reduce_scatter", op.in_bytes / D) + one_kind("all_gather", op.in_bytes / (n * D))
    if D == 1:
        k = vary[0]
        name = f"bidir_ring({names[0]})" if wrapfull[k] and sizes[k] > 2 else f"line({names[0]})"
    else:
        name = f"multi_axis({','.join(names)})"
    return CollPlan(name, None, machine.alpha_s(kind), phases, cap, reduce_s, S)


# -- direct ops and generic rings --------------------------------------------------------------------
def _plan_direct(op, machine, topo, chips):
    kind = op.kind
    bw, lat, _ = _kind_params(machine, topo, kind)
    ph = Phase()
    lat_max = 0.0
    split = topo.route_split          # ties on a wrapped ring: half the bytes each way round
    if kind == "permute":
        for a, b in op.pairs:
            if a != b and op.send_bytes > 0:
                for r, share in split(chips[a], chips[b]):
                    ph.add(r, op.send_bytes * share)
                    lat_max = max(lat_max, _route_latency(lat, r))
        size = float(op.send_bytes)
        n = 2
    else:
        for g in op.groups:
            n = len(g)
            if n < 2:
                continue
            per = op.send_bytes / (n - 1)
            for i in range(n):
                for j in range(1, n):
                    for r, share in split(chips[g[i]], chips[g[(i + j) % n]]):
                        ph.add(r, per * share)
                        lat_max = max(lat_max, _route_latency(lat, r))
        size = float(op.in_bytes)
        n = len(op.groups[0]) if op.groups else 1
    if machine.has_protocols and machine.kind == "switched":
        alpha, hopl = machine.protocol_latency_s("Simple")
        if kind == "all_to_all":
            alpha = max(alpha, machine.a2a_latency_s)
        ph.latency_s = hopl + lat_max
    else:
        alpha = machine.alpha_s(kind)
        ph.latency_s = lat_max
    # permutes run at the achieved link rate; an all-to-all ramps where the profile says so
    # (a2a_ramps: NCCL's chunked sends, measured in XLA's collective table) and has its own
    # efficiency (a2a_efficiency)
    cap = capacity(machine, topo, kind, 1.0, a2a_ramp(machine, op),
                   ranks=n if kind == "all_to_all" else None)
    return CollPlan("direct", None, alpha, [ph] if ph.routes else [], cap, 0.0, size)


def _plan_cpu_ring(op, machine, topo, chips):
    kind = op.kind
    S = size_bytes(op)
    bw, lat, _ = _kind_params(machine, topo, kind)
    group0 = op.groups[0]
    n = len(group0)
    ph = Phase()
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    for g in op.groups:
        _ring_flows(ph, topo, chips, list(g), steps * S / n)
    ph.latency_s = steps * _step_latency(topo, lat, chips, group0)
    reduce_s = 0.0
    return CollPlan("ring", None, machine.alpha_s(kind), [ph], capacity(machine, topo, kind), reduce_s, S)


def plan_op(op, machine, chips=None) -> CollPlan | None:
    """The algorithm, latency and flows of one schedule op on ``machine`` with ``chips[d]``
    the chip of mesh device ``d`` (``None`` for local ops and ops that move nothing)."""
    if op.is_local:
        return None
    topo = machine.topology
    chips = list(chips) if chips is not None else list(range(machine.num_devices))
    if op.kind in ("all_to_all", "permute"):
        return _plan_direct(op, machine, topo, chips)
    groups = [g for g in op.groups if len(g) > 1]
    if not groups or size_bytes(op) <= 0:
        return CollPlan("none", None, machine.alpha_s(op.kind), [], topo.bandwidth, 0.0, 0.0)
    if len(groups) != len(op.groups):
        from dataclasses import replace

        op = replace(op, groups=tuple(groups))
    forced = machine.algorithm(op.kind)
    if forced == "auto":
        forced = None
    if machine.kind == "switched":
        return _plan_switched(op, machine, topo, chips, forced)
    if machine.kind == "torus":
        if forced == "ring":
            return _plan_torus(op, machine, topo, chips, "ring")
        return _plan_torus(op, machine, topo, chips, forced)
    return _plan_cpu_ring(op, machine, topo, chips)


# -- the size of a replay, before it is built ----------------------------------------------------
#: the flow engine refuses a schedule whose flows cross more than this many links in all (flows x
#: hops of their routes, summed over ops). Building, routing and replaying a flow costs a few
#: microseconds per link it crosses: 10 million link crossings are about 10-30 s on a 2-core machine
#: (a flat all-to-all over 1024 chips of a 8x8x16 torus is 1M flows x 8 hops, about 20 s)
MAX_ROUTE_LINKS = 10_000_000


def mean_hops(machine) -> float:
    """Hops of the route between two chips picked at random: on a torus the sum over its
    dimensions of the mean distance round the ring (``s/4`` with wraparound, ``(s^2-1)/(3s)``
    on a line); 2 inside a switched node and 2 to 4 across nodes; 3 on a CPU host."""
    if machine.kind == "torus":
        wrap = machine.wraparound
        wrap = tuple(wrap) if isinstance(wrap, (tuple, list)) else (bool(wrap),) * len(machine.dims)
        total = 0.0
        for s, w in zip(machine.dims, wrap):
            if s > 1:
                total += (s * s // 4) / s if w else (s * s - 1) / (3 * s)
        return max(total, 1.0)
    if machine.kind == "switched":
        return 4.0 if machine.dims[0] > 1 else 2.0
    return 3.0


def estimated_route_links(op, machine) -> float:
    """Links the flows of ``op`` cross in all, before routing them: an all-to-all is one flow per
    ordered pair of a group, a permute one per pair; collectives with a ring, tree or switch
    algorithm about four flows per member (their phases), each of about :func:`mean_hops` links."""
    if op.is_local:
        return 0.0
    if op.kind == "permute":
        flows = sum(1 for a, b in op.pairs if a != b)
    elif op.kind == "all_to_all":
        flows = sum(len(g) * (len(g) - 1) for g in op.groups)
    else:
        flows = 4 * sum(len(g) for g in op.groups if len(g) > 1)
    return flows * mean_hops(machine)


#: an all-to-all whose flows would cross more links than this is not replayed flow by flow: the
#: simulator and the analytic model take its per-link loads in aggregate
#: (:func:`direct_all_to_all_loads`; exact loads, the busiest link's time stands for the max-min
#: replay, see docs/simulator.md "Aggregated all-to-all")
AGGREGATE_ROUTE_LINKS = 2_000_000
#: ... up to this many (source, destination) pairs on a torus (array work, about 4 s per 10M pairs
#: on a 2-core machine); above it the op is refused like any other too-large replay
MAX_AGGREGATE_PAIRS = 20_000_000


def aggregated(op, machine) -> bool:
    """Whether the simulator and :func:`models.analytic.op_time_s` cost ``op`` from aggregate
    per-link loads instead of routing its flows: an all-to-all above :data:`AGGREGATE_ROUTE_LINKS`
    estimated flow-hops on a switched machine, a CPU host, or a torus whose links share one
    latency, with at most :data:`MAX_AGGREGATE_PAIRS` pairs on a torus."""
    if op.kind != "all_to_all" or estimated_route_links(op, machine) <= AGGREGATE_ROUTE_LINKS:
        return False
    if machine.kind in ("switched", "cpu-host"):
        return True
    if machine.kind != "torus":
        return False
    pairs = sum(len(g) * (len(g) - 1) for g in op.groups)
    if pairs > MAX_AGGREGATE_PAIRS:
        return False
    topo = machine.topology
    _bw, lat, _ = _kind_params(machine, topo, "all_to_all")
    return topo._torus is not None and (not len(lat) or float(np.ptp(lat)) <= 1e-15 * float(np.max(lat)))


def check_replay_size(schedule, machine, limit: float = MAX_ROUTE_LINKS) -> float:
    """The estimated link crossings of replaying ``schedule`` (:func:`estimated_route_links`; ops
    the simulator takes in aggregate, :func:`aggregated`, count 0); raises
    :class:`models.errors.SimulationError` (a RedistributionError) above ``limit``."""
    from models.errors import SimulationError

    total, worst = 0.0, (0.0, None)
    for k, op in enumerate(schedule.ops):
        w = 0.0 if aggregated(op, machine) else estimated_route_links(op, machine)
        total += w
        worst = max(worst, (w, k), key=lambda x: x[0])
    if total > limit:
        op = schedule.ops[worst[1]]
        n = max((len(g) for g in op.groups), default=0) if op.groups else len(op.pairs)
        raise SimulationError(
            f"simulate: replaying this schedule on {machine.spec} means routing about {total:.3g} flow-hops "
            f"(op {worst[1]}, {op.kind} over {n} devices, alone {worst[0]:.3g}), above the simulator's limit "
            f"of {limit:.0e} (minutes of wall time); simulate a smaller machine (fewer devices), or a plan "
            f"whose collectives span fewer devices per group")
    return total


def direct_all_to_all_s(op, machine, chips=None) -> float | None:
    """:func:`plan_op`'s analytic time of an all-to-all without routing its flows one by one
    (:func:`direct_all_to_all_loads`): ``alpha + latency + busiest link's bytes / capacity``.
    ``None`` where the aggregate is not available."""
    agg = direct_all_to_all_loads(op, machine, chips)
    if agg is None:
        return None
    return agg["alpha_s"] + agg["latency_s"] + agg["xfer_s"]


def direct_all_to_all_loads(op, machine, chips=None) -> dict | None:
    """Per-link bytes of :func:`plan_op`'s direct all-to-all, without routing its flows one by one.

    Tori: :func:`torus_all_to_all_loads` (dimension-ordered routes as difference arrays per ring).
    Switched machines and CPU hosts: every route is the sender's half (up to its node's
    switch, or out through its NIC to the fabric; on a host, into the bus) then the receiver's
    half, so a link's load is the per-flow bytes times the number of partners on the other side,
    counted per node in ``O(n)``. The latency is the largest up half plus the largest down half
    (exact when links of one class have one latency, as in every built-in profile).

    Returns ``{"load": bytes per link, "capacity", "alpha_s", "latency_s", "xfer_s", "flows"}``
    (``xfer_s`` = busiest link's bytes / capacity) or ``None`` for other kinds."""
    if op.kind != "all_to_all":
        return None
    if machine.kind == "torus":
        return torus_all_to_all_loads(op, machine, chips)
    if machine.kind not in ("switched", "cpu-host"):
        return None
    topo = machine.topology
    chips = np.asarray(list(chips) if chips is not None else range(machine.num_devices), dtype=np.int64)
    g = topo.graph
    lid = topo.link_id
    P = topo.num_chips
    gpn = g.graph.get("gpus_per_node", P) if topo.kind == "multinode" else P
    # per chip: intra-node half-routes (one link each) and inter-node half-routes (up to two links)
    up_in, dn_in = np.full(P, -1), np.full(P, -1)
    up_x, dn_x = np.full((P, 3), -1), np.full((P, 3), -1)
    for c in range(P):
        if topo.kind == "cpu-host":
            up_x[c, :2] = (lid[(c, "bus_in")], lid[("bus_in", "bus_out")])
            dn_x[c, 0] = lid[("bus_out", c)]
            continue
        if topo.kind != "multinode":
            return None
        sw = f"nvswitch{c // gpn}"
        up_in[c], dn_in[c] = lid[(c, sw)], lid[(sw, c)]
        if "fabric" in g:
            up = next(v for v in g.successors(c) if not str(v).startswith("nvswitch"))
            down = next(u for u in g.predecessors(c) if not str(u).startswith("nvswitch"))
            up_x[c, :2] = (lid[(c, up)], lid[(up, "fabric")]) if up != "fabric" else (lid[(c, "fabric")], -1)
            dn_x[c, :2] = (lid[("fabric", down)], lid[(down, c)]) if down != "fabric" else (lid[("fabric", c)], -1)
    nl = len(topo.links)
    load = np.zeros(nl + 1)                        # slot nl collects the -1 (no link) entries
    _bw, lat, _ = _kind_params(machine, topo, "all_to_all")
    lat1 = np.append(lat, 0.0)
    lat_up = lat_dn = 0.0
    per = op.send_bytes
    for grp in op.groups:
        n = len(grp)
        if n < 2:
            continue
        c = chips[list(grp)]
        node = c // gpn if topo.kind == "multinode" else np.zeros(n, dtype=np.int64)
        _u, inv, cnt = np.unique(node, return_inverse=True, return_counts=True)
        k_in = (cnt[inv] - 1).astype(float) if topo.kind == "multinode" else np.zeros(n)
        k_x = (n - 1) - k_in
        per_flow = per / (n - 1)
        if topo.kind == "multinode":
            for arr in (up_in, dn_in):
                np.add.at(load, np.where(arr[c] >= 0, arr[c], nl), per_flow * k_in)
            has = k_in > 0
            if has.any():
                lat_up = max(lat_up, float(lat1[np.where(up_in[c] >= 0, up_in[c], nl)][has].max()) +
                             float(lat1[np.where(dn_in[c] >= 0, dn_in[c], nl)][has].max()))
        for arr in (up_x, dn_x):
            ids = np.where(arr[c] >= 0, arr[c], nl)
            np.add.at(load, ids.ravel(), np.repeat(per_flow * k_x, ids.shape[1]))
        has = k_x > 0
        if has.any():
            lu = lat1[np.where(up_x[c] >= 0, up_x[c], nl)].sum(axis=1)
            ld = lat1[np.where(dn_x[c] >= 0, dn_x[c], nl)].sum(axis=1)
            lat_dn = max(lat_dn, float(lu[has].max() + ld[has].max()))
    lat_max = max(lat_up, lat_dn)
    if machine.has_protocols and machine.kind == "switched":
        alpha, hopl = machine.protocol_latency_s("Simple")
        alpha = max(alpha, machine.a2a_latency_s)
        latency = hopl + lat_max
    else:
        alpha, latency = machine.alpha_s("all_to_all"), lat_max
    flows = sum(len(g) * (len(g) - 1) for g in op.groups if len(g) > 1) if per > 0 else 0
    return _aggregate(machine, topo, load[:nl], alpha, latency, flows, a2a_ramp(machine, op),
                      ranks=len(op.groups[0]) if op.groups else None)


def _aggregate(machine, topo, load, alpha, latency, flows, ramp=1.0, ranks=None) -> dict:
    cap = capacity(machine, topo, "all_to_all", 1.0, ramp, ranks=ranks)
    used = load > 0
    xfer = float((load[used] / cap[used]).max()) if used.any() else 0.0
    if not used.any():      # nothing moves: plan_op has no phase, only the launch cost
        latency, flows = 0.0, 0
    return {"load": load, "capacity": cap, "alpha_s": float(alpha), "latency_s": float(latency),
            "xfer_s": xfer, "flows": int(flows)}


#: pairs routed per numpy batch by :func:`torus_all_to_all_loads` (bounds its memory: ~100 MB)
TORUS_BATCH_PAIRS = 2_000_000


def _torus_link_table(topo):
    """``table[chip, dim, 0 | 1]``: the link leaving ``chip`` one step ``+`` / ``-`` along ``dim``
    (the same edge :meth:`Topology._torus_route` takes), ``-1`` where there is none."""
    t = getattr(topo, "_torus_link_table", None)
    if t is not None:
        return t
    dims, wrap, strides = topo._torus
    P = math.prod(dims)
    t = np.full((P, len(dims), 2), -1, dtype=np.int64)
    lid = topo.link_id
    for node in range(P):
        for k, s in enumerate(dims):
            if s < 2:
                continue
            c = (node // strides[k]) % s
            for j, step in enumerate((1, -1)):
                nc = c + step
                if not 0 <= nc < s:
                    if not wrap[k]:
                        continue
                    nc %= s
                t[node, k, j] = lid.get((node, node + (nc - c) * strides[k]), -1)
    topo._torus_link_table = t
    return t


def torus_all_to_all_loads(op, machine, chips=None) -> dict | None:
    """Per-link bytes of a direct all-to-all on a torus, equal to routing its ``n(n-1)`` flows per
    group one by one with :meth:`models.topology.Topology.route` (dimension order, shortest way
    round each ring, ties ``+``), in vectorised numpy: for each dimension in routing order every
    flow covers one contiguous segment of one ring (its *line*); the segments are summed as
    difference arrays per line and direction (``O(pairs x dims)`` array work, no Python object per
    flow). The latency is the longest route's hops times the link latency (``None`` when links
    differ in latency, or the torus router is not in use). Same dict as
    :func:`direct_all_to_all_loads`."""
    topo = machine.topology
    if op.kind != "all_to_all" or topo._torus is None:
        return None
    _bw, lat, _ = _kind_params(machine, topo, "all_to_all")
    if len(lat) and float(np.ptp(lat)) > 1e-15 * max(float(np.max(lat)), 1e-300):
        return None
    hop_lat = float(lat[0]) if len(lat) else 0.0
    dims, wrap, strides = topo._torus
    dims = tuple(int(d) for d in dims)
    P = math.prod(dims)
    table = _torus_link_table(topo)
    chips = np.asarray(list(chips) if chips is not None else range(machine.num_devices), dtype=np.int64)
    nl = len(topo.links)
    count = np.zeros(nl)          # flows crossing each link, per unit of per-flow bytes
    load = np.zeros(nl)
    max_hops = 0
    flows = 0
    for grp in op.groups:
        n = len(grp)
        if n < 2 or op.send_bytes <= 0:
            continue
        per = op.send_bytes / (n - 1)
        flows += n * (n - 1)
        c = chips[list(grp)]
        co = np.stack(np.unravel_index(c, dims), axis=1).astype(np.int64)   # (n, nd)
        count[:] = 0.0
        rows = max(1, TORUS_BATCH_PAIRS // max(n - 1, 1))
        for i0 in range(0, n, rows):
            i = np.arange(i0, min(n, i0 + rows))
            jj = np.arange(1, n)
            src = np.repeat(i, n - 1)
            dst = (src + np.tile(jj, len(i))) % n
            cur = co[src].copy()
            tgt = co[dst]
            hops = np.zeros(len(src), dtype=np.int64)
            routes_per_pair = np.ones(len(src), dtype=np.int64)   # 2**(tied dims): split flows
            for k, s in enumerate(dims):
                if s < 2:
                    continue
                ca, cb = cur[:, k], tgt[:, k]
                if wrap[k]:
                    fwd = (cb - ca) % s
                    # a tie (both ways s/2 long, s > 2) sends half each way, as Topology.route_split
                    tie = (fwd == s - fwd) & (s > 2)
                    plus = (fwd < s - fwd) | tie
                    minus = (fwd > s - fwd) | tie
                    length = np.where(fwd <= s - fwd, fwd, s - fwd)
                else:
                    tie = np.zeros(len(ca), dtype=bool)
                    plus = cb > ca
                    minus = ~plus
                    length = np.abs(cb - ca)
                share = np.where(tie, 0.5, 1.0)
                routes_per_pair = routes_per_pair * np.where(tie, 2, 1)
                hops += length
                node_base = (cur * np.asarray(strides, dtype=np.int64)).sum(axis=1) - ca * strides[k]
                line = (node_base // (strides[k] * s)) * strides[k] + node_base % strides[k]
                nlines = P // s
                for j, sel in enumerate((plus, minus)):
                    m = sel & (length > 0)
                    if not m.any():
                        continue
                    st_all = ca if j == 0 else (cb + 1) % s
                    ln, st, le, wt = line[m], st_all[m], length[m], share[m]
                    end = st + le
                    wrapd = end > s
                    w1 = s + 1
                    idx = [ln * w1 + st, ln * w1 + np.minimum(end, s),
                           ln[wrapd] * w1, ln[wrapd] * w1 + (end[wrapd] - s)]
                    wts = [wt, wt, wt[wrapd], wt[wrapd]]
                    sgn = [1.0, -1.0, 1.0, -1.0]
                    diff = np.zeros(nlines * w1)
                    for ix, w, sg in zip(idx, wts, sgn):
                        diff += sg * np.bincount(ix, weights=w, minlength=nlines * w1)
                    per_pos = np.cumsum(diff.reshape(nlines, w1), axis=1)[:, :s]   # (line, pos)
                    lines = np.arange(nlines)
                    base = (lines // strides[k]) * strides[k] * s + lines % strides[k]
                    nodes = base[:, None] + np.arange(s)[None, :] * strides[k]
                    links = table[nodes, k, j]
                    used = per_pos > 0.25
                    if (links[used] < 0).any():
                        return None
                    np.add.at(count, links[used], per_pos[used])
                cur[:, k] = cb
            max_hops = max(max_hops, int(hops.max()) if len(hops) else 0)
            flows += int(routes_per_pair.sum()) - len(src)
        load += per * count
    alpha = machine.alpha_s("all_to_all")
    return _aggregate(machine, topo, load, alpha, max_hops * hop_lat, flows, a2a_ramp(machine, op),
                      ranks=len(op.groups[0]) if op.groups else None)

