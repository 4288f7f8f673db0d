"""Synthesis benchmarks over seeded random cases.

* :func:`run_bench` -- synthesis time (p50, p99, max) of one or more planners on random
  cases with up to 6 mesh axes and rank 4, and how often each stays within the memory
  bound;
* :func:`run_agreement` -- ``auto`` against :func:`exhaustive_min_max_shard`, an
  exhaustive reference search over the same moves on small cases (<= 16 devices,
  rank <= 3, the paper's precondition both true and false): bound misses (a bounded plan
  exists but ``auto``'s exceeds the bound) and cases above the least achievable largest
  shard must both be 0. Every ``auto`` plan is also checked element by element with the
  interpreter.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import time

import numpy as np

from synth.mesh import Mesh
from synth.types import ArrayType, Dim

AXIS_SIZES = (1, 2, 3, 4, 5, 6, 8)
AXIS_NAMES = ("x", "y", "z", "w", "v", "u")


def random_case(rng: random.Random, max_axes: int = 4, max_rank: int = 4, precondition: bool = True,
                axis_sizes=AXIS_SIZES, shapes=(1, 2, 3, 4, 6, 8, 12, 16), max_devices: int | None = None,
                even: bool = False):
    """A random (mesh, src, dst). With ``precondition`` every dim is a multiple of
    the product of all mesh axis sizes (the normal form's guarantee holds). With
    ``even`` both types divide every dim evenly (no padded shards)."""
    while True:
        names = list(AXIS_NAMES[: rng.randint(1, max_axes)])
        mesh = Mesh(tuple((n, rng.choice(axis_sizes)) for n in names))
        if max_devices is None or mesh.size <= max_devices:
            break
    rank = rng.randint(1, max_rank)
    total = mesh.size
    if precondition:
        shape = [total * rng.choice((1, 2)) for _ in range(rank)]
    elif shapes == "tight":
        # each dim a multiple of only some axes: divisibility blocks many intermediate types
        shape = [math.prod(s for _, s in mesh.axes if rng.random() < 0.6) * rng.choice((1, 2, 3))
                 for _ in range(rank)]
    else:
        shape = [rng.choice(shapes) for _ in range(rank)]

    def rand_type():
        while True:
            dims = [[] for _ in range(rank)]
            for n in names:
                if shapes == "tight":  # mostly fully sharded
                    k = -1 if rng.random() < 0.15 else rng.randint(0, rank - 1)
                else:
                    k = rng.randint(-1, rank - 1)
                if k >= 0:
                    dims[k].append(n)
            for d in dims:
                rng.shuffle(d)
            t = ArrayType(tuple(Dim(s, tuple(a)) for s, a in zip(shape, dims)))
            if t.is_valid(mesh) and (not even or _is_even(t, mesh)):
                return t

    return mesh, rand_type(), rand_type()


def _is_even(t, mesh) -> bool:
    return all(d.size % math.prod(mesh.shape[a] for a in d.axes) == 0 for d in t.dims)


def _with_pending(rng: random.Random, mesh: Mesh, t: ArrayType, other: ArrayType | None = None):
    """``t`` with one or two replicated axes of size > 1 (not used by ``other``'s
    pending set... any) turned into pending sums, when it has such axes."""
    free = [a for a, n in mesh.axes if n > 1 and a not in t.used_axes]
    if not free:
        return t
    k = min(len(free), rng.choice((1, 1, 2)))
    return t.with_unreduced(tuple(sorted(rng.sample(free, k))))


def bench_cases(cases: int, seed: int, max_axes: int = 6, max_rank: int = 4):
    """The benchmark's cases, in four equal shares: the paper's precondition; even dims
    without it; uneven dims (padded shards); pending sums (in the source, the target or
    both)."""
    from synth.errors import RedistributionError

    rng = random.Random(seed)
    out = []
    for i in range(cases):
        k = i % 4
        while True:
            try:  # (a case whose array exceeds the element limit is drawn again)
                if k == 0:
                    c = random_case(rng, max_axes, max_rank, precondition=True, even=True)
                elif k == 1:
                    c = random_case(rng, max_axes, max_rank, precondition=False, even=True)
                elif k == 2:
                    c = random_case(rng, max_axes, max_rank, precondition=False,
                                    shapes=(3, 5, 6, 7, 10, 12, 16, 24, 50, 100))
                else:
                    mesh, src, dst = random_case(rng, max_axes, max_rank, precondition=bool(i % 8 == 3),
                                                 even=True)
                    r = rng.random()
                    if r < 0.6:
                        src = _with_pending(rng, mesh, src)
                    if r >= 0.3:
                        dst = _with_pending(rng, mesh, dst)
                    c = (mesh, src, dst)
                out.append(c)
                break
            except RedistributionError:
                continue
    return out


def plan_digest(plan) -> str:
    """A digest of what a plan does (steps and the type after each), for comparing runs."""
    import hashlib
    import json

    body = [[c.to_dict(), str(t)] for c, t in zip(plan.steps, plan.types)]
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


class _cyclic_garbage:
    """Context manager: ``objects``, how many objects the cyclic collector freed while the
    block ran, and at its end (a collection then). A planner call makes none (each call's
    search is freed by reference counting when it returns); were one to leave a cycle, the
    collector's later walk over it would run outside the timed calls or inside another
    one, and the figures would not be each call's own cost."""

    def __init__(self):
        self.objects = 0

    def _count(self, phase, info):
        if phase == "stop":
            self.objects += int(info.get("collected", 0))

    def __enter__(self):
        import gc

        gc.collect()  # what was garbage before the block is not counted
        gc.callbacks.append(self._count)
        return self

    def __exit__(self, *exc):
        import gc

        try:
            gc.collect()
        finally:
            gc.callbacks.remove(self._count)
        return False


class cpu_burners:
    """Context manager: ``n`` processes that spin on the CPU until the block ends (stopped
    by their own pids)."""

    def __init__(self, n: int):
        self.n = int(n)
        self.procs = []

    def __enter__(self):
        import subprocess
        import sys

        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL) for _ in range(self.n)]
        time.sleep(0.2 if self.n else 0)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
        return False


def run_bench(cases: int = 2000, seed: int = 0, planners=("auto", "normal"), max_axes: int = 6,
              max_rank: int = 4, auto_kw: dict | None = None, runs: int = 1, burn: int = 0,
              slowest: int = 0) -> dict:
    """Synthesis time per planner over the same seeded cases, measured side by side;
    ``runs`` passes over the cases (the last with ``burn`` CPU burner processes beside it)
    whose plans are compared digest by digest. ``slowest``: list that many cases of the
    first run with the most ``auto`` CPU time (index, case, CPU ms, states, moves, status),
    for profiling."""
    from synth.planners import synthesize

    if isinstance(planners, str):
        planners = (planners,)
    if isinstance(auto_kw, (int, float)):  # the old positional budget_ms
        auto_kw = {"budget_ms": auto_kw}
    auto_kw = dict(auto_kw or {})
    inputs = bench_cases(cases, seed, max_axes, max_rank)
    for p in planners:
        synthesize(*inputs[0], planner=p)  # warm imports
    kinds = ("precondition", "even", "uneven", "pending")
    digests = []
    per_run = []
    auto_rows = []
    from synth.memo import clear_all

    for run in range(runs):
        clear_all()  # every run measures cold calls: nothing memoised by the previous run
        times = {p: [] for p in planners}
        cpu = {p: [] for p in planners}
        within = {p: 0 for p in planners}
        optimal = states = moves = capped = out_of_work = 0
        auto_s = 0.0
        dig = []
        with cpu_burners(burn if run == runs - 1 else 0), _cyclic_garbage() as cyclic:
            for mesh, src, dst in inputs:
                for p in planners:
                    kw = auto_kw if p == "auto" else {}
                    c0, t0 = time.process_time(), time.perf_counter()
                    plan = synthesize(mesh, src, dst, planner=p, **kw)
                    dt = time.perf_counter() - t0
                    times[p].append(dt)
                    cpu[p].append(time.process_time() - c0)
                    within[p] += plan.bound_holds
                    dig.append(plan_digest(plan))
                    if p == "auto" and plan.search:
                        optimal += bool(plan.search.get("optimal"))
                        states += int(plan.search.get("states", 0))
                        moves += int(plan.search.get("moves", 0))
                        capped += bool(plan.search.get("cap_fired"))
                        out_of_work += plan.search.get("moves", 0) >= plan.search.get("budget_moves", 1 << 62)
                        auto_s += cpu[p][-1]
                        if run == 0 and slowest:
                            auto_rows.append((cpu[p][-1], len(auto_rows), mesh, src, dst, plan.search))
        digests.append(dig)
        r = {"planners": {}, "burners": burn if run == runs - 1 else 0,
             "cyclic_garbage_objects": cyclic.objects}
        for p in planners:
            ms = np.array(times[p]) * 1e3
            cms = np.array(cpu[p]) * 1e3
            r["planners"][p] = {
                "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
                "max_ms": float(ms.max()), "mean_ms": float(ms.mean()),
                "cpu_p50_ms": float(np.percentile(cms, 50)), "cpu_p99_ms": float(np.percentile(cms, 99)),
                "cpu_max_ms": float(cms.max()),
                "within_bound": int(within[p]),
                "by_kind_p99_ms": {k: float(np.percentile(ms[i::4], 99)) for i, k in enumerate(kinds)
                                   if len(ms[i::4])},
            }
        if "auto" in planners:
            r["planners"]["auto"].update(
                proven_optimal=optimal, states=states, moves=moves, cap_fired=capped,
                work_budget_exhausted=int(out_of_work),
                states_per_s=states / auto_s if auto_s else 0.0, moves_per_s=moves / auto_s if auto_s else 0.0)
        per_run.append(r)
    same = all(d == digests[0] for d in digests[1:])
    diff = [i for i in range(len(digests[0])) if any(d[i] != digests[0][i] for d in digests[1:])]
    from synth import compiled

    out = {"cases": cases, "seed": seed, "max_axes": max_axes, "max_rank": max_rank,
           "modules": compiled.summary(), "auto_kw": auto_kw, "kinds": list(kinds), "runs": runs, "burn": burn,
           "planners": per_run[0]["planners"], "per_run": per_run,
           "identical_plans": bool(same), "differing_cases": diff[:20]}
    if slowest:
        top = sorted(auto_rows, key=lambda r: (-r[0], r[1]))[:int(slowest)]
        out["slowest"] = [{"case": k, "mesh": str(m), "src": str(s), "dst": str(d),
                           "cpu_ms": c * 1e3, "states": int(se.get("states", 0)),
                           "moves": int(se.get("moves", 0)), "status": se.get("status")}
                          for c, k, m, s, d, se in top]
    return out


def format_bench(res: dict) -> str:
    lines = [f"synth bench: {res['cases']} seeded random cases (seed {res['seed']}, rank <= "
             f"{res['max_rank']}, <= {res['max_axes']} mesh axes; a quarter each: the paper's "
             "precondition, even dims, uneven dims, pending sums), timed side by side"]
    if res.get("modules"):
        lines.append(f"  synthesizer modules: {res['modules']} (python -m synth.build --status)")
    for k, run in enumerate(res["per_run"]):
        if res["runs"] > 1:
            lines.append(f" run {k + 1}" + (f" (with {run['burners']} CPU burner processes)"
                                            if run["burners"] else ""))
        for p, r in run["planners"].items():
            extra = ""
            if "proven_optimal" in r:
                extra = (f"   proven optimal {r['proven_optimal']}   {r['states_per_s']:.0f} states/s, "
                         f"{r['moves_per_s']:.0f} moves/s   work budget exhausted "
                         f"{r['work_budget_exhausted']}   CPU-time cap fired {r['cap_fired']}")
            lines.append(f"  {p:7s} wall p50 {r['p50_ms']:8.3f} ms   p99 {r['p99_ms']:8.3f} ms   max "
                         f"{r['max_ms']:8.3f} ms;  CPU p50 {r['cpu_p50_ms']:8.3f} ms   p99 "
                         f"{r['cpu_p99_ms']:8.3f} ms   max {r['cpu_max_ms']:8.3f} ms")
            lines.append(f"          within bound {r['within_bound']}/{res['cases']}{extra}")
    cyc = [run.get("cyclic_garbage_objects") for run in res["per_run"]]
    if all(c is not None for c in cyc):
        lines.append(f"  cyclic garbage the calls left (freed later by the collector, not when each "
                     f"call returned): {' / '.join(str(c) for c in cyc)} objects"
                     + (" (none: each call's cost is in its figures)" if not any(cyc) else
                        " (NOT zero: the figures miss the collector's work)"))
    if res["runs"] > 1:
        lines.append(f"  identical plans across the {res['runs']} runs: "
                     + ("yes" if res["identical_plans"] else f"NO (cases {res['differing_cases']})"))
    if res.get("slowest"):
        lines.append(f"  slowest {len(res['slowest'])} cases (auto, run 1, CPU time):")
        for r in res["slowest"]:
            lines.append(f"    #{r['case']:<5d} {r['cpu_ms']:9.2f} ms  {r['states']:6d} states {r['moves']:7d} moves  "
                         f"{r['status']}:  --mesh {r['mesh']} --src '{r['src']}' --dst '{r['dst']}'")
    lines.append("  targets (auto): p50 <= 0.5 ms, p99 <= 50 ms, identical plans under load (CPU time is "
                 "this process's own; wall time includes waiting for a core on a loaded machine; "
                 "states/s and moves/s are per CPU second)")
    return "\n".join(lines)


def run_budget_quality(cases: int = 2000, seed: int = 0, budget_moves: int = 4000,
                       base_moves: int | None = None, max_axes: int = 6, max_rank: int = 4) -> dict:
    """What a work budget does to plan quality: every case planned by ``auto`` at
    ``base_moves`` (default :data:`~synth.planners.cost.DEFAULT_BUDGET_MOVES`) and at
    ``budget_moves``, the two final plans compared case by case: predicted time (cheaper /
    equal / costlier, and by how much), peak live memory, the memory bound, collectives,
    proven optimal, and the CPU time per call of each (this process's own)."""
    from synth.planners import DEFAULT_BUDGET_MOVES, synthesize

    base_moves = DEFAULT_BUDGET_MOVES if base_moves is None else int(base_moves)
    inputs = bench_cases(cases, seed, max_axes, max_rank)
    time_cmp = {"cheaper": 0, "equal": 0, "costlier": 0}
    peak = {"lower": 0, "equal": 0, "higher": 0}
    coll = {"fewer": 0, "equal": 0, "more": 0}
    lost_bound = gained_bound = identical = 0
    optimal = [0, 0]
    worse, cpu = [], ([], [])
    for k, (mesh, src, dst) in enumerate(inputs):
        plans = []
        for side, moves in enumerate((base_moves, budget_moves)):
            c0 = time.process_time()
            plans.append(synthesize(mesh, src, dst, budget_moves=moves))
            cpu[side].append(time.process_time() - c0)
        a, b = plans
        ta, tb = a.search["time_s"], b.search["time_s"]
        rel = (tb - ta) / ta if ta > 0 else (math.inf if tb > 0 else 0.0)
        if rel > 1e-9:
            time_cmp["costlier"] += 1
            worse.append((rel, k))
        elif rel < -1e-9:
            time_cmp["cheaper"] += 1
        else:
            time_cmp["equal"] += 1
        pa, pb = a.peak_live_bytes, b.peak_live_bytes
        peak["lower" if pb < pa else "higher" if pb > pa else "equal"] += 1
        ca, cb = a.num_collectives, b.num_collectives
        coll["fewer" if cb < ca else "more" if cb > ca else "equal"] += 1
        lost_bound += a.bound_holds and not b.bound_holds
        gained_bound += b.bound_holds and not a.bound_holds
        identical += plan_digest(a) == plan_digest(b)
        optimal[0] += bool(a.search.get("optimal"))
        optimal[1] += bool(b.search.get("optimal"))
    worse.sort(key=lambda w: (-w[0], w[1]))
    rel = np.array([w for w, _ in worse]) if worse else np.zeros(0)

    def pct(xs):
        ms = np.array(xs) * 1e3
        return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
                "max_ms": float(ms.max())}

    return {"cases": cases, "seed": seed, "base_moves": base_moves, "budget_moves": int(budget_moves),
            "time": time_cmp, "identical_plans": identical, "peak_live": peak, "collectives": coll,
            "bound_lost": int(lost_bound), "bound_gained": int(gained_bound),
            "proven_optimal": optimal, "within_tie_tolerance": int((rel <= 0.01).sum()),
            "costlier_median_pct": float(np.median(rel) * 100) if len(rel) else 0.0,
            "costlier_max_pct": float(rel.max() * 100) if len(rel) else 0.0,
            "worst_cases": [k for _, k in worse[:10]],
            "cpu_base": pct(cpu[0]), "cpu_budget": pct(cpu[1])}


def format_budget_quality(res: dict) -> str:
    t, p, c = res["time"], res["peak_live"], res["collectives"]
    b0, b1 = res["base_moves"], res["budget_moves"]
    return "\n".join([
        f"synth bench --quality-at {b1}: {res['cases']} seeded cases (seed {res['seed']}), auto's final "
        f"plan at {b1} moves against {b0} moves, case by case",
        f"  predicted time: cheaper {t['cheaper']}, equal {t['equal']}, costlier {t['costlier']} "
        f"(within the 1% tie tolerance: {res['within_tie_tolerance']}; costlier by median "
        f"{res['costlier_median_pct']:.2f}%, max {res['costlier_max_pct']:.1f}%; worst cases "
        f"{res['worst_cases']}); identical plans {res['identical_plans']}",
        f"  peak live: lower {p['lower']}, equal {p['equal']}, higher {p['higher']};  memory bound: "
        f"lost {res['bound_lost']}, gained {res['bound_gained']};  collectives: fewer {c['fewer']}, "
        f"equal {c['equal']}, more {c['more']}",
        f"  proven optimal: {res['proven_optimal'][0]} at {b0} moves, {res['proven_optimal'][1]} at {b1}",
        f"  CPU per call (this process): at {b0} moves p50 {res['cpu_base']['p50_ms']:.2f} ms, p99 "
        f"{res['cpu_base']['p99_ms']:.1f} ms, max {res['cpu_base']['max_ms']:.0f} ms; at {b1} moves p50 "
        f"{res['cpu_budget']['p50_ms']:.2f} ms, p99 {res['cpu_budget']['p99_ms']:.1f} ms, max "
        f"{res['cpu_budget']['max_ms']:.0f} ms",
    ])


# -- the exhaustive reference -------------------------------------------------------------
def _all_types(names, sizes, shape):
    """Every valid type (tuple of axis tuples per dim) over mesh axes ``names``."""
    rank = len(shape)
    out = []
    for assign in itertools.product(range(-1, rank), repeat=len(names)):
        per = [[n for n, k in zip(names, assign) if k == i] for i in range(rank)]
        if any(shape[i] % math.prod(sizes[a] for a in per[i]) for i in range(rank)):
            continue
        for orders in itertools.product(*(itertools.permutations(p) for p in per)):
            out.append(tuple(orders))
    return out


def exhaustive_min_max_shard(mesh: Mesh, src: ArrayType, dst: ArrayType, max_fused: int | None = None) -> int:
    """The least largest shard (elements) of any plan from ``src`` to ``dst``, by a
    minimax search over every type and every move: DynSlice, AllGather and AllToAll of
    any minor-most suffix (one fused group of at most ``max_fused`` devices), and an
    AllPermute to any valid type with the same local shape. Size-1 axes are dropped
    (they hold no data). Written independently of :mod:`synth.planners`, for checking it."""
    from synth.planners import MAX_FUSED_GROUP

    max_fused = MAX_FUSED_GROUP if max_fused is None else max_fused
    sizes = {a: s for a, s in mesh.axes if s > 1}
    names = tuple(sizes)
    shape = src.shape
    total = math.prod(shape)

    def strip(t):
        return tuple(tuple(a for a in d.axes if a in sizes) for d in t.dims)

    def split(S):
        return tuple(math.prod(sizes[a] for a in axes) for axes in S)

    def shard(S):
        return total // math.prod(split(S))

    types = _all_types(names, sizes, shape)
    by_local = {}
    for S in types:
        by_local.setdefault(split(S), []).append(S)
    S0, T = strip(src), strip(dst)

    def succ(S):
        sp = split(S)
        used = {a for axes in S for a in axes}
        for i, axes in enumerate(S):
            for a in names:
                if a not in used and (shape[i] // sp[i]) % sizes[a] == 0:
                    yield S[:i] + (axes + (a,),) + S[i + 1:]
            for k in range(1, len(axes) + 1):
                suf = axes[len(axes) - k:]
                n = math.prod(sizes[a] for a in suf)
                if k > 1 and n > max_fused:
                    break
                rest = axes[: len(axes) - k]
                yield S[:i] + (rest,) + S[i + 1:]
                for j in range(len(S)):
                    if j != i and (shape[j] // sp[j]) % n == 0:
                        S2 = list(S)
                        S2[i] = rest
                        S2[j] = S[j] + suf
                        yield tuple(S2)
        yield from by_local[sp]

    best = {S0: shard(S0)}
    heap = [(shard(S0), S0)]
    done = set()
    while heap:
        b, S = heapq.heappop(heap)
        if S in done:
            continue
        if S == T:
            return b
        done.add(S)
        for S2 in succ(S):
            b2 = max(b, shard(S2))
            if best.get(S2, total + 1) > b2:
                best[S2] = b2
                heapq.heappush(heap, (b2, S2))
    raise AssertionError(f"exhaustive search: {dst} unreachable from {src} on {mesh}")


def agreement_cases(cases: int, seed: int):
    """Seeded cases for the agreement check, rank <= 3, in eight shares: small even
    cases (<= 16 devices, axes of 2-4; the paper's precondition true, or random dim
    sizes), "tight" even cases on up to 4 axes of 2-8 (<= 512 devices, each dim a
    multiple of only some axes: where bounded plans can fail to exist), uneven dims
    (<= 16 devices) and pending sums (<= 16 devices). The exhaustive reference enumerates
    types, not devices, so it stays cheap."""
    rng = random.Random(seed)
    out = []
    for i in range(cases):
        k = i % 8
        if k in (0, 4):
            c = random_case(rng, max_axes=4, max_rank=3, precondition=True, axis_sizes=(2, 3, 4),
                            max_devices=16, even=True)
        elif k in (1, 5):
            c = random_case(rng, max_axes=4, max_rank=3, precondition=False, axis_sizes=(2, 3, 4),
                            max_devices=16, even=True, shapes=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48))
        elif k == 2:
            c = random_case(rng, max_axes=4, max_rank=3, precondition=False, axis_sizes=(2, 3, 4, 6, 8),
                            max_devices=512, even=True, shapes="tight")
        elif k == 3:
            c = random_case(rng, max_axes=3, max_rank=3, precondition=False, axis_sizes=(2, 3, 4),
                            max_devices=16, shapes=(3, 5, 6, 7, 10, 12, 16))
        elif k == 6:
            c = random_case(rng, max_axes=4, max_rank=3, precondition=False, axis_sizes=(2, 3, 4, 6, 8),
                            max_devices=512, even=True, shapes="tight")
        else:
            mesh, src, dst = random_case(rng, max_axes=3, max_rank=3, precondition=bool(i % 16 == 7),
                                         axis_sizes=(2, 3, 4), max_devices=16, even=True)
            r = rng.random()
            if r < 0.7:
                src = _with_pending(rng, mesh, src)
            if r >= 0.4:
                dst = _with_pending(rng, mesh, dst)
            c = (mesh, src, dst)
        out.append(c)
    return out


def check_plan_exact(plan) -> None:
    """Run the plan in the interpreter (on its work mesh, where sub-axes are axes) on
    ``arange`` and compare every device's final block with the target's, element by
    element (raises on any difference); the interpreter also checks every step."""
    from synth.interp import check_blocks, interpret

    wm, wt = plan.work_mesh, plan.work_types
    x = np.arange(plan.src.num_elems(), dtype=np.int64).reshape(plan.src.shape)
    blocks = interpret(plan.steps, wt[0], wm, x)
    check_blocks(x, blocks, wt[-1], wm, "end of plan")
    if plan.dst.canonical(plan.mesh) != plan.dst or (plan.steps and plan.types[-1] != plan.dst):
        raise AssertionError(f"plan ends at {plan.types[-1] if plan.steps else plan.src}, not {plan.dst}")


def _reference(mesh, src, dst, plan, plan_floor: int, out: dict):
    """:func:`synth.agreement.reference_search` on an uneven or pending case (meshes up to
    its device cap), counted into ``out``: ``optimal_above_reference`` (a plan ``auto``
    calls optimal costs more than the reference's optimum) and ``reference_above_auto``
    (the reference costs more than a plan ``auto`` found within its cap, or its least
    largest shard is above ``normal``'s or ``easy``'s: a gap in the reference) must be 0."""
    from synth.agreement import MAX_REFERENCE_DEVICES, reference_search

    if mesh.size > MAX_REFERENCE_DEVICES:
        out["reference_skipped"] += 1
        return None
    r = reference_search(mesh, src, dst, plan.itemsize)
    if r is None:
        out["reference_skipped"] += 1
        return None
    out["reference_searched"] += 1
    s = plan.search or {}
    bad = None
    cap = max(plan.bound_bytes, s.get("min_max_shard_bytes") or 0)  # the cap auto searched within
    if s.get("optimal") and s["optimum_s"] > r["optimum_s"] * (1 + 1e-9) and cap >= r["cap_bytes"]:
        out["optimal_above_reference"] += 1
        bad = "auto's optimum above the reference's"
    if (plan.max_shard_bytes <= r["cap_bytes"] and r["optimum_s"] > s.get("time_s", math.inf) * (1 + 1e-9)) or \
            r["min_max_shard_bytes"] > plan_floor:
        out["reference_above_auto"] += 1
        bad = "the reference above a plan that exists"
    if bad and len(out["examples"]) < 5:
        out["examples"].append({"mesh": str(mesh), "src": str(src), "dst": str(dst), "why": bad,
                                "auto": [str(c) for c in plan.steps], "auto_optimum_s": s.get("optimum_s"),
                                "reference": r["steps"], "reference_optimum_s": r["optimum_s"]})
    return r


def run_agreement(cases: int = 1000, seed: int = 0, auto_kw: dict | None = None) -> dict:
    """``auto`` against references on :func:`agreement_cases`, every plan checked element
    by element. Even cases without pending sums: the exhaustive least largest shard over
    whole axes (:func:`exhaustive_min_max_shard`; auto's move set contains those moves,
    so auto may only be below it, via sub-axes). Uneven and pending cases on up to 16
    devices: :func:`synth.agreement.reference_search`, an exhaustive search over every
    type and every step of the collectives table on the work mesh (sub-axes included):
    its least largest shard, and its least cost within auto's memory cap, which a plan
    auto calls optimal must equal; larger ones: the better of the ``normal`` and ``easy``
    planners' plans (auto must never have a larger largest shard than the better of them). Every case: a plan ``auto`` calls optimal never costs more
    than ``normal``'s within the same memory cap."""
    from synth.planners import DefaultCost, schedule_cost, synthesize

    if isinstance(auto_kw, (int, float)):  # the old positional budget_ms
        auto_kw = {"budget_ms": auto_kw}
    auto_kw = dict(auto_kw or {})
    out = {"cases": cases, "seed": seed, "bounded_exists": 0, "bound_misses": 0,
           "above_min_max_shard": 0, "below_via_sub_axes": 0, "auto_within_bound": 0, "auto_optimal": 0,
           "optimal_costlier_than_normal": 0, "checked_exactly": 0,
           "precondition_true": 0, "precondition_false": 0, "uneven": 0, "pending": 0, "sub_axes_used": 0,
           "above_normal_or_easy": 0, "reference_searched": 0, "reference_skipped": 0,
           "optimal_above_reference": 0, "reference_above_auto": 0, "examples": []}
    for mesh, src, dst in agreement_cases(cases, seed):
        pre = all(s % mesh.size == 0 for s in src.shape)
        out["precondition_true" if pre else "precondition_false"] += 1
        plan = synthesize(mesh, src, dst, planner="auto", **auto_kw)
        check_plan_exact(plan)
        out["checked_exactly"] += 1
        out["sub_axes_used"] += bool(plan.work_mesh.base)
        uneven = not (_is_even(src, mesh) and _is_even(dst, mesh))
        pending = bool(src.unreduced or dst.unreduced)
        out["uneven"] += uneven
        out["pending"] += pending
        ref = synthesize(mesh, src, dst, planner="normal")
        miss = above = False
        if not uneven and not pending:
            m = exhaustive_min_max_shard(mesh, src, dst) * plan.itemsize
            bounded = m <= plan.bound_bytes
            out["bounded_exists"] += bounded
            miss = bounded and plan.max_shard_bytes > plan.bound_bytes
            above = plan.max_shard_bytes > m
            out["below_via_sub_axes"] += plan.max_shard_bytes < m  # sub-axes beat whole axes
        else:
            easy = synthesize(mesh, src, dst, planner="easy")
            m = min(ref.max_shard_bytes, easy.max_shard_bytes)
            exh = _reference(mesh, src, dst, plan, m, out)
            if exh is not None:
                m = exh["min_max_shard_bytes"]
            bounded = m <= plan.bound_bytes
            out["bounded_exists"] += bounded
            miss = bounded and plan.max_shard_bytes > plan.bound_bytes
            above = plan.max_shard_bytes > m
            out["above_normal_or_easy"] += above
        out["bound_misses"] += miss
        out["above_min_max_shard"] += above
        out["auto_within_bound"] += plan.bound_holds
        optimal = bool(plan.search and plan.search.get("optimal"))
        out["auto_optimal"] += optimal
        # a plan called optimal costs no more than normal's whenever normal's is within
        # the same memory cap (normal's moves are among auto's)
        if optimal and ref.max_shard_bytes <= plan.search["min_max_shard_bytes"]:
            if schedule_cost(ref, DefaultCost())[0] < plan.search["optimum_s"] * (1 - 1e-9):
                out["optimal_costlier_than_normal"] += 1
                above = True
        if (miss or above) and len(out["examples"]) < 5:
            out["examples"].append({"mesh": str(mesh), "src": str(src), "dst": str(dst),
                                    "auto_max_shard_bytes": plan.max_shard_bytes,
                                    "reference_max_shard_bytes": m})
    return out
