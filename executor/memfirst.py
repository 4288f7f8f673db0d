"""Memory first: when ``auto``'s compiled program needs more temp bytes than XLA's.

``auto`` ranks plans by predicted time under the machine's cost model; the memory it
bounds is the *type-level* shard (every type's shard at most ``max(src shard, dst
shard)``). The compiler then adds what the types do not show: a transposed copy of an
all-to-all's operand, an all-to-all's whole output before a trailing slice, 256-byte
slots for an async collective's operand tuple. So on a few cases the fastest plan is
within the bound yet compiles to more temp bytes than XLA's own reshard. This module
chooses, honestly and visibly, a plan whose compiled temp is not above XLA's.

The rule (one function, :func:`choose`; the sweeps, ``executor compare --target``,
``experiments tpu-memory`` and ``python -m executor.compiled`` all call it):

1. Compile ``auto``'s plan. If XLA's reshard is not compiled, does not fit, or needs at
   least as many temp bytes (the smaller of Shardy's and GSPMD's), keep it: no note.
2. Otherwise build the alternatives (:func:`alternatives`): ``normal``'s plan,
   Shardy's reshard-to-collectives plan, ``auto`` on the whole-axes move set, and
   ``auto`` after a first local slice (each target axis the source leaves unused,
   sliced into each dim it divides). Keep those within the memory bound (largest shard
   ``<= max(src, dst)`` shard, or no larger than ``auto``'s own where ``auto`` is
   over it) and not the same steps as a plan already listed.
3. Rank them by predicted time (the machine's cost model, the one ``auto`` plans
   with) and compile them in that order, at most :data:`MAX_ALTERNATIVES`. The first
   whose compiled temp is ``<= XLA``'s is the fastest such plan among those compiled:
   it is chosen. If none is, the least temp among every plan compiled (``auto``'s
   included) is chosen, ties to the faster.
4. The row keeps the planner name ``auto``; its notes carry :attr:`Choice.note`, e.g.
   ``memory-first: auto's fastest plan compiles to 16.00 MiB temp, XLA's to 2.00 MiB;
   chose auto after DynSlice(2, x) (2.00 MiB temp, predicted 101.9 us against 71.0 us, the
   fastest at or below XLA's of 2 compiled)``.

Bound on compiles: ``1 + MAX_ALTERNATIVES`` of ours per case and machine, and the extra
ones only where ``auto``'s temp is above XLA's. Synthesis for the alternatives is
bounded by :data:`MAX_SLICE_FIRST` extra ``auto`` runs, each on ``auto``'s own work budget.

Worked example, ``random-0-024`` on ``dgx-h100:4`` (``x=4,y=8``,
``[64{y}, 512, 512] -> [64{x}, 512, 512{y}]``, float32): ``auto`` is one all-to-all over
``y`` then a local slice over ``x``; the all-to-all's transposed operand and its 8 MiB
output are 16 MiB of temp, XLA's reshard (slice, a 2-device all-to-all, a permute)
2 MiB. ``auto`` after ``DynSlice(2, x)`` finds XLA's plan: 2 MiB temp, 101.9 us
predicted against 71.0 us. It is chosen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

#: At most this many alternatives to ``auto`` are compiled per case and machine.
MAX_ALTERNATIVES = 4
#: At most this many "slice first, then auto" plans are synthesized per case.
MAX_SLICE_FIRST = 6


@dataclass(frozen=True)
class Tried:
    """One plan compiled by the choice: its label, compiled temp bytes and predicted time."""

    label: str
    temp_bytes: int | None
    predicted_s: float

    def to_dict(self) -> dict:
        return {"label": self.label, "temp_bytes": self.temp_bytes, "predicted_s": self.predicted_s}


@dataclass(frozen=True)
class Choice:
    """The plan the memory-first rule chose, and why.

    ``label`` is ``"auto"`` where auto's own plan was kept; ``note`` is empty then.
    ``result`` is what the compile function returned for the chosen plan (a schedule or
    a compiled program), so the caller does not compile it twice. ``tried`` lists every
    plan compiled, auto's first."""

    plan: object
    label: str
    temp_bytes: int | None
    xla_temp_bytes: int | None
    predicted_s: float
    note: str
    result: object = field(repr=False)
    tried: tuple[Tried, ...] = ()

    @property
    def changed(self) -> bool:
        return self.label != "auto"

    @property
    def compiles(self) -> int:
        return len(self.tried)

    def to_dict(self) -> dict:
        return {"chosen": self.label, "temp_bytes": self.temp_bytes, "xla_temp_bytes": self.xla_temp_bytes,
                "predicted_s": self.predicted_s, "note": self.note, "compiles": self.compiles,
                "plan_steps": [str(c) for c in self.plan.steps], "tried": [t.to_dict() for t in self.tried],
                "plan": self.plan.to_dict() if self.changed else None}


def xla_temp(*temps) -> int | None:
    """The temp bytes ours must not exceed: the least of XLA's compiled programs (Shardy,
    GSPMD). None where none compiled or one does not fit at all (no constraint then)."""
    vals = [t for t in temps if t is not None]
    return min(vals) if vals and len(vals) == len(temps) else None


def predicted_s(plan, cost) -> float:
    """The plan's time under ``cost`` (the machine's model ``auto`` plans with)."""
    from synth.planners import schedule_cost

    return float(schedule_cost(plan, cost)[0])


def _mib(b, other=None) -> str:
    """``b`` in MiB, or in bytes where ``other`` would print the same (256 B apart)."""
    from executor.fmt import fmt_bytes

    if b is None:
        return "does not fit"
    if other is not None and b != other and fmt_bytes(b) == fmt_bytes(other):
        return f"{b} B"
    return fmt_bytes(b)


def _slice_first(mesh, src, dst, itemsize, cost, budget_moves) -> Iterable[tuple[str, object]]:
    """``DynSlice(i, a)`` first, then ``auto`` to the target: ``a`` a mesh axis the target
    uses and the source leaves unused. Worked example: ``[64{y}, 512, 512] ->
    [64{x}, 512, 512{y}]`` on ``x=4,y=8`` tries ``DynSlice(0, x)``, ``DynSlice(1, x)`` and
    ``DynSlice(2, x)``; the last, then ``AllToAll(0->2, y:(4)2)`` and a permute, is XLA's plan."""
    from synth.collectives import DynSlice
    from synth.errors import RedistributionError
    from synth.plan import Plan
    from synth.planners import synthesize

    free = [a for a in mesh.names if a not in src.all_axes and a not in src.unreduced and a in dst.all_axes]
    n = 0
    for a in free:
        for i in range(src.rank):
            if n >= MAX_SLICE_FIRST:
                return
            try:
                mid = src.with_dim_axes(i, src.dims[i].axes + (a,)).check(mesh, "sliced type")
                if not mid.is_even(mesh) and src.is_even(mesh):
                    continue  # a slice that makes an even type uneven only adds padding
                n += 1
                rest = synthesize(mesh, mid, dst, itemsize=itemsize, cost=cost, budget_moves=budget_moves)
                plan = Plan.build(mesh, src, dst, [DynSlice(i, a)] + list(rest.steps), itemsize=itemsize,
                                  planner="auto", notes=rest.notes)
            except RedistributionError:
                continue
            yield f"auto after DynSlice({i}, {a})", plan


def _same_program_key(plan) -> tuple:
    """The plan's types after each step, consecutive local slices as one (``DynSlice(0,
    x:(1)2) ; DynSlice(0, x:(2)2)`` is ``DynSlice(0, x)``): plans with one key lower to
    the same program, so only one of them is compiled."""
    key, prev = [], None
    for c, t in zip(plan.steps, plan.types):
        if c.kind == prev == "dyn_slice":
            key[-1] = str(t)
        else:
            key.append(str(t))
        prev = c.kind
    return tuple(key)


def alternatives(mesh, src, dst, itemsize: int, cost, auto_plan, budget_moves=None) -> list[tuple[str, object]]:
    """The plans the rule may choose instead of ``auto_plan`` (see the module doc, step 2),
    as ``(label, plan)``, within the memory bound and without repeats, unranked."""
    from synth.errors import RedistributionError
    from synth.planners import synthesize

    cap = max(auto_plan.bound_bytes, auto_plan.max_shard_bytes)
    seen = {_same_program_key(auto_plan)}
    out = []

    def add(label, build):
        try:
            p = build() if callable(build) else build
        except RedistributionError:  # a baseline that cannot plan this case (e.g. r2c on uneven dims)
            return
        key = _same_program_key(p)
        if key in seen or p.max_shard_bytes > cap:
            return
        seen.add(key)
        out.append((label, p))

    add("normal", lambda: synthesize(mesh, src, dst, planner="normal", itemsize=itemsize))

    def r2c():
        from executor.shardy import shardy_plan

        return shardy_plan(mesh, src, dst, itemsize)

    add("shardy-r2c's plan", r2c)
    add("auto on whole axes", lambda: synthesize(mesh, src, dst, itemsize=itemsize, cost=cost,
                                                 budget_moves=budget_moves, move_set="whole-axes"))
    for label, p in _slice_first(mesh, src, dst, itemsize, cost, budget_moves):
        add(label, p)
    return out


def choose(auto_plan, auto_temp: int | None, auto_result, xla_temp_bytes: int | None,
           compile_temp: Callable[[object], tuple[int | None, object]], cost,
           candidates: Callable[[], list[tuple[str, object]]] | None = None,
           limit: int = MAX_ALTERNATIVES) -> Choice:
    """The memory-first rule (module doc). ``auto_temp``/``auto_result``: auto's plan
    already compiled; ``compile_temp(plan) -> (temp_bytes, result)`` compiles another
    (``temp_bytes`` None: it does not fit); ``candidates()`` lists the alternatives
    (default :func:`alternatives` with ``auto``'s work budget)."""
    t_auto = predicted_s(auto_plan, cost)
    tried = [Tried("auto", auto_temp, t_auto)]
    keep = Choice(auto_plan, "auto", auto_temp, xla_temp_bytes, t_auto, "", auto_result, tuple(tried))
    if xla_temp_bytes is None or (auto_temp is not None and auto_temp <= xla_temp_bytes):
        return keep
    if candidates is None:
        budget = (auto_plan.search or {}).get("budget_moves")
        candidates = lambda: alternatives(auto_plan.mesh, auto_plan.src, auto_plan.dst,  # noqa: E731
                                          auto_plan.itemsize, cost, auto_plan, budget)
    ranked = sorted(((predicted_s(p, cost), i, label, p) for i, (label, p) in enumerate(candidates())),
                    key=lambda x: (x[0], x[1]))
    compiled = [(auto_temp, t_auto, 0, "auto", auto_plan, auto_result)]
    best = None
    for k, (t, _, label, p) in enumerate(ranked[:max(0, limit)]):
        temp, res = compile_temp(p)
        tried.append(Tried(label, temp, t))
        compiled.append((temp, t, k + 1, label, p, res))
        if temp is not None and temp <= xla_temp_bytes:
            best = compiled[-1]
            break
    why = (f"memory-first: auto's fastest plan compiles to {_mib(auto_temp, xla_temp_bytes)} temp, XLA's to "
           f"{_mib(xla_temp_bytes, auto_temp)}")
    if best is None:  # none fits under XLA's: the least temp, ties to the faster
        fits = [c for c in compiled if c[0] is not None]
        best = min(fits, key=lambda c: (c[0], c[1], c[2])) if fits else compiled[0]
        verdict = (f"; none of the {len(compiled) - 1} alternatives compiled (of {len(ranked)} within the "
                   f"memory bound) is at or below XLA's")
        if best[3] == "auto":
            note = why + verdict + "; kept auto's plan, the least temp of those compiled"
        else:
            note = (why + verdict + f"; chose {best[3]}, the least temp ({_mib(best[0], xla_temp_bytes)}, predicted "
                    f"{best[1] * 1e6:.1f} us against {t_auto * 1e6:.1f} us)")
    else:
        note = (why + f"; chose {best[3]} ({_mib(best[0], auto_temp)} temp, predicted {best[1] * 1e6:.1f} us against "
                f"{t_auto * 1e6:.1f} us, the fastest at or below XLA's of {len(compiled) - 1} compiled)")
    plan = best[4]
    if best[3] != "auto":  # auto's choice: the plan is named auto, its notes say where it came from
        plan = dataclasses.replace(plan, planner="auto", notes=(note,) + tuple(plan.notes), search=None)
    return Choice(plan, best[3], best[0], xla_temp_bytes, best[1], note, best[5], tuple(tried))


__all__ = ["MAX_ALTERNATIVES", "MAX_SLICE_FIRST", "Choice", "Tried", "alternatives", "choose", "predicted_s",
           "xla_temp"]
