"""The one place experiments/ touches the layers below: synth plans, the simulator,
and the executor. Everything here runs inside a worker process.

* :func:`our_schedule`   -- a synth plan (``easy`` / ``normal``) and its device-level schedule;
* :func:`xla_schedule`   -- XLA's own resharding for ``xla-shardy`` / ``xla-gspmd``,
  extracted from the compiled HLO by the executor (needs JAX with N CPU devices);
* :func:`simulate`       -- a schedule replayed on a machine profile (the simulator);
* :func:`measure`        -- the executor's comparison on the local JAX backend.

Heavy imports (jax via the executor, simpy via the simulator) happen inside the
functions, so importing experiments stays fast.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

import numpy as np

from experiments.case import Case, ExperimentError
from synth.schedule import Schedule


def _our_planners() -> tuple[str, ...]:
    from synth.planners import PLANNERS as SYNTH_PLANNERS

    return tuple(SYNTH_PLANNERS)


OUR_PLANNERS = _our_planners()  # easy, normal (and search when synth has it)
XLA_PLANNERS = {"xla-shardy": "shardy", "xla-gspmd": "gspmd"}
PLANNERS = OUR_PLANNERS + tuple(XLA_PLANNERS) + ("shardy-r2c",)

#: Largest mesh for which XLA's CPU backend compiles here: at 4096 virtual devices the
#: compile fails with "Multiprocess computations aren't implemented on the CPU backend"
#: (jax 0.10.2, measured on this machine); up to 2048 it compiles in about a second.
XLA_MAX_DEVICES = 2048


def needs_jax(planner: str, measure: bool, profiles=()) -> bool:
    """Whether a unit needs JAX with its case's number of CPU devices: XLA's schedule
    (compiled on the CPU backend unless the machine's compiler is elsewhere), a local
    measurement, or any program compiled for a ``cpu-*`` machine."""
    return planner in XLA_PLANNERS or measure or any(str(p).startswith("cpu") for p in profiles)


# -- schedules ---------------------------------------------------------------------------
#: The CPU-time safety cap of the ``auto`` planner in sweeps, in seconds. The search is
#: budgeted in work (moves examined, below), so a loaded host changes no plan as long as
#: this cap never fires. synth's interactive default (10 s) is too tight for that: the
#: largest paper.yaml rows (4096 devices, 48 moves on a machine's cost) take about 3 s of
#: CPU and 4-5 s of wall time on this project's 2-core VM at load 4, and over 10 s at the
#: load of parallel sweep workers, so the cap fired on some of them and their plans
#: changed with the load. 120 s is about 40x their CPU time; a plan cut by it still says
#: so in its notes.
AUTO_BUDGET_S = 120.0

#: The work budget of ``auto`` in sweeps, in moves examined x devices: a machine's cost
#: of one move grows with the mesh (every op is costed on the whole machine), so sweeps
#: give ``AUTO_WORK_MOVE_DEVICES / devices`` moves (at least :data:`AUTO_MIN_MOVES`, at
#: most synth's default): 50,000 moves on 8 devices, 6,250 on 64, 1,562 on 256, 300 on
#: 4096. ``models.plan_cost`` routes each op structure once (the search's ops repeat their
#: structures at other sizes), and auto's seed finds XLA's usual shapes of plan (one
#: collective and one permute) in a few hundred moves, which the floor of 300 leaves room
#: for on 4096 devices (fsdp-tp-transpose-405b-4096: XLA's two collectives; at the old 48
#: moves three). It is a function of the case alone, so every run of a sweep gives the same
#: plans on any host at any load, and each search stays well inside the safety cap. A plan
#: cut by it says "best found within the work budget" in its row.
AUTO_WORK_MOVE_DEVICES = 400_000
AUTO_MIN_MOVES = 300


def auto_budget_moves(num_devices: int) -> int:
    """The sweep's work budget for ``auto`` on a mesh of ``num_devices`` devices."""
    from synth.planners import DEFAULT_BUDGET_MOVES

    return max(AUTO_MIN_MOVES, min(DEFAULT_BUDGET_MOVES, AUTO_WORK_MOVE_DEVICES // max(1, num_devices)))


def our_schedule(case: Case, planner: str, itemsize: int, machine=None, placement=None):
    """``(plan, schedule)`` for one of our planners. With ``machine`` (a loaded profile),
    ``auto`` plans for that machine and ``placement``: its cost is the machine's
    (:func:`models.plan_cost.machine_cost`)."""
    from synth.planners import synthesize

    mesh, src, dst = case.parsed()
    kw = {}
    if planner == "auto":
        if AUTO_BUDGET_S is not None:
            kw["budget_s"] = AUTO_BUDGET_S
        kw["budget_moves"] = auto_budget_moves(mesh.size)
        if machine is not None:
            from models.plan_cost import machine_cost

            kw["cost"] = machine_cost(machine, mesh, resolve_placement(placement, mesh))
    plan = synthesize(mesh, src, dst, planner=planner, itemsize=itemsize, **kw)
    return plan, plan.to_schedule()


#: Hardware profiles whose programs are compiled by XLA's TPU compiler (libtpu, ahead of
#: time, for the machine's slice: executor.tpu).
TPU_PROFILES = ("tpu-v5p", "tpu-v4", "tpu-v5e", "tpu-v6e")
#: The TPU compiler compiles for whole slices; libtpu handles 4096 chips in seconds.
TPU_MAX_DEVICES = 8960
#: Baselines that are plans from another lowering: Shardy's reshard-to-collectives pass
#: (executor.shardy), lowered and compiled like ours.
SHARDY_PLANNERS = ("shardy-r2c",)
#: Our planners whose plans are compiled by the machine's compiler by default
#: (``runner.compile``); the others keep the plan's own schedule (``compiler = none``).
DEFAULT_COMPILE = ("auto",)


def compiler_for(machine) -> str:
    """The compiler of ``machine``'s own programs: ``libtpu`` (TPU profiles), ``xla-gpu``
    (GPU profiles) or ``xla-cpu`` (``cpu-*`` profiles)."""
    from executor.tpu import compiler_for_profile

    return compiler_for_profile(getattr(machine, "name", "cpu"))


_MISSING: dict = {}


def compiler_missing(machine) -> str | None:
    """``None`` when ``machine``'s compiler is installed here, else why not (one line)."""
    from executor.tpu import compiler_missing as why

    name = getattr(machine, "name", "cpu")
    if name not in _MISSING:
        _MISSING[name] = why(name)
    return _MISSING[name]


def missing_short(machine) -> str:
    """Which compiler is missing, in a few words (rows repeat it; docs/executor.md says how
    to install it)."""
    return {"libtpu": "libtpu is not installed here", "xla-gpu": "XLA's GPU compiler (jax-cuda12-plugin) is "
            "not installed here"}.get(compiler_for(machine), str(compiler_missing(machine)))


def xla_compiler_for(machine) -> str:
    """Which compiler produces XLA's schedule on ``machine``: the machine's own when it is
    installed (``libtpu``, ``xla-gpu``, ``xla-cpu``), else ``xla-cpu`` (XLA's CPU backend's
    HLO; the comparison on that machine is then collectives-only)."""
    if machine is None:
        return "xla-cpu"
    return compiler_for(machine) if compiler_missing(machine) is None else "xla-cpu"


def xla_schedule(case: Case, planner: str, itemsize: int, max_devices: int = XLA_MAX_DEVICES,
                 machine=None, placement=None) -> Schedule:
    """XLA's resharding of ``case`` as a :class:`synth.Schedule` (``meta['full_remat']``,
    ``meta['compiler']``, ``meta['temp_bytes']``).

    Compiled by ``machine``'s own compiler when it is installed (TPU: libtpu for the
    slice, the mesh placed on chips as the simulator places it; GPU: XLA's GPU compiler;
    ``cpu-*``: the CPU backend), through :func:`executor.compare.compiled_schedule`, the
    path our compiled plans take. Where it is not installed, the schedule is XLA's CPU
    backend's HLO (``compiler = xla-cpu``) and the row's notes say the comparison is
    collectives-only. CPU compiles run in a process whose JAX backend has exactly
    ``case.num_devices`` CPU devices (the runner starts such workers). No array is
    materialized either way."""
    if planner not in XLA_PLANNERS:
        raise ExperimentError(f"planner {planner!r} is not an XLA planner ({sorted(XLA_PLANNERS)})")
    comp = xla_compiler_for(machine)
    if comp in ("libtpu", "xla-gpu"):
        return _target_xla_schedule(case, planner, itemsize, machine, placement)
    n = case.num_devices
    if n > max_devices:
        raise ExperimentError(
            f"{planner}: mesh {case.mesh} has {n} devices; XLA's CPU backend here compiles "
            f"meshes of at most {max_devices} virtual devices (raise runner.xla_max_devices "
            "only on a machine where larger compiles work; TPU machines compile with libtpu instead)"
        )
    mesh, src, dst = case.parsed()
    import executor

    # XLA's CPU backend widens bfloat16/float16 collectives to float32 (it inserts a
    # convert before the all-gather), which would double XLA's bytes against what a
    # TPU or GPU moves. So the schedule is extracted for a 4-byte element type and
    # its byte counts rescaled to the case's element size.
    sched = executor.xla_schedule(mesh, src, dst, partitioner=XLA_PLANNERS[planner], dtype=EXTRACT_DTYPE)
    sched = slices_as_slices(rescale_schedule(sched, itemsize, EXTRACT_ITEMSIZE))
    # Name the redistribution so the lower bound is the same one our plans get.
    dt = _dtype_for(case, itemsize)
    sched.meta.update({"mesh": str(mesh), "src": str(src), "dst": str(dst), "itemsize": itemsize,
                       "extracted_dtype": EXTRACT_DTYPE, "compiler": "xla-cpu",
                       "dtype_handling": (f"compiled as {EXTRACT_DTYPE}, bytes scaled to {dt}"
                                          if itemsize != EXTRACT_ITEMSIZE else f"compiled as {dt}")})
    if machine is not None and compiler_for(machine) != "xla-cpu":
        sched.meta["collectives_only"] = (f"collectives-only on {machine.spec}: {missing_short(machine)}; "
                                          "XLA's schedule is the CPU backend's")
    return sched


#: XLA's compiled reshards kept by this process (the ``auto`` rows' memory-first check
#: and the XLA rows compile the same programs): at most this many, oldest dropped first.
XLA_COMPILED_KEEP = 64
_XLA_COMPILED: dict = {}


def _target_xla_schedule(case: Case, planner: str, itemsize: int, machine, placement) -> Schedule:
    import copy

    key = (planner, case.mesh, case.src, case.dst, itemsize, case.dtype, machine.spec,
           str(resolve_placement(placement, case.parsed()[0]) or "default"))
    if key not in _XLA_COMPILED:
        if len(_XLA_COMPILED) >= XLA_COMPILED_KEEP:
            _XLA_COMPILED.pop(next(iter(_XLA_COMPILED)))
        _XLA_COMPILED[key] = _compile_target_xla(case, planner, itemsize, machine, placement)
    return copy.deepcopy(_XLA_COMPILED[key])


def _compile_target_xla(case: Case, planner: str, itemsize: int, machine, placement) -> Schedule:
    from executor.compare import compiled_schedule

    mesh, src, dst = case.parsed()
    if case.num_devices > TPU_MAX_DEVICES:
        raise ExperimentError(f"{planner}: mesh {case.mesh} has {case.num_devices} devices; TPU slices "
                              f"have at most {TPU_MAX_DEVICES} chips")
    sched = compiled_schedule(machine.spec, planner, mesh, src, dst, dtype=_dtype_for(case, itemsize),
                              placement=resolve_placement(placement, mesh))
    sched = slices_as_slices(sched)
    sched.meta.update({"mesh": str(mesh), "src": str(src), "dst": str(dst), "itemsize": itemsize})
    return sched


class TargetRejected(ExperimentError):
    """The machine's compiler has no such machine (a TPU slice libtpu does not make, e.g.
    6 chips), as opposed to a program that fails to compile."""


def compiled_plan_schedule(case: Case, plan, itemsize: int, machine, placement=None,
                           strategy: str = "ours") -> Schedule:
    """Our plan (or Shardy's, ``strategy='shardy-r2c'``) compiled by ``machine``'s own
    compiler and read back from its HLO, exactly as XLA's reshard is
    (:func:`executor.compare.compiled_schedule`); local ops are in the schedule."""
    from executor.compare import compiled_schedule

    mesh, src, dst = case.parsed()
    from executor.tpu import TargetError

    place = resolve_placement(placement, mesh) if compiler_for(machine) == "libtpu" else None
    try:
        sched = compiled_schedule(machine.spec, strategy, mesh, src, dst, plan=plan,
                                  dtype=_dtype_for(case, itemsize), placement=place)
    except TargetError as e:
        raise TargetRejected(str(e)) from None
    sched = slices_as_slices(sched)
    sched.meta.update({"mesh": str(mesh), "src": str(src), "dst": str(dst), "itemsize": itemsize})
    return sched


def shardy_plan(case: Case, itemsize: int):
    """Shardy's reshard-to-collectives plan for ``case`` (:mod:`executor.shardy`)."""
    from executor.shardy import shardy_plan as build

    mesh, src, dst = case.parsed()
    return build(mesh, src, dst, itemsize)


EXTRACT_DTYPE, EXTRACT_ITEMSIZE = "float32", 4


def slices_as_slices(s: Schedule) -> Schedule:
    """Local ``copy`` ops that output less than their operand are slices (XLA's slice
    and dynamic-slice fusions): cost them as ``dyn_slice`` (read and write the output),
    not as reading the whole operand, as our own plans' slices are costed. Buffers
    (``in_bytes``/``out_bytes``, hence memory) are unchanged."""
    ops, n = [], 0
    for o in s.ops:
        if o.kind == "copy" and o.out_bytes < o.in_bytes:
            o = replace(o, kind="dyn_slice")
            n += 1
        ops.append(o)
    if not n:
        return s
    return Schedule(s.num_devices, tuple(ops), s.name, dict(s.meta, slices_from_copies=n))


def _scale_bytes(s: Schedule, num: int, den: int) -> Schedule:
    def sc(v):
        return int(v) * num // den

    ops = tuple(replace(o, in_bytes=sc(o.in_bytes), out_bytes=sc(o.out_bytes), send_bytes=sc(o.send_bytes),
                        recv_bytes=sc(o.recv_bytes)) for o in s.ops)
    meta = dict(s.meta)
    for k in ("initial_bytes", "final_bytes", "peak_pair_bytes", "temp_bytes", "output_bytes", "argument_bytes",
              "alias_bytes", "compiled_peak_bytes"):
        if isinstance(meta.get(k), int):
            meta[k] = sc(meta[k])
    return Schedule(s.num_devices, ops, s.name, meta)


def rescale_schedule(s: Schedule, itemsize: int, extracted_itemsize: int) -> Schedule:
    """``s`` with every byte count scaled from ``extracted_itemsize`` to ``itemsize``."""
    return s if itemsize == extracted_itemsize else _scale_bytes(s, itemsize, extracted_itemsize)


def _dtype_for(case: Case, itemsize: int) -> str:
    if itemsize == case.itemsize:
        return case.dtype
    return {1: "int8", 2: "bfloat16", 4: "float32", 8: "float64"}[itemsize]


def set_worker_devices(n: int) -> None:
    """Ask for ``n`` CPU devices; must run before JAX's backend starts in this process."""
    flag = "--xla_force_host_platform_device_count"
    flags = re.sub(rf"{flag}=\d+", "", os.environ.get("XLA_FLAGS", "")).strip()
    os.environ["XLA_FLAGS"] = f"{flags} {flag}={n}".strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


# -- schedule metrics ----------------------------------------------------------------------
def schedule_metrics(s: Schedule) -> dict:
    """Per-device byte figures of any schedule (ours or XLA's), all in bytes."""
    recv = np.zeros(s.num_devices, dtype=np.int64)
    for op in s.ops:
        if op.is_local:
            continue
        if op.kind == "permute":
            for _, d in op.pairs:
                recv[d] += op.recv_bytes or op.send_bytes
        else:
            for g in op.groups:
                recv[list(g)] += op.recv_bytes
    initial = s.initial_bytes
    final = int(s.meta.get("final_bytes", s.ops[-1].out_bytes if s.ops else initial))
    return {
        "max_buffer_bytes": int(max([initial, final] + [max(o.in_bytes, o.out_bytes) for o in s.ops])),
        "peak_pair_bytes": int(max([initial, final] + [o.in_bytes + o.out_bytes for o in s.ops])),
        "recv_bytes_max_device": int(recv.max()) if len(recv) else 0,
        "num_collectives": sum(1 for o in s.ops if not o.is_local),
        "num_ops": len(s.ops),
    }


# -- machines and simulation ----------------------------------------------------------------
from models.profiles import auto_size  # noqa: E402 - the one sizing rule, shared with simulator bound-ratio


def load_machine(profile: str, num_devices: int, sizes=None, bandwidth_scale=1.0, latency_scale=1.0):
    """The profile sized for ``num_devices`` (``sizes[num_devices]`` when the config gives
    one, else :func:`auto_size`), with the what-if scales applied."""
    import models

    if sizes and num_devices in sizes:
        m = models.load_profile(profile, str(sizes[num_devices]))
    else:
        base = models.load_profile(profile)
        if base.num_devices == num_devices:
            m = base
        else:
            gpn = base.dims[1] if base.kind == "switched" else 8
            m = models.load_profile(profile, auto_size(base.kind, len(base.dims), num_devices, gpn))
    if m.num_devices != num_devices:
        raise ExperimentError(
            f"machine {m.spec} has {m.num_devices} devices but the case's mesh has {num_devices}; "
            f"give a size for {num_devices} devices under the machine's 'sizes' in the config"
        )
    if bandwidth_scale != 1.0 or latency_scale != 1.0:
        m = m.with_scale(bandwidth_scale=bandwidth_scale, latency_scale=latency_scale)
    return m


#: Placement names the experiments understand on any mesh (other strings go to models/).
PLACEMENTS = ("default", "reversed-axes", "random[:SEED]")


def resolve_placement(name, mesh):
    """A placement the simulator takes: ``None`` (row-major) or a list of chips.

    * ``default`` / ``row-major``: device ``d`` on chip ``d``;
    * ``reversed-axes``: the mesh's axes laid out in reverse order over the machine
      (the first mesh axis varies fastest across chips);
    * ``random`` / ``random:SEED``: a seeded random permutation of the chips;
    * anything else is a ``models.placement`` string (``x=Z,y=Y``, ``devices:...``)."""
    if name in (None, "", "default", "row-major"):
        return None
    if name == "reversed-axes":
        coords = mesh.coords
        idx = np.ravel_multi_index(tuple(coords[:, ::-1].T), tuple(reversed(mesh.sizes)))
        return [int(c) for c in idx]
    if name == "random" or str(name).startswith("random:"):
        seed = int(str(name).split(":", 1)[1]) if ":" in str(name) else 0
        return [int(c) for c in np.random.default_rng(seed).permutation(mesh.size)]
    return name


from synth.schedule import LOCAL_KINDS  # noqa: E402 - the schedule kinds that move no data between devices


def simulate(schedule: Schedule, machine, mesh, placement=None, engine: str = "simpy") -> dict:
    """``time_s``, ``lower_bound_s``, ``peak_bytes`` of ``schedule`` on ``machine``.

    ``engine='simpy'`` replays the schedule event by event (the simulator);
    ``engine='analytic'`` uses the models' closed-form per-op costs (fast, no
    queueing) -- for sweeps too large to replay."""
    place = resolve_placement(placement, mesh)
    if engine == "analytic":
        from models import analytic
        from models.placement import Placement

        chips = list(Placement.of(place, mesh, machine).chips)
        at = analytic.schedule_time_s(schedule, machine, chips)
        lb, _ = analytic.schedule_lower_bound(schedule, machine, chips)
        m = schedule_metrics(schedule)
        comm = sum(t for o, t in zip(schedule.ops, at["ops_s"]) if not o.is_local)
        local = sum(t for o, t in zip(schedule.ops, at["ops_s"]) if o.is_local)
        return {"time_s": float(at["time_s"]), "comm_time_s": float(comm), "local_time_s": float(local),
                "lower_bound_s": float(lb),
                "peak_bytes": m["peak_pair_bytes"], "sim_backend": "analytic"}
    if engine != "simpy":
        raise ExperimentError(f"runner.simulator {engine!r}: use 'simpy' or 'analytic'")
    import simulator

    kw = {"mesh": mesh}
    if place is not None:
        kw["placement"] = place
    r = simulator.simulate(schedule, machine, **kw)
    out = {
        "time_s": float(r.time_s),
        "lower_bound_s": float(r.lower_bound_s) if getattr(r, "lower_bound_s", None) is not None else None,
        "peak_bytes": int(r.peak_bytes_max_device),
        "sim_backend": "simpy",
        # Time in communicating ops only (local copies and slices left out).
        "comm_time_s": float(sum(o["duration_s"] for o in r.ops if o["kind"] not in LOCAL_KINDS)),
        # Time in local ops (copies, slices, transposes: HBM traffic at the profile's rate).
        "local_time_s": float(sum(o["duration_s"] for o in r.ops if o["kind"] in LOCAL_KINDS)),
    }
    link = getattr(r, "link_bytes_max", None)
    if link is not None:
        out["link_bytes_max"] = int(link)
    return out


def measure(case: Case, planner: str, itemsize: int, warmup: int = 2, repeats: int = 5) -> dict:
    """Time and temp memory of ``planner`` on the local JAX backend (the executor)."""
    from executor import run as xrun
    from synth.planners import synthesize

    mesh, src, dst = case.parsed()
    dtype = _dtype_for(case, itemsize)
    if planner in SHARDY_PLANNERS:
        r = xrun.run_plan(shardy_plan(case, itemsize), dtype=dtype, measure=True, warmup=warmup, repeats=repeats)
    elif planner in XLA_PLANNERS:
        r = xrun.xla_reshard(mesh, src, dst, partitioner=XLA_PLANNERS[planner], dtype=dtype,
                             measure=True, warmup=warmup, repeats=repeats)
    else:
        plan = synthesize(mesh, src, dst, planner=planner, itemsize=itemsize)
        r = xrun.run_plan(plan, dtype=dtype, measure=True, warmup=warmup, repeats=repeats)
    return {
        "measured_time_s": float(r.timing.time_s) if r.timing is not None else None,
        "measured_temp_bytes": r.memory.temp_bytes,
        "measured_correct": bool(r.correct),
    }


def xla_schedule_cached(cache: dict, case: Case, planner: str, itemsize: int, max_devices: int,
                        machine, placement=None) -> Schedule:
    """:func:`xla_schedule` for ``machine``, built once per unit and compiler target:
    once on XLA's CPU backend for the machines that fall back to it, once per machine
    size (and, on TPU, per placement) for the others."""
    comp = xla_compiler_for(machine)
    if comp == "libtpu":
        key = ("libtpu", machine.spec, str(placement or "default"))
    elif comp == "xla-gpu":
        key = ("xla-gpu", machine.spec)
    else:
        key = ("xla-cpu", compiler_for(machine) == "xla-cpu")
        placement = None
    return _cached(cache, key, lambda: xla_schedule(case, planner, itemsize, max_devices, machine=machine,
                                                    placement=placement))


def _cached(cache: dict, key, build):
    if key not in cache:
        try:
            cache[key] = build()
        except Exception as e:  # noqa: BLE001 - remembered so every row of this target reports it once
            cache[key] = e
    if isinstance(cache[key], Exception):
        raise cache[key]
    return cache[key]


def compiled_plan_cached(cache: dict, case: Case, plan, itemsize: int, machine, placement=None,
                         strategy: str = "ours") -> Schedule:
    """:func:`compiled_plan_schedule`, once per plan, machine size and placement."""
    key = (strategy, plan.to_json() if hasattr(plan, "to_json") else repr(plan), machine.spec,
           str(placement or "default") if compiler_for(machine) == "libtpu" else "")
    return _cached(cache, key, lambda: compiled_plan_schedule(case, plan, itemsize, machine, placement, strategy))


def memory_first(cache: dict, case: Case, plan, sched: Schedule, itemsize: int, machine, placement=None,
                 max_devices: int = XLA_MAX_DEVICES):
    """``auto``'s row on a machine whose compiler is installed: the memory-first rule of
    :mod:`executor.memfirst`. ``sched`` is ``plan`` compiled; XLA's two reshards are
    compiled by the same compiler (once per process: :data:`XLA_COMPILED_KEEP`), and
    where auto's temp bytes are above the smaller of theirs, up to
    :data:`executor.memfirst.MAX_ALTERNATIVES` other plans are compiled. Returns
    ``(plan, schedule, choice)``; the choice's ``note`` is empty where auto's plan is kept."""
    from executor import memfirst
    from models.plan_cost import machine_cost

    if sched.meta.get("temp_bytes") == 0:  # nothing to beat (most TPU rows): no XLA compile for it
        return plan, sched, memfirst.Choice(plan, "auto", 0, None, float("nan"), "", sched)
    comp = sched.meta.get("compiler")
    temps = []
    for p in XLA_PLANNERS:
        try:
            xs = xla_schedule_cached(cache.setdefault(("memory-first", p), {}), case, p, itemsize, max_devices,
                                     machine, placement)
        except Exception:  # noqa: BLE001 - XLA's row reports its own failure; no constraint here
            xs = None
        temps.append(xs.meta.get("temp_bytes") if xs is not None and xs.meta.get("compiler") == comp else None)
    mesh = case.parsed()[0]
    cost = machine_cost(machine, mesh, resolve_placement(placement, mesh))

    def compile_temp(p):
        try:
            s = compiled_plan_cached(cache, case, p, itemsize, machine, placement, "ours")
        except Exception:  # noqa: BLE001 - an alternative that does not compile is not chosen
            return None, None
        return s.meta.get("temp_bytes"), s

    ch = memfirst.choose(plan, sched.meta.get("temp_bytes"), sched, memfirst.xla_temp(*temps), compile_temp, cost)
    if ch.changed:
        s = ch.result
        s.meta["memory_first"] = ch.to_dict()
        return ch.plan, s, ch
    return plan, sched, ch


# -- memory measured by the TPU compiler ------------------------------------------------------
def tpu_memory(suites=("transformer", "xla-issues"), profiles=("tpu-v5p", "tpu-v4"), planner: str = "normal",
               progress=None, cases=None) -> dict:
    """Our plan's temp bytes against XLA's (Shardy and GSPMD), every program compiled
    by XLA's TPU compiler (libtpu) for a slice of each profile sized for the case (as
    the runner sizes machines). Returns the rows and the counts the issue asks for."""
    from executor import tpu
    from experiments.suites import load_suite

    for p in profiles:
        if p not in TPU_PROFILES:
            raise ExperimentError(f"tpu-memory: profile {p!r} is not a TPU profile; use {list(TPU_PROFILES)}")
    if cases is None:
        cases = [c for s in suites for c in load_suite(s)]
    rows = []
    todo = [(c, p) for p in profiles for c in cases]
    for i, (case, prof) in enumerate(todo):
        mesh, src, dst = case.parsed()
        base = {"suite": case.suite, "case": case.name, "profile": prof, "num_devices": case.num_devices}
        try:
            machine = load_machine(prof, case.num_devices)
            # our plan exactly as the sweep's row plans it (auto: the machine's cost, the row's budget)
            plan, _ = our_schedule(case, planner, case.itemsize, machine)
            from models.plan_cost import machine_cost

            # auto's memory-first choice ranks its alternatives by the cost auto planned with
            r = tpu.memory_case(machine.spec, mesh, src, dst, dtype=case.dtype, planner=planner, plan=plan,
                                cost=machine_cost(machine, mesh, resolve_placement(None, mesh)))
            rows.append({**base, "status": "ok", **r})
        except Exception as e:  # noqa: BLE001 - one failed case is a row, not the end of the table
            rows.append({**base, "status": "error", "error": f"{type(e).__name__}: {e}"})
        if progress:
            progress(i + 1, len(todo), f"{prof} {case.name}")
    return {"rows": rows, "summary": tpu_memory_summary(rows), "planner": planner,
            "suites": list(suites), "profiles": list(profiles)}


def _le(ours, xla) -> bool:
    """ours <= XLA, where None means "does not fit in the chip's memory"."""
    return xla is None or (ours is not None and ours <= xla)


def _lt(ours, xla) -> bool:
    return ours is not None and (xla is None or ours < xla)


def tpu_memory_summary(rows) -> list[dict]:
    """Per profile and partitioner: cases, ours <= XLA, ours < XLA, XLA remat cases and
    ours < XLA among them, XLA programs that do not fit in HBM, total temp bytes (over
    the cases where both compiled)."""
    out = []
    ok = [r for r in rows if r.get("status") == "ok"]
    for prof in sorted({r["profile"] for r in rows}):
        rs = [r for r in ok if r["profile"] == prof]
        for p in ("shardy", "gspmd"):
            # a program that does not fit in HBM rematerialized or worse: count it with the remats
            remat = [r for r in rs if r[f"{p}_full_remat"] or r[f"{p}_temp_bytes"] is None]
            both = [r for r in rs if r["ours_temp_bytes"] is not None and r[f"{p}_temp_bytes"] is not None]
            out.append({
                "profile": prof, "partitioner": p, "cases": len(rs),
                "errors": sum(1 for r in rows if r["profile"] == prof and r.get("status") != "ok"),
                "ours_le_xla": sum(_le(r["ours_temp_bytes"], r[f"{p}_temp_bytes"]) for r in rs),
                "ours_lt_xla": sum(_lt(r["ours_temp_bytes"], r[f"{p}_temp_bytes"]) for r in rs),
                "xla_remat": len(remat),
                "ours_lt_xla_where_remat": sum(_lt(r["ours_temp_bytes"], r[f"{p}_temp_bytes"]) for r in remat),
                # the compiler's peak of live buffers (every memory space): libtpu keeps some
                # whole-array buffers out of HBM temporaries, where only the peak differs
                "ours_peak_lt_xla_where_remat": sum(_lt(r.get("ours_peak_bytes"), r.get(f"{p}_peak_bytes"))
                                                    for r in remat),
                "xla_oom": sum(r[f"{p}_temp_bytes"] is None for r in rs),
                "ours_oom": sum(r["ours_temp_bytes"] is None for r in rs),
                "ours_temp_bytes_total": sum(r["ours_temp_bytes"] for r in both),
                "xla_temp_bytes_total": sum(r[f"{p}_temp_bytes"] for r in both),
            })
    return out


def _mem_cell(r: dict, k: str) -> str:
    from executor.fmt import fmt_bytes

    if r[f"{k}_temp_bytes"] is None:
        return "does not fit (OOM)"
    return fmt_bytes(r[f"{k}_temp_bytes"]) + (" REMAT" if r.get(f"{k}_full_remat") else "")


def print_tpu_memory(args) -> int:
    """``python -m experiments tpu-memory``: the table and the counts."""
    import json
    import sys

    from executor.fmt import fmt_bytes, table

    def progress(i, n, label):
        print(f"\r[{i}/{n}] {label[:60]:60s}", end="" if i < n else "\n", file=sys.stderr, flush=True)

    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    rep = tpu_memory(split(args.suites), split(args.profiles), args.planner,
                     progress=None if args.json else progress)
    bad = [r for r in rep["rows"] if r["status"] != "ok"]
    if rep["rows"] and len(bad) == len(rep["rows"]):  # nothing compiled: a failure, not a table of errors
        from experiments.case import ExperimentError

        raise ExperimentError(f"tpu-memory: all {len(bad)} cases failed; the first ({bad[0]['case']} on "
                              f"{bad[0]['profile']}): {str(bad[0].get('error', ''))[:200]}")
    if args.json:
        print(json.dumps(rep, default=str))
        return 0
    rows = []
    for r in rep["rows"]:
        if r["status"] != "ok":
            rows.append([r["profile"], r["case"], r["num_devices"], "error: " + r["error"][:60], "", "", ""])
            continue
        rows.append([r["target"], r["case"], r["num_devices"], _mem_cell(r, "ours"), _mem_cell(r, "shardy"),
                     _mem_cell(r, "gspmd"),
                     " ".join(r["ours_collectives"]) or "-"])
    print("Temp bytes per device from compiled.memory_analysis(), every program compiled by XLA's TPU "
          "compiler (libtpu) for the slice; compile-only, nothing ran. REMAT: XLA built the whole array; "
          "OOM: the compiler rejected the program as larger than the chip's HBM.")
    print(table(rows, ["target", "case", "devices", f"ours ({rep['planner']})", "XLA Shardy", "XLA GSPMD",
                       "our collectives"]))
    print()
    srows = [[s["profile"], s["partitioner"], s["cases"], f"{s['ours_le_xla']}/{s['cases']}",
              f"{s['ours_lt_xla']}/{s['cases']}", s["xla_remat"],
              f"{s['ours_lt_xla_where_remat']}/{s['xla_remat']}",
              f"{s['ours_peak_lt_xla_where_remat']}/{s['xla_remat']}", s["xla_oom"], s["ours_oom"],
              fmt_bytes(s["ours_temp_bytes_total"]), fmt_bytes(s["xla_temp_bytes_total"]), s["errors"]]
             for s in rep["summary"]]
    chosen = [r for r in rep["rows"] if r["status"] == "ok" and (r.get("memory_first") or {}).get("note")]
    for r in chosen:
        print(f"{r['target']} {r['case']}: {r['memory_first']['note']}")
    if chosen:
        print()
    print(table(srows, ["profile", "vs", "cases", "ours <= XLA", "ours < XLA", "XLA remat or OOM",
                        "ours < XLA there", "ours peak < XLA there", "XLA OOM", "ours OOM", "ours total*", "XLA total*", "errors"]))
    print("* totals over the cases where both programs compiled")
    return 0
