"""The doctor: find the collectives XLA inserted into a user's program, line by line.

    python -m executor doctor prog.py:train_step [--mesh x=4,y=2 --arg "[8{y}, 64{x}, 128]" ...]
    python -m executor doctor --hlo-dir DUMP            # from XLA_FLAGS=--xla_dump_to=DUMP

The program is compiled (CPU, or ahead of time for a TPU slice / GPU machine with
``--target``); every communicating op of the compiled module is read through
:func:`executor.hlo.collective_instructions` (async wrappers, loops, TPU's fused
reduce-scatter) and grouped into **sequences**: consecutive collectives that carry the
same source location (op metadata: ``stack_frame_id`` into the module's ``StackFrames``
table, or the older ``source_file``/``source_line``). Each sequence is reported with

* its source line (the frame in the jitted function) and call chain;
* XLA's steps (opcode, per-device bytes in and out, group size) and bytes received,
  simulated on ``--hardware``;
* ``full_remat``: its all-gathers multiply the shard by the whole mesh, so every device
  ends with the whole array (the header also counts XLA's own "Involuntary full
  rematerialization" log lines);
* for a ``with_sharding_constraint`` whose operand's sharding is known in the program
  (an input's or an earlier constraint's, matched through the jaxpr by the frames in the
  user's file, nested jits included): the source and target shardings, our plan
  (``synth.synthesize(..., "auto")``) simulated on the same machine, and the ``reshard``
  line that replaces it where ours is better; otherwise a note says what the sequence is.

Limits: HLO files of at most 64 MiB each, 256 files per folder; links are not followed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from executor.errors import ExecutorError
from synth.errors import RedistributionError

MAX_HLO_BYTES = 64 * 2**20
MAX_HLO_FILES = 256
_COLLECTIVE = ("all-gather", "all-to-all", "collective-permute", "all-reduce", "reduce-scatter")


@dataclass(frozen=True)
class Step:
    opcode: str
    name: str
    in_bytes: int
    out_bytes: int
    recv_bytes: int
    group_size: int


@dataclass
class Finding:
    """One collective sequence XLA inserted: where, what, and what ``reshard`` would do."""

    line: str  # "file.py:35"
    function: str
    chain: list[str]
    op_name: str
    steps: list[Step]
    full_remat: bool
    peak_bytes: int
    src: str | None = None
    dst: str | None = None
    xla_sim_s: float | None = None
    ours_steps: list[str] | None = None
    ours_sim_s: float | None = None
    ours_peak_bytes: int | None = None
    fix: str | None = None
    note: str = ""
    innermost: str | None = None  # the innermost frame in the user's file
    schedule_ops: list = field(default_factory=list, repr=False)  # XLA's ops as synth.ScheduleOp
    user_key: tuple = field(default=(), repr=False)  # its frames in the user's file

    @property
    def recv_bytes(self) -> int:
        return sum(s.recv_bytes for s in self.steps)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("schedule_ops")
        d.pop("user_key")
        d["recv_bytes"] = self.recv_bytes
        return d


@dataclass
class Report:
    program: str
    mesh: str
    hardware: str
    findings: list[Finding] = field(default_factory=list)
    temp_bytes: int | None = None
    log_remats: int | None = None  # XLA's "Involuntary full rematerialization" lines (None: no log)

    def to_dict(self) -> dict:
        return {"program": self.program, "mesh": self.mesh, "hardware": self.hardware,
                "temp_bytes": self.temp_bytes, "collectives": sum(len(f.steps) for f in self.findings),
                "full_remats": sum(f.full_remat for f in self.findings), "xla_logged_remats": self.log_remats,
                "findings": [f.to_dict() for f in self.findings]}

    def text(self) -> str:
        n = sum(len(f.steps) for f in self.findings)
        out = [f"doctor: {self.program} on mesh {self.mesh}: {n} collective(s) in {len(self.findings)} "
               f"sequence(s); compiled temp {_fmt_b(self.temp_bytes)} per device; costs on {self.hardware}"]
        remats = sum(f.full_remat for f in self.findings)
        logged = "" if self.log_remats is None else f" (XLA's log: {self.log_remats})"
        out.append(f"full rematerializations: {remats}{logged}")
        for i, f in enumerate(self.findings, 1):
            tag = "  FULL REMATERIALIZATION" if f.full_remat else ""
            out.append(f"[{i}] {f.line} in {f.function} ({f.op_name}){tag}")
            if len(f.chain) > 1:
                out.append(f"    call chain: {' > '.join(f.chain)}")
            if f.src:
                out.append(f"    sharding: {f.src} -> {f.dst}")
            for s in f.steps:
                out.append(f"    xla: {s.opcode} %{s.name}  {_fmt_b(s.in_bytes)} -> {_fmt_b(s.out_bytes)} per device, "
                           f"group of {s.group_size}, receives {_fmt_b(s.recv_bytes)}")
            line = f"    xla total: receives {_fmt_b(f.recv_bytes)}, largest buffer {_fmt_b(f.peak_bytes)}"
            if f.xla_sim_s is not None:
                line += f", simulated {f.xla_sim_s * 1e6:.1f} us"
            out.append(line)
            if f.ours_steps is not None:
                out.append(f"    ours: {' ; '.join(f.ours_steps) or '(nothing to move)'}  largest shard "
                           f"{_fmt_b(f.ours_peak_bytes)}, simulated {f.ours_sim_s * 1e6:.1f} us")
            if f.fix:
                out.append(f"    fix:  {f.fix}")
            if f.note:
                out.append(f"    note: {f.note}")
        return "\n".join(out)


def _fmt_b(n) -> str:
    if n is None:
        return "?"
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


# -- stack frames ---------------------------------------------------------------------
def stack_frames(text: str):
    """``frame id -> [(file, function, line), ...]`` innermost first, from the module's
    ``FileNames``/``FunctionNames``/``FileLocations``/``StackFrames`` tables."""
    tables: dict[str, dict[int, str]] = {}
    cur = None
    for line in text.splitlines():
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            cur = tables.setdefault(s, {})
            continue
        if cur is not None:
            m = re.match(r"(\d+)\s+(.*)$", s)
            if not m:
                cur = None
                continue
            cur[int(m.group(1))] = m.group(2)
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    funcs = {k: v.strip('"') for k, v in tables.get("FunctionNames", {}).items()}
    locs = {}
    for k, v in tables.get("FileLocations", {}).items():
        f = re.search(r"file_name_id=(\d+)", v)
        fn = re.search(r"function_name_id=(\d+)", v)
        ln = re.search(r"\bline=(\d+)", v)
        locs[k] = (files.get(int(f.group(1)), "?") if f else "?", funcs.get(int(fn.group(1)), "?") if fn else "?",
                   int(ln.group(1)) if ln else 0)
    frames = {}
    for k, v in tables.get("StackFrames", {}).items():
        loc = re.search(r"file_location_id=(\d+)", v)
        par = re.search(r"parent_frame_id=(\d+)", v)
        frames[k] = (int(loc.group(1)) if loc else 0, int(par.group(1)) - 1 if par else 0)

    def chain(fid: int):
        out, seen = [], set()
        while fid in frames and fid not in seen:
            seen.add(fid)
            loc, parent = frames[fid]
            if loc in locs:
                out.append(locs[loc])
            fid = parent
        return out

    return chain


def _location(attrs: str, chain):
    m = re.search(r'stack_frame_id=(\d+)', attrs)
    if m:
        return chain(int(m.group(1)))
    f = re.search(r'source_file="([^"]*)"', attrs)
    ln = re.search(r'source_line=(\d+)', attrs)
    if f and ln:
        return [(f.group(1), "?", int(ln.group(1)))]
    return []


def _op_name(attrs: str) -> str:
    m = re.search(r'op_name="([^"]*)"', attrs)
    return m.group(1) if m else "?"


# -- reading the compiled module ----------------------------------------------------------
def find_sequences(text: str, num_devices: int, entry_function: str | None = None,
                   user_file: str | None = None) -> list[Finding]:
    """The collective sequences of a compiled HLO module (see the module docstring)."""
    from executor.hlo import collective_instructions

    chain = stack_frames(text)
    found: list[Finding] = []
    ops: list[list] = []
    key_prev = None
    for op, ins in collective_instructions(text, num_devices):
        n = max((len(g) for g in op.groups), default=2 if op.pairs else 1)
        step = Step(ins.opcode if "all-reduce-scatter" not in op.label else "reduce-scatter (fused)",
                    ins.name, int(op.in_bytes), int(op.out_bytes), int(op.recv_bytes), int(n))
        frames = _location(ins.attrs, chain)
        key = (tuple(frames), _op_name(ins.attrs))
        if found and key == key_prev:
            found[-1].steps.append(step)
            ops[-1].append(op)
            continue
        key_prev = key
        pick = _user_frame(frames, entry_function, user_file)
        found.append(Finding(line=f"{os.path.basename(pick[0])}:{pick[2]}" if pick else "?",
                             function=pick[1] if pick else "?",
                             chain=_chain(frames, pick),
                             op_name=_op_name(ins.attrs), steps=[step], full_remat=False, peak_bytes=0,
                             innermost=_innermost(frames, user_file), user_key=_user_key(frames, user_file)))
        ops.append([op])
    for f, fops in zip(found, ops):
        f.peak_bytes = max(max(s.in_bytes, s.out_bytes) for s in f.steps)
        factor = 1
        for s in f.steps:
            if s.opcode.startswith("all-gather"):
                factor *= s.group_size
        f.full_remat = factor >= num_devices > 1
        f.schedule_ops = fops
    return found


def _chain(frames, pick):
    """``file:line function`` from the reported frame inward, in the reported frame's file,
    then the first call out of it (e.g. into ``reshard`` or a library); the caller's frames
    and the library's own are dropped."""
    inner = list(reversed(frames[: frames.index(pick) + 1] if pick in frames else frames))
    out = []
    for f, fn, ln in inner:
        out.append(f"{os.path.basename(f)}:{ln} {fn}")
        if pick is not None and f != pick[0]:
            break
    return out


def _innermost(frames, user_file):
    for fn, func, ln in frames:
        if user_file and os.path.exists(fn) and os.path.samefile(fn, user_file):
            return f"{os.path.basename(fn)}:{ln} ({func})"
    return None


def _user_frame(frames, entry_function, user_file):
    """The frame to report: the one in the entry function (the user's step), else the
    innermost frame in the user's file, else the innermost frame."""
    if not frames:
        return None
    if entry_function:
        for fr in frames:
            if fr[1] == entry_function and (user_file is None or os.path.samefile(fr[0], user_file)
                                            if os.path.exists(fr[0]) and user_file else True):
                return fr
    if user_file:
        for fr in frames:
            if os.path.exists(fr[0]) and os.path.samefile(fr[0], user_file):
                return fr
    return frames[0]


# -- the program --------------------------------------------------------------------------
def load_function(spec: str):
    """``path.py:function`` -> (function, module, path)."""
    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise ExecutorError(f"doctor: {spec!r}: write the program as FILE.py:FUNCTION")
    p = Path(path)
    if not p.is_file() or p.suffix != ".py":
        raise ExecutorError(f"doctor: {path!r} is not a Python file; give FILE.py:FUNCTION")
    if p.stat().st_size > 4 * 2**20:
        raise ExecutorError(f"doctor: {path!r} is larger than 4 MiB; give the file that defines the step")
    modname = f"_doctor_{p.stem}"
    sys.path.insert(0, str(p.resolve().parent))
    try:
        sp = importlib.util.spec_from_file_location(modname, p)
        mod = importlib.util.module_from_spec(sp)
        sys.modules[modname] = mod
        sp.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - the user's file: report, one line
        raise ExecutorError(f"doctor: importing {path!r} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    finally:
        sys.path.pop(0)
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ExecutorError(f"doctor: {path!r} defines no function {name!r}")
    return fn, mod, str(p.resolve())


def _parse_arg(text: str, smesh, default_dtype: str):
    from synth.types import parse_type

    dtype, sep, t = text.partition(":") if re.match(r"^[a-z][a-z0-9]*:\s*\[", text) else ("", "", text)
    try:
        typ = parse_type(t if sep else text)
        typ = typ.check(smesh, f"--arg {text!r}")
    except RedistributionError as e:
        raise ExecutorError(f"doctor: --arg {text!r}: {e}") from None
    if typ.unreduced:
        raise ExecutorError(f"doctor: --arg {text!r}: inputs with pending sums are not supported; drop the {{U:...}}")
    if not typ.is_even(smesh):
        raise ExecutorError(f"doctor: --arg {text!r}: a dim does not divide by its mesh axes on {smesh}, and JAX "
                            "takes no uneven input sharding; leave that dim unsplit (constrain it inside the step)")
    return typ, (dtype or default_dtype)


def doctor_program(spec: str, mesh: str | None = None, args: list[str] | None = None, dtype: str | None = None,
                   hardware: str | None = None, target: str | None = None) -> Report:
    """Compile ``FILE.py:FUNCTION`` on ``mesh`` with example inputs ``args`` (synth types,
    optionally ``dtype:`` first; default from the module's ``DOCTOR`` dict) and report it."""
    from synth.mesh import Mesh

    fn, mod, path = load_function(spec)
    conf = getattr(mod, "DOCTOR", {}) or {}
    mesh = mesh or conf.get("mesh")
    args = args or conf.get("args")
    dtype = dtype or conf.get("dtype", "float32")
    if not mesh or not args:
        raise ExecutorError(f"doctor: {spec}: give --mesh and one --arg per input (or a DOCTOR dict in the file)")

    try:
        smesh = Mesh.of(mesh)
    except RedistributionError as e:
        raise ExecutorError(f"doctor: --mesh {mesh!r}: {e}") from None
    typed = [_parse_arg(a, smesh, dtype) for a in args]
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding

    from executor.resharding import _pspec

    if target:
        from executor.tpu import _quiet_env, tpu_mesh

        _quiet_env()
        jmesh = tpu_mesh(target, smesh)
    else:
        from executor._jaxsetup import ensure_devices

        devs = ensure_devices()
        if len(devs) < smesh.size:
            raise ExecutorError(f"doctor: mesh {smesh} needs {smesh.size} devices but the {devs[0].platform} backend "
                                f"has {len(devs)}; on CPU pass --devices {smesh.size}")
        import numpy as np

        jmesh = jax.sharding.Mesh(np.asarray(devs[: smesh.size], dtype=object).reshape(smesh.sizes), smesh.names,
                                  axis_types=(AxisType.Auto,) * len(smesh.names))
    try:
        sds = [jax.ShapeDtypeStruct(t.shape, jnp.dtype(d), sharding=NamedSharding(jmesh, _pspec(t))) for t, d in typed]
    except TypeError as e:
        raise ExecutorError(f"doctor: an --arg dtype is not a JAX dtype ({e})") from None
    from executor.run import capture_fd2, compile_guard

    try:
        with jax.set_mesh(jmesh), compile_guard(f"doctor: {spec}", str(jmesh.devices.flat[0].platform),
                                                devices=jmesh.size), capture_fd2() as cap:
            traced = jax.jit(fn).trace(*sds)
            compiled = traced.lower().compile()
    except RedistributionError:  # the guard's one line (memory), or ours
        raise
    except Exception as e:  # noqa: BLE001 - the user's program does not compile: one line
        first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise ExecutorError(f"doctor: {spec} does not compile with inputs {args}: {type(e).__name__}: {first[:300]}") from None
    text = compiled.as_text()
    rep = _report(text, smesh, spec, fn.__name__, path, hardware or _default_hw(jmesh, target), cap["text"])
    ma = compiled.memory_analysis()
    rep.temp_bytes = int(ma.temp_size_in_bytes) if ma is not None else None
    _add_plans(rep, traced.jaxpr, typed, smesh, path)
    return rep


def _default_hw(jmesh, target):
    if target:
        return target
    return f"cpu-host:{jmesh.size}"


def doctor_hlo_dir(folder: str, mesh: str | None = None, hardware: str | None = None) -> list[Report]:
    """Reports for every optimized module of an ``--xla_dump_to`` folder."""
    from synth.mesh import Mesh

    root = Path(folder)
    if not root.is_dir():
        raise ExecutorError(f"doctor: --hlo-dir {folder!r} is not a folder; give the DIR of XLA_FLAGS=--xla_dump_to=DIR")
    files = sorted(p for p in root.iterdir() if p.name.endswith("after_optimizations.txt") and not p.is_symlink()
                   and p.is_file())
    if not files:
        raise ExecutorError(f"doctor: --hlo-dir {folder!r} holds no optimized HLO modules (*after_optimizations.txt); "
                            "run the program with XLA_FLAGS=--xla_dump_to=DIR (dumps text by default)")
    if len(files) > MAX_HLO_FILES:
        raise ExecutorError(f"doctor: --hlo-dir {folder!r} holds {len(files)} modules, more than {MAX_HLO_FILES}; "
                            "dump one program at a time")
    from synth.fileio import read_text

    reports = []
    for p in files:
        # regular files inside the folder only, capped before reading (synth.fileio)
        text = read_text(p, f"doctor: HLO module {p.name}", max_bytes=MAX_HLO_BYTES, inside=root)
        m = re.search(r"num_partitions=(\d+)", text)
        n = int(m.group(1)) if m else 1
        smesh = Mesh.of(mesh) if mesh else Mesh.of(f"d={n}")
        if smesh.size != n and m:
            raise ExecutorError(f"doctor: --mesh {mesh} has {smesh.size} devices but {p.name} is partitioned {n} ways; "
                                f"give a mesh of {n} devices")
        # the jitted function's name, from the module's (jit_train_step): its frames are the user's step
        fm = re.match(r"\s*HloModule\s+(?:jit_)?([A-Za-z_][\w]*)", text)
        rep = _report(text, smesh, p.name, fm.group(1) if fm else None, None, hardware or f"cpu-host:{n}", None)
        for f in rep.findings:
            _explain(f)
        reports.append(rep)
    return reports


def _report(text, smesh, program, entry_fn, path, hardware, log) -> Report:
    from executor.hlo import REMAT_LOG

    rep = Report(program, str(smesh), hardware)
    rep.findings = find_sequences(text, smesh.size, entry_fn, path)
    rep.log_remats = log.count(REMAT_LOG) if log is not None else None
    try:
        from simulator import simulate
        from synth.schedule import Schedule

        for f in rep.findings:
            f.xla_sim_s = float(simulate(Schedule(smesh.size, tuple(f.schedule_ops), name=f.line), hardware).time_s)
    except Exception as e:  # noqa: BLE001 - a hardware spec that does not fit: said once, per report
        for f in rep.findings:
            f.note = f"not simulated on {hardware}: {str(e).splitlines()[0][:160]}"
    return rep


def _add_plans(rep: Report, jaxpr, typed, smesh, path):
    """Source and target shardings of each constraint whose operand's sharding is known,
    our plan for it and its ``reshard`` line (see the module docstring). Constraints are
    matched to sequences by their frames in the user's file (the same Python stack JAX
    records in the HLO's op metadata); nested jaxprs (inner ``jax.jit``) are followed."""
    from synth.planners import synthesize
    from synth.types import ArrayType

    by_frames: dict = {}

    def frames_of(eqn):
        tb = eqn.source_info.traceback
        return [(fr.file_name, fr.function_name, getattr(fr, "line_num", getattr(fr, "start_line", 0)))
                for fr in (tb.frames if tb else [])]

    def walk(jx, known, outer=(), depth=0):
        # an inner jaxpr's tracebacks stop at its own function: its caller's frames are appended
        if depth > 32:
            return
        for eqn in jx.eqns:
            if eqn.primitive.name == "sharding_constraint":
                spec = getattr(eqn.params.get("sharding"), "spec", None)
                aval = eqn.invars[0].aval
                try:
                    parts = tuple(getattr(spec, "partitions", spec))
                    dst = ArrayType.from_spec(aval.shape, parts + (None,) * (len(aval.shape) - len(parts))).check(smesh)
                except (RedistributionError, TypeError, ValueError):
                    continue
                src = known.get(eqn.invars[0])
                known[eqn.outvars[0]] = dst
                by_frames.setdefault(_user_key(frames_of(eqn), path) + outer, []).append((src, dst, str(aval.dtype)))
                continue
            for sub in _subjaxprs(eqn):
                inner = {iv: known[ov] for iv, ov in zip(sub.invars, eqn.invars)
                         if not hasattr(ov, "val") and ov in known}
                walk(sub, inner, _user_key(frames_of(eqn), path) + outer, depth + 1)

    walk(jaxpr.jaxpr, {v: t for v, (t, _) in zip(jaxpr.jaxpr.invars, typed)})
    for f in rep.findings:
        cands = by_frames.get(f.user_key)
        if not cands or "sharding_constraint" not in f.op_name:
            _explain(f)
            continue
        src, dst, dt = cands[0] if len(cands) == 1 else cands.pop(0)
        if src is None:
            f.note = "the operand's sharding is chosen by XLA here (not an input or a constraint); pass it as src="
            f.dst = str(dst)
            continue
        f.src, f.dst = str(src), str(dst)
        import numpy as np

        try:
            plan = synthesize(smesh, src, dst, "auto", int(np.dtype(dt).itemsize), budget_ms=2000)
        except RedistributionError as e:
            f.note = f"no plan of ours: {e}"
            continue
        f.ours_steps = [str(s) for s in plan.steps]
        f.ours_peak_bytes = int(plan.max_shard_bytes)
        try:
            from simulator import simulate_plan

            f.ours_sim_s = float(simulate_plan(plan, rep.hardware).time_s)
        except Exception as e:  # noqa: BLE001
            f.ours_sim_s = float("nan")
            f.note = f"ours not simulated: {str(e).splitlines()[0][:160]}"
        better = (f.ours_peak_bytes < f.peak_bytes or (f.xla_sim_s is not None and f.ours_sim_s < f.xla_sim_s))
        where = f.innermost or f.line
        if better:
            f.fix = (f"at {where}: y = reshard(y, {_spec_src(dst)}, src={_spec_src(src)})  in place of "
                     f"with_sharding_constraint(y, {_spec_src(dst)})  (from executor import reshard)")
        else:
            f.note = "XLA's collectives are already as good as our plan here; nothing to change"


def _explain(f: Finding) -> None:
    """The note of a sequence that no constraint of the program asked for."""
    if f.note:
        return
    prim = f.op_name.rpartition("/")[2] or f.op_name
    if prim == "sharding_constraint":
        f.note = ("a with_sharding_constraint; an HLO dump does not record the shardings: run the doctor on "
                  "FILE.py:FUNCTION for our plan and the reshard line") if not f.dst else f.note
    elif all(s.opcode.split("-start")[0] in ("all-reduce", "reduce-scatter", "reduce-scatter (fused)")
             for s in f.steps):
        f.note = f"part of the computation of {prim!r} (a sum over a sharded contraction), not a layout change"
    else:
        f.note = (f"a layout change XLA chose for {prim!r}; the compiled program does not record its shardings: "
                  "put a reshard(...) with the sharding you want before this op to choose it yourself")


def _user_key(frames, user_file) -> tuple:
    """``(file name, line)`` of every frame in the user's file: the key that matches a
    jaxpr equation to the HLO instructions lowered from it."""
    return tuple((os.path.basename(f), ln) for f, _, ln in frames
                 if user_file and os.path.exists(f) and os.path.samefile(f, user_file))


def _subjaxprs(eqn):
    """The jaxprs an equation calls (``jit``, ``custom_jvp``, ...), opened."""
    out = []
    for v in eqn.params.values():
        for x in (v if isinstance(v, tuple | list) else (v,)):
            j = getattr(x, "jaxpr", None)
            if j is not None and hasattr(j, "eqns"):
                out.append(j)
            elif hasattr(x, "eqns") and hasattr(x, "invars"):
                out.append(x)
    return out


def _spec_src(t) -> str:
    _, spec = t.to_spec()
    return "P(" + ", ".join(repr(e) for e in spec) + ")"


def to_json(reports) -> str:
    return json.dumps([r.to_dict() for r in reports], indent=2)


__all__ = ["doctor_program", "doctor_hlo_dir", "find_sequences", "Report", "Finding"]
