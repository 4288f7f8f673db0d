"""Shardy's own reshard-to-collectives lowering, as a third baseline (``shardy-r2c``).

XLA, as jax 0.10.2 ships it, partitions a Shardy module by exporting its shardings to
GSPMD's SPMD partitioner: the compiler pipelines construct ``sdy::ShardyXLA()`` with
its default options (``enableInsertExplicitCollectives = false``), and no XLA or JAX
flag reaches that option (the only ``xla_sdy_*`` debug option in this jaxlib is
``xla_sdy_export_all_reduce_scatter``). Handing XLA a module that already holds
Shardy's collectives fails in its import (``'sdy.all_to_all' op collective on operand
without sharding``). So XLA cannot be made to lower a reshard through Shardy's
``sdy-reshard-to-collectives`` pass here.

The passes themselves are in jaxlib and run from its MLIR pass manager. This module
writes the reshard as a Shardy module (a ``func`` returning its argument, with the
source sharding on the argument and the target on the result), runs

    func.func(sdy-insert-explicit-reshards{enable-full-version=true}),
    func.func(sdy-reshard-to-collectives)

and reads the collectives Shardy chose (``sdy.all_slice``, ``sdy.all_gather``,
``sdy.all_to_all``, ``sdy.collective_permute``) into a :class:`synth.Plan`: one typed
collective per move, the type after each op taken from its ``out_sharding``. The plan
is then lowered, compiled and costed exactly as ours (:mod:`executor.lowering`), so
the comparison is between Shardy's choice of collectives and ours, through one
compiler. Worked example, the issue's case ``[8{y}, 16, 8{x}] -> [8, 16{x,y}, 8]``::

    %0 = sdy.all_to_all [{"x"}: 2->1] %arg0 out_sharding=<@mesh, [{"y"}, {"x"}, {}]>
    %1 = sdy.all_to_all [{"y"}: 0->1] %0 out_sharding=<@mesh, [{}, {"x", "y"}, {}]>

becomes ``AllToAll(2->1, x) ; AllToAll(0->1, y)`` (the plan ``normal`` finds too).

Types with pending sums or uneven dims are not handled (Shardy pads uneven dims and
writes pending sums as ``unreduced``; this reader raises a one-line error for them).
No device is needed: the module names the mesh, not devices.
"""

from __future__ import annotations

import re

from executor.errors import ExecutorError

PIPELINE = ("builtin.module(func.func(sdy-insert-explicit-reshards{enable-full-version=true}),"
            "func.func(sdy-reshard-to-collectives))")
PLANNER = "shardy-r2c"


class ShardyError(ExecutorError):
    """Shardy's lowering of a reshard could not be read (names the case and why)."""


def _axis_text(a: str) -> str:
    """synth's ``x`` / ``x:(2)4`` -> Shardy's ``"x"`` / ``"x":(2)4``."""
    name, _, sub = a.partition(":")
    return f'"{name}"' + (f":{sub}" if sub else "")


def _dims_text(t) -> str:
    return "[" + ", ".join("{" + ", ".join(_axis_text(a) for a in axes) + "}" for axes in (d.axes for d in t.dims)) + "]"


def module_text(mesh, src, dst, dtype: str = "f32") -> str:
    """The reshard ``src -> dst`` on ``mesh`` as a Shardy module (MLIR text)."""
    axes = ", ".join(f'"{n}"={s}' for n, s in zip(mesh.names, mesh.sizes))
    shape = "x".join(str(s) for s in src.shape) + f"x{dtype}"
    return (f"module @reshard {{\n  sdy.mesh @mesh = <[{axes}]>\n"
            f"  func.func public @main(%arg0: tensor<{shape}> {{sdy.sharding = #sdy.sharding<@mesh, "
            f"{_dims_text(src)}>}}) -> (tensor<{shape}> {{sdy.sharding = #sdy.sharding<@mesh, {_dims_text(dst)}>}}) {{\n"
            f"    return %arg0 : tensor<{shape}>\n  }}\n}}\n")


def run_pipeline(text: str) -> str:
    """``text`` after Shardy's explicit-reshard and reshard-to-collectives passes."""
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir, passmanager

    ctx = jmlir.make_ir_context()
    with ctx:
        try:
            m = ir.Module.parse(text)
            passmanager.PassManager.parse(PIPELINE).run(m.operation)
        except Exception as e:  # noqa: BLE001 - MLIR's diagnostics, one line
            msg = str(e).strip().splitlines()
            raise ShardyError(f"Shardy's reshard-to-collectives failed: {msg[0] if msg else type(e).__name__}") from None
        return str(m)


_OP = re.compile(r"=\s*sdy\.(\w+)\s*(.*?)\s*%[\w#]+\s+out_sharding=<@mesh,\s*\[(.*)\]>")
_DIM = re.compile(r"\{([^{}]*)\}")
_AXIS = re.compile(r'"([^"]+)"(:\(\d+\)\d+)?')


def _axes_of(text: str) -> tuple[str, ...]:
    return tuple(n + (sub or "") for n, sub in _AXIS.findall(text))


def _type_of(dims_text: str, shape) -> str:
    dims = [_axes_of(d) for d in _DIM.findall(dims_text)]
    if len(dims) != len(shape):
        raise ShardyError(f"cannot read Shardy's sharding [{dims_text}] for a rank-{len(shape)} array")
    return "[" + ", ".join(f"{n}" + ("{" + ",".join(a) + "}" if a else "") for n, a in zip(shape, dims)) + "]"


def read_steps(text: str, shape) -> list[tuple[str, str, str]]:
    """``(op, params, type after)`` of every Shardy collective in ``text``, in order."""
    out = []
    for line in text.splitlines():
        if "sdy." not in line or "out_sharding" not in line:
            continue
        m = _OP.search(line)
        if m is None:
            raise ShardyError(f"cannot read Shardy's op: {line.strip()[:160]}")
        op, params, dims = m.groups()
        out.append((op, params, _type_of(dims, shape)))
    return out


def _collectives(op: str, params: str, t_before, t_after):
    from synth.collectives import AllGather, AllPermute, AllToAll, DynSlice

    def one(axes):
        return axes[0] if len(axes) == 1 else axes

    if op == "all_to_all":  # [{"x"}: 2->1, ...]
        moves = re.findall(r"\{([^{}]*)\}\s*:\s*(\d+)\s*->\s*(\d+)", params)
        return [AllToAll(int(a), int(b), one(_axes_of(ax))) for ax, a, b in moves]
    if op in ("all_gather", "all_slice"):  # per dim, the axes gathered or sliced
        dims = _DIM.findall(params)
        cls = AllGather if op == "all_gather" else DynSlice
        return [cls(d, one(_axes_of(ax))) for d, ax in enumerate(dims) if _axes_of(ax)]
    if op == "collective_permute":
        return [AllPermute(t_after)]
    raise ShardyError(f"Shardy chose sdy.{op}, which this reader does not map to a typed collective")


def shardy_plan(mesh, src, dst, itemsize: int = 4):
    """Shardy's reshard-to-collectives lowering of ``src -> dst`` as a :class:`synth.Plan`
    (planner ``shardy-r2c``); its notes carry Shardy's ops as printed."""
    from synth.mesh import Mesh
    from synth.plan import Plan
    from synth.types import ArrayType, parse_type

    mesh = Mesh.of(mesh)
    src = parse_type(src) if isinstance(src, str) else ArrayType.of(src)
    dst = parse_type(dst, src.shape) if isinstance(dst, str) else ArrayType.of(dst)
    src, dst = src.check(mesh, "source"), dst.check(mesh, "target")
    if src.unreduced or dst.unreduced or not src.is_even(mesh) or not dst.is_even(mesh):
        raise ShardyError(f"{src} -> {dst}: the shardy-r2c baseline handles even types without pending sums "
                          "only (Shardy pads uneven dims and writes pending sums as 'unreduced')")
    text = run_pipeline(module_text(mesh, src, dst))
    steps, t = [], src
    printed = []
    for op, params, after in read_steps(text, src.shape):
        t_after = parse_type(after).check(mesh, "Shardy's type")
        steps += _collectives(op, params, t, t_after)
        printed.append(f"sdy.{op} {params}".strip())
        t = t_after
    try:
        return Plan.build(mesh, src, dst, steps, itemsize=itemsize, planner=PLANNER,
                          notes=("Shardy reshard-to-collectives: " + (" ; ".join(printed) or "no collectives"),))
    except ValueError as e:
        raise ShardyError(f"Shardy's collectives for {src} -> {dst} do not make a plan here: {e}") from None
