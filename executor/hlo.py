"""Read XLA's plan out of compiled HLO text: pure text parsing into a ``synth.Schedule``.

No jax here: :func:`hlo_to_schedule` takes the text of ``compiled.as_text()`` (or any
HLO module text) and returns the device-level schedule the simulator replays.

Understood:

* collectives ``all-gather``, ``all-to-all`` (array and tuple forms),
  ``collective-permute``, ``all-reduce``, ``reduce-scatter``, their async
  ``-start``/``-done`` pairs (the ``-start`` is the op; ``-done`` is skipped) and the
  generic ``async-start(..., calls=%wrapped_...)`` form;
* replica groups written explicitly ``{{0,1},{2,3}}``, as iota lists
  ``[2,4]<=[8]`` / ``[4,2]<=[2,2,2]T(1,0,2)``, and as a mesh
  ``mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'b'}``; ``{}`` means one group of all;
* ``source_target_pairs={{0,1},{1,0}}``;
* collectives over several dims (synth's ``MultiAllGather`` / ``MultiAllToAll``): XLA
  writes them as one all-gather / all-to-all over the joint replica groups (an
  all-to-all often in its tuple form, one piece per group member); each is one op, its
  bytes the sum of its operands;
* TPU's fused reduce-scatter, a fusion that all-reduces and keeps its own dynamic slice
  (``calls=%all-reduce-scatter``), is one ``reduce_scatter``;
* local work: a ``dynamic-slice`` (alone or fused) becomes ``dyn_slice``; other
  data-moving local ops (``copy``, ``transpose``, ``slice``, ``concatenate`` and the
  fusions made of them) become ``copy``.

Byte counts follow :mod:`synth.schedule` (per participating device). For an
``all_reduce`` the traffic fields hold what a ring moves: ``2 (n-1)/n`` of the buffer.

**Full rematerialization.** XLA's SPMD partitioner falls back, when it finds no
better way, to replicating the whole array and slicing it ("Involuntary full
rematerialization" in its log). The reader flags a schedule when a collective produces
a buffer as large as the whole array while the program's input and result are smaller
(so reducing a pending sum whose partials are whole arrays is not flagged), or when
the log text passed in holds that message. ``meta['full_remat']`` holds the verdict and
``meta['full_remat_reason']`` the evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from executor.errors import HloParseError
from synth.schedule import Schedule, ScheduleOp

_DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
    "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "token": 0, "s4": 1, "u4": 1,
    "s2": 1, "u2": 1,
}
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,\s]*)\]")

COLLECTIVE_OPCODES = {
    "all-gather": "all_gather",
    "all-to-all": "all_to_all",
    "collective-permute": "permute",
    "all-reduce": "all_reduce",
    "reduce-scatter": "reduce_scatter",
}
_LOCAL_MOVE = {"copy", "transpose", "slice", "concatenate", "pad", "reverse", "dynamic-update-slice",
               "gather", "scatter", "select"}
_IGNORE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "partition-id",
           "replica-id", "after-all", "opt-barrier", "iota", "broadcast", "convert", "reshape"}
REMAT_LOG = "Involuntary full rematerialization"


@dataclass
class Instr:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    line: int
    root: bool = False


@dataclass
class Computation:
    name: str
    entry: bool
    instrs: list[Instr] = field(default_factory=list)

    @property
    def by_name(self) -> dict[str, Instr]:
        return {i.name: i for i in self.instrs}


# -- lexing -----------------------------------------------------------------------
_HEADER = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\))?\s*->\s*.*\{\s*$")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def _balanced(s: str, i: int, open_c: str, close_c: str) -> int:
    """Index just past the bracket group starting at ``s[i] == open_c``."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == open_c:
            depth += 1
        elif s[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError("unbalanced")


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _parse_instr(m: re.Match, lineno: int, text: str) -> Instr:
    root, name, rest = bool(m.group(1)), m.group(2), m.group(3).strip()
    try:
        if rest.startswith("("):
            end = _balanced(rest, 0, "(", ")")
        else:
            end = rest.index(" ")
        shape, rest = rest[:end], rest[end:].strip()
        om = re.match(r"([\w\-]+)\(", rest)
        if not om:
            raise ValueError("no opcode")
        opcode = om.group(1)
        close = _balanced(rest, om.end() - 1, "(", ")")
        operand_text = rest[om.end(): close - 1]
        attrs = rest[close:].lstrip(", ")
    except ValueError:
        raise HloParseError(
            f"HLO line {lineno}: cannot read instruction {text.strip()[:120]!r}; expected "
            "'%name = SHAPE opcode(operands), attrs'"
        ) from None
    operands = []
    for o in _split_top(operand_text):
        om2 = re.search(r"%?([\w.\-]+)\s*$", o)
        if om2:
            operands.append(om2.group(1))
    return Instr(name, shape, opcode, operands, attrs, lineno, root)


def parse_module(text: str) -> dict[str, Computation]:
    """Computations of an HLO module by name (the entry one has ``entry=True``)."""
    if not isinstance(text, str) or "{" not in text:
        raise HloParseError("HLO text: expected the text of an HLO module (compiled.as_text())")
    comps: dict[str, Computation] = {}
    cur = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if cur is None:
            h = _HEADER.match(line)
            if h and not line.lstrip().startswith("HloModule"):
                cur = Computation(h.group(2), bool(h.group(1)))
                comps[cur.name] = cur
            continue
        if line.strip() == "}":
            cur = None
            continue
        m = _INSTR.match(line)
        if m:
            cur.instrs.append(_parse_instr(m, lineno, line))
    if not any(c.entry for c in comps.values()):
        raise HloParseError("HLO text: no ENTRY computation found; pass the whole module text")
    return comps


# -- shapes ----------------------------------------------------------------------------
def shape_arrays(shape: str) -> list[tuple[str, tuple[int, ...]]]:
    """The array shapes in a (possibly tuple) shape string, in order."""
    out = []
    for dt, dims in _ARRAY.findall(shape):
        if dt not in _DTYPE_BYTES:
            continue
        out.append((dt, tuple(int(d) for d in dims.replace(" ", "").split(",") if d)))
    return out


def array_bytes(dt: str, dims: tuple[int, ...]) -> int:
    return int(np.prod(dims, dtype=np.int64)) * _DTYPE_BYTES[dt]


def shape_bytes(shape: str) -> int:
    return sum(array_bytes(dt, dims) for dt, dims in shape_arrays(shape))


# -- replica groups ------------------------------------------------------------------
def _iota(dims: list[int], perm: list[int] | None) -> np.ndarray:
    a = np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims)
    if perm is not None:
        if sorted(perm) != list(range(len(dims))):
            raise HloParseError(f"iota list: transpose {perm} is not a permutation of {len(dims)} dims")
        a = a.transpose(perm)
    return a.reshape(-1)


def _ints(s: str) -> list[int]:
    return [int(v) for v in s.replace(" ", "").split(",") if v]


def parse_replica_groups(attrs: str, num_devices: int | None = None) -> list[list[int]]:
    """Device groups from an instruction's attributes (every form listed in the module doc).

    An absent or empty ``replica_groups`` means one group of all ``num_devices``."""
    m = re.search(r"replica_groups=", attrs)
    if not m:
        return [list(range(num_devices))] if num_devices else []
    s = attrs[m.end():]
    if s.startswith("{"):
        body = s[: _balanced(s, 0, "{", "}")]
        groups = [_ints(g) for g in re.findall(r"\{([0-9,\s]*)\}", body[1:-1])]
        groups = [g for g in groups if g]
        if not groups:
            return [list(range(num_devices))] if num_devices else []
        return groups
    it = re.match(r"\[([0-9,\s]+)\]<=\[([0-9,\s]+)\](?:T\(([0-9,\s]+)\))?", s)
    if it:
        shape = _ints(it.group(1))
        if len(shape) != 2:
            raise HloParseError(f"replica_groups {it.group(0)!r}: expected [groups,size]<=[...]")
        ids = _iota(_ints(it.group(2)), _ints(it.group(3)) if it.group(3) else None)
        if ids.size != shape[0] * shape[1]:
            raise HloParseError(f"replica_groups {it.group(0)!r}: {ids.size} ids do not fill {shape}")
        return ids.reshape(shape).tolist()
    mm = re.match(r"mesh\[([^\]]*)\]", s)
    if mm:
        axes = []
        for part in _split_top(mm.group(1)):
            am = re.fullmatch(r"'?([\w.\-]+)'?\s*=\s*(\d+)", part.strip())
            if not am:
                raise HloParseError(f"replica_groups mesh axis {part!r}: expected 'name'=size")
            axes.append((am.group(1), int(am.group(2))))
        rest = s[mm.end():]
        sizes = [n for _, n in axes]
        total = int(np.prod(sizes))
        dm = re.match(r"\s*,\s*device_ids=\((\[[0-9,\s]*\])(?:T\(([0-9,\s]+)\))?\)", rest)
        if dm:
            ids = _iota(_ints(dm.group(1)[1:-1]), _ints(dm.group(2)) if dm.group(2) else None)
            rest = rest[dm.end():]
        else:
            ids = np.arange(total)
        if ids.size != total:
            raise HloParseError(f"replica_groups mesh {mm.group(0)!r}: device_ids has {ids.size} ids, mesh {total}")
        sm = re.match(r"\s*\{([^}]*)\}", rest)
        chosen = []
        if sm:
            for part in _split_top(sm.group(1)):
                chosen.append(_mesh_axis_ref(part, axes))
        return _mesh_groups(ids, axes, chosen)
    raise HloParseError(f"replica_groups {s[:60]!r}: not an explicit, iota or mesh form")


def _mesh_axis_ref(part: str, axes) -> tuple[int, int, int]:
    """``'b'`` or the sub-axis ``'b':(pre)size`` -> (axis index, pre, size)."""
    names = [a for a, _ in axes]
    m = re.fullmatch(r"\s*'?([\w.\-]+)'?\s*(?::\((\d+)\)(\d+))?\s*", part)
    if not m or m.group(1) not in names:
        raise HloParseError(
            f"replica_groups mesh: axis {part.strip()!r} is not one of {names} or a sub-axis "
            "'name':(pre)size")
    i = names.index(m.group(1))
    n = axes[i][1]
    pre, size = (int(m.group(2)), int(m.group(3))) if m.group(2) else (1, n)
    if n % (pre * size):
        raise HloParseError(f"replica_groups mesh: sub-axis {part.strip()!r} does not divide size {n}")
    return i, pre, size


def _mesh_groups(ids: np.ndarray, axes, chosen) -> list[list[int]]:
    """Groups of a mesh-form replica group: devices that differ only on the chosen
    (sub-)axes, each group ordered by those axes, major to minor in the listed order."""
    # split every axis at the boundaries its referenced sub-axes need
    bounds = {i: {1, n} for i, (_, n) in enumerate(axes)}
    for i, pre, size in chosen:
        bounds[i] |= {pre, pre * size}
    factors, where = [], {}
    for i in range(len(axes)):
        b = sorted(bounds[i])
        for lo, hi in zip(b[:-1], b[1:]):
            if hi % lo:
                raise HloParseError(f"replica_groups mesh: sub-axes of axis {axes[i][0]!r} overlap")
            where[(i, lo)] = len(factors)
            factors.append(hi // lo)
    grid = ids.reshape(factors)
    picked = []
    for i, pre, size in chosen:
        j, covered = where[(i, pre)], 1
        while covered < size:
            picked.append(j)
            covered *= factors[j]
            j += 1
    keep = [k for k in range(len(factors)) if k not in picked]
    gsize = int(np.prod([factors[k] for k in picked])) if picked else 1
    return grid.transpose(keep + picked).reshape(-1, gsize).tolist()


def parse_pairs(attrs: str) -> list[tuple[int, int]]:
    m = re.search(r"source_target_pairs=\{", attrs)
    if not m:
        raise HloParseError(f"collective-permute without source_target_pairs: {attrs[:80]!r}")
    s = attrs[m.end() - 1:]
    body = s[: _balanced(s, 0, "{", "}")]
    pairs = []
    for g in re.findall(r"\{([0-9,\s]*)\}", body[1:-1]):
        v = _ints(g)
        if len(v) != 2:
            raise HloParseError(f"source_target_pairs entry {{{g}}}: expected two ids")
        pairs.append((v[0], v[1]))
    return pairs


# -- module -> schedule ---------------------------------------------------------------
def _called(instr: Instr) -> list[str]:
    return re.findall(r"(?:calls|to_apply|body|branch_computations)=\{?%?([\w.\-]+)", instr.attrs)


def _comp_opcodes(comps, name, seen=None) -> set[str]:
    seen = seen or set()
    if name in seen or name not in comps:
        return set()
    seen.add(name)
    ops = set()
    for i in comps[name].instrs:
        ops.add(i.opcode)
        if i.opcode in ("fusion", "call", "async-start"):
            for c in _called(i):
                ops |= _comp_opcodes(comps, c, seen)
    return ops


def _base_opcode(op: str) -> str | None:
    for suffix in ("-start", ""):
        if op.endswith(suffix) and op[: len(op) - len(suffix)] in COLLECTIVE_OPCODES:
            return op[: len(op) - len(suffix)]
    return None


def _operand_bytes(instr: Instr, table: dict[str, Instr]) -> int:
    total = 0
    for o in instr.operands:
        if o in table:
            total += shape_bytes(table[o].shape)
    return total


def _collective_op(instr: Instr, base: str, table: dict[str, Instr], num_devices: int | None) -> ScheduleOp:
    kind = COLLECTIVE_OPCODES[base]
    in_b = _operand_bytes(instr, table)
    if in_b == 0:  # operands defined elsewhere (e.g. a parameter of a wrapped computation)
        arrays = shape_arrays(instr.shape)
        in_b = array_bytes(*arrays[0]) if arrays else 0
    label = f"{instr.opcode} %{instr.name}"
    if kind == "permute":
        pairs = parse_pairs(instr.attrs)
        pairs = [(s, d) for s, d in pairs if s != d]
        return ScheduleOp("permute", in_b, in_b, send_bytes=in_b, recv_bytes=in_b, pairs=pairs, label=label)
    groups = parse_replica_groups(instr.attrs, num_devices)
    n = max((len(g) for g in groups), default=1)
    if kind == "all_gather":
        return ScheduleOp(kind, in_b, in_b * n, send_bytes=in_b, recv_bytes=(n - 1) * in_b,
                          groups=groups, label=label)
    if kind == "all_to_all":
        moved = in_b * (n - 1) // n
        return ScheduleOp(kind, in_b, in_b, send_bytes=moved, recv_bytes=moved, groups=groups, label=label)
    if kind == "reduce_scatter":
        moved = in_b * (n - 1) // n
        return ScheduleOp(kind, in_b, in_b // n, send_bytes=moved, recv_bytes=moved, groups=groups, label=label)
    moved = 2 * in_b * (n - 1) // n  # all_reduce, ring traffic
    return ScheduleOp(kind, in_b, in_b, send_bytes=moved, recv_bytes=moved, groups=groups, label=label)


def _all_reduce_scatter(comps, instr: Instr, num_devices) -> ScheduleOp | None:
    """TPU's fused reduce-scatter: a fusion whose computation all-reduces its input and
    returns this device's dynamic slice of the sum (XLA's TPU compiler prints it as
    ``fusion(...), kind=kCustom, calls=%all-reduce-scatter``, and runs it as one
    reduce-scatter). ``None`` for any other fusion."""
    for c in _called(instr):
        comp = comps.get(c)
        if comp is None:
            continue
        ars = [i for i in comp.instrs if _base_opcode(i.opcode) == "all-reduce"]
        root = next((i for i in comp.instrs if i.root), None)
        if len(ars) != 1 or root is None or root.opcode != "dynamic-slice" or root.operands[:1] != [ars[0].name]:
            continue
        ar = ars[0]
        in_b = _operand_bytes(ar, comp.by_name) or shape_bytes(ar.shape)
        groups = parse_replica_groups(ar.attrs, num_devices)
        n = max((len(g) for g in groups), default=1)
        moved = in_b * (n - 1) // n
        return ScheduleOp("reduce_scatter", in_b, shape_bytes(instr.shape), send_bytes=moved, recv_bytes=moved,
                          groups=groups, label=f"fusion %{instr.name} (all-reduce-scatter)")
    return None


def _walk(comps, comp: Computation, num_devices, out: list, depth=0):
    if depth > 16:
        return
    table = comp.by_name
    for instr in comp.instrs:
        op = instr.opcode
        base = _base_opcode(op)
        if base is not None:
            out.append((_collective_op(instr, base, table, num_devices), instr))
            continue
        if op.endswith("-done") or op in _IGNORE:
            continue
        if op in ("async-start", "call", "while", "conditional"):
            for c in _called(instr):
                if c in comps and not any(r in op for r in ("to_apply",)):
                    _walk(comps, comps[c], num_devices, out, depth + 1)
            continue
        if op == "fusion":
            rs = _all_reduce_scatter(comps, instr, num_devices)
            if rs is not None:
                out.append((rs, instr))
                continue
            inner = set()
            for c in _called(instr):
                inner |= _comp_opcodes(comps, c)
            if any(_base_opcode(o) for o in inner):
                for c in _called(instr):
                    _walk(comps, comps[c], num_devices, out, depth + 1)
                continue
            local = "dyn_slice" if "dynamic-slice" in inner else (
                "copy" if inner & _LOCAL_MOVE else None)
        elif op == "dynamic-slice":
            local = "dyn_slice"
        elif op in _LOCAL_MOVE:
            local = "copy"
        else:
            local = None
        if local is None:
            continue
        in_b = max((shape_bytes(table[o].shape) for o in instr.operands if o in table), default=0)
        out_b = shape_bytes(instr.shape)
        groups = tuple((d,) for d in range(num_devices)) if num_devices else ()
        out.append((ScheduleOp(local, in_b, out_b, groups=groups, label=f"{op} %{instr.name}"), instr))


def memory_space(shape: str) -> int:
    """The memory space of a shape's layout (``f32[8,128]{1,0:T(8,128)S(3)}`` -> 3; 0,
    the default device memory, when the layout names none). For a tuple, the largest."""
    return max((int(m) for m in re.findall(r"S\((\d+)\)", shape or "")), default=0)


def hlo_to_schedule(text: str, num_devices: int | None = None, global_bytes: int | None = None,
                    name: str = "xla", log: str = "") -> Schedule:
    """Parse an HLO module into a :class:`synth.Schedule` (ops in the module's order).

    ``num_devices`` defaults to the module's ``num_partitions``. ``global_bytes`` (the
    whole array's size) enables the full-rematerialization check; ``log`` is XLA's
    stderr text from the compile, searched for its rematerialization warning."""
    comps = parse_module(text)
    if num_devices is None:
        m = re.search(r"num_partitions=(\d+)", text)
        num_devices = int(m.group(1)) if m else None
    entry = next(c for c in comps.values() if c.entry)
    found: list = []
    _walk(comps, entry, num_devices, found)
    ops = [op for op, _ in found]
    if num_devices is None:
        ids = {d for op in ops for d in op.participants()}
        num_devices = max(ids) + 1 if ids else 1
    params = [i for i in entry.instrs if i.opcode == "parameter"]
    root = next((i for i in entry.instrs if i.root), entry.instrs[-1] if entry.instrs else None)
    initial = shape_bytes(params[0].shape) if params else 0
    final = shape_bytes(root.shape) if root is not None else 0
    reasons = []
    if REMAT_LOG in (log or ""):
        reasons.append(f"XLA logged '{REMAT_LOG}'")
    spaces = set()
    if global_bytes:
        for op, instr in found:
            # a collective builds a whole-array buffer on devices that started with less
            # (TPU may do it as an all-reduce of a zero-padded shard); reducing a pending
            # sum whose partials are already whole-array sized is not a rematerialization
            if not op.is_local and op.out_bytes >= global_bytes and initial < global_bytes \
                    and final < global_bytes:
                space = memory_space(instr.shape)
                where = ""
                if space:  # e.g. libtpu's S(3): not one of the compiler's HBM temporaries
                    spaces.add(space)
                    where = (f" in memory space S({space}), which the compiler's temp bytes do not count "
                             "(its compiled peak does)")
                reasons.append(f"{op.label} builds the whole array ({op.out_bytes} bytes) on each "
                               f"device{where}; the result is {final} bytes")
    peak = max([initial, final] + [op.in_bytes + op.out_bytes for op in ops])
    meta = {
        "initial_bytes": initial,
        "final_bytes": final,
        "peak_pair_bytes": peak,
        "full_remat": bool(reasons),
        "full_remat_reason": "; ".join(reasons),
        "source": "hlo",
    }
    if global_bytes:
        meta["global_bytes"] = int(global_bytes)  # the whole array, for explaining a rematerialization
    if spaces:
        meta["full_remat_memory_space"] = max(spaces)
    return Schedule(num_devices=num_devices, ops=tuple(ops), name=name, meta=meta)


def collectives_in(text: str) -> list[str]:
    """Kinds of the communicating ops of an HLO module, in order."""
    return [op.kind for op in hlo_to_schedule(text).ops if not op.is_local]


def collective_instructions(text: str, num_devices: int | None = None) -> list[tuple[ScheduleOp, Instr]]:
    """Every communicating op of an HLO module with the instruction it was read from (for
    its ``metadata``), in the module's order, through the same walk as
    :func:`hlo_to_schedule` (async wrappers, loops, TPU's fused reduce-scatter)."""
    comps = parse_module(text)
    if num_devices is None:
        m = re.search(r"num_partitions=(\d+)", text)
        num_devices = int(m.group(1)) if m else None
    entry = next(c for c in comps.values() if c.entry)
    found: list = []
    _walk(comps, entry, num_devices, found)
    return [(op, ins) for op, ins in found if not op.is_local]
