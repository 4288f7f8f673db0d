"""Whole-model weight sync: every parameter of a model from the training mesh to the
inference mesh, planned as one schedule and simulated on the machine.

Per parameter, a cross-mesh plan (:func:`synth.crossmesh.plan_crossmesh`, cached by
shape, meshes and types: a model has a few dozen distinct ones). A cast (bf16 -> fp8) is
done by each sender on its shard before it sends, so every phase moves target-dtype bytes.
Parameters are packed in order into **buckets** whose staging (the receive buffers and
pieces in flight, per device) stays under ``staging_cap_bytes``; within a bucket all
transfers run at once (their flows share the links), and buckets are pipelined in three
stages -- the phase on A of bucket ``k+1`` and the phase on B of bucket ``k-1`` run while
bucket ``k`` is on the wire (at most two buckets staged per device).

Costs: transfers are the busiest link's bytes over its achieved capacity (the
simulator's aggregate engine, :func:`transfer_time_agg_s`); collectives on A and B are
:func:`models.analytic.op_time_s`. The lower bound adds, over all parameters, each cut's
bytes (:func:`models.crossmesh.cut_bound_terms`, line rates) and takes the largest.

Baselines, costed by the same functions on the same machine:

* ``gather_broadcast`` (OpenRLHF / verl default): per parameter, one training rank
  gathers the full tensor, then broadcasts it to every inference device (a pipelined
  chain at NIC rate), which keeps its slice; parameters one after another;
* ``bucketed_broadcast`` (MoonshotAI checkpoint-engine): the same full tensors in buckets,
  each bucket gathered onto one owner (owners rotate over the training devices) and
  broadcast, gather of bucket ``k+1`` overlapping the broadcast of bucket ``k``;
* ``p2p`` (NeMo-RL, Perplexity): every inference device pulls its target shard straight
  from the training devices that hold it (no spreading on A, no collectives on B), all
  parameters of a bucket at once;
* ``device_put`` (``jax.device_put`` to the other mesh): per parameter, every shard to
  the host of the first training device, then each inference device's shard from there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from synth.errors import RedistributionError
from synth.mesh import Mesh
from synth.types import ArrayType, Dim

ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


class WeightSyncError(RedistributionError):
    """A weight-sync configuration that cannot be planned."""


# -- meshes and types per parameter ----------------------------------------------------------
@dataclass(frozen=True)
class Side:
    """One side (training or inference): its mesh (with device ids) and, per role, the
    mesh axes that split each dim (``None``: replicated). A training mesh may have a
    ``pp`` axis: layer ``l`` lives on stage ``l * pp // layers`` (its sub-mesh)."""

    mesh: Mesh
    rules: dict

    def param_mesh(self, layer: int, layers: int) -> Mesh:
        m = self.mesh
        if "pp" not in m.names:
            return m
        pp = m.shape["pp"]
        stage = 0 if layer < 0 else (pp - 1 if layer >= layers else layer * pp // layers)
        i = m.names.index("pp")
        ids = np.array(m.device_ids).reshape(m.sizes)
        sub = np.take(ids, stage, axis=i).reshape(-1)
        axes = tuple(a for a in m.axes if a[0] != "pp")
        return Mesh(axes or (("one", 1),), devices=tuple(int(d) for d in sub))

    def param_type(self, shape, role: str, mesh: Mesh) -> ArrayType:
        rule = self.rules.get(role)
        if rule is None:
            raise WeightSyncError(f"weight-sync: no sharding rule for role {role!r}; add it under 'rules' "
                                  f"(roles: expert, col, row, embed, vector, router)")
        if len(rule) != len(shape):
            raise WeightSyncError(f"weight-sync: rule {role}: {rule} has {len(rule)} dims, the parameter has "
                                  f"{len(shape)} ({shape})")
        dims = []
        for size, axes in zip(shape, rule):
            axes = tuple(a for a in (axes or ()) if a in mesh.names and mesh.shape[a] > 1)
            dims.append(Dim(size, axes))
        return ArrayType(tuple(dims))


# -- costs on a machine ----------------------------------------------------------------------
class Costs:
    """Transfer and collective costs on ``machine`` with per-route caching."""

    def __init__(self, machine):
        from models.collectives import capacity

        self.machine = machine
        self.topo = machine.topology
        self.cap = capacity(machine, self.topo, "permute")
        self.alpha = machine.alpha_s("permute")
        self._routes: dict = {}
        self._lat: dict = {}
        gpn = machine.dims[1] if machine.kind == "switched" and len(machine.dims) > 1 else machine.num_devices
        self.gpn = gpn
        nic = [i for i, k in enumerate(self.topo.link_key) if k[0] == "nic"]
        self.nic_Bps = float(self.cap[nic].min()) if nic else float(self.cap.min())

    def loads(self, pair_bytes: dict) -> tuple[np.ndarray, float]:
        """``(bytes per link, the longest route's latency)`` of ``{(src, dst): bytes}``."""
        load = np.zeros(len(self.topo.links))
        lat = 0.0
        idx, w = [], []
        routes, lats = self._routes, self._lat
        for (a, b), n in pair_bytes.items():
            if a == b or n <= 0:
                continue
            r = routes.get((a, b))
            if r is None:
                r = routes[(a, b)] = np.asarray(self.topo.route(a, b), dtype=np.int64)
                lats[(a, b)] = float(self.topo.latency[r].sum()) if len(r) else 0.0
            if len(r):
                idx.append(r)
                w.append(n)
                if lats[(a, b)] > lat:
                    lat = lats[(a, b)]
        if idx:
            lens = np.fromiter((len(r) for r in idx), dtype=np.int64, count=len(idx))
            np.add.at(load, np.concatenate(idx), np.repeat(np.asarray(w, dtype=float), lens))
        return load, lat

    def load_time_s(self, load: np.ndarray, lat: float) -> float:
        """Busiest link's bytes / achieved capacity + launch + latency (0 when nothing moves)."""
        used = load > 0
        if not used.any():
            return 0.0
        return self.alpha + lat + float((load[used] / self.cap[used]).max())

    def flows_time_s(self, pair_bytes: dict) -> float:
        return self.load_time_s(*self.loads(pair_bytes))

    def ops_time_s(self, schedule) -> float:
        from models.analytic import op_time_s

        return float(sum(op_time_s(op, self.machine) for op in schedule.ops))

    def broadcast_s(self, nbytes: float, hops: int) -> float:
        """A pipelined chain broadcast at NIC rate: ``bytes / NIC + hops x (alpha + latency)``."""
        return nbytes / self.nic_Bps + hops * (self.alpha + float(self.machine.nic_latency_s or 0.0))


class Relabeler:
    """Plans found once per class of mesh pairs equal up to renaming whole nodes
    (:func:`models.crossmesh.node_relabeling`: a pipeline stage's sub-mesh is another
    stage's shifted by whole nodes), carried to each pair by renaming the devices
    (:func:`synth.crossmesh.relabel`), the link loads (:func:`node_link_permutation`) and the
    bound terms (:func:`relabel_terms`). On machines where renaming nodes is not a symmetry,
    every mesh pair is its own class."""

    def __init__(self, machine, costs):
        self.machine, self.costs = machine, costs
        self._canon: dict = {}
        self._perm: dict = {}
        self._plans: dict = {}
        self._terms: dict = {}

    @property
    def meshes(self) -> int:
        return len(self._canon)

    def canonical(self, am, bm):
        """``(canonical A, canonical B, {canonical device: device} or None for the identity)``."""
        k = (am, bm)
        got = self._canon.get(k)
        if got is None:
            from models.crossmesh import node_relabeling

            r = node_relabeling(self.machine, am, bm)
            if r is None or all(c == d for c, d in r[2].items()):
                got = (am, bm, None)
            else:
                got = (r[0], r[1], r[2])
            self._canon[k] = got
        return got

    def _link_perm(self, inv):
        k = tuple(sorted(inv.items()))
        perm = self._perm.get(k)
        if perm is None:
            from models.crossmesh import node_link_permutation

            perm = self._perm[k] = node_link_permutation(self.machine, inv)
        return perm, k

    def array_plan(self, key, ap: ArrayPlan, inv) -> ArrayPlan:
        if inv is None:
            return ap
        perm, ik = self._link_perm(inv)
        got = self._plans.get((key, ik))
        if got is None:
            from synth.crossmesh import relabel

            load = np.zeros_like(ap.load)
            load[perm] = ap.load
            got = ArrayPlan(ap.name, relabel(ap.plan, inv), load, ap.lat_s, ap.pre_s, ap.post_s, ap.stage_bytes,
                            {inv[d]: b for d, b in ap.resident.items()})
            self._plans[(key, ik)] = got
        return got

    def terms(self, key, terms: dict, inv) -> dict:
        if inv is None:
            return terms
        ik = tuple(sorted(inv.items()))
        got = self._terms.get((key, ik))
        if got is None:
            from models.crossmesh import relabel_terms

            got = self._terms[(key, ik)] = relabel_terms(terms, inv, self.machine.dims[1])
        return got


# -- the whole-model plan --------------------------------------------------------------------
@dataclass
class ArrayPlan:
    name: str
    plan: object          # CrossPlan
    load: np.ndarray      # bytes per link of its transfer
    lat_s: float          # the longest route's latency
    pre_s: float
    post_s: float
    stage_bytes: int      # the most one device stages for it (receive buffer + piece in flight)
    resident: dict        # device -> max(src shard, dst shard) bytes


@dataclass
class SyncResult:
    config: dict
    arrays: int
    distinct_plans: int
    buckets: int
    time_s: float
    lower_bound_s: float
    lower_bound_kind: str
    peak_bytes_max_device: int
    bound_bytes: int
    baselines: dict
    published: dict | None
    planning_s: float
    total_bytes: int
    notes: list = field(default_factory=list)
    planning_cpu_s: float = 0.0

    def published_check(self) -> dict | None:
        """The published method's own schedule, simulated, against its published figure: the
        ratio to the figure (to the nearest end of a published range), whether it is within
        30%, and the config's stated reason where it is not."""
        pub = self.published
        if not pub:
            return None
        sim = self.baselines[pub["method"]]["time_s"]
        lo, hi = pub["time_s"], pub.get("time_s_high") or pub["time_s"]
        near = min(max(sim, lo), hi)
        ratio = sim / near
        return {"method": pub["method"], "simulated_s": sim, "published_s": [lo, hi] if hi != lo else lo,
                "ratio": ratio, "within_30pct": bool(0.7 <= ratio <= 1.3), "differs": pub.get("differs")}

    def to_dict(self) -> dict:
        return {"name": self.config.get("name"), "model": self.config.get("model"), "arrays": self.arrays,
                "distinct_plans": self.distinct_plans, "buckets": self.buckets, "time_s": self.time_s,
                "lower_bound_s": self.lower_bound_s, "lower_bound_kind": self.lower_bound_kind,
                "ratio_to_bound": self.time_s / self.lower_bound_s if self.lower_bound_s else None,
                "peak_bytes_max_device": self.peak_bytes_max_device, "bound_bytes": self.bound_bytes,
                "bound_holds": self.peak_bytes_max_device <= self.bound_bytes,
                "baselines": self.baselines, "published": self.published,
                "published_check": self.published_check(), "planning_s": self.planning_s,
                "planning_cpu_s": self.planning_cpu_s,
                "total_bytes": self.total_bytes, "notes": self.notes}


def _signature(p, src_mesh, src_t, dst_mesh, dst_t, itemsize):
    return (p.shape, str(src_mesh), str(src_t), str(dst_mesh), str(dst_t), itemsize)


def plan_sync(cfg: dict, progress=None) -> SyncResult:
    """Plan and cost the whole-model sync of ``cfg`` (a validated config, see
    :mod:`experiments.weightsync.config`)."""
    from experiments.weightsync.params import model_params
    from models.crossmesh import cut_bound_terms
    from models.profiles import load_profile
    from synth.crossmesh import check_meshes, plan_crossmesh

    t0, c0 = time.perf_counter(), time.process_time()
    machine = load_profile(cfg["machine"])
    costs = Costs(machine)
    train = Side(Mesh.parse(cfg["train"]["mesh"]), cfg["train"]["rules"])
    infer = Side(Mesh.parse(cfg["infer"]["mesh"]), cfg["infer"]["rules"])
    check_meshes(train.mesh, infer.mesh, machine.num_devices)
    params = model_params(cfg["model"])
    layers = max(p.layer for p in params)
    itemsize = ITEMSIZE[cfg.get("target_dtype") or cfg.get("dtype") or "bf16"]
    planner = cfg.get("planner", "normal")
    cap = int(cfg["staging_cap_bytes"])
    cache: dict = {}
    bcache: dict = {}
    arrays = []
    terms_sum: dict = {}
    relabel = Relabeler(machine, costs)
    for k, p in enumerate(params):
        am = train.param_mesh(p.layer, layers)
        bm = infer.mesh
        st, dt = train.param_type(p.shape, p.role, am), infer.param_type(p.shape, p.role, bm)
        cam, cbm, inv = relabel.canonical(am, bm)
        key = _signature(p, cam, st, cbm, dt, itemsize)
        if key not in cache:
            plan = plan_crossmesh(cam, st, cbm, dt, itemsize, planner=planner,
                                  cost=lambda q: _plan_cost(q, costs))
            cache[key] = _array_plan(p.name, plan, costs)
            bcache[key] = cut_bound_terms(machine, cam, st, cbm, dt, itemsize)
        ap = relabel.array_plan(key, cache[key], inv)
        if ap.stage_bytes > cap:
            raise WeightSyncError(
                f"weight-sync: the staging cap of {cap} bytes is below what parameter {p.name} {p.shape} needs "
                f"staged on one device ({ap.stage_bytes} bytes: its receive buffer and largest piece); raise "
                f"staging_cap_bytes to at least {ap.stage_bytes}")
        arrays.append((p, ap))
        for t, v in relabel.terms(key, bcache[key], inv).items():
            terms_sum[t] = terms_sum.get(t, 0.0) + v
        if progress and k % 50 == 0:
            progress(k, len(params))
    # buckets, in order, under the cap; smaller buckets pipeline better (the phase on B of one
    # bucket runs while the next is on the wire): the bucket size with the least time wins. The
    # per-parameter choice sums its phases; the whole model is also tried with every parameter
    # sent shard to shard (direct, no collectives), and the faster schedule is ours.
    direct = _direct_arrays(arrays, itemsize, planner, costs, relabel)
    best = None
    for cand in (arrays, direct):
        for div in (1, 2, 4, 8, 16, 32, 64):
            bs = _buckets(cand, max(1, cap // div))
            t = _pipeline([_bucket_costs(b, costs) for b in bs])
            if best is None or t < best[0] - 1e-12:
                best = (t, bs, cand)
    t_ours, buckets, arrays = best
    resident: dict = {}
    for _, ap in arrays:
        for d, b in ap.resident.items():
            resident[d] = resident.get(d, 0) + b
    stage_max = max(sum(ap.stage_bytes for _, ap in b) for b in buckets)
    peak = max(resident.values()) + min(2, len(buckets)) * stage_max
    bound = max(resident.values()) + 2 * cap
    lb_kind = max(terms_sum, key=terms_sum.get) if terms_sum else "none"
    planning_s = time.perf_counter() - t0
    planning_cpu_s = time.process_time() - c0
    total = sum(p.elems for p, _ in arrays) * itemsize
    baselines = _baselines(cfg, arrays, direct, itemsize, costs, cap, relabel)
    notes = [f"{len(cache)} distinct plans for {len(arrays)} parameters (up to renaming whole nodes; "
             f"{relabel.meshes} distinct mesh pairs)",
             "fused layouts (qkv, gate/up, experts w13) are planned per component and placed side by side locally",
             f"machine {machine.spec}; transfers costed from aggregate link loads at achieved capacity"]
    return SyncResult(cfg, len(arrays), len(cache), len(buckets), t_ours, terms_sum.get(lb_kind, 0.0), lb_kind, int(peak),
                      int(bound), baselines, cfg.get("published"), planning_s, int(total), notes,
                      planning_cpu_s)


def _pairs(plan) -> dict:
    pairs: dict = {}
    for q in plan.transfer.remote:
        pairs[(q.src, q.dst)] = pairs.get((q.src, q.dst), 0) + q.nbytes
    return pairs


def _plan_cost(plan, costs) -> float:
    """A candidate's time on the machine: phase on A + transfer + phase on B."""
    pre, _f, post = plan.schedules()
    return costs.ops_time_s(pre) + costs.flows_time_s(_pairs(plan)) + costs.ops_time_s(post)


def _array_plan(name, plan, costs) -> ArrayPlan:
    pre, _flows, post = plan.schedules()
    load, lat = costs.loads(_pairs(plan))
    mem = plan.device_memory
    stage = 0
    for m in mem.values():
        # what the transfer holds beyond the resident weights: the receive buffer (mid_b) when a
        # collective on B follows, the piece in flight, the cast / slice copy on A
        stage = max(stage, max(0, m["transfer_bytes"] - m["dst_shard_bytes"]) if m["dst_shard_bytes"] else
                    (m["transfer_bytes"] if plan.pre.steps else 0))
    resident = {d: m["own_bound_bytes"] for d, m in mem.items()}
    return ArrayPlan(name, plan, load, lat, costs.ops_time_s(pre), costs.ops_time_s(post), int(stage), resident)


def _bucket_costs(bucket, costs):
    load = np.zeros(len(costs.topo.links))
    lat = pre = post = 0.0
    for _, ap in bucket:
        load += ap.load
        lat = max(lat, ap.lat_s)
        pre += ap.pre_s
        post += ap.post_s
    return pre, costs.load_time_s(load, lat), post


def _buckets(arrays, cap: int) -> list:
    buckets, cur, cur_stage = [], [], 0
    for p, ap in arrays:
        if cur and cur_stage + ap.stage_bytes > cap:
            buckets.append(cur)
            cur, cur_stage = [], 0
        cur.append((p, ap))
        cur_stage += ap.stage_bytes
    if cur:
        buckets.append(cur)
    return buckets


def _pipeline(stages) -> float:
    """Three-stage pipeline over buckets: A-phase, transfer, B-phase (each a resource)."""
    end_a = end_x = end_b = 0.0
    for pre, x, post in stages:
        end_a = end_a + pre
        end_x = max(end_a, end_x) + x
        end_b = max(end_x, end_b) + post
    return end_b


# -- baselines -------------------------------------------------------------------------------
def _holders(plan):
    """Distinct source blocks of ``plan``: (bytes, first holder) per block."""
    A = plan.src_mesh.local()
    s, e = ArrayType(plan.src.dims).regions(A)
    seen = {}
    for i, d in enumerate(plan.src_mesh.device_ids):
        key = (tuple(s[i]), tuple(e[i]))
        if key not in seen:
            seen[key] = (int(np.clip(e[i] - s[i], 0, None).prod()) * plan.itemsize, d)
    return list(seen.values())


def _direct_arrays(arrays, itemsize, planner, costs, relabel) -> list:
    """Every parameter sent shard to shard: direct, no spreading on A, no collectives on B."""
    from synth.crossmesh import plan_crossmesh

    pcache: dict = {}
    out = []
    for p, ap in arrays:
        plan = ap.plan
        cam, cbm, inv = relabel.canonical(plan.src_mesh, plan.dst_mesh)
        key = ("direct", p.shape, str(cam), str(cbm), str(plan.src), str(plan.dst))
        if key not in pcache:
            q = plan_crossmesh(cam, plan.src, cbm, plan.dst, itemsize,
                               planner=planner, mode="direct", spread_source=False)
            pcache[key] = _array_plan(p.name, q, costs)
        out.append((p, relabel.array_plan(key, pcache[key], inv)))
    return out


def _base_key(p, plan, relabel):
    """Baselines' times per parameter, shared by mesh pairs equal up to renaming nodes."""
    cam, cbm, _ = relabel.canonical(plan.src_mesh, plan.dst_mesh)
    return (p.shape, str(cam), str(cbm), str(plan.src), str(plan.dst))


def _baselines(cfg, arrays, direct, itemsize, costs, cap, relabel) -> dict:
    out = {}
    b_ids = arrays[0][1].plan.dst_mesh.device_ids
    nodes_b = len({d // costs.gpn for d in b_ids})
    # gather-then-broadcast, parameter by parameter
    memo: dict = {}
    t_gb = t_dp = 0.0
    for p, ap in arrays:
        plan = ap.plan
        key = _base_key(p, plan, relabel)
        if key not in memo:
            root = plan.src_mesh.device_ids[0]
            gather = {}
            for nb, h in _holders(plan):
                if h != root:
                    gather[(h, root)] = gather.get((h, root), 0) + nb
            g = costs.flows_time_s(gather)
            full = p.elems * itemsize
            bcast = costs.broadcast_s(full, nodes_b + 1)
            B = plan.dst_mesh.local()
            shard = ArrayType(plan.dst.dims).shard_elems(B) * itemsize
            scatter = {(root, d): shard for d in b_ids if d != root}
            memo[key] = (g + bcast, g + costs.flows_time_s(scatter), g, bcast)
        gb, dp, _, _ = memo[key]
        t_gb += gb
        t_dp += dp
    out["gather_broadcast"] = {"time_s": t_gb}
    out["device_put"] = {"time_s": t_dp}
    # bucketed broadcast: full tensors in buckets of the cap, owners rotating over A
    a_ids = arrays[0][1].plan.src_mesh.device_ids
    stages, size, g_cur, k = [], 0, 0.0, 0
    for p, ap in arrays:
        full = p.elems * itemsize
        if size and size + full > cap:
            stages.append((g_cur, costs.broadcast_s(size, nodes_b + 1)))
            size, g_cur, k = 0, 0.0, k + 1
        size += full
        g_cur += memo[_base_key(p, ap.plan, relabel)][2]
    if size:
        stages.append((g_cur, costs.broadcast_s(size, nodes_b + 1)))
    end_g = end_b = 0.0
    for g, b in stages:
        end_g += g
        end_b = max(end_g, end_b) + b
    out["bucketed_broadcast"] = {"time_s": end_b, "buckets": len(stages), "owners": len(a_ids)}
    # shard-to-shard point-to-point (receivers write into their weights; same buckets rule as ours)
    t_p2p = min(_pipeline([_bucket_costs(b, costs) for b in _buckets(direct, max(1, cap // div))])
                for div in (1, 2, 4, 8, 16, 32, 64))
    out["p2p"] = {"time_s": t_p2p}
    return out


def format_result(r: SyncResult) -> str:
    from synth.format import fmt_bytes

    d = r.to_dict()
    lines = [f"weight sync {d['name']}: {d['model']}, {d['arrays']} parameters ({fmt_bytes(d['total_bytes'])} to move), "
             f"{d['distinct_plans']} distinct plans, {d['buckets']} buckets; planned in {d['planning_s']:.2f} s "
             f"({d['planning_cpu_s']:.2f} s of CPU)",
             f"  time_s                 {d['time_s']:.3f}",
             f"  lower_bound_s          {d['lower_bound_s']:.3f}  ({d['lower_bound_kind']}); ratio "
             f"{d['ratio_to_bound']:.2f}" if d["ratio_to_bound"] else "  lower_bound_s          0",
             f"  peak_bytes_max_device  {d['peak_bytes_max_device']}  ({fmt_bytes(d['peak_bytes_max_device'])})",
             f"  bound_bytes            {d['bound_bytes']}  ({fmt_bytes(d['bound_bytes'])}): "
             f"{'holds' if d['bound_holds'] else 'EXCEEDED'}"]
    for k, v in d["baselines"].items():
        lines.append(f"  {k + '.time_s':27s}{v['time_s']:.3f}")
    pub = d.get("published")
    if pub:
        lines.append(f"  {'published.time_s':27s}{pub['time_s']}  ({pub['method']}: {pub['what']}; {pub['source']})")
        c = d["published_check"]
        lines.append(f"  published method simulated: {c['simulated_s']:.3f} s = {c['ratio']:.2f} x the published figure "
                     f"({'within' if c['within_30pct'] else 'NOT within'} 30%)")
        if not c["within_30pct"]:
            lines.append(f"  why it differs: {c['differs'] or '(the config gives no reason)'}")
    return "\n".join(lines)
