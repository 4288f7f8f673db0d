"""The Compare page's XLA side: every strategy compiled by the scenario machine's own
compiler (``python -m executor.compiled`` in a subprocess, so the Streamlit process never
imports jax), XLA's step table and the rematerialisation explained.

* :func:`compiled_strategies` -- ours (the page's plan), XLA Shardy, XLA GSPMD and
  Shardy's reshard-to-collectives plan, compiled by libtpu (TPU machines), XLA's GPU
  compiler (GPU machines, when JAX's CUDA plugin is installed) or the CPU backend
  (``cpu-*`` machines, or GPU machines without the plugin: collectives only);
* :func:`step_rows` -- a schedule as the rows of a step table;
* :func:`remat_text` -- which op grows which buffer to the whole array, by how much.

Results are kept per server (:data:`_DONE`), so a new browser session or a shared
link (``cmp_xla=1``) shows XLA's rows again without compiling twice.
"""

from __future__ import annotations

import json
import threading

import synth
from ui.fmt import fmt_bytes

STRATEGIES = ("ours", "xla-shardy", "xla-gspmd", "shardy-r2c")
#: The page's names for the compiled strategies.
LABELS = {"ours": "ours (compiled)", "xla-shardy": "xla shardy", "xla-gspmd": "xla gspmd",
          "shardy-r2c": "shardy r2c"}

_LOCK = threading.Lock()
_DONE: dict = {}   # key -> result, every session of this server


def case_key(machine: str, mesh_text: str, plan: synth.Plan, dtype: str, placement: str) -> str:
    return json.dumps([machine, mesh_text, str(plan.src), str(plan.dst), dtype, placement.strip(),
                       plan.to_dict()["steps"]], sort_keys=True, default=str)


def done(key: str):
    """The result for ``key`` if any session of this server has computed it."""
    with _LOCK:
        return _DONE.get(key)


def compiled_strategies(key: str, machine: str, mesh_text: str, plan: synth.Plan, dtype: str,
                        placement: str = "", timeout_s: int = 900) -> dict:
    """``python -m executor.compiled`` for the page's case (compile-only: no array is
    made, so nothing is refused for the memory that running would need)."""
    hit = done(key)
    if hit is not None:
        return hit
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from ui.compute import WorkerError

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="cmp-plan-") as d:
        pj = Path(d) / "plan.json"
        pj.write_text(plan.to_json())
        cmd = [sys.executable, "-m", "executor.compiled", "--machine", machine, "--mesh", mesh_text,
               "--src", str(plan.src), "--dst", str(plan.dst), "--dtype", dtype, "--plan-json", str(pj)]
        if placement.strip():
            cmd += ["--placement", placement.strip()]
        env = dict(os.environ)
        env.setdefault("JAX_PLATFORMS", "cpu")
        try:
            p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise WorkerError(f"compiling for {machine} took longer than {timeout_s} s and was stopped; "
                              "try a smaller mesh") from None
    if p.returncode < 0:  # a signal (9: the out-of-memory killer): case, compiler and bytes (executor.run)
        from executor.run import aot_compile_host_bytes, killed_line

        raise WorkerError(killed_line(f"compiling {plan.src} -> {plan.dst} on {mesh_text}", machine,
                                      aot_compile_host_bytes(machine, plan.mesh.size), p.returncode))
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        msg = lines[-1] if lines else f"exit status {p.returncode}"
        raise WorkerError(f"python -m executor.compiled: {msg.removeprefix('error: ')}")
    res = json.loads(p.stdout)
    with _LOCK:
        _DONE[key] = res
    return res


def schedules(res: dict) -> tuple[dict, dict]:
    """``({page name: Schedule}, {page name: error line})`` from :func:`compiled_strategies`."""
    ok, bad = {}, {}
    for k, v in res.get("strategies", {}).items():
        name = LABELS.get(k, k)
        if v.get("schedule"):
            ok[name] = synth.Schedule.from_dict(v["schedule"])
        else:
            bad[name] = v.get("error") or "no schedule"
    return ok, bad


def dtype_text(res: dict, dtype: str) -> str:
    """How the element type was compiled (the CPU backend widens 2-byte floats)."""
    hands = {str(v["schedule"]["meta"].get("dtype_handling")) for v in res.get("strategies", {}).values()
             if v.get("schedule") and v["schedule"]["meta"].get("dtype_handling")}
    return "; ".join(sorted(hands)) or f"compiled as {dtype}"


def step_rows(s: synth.Schedule) -> list[dict]:
    """One row per op: kind, buffers, bytes received, and the HLO op it came from."""
    rows = []
    whole = int(s.meta.get("global_bytes") or 0)
    for i, op in enumerate(s.ops):
        grp = op.groups[0] if op.groups else ()
        rows.append({
            "#": i, "kind": op.kind, "in": fmt_bytes(op.in_bytes), "out": fmt_bytes(op.out_bytes),
            "received": fmt_bytes(op.recv_bytes) if not op.is_local else "-",
            "group size": len(grp) if op.kind != "permute" else f"{len(op.pairs)} pairs",
            "HLO op": op.label or "-",
            "whole array": "YES" if whole and op.out_bytes >= whole and not op.is_local else "",
        })
    return rows


def remat_text(s: synth.Schedule) -> str | None:
    """Which op grows which buffer to the whole array, and by how much; None if none."""
    whole = int(s.meta.get("global_bytes") or 0)
    final = int(s.meta.get("final_bytes") or (s.ops[-1].out_bytes if s.ops else 0))
    for i, op in enumerate(s.ops):
        if op.is_local or not whole or op.out_bytes < whole:
            continue
        grow = op.out_bytes / max(op.in_bytes, 1)
        return (f"step {i}, {op.kind} `{op.label or op.kind}`, grows each device's buffer from "
                f"{fmt_bytes(op.in_bytes)} to {fmt_bytes(op.out_bytes)} ({grow:.0f}x): the whole array, "
                f"{op.out_bytes / max(final, 1):.0f}x the {fmt_bytes(final)} each device keeps at the end. "
                + (str(s.meta.get("full_remat_reason")) if s.meta.get("full_remat_reason") else "")
                + _memory_text(s))
    if s.meta.get("full_remat"):
        return str(s.meta.get("full_remat_reason") or "XLA reported a full rematerialization") + _memory_text(s)
    return None


def _memory_text(s: synth.Schedule) -> str:
    """Where the compiled program keeps that buffer: its temp bytes and the compiler's peak."""
    temp, peak = s.meta.get("temp_bytes"), s.meta.get("compiled_peak_bytes")
    if temp is None or peak is None:
        return ""
    where = (" (0 B of temporaries: the compiler keeps the buffer out of HBM temporaries, in another memory "
             "space; the peak counts it)" if not temp else "")
    return f" Compiled: {fmt_bytes(temp)} of temporaries, a peak of {fmt_bytes(peak)} per device{where}."
