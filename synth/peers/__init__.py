"""The peers' own cases, run against our planner: ``python -m synth peers``.

Each suite is a data file of this package (facts transcribed from the peer's tests:
mesh, source and target type, and the sequence of collectives the peer emits, in
order, with the type after each):

* ``shardy.json`` -- OpenXLA Shardy's ``reshard_to_collectives`` lit tests;
* ``dtensor.json`` -- PyTorch DTensor's redistribute planner (see the file's ``source``).

For every case the peer's sequence is written in our vocabulary (:func:`peer_steps`;
one fused peer op -- an ``all_to_all`` with several moves, an ``all_gather`` on several
dims -- is one of our multi-dim collectives and counts as one collective), its type
after every op is checked against the peer's own, and both plans, ours and the peer's,
are run in the interpreter and checked element by element against the target.

Per case and suite the report counts: collectives and received bytes (max over
devices), each ours against the peer's (more / equal / fewer); *dominated* (the peer
uses no more collectives and no more received bytes, and fewer of one) and
*dominating* (the reverse); cases where ours exceeds max(src, dst) while the peer's
stays within; and how often each side's received bytes equal the receive lower bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from synth.collectives import (
    AllGather,
    AllPermute,
    AllReduce,
    AllToAll,
    Collective,
    DynSlice,
    MultiAllGather,
    MultiAllToAll,
    MultiDynSlice,
    ReduceScatter,
    ShardedToUnreduced,
    Unreduce,
)
from synth.errors import CollectiveError, RedistributionError
from synth.mesh import Mesh
from synth.plan import Plan
from synth.types import ArrayType

SUITES = ("shardy", "dtensor")
#: Peers compared per suite: the suite's own plan (``ops``) and its alternatives (``alt``).
PEERS = {"shardy": (("shardy", None),), "dtensor": (("dtensor", None), ("dtensor-min-cost", "min_cost"))}
#: A suite file is read whole; none of ours is near this.
MAX_SUITE_BYTES = 4 << 20
#: Cases in one suite, at most.
MAX_CASES = 5000


class PeerSuiteError(RedistributionError):
    """A suite file that breaks its schema (a bug in the data, or a hand edit)."""


# -- the suite files ----------------------------------------------------------------
def _schema():
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field

    class PeerOp(BaseModel):
        model_config = ConfigDict(extra="forbid")
        op: str
        dims: list[list[str]] | None = None
        moves: list[dict] | None = None
        axes: list[str] | None = None
        out: str | None = None
        mesh: Literal["src", "dst"] | None = None
        note: str | None = None

    class Case(BaseModel):
        model_config = ConfigDict(extra="forbid")
        file: str
        test: str
        mesh: str
        dst_mesh: str | None = None
        src: str
        dst: str
        itemsize: int = Field(4, ge=1, le=16)
        device_ids: list[int] | None = None
        note: str | None = None
        ops: list[PeerOp] = Field(default_factory=list)
        alt: dict[str, list[PeerOp]] = Field(default_factory=dict)

    class Skipped(BaseModel):
        model_config = ConfigDict(extra="allow")
        file: str
        test: str
        why: str

    class Suite(BaseModel):
        model_config = ConfigDict(extra="forbid")
        peer: str
        source: dict
        cases: list[Case] = Field(max_length=MAX_CASES)
        not_expressible: list[Skipped] = Field(default_factory=list, max_length=MAX_CASES)

    return Suite


def load_suite(name: str) -> dict:
    """The suite ``name`` (``shardy`` or ``dtensor``) as validated plain data."""
    if name not in SUITES:
        raise RedistributionError(f"peers: unknown suite {name!r}; choose from {list(SUITES)}")
    return parse_suite(resources.files("synth.peers").joinpath(f"{name}.json").read_bytes(), f"{name}.json")


def parse_suite(raw: bytes, where: str = "suite") -> dict:
    """A suite file's bytes, checked against the cap and the schema."""
    from pydantic import ValidationError

    if len(raw) > MAX_SUITE_BYTES:
        raise PeerSuiteError(f"peers: {where} is {len(raw)} bytes, over the {MAX_SUITE_BYTES}-byte cap")
    try:
        suite = _schema().model_validate(json.loads(raw.decode("utf-8")))
    except ValidationError as e:
        err = e.errors()[0]
        raise PeerSuiteError(f"peers: {where} breaks its schema at {'.'.join(map(str, err['loc']))}: "
                             f"{err['msg']}") from None
    except ValueError as e:
        raise PeerSuiteError(f"peers: {where} is not UTF-8 JSON ({e})") from None
    out = suite.model_dump()
    for c in out["cases"]:
        c["ops"] = [{k: v for k, v in op.items() if v is not None} for op in c["ops"]]
        if c["dst_mesh"] is None:
            del c["dst_mesh"]
        c["alt"] = {k: [{kk: vv for kk, vv in op.items() if vv is not None} for op in ops]
                    for k, ops in c["alt"].items()}
    return out


# -- the peer's ops in our vocabulary -------------------------------------------------
def _names(c) -> tuple[str, ...]:
    return (c.axis,) if isinstance(c.axis, str) else tuple(c.axis)


def _axes(names):
    names = tuple(names)
    return names[0] if len(names) == 1 else names


def _per_dim(dims, one, many):
    moves = tuple((i, _axes(a)) for i, a in enumerate(dims) if a)
    if not moves:
        return []
    return [one(*moves[0])] if len(moves) == 1 else [many(moves)]


def translate(op: dict) -> list[Collective]:
    """One peer op as our collectives: one step, except where a peer op is several
    local steps of ours (Shardy's ``sharded_to_unreduced`` on several dims)."""
    kind = op["op"]
    if kind == "all_slice":
        return _per_dim(op["dims"], DynSlice, MultiDynSlice)
    if kind == "all_gather":
        return _per_dim(op["dims"], AllGather, MultiAllGather)
    if kind == "all_to_all":
        mv = tuple((m["src_dim"], m["dst_dim"], _axes(m["axes"])) for m in op["moves"])
        return [AllToAll(*mv[0])] if len(mv) == 1 else [MultiAllToAll(mv)]
    if kind == "collective_permute":
        return [AllPermute(ArrayType.parse(op["out"]))]
    if kind == "all_reduce":
        return [AllReduce(_axes(op["axes"]))]
    if kind == "replicated_to_unreduced":
        return [Unreduce(_axes(op["axes"]))]
    if kind == "sharded_to_unreduced":
        return [ShardedToUnreduced(i, _axes(a)) for i, a in enumerate(op["dims"]) if a]
    if kind == "reduce_scatter":
        moves = [(i, _axes(a)) for i, a in enumerate(op["dims"]) if a]
        if len(moves) != 1:
            raise PeerSuiteError(f"peers: a reduce_scatter on {len(moves)} dims has no single step of ours")
        return [ReduceScatter(*moves[0])]
    if kind == "reshard":  # kept by the peer as a no-op (the type does not change)
        return []
    raise PeerSuiteError(f"peers: unknown peer op {kind!r}")


def peer_plan(case: dict, ops=None) -> Plan:
    """The peer's sequence as a :class:`Plan` of our steps (built on the refined mesh,
    so Shardy's ``y`` and ``y:(1)4, y:(4)2`` are one axis). Checks the type after
    every peer op against the peer's own (``out``). Raises :class:`CollectiveError`
    when a peer op breaks one of our type rules (see :func:`compare_case`)."""
    return _checked_plan(Mesh.parse(case["mesh"]), case["src"], case["dst"],
                         case["ops"] if ops is None else ops, case)


def _checked_plan(mesh: Mesh, src, dst, ops, case) -> Plan:
    src, dst = ArrayType.parse(str(src)), ArrayType.parse(str(dst))
    steps, ends = [], []
    for op in ops:
        steps += translate(op)
        ends.append((len(steps), op))
    plan = Plan.build(mesh, src, dst, steps, itemsize=case["itemsize"], planner="peer")
    types = (plan.src,) + plan.types
    for n, op in ends:
        want = op.get("out")
        if want is not None and types[n] != ArrayType.parse(want).canonical(mesh):
            raise PeerSuiteError(
                f"peers: {case['test']}: after {op['op']} our type is {types[n]}, the peer's is {want}")
    return plan


def peer_crossplan(case: dict, ops=None):
    """A peer sequence over two meshes (``dst_mesh``) as a :class:`synth.crossmesh.CrossPlan`:
    the ops on the source mesh, then the move onto the target mesh (the peer's
    ``collective_permute`` whose result is on ``dst``: a transfer where each target device
    receives its block from a holder, or, without one, the same type taken over where the
    devices coincide), then the ops on the target mesh."""
    from synth.crossmesh import CrossPlan, plan_transfer

    ops = case["ops"] if ops is None else ops
    A, B = Mesh.parse(case["mesh"]), Mesh.parse(case["dst_mesh"])
    pre = [op for op in ops if op.get("mesh", "src") == "src"]
    post = [op for op in ops if op.get("mesh") == "dst"]
    if pre + post != list(ops):
        raise PeerSuiteError(f"peers: {case['test']}: an op on the source mesh follows one on the target mesh")
    mid_a = ArrayType.parse(pre[-1]["out"] if pre else case["src"])
    if post and post[0]["op"] == "collective_permute":
        mid_b, post = ArrayType.parse(post[0]["out"]), post[1:]
    else:
        mid_b = mid_a
    pre_plan = _checked_plan(A.local(), case["src"], mid_a, pre, case)
    post_plan = _checked_plan(B.local(), mid_b, case["dst"], post, case)
    xfer = plan_transfer(A, pre_plan.work_types[-1].canonical(A.local()), B, mid_b, case["itemsize"])
    return CrossPlan(A, B, ArrayType.parse(case["src"]), ArrayType.parse(case["dst"]), case["itemsize"],
                     pre_plan, xfer, post_plan, "direct")


def peer_by_types(case: dict, ops=None) -> dict:
    """The peer's cost read from its own types, for a sequence our type rules reject
    (a step on an uneven dim whose shards do not nest in the JAX / GSPMD padded layout:
    such a step is not a collective within its group there, so the sequence cannot run
    as written). Per op: one collective unless local, received elements by our cost
    formula on the peer's before/after types, the largest shard over the peer's types."""
    from synth.types import refine, refine_name, refine_type

    mesh = Mesh.parse(case["mesh"])
    ops = case["ops"] if ops is None else ops
    types = [ArrayType.parse(case["src"])] + [ArrayType.parse(op["out"]) for op in ops]
    steps = [translate(op) for op in ops]
    names = [a for st in steps for c in st if not isinstance(c, AllPermute) for a in _names(c)]
    work, wtypes = refine(mesh, types, names)
    recv = colls = 0
    for st, a, b in zip(steps, wtypes[:-1], wtypes[1:]):
        for c in st:
            if isinstance(c, AllPermute):
                c = AllPermute(refine_type(c.target, work))
            else:
                c = c.map_axes(lambda x: refine_name(work, x))
            got = c.recv_elems(a, b, work)
            if c.local or not got.any():  # local, or a relabelling that moves nothing
                continue
            colls += 1
            recv += int(got.max())
    itemsize = case["itemsize"]
    shard = max(t.shard_elems(mesh) for t in types) * itemsize
    bound = max(types[0].shard_elems(mesh), types[-1].shard_elems(mesh)) * itemsize
    return {"collectives": colls, "recv_bytes": recv * itemsize, "max_shard_bytes": shard,
            "within_bound": shard <= bound}


# -- comparing -------------------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    """One side's plan on one case, measured."""

    collectives: int
    recv_bytes: int
    max_shard_bytes: int
    within_bound: bool
    at_recv_bound: bool
    steps: tuple[str, ...]

    @classmethod
    def of(cls, plan, lower: int | None) -> Side:
        if not isinstance(plan, Plan):
            return cls._of_cross(plan, lower)
        from synth.bench import check_plan_exact

        check_plan_exact(plan)  # element by element, every step
        return cls(int(plan.num_collectives), int(plan.recv_bytes_max_device), int(plan.max_shard_bytes),
                   bool(plan.bound_holds), lower is not None and int(plan.recv_bytes_max_device) == lower,
                   tuple(str(c) for c, noop in zip(plan.steps, plan.noop_steps) if not noop))


    @classmethod
    def _of_cross(cls, p, lower: int | None) -> Side:
        """A plan over two meshes: checked by :meth:`CrossPlan.check` (every phase, every
        device, element by element); within the bound means no staging buffer beyond
        max(source shard, target shard) on any device."""
        p.check()
        m = p.metrics()
        steps = [str(c) for c in p.pre.steps] + [f"Transfer({m['transfer_pieces']} pieces)"] * bool(
            p.transfer.remote) + [str(c) for c in p.post.steps]
        return cls(int(m["num_collectives"]), int(m["recv_bytes_max_device"]), int(m["peak_bytes_max_device"]),
                   m["staging_bytes"] == 0, lower is not None and int(m["recv_bytes_max_device"]) == lower,
                   tuple(steps))


def our_plan(case: dict, planner: str = "auto", fuse: bool = False, **kw):
    """Our default plan for a case: :func:`synth.synthesize`, or, on two meshes,
    :func:`synth.crossmesh.plan_crossmesh` (its phases use the planner's defaults). With
    ``fuse``, runs of one-dim steps become multi-dim steps (:func:`fused_plan`)."""
    if case.get("dst_mesh"):
        from synth.crossmesh import plan_crossmesh

        return plan_crossmesh(case["mesh"], case["src"], case["dst_mesh"], case["dst"], case["itemsize"],
                              planner=planner)
    plan = _synthesize(case["mesh"], case["src"], case["dst"], planner, case["itemsize"],
                       tuple(sorted(kw.items())))
    return fused_plan(plan) if fuse else plan


@lru_cache(maxsize=1024)
def _synthesize(mesh: str, src: str, dst: str, planner: str, itemsize: int, kw: tuple) -> Plan:
    """One plan per case and options in a process (the planner is deterministic: its
    budget is work, not time; plans are immutable)."""
    from synth.planners import synthesize

    return synthesize(mesh, src, dst, planner=planner, itemsize=itemsize, **dict(kw))


def fused_plan(plan: Plan) -> Plan:
    """``plan`` with :func:`synth.collectives.fuse_runs` applied on its work mesh (where
    sub-axes are axes): consecutive slices or gathers on disjoint dims, or all-to-alls on
    disjoint axes (their moves may share a source or a destination dim), become one
    multi-dim step when that receives no more."""
    from synth.collectives import fuse_runs
    from synth.types import refine_name, refine_type

    wm = plan.work_mesh
    steps = [AllPermute(refine_type(ArrayType.of(c.target), wm)) if isinstance(c, AllPermute)
             else c.map_axes(lambda a: refine_name(wm, a)) for c in plan.steps]
    out = fuse_runs(steps, plan.work_types[0], wm)
    if len(out) == len(steps):
        return plan
    return Plan.build(plan.mesh, plan.src, plan.dst, out, itemsize=plan.itemsize,
                      planner=f"{plan.planner}+fuse")


#: Work budget of the proof search that decides whether any plan over our move set matches
#: an unrunnable peer sequence, where the default budget did not prove our plan optimal
#: (10x the default; 0.5 s of CPU on the one Shardy case that needs it).
PROOF_BUDGET_MOVES = 500_000

#: Verdicts on a peer sequence that cannot run in the JAX padded layout (``unrunnable``).
VERDICTS = {
    "below_recv_bound": "it receives less than the receive lower bound of the JAX layout: "
                        "no plan there, whatever its moves, can match it",
    "no_plan_over_the_move_set": "no plan over our move set within the bound has its "
                                 "collectives and bytes (our search is proven optimal and such "
                                 "a plan would cost less)",
    "no_plan_at_its_memory": "no plan over our move set keeps the largest shard as small as it "
                             "does (our search proved the least largest shard)",
    "peer_over_bound": "it exceeds max(src, dst), where our search does not look; not decided "
                       "whether a plan over our move set at its memory matches it",
    "undecided": "not decided (our search did not prove its optimum within the proof budget)",
}

#: Why ours differs from a peer sequence that runs and uses no more collectives and bytes.
TRADEOFF_VERDICTS = {
    "lower_peak_live": "ours holds less peak live memory at a predicted time within the tie "
                       "tolerance of the peer's (auto's tie rule: least peak live, then fewest "
                       "collectives, then fewest bytes)",
}


def tradeoff_verdict(ours_plan, peer_plan_) -> dict | None:
    """Why ``auto`` chose ``ours_plan`` over a runnable peer plan that is no worse in
    collectives and received bytes, or None. Example: DTensor's ``AllToAll(0->1, b) ;
    ReduceScatter(0, a)`` for ``[16{b}, 24]{U:a} -> [16{a}, 24{b}]`` on ``a=4,b=2``
    receives 960 B and holds 1536 B live (the all-to-all's input and output); ours,
    ``AllReduce(a) ; DynSlice ; DynSlice ; AllPermute``, receives 1344 B and holds 960 B
    (the all-reduce runs in place), 10.03 against 10.02 us under the default model: a tie
    within :data:`synth.planners.cost.TIE_TOLERANCE`, broken by peak live memory."""
    from synth.planners.cost import TIE_TOLERANCE, DefaultCost, schedule_cost

    if not (isinstance(ours_plan, Plan) and isinstance(peer_plan_, Plan)):
        return None
    cost = DefaultCost()
    t_ours, t_peer = schedule_cost(ours_plan, cost)[0], schedule_cost(peer_plan_, cost)[0]
    if ours_plan.peak_live_bytes < peer_plan_.peak_live_bytes and t_ours <= t_peer * (1 + TIE_TOLERANCE):
        return {"verdict": "lower_peak_live", "ours_peak_live_bytes": int(ours_plan.peak_live_bytes),
                "peer_peak_live_bytes": int(peer_plan_.peak_live_bytes), "ours_time_s": float(t_ours),
                "peer_time_s": float(t_peer)}
    return None


def unrunnable_verdict(case: dict, peer: Side, lower: int | None, ours_plan, planner: str = "auto",
                       kw: dict | None = None) -> dict:
    """Why no plan that runs matches a peer sequence that cannot run as written.

    * ``below_recv_bound``: the peer's bytes (costed from its types, summed over its ops) are
      below the receive lower bound of the JAX layout, which bounds every plan.
    * ``no_plan_over_the_move_set``: our search proved its optimum ``C*`` over the documented
      move set within the memory bound (at the default work budget, or else at
      :data:`PROOF_BUDGET_MOVES`), under the default cost (``alpha`` per collective plus the
      bytes of each step's neediest device over the bandwidth). A plan over the move set
      with at most the peer's ``c`` collectives and ``B`` bytes summed over its steps would
      cost at most ``c*alpha + B/bw``; where that is below ``C*``, no such plan exists.
      Example: ``all_to_all_subaxis_and_full_axis_then_all_gather``, Shardy's 3 ops and
      352 B would cost 15.007 us; our optimum is 15.0096 us (3 collectives, 480 B).
    * ``no_plan_at_its_memory``: the peer exceeds max(src, dst) and our search proved that
      no plan over the move set keeps the largest shard at or below the peer's;
      ``peer_over_bound``: the peer exceeds max(src, dst) and that is not so (our search
      looks only within the bound there);
    * ``undecided``: none holds (the proof search ran out, or the peer's figures would
      not cost less than our optimum)."""
    from synth.planners import DefaultCost

    if lower is not None and peer.recv_bytes < lower:
        return {"verdict": "below_recv_bound", "peer_bytes": peer.recv_bytes, "recv_lower_bound_bytes": lower}
    if (not isinstance(ours_plan, Plan) or (kw or {}).get("cost") is not None
            or (kw or {}).get("move_set", "full") != "full"):
        return {"verdict": "undecided"}
    srch, proof = ours_plan.search or {}, None
    if not peer.within_bound:
        least = srch.get("min_max_shard_bytes")
        if least is not None and least > peer.max_shard_bytes:
            return {"verdict": "no_plan_at_its_memory", "peer_max_shard_bytes": peer.max_shard_bytes,
                    "least_max_shard_bytes": least}
        return {"verdict": "peer_over_bound", "peer_max_shard_bytes": peer.max_shard_bytes}
    if not (srch.get("optimal") and srch.get("optimal_over") != "whole-axes"):
        opts = dict(kw or {}, budget_moves=PROOF_BUDGET_MOVES)
        opts.setdefault("budget_ms", 60_000)
        srch = _synthesize(case["mesh"], case["src"], case["dst"], planner, case["itemsize"],
                           tuple(sorted(opts.items()))).search or {}
        proof = PROOF_BUDGET_MOVES
    if not (srch.get("optimal") and srch.get("optimal_over") != "whole-axes"):
        return {"verdict": "undecided", "proof_budget_moves": proof}
    cost = DefaultCost()
    floor = peer.collectives * cost.alpha_s + peer.recv_bytes / cost.bandwidth_Bps
    if floor < srch["optimum_s"] * (1 - 1e-12):
        return {"verdict": "no_plan_over_the_move_set", "peer_cost_s": floor, "our_optimum_s": srch["optimum_s"],
                "proof_budget_moves": proof}
    return {"verdict": "undecided", "proof_budget_moves": proof}


def _cmp(a: int, b: int) -> str:
    return "more" if a > b else "fewer" if a < b else "equal"


def compare_case(case: dict, planner: str = "auto", alt: str | None = None, ours_plan=None, **kw) -> dict:
    """Ours against the peer's on one case (the peer's ``alt`` plan when given): both
    sides measured and checked element by element."""
    ops = case["ops"] if alt is None else case["alt"][alt]
    if ours_plan is None:
        ours_plan = our_plan(case, planner, **kw)
    try:
        lower = int(ours_plan.recv_lower_bound_bytes)
    except RedistributionError:
        lower = None
    ours = Side.of(ours_plan, lower)
    try:
        peer_p = peer_crossplan(case, ops) if case.get("dst_mesh") else peer_plan(case, ops)
        peer, replayed, why = Side.of(peer_p, lower), True, None
    except CollectiveError as e:  # the peer's sequence breaks our (JAX's) layout rules
        peer_p = None
        if case.get("dst_mesh"):
            raise
        t = peer_by_types(case, ops)
        peer = Side(t["collectives"], t["recv_bytes"], t["max_shard_bytes"], t["within_bound"],
                    lower is not None and t["recv_bytes"] == lower,
                    tuple(op["op"] for op in ops))
        replayed, why = False, str(e)
    verdict = None if replayed else unrunnable_verdict(case, peer, lower, ours_plan, planner, kw)
    no_worse = ours.collectives <= peer.collectives and ours.recv_bytes <= peer.recv_bytes
    no_better = peer.collectives <= ours.collectives and peer.recv_bytes <= ours.recv_bytes
    differ = (ours.collectives, ours.recv_bytes) != (peer.collectives, peer.recv_bytes)
    tradeoff = tradeoff_verdict(ours_plan, peer_p) if replayed and no_better and differ else None
    return {
        "test": case["test"], "file": case["file"], "mesh": case["mesh"],
        **({"dst_mesh": case["dst_mesh"]} if case.get("dst_mesh") else {}), "src": case["src"],
        "dst": case["dst"], "itemsize": case["itemsize"], "recv_lower_bound_bytes": lower,
        "ours": ours.__dict__ | {"steps": list(ours.steps)},
        "peer": peer.__dict__ | {"steps": list(peer.steps)},
        "collectives": _cmp(ours.collectives, peer.collectives),
        "bytes": _cmp(ours.recv_bytes, peer.recv_bytes),
        "dominated": no_better and differ,
        "dominates": no_worse and differ,
        "over_bound_peer_within": (not ours.within_bound) and peer.within_bound,
        "peer_replayed": replayed, "peer_not_replayed_why": why,
        "peer_unrunnable_verdict": verdict, "tradeoff_verdict": tradeoff,
    }


def summarize(rows: list[dict]) -> dict:
    def count(key, val):
        return sum(1 for r in rows if r[key] == val)

    comp = [r for r in rows if r["recv_lower_bound_bytes"] is not None]
    return {
        "cases": len(rows),
        "dominated": sum(r["dominated"] for r in rows),
        "dominates": sum(r["dominates"] for r in rows),
        "collectives": {k: count("collectives", k) for k in ("more", "equal", "fewer")},
        "bytes": {k: count("bytes", k) for k in ("more", "equal", "fewer")},
        "over_bound_peer_within": sum(r["over_bound_peer_within"] for r in rows),
        "over_bound_ours": sum(not r["ours"]["within_bound"] for r in rows),
        "over_bound_peer": sum(not r["peer"]["within_bound"] for r in rows),
        "bound_computable": len(comp),
        "at_recv_bound_ours": sum(r["ours"]["at_recv_bound"] for r in comp),
        "at_recv_bound_peer": sum(r["peer"]["at_recv_bound"] for r in comp),
        "peer_not_replayed": sum(not r["peer_replayed"] for r in rows),
        "dominated_runnable": sum(r["dominated"] and r["peer_replayed"] for r in rows),
        "dominated_runnable_tradeoff": {v: sum(r["dominated"] and r["peer_replayed"] and bool(r["tradeoff_verdict"])
                                               and r["tradeoff_verdict"]["verdict"] == v for r in rows)
                                        for v in TRADEOFF_VERDICTS},
        "dominated_unrunnable": {v: sum(r["dominated"] and not r["peer_replayed"]
                                        and r["peer_unrunnable_verdict"]["verdict"] == v for r in rows)
                                 for v in VERDICTS},
        "dominated_tests": [r["test"] for r in rows if r["dominated"]],
        "over_bound_peer_within_tests": [r["test"] for r in rows if r["over_bound_peer_within"]],
    }


def run_peers(suites=SUITES, planner: str = "auto", progress=None, fuse: bool = False, **kw) -> dict:
    """Every case of every suite, against each of the suite's peers (DTensor: its greedy
    plan and its min-cost plan): per peer the rows and their summary. Our plan is
    synthesized once per case."""
    out = {"planner": planner + ("+fuse" if fuse else ""), "suites": {}}
    for name in suites:
        suite = load_suite(name)
        rows = {peer: [] for peer, _ in PEERS[name]}
        for i, case in enumerate(suite["cases"]):
            ours = our_plan(case, planner, fuse, **kw)
            for peer, alt in PEERS[name]:
                rows[peer].append(compare_case(case, planner, alt, ours_plan=ours, **kw))
            if progress is not None:
                progress(name, i + 1, len(suite["cases"]))
        for peer, _ in PEERS[name]:
            out["suites"][peer] = {"source": suite["source"], "not_expressible": len(suite["not_expressible"]),
                                   "file": f"{name}.json", "summary": summarize(rows[peer]),
                                   "rows": rows[peer]}
    return out


def format_report(res: dict) -> str:
    lines = [f"synth peers: our planner ({res['planner']}) on the peers' own cases; every plan "
             "(ours and the peer's) checked element by element"]
    for name, s in res["suites"].items():
        m = s["summary"]
        c, b = m["collectives"], m["bytes"]
        lines += [
            f"  {name}: {m['cases']} cases ({s['not_expressible']} not expressible, listed in {s['file']})",
            f"    dominated by the peer        {m['dominated']:4d}   (target 0)",
            f"      by a peer sequence that runs                     {m['dominated_runnable']:3d}"
            + (f"   (ours holds less peak live memory in {m['dominated_runnable_tradeoff']['lower_peak_live']}"
               f" of them, at a time within the tie tolerance)"
               if m["dominated_runnable_tradeoff"]["lower_peak_live"] else ""),
            f"      by one that cannot run in JAX's padded layout    "
            f"{m['dominated'] - m['dominated_runnable']:3d}",
            f"    dominating the peer          {m['dominates']:4d}",
            f"    collectives  more {c['more']:3d}  equal {c['equal']:3d}  fewer {c['fewer']:3d}",
            f"    recv bytes   more {b['more']:3d}  equal {b['equal']:3d}  fewer {b['fewer']:3d}",
            f"    over max(src, dst) where the peer is within  {m['over_bound_peer_within']:3d}   (target 0)",
            f"    recv = receive lower bound   ours {m['at_recv_bound_ours']:3d}  peer "
            f"{m['at_recv_bound_peer']:3d}   of {m['bound_computable']}",
        ]
        if m["peer_not_replayed"]:
            lines.append(f"    peer's sequence costed from its types only (it breaks the JAX padded layout on an "
                         f"uneven dim, so it cannot run as written): {m['peer_not_replayed']}")
        for r in s["rows"]:
            if not r["dominated"]:
                continue
            o, q = r["ours"], r["peer"]
            head = (f"    dominated: {r['test']}: ours {o['collectives']} coll. {o['recv_bytes']} B "
                    f"(largest shard {o['max_shard_bytes']} B), peer {q['collectives']} coll. {q['recv_bytes']} B "
                    f"({q['max_shard_bytes']} B)")
            if r["peer_replayed"]:
                tv = r["tradeoff_verdict"]
                lines.append(head + " (the peer's sequence runs" + (
                    f"; peak live ours {tv['ours_peak_live_bytes']} B, peer {tv['peer_peak_live_bytes']} B, "
                    f"time ours {tv['ours_time_s'] * 1e6:.4g} us, peer {tv['peer_time_s'] * 1e6:.4g} us: "
                    f"{TRADEOFF_VERDICTS[tv['verdict']]})" if tv else ")"))
            else:
                v = r["peer_unrunnable_verdict"]["verdict"]
                lines.append(head + f" (costed from its types; cannot run as written: {VERDICTS[v]})")
    return "\n".join(lines)
