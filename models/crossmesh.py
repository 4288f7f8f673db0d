"""Cost and lower bound of a cross-mesh transfer on a machine (see :mod:`synth.crossmesh`).

* :func:`transfer_time_s` -- the transfer's point-to-point flows (one per piece, sizes as
  they are) routed on the machine's topology and shared max-min fairly among the links
  they cross (:func:`models.flow.maxmin_replay`), at each link's achieved capacity for a
  permute (:func:`models.collectives.capacity`), plus the launch cost and the longest
  route's latency. Above :data:`MAX_REPLAY_FLOWS` flows the flows of each (sender,
  receiver) pair are merged, and above that the busiest link's bytes / capacity stands
  for the replay (``engine: "aggregate"``, the same rule as the simulator's aggregated
  all-to-all).
* :func:`cut_bound_terms` -- what any plan needs, in seconds: every device's receive need
  over its ingress bandwidth (``injection(device d)``); every node's need from outside the node over
  the node's NIC ingress (``nic_in(node n)``), and the bytes that only node ``m`` holds
  and others need over its NIC egress (``nic_out(node m)``); the same summed over the
  nodes of each group (``cut(... )``: the links between the groups). Bandwidths are line
  rates, so the bound holds whatever fraction of them a plan achieves.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from models.flow import bottleneck_time_s, maxmin_replay

#: flows replayed one by one up to this many; above it (sender, receiver) pairs are merged
MAX_REPLAY_FLOWS = 4000


def _caps(machine):
    from models.collectives import capacity

    return capacity(machine, machine.topology, "permute")


def transfer_time_s(flows, machine, detail: bool = False):
    """Seconds to deliver ``flows`` (``(src, dst, bytes)`` on machine device ids, all
    starting together); with ``detail``, ``(seconds, info)`` where ``info`` has the
    engine, the number of flows replayed and the bytes per link."""
    topo = machine.topology
    flows = [(int(a), int(b), float(n)) for a, b, n in flows if a != b and n > 0]
    info = {"engine": "flow", "flows": len(flows), "link_bytes": np.zeros(len(topo.links))}
    if not flows:
        return (0.0, info) if detail else 0.0
    if len(flows) > MAX_REPLAY_FLOWS:
        merged: dict = {}
        for a, b, n in flows:
            merged[(a, b)] = merged.get((a, b), 0.0) + n
        flows = [(a, b, n) for (a, b), n in merged.items()]
        info["engine"] = "flow(pairs)"
    cap = _caps(machine)
    routes = [topo.route(a, b) for a, b, _ in flows]
    nbytes = [n for _, _, n in flows]
    weights = [1.0] * len(flows)
    lat = max(float(sum(topo.latency[lk] for lk in r)) for r in routes)
    if len(flows) > MAX_REPLAY_FLOWS:
        xfer = bottleneck_time_s(routes, nbytes, weights, cap)
        info["engine"] = "aggregate"
    else:
        xfer, _, _ = maxmin_replay(routes, nbytes, weights, cap)
    for r, n in zip(routes, nbytes):
        for lk in r:
            info["link_bytes"][lk] += n
    info["flows_replayed"] = len(flows)
    t = machine.alpha_s("permute") + lat + xfer
    return (t, info) if detail else t


@lru_cache(maxsize=16)
def _node_caps(machine):
    """``(gpus per node, NIC ingress per node, NIC egress per node)`` in B/s at line rate, or
    ``None`` for a machine that is not several switched nodes."""
    if machine.kind != "switched" or machine.dims[0] < 2:
        return None
    topo = machine.topology
    gpn = machine.dims[1]

    def node_of(x):
        if isinstance(x, (int, np.integer)):
            return int(x) // gpn
        if x.startswith("nvswitch"):
            return int(x[len("nvswitch"):])
        if x.startswith("nic"):
            return int(x[3:].split(".")[0])
        return -1

    nu = np.array([node_of(u) for u, _v in topo.links])
    nv = np.array([node_of(v) for _u, v in topo.links])
    bw = topo.bandwidth
    into = (nv >= 0) & (nu != nv)
    out = (nu >= 0) & (nu != nv)
    cin = np.bincount(nv[into], weights=bw[into], minlength=machine.dims[0])
    cout = np.bincount(nu[out], weights=bw[out], minlength=machine.dims[0])
    return gpn, cin, cout


def egress_bytes(src_mesh, src, dst_mesh, dst, itemsize: int, members: set) -> int:
    """Bytes that must leave the device set ``members``: the elements whose source holders
    all lie in it and that a device of B outside it needs (a target block whose unreduced
    group has a member inside is not counted: that member may take it)."""
    from synth.types import ArrayType

    A, B = src_mesh.local(), dst_mesh.local()
    s0, s1 = ArrayType(src.dims).regions(A)
    d0, d1 = ArrayType(dst.dims).regions(B)
    ida, idb = src_mesh.device_ids, dst_mesh.device_ids
    boxes: dict = {}
    for p, d in enumerate(ida):
        boxes.setdefault((tuple(s0[p]), tuple(s1[p])), set()).add(d)
    mine = [k for k, h in boxes.items() if h <= members]
    if not mine:
        return 0
    if dst.unreduced:
        from synth.collectives import groups_of

        groups = [tuple(idb[q] for q in g) for g in groups_of(B, dst.unreduced)]
    else:
        groups = [(d,) for d in idb]
    pos = {d: q for q, d in enumerate(idb)}
    tboxes = {(tuple(d0[pos[g[0]]]), tuple(d1[pos[g[0]]])) for g in groups if not (set(g) & members)}
    if not tboxes:
        return 0
    h0 = np.array([k[0] for k in mine])
    h1 = np.array([k[1] for k in mine])
    t0 = np.array([k[0] for k in tboxes])
    t1 = np.array([k[1] for k in tboxes])
    vol = np.clip(np.minimum(h1[:, None], t1[None]) - np.maximum(h0[:, None], t0[None]), 0, None).prod(axis=2)
    return int(vol.sum()) * itemsize


def cut_bound_terms(machine, src_mesh, src, dst_mesh, dst, itemsize: int) -> dict:
    """The lower-bound terms in seconds (see the module docstring); the bound is their max."""
    from synth.crossmesh import need_bytes

    topo = machine.topology
    terms = {}
    per_dev = need_bytes(src_mesh, src, dst_mesh, dst, itemsize)
    for d, n in per_dev.items():
        bw = topo.in_bandwidth(d)
        if n > 0 and bw > 0:
            terms[f"injection(device {d})"] = n / bw
    nodes = _node_caps(machine)
    if nodes is None:
        return terms
    gpn, cin, cout = nodes
    ida, idb = set(src_mesh.device_ids), set(dst_mesh.device_ids)
    b_nodes = sorted({d // gpn for d in idb})
    a_nodes = sorted({d // gpn for d in ida})
    groups = {n: {d for d in idb if d // gpn == n} for n in b_nodes}
    need_in = need_bytes(src_mesh, src, dst_mesh, dst, itemsize, groups=groups)
    for n, b in need_in.items():
        if b > 0:
            terms[f"nic_in(node {n})"] = b / cin[n]
    for m in a_nodes:
        members = set(range(m * gpn, (m + 1) * gpn))
        e = egress_bytes(src_mesh, src, dst_mesh, dst, itemsize, members)
        if e > 0:
            terms[f"nic_out(node {m})"] = e / cout[m]
    # the links between the groups: all of A's nodes that hold no device of B, together
    a_only = [m for m in a_nodes if m not in b_nodes]
    if a_only:
        members = {d for m in a_only for d in range(m * gpn, (m + 1) * gpn)}
        e = egress_bytes(src_mesh, src, dst_mesh, dst, itemsize, members)
        if e > 0:
            terms[f"cut(nodes {_span(a_only)} -> B)"] = e / float(sum(cout[m] for m in a_only))
    b_only = [n for n in b_nodes if n not in a_nodes]
    if b_only:
        members = {d for d in idb if d // gpn in b_only}
        need = need_bytes(src_mesh, src, dst_mesh, dst, itemsize, groups={"b": members})["b"]
        if need > 0:
            terms[f"cut(A -> nodes {_span(b_only)})"] = need / float(sum(cin[n] for n in b_only))
    return terms


def _span(nodes) -> str:
    from synth.mesh import format_device_ids

    return format_device_ids(sorted(nodes))


def cross_lower_bound_s(machine, src_mesh, src, dst_mesh, dst, itemsize: int) -> tuple[float, str, dict]:
    """``(seconds, the binding term, all terms)``; nothing to move gives ``(0, "none", {})``.
    Each term names one cut (one device, one node, one set of nodes), so the terms of several
    arrays moved by one schedule add up name by name (:func:`sum_terms`)."""
    terms = cut_bound_terms(machine, src_mesh, src, dst_mesh, dst, itemsize)
    if not terms:
        return 0.0, "none", {}
    kind = max(terms, key=terms.get)
    return float(terms[kind]), kind, terms


def sum_terms(parts) -> dict:
    """The terms of several arrays moved by one schedule: every cut carries all of them."""
    out: dict = {}
    for t in parts:
        for k, v in t.items():
            out[k] = out.get(k, 0.0) + v
    return out


# -- renaming whole nodes ----------------------------------------------------------------------
def node_relabeling(machine, src_mesh, dst_mesh):
    """``(canonical source mesh, canonical target mesh, {canonical device: machine device})``,
    or ``None`` where whole-node renamings do not map ``machine`` onto itself.

    On a machine of identical switched nodes behind one full-bisection fabric
    (``h100-multinode``), renaming nodes (each GPU keeping its index in its node) maps the
    topology onto itself, so a cross-mesh plan, its time and its bound terms carry over.
    The canonical form numbers the nodes the two meshes use in order of first appearance
    (A's devices, then B's). Worked example, 8 GPUs per node: ``a=16@32-47`` (nodes 4, 5)
    to ``b=8@256-263`` (node 32) becomes ``a=16@0-15`` to ``b=8@16-23``."""
    if machine.kind != "switched" or len(machine.dims) < 2 or machine.dims[0] < 2 \
            or machine.topology.kind != "multinode":
        return None
    from synth.mesh import Mesh

    gpn = machine.dims[1]
    order: dict = {}
    for d in tuple(src_mesh.device_ids) + tuple(dst_mesh.device_ids):
        order.setdefault(d // gpn, len(order))
    fwd = {d: order[d // gpn] * gpn + d % gpn for d in set(src_mesh.device_ids) | set(dst_mesh.device_ids)}
    inv = {c: d for d, c in fwd.items()}
    cm = lambda m: Mesh(m.axes, m.base, tuple(fwd[d] for d in m.device_ids))  # noqa: E731
    return cm(src_mesh), cm(dst_mesh), inv


def node_link_permutation(machine, inv: dict) -> np.ndarray:
    """``perm[i]``: the link that canonical link ``i`` becomes under the device renaming
    ``inv`` (:func:`node_relabeling`), extended to a renaming of every node (the nodes it
    does not name keep their order among the rest)."""
    topo = machine.topology
    gpn, nodes = machine.dims[1], machine.dims[0]
    nmap = {c // gpn: d // gpn for c, d in inv.items()}
    rest = iter(n for n in range(nodes) if n not in set(nmap.values()))
    for n in range(nodes):
        if n not in nmap:
            nmap[n] = next(rest)

    def node(x):
        if isinstance(x, (int, np.integer)):
            return nmap[int(x) // gpn] * gpn + int(x) % gpn
        if x.startswith("nvswitch"):
            return f"nvswitch{nmap[int(x[len('nvswitch'):])]}"
        if x.startswith("nic"):
            n, _, i = x[3:].partition(".")
            return f"nic{nmap[int(n)]}.{i}"
        return x

    return np.array([topo.link_id[(node(u), node(v))] for u, v in topo.links], dtype=np.int64)


def relabel_terms(terms: dict, inv: dict, gpn: int) -> dict:
    """The bound terms of :func:`cut_bound_terms` with their devices and nodes renamed."""
    import re

    nmap = {c // gpn: d // gpn for c, d in inv.items()}

    def span(text):
        out = []
        for part in text.split(","):
            lo, sep, hi = part.partition("-")
            out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
        return _span(sorted(nmap[n] for n in out))

    out = {}
    for k, v in terms.items():
        m = re.fullmatch(r"injection\(device (\d+)\)", k)
        if m:
            k = f"injection(device {inv[int(m.group(1))]})"
        elif (m := re.fullmatch(r"(nic_in|nic_out)\(node (\d+)\)", k)):
            k = f"{m.group(1)}(node {nmap[int(m.group(2))]})"
        elif (m := re.fullmatch(r"cut\(nodes (.+) -> B\)", k)):
            k = f"cut(nodes {span(m.group(1))} -> B)"
        elif (m := re.fullmatch(r"cut\(A -> nodes (.+)\)", k)):
            k = f"cut(A -> nodes {span(m.group(1))})"
        out[k] = v
    return out
