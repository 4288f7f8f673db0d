"""Ours vs XLA's two partitioners on one redistribution, with one measurement protocol."""

from __future__ import annotations

from synth.mesh import Mesh
from synth.planners import synthesize
from synth.types import ArrayType, parse_type

STRATEGIES = ("ours", "xla_shardy", "xla_gspmd")


def parse_case(mesh, src, dst, shape=None):
    """``(Mesh, src type, dst type)`` from strings; ``P(...)`` forms take the shape from
    ``shape`` or from the other type when it is canonical."""
    from executor.errors import ExecutorError

    mesh = Mesh.of(mesh)
    if isinstance(shape, str):
        try:
            shape = tuple(int(s) for s in shape.replace("x", ",").split(",") if s.strip())
        except ValueError:
            raise ExecutorError(f"--shape {shape!r}: write sizes like 8,16,8") from None
    if isinstance(src, str) and src.strip().startswith("[") and shape is None:
        src = parse_type(src)
    if isinstance(src, str):
        if shape is None and isinstance(dst, str) and dst.strip().startswith("["):
            shape = parse_type(dst).shape
        src = parse_type(src, shape)
    shape = src.shape
    dst = parse_type(dst, shape) if isinstance(dst, str) else ArrayType.of(dst)
    src.check(mesh, "source")
    dst.check(mesh, "target")
    if src.shape != dst.shape:
        raise ExecutorError(f"source {src} and target {dst} have different global shapes")
    return mesh, src, dst


def compare(mesh, src, dst, *, itemsize: int | None = None, dtype: str | None = None,
            planner: str = "auto", warmup: int = 3, repeats: int = 10, seed: int = 0,
            devices=None, keep=False) -> dict:
    """Run and measure our plan and XLA's resharding under Shardy and GSPMD.

    Each program is checked element by element, then all three are timed together:
    ``warmup`` untimed calls each, then ``repeats`` interleaved rounds (random order,
    ``block_until_ready``); median, p10 and p90 per program.

    Returns ``{"ours": {...}, "xla_shardy": {...}, "xla_gspmd": {...}}``; each entry has
    ``correct``, ``time_s`` (median), ``time_p10_s``, ``time_p90_s``, ``temp_bytes``,
    ``temp_plus_output_bytes``, ``full_remat`` and ``collectives``. With ``keep`` the
    :class:`executor.run.RunResult` objects come back too (under ``"_results"``)."""
    from executor.measure import Prepared, interleaved_timing
    from executor.run import make_input, resolve_dtype, run_plan, xla_reshard

    mesh, src, dst = parse_case(mesh, src, dst)
    dtype, itemsize = resolve_dtype(dtype, itemsize)
    plan = synthesize(mesh, src, dst, planner=planner, itemsize=itemsize)
    from synth.limits import check_array_memory

    # the host input, its expected output and the three programs' inputs and outputs
    check_array_memory(src.num_elems(), itemsize, 8, f"compare {src}")
    from executor.run import compile_host_bytes  # the three programs' measured peak (executor.run)
    from synth.limits import check_memory

    check_memory(compile_host_bytes(src.num_elems() * itemsize, mesh.size),
                 f"compare {src}: the cpu compiles and runs")
    x = make_input(src, dtype, seed)
    kw = dict(measure=False, devices=devices)
    results = {
        "ours": run_plan(plan, x, strict=False, **kw),
        "xla_shardy": xla_reshard(mesh, src, dst, "shardy", x, strict=False, **kw),
        "xla_gspmd": xla_reshard(mesh, src, dst, "gspmd", x, strict=False, **kw),
    }
    # one protocol for all three: warm-up, then `repeats` rounds that each run the three
    # programs in a random order (one untimed + one timed call each), so load from other
    # processes falls on all of them alike
    progs = [Prepared(r.compiled, r.make_input) for r in results.values()]
    for p in progs:
        xin = p.make_input()
        for _ in range(max(0, warmup)):
            p.compiled(xin).block_until_ready()
        del xin
    interleaved_timing(progs, rounds=repeats, per_round=1, seed=seed)
    from executor.distributed import gather_flags

    # across processes, each checked its own shards: correct means correct on every one
    by_process = gather_flags([r.correct for r in results.values()])
    out = {}
    for j, ((k, r), p) in enumerate(zip(results.items(), progs)):
        d = r.to_dict()
        timing = {f: p.row[f] for f in ("time_s", "time_p10_s", "time_p90_s", "repeats")}
        d.pop("correct")
        out[k] = {"correct": all(fl[j] for fl in by_process), **timing, **d}
        if len(by_process) > 1:
            out[k]["correct_by_process"] = [fl[j] for fl in by_process]
            if not out[k]["correct"] and "error" not in out[k]:
                bad = [i for i, fl in enumerate(by_process) if not fl[j]]
                out[k]["error"] = f"wrong output on process(es) {bad} (each process checks its own shards)"
    out["ours"]["plan_steps"] = [str(c) if c.kind != "all_permute" else "AllPermute" for c in plan.steps]
    out["ours"]["plan_peak_live_bytes"] = plan.peak_live_bytes
    if keep:
        out["_results"] = results
        out["_plan"] = plan
    return out


# -- one path for both sides: every strategy compiled by the machine's own compiler ---------
#: Strategies :func:`compiled_schedule` compiles: our plan, XLA's reshard under either
#: partitioner, and Shardy's reshard-to-collectives plan (:mod:`executor.shardy`).
COMPILED_STRATEGIES = ("ours", "xla-shardy", "xla-gspmd", "shardy-r2c")
#: What the CPU backend does to narrow floats, and what the schedule says about it.
CPU_WIDENS = ("XLA's CPU backend widens bfloat16/float16 collectives to float32: compiled as float32, "
              "byte counts scaled to {dtype}")


def compiled_schedule(machine_spec: str, strategy: str, mesh, src, dst, *, plan=None,
                      dtype: str = "float32", placement=None):
    """``strategy``'s program for ``src -> dst`` compiled by the compiler of the machine
    ``machine_spec`` (``profile:size``), read back from its HLO by the one reader
    (:func:`executor.hlo.hlo_to_schedule`).

    * TPU profiles: libtpu, ahead of time for the slice, mesh placed as the simulator
      places it (``placement``);
    * GPU profiles: XLA's GPU compiler from JAX's CUDA plugin (no GPU needed);
    * ``cpu-*`` profiles: XLA's CPU backend (the JAX backend must have ``mesh.size``
      CPU devices). It widens 2-byte floats in collectives to float32, so a 2-byte case
      is compiled as float32 and its bytes scaled back (``meta['dtype_handling']``).

    ``meta`` carries ``compiler`` (``libtpu``, ``xla-gpu``, ``xla-cpu``), ``target``,
    ``temp_bytes``, ``output_bytes``, ``compile_s``, ``full_remat`` and
    ``dtype_handling``. A target whose compiler is missing raises a one-line
    :class:`executor.tpu.TargetError` naming the ``pip install``."""
    from executor import tpu
    from executor.errors import ExecutorError
    from executor.run import resolve_dtype

    if strategy not in COMPILED_STRATEGIES:
        raise ExecutorError(f"strategy {strategy!r}: use one of {list(COMPILED_STRATEGIES)}")
    mesh, src, dst = parse_case(mesh, src, dst)
    dtype, itemsize = resolve_dtype(dtype, None)
    if strategy == "shardy-r2c":
        from executor.shardy import shardy_plan

        plan = shardy_plan(mesh, src, dst, itemsize)
    elif strategy == "ours" and plan is None:  # auto for this machine: its cost, as the sweeps plan
        from models.plan_cost import machine_cost

        plan = synthesize(mesh, src, dst, itemsize=itemsize, cost=machine_cost(machine_spec, mesh, placement))
    compiler = tpu.compiler_for_profile(machine_spec)
    part = strategy.removeprefix("xla-") if strategy.startswith("xla-") else None
    if compiler == "xla-cpu":
        from executor.extract import plan_schedule, scale_schedule_bytes, xla_schedule

        if placement not in (None, "", "default", "row-major"):
            raise ExecutorError(f"placement {placement!r}: the CPU backend has no chips to place devices on")
        cdtype = "float32" if dtype in ("bfloat16", "float16") else dtype
        if part:
            s = xla_schedule(mesh, src, dst, partitioner=part, dtype=cdtype)
        else:
            s = plan_schedule(plan, dtype=cdtype)
        s = scale_schedule_bytes(s, itemsize, 4) if cdtype != dtype else s
        s.meta.update({"compiler": "xla-cpu", "target": str(machine_spec),
                       "dtype_handling": CPU_WIDENS.format(dtype=dtype) if cdtype != dtype else f"compiled as {dtype}"})
    else:
        t = tpu.parse_target(machine_spec)
        if part:
            r = tpu.compile_xla(t, mesh, src, dst, part, dtype=dtype, placement=placement)
        else:
            r = tpu.compile_plan(t, plan, dtype=dtype, placement=placement)
        s = r.schedule
        s.meta["dtype_handling"] = f"compiled as {dtype}"
    s.meta.update({"mesh": str(mesh), "src": str(src), "dst": str(dst), "itemsize": itemsize,
                   "strategy": strategy if plan is None else f"ours-{plan.planner}" if strategy == "ours" else strategy})
    if plan is not None:
        s.meta["plan_steps"] = [str(c) for c in plan.steps]
        if strategy == "shardy-r2c":
            s.meta["shardy_ops"] = list(plan.notes)
    return s
