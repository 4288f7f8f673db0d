"""The search space of ``auto``: integer-coded types and the move table.

A :class:`Space` is one synthesis problem on the *work mesh* (the user's mesh with every
axis split into its prime factors, see :func:`work_mesh`). Its invariants, stated once:

* a state is ``(dims, U)``: ``dims[i]`` the tuple of axis *indices* (into
  :attr:`Space.names`, major to minor) that split dim ``i``; ``U`` the sorted tuple of
  axis indices over which sums are pending. Axes of size 1 never appear (they hold no
  data); an axis appears at most once in a state.
* every state the moves produce is a valid type: each move applies exactly the type
  rule of its collective in :mod:`synth.collectives` (divisibility, and the nesting rule
  of uneven dims), written here on integers;
* a move is a tuple of steps (usually one; a reordering permute and the gather or
  all-to-all it enables form one move), each step a tuple ``(kind, ...)`` that
  :meth:`Space.collective` turns into the collective object.

Example, mesh ``data=4,model=2`` (work mesh ``data:(1)2, data:(2)2, model``: indices 0, 1,
2): ``[8192{data}, 4096{model}]`` is the state ``(((0, 1), (2,)), ())``; the all-to-all of
the minor factor of ``data`` into dim 1 is the step ``("all_to_all", 0, 1, (1,))`` and
leads to ``(((0,), (2, 1)), ())``.

The move table :data:`MOVES` has one generator per collective kind (the search's view of
the collectives table); a new kind adds one generator.
"""

from __future__ import annotations

import functools
import itertools
import math

try:  # Cython's pure-Python mode: type declarations for the compiled copy (moves.pxd)
    import cython
except ImportError:  # no Cython: the declarations are no-ops
    from synth.planners import _nocython as cython

from synth.collectives import (
    AllGather,
    AllPermute,
    AllReduce,
    AllToAll,
    DynSlice,
    MultiAllGather,
    MultiAllToAll,
    ReduceScatter,
    ShardedToUnreduced,
    Unreduce,
    nests,
    schedule_ops,
)
from synth.mesh import Mesh
from synth.planners.cost import op_time
from synth.schedule import IN_PLACE_KINDS
from synth.types import ArrayType, Dim, cuts_of, refine_type

_ZERO3 = (0.0, 0, 0)

#: The local move kinds (no communication; free under the default model). A new local kind
#: is listed here: :meth:`Space.local_successors` generates these (and relabels) alone.
LOCAL_MOVE_KINDS = ("dyn_slice", "unreduce", "sharded_to_unreduced")

#: The move kinds :meth:`Space.last_op_successors` keeps whatever they reach (one-step
#: moves): the local kinds and the permutes (single permutes, class entries).
_LOCAL_KINDS = frozenset(LOCAL_MOVE_KINDS)
_KEEP_LAST_KINDS = _LOCAL_KINDS | {"all_permute", "permute_class"}
#: The first step kinds of permute moves (a single permute, or a class entry of them).
PERMUTE_MOVES = frozenset(("all_permute", "permute_class"))


_NO_SKIPS = frozenset()


def _bad_dim(a, t, TU) -> bool:
    """Whether local steps cannot turn a dim split over ``a`` into one split over ``t``
    (the target's): what follows their common prefix is neither sliced on (target axes)
    nor ShardedToUnreduced (target-pending, in ``TU``)."""
    m = 0
    while m < len(a) and m < len(t) and a[m] == t[m]:
        m += 1
    return m < len(a) and not TU.issuperset(a[m:])


@functools.cache
def _skips(n_bad: int, bad_u: bool) -> frozenset:
    """:meth:`Space._last_op_skips` from the number of bad dims and whether the pending
    sums are bad."""
    out = set()
    if bad_u:
        out |= {"all_gather", "all_to_all", "multi_all_gather", "multi_all_to_all"}
    if n_bad > 0:
        out.add("all_reduce")
    if n_bad > 1:
        out |= {"all_gather", "reduce_scatter"}
    if n_bad > 2:
        out.add("all_to_all")
    return frozenset(out)


def _kept_last(steps) -> bool:
    """Whether :meth:`Space.last_op_successors` keeps a move whatever it reaches: a move of
    local steps only (one slice, or several), or a permute move of one step (a reordering
    permute with the gather or all-to-all it enables is communicating)."""
    if len(steps) == 1:
        return steps[0][0] in _KEEP_LAST_KINDS
    return all(st[0] in _LOCAL_KINDS for st in steps)

#: Meshes up to this many devices get the exact per-device bound in the search's ``h``.
EXACT_NEED_DEVICES = 4096

#: Most integers :meth:`Space.block_index` keeps (8 bytes each: 32 MiB), whatever the mesh
#: and the number of states; past it, new tuples are rebuilt from a cached prefix.
BLOCK_INDEX_CACHE_ELEMS = 1 << 22


def _strides(mesh: Mesh, names):
    """``(stride, size)`` of each named axis in row-major device ids."""
    out = []
    for a in names:
        st = 1
        seen = False
        for b, n in mesh.axes:
            if seen:
                st *= n
            if b == a:
                seen = True
        out.append((st, mesh.shape[a]))
    return out


#: Orders of a dim's axes subset tried by one gather / all-to-all: every order for subsets
#: of at most this many axes, the current order for larger ones.
MAX_ORDERED_SUBSET = 3


def primes(n: int) -> list[int]:
    out, f = [], 2
    while f * f <= n:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    return out + ([n] if n > 1 else [])


def work_mesh(mesh: Mesh, types=()) -> Mesh:
    """``mesh`` with every axis split into prime factors (ascending, major first) inside
    each factor the ``types`` use: on ``x=12`` the factors ``x:(1)2, x:(2)2, x:(4)3``.
    Returns ``mesh`` itself when no axis has a composite size and no type uses sub-axes."""
    base = mesh.base_mesh if mesh.base else mesh
    cuts = cuts_of(base, list(types))
    out: dict[str, set[int]] = {}
    for a, n in base.axes:
        marks = sorted({1, n} | set(cuts.get(a, ())))
        got = set()
        for lo, hi in zip(marks[:-1], marks[1:]):
            pre = lo
            for f in primes(hi // lo)[:-1]:
                pre *= f
                got.add(pre)
            if hi != n:
                got.add(hi)
        if got:
            out[a] = got
    return base.refine(out) if out else base


class Space:
    """One problem: work mesh, global shape, source and target state (see the module doc).

    ``kept_unit`` are size-1 axes pending in both source and target: they ride along
    unchanged in every type (the planner adds relabelling steps for the other size-1
    axes at either end)."""

    # Every attribute is named here (no per-instance __dict__): the search reads them
    # millions of times, and a slot is found without a dict lookup (7% fewer instructions
    # over 100 median bench calls under callgrind; docs/synth.md, round 12).
    __slots__ = (
        "mesh", "shape", "rank", "names", "idx", "sz", "_bit", "base_of", "nfactors",
        "kept_unit", "itemsize", "cost", "max_fused", "max_ordered", "local_free", "floor",
        "bytes_lb", "S0", "T", "TU", "t_used", "_info", "_types", "_cost", "_class",
        "_goal_adj", "_pclass", "closure_capped", "_h", "_hold", "_ov", "_succ", "_cur",
        "_coords", "_bidx", "_bidx_elems", "_ids", "states", "shards", "infos", "_hv", "_lr",
        "_nx", "size", "_exact", "_sub", "_prods", "_free_sizes", "_strides", "_hq", "_uov",
        "_t_shard", "_t_regions", "_t_prefix_products", "_even_T", "relabel", "tick", "fast",
        "_bw", "_alpha", "_hvs"
    )

    def __init__(self, mesh: Mesh, src: ArrayType, dst: ArrayType, itemsize: int, cost, max_fused: int):
        self.mesh = mesh
        self.shape = tuple(src.shape)
        self.rank = len(self.shape)
        self.names = tuple(a for a, s in mesh.axes if s > 1)
        self.idx = {a: k for k, a in enumerate(self.names)}
        self.sz = tuple(mesh.shape[a] for a in self.names)
        self._bit = tuple(1 << k for k in range(len(self.sz)))  # axis index -> its bitmask
        #: per axis index, the user's mesh axis it is a factor of
        self.base_of = tuple(a.split(":")[0] for a in self.names)
        self.nfactors: dict[str, int] = {}
        for b in self.base_of:
            self.nfactors[b] = self.nfactors.get(b, 0) + 1
        self.kept_unit = tuple(a for a in src.unreduced if mesh.shape[a] == 1 and a in dst.unreduced)
        self.itemsize = itemsize
        self.cost = cost
        self.max_fused = max_fused
        #: the directed pass tries every order of subsets of at most this many axes
        self.max_ordered = MAX_ORDERED_SUBSET if len(self.names) <= 6 else 2
        self.local_free = bool(getattr(cost, "local_free", False))
        self.floor = float(cost.comm_floor_s())
        self.bytes_lb = getattr(cost, "bytes_lower_bound_s", lambda m: 0.0)
        self.S0 = self.code(src)
        self.T = self.code(dst)
        self.TU = frozenset(self.T[1])
        self.t_used = 0  # bitmask of the axes the target splits dims over
        for ax in self.T[0]:
            for k in ax:
                self.t_used |= 1 << k
        self._info: dict = {}
        self._types: dict = {}
        self._cost: dict = {}
        self._class: dict = {}
        self._goal_adj: dict = {}
        self._pclass: dict = {}  # (splits, U) -> the other classes one permute reaches
        #: set when :meth:`permute_classes` dropped classes past MAX_PERMUTE_CLASSES: the
        #: search's claims are then over the capped move set
        self.closure_capped = False
        self._h: dict = {}
        self._hold: dict = {}  # dims -> _holds_target
        self._ov: dict = {}
        self._succ: dict = {}
        self._cur = None
        self._coords = None
        self._bidx: dict = {}  # axis-index tuple -> block index per device (block_index)
        self._bidx_elems = 0
        self._ids: dict = {}
        self.states: list = []   # id -> state
        self.shards: list = []   # id -> shard elements
        self.infos: list = []    # id -> info(dims) (hot loop: no nested-tuple hashing)
        self._hv: list = []      # id -> h (None until asked)
        self._hvs: list = []     # id -> h_sharp (None until asked)
        self._lr: list = []      # id -> local_reach (None until asked)
        self._nx: dict = {}      # axis-index tuple -> product of its sizes
        self.size = mesh.size
        self._exact = self.size <= EXACT_NEED_DEVICES
        self._sub: dict = {}
        self._prods: dict = {}
        self._free_sizes: dict = {}  # U -> the sizes of the factors not in U, sorted
        self._strides: dict = {}  # axis-index tuple -> {axis: its block-index stride}
        self._hq: dict = {}  # state id -> h_quick_id's bound (deferred states)
        self._uov: dict = {}  # (dim, axes) -> _unit_overlaps
        self._t_shard = self.info(self.T[0])[2]
        self._t_regions = None
        self._t_prefix_products = None
        self._even_T = all(n % k == 0 for n, k in zip(self.shape, self.info(self.T[0])[0]))
        #: an uneven dim on either side: permutes may also change a dim's number of blocks
        #: where its local size stays (:func:`_relabel_moves`)
        self.relabel = not self._even_T or any(
            n % k for n, k in zip(self.shape, self.info(self.S0[0])[0]))
        self.tick = None  # set by the engine: called once per move examined
        from synth.planners.cost import DefaultCost

        self.fast = type(cost) is DefaultCost
        # alpha-beta of the hot loop's arithmetic (STEP_COST_LIVE); unused under other models
        self._alpha, self._bw = (cost.alpha_s, cost.bandwidth_Bps) if self.fast else (0.0, 1.0)

    # -- coding ----------------------------------------------------------------------
    def code(self, t: ArrayType):
        idx = self.idx
        dims = tuple(tuple(idx[a] for a in d.axes if a in idx) for d in t.dims)
        return dims, tuple(sorted(idx[a] for a in t.unreduced if a in idx))

    def to_type(self, state) -> ArrayType:
        t = self._types.get(state)  # memoised: a state is costed as the source of many moves
        if t is None:
            dims, U = state
            nm = self.names
            t = self._types[state] = ArrayType._derived(  # a state: valid by construction
                tuple(Dim(n, tuple(nm[k] for k in ax)) for n, ax in zip(self.shape, dims)),
                tuple(nm[k] for k in U) + self.kept_unit)
        return t

    def info(self, dims):
        """``(splits, local shape, shard elements, bitmask of used axes)`` of ``dims``."""
        cur = self._cur
        if cur is not None and cur[0] is dims:
            return cur[1]
        v = self._info.get(dims)
        if v is None:
            v = self._info[dims] = self._info_of(dims)
        return v

    def _info_of(self, dims):
        """:meth:`info` computed (not memoised): one pass over the dims, the products
        accumulated in the loop. Example, ``x=4,y=2`` (indices 0, 1), shape ``(8, 6)``,
        dims ``((0, 1), ())``: splits ``(8, 1)``, local shape ``(1, 6)``, 6 elements, used
        axes ``0b11``."""
        sz, bit = self.sz, self._bit
        splits, loc = [], []
        used, sh = 0, 1
        for n, ax in zip(self.shape, dims):
            p = 1
            for k in ax:
                p *= sz[k]
                used |= bit[k]
            splits.append(p)
            m = -(-n // p)
            loc.append(m)
            sh *= m
        return (tuple(splits), tuple(loc), sh, used)

    def shard(self, state) -> int:
        return self.info(state[0])[2]

    # -- collectives and their exact cost -------------------------------------------------
    def collective(self, step):
        nm = self.names
        kind = step[0]
        if kind == "dyn_slice":
            return DynSlice(step[1], tuple(nm[k] for k in step[2]))
        if kind == "all_gather":
            return AllGather(step[1], tuple(nm[k] for k in step[2]))
        if kind == "all_to_all":
            return AllToAll(step[1], step[2], tuple(nm[k] for k in step[3]))
        if kind == "all_permute":
            return AllPermute(self.to_type(step[1]))
        if kind == "all_reduce":
            return AllReduce(tuple(nm[k] for k in step[1]))
        if kind == "reduce_scatter":
            return ReduceScatter(step[1], tuple(nm[k] for k in step[2]))
        if kind == "unreduce":
            return Unreduce(tuple(nm[k] for k in step[1]))
        if kind == "multi_all_gather":
            return MultiAllGather(tuple((i, tuple(nm[k] for k in X)) for i, X in step[1]))
        if kind == "multi_all_to_all":
            return MultiAllToAll(tuple((i, j, tuple(nm[k] for k in X)) for i, j, X in step[1]))
        if kind == "sharded_to_unreduced":
            return ShardedToUnreduced(step[1], tuple(nm[k] for k in step[2]))
        raise ValueError(f"unknown move kind {kind!r}")

    def step_cost(self, step, a, b):
        """``(time_s, bytes received by the neediest device, collectives)`` of one step
        from state ``a`` to ``b``: the cost model's time of the step's own schedule ops
        (:func:`synth.collectives.schedule_ops`, the lowering ``Plan.to_schedule`` uses),
        memoised on what the ops depend on (the step and the local shapes; a permute's
        pairs depend on both types)."""
        if self.fast:  # plain arithmetic: cheaper than a memo lookup
            return self._alpha_beta(step, a, b)
        if step[0] == "all_permute":  # the pairs depend on both types, pending sums included
            key = (a[0], b[0], a[1], b[1])
        else:
            key = (step, self.info(a[0])[1], self.info(b[0])[1])
        c = self._cost.get(key)
        if c is None:
            col = self.collective(step)
            ta, tb = self.to_type(a), self.to_type(b)
            mesh = self.mesh
            if col.is_noop(ta, mesh):
                c = (0.0, 0, 0)
            else:
                ops = schedule_ops(col, ta, tb, mesh, self.itemsize)
                if self.local_free:
                    t = sum(op_time(self.cost, op) for op in ops if not op.is_local)
                else:
                    t = sum(op_time(self.cost, op) for op in ops)
                if col.local:
                    recv = 0
                elif step[0] == "all_permute":  # not a no-op: a device that moves gets its whole shard
                    recv = ta.shard_elems(mesh) * self.itemsize
                else:
                    recv = int(col.recv_elems(ta, tb, mesh).max()) * self.itemsize
                c = (t, recv, 0 if col.local else 1)
            self._cost[key] = c
        return c

    def _alpha_beta(self, step, a, b):
        """:meth:`step_cost` under :class:`~synth.planners.cost.DefaultCost` without
        building the ops: the same bytes as each kind's schedule lowering and
        ``recv_elems`` (local ops are free)."""
        kind, isz = step[0], self.itemsize
        if kind in ("dyn_slice", "unreduce", "sharded_to_unreduced"):
            return (0.0, 0, 0)
        sz = self.sz
        _, loc_a, sh_a, _ = self.info(a[0])
        if kind == "multi_all_gather":
            n = math.prod(sz[k] for _, X in step[1] for k in X)
            b_ = (n - 1) * sh_a * isz
            return (self.cost.alpha_s + b_ / self.cost.bandwidth_Bps, b_, 1)
        if kind == "multi_all_to_all":
            loc = list(loc_a)
            out = self.info(b[0])[1]
            n = 1
            for _, j, _X in step[1]:
                loc[j] = out[j]
            for _, j, X in step[1]:  # a shared dst dim holds the product of its moves' pieces
                nk = math.prod(sz[k] for k in X)
                n *= nk
                loc[j] *= nk
            sent = math.prod(loc)
            op_b, metric = sent * isz * (n - 1) // n, sent * (n - 1) // n * isz
            return (self.cost.alpha_s + op_b / self.cost.bandwidth_Bps, metric, 1)
        if kind == "all_permute":
            if self.info(b[0])[0] != self.info(a[0])[0]:
                return self._relabel_cost(a, b)
            op_b = metric = sh_a * isz
        else:
            X = step[2] if kind in ("all_gather", "reduce_scatter") else (
                step[3] if kind == "all_to_all" else step[1])
            n = math.prod(sz[k] for k in X)
            if kind == "all_gather":
                op_b = metric = (n - 1) * sh_a * isz
            elif kind == "all_to_all":
                j = step[2]
                loc = list(loc_a)
                loc[j] = n * self.info(b[0])[1][j]
                sent = math.prod(loc)
                op_b, metric = sent * isz * (n - 1) // n, sent * (n - 1) // n * isz
            elif kind == "all_reduce":
                op_b, metric = 2 * sh_a * isz * (n - 1) // n, 2 * (n - 1) * sh_a // n * isz
            else:  # reduce_scatter
                op_b = metric = (n - 1) * self.info(b[0])[2] * isz
        return (self.cost.alpha_s + op_b / self.cost.bandwidth_Bps, metric, 1)

    def _relabel_cost(self, a, b):
        """The cost of a permute between types of different splits (the same local shape):
        nothing where it moves nothing, else one permute of the shard, as its schedule
        lowering costs it."""
        if self.moves_nothing(a[0], b[0]):
            return (0.0, 0, 0)
        sh = self.shard(a) * self.itemsize
        return (self.cost.alpha_s + sh / self.cost.bandwidth_Bps, sh, 1)

    def moves_nothing(self, a, b) -> bool:
        """Whether the permute from dims ``a`` to dims ``b`` (the same local shape) leaves
        every device with its block: per device, its block under ``b`` is empty or the
        one it holds under ``a`` (equal local sizes: equal block indices, equal data).
        Example, ``x=y=z=w=2``: ``8{y,z,w} -> 8{x,y,z,w}``: block ``4y+2z+w`` both ways
        where ``x=0``, empty where ``x=1``."""
        key = ("still", a, b)
        v = self._cost.get(key)
        if v is None and all(xb == xa or xb[1:] == xa for xa, xb in zip(a, b)):
            # only major-most factors added (the local shape kept): block b of the old split
            # is block b of the new one where they are 0, past the dim's end elsewhere
            v = self._cost[key] = True
        if v is None and self._moves_at_unit_device(a, b):
            v = self._cost[key] = False
        if v is None:
            v = self._cost[key] = self._moves_nothing_exact(a, b)
        return v

    def _moves_nothing_exact(self, a, b) -> bool:
        """:meth:`moves_nothing` device by device (per-device arrays; not memoised)."""
        # a dim split the same way on both sides keeps every device's block index; a
        # device whose block is past the end of some dim under ``b`` holds nothing
        loc = self.info(a)[1]
        same = empty = None
        for i, (xa, xb) in enumerate(zip(a, b)):
            e = self._past_end(i, xb, loc[i])
            if e is not None:
                empty = e if empty is None else empty | e
            if xa != xb:
                d = self.block_index(xa) == self.block_index(xb)
                same = d if same is None else same & d
        if same is None:
            return True
        return bool((same | empty).all()) if empty is not None else bool(same.all())

    def _moves_at_unit_device(self, a, b) -> bool:
        """A quick witness for :meth:`moves_nothing` being False: some device whose
        coordinate is 1 on one axis of a changed dim and 0 on every other axis holds a
        block under ``b`` (no dim past its end) that differs from its block under ``a`` in
        some dim. Its block index along a dim split over ``ax`` is the product of the sizes
        after that axis in ``ax`` (0 where ``ax`` lacks it), so this is integer arithmetic
        on a few axes, where the exact test builds per-device arrays. False means no
        witness here (the exact test decides). On the bench's slowest uneven cases it
        found one for every permute that moves data.

        Example, ``x=2,y=3``, one dim of 6 (local size 1): ``(0, 1) -> (1, 0)`` (``6{x,y}
        -> 6{y,x}``): the device with ``y = 1`` holds block 1 under ``a`` and block 2 under
        ``b``, both within the dim: it moves."""
        # an axis k sits in at most one dim of each side: only there can the device's
        # block be past the end (under b) or differ (a changed dim)
        loc, shape, stride = self.info(a)[1], self.shape, self._unit_stride
        at_a = {k: j for j, x in enumerate(a) for k in x}
        at_b = {k: j for j, x in enumerate(b) for k in x}
        for xa, xb in zip(a, b):
            if xa == xb:
                continue
            for k in xa + xb:
                jb = at_b.get(k)
                if jb is not None:
                    sb = stride(b[jb])[k]
                    if sb * loc[jb] >= shape[jb]:
                        continue  # the device holds nothing under b
                    if a[jb] != b[jb] and stride(a[jb]).get(k, 0) != sb:
                        return True
                ja = at_a.get(k)
                if ja is not None and ja != jb and a[ja] != b[ja] and \
                        stride(a[ja])[k] != stride(b[ja]).get(k, 0):
                    return True
        return False

    def _unit_overlaps(self, i, ax):
        """``(base, {axis: overlap})`` along dim ``i`` split over ``ax`` (memoised): the
        overlap of device 0's block with its target block (``base``), and of the device
        with coordinate 1 on ``axis`` where that differs (:meth:`_unit_deficit`)."""
        key = (i, ax)
        v = self._uov.get(key)
        if v is None:
            n, t = self.shape[i], self.T[0][i]
            ls, lt = n // self.nprod(ax), n // self.nprod(t)
            sa, st = self._unit_stride(ax), self._unit_stride(t)
            base = ls if ls < lt else lt
            ov = {}
            for k in set(ax) | set(t):
                s, u = sa.get(k, 0) * ls, st.get(k, 0) * lt
                o = min(s + ls, u + lt) - max(s, u)
                o = o if o > 0 else 0
                if o != base:
                    ov[k] = o
            v = self._uov[key] = (base, ov)
        return v

    def _unit_stride(self, ax):
        """``{axis: block-index stride}`` of a dim split over ``ax`` (memoised): the
        product of the sizes of the axes after it. Example, ``x=2,y=3``: ``(0, 1)`` gives
        ``{0: 3, 1: 1}``."""
        v = self._strides.get(ax)
        if v is None:
            v, p = {}, 1
            for k in reversed(ax):
                v[k] = p
                p *= self.sz[k]
            self._strides[ax] = v
        return v

    def _past_end(self, i, ax, loc):
        """Per device, whether its block of dim ``i`` split over ``ax`` (blocks of ``loc``)
        starts past the dim's end; None where no device's does (memoised)."""
        key = ("past", i, ax, loc)
        v = self._ov.get(key, False)
        if v is False:
            e = self.block_index(ax) * loc >= self.shape[i]
            v = self._ov[key] = e if e.any() else None
        return v

    def _ab_i(self, step, ia, ib):
        """:meth:`_alpha_beta` from the two states' infos (its kind's :data:`STEP_COST_LIVE`
        entry: the same arithmetic, in the same order, so the same floats); None for a
        kind that table does not cost."""
        kind = step[0]
        if kind == "dyn_slice":
            return _ZERO3
        f = STEP_COST_LIVE.get(kind)
        return None if f is None else f(self, step, ia, ib)[0]

    def permute_floor(self, state):
        """No permute from ``state`` to another type costs less (a class entry's key)."""
        if self.fast:
            b = self.shard(state) * self.itemsize
            return (self.cost.alpha_s + b / self.cost.bandwidth_Bps, b, 1)
        return (self.floor, 0, 1)

    def local_run_cost(self, in_elems, out_elems):
        """A run of consecutive DynSlices is one local op (``Plan.to_schedule`` fuses them)."""
        key = ("run", in_elems, out_elems)
        c = self._cost.get(key)
        if c is None:
            from synth.schedule import ScheduleOp

            op = ScheduleOp("dyn_slice", in_elems * self.itemsize, out_elems * self.itemsize,
                            groups=tuple((d,) for d in range(self.mesh.size)))
            c = self._cost[key] = (op_time(self.cost, op), 0, 0)
        return c

    # -- bounds ------------------------------------------------------------------------
    def local_reach(self, state) -> bool:
        """The target may be reached from ``state`` by local steps only (slices, unreduce,
        sharded-to-unreduced): optimistic, so the bound that uses it stays admissible."""
        dims, U = state
        TU = self.TU
        if not TU.issuperset(U):
            return False
        for a, t in zip(dims, self.T[0]):
            if _bad_dim(a, t, TU):
                return self.relabel and self._holds_target(state)
        return True

    def _holds_target(self, state) -> bool:
        """Every device holds the data of its target block already (an empty target
        block needs none): then slices and a permute that moves nothing may reach the
        target, so the bound must be 0 (pending sums are ignored: optimistic).

        Dim by dim: a device's box (``ArrayType.regions``: its block clipped to the dim)
        holds its target box where it does along every dim, and a target box is empty
        where it is along some dim, so the answer is ``all(empty | AND_i inside_i)`` with
        ``inside_i`` a per-device array of dim ``i`` and its axes alone
        (:meth:`_inside_dim`, memoised). Example, ``x=2`` and ``[3] -> [3{x}]`` (target
        boxes ``[0, 2)``, ``[2, 3)``): ``[3]`` holds both (True); ``[3{x}]`` itself too."""
        dims = state[0]
        v = self._hold.get(dims)
        if v is None:
            # device 0's target block starts every dim at 0: its own block must be as long
            if any(x < y for x, y in zip(self.info(dims)[1], self.info(self.T[0])[1])):
                v = False
            else:
                v = not self._misses_at_unit_device(dims) and self._holds_by_arrays(dims)
            self._hold[dims] = v
        return v

    def _holds_by_arrays(self, dims) -> bool:
        """:meth:`_holds_target`'s answer from the per-device arrays, every device
        (device 0 included): ``all(empty | AND_i inside_i)``."""
        acc = None
        for i, ax in enumerate(dims):
            a = self._inside_dim(i, ax)
            acc = a if acc is None else acc & a
        return True if acc is None else bool((self._target_boxes()[1] | acc).all())

    def _misses_at_unit_device(self, dims) -> bool:
        """A quick witness for :meth:`_holds_target` being False: some device whose
        coordinate is 1 on one axis and 0 on every other lacks part of its target box (a
        nonempty one). Along a dim split over ``ax`` its block index is the axis's stride
        in ``ax`` (:meth:`_unit_stride`; 0 where ``ax`` lacks it), so its box and its
        target box are two intervals per dim, in integers, where the exact test builds
        per-device arrays. Only the dims that hold the axis on either side can differ
        from device 0's boxes, which the caller has checked. False means no witness here
        (the exact test decides).

        Example, ``x=2``, ``[3] -> [3{x}]`` holds (True, no witness); ``[5{x}] ->
        [5]``: the device with ``x = 1`` holds ``[3, 5)`` and needs ``[0, 5)``: a witness."""
        shape, T, stride = self.shape, self.T[0], self._unit_stride
        loc, tloc = self.info(dims)[1], self.info(T)[1]
        for k in range(len(self.sz)):
            inside = True
            for i, (ax, t) in enumerate(zip(dims, T)):
                if k not in ax and k not in t:
                    continue
                n = shape[i]
                s1 = stride(t).get(k, 0) * tloc[i]
                e1 = min(s1 + tloc[i], n)
                if e1 <= s1:
                    break  # its target box is empty: it needs nothing
                s0 = stride(ax).get(k, 0) * loc[i]
                e0 = min(s0 + loc[i], n)
                s0 = min(s0, e0)
                if not (s0 <= s1 and e1 <= e0):
                    inside = False
            else:
                if not inside:
                    return True
        return False

    def _target_boxes(self):
        """Per dim ``i``, the target boxes ``(starts, stops)`` along it (per device), and
        per device whether its target box is empty (along some dim): once per problem."""
        tr = self._t_regions
        if tr is None:
            boxes = [self._boxes(i, ax) for i, ax in enumerate(self.T[0])]
            empty = None
            for s1, e1 in boxes:
                e = e1 <= s1
                empty = e if empty is None else empty | e
            if empty is None:
                import numpy as np

                empty = np.zeros(self.size, dtype=bool)
            tr = self._t_regions = (boxes, empty)
        return tr

    def _boxes(self, i, ax):
        """Per device, ``(start, stop)`` of its box along dim ``i`` split over ``ax``: its
        block clipped to the dim (``ArrayType._regions``, one column)."""
        import numpy as np

        n = self.shape[i]
        loc = -(-n // self.nprod(ax))
        starts = self.block_index(ax) * loc
        stops = np.minimum(starts + loc, n)
        return np.minimum(starts, stops), stops

    def _inside_dim(self, i, ax):
        """Per device, whether its box along dim ``i`` split over ``ax`` holds its target
        box along that dim (memoised per dim and axes)."""
        key = ("in", i, ax)
        v = self._ov.get(key)
        if v is None:
            s0, e0 = self._boxes(i, ax)
            s1, e1 = self._target_boxes()[0][i]
            v = self._ov[key] = (s0 <= s1) & (e1 <= e0)
        return v

    def h(self, state):
        """Admissible bound ``(time_s, bytes, collectives)`` on the rest of the way: 0 when
        the target is reached locally; else one communicating op at least, and, where no
        sums are pending or to add and the dims are even, the bytes the neediest device
        lacks (the target block less the product of the per-dim largest overlaps)."""
        v = self._h.get(state)
        if v is None:
            v = self._h[state] = self._h_of(state, self.local_reach(state))
        return v

    def _h_of(self, state, local, inf=None):
        """:meth:`h` of ``state`` given its :meth:`local_reach` ``local`` (and its info
        ``inf``, where the caller has it); not memoised."""
        if local:
            v = (0.0, 0, 0)
        else:
            dims, U = state
            m = 0
            if not U and not self.T[1] and self._even_T and all(
                    n % k == 0 for n, k in zip(self.shape, (inf or self.info(dims))[0])):
                if self._exact:
                    # the neediest device: its target block less what it holds of it
                    ov = self._overlap_dev
                    prod = ov(0, dims[0])
                    for i in range(1, self.rank):
                        prod = prod * ov(i, dims[i])
                    m = int(self._t_shard - prod.min()) * self.itemsize
                else:
                    p = 1
                    for i in range(self.rank):
                        p *= self._overlap(i, dims[i])
                    m = (self.info(self.T[0])[2] - p) * self.itemsize
            elif U and not self.T[1]:
                # sums pending over U must be combined: nU - 1 partial values per
                # element arrive somewhere, spread at best over all devices
                nU = math.prod(self.sz[a] for a in U)
                m = -(-(nU - 1) * math.prod(self.shape) // self.size) * self.itemsize
                # and device 0 (its target block the whole target local shape) holds at
                # most one of the nU partial values of each element of its block: one
                # value at least arrives for each. Example, [12{w}, 3{x}]{U:v,y} ->
                # [12{w}, 3{x}] on w=x=2: 6 * 3 = 18 elements (the spread bound: 1)
                m = max(m, self._t_shard * self.itemsize)
            v = (max(self.floor, self.bytes_lb(m)), m, 1)
        return v

    def _uneven_deficit(self, dims) -> int:
        """What device 0 lacks of its target box (elements), where a dim is uneven on
        either side and no sums are pending on either: device 0's box along each dim is
        the first block, ``[0, local size)`` (never clipped), so it holds
        ``min(local, target local)`` of its target box's extent there. A device receives
        every element of its target box it does not hold (no local step makes a value,
        and every op's received bytes are at least the new elements it brings a device:
        the padded shards it moves hold them). From the two local shapes alone, no
        per-device arrays. Example, ``a=3``, ``[10] -> [10{a}]`` needs nothing; ``[2,
        10{a}] -> [2{a}, 10]`` (blocks of 4, 4 and 2 columns): device 0 holds 1 x 4 of
        its 1 x 10 target box, so it lacks 6 elements."""
        tl = self.info(self.T[0])[1]
        full = held = 1
        for x, y in zip(self.info(dims)[1], tl):
            full *= y
            held *= x if x < y else y
        return full - held

    def deficit_bytes(self, shard: int) -> int:
        """Bytes device 0 must still receive from any state of ``shard`` elements, when
        no sums are pending in the target: its target block is the whole local shape
        (block 0 of every dim is never short, uneven dims included), it holds at most
        ``shard`` elements of it, and each other element must arrive (no local op makes
        a final value). Example: ``[10{x}] -> [10]`` on ``x=5``: 10 - 2 = 8 elements.
        0 where the target leaves sums pending (Unreduce and ShardedToUnreduced fill
        partial values locally)."""
        if self.T[1]:
            return 0
        tsh = self._t_shard
        return (tsh - shard) * self.itemsize if tsh > shard else 0

    def h_class(self, state):
        """Admissible bound on the rest of the way from *every* member of ``state``'s
        permute class (the types with its splits and pending sums), without enumerating
        them: a member holds ``shard`` elements, so where device 0 lacks
        :meth:`deficit_bytes` > 0 of its target block no member reaches the target by
        local steps (one more communicating op at least, receiving that much); else 0.
        Example, ``[1920{z,x,y,v,w}] -> [1920{w,v}]`` (1920 devices): a member holds 2
        elements of the 48 of its target block, so every member needs one collective
        receiving 46 elements more: the class entry's key is the permute plus that."""
        m = self.deficit_bytes(self.shard(state))
        if m <= 0 and self.class_may_finish_locally(self.info(state[0])[0], state[1]):
            return _ZERO3
        return (max(self.floor, self.bytes_lb(m)), m, 1)

    def class_may_finish_locally(self, splits, U) -> bool:
        """Whether some type of these splits and pending sums ``U`` may reach the target by
        local steps (:meth:`local_reach` of some class member; optimistic: False only
        where no member can). :meth:`local_reach` needs ``U`` within the target's pending
        sums and each dim a prefix of the target's dim followed by target-pending factors;
        where no factor is target-pending and not in ``U`` and no dim is uneven, each
        dim's split must then be the product of a prefix of the target's dim. Example,
        ``x=4,y=8,z=3,w=5,v=6``, target ``[5760{z,y,w,v}]`` (prefix products 3, 24, 120,
        720): no member of the class of splits (192,) finishes locally, so every member
        needs one more collective and the class is pruned by a 2-collective incumbent
        without enumerating its 40,000 members."""
        if not self.TU.issuperset(U):
            return False
        if self.relabel or (self.TU - set(U)):
            return True  # uneven dims (a relabel may finish) or pending factors to fill: maybe
        pp = self._t_prefix_products
        if pp is None:
            pp = self._t_prefix_products = []
            for t in self.T[0]:
                acc, p = {1}, 1
                for k in t:
                    p *= self.sz[k]
                    acc.add(p)
                pp.append(acc)
        return all(k in acc for k, acc in zip(splits, pp))

    def _overlap_dev(self, i, axes):
        """Per device, the overlap along dim ``i`` of its block under ``axes`` with its
        target block (even dims; cached per dim and axes)."""
        key = ("dev", i, axes)
        v = self._ov.get(key)
        if v is None:
            import numpy as np

            n = self.shape[i]

            def block(ax):
                ls = n // self.nprod(ax)
                return self.block_index(ax) * ls, ls

            s0, ls = block(axes)
            tb = self._ov.get(("tblock", i))
            if tb is None:  # the target's blocks along dim i: once per dim
                t0, lt = block(self.T[0][i])
                tb = self._ov[("tblock", i)] = (t0, t0 + lt)
            t0, t1 = tb
            v = self._ov[key] = np.maximum(np.minimum(s0 + ls, t1) - np.maximum(s0, t0), 0)
        return v

    def block_index(self, ax):
        """Per device (row-major id), the index of its block along a dim split over the
        axis indices ``ax`` (major to minor): memoised per tuple and built from the
        tuple's prefix, so a new tuple costs one array op. Example, ``x=2,y=3``: ``(1, 0)``
        (y major, then x) gives device ``(x, y)`` the block ``2 * y + x``."""
        v = self._bidx.get(ax)
        if v is None:
            import numpy as np

            if not ax:
                v = np.zeros(self.size, dtype=np.int64)
            else:
                if self._coords is None:
                    ids = np.arange(self.size, dtype=np.int64)
                    self._coords = [(ids // st) % n for st, n in _strides(self.mesh, self.names)]
                k = ax[-1]
                v = self.block_index(ax[:-1]) * self.sz[k] + self._coords[k]
            if self._bidx_elems + self.size <= BLOCK_INDEX_CACHE_ELEMS:
                self._bidx[ax] = v  # past the cap a tuple is rebuilt from its cached prefix
                self._bidx_elems += self.size
        return v

    def _overlap(self, i, axes):
        """The largest overlap, over devices, along dim i of a device's block under
        ``axes`` with its target block (even dims), on the sub-grid of the axes of
        either side."""
        key = (i, axes)
        v = self._ov.get(key)
        if v is None:
            import numpy as np

            tax = self.T[0][i]
            union = tuple(dict.fromkeys(axes + tax))
            sizes = [self.sz[a] for a in union]
            n = self.shape[i]
            ka, kt = math.prod(self.sz[a] for a in axes), math.prod(self.sz[a] for a in tax)
            if math.prod(sizes) > 512 or not set(axes) & set(tax):
                # independent coordinates (or a large grid): the smaller block bounds it
                v = self._ov[key] = min(n // ka, n // kt)
                return v
            grid = np.indices(sizes).reshape(len(union), -1) if union else np.zeros((0, 1), np.int64)
            pos = {a: j for j, a in enumerate(union)}

            def starts(ax, k):
                idx = np.zeros(grid.shape[1], dtype=np.int64)
                for a in ax:
                    idx = idx * self.sz[a] + grid[pos[a]]
                return idx * (n // k)

            s0, t0 = starts(axes, ka), starts(tax, kt)
            o = np.minimum(s0 + n // ka, t0 + n // kt) - np.maximum(s0, t0)
            v = self._ov[key] = max(int(o.max()), 0)
        return v

    # -- permute targets ---------------------------------------------------------------
    def class_cached(self, splits, U) -> bool:
        """Whether :meth:`class_members` of these has been built (and ticked) already."""
        return (splits, U) in self._class

    def class_members(self, splits, U):
        """Every valid dims of these per-dim splits over the axes not in ``U`` (any axes,
        any order): the targets of a permute."""
        key = (splits, U)
        got = self._class.get(key)
        if got is not None:
            return got
        sz = self.sz
        free0 = tuple(k for k in range(len(sz)) if k not in U)
        out = []
        tick = self.tick

        def rec(i, free, acc):
            if i == len(splits):
                out.append(tuple(acc))
                return
            for combo in _subsets_with_product(free, sz, splits[i]):
                rest = tuple(a for a in free if a not in combo)
                for order in itertools.permutations(combo):
                    if tick is not None:
                        tick()
                    acc.append(order)
                    rec(i + 1, rest, acc)
                    acc.pop()

        try:
            rec(0, free0, [])
        finally:
            rec = None  # a recursive closure is a reference cycle (synth.planners.gcpause)
        self._class[key] = out
        return out

    def split_products(self, U):
        """The products of every set of factors not in ``U`` (ascending): the numbers of
        blocks a dim can be split into."""
        got = self._prods.get(U)
        if got is None:
            out = {1}
            for k, n in enumerate(self.sz):
                if k not in U:
                    out |= {p * n for p in out}
            got = self._prods[U] = tuple(sorted(out))
        return got

    def goal_adjacent(self, splits, U, head=None):
        """Dims of these splits from which the target is reached by gathers then slices:
        a prefix of every target dim, then other axes (in mesh order). ``head``: only the
        first ``head`` of them (the same, in the same order), found without building the
        rest where the whole list is not known yet (the one-collective seed reads 16)."""
        key = (splits, U)
        got = self._goal_adj.get(key)
        if got is not None:
            return got if head is None else got[:head]
        if head is not None:
            first: dict = {}

            def emit(d):
                first[d] = None
                return len(first) >= head

            self._goal_adjacent(splits, U, emit)
            return list(first)
        out = self._goal_adj[key] = self._goal_adjacent(splits, U, None)
        return out

    def _goal_adjacent(self, splits, U, emit):
        """:meth:`goal_adjacent`'s search: the whole list, or (``emit``) each in order
        until ``emit`` returns True."""
        sz, T = self.sz, self.T[0]
        out = []
        tick = self.tick
        for cut in itertools.product(*(range(len(a) + 1) for a in T)):
            pre = tuple(a[:c] for a, c in zip(T, cut))
            if U and any(x in U for p in pre for x in p):
                continue
            extra = []
            for p, k in zip(pre, splits):
                q = math.prod(sz[a] for a in p)
                if k % q:
                    break
                extra.append(k // q)
            else:
                used = {a for p in pre for a in p}
                rest = tuple(a for a in range(len(sz)) if a not in used and a not in U)
                if emit is None:
                    for assign in _assign_products(rest, sz, extra, tick):
                        out.append(tuple(p + e for p, e in zip(pre, assign)))
                elif _assign_products(rest, sz, extra, tick,
                                      lambda assign, pre=pre: emit(tuple(p + e for p, e in zip(pre, assign)))) \
                        is None:
                    return None  # emit had enough
        return list(dict.fromkeys(out))

    def permute_classes(self, splits, U):
        """The permute closure of a class: every class ``(splits', U')`` other than
        ``(splits, U)`` whose types one AllPermute reaches from a type of ``(splits, U)``
        under its type rule (:class:`synth.collectives.AllPermute`): the same local shape
        and the same pending sums (uneven problems, :attr:`relabel`: each dim split any
        number of ways ``k'`` with ``ceil(N / k') = ceil(N / k)``), or the same splits and
        pending sums over other factors of the same group size. Every type a chain of the
        permute moves reaches (relabels, goal-adjacent targets of other splits, pending
        swaps, a class's members) is in it, unless the chain changes both the splits and the
        pending sums, which no one permute does (``Plan.build`` could not merge it).

        Bounded: at most :data:`MAX_PERMUTE_CLASSES` classes (the first in the order built:
        dim by dim the target's split first, then ascending; then pending sets), from at most
        :data:`MAX_PERMUTE_CLASS_CANDIDATES` candidates; past either the rest are dropped and
        :attr:`closure_capped` is set (``auto`` then says "over the capped move set").

        Example (bench case 974, whole axes ``x=2,y=3,z=4,w=2``): ``[6, 5{y,z}, 7{x}]``
        (splits ``(1, 12, 2)``, local shape ``6x1x4``) reaches the target's class ``(1, 8,
        2)`` (``ceil(5 / 8) = ceil(5 / 12) = 1``) in one permute."""
        key = (splits, U)
        got = self._pclass.get(key)
        if got is not None:
            return got
        out, tried, capped = [], 0, False
        if self.relabel:
            prods = self.split_products(U)
            t_splits = self.info(self.T[0])[0]
            opts = []
            for n, k, tk in zip(self.shape, splits, t_splits):
                loc = -(-n // k)
                # the target's split first, then ascending: the classes nearest the target
                # come first (the ones kept if the cap fires)
                opts.append(sorted((p for p in prods if -(-n // p) == loc), key=lambda p, tk=tk: (p != tk, p)))
            for combo in itertools.product(*opts):
                tried += 1
                if tried > MAX_PERMUTE_CLASS_CANDIDATES or len(out) >= MAX_PERMUTE_CLASSES:
                    capped = True
                    break
                if combo != splits and self.splits_fit(combo, U):
                    out.append((combo, U))
        if U and not capped:
            want = math.prod(self.sz[a] for a in U)
            for U2 in _subsets_with_product(tuple(range(len(self.sz))), self.sz, want):
                U2 = tuple(sorted(U2))
                if U2 == U or not self.splits_fit(splits, U2):
                    continue
                if len(out) >= MAX_PERMUTE_CLASSES:
                    capped = True
                    break
                out.append((splits, U2))
        if capped:
            self.closure_capped = True
        got = self._pclass[key] = tuple(out)
        return got

    def splits_fit(self, splits, U) -> bool:
        """Whether some type splits its dims ``splits`` ways over distinct factors not in
        ``U`` (the class is not empty; memoised). Which factors does not matter, only their
        sizes: :func:`_fits` decides it over the multisets of the wanted splits and the free
        factors' sizes."""
        key = ("fit", splits, U)
        v = self._pclass.get(key)
        if v is None:
            free = self._free_sizes.get(U)
            if free is None:
                sz = self.sz
                free = self._free_sizes[U] = tuple(sorted(sz[k] for k in range(len(sz)) if k not in U))
            want = tuple(sorted((k for k in splits if k > 1), reverse=True))
            v = self._pclass[key] = _fits(want, free)
        return v

    def entry_class(self, state, step):
        """The class ``(splits, U)`` of a class entry ``step`` from ``state``."""
        return step[1] if len(step) > 1 else (self.info(state[0])[0], state[1])

    def class_key(self, state, step):
        """``(floor, bound)`` of a class entry: no member that moves data costs less than
        ``floor`` from ``state`` (one permute of the shard: :meth:`permute_floor`; the
        members of other splits that move nothing are single moves of their own,
        :func:`_free_relabel_moves`), and no member's rest less than ``bound``
        (:meth:`h_class` over the entry's class)."""
        floor = self.permute_floor(state)
        if len(step) == 1:
            return floor, self.h_class(state)
        m = self.deficit_bytes(self.shard(state))
        if m <= 0 and self.class_may_finish_locally(*step[1]):
            return floor, _ZERO3
        return floor, (max(self.floor, self.bytes_lb(m)), m, 1)

    def moves(self, state, full):
        """Every move from ``state``: ``(steps, next state)`` (see :data:`MOVES`)."""
        self._cur = (state[0], self.info(state[0]))
        for gen in MOVES.values():
            yield from gen(self, state, full)

    # -- integer ids: the engine works on ids, hashing each state tuple once ----------------
    def intern(self, state) -> int:
        """The id of ``state`` (states are numbered as first seen)."""
        i = self._ids.get(state)
        if i is None:
            i = self._new_id(state)
        return i

    def _new_id(self, state) -> int:
        """:meth:`intern` of a state not seen yet (the caller has looked it up)."""
        i = self._ids[state] = len(self.states)
        dims = state[0]
        inf = self._info.get(dims)
        if inf is None:
            inf = self._info[dims] = self._info_of(dims)
        self.states.append(state)
        self.shards.append(inf[2])
        self.infos.append(inf)
        self._hv.append(None)
        self._hvs.append(None)
        self._lr.append(None)
        return i

    def local_reach_id(self, i) -> bool:
        """:meth:`local_reach` of state id ``i``, memoised by id."""
        lr = self._lr
        v = lr[i]
        if v is None:
            v = lr[i] = self.local_reach(self.states[i])
        return v

    def h_id(self, i):
        """:meth:`h` of state id ``i``, memoised by id (its :meth:`local_reach` too)."""
        v = self._hv[i]
        if v is None:
            v = self._hv[i] = self._h_of(self.states[i], self.local_reach_id(i), self.infos[i])
        return v

    def h_sharp_id(self, i):
        """The exact passes' bound of state id ``i`` (memoised by id): :meth:`h_id`, or
        where sums are pending toward a target with none, under the default model, the
        sharper :meth:`_reduce_bound`; where a dim is uneven and nothing is pending, the
        bytes device 0 lacks (:meth:`_uneven_deficit`; ``h_id`` counts none there). A
        bound in the order of the search's keys (time, bytes, collectives; and
        collectives, bytes, time for the tie pass's fewest collectives), not in each
        component alone, so the weighted passes keep :meth:`h_id` (a sharper bound there,
        times their weight, would delay the paths it is tight on: bench case 263's
        directed pass then ran out of its budget)."""
        v = self._hvs[i]
        if v is None:
            v = self.h_id(i)
            if v[2] and not self.T[1]:
                U = self.states[i][1]
                if U:
                    if self.fast:
                        v = self._reduce_bound(math.prod(self.sz[a] for a in U), v)
                elif not (self._even_T and all(
                        n % k == 0 for n, k in zip(self.shape, self.infos[i][0]))):
                    # uneven dims, where h_id counts no bytes: what device 0 lacks
                    m = self._uneven_deficit(self.states[i][0]) * self.itemsize
                    if m > v[1]:
                        v = (max(self.floor, self.bytes_lb(m)), m, 1)
            self._hvs[i] = v
        return v

    def _reduce_bound(self, nU, base):
        """:meth:`h_sharp_id` of a state with sums pending over axes of ``nU`` devices in
        all, toward a target with none pending (the default model); ``base``: its
        :meth:`h_id`, ``(alpha + m / bandwidth, m, 1)`` with ``m`` the bytes some device
        must still receive.

        A path from here has one communicating op, or two or more. Two or more cost at
        least ``2 alpha + m / bandwidth`` (as in :meth:`last_op_floor_id`). With one, that
        op must leave no sum pending: local steps never drop a pending axis (Unreduce and
        ShardedToUnreduced add them), and no gather, all-to-all or permute changes how
        many devices the pending sums span (a permute keeps their product, and a
        nonempty pending set is not the target's). So it is an AllReduce or a
        ReduceScatter over ``n >= nU`` devices, and after it come only slices and
        relabels that move nothing, which never grow the local shape: the op's output is
        at least the target's shard ``t``. An AllReduce then receives ``2 (n - 1) t / n``
        elements at least, a ReduceScatter ``(n - 1) t`` (its output shard times ``n -
        1``), no fewer for ``n >= 2``: the path costs at least one AllReduce of ``t`` over
        ``nU`` devices (the arithmetic of :func:`_fast_all_reduce`), with its bytes, and
        one collective. The bound is the lesser of the two classes' in the search's
        order, with one collective (a path of one class has no fewer bytes than the other
        class's bound wherever that class's time is the lesser), and never below ``base``.

        Example, bench case 111 (``x=1,y=5,z=8,w=2,v=5,u=8``), ``[12{w}, 3{x}]{U:v,y} ->
        [12{w}, 3{x}]`` (4-byte elements): t = 18 elements, nU = 25, so one AllReduce of
        the target's shard, ``5 us + 138 B / 50 GB/s``, which is the plan ``auto``
        returns; the proof now ends at the source (447 moves) where it examined the
        49,000 one-op moves of the source's local closure and ran out of budget."""
        isz, t, m = self.itemsize, self._t_shard, base[1]
        one = (self._alpha + 2 * t * isz * (nU - 1) // nU / self._bw, 2 * (nU - 1) * t // nU * isz, 1)
        two = (self._alpha + base[0], m, 1)
        v = one if one < two else two
        return v if v > base else base

    def h_quick_sharp_id(self, i):
        """:meth:`h_quick_id` for the exact passes (:meth:`h_sharp_id`): where the two
        differ (sums pending, uneven dims) the quick bound is the exact one (cheap: from
        the infos)."""
        v = self._hvs[i]
        if v is not None:
            return v, True
        v, exact = self.h_quick_id(i)
        if not exact:
            return v, False
        return self.h_sharp_id(i), True

    def h_quick_id(self, i):
        """``(bound, exact)``: :meth:`h_id` of state id ``i`` where it is cheap (known, the
        target reached locally, or not the per-device case), ``exact`` True; else a bound
        at most it in every component without the per-device arrays, ``exact`` False:
        the neediest device lacks at least what a few devices lack
        (:meth:`_unit_deficit`)."""
        v = self._hv[i]
        if v is not None:
            return v, True
        if not self._exact or self.local_reach_id(i) or self.T[1] or not self._even_T:
            return self.h_id(i), True
        if self.states[i][1] or any(n % k for n, k in zip(self.shape, self.infos[i][0])):
            return self.h_id(i), True
        v = self._hq.get(i)
        if v is None:
            m = self._unit_deficit(self.states[i][0]) * self.itemsize
            v = self._hq[i] = (max(self.floor, self.bytes_lb(m)), m, 1)
        return v, False

    def _unit_deficit(self, dims) -> int:
        """What :meth:`_h_of`'s neediest device lacks, bounded below in integers: the most
        any of device 0 and the devices with one coordinate 1 (the rest 0) lacks of its
        target block (even dims). Such a device's block along dim ``i`` split over ``ax``
        starts at ``stride * local size`` (:meth:`_unit_stride`), so its overlap with its
        target block is two intervals' intersection. On the bench's slowest cases this
        equalled the per-device maximum in every state, so an entry keyed by it rarely
        moves when its exact bound comes.

        Example, ``x=2,y=2``, ``[4{x}, 4{y}] -> [4{y}, 4{x}]``: every shard is ``2x2``; the
        device with ``x = 1`` holds rows 2-3, columns 0-1 and needs rows 0-1, columns 2-3:
        it lacks all 4 elements."""
        rows = [self._unit_overlaps(i, ax) for i, ax in enumerate(dims)]
        least = 1
        for base, _ in rows:
            least *= base  # device 0: both blocks start at 0 in every dim
        if least:
            for k in {k for _, ov in rows for k in ov}:
                p = 1
                for base, ov in rows:
                    p *= ov.get(k, base)
                if p < least:
                    least = p
        return self._t_shard - least

    def comm_floor_id(self, i) -> float:
        """Under the default model, no move from state id ``i`` that is neither local (a
        slice, an Unreduce, a ShardedToUnreduced) nor a relabel (a permute to other splits,
        which may move nothing) costs less than this many seconds: every other kind
        receives at least half the shard on its neediest device (an all-to-all or a
        reduce-scatter over ``n >= 2`` devices: ``(n - 1) / n`` of a buffer at least the
        shard, or ``n - 1`` output shards of at least ``shard / n``; gathers, all-reduces
        and permutes of the same splits at least the whole shard). Example: a shard of
        1,000 elements of 4 bytes: ``5 us + 2,000 B / 50 GB/s = 5.04 us``. 0.0 under other
        models (no such bound is known there)."""
        if not self.fast:
            return 0.0
        return self._alpha + (self.shards[i] * self.itemsize // 2) / self._bw

    def last_op_floor_id(self, i) -> float:
        """A bound on a communicating move from state id ``i`` and the rest of the way
        after it, where local steps do not reach the target from the state it lands on:
        the engine expands ``i`` with :meth:`last_op_successors` where the bound is past
        its upper bound.

        Always the move's :meth:`comm_floor_id` plus :attr:`floor` (the bound ``h`` of the
        landing). Under the default model, where the state's own bound ``h`` counts bytes
        ``m`` (:meth:`_h_of`: what the neediest device lacks of its target block, or what
        every device lacks, or with sums pending the values some device must still
        receive), also ``alpha + h``: that device must receive ``m`` bytes over the rest of
        the path, which has two communicating ops or more (the move, and one after it, since
        local steps and permutes that move nothing do not finish), each costing ``alpha``
        plus at least what that device receives in it, so the path costs at least
        ``2 alpha + m / bandwidth``. Example, ``x=2,y=2``, ``[8{x}, 8] -> [8, 8{y}]`` (4 bytes
        an element): the device ``x=0,y=1`` lacks rows 0-7 of columns 4-7 less the rows 0-3
        it holds, 16 elements, so ``2 * 5 us + 64 B / 50 GB/s``."""
        base = self.comm_floor_id(i) + self.floor
        if self.fast:
            hh = self._hv[i]
            if hh is not None and hh[1]:
                two = self._alpha + hh[0]
                if two > base:
                    return two
        return base

    def local_successors(self, i, full):
        """The entries of :meth:`successors` ``(i, full)`` whose move is local or a
        relabel (the kinds :meth:`comm_floor_id` does not bound), in the same order, built
        without generating the others. The engine expands a state with these alone where
        any other move would cost past its upper bound (so none of them could be kept)."""
        key = (i, full, "local")
        v = self._succ.get(key)
        if v is not None:
            return v
        whole = self._succ.get((i, full))
        if whole is None:  # the last-op list keeps every local entry and relabel
            whole = self._succ.get((i, full, "last"))
            whole = whole[0] if whole is not None else None
        if whole is not None:
            v = [e for e in whole if _is_local_entry(self, e, i)]
        else:
            v = []
            state = self.states[i]
            ia = self.infos[i]
            self._cur = (state[0], ia)
            gens = []  # in the move table's order, as successors lists them
            for kind, gen in MOVES.items():
                if kind in LOCAL_MOVE_KINDS:
                    gens.append(gen)
                elif kind == "all_permute" and self.relabel:
                    gens.append(_other_split_permutes)
            for gen in gens:
                for steps, s2 in gen(self, state, full):
                    if steps[0][0] == "permute_class":
                        v.append((steps, i, ia[2], None, 2 * ia[2]))
                        continue
                    j = self._ids.get(s2)
                    if j is None:
                        j = self._new_id(s2)
                    ib = self.infos[j]
                    last = steps[0]
                    live = self._live_i(last, ia, ib)
                    kind = last[0]
                    if kind == "dyn_slice":
                        c = None
                    elif kind == "all_permute":
                        c = self._ab_i(last, ia, ib) if self.fast else None
                        if c is None:
                            c = self.step_cost(last, state, s2)
                    else:
                        c = _ZERO3 if self.fast else self.step_cost(last, state, s2)
                    v.append((steps, j, ib[2], c, live))
        self._succ[key] = v
        return v

    def last_op_successors(self, i, full):
        """``(entries, generated, permutes)``: the entries of :meth:`successors` ``(i,
        full)`` less the communicating moves whose landing does not reach the target by
        local steps (:meth:`local_reach`), in the same order; ``generated`` is how many
        moves the kinds not in :meth:`_last_op_skips` have (the generators run) and
        ``permutes`` how many of those are permute moves: the work the engine counts.

        The engine expands a state with these where a communicating move and the rest of
        the way after it would already end past its upper bound (``g +``
        :meth:`last_op_floor_id`) unless local steps finish from where it lands. Kept: the
        local moves, every permute move (single permutes, class entries), and the
        communicating moves that finish locally. The kinds that cannot finish are not
        generated; the other dropped moves are generated (their landing is a tuple) but
        neither interned nor costed. Example,
        ``x=2,y=2``, ``[8{x}, 8] -> [8, 8{y}]`` under an upper bound of one op: from the
        source, ``AllGather(0, x)`` lands on ``[8, 8]``, from which ``DynSlice(1, y)``
        finishes, so it is kept; ``AllToAll(0->1, x)`` lands on ``[8, 8{x}]`` (no prefix
        of the target's dim 1), so it is dropped."""
        key = (i, full, "last")
        v = self._succ.get(key)
        if v is not None:
            return v
        skips = self._last_op_skips(self.states[i])
        whole = self._succ.get((i, full))
        if whole is not None:
            lr = self.local_reach_id
            keep = [e for e in whole if _kept_last(e[0]) or lr(e[1])]
            n_all = n_perm = 0
            for e in whole:
                if e[0][-1][0] not in skips:
                    n_all += 1
                    n_perm += e[0][0][0] in PERMUTE_MOVES
            v = self._succ[key] = (keep, n_all, n_perm)
            return v
        counts = [0, 0, skips]
        keep = self.successors(i, full, counts)
        v = self._succ[key] = (keep, counts[0], counts[1])
        return v

    def _last_op_skips(self, state):
        """The move kinds none of whose moves from ``state`` reaches a type from which
        local steps reach the target (:meth:`local_reach`), so that
        :meth:`last_op_successors` need not generate them. A dim is *bad* where
        :meth:`local_reach` fails it (what follows its common prefix with the target's dim
        is not target-pending), and the pending sums are bad where some are not pending in
        the target. A gather or an all-to-all keeps the pending sums; a gather changes one
        dim, an all-to-all two, a reduce-scatter one, an all-reduce none. Example, ``[8{x},
        8{y}] -> [8{y}, 8{x}]``: both dims are bad, so no single gather and no all-reduce
        or reduce-scatter finishes; an all-to-all of the two dims may. Nothing is skipped
        where dims may be relabelled (uneven problems: :meth:`local_reach` then asks
        whether each device holds its target block)."""
        if self.relabel:
            return _NO_SKIPS
        dims, U = state
        TU = self.TU
        n_bad = sum(1 for a, t in zip(dims, self.T[0]) if _bad_dim(a, t, TU))
        return _skips(n_bad, not TU.issuperset(U))

    def successors(self, i, full, last_op=None):
        """:meth:`moves` of state id ``i`` as a list of ``(steps, next id, its shard, cost
        of the steps, live elements)`` (cost None for a slice, whose cost depends on the
        run, and for a permute class), generated once per state and pass kind and kept for
        later passes.

        The hot loop of the search: each next state's ``info`` is read by id (hashing a
        nested tuple once, in :meth:`intern`), and the live elements and alpha-beta cost
        come from those infos (:meth:`_live_i`, :meth:`_ab_i`), the same integers and
        floats as :meth:`live` and :meth:`step_cost`.

        ``last_op`` (a list ``[0, 0, skips]``, for :meth:`last_op_successors`): build only
        that method's entries, not memoised here, without the generators of the kinds in
        ``skips``, counting every move generated and every permute move into the list."""
        key = (i, full)
        if last_op is None:
            v = self._succ.get(key)
            if v is not None:
                return v
        else:
            lr = self.local_reach
            n_gen = n_perm = 0
            skips = last_op[2]
        v = []
        append = v.append
        state = self.states[i]
        ids, infos, shards = self._ids, self.infos, self.shards
        intern, live_i = self._new_id, self._live_i
        ia = infos[i]
        sh_i = shards[i]
        two = 2 * sh_i
        fast = self.fast
        table = STEP_COST_LIVE if fast else {}  # another model: live_i and step_cost
        ab = self._ab_i
        self._cur = (state[0], ia)
        perm = None  # the cost of a permute that keeps the splits (the source's shard)
        for gen_kind, gen in MOVES.items():
            if last_op is not None and gen_kind in skips:
                continue
            for steps, s2 in gen(self, state, full):
                first = steps[0]
                kind = first[0]
                if last_op is not None:
                    n_gen += 1
                    if kind in PERMUTE_MOVES:
                        n_perm += 1
                    if not _kept_last(steps) and not lr(s2):
                        continue
                if kind == "permute_class":
                    append((steps, i, sh_i, None, two))
                    continue
                j = ids.get(s2)
                if j is None:
                    j = intern(s2)
                ib = infos[j]
                if len(steps) == 1:  # most moves: one step, costed from the two infos
                    if kind == "dyn_slice":
                        append((steps, j, ib[2], None, _slice_live(self, first, ia, ib)))
                        continue
                    f = table.get(kind)
                    if f is not None:
                        c, live = f(self, first, ia, ib)
                        if c is None:
                            c = self.step_cost(first, state, s2)
                    else:
                        live = live_i(first, ia, ib)
                        c = self.step_cost(first, state, s2)
                    append((steps, j, ib[2], c, live))
                    continue
                last = steps[-1]
                f = table.get(last[0]) if len(steps) == 2 and kind == "all_permute" else None
                if f is not None:
                    # a reordering permute, then the gather / all-to-all it enables: the
                    # permute keeps the splits, so the middle type's info is ``ia``'s
                    # (no lookup) and the permute costs the source's shard
                    x, live = f(self, last, ia, ib)
                    if live < two:
                        live = two
                    if x is not None:
                        if perm is None:
                            perm = ab(first, ia, ia)
                        append((steps, j, ib[2], (perm[0] + x[0], perm[1] + x[1], perm[2] + x[2]),
                                live))
                        continue
                else:
                    live = live_i(last, ia, ib)
                    if live < two:
                        live = two
                if kind == "dyn_slice":
                    append((steps, j, ib[2], None, live))
                    continue
                c = (0.0, 0, 0)
                prev, ip = state, ia
                for st in steps:
                    nxt = s2 if st is last else st[1]
                    inx = ib if st is last else self.info(nxt[0])
                    x = ab(st, ip, inx) if fast else None
                    if x is None:
                        x = self.step_cost(st, prev, nxt)
                    c = (c[0] + x[0], c[1] + x[1], c[2] + x[2])
                    prev, ip = nxt, inx
                append((steps, j, ib[2], c, live))
        if last_op is not None:
            last_op[0], last_op[1] = n_gen, n_perm
            return v
        self._succ[key] = v
        return v

    def nprod(self, X) -> int:
        """The product of the sizes of axis indices ``X`` (memoised per tuple)."""
        n = self._nx.get(X)
        if n is None:
            n = self._nx[X] = math.prod(self.sz[k] for k in X)
        return n

    def live(self, step, a, b) -> int:
        """Elements live at once during ``step`` from ``a`` to ``b`` on a device: input and
        output, or an uneven dim's re-padding buffer with either, or the one buffer of an
        all-reduce in place (each kind's ``peak_elems``, on integers)."""
        return self._live_i(step, self.info(a[0]), self.info(b[0]))

    def _live_i(self, step, ia, ib) -> int:
        """:meth:`live` from the two states' infos (its kind's :data:`STEP_COST_LIVE`
        entry; a kind that table does not list: input and output)."""
        kind = step[0]
        if kind == "dyn_slice":
            return _slice_live(self, step, ia, ib)
        if kind in IN_PLACE_KINDS:  # the output takes the input's buffer (AllReduce.peak_elems)
            return ia[2]
        f = STEP_COST_LIVE.get(kind)
        return ia[2] + ib[2] if f is None else f(self, step, ia, ib)[1]


# -- the hot loop's per-kind arithmetic: cost and live elements of one step at once ------
# Under the default model :meth:`Space.successors` costs each step and counts its live
# elements with one call of its kind's entry here, from the two states' infos
# ``(splits, local shape, shard, used)``: the integers of :meth:`Space._live_i` and the
# floats of :meth:`Space._alpha_beta`, in the same order (so the same values). Products
# of a local shape with one dim changed are taken from the shard (``sa // la[j]`` is
# exact: every local size is at least 1). Cost None: the kind's cost is not listed here
# (a relabel), the caller takes :meth:`Space.step_cost`.

@cython.locals(sp=Space)
def _nprod(sp, X):
    n = sp._nx.get(X)
    if n is None:
        n = sp.nprod(X)
    return n


def _padded(sa, sb, pad):
    """Input and output live, or the re-padding buffer with either (``pad`` 0: none)."""
    if pad:
        return pad + (sa if sa > sb else sb)
    return sa + sb


@cython.locals(sp=Space)
def _slice_live(sp, step, ia, ib):
    """A DynSlice's live elements: input and output, or the re-padding buffer (the input
    with dim ``d`` at ``n`` times its output size) with either where the input is
    shorter. Example, ``[10] -> [10{x}]`` on ``x=4``: blocks of 3, 12 elements padded."""
    la, sa, sb = ia[1], ia[2], ib[2]
    d = step[1]
    m = _nprod(sp, step[2]) * ib[1][d]
    if la[d] < m:
        return m * (sa // la[d]) + (sa if sa > sb else sb)
    return sa + sb


@cython.locals(sp=Space)
def _fast_all_gather(sp, step, ia, ib):
    # [8{x}] -> [8] on x=4: 2 elements in, 8 out; receives 3 * 2 elements
    sa, sb = ia[2], ib[2]
    n = _nprod(sp, step[2])
    raw = n * sa
    op_b = (n - 1) * sa * sp.itemsize
    return (sp._alpha + op_b / sp._bw, op_b, 1), _padded(sa, sb, raw if raw > sb else 0)


@cython.locals(sp=Space)
def _fast_all_to_all(sp, step, ia, ib):
    # [8{x}, 8] -> [8, 8{x}] on x=4: sends its [2, 8] block as 4 pieces of [2, 2]
    la, sa = ia[1], ia[2]
    lb, sb = ib[1], ib[2]
    i, j = step[1], step[2]
    n = _nprod(sp, step[3])
    sent = sa // la[j] * (n * lb[j])   # the input with dim j at n times its output size
    raw = sb // lb[i] * (n * la[i])    # the output with dim i at n times its input size
    pad = sent if sent > sa else 0
    if raw > sb and raw > pad:
        pad = raw
    isz = sp.itemsize
    return ((sp._alpha + sent * isz * (n - 1) // n / sp._bw, sent * (n - 1) // n * isz, 1),
            _padded(sa, sb, pad))


@cython.locals(sp=Space)
def _fast_all_permute(sp, step, ia, ib):
    sa = ia[2]
    if ia[0] != ib[0]:  # other splits, one local shape: _relabel_cost
        return None, sa + ib[2]
    op_b = sa * sp.itemsize
    return (sp._alpha + op_b / sp._bw, op_b, 1), sa + ib[2]


@cython.locals(sp=Space)
def _fast_all_reduce(sp, step, ia, ib):
    # in place (IN_PLACE_KINDS): the output takes the input's buffer
    sa = ia[2]
    n = _nprod(sp, step[1])
    return (sp._alpha + 2 * sa * sp.itemsize * (n - 1) // n / sp._bw,
            2 * (n - 1) * sa // n * sp.itemsize, 1), sa


@cython.locals(sp=Space)
def _fast_reduce_scatter(sp, step, ia, ib):
    sa, sb = ia[2], ib[2]
    n = _nprod(sp, step[2])
    sent = n * sb
    op_b = (n - 1) * sb * sp.itemsize
    return (sp._alpha + op_b / sp._bw, op_b, 1), _padded(sa, sb, sent if sent > sa else 0)


@cython.locals(sp=Space)
def _fast_unreduce(sp, step, ia, ib):
    return _ZERO3, ia[2] + ib[2]


@cython.locals(sp=Space)
def _fast_s2u(sp, step, ia, ib):
    sa, sb = ia[2], ib[2]
    raw = _nprod(sp, step[2]) * sa
    return _ZERO3, _padded(sa, sb, raw if raw > sb else 0)


@cython.locals(sp=Space)
def _fast_multi_all_gather(sp, step, ia, ib):
    sa, sb = ia[2], ib[2]
    n = 1
    for _, X in step[1]:
        n *= _nprod(sp, X)
    raw = sa * n
    b_ = (n - 1) * sa * sp.itemsize
    return (sp._alpha + b_ / sp._bw, b_, 1), _padded(sa, sb, raw if raw > sb else 0)


@cython.locals(sp=Space)
def _fast_multi_all_to_all(sp, step, ia, ib):
    la, sa = ia[1], ia[2]
    lb, sb = ib[1], ib[2]
    mv = step[1]
    sent, raw = list(la), list(lb)
    for i, j, _X in mv:
        sent[j], raw[i] = lb[j], la[i]
    n = 1
    for i, j, X in mv:  # a shared dst dim holds the product of its moves' pieces
        nk = _nprod(sp, X)
        n *= nk
        sent[j] *= nk
        raw[i] *= nk
    s = r = 1
    for x in sent:
        s *= x
    for x in raw:
        r *= x
    pad = s if s > sa else 0
    if r > sb and r > pad:
        pad = r
    isz = sp.itemsize
    return ((sp._alpha + s * isz * (n - 1) // n / sp._bw, s * (n - 1) // n * isz, 1),
            _padded(sa, sb, pad))


#: Per move kind, ``(sp, step, info_a, info_b) -> (cost or None, live elements)``: the
#: cost under the default model (alpha-beta; under another model :attr:`Space._alpha` is
#: 0 and the cost half unused) and the live elements under every model (a slice is
#: :func:`_slice_live`: its cost depends on its run). A new kind adds an entry here, or
#: takes :meth:`Space.step_cost` and input + output live.
STEP_COST_LIVE = {
    "all_gather": _fast_all_gather,
    "all_to_all": _fast_all_to_all,
    "all_permute": _fast_all_permute,
    "all_reduce": _fast_all_reduce,
    "reduce_scatter": _fast_reduce_scatter,
    "unreduce": _fast_unreduce,
    "multi_all_gather": _fast_multi_all_gather,
    "multi_all_to_all": _fast_multi_all_to_all,
    "sharded_to_unreduced": _fast_s2u,
}


@cython.locals(sp=Space)
def _is_local_entry(sp: Space, entry, i) -> bool:
    """Whether a :meth:`Space.successors` entry from state id ``i`` is a local move or a
    relabel (one step, a permute to other splits)."""
    steps, j = entry[0], entry[1]
    if len(steps) > 1:
        return False
    kind = steps[0][0]
    if kind in LOCAL_MOVE_KINDS:
        return True
    return kind == "all_permute" and sp.infos[j][0] != sp.infos[i][0]


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))


@functools.lru_cache(maxsize=4096)
def _fits(want: tuple, free: tuple) -> bool:
    """Whether the factor sizes ``free`` (a sorted multiset) hold disjoint sub-multisets of
    products ``want`` (sorted descending, each > 1): :meth:`Space.splits_fit`. Factors of
    one size are interchangeable, so the search picks how many of each size a split takes,
    never which ones: on ``x=5,y=8,v=2,u=6`` over every prime factor (five 2s) it tries a
    few counts where listing the subsets of individual factors took 20 ms per class.

    Example: ``_fits((4, 2), (2, 2, 2))`` is True (2*2 and 2); ``_fits((4, 4), (2, 2, 2))``
    is False; ``_fits((6,), (2, 3))`` is True."""
    if not want:
        return True
    if math.prod(free) % math.prod(want):
        return False  # some prime is wanted more often than the factors hold it
    sizes = sorted(set(free))
    if all(_is_prime(s) for s in sizes):
        return True  # prime factors: each split takes its own primes, and there are enough
    count = {s: free.count(s) for s in sizes}

    def pick(k, rem, left):
        # sub-multisets of sizes[k:] (counts ``left``) with product ``rem``; each yields
        # the counts left after the pick
        if rem == 1:
            yield left
            return
        if k == len(sizes):
            return
        s = sizes[k]
        r = rem
        for m in range(left[s] + 1):
            if m:
                if r % s:
                    return
                r //= s
            yield from pick(k + 1, r, left if not m else {**left, s: left[s] - m})

    try:
        for rest in pick(0, want[0], count):
            if _fits(want[1:], tuple(sorted(x for s, c in rest.items() for x in (s,) * c))):
                return True
        return False
    finally:
        pick = None  # a recursive closure is a reference cycle (synth.planners.gcpause)


def _subsets_with_product(axes, sz, want):
    out = []

    def rec(k, p, acc):
        if p == want:
            out.append(tuple(acc))
            return
        for j in range(k, len(axes)):
            s = sz[axes[j]]
            if want % (p * s) == 0:
                acc.append(axes[j])
                rec(j + 1, p * s, acc)
                acc.pop()

    try:
        rec(0, 1, [])
    finally:
        rec = None  # a recursive closure is a reference cycle (synth.planners.gcpause)
    return out


class _Enough(Exception):
    """Raised inside :func:`_assign_products` when its ``emit`` has had enough."""


def _assign_products(rest, sz, extra, tick=None, emit=None):
    """Assignments of ``rest`` axes to dims (or to none) so that dim i receives axes of
    product ``extra[i]``; each dim's axes in the order of ``rest``. With ``emit``, each
    assignment is passed to it in the same order instead (the list stays empty), and the
    search stops, returning None, as soon as it returns True."""
    out = []
    rank = len(extra)
    suffix = [1] * (len(rest) + 1)
    for k in range(len(rest) - 1, -1, -1):
        suffix[k] = suffix[k + 1] * sz[rest[k]]

    def rec(k, rem, acc):
        if tick is not None:
            tick()
        if math.prod(rem) > suffix[k]:
            return
        if k == len(rest):
            if all(r == 1 for r in rem):
                if emit is None:
                    out.append(tuple(tuple(a) for a in acc))
                elif emit(tuple(tuple(a) for a in acc)):
                    raise _Enough
            return
        a = rest[k]
        s = sz[a]
        rec(k + 1, rem, acc)
        for i in range(rank):
            if rem[i] % s == 0:
                acc[i].append(a)
                rem2 = list(rem)
                rem2[i] //= s
                rec(k + 1, rem2, acc)
                acc[i].pop()

    try:
        rec(0, list(extra), [[] for _ in range(rank)])
    except _Enough:
        out = None
    finally:
        rec = None  # a recursive closure is a reference cycle (synth.planners.gcpause)
    return out


@cython.locals(sp=Space)
def _dim_moves(sp: Space, i, ax, full, capped):
    """``(X, rest, n, suffix)`` for the ordered subsets ``X`` of dim ``i``'s ``axes`` that
    one gather / all-to-all takes (cached per dim, axes and pass), where the result nests
    (uneven dims). The full pass takes every minor-most suffix: any other subset or order
    is a permute (a move of its own) and then a suffix, at the same cost. The directed
    pass also takes every subset of at most ``sp.max_ordered`` axes in every order, after
    a reordering permute (one composite move). A group spanning factors of more than one
    mesh axis holds at most ``max_fused`` devices when ``capped`` (all-to-alls; gathers
    are not capped; factors of one axis never are)."""
    key = (i, ax, full, capped)
    v = sp._sub.get(key)
    if v is not None:
        return v
    sz, base, size = sp.sz, sp.base_of, sp.shape[i]
    out = []
    seen = set()
    for r, idx, ridx, ordered in _index_combos(len(ax), full, sp.max_ordered):
        X = tuple([ax[j] for j in idx])
        n = 1
        for a in X:
            n *= sz[a]
        if capped and r > 1 and n > sp.max_fused and len({base[a] for a in X}) > 1:
            continue
        rest = tuple([ax[j] for j in ridx])
        m = 1
        for a in rest:
            m *= sz[a]
        if not nests(size, m, n):
            continue
        for Xo in (itertools.permutations(X) if ordered else (X,)):
            if Xo not in seen:
                seen.add(Xo)
                out.append((Xo, rest, n, rest + Xo == ax))
    sp._sub[key] = out
    return out


#: ``(k, full, max_ordered)`` -> the index subsets :func:`_dim_moves` tries on a dim of
#: ``k`` axes: ``(r, idx, rest idx, every order)``, by size ``r`` then lexicographically
#: (at most ``k + C(k, 1..3)`` entries a key; built once per process).
_COMBOS: dict = {}


def _index_combos(k, full, max_ordered):
    """The subsets of ``range(k)`` of :func:`_dim_moves`: the minor-most suffix of each
    size in the full pass or past ``max_ordered``, else every combination (and its every
    order). Example, ``k = 3`` in the full pass: ``(1, (2,), (0, 1))``, ``(2, (1, 2),
    (0,))``, ``(3, (0, 1, 2), ())``."""
    key = (k, full, max_ordered)
    v = _COMBOS.get(key)
    if v is None:
        v = []
        for r in range(1, k + 1):
            ordered = not (full or r > max_ordered)
            combos = itertools.combinations(range(k), r) if ordered else (tuple(range(k - r, k)),)
            for idx in combos:
                v.append((r, idx, tuple(j for j in range(k) if j not in idx), ordered))
        _COMBOS[key] = v
    return v


def _divides(loc, k, n):
    """The type rule of a split of a dim (local size ``loc``, split ``k``) by ``n`` more:
    ``loc`` divisible by ``n`` unless the dim is whole (``_check_divides``)."""
    return k == 1 or loc % n == 0


# -- the move table: one generator per collective kind -------------------------------------
@cython.locals(sp=Space)
def _slice_moves(sp: Space, state, full):
    """DynSlice: an unused, not pending factor becomes the minor-most of a dim (where it
    divides the local size, or the dim is whole). A whole dim whose split would be uneven
    may also be sliced by several factors at once (one slice: one at a time they may not
    nest): any ordered pair, the factors of one or two whole mesh axes, or a prefix of
    the target's axes of that dim."""
    dims, U = state
    splits, loc, _, used = sp.info(dims)
    free = [a for a in range(len(sp.sz)) if not (used >> a) & 1 and a not in U]
    if not U and not sp.T[1]:  # no sums pending: an axis the target replicates stays so
        free = [a for a in free if (sp.t_used >> a) & 1]
    for i, ax in enumerate(dims):
        k = splits[i]
        for a in free:
            if _divides(loc[i], k, sp.sz[a]):
                yield (("dyn_slice", i, (a,)),), (dims[:i] + (ax + (a,),) + dims[i + 1:], U)
        if k == 1 and len(free) > 1:
            for X in _multi_slices(sp, i, free):
                if sp.shape[i] % _nprod(sp, X):
                    yield (("dyn_slice", i, X),), (dims[:i] + (X,) + dims[i + 1:], U)


@cython.locals(sp=Space)
def _multi_slices(sp: Space, i, free):
    fs = set(free)
    out = dict.fromkeys(itertools.permutations(free, 2))
    groups = {}
    for a in free:
        groups.setdefault(sp.base_of[a], []).append(a)
    whole = [tuple(g) for b, g in groups.items() if len(g) == sp.nfactors[b]]
    for g in whole:
        if len(g) > 1:
            out[g] = None
    for g, h in itertools.permutations(whole, 2):
        out[g + h] = None
    t = sp.T[0][i]
    for m in range(2, len(t) + 1):
        if all(a in fs for a in t[:m]):
            out[t[:m]] = None
    return list(out)


@cython.locals(sp=Space)
def _gather_moves(sp: Space, state, full):
    """AllGather of a minor-most suffix of a dim's axes (one fused group); in the directed
    pass also of other subsets, after a permute that makes them the suffix."""
    dims, U = state
    for i, ax in enumerate(dims):
        head, tail = dims[:i], dims[i + 1:]
        for rest, rx, steps in _gather_plan(sp, i, ax, full):
            if rx is None:
                yield steps, (head + (rest,) + tail, U)
            else:
                yield (("all_permute", (head + (rx,) + tail, U)), steps), (head + (rest,) + tail, U)


@cython.locals(sp=Space)
def _gather_plan(sp: Space, i, ax, full):
    """The gathers of :func:`_gather_moves` from dim ``i`` split over ``ax`` (cached per
    dim, axes and pass): ``(rest, None, steps)`` for a suffix (its steps tuple, shared by
    every state), ``(rest, rest + X, step)`` for another subset ``X`` (the permute to
    ``rest + X`` first; that step depends on the other dims). A gather removes the same
    axes whatever their order: one order of each set. Example, ``ax = (0, 1)`` in the
    directed pass: ``((0,), None, ((all_gather, i, (1,)),))``, ``((1,), (1, 0), (all_gather,
    i, (0,)))``, ``((), None, ((all_gather, i, (0, 1)),))``."""
    key = ("gather", i, ax, full)
    v = sp._sub.get(key)
    if v is None:
        v = []
        seen = set()
        for X, rest, _n, _direct in _dim_moves(sp, i, ax, full, False):
            k = frozenset(X)
            if k in seen:
                continue
            seen.add(k)
            if ax[:len(rest)] == rest:
                v.append((rest, None, (("all_gather", i, ax[len(rest):]),)))
            else:
                v.append((rest, rest + X, ("all_gather", i, X)))
        sp._sub[key] = v
    return v


@cython.locals(sp=Space)
def _a2a_moves(sp: Space, state, full):
    """AllToAll of a minor-most suffix ``X`` of dim ``i``'s axes to the end of dim ``j``;
    in the directed pass also of other ordered subsets, after a reordering permute."""
    rank = sp.rank
    if rank == 1:
        return
    dims, U = state
    splits, loc, _, _ = sp.info(dims)
    # the dims an all-to-all of n devices may enter: whole, or n divides the local size
    for i, ax in enumerate(dims):
        for X, rest, n, direct, rx, by_j in _a2a_plan(sp, i, ax, full):
            dr = None if direct else (dims[:i] + (rx,) + dims[i + 1:], U)
            for j in range(rank):
                if j == i or not (splits[j] == 1 or loc[j] % n == 0):
                    continue
                d2 = list(dims)
                d2[i] = rest
                d2[j] = dims[j] + X
                if direct:
                    yield by_j[j], (tuple(d2), U)
                else:
                    yield (("all_permute", dr), by_j[j]), (tuple(d2), U)


@cython.locals(sp=Space)
def _a2a_plan(sp: Space, i, ax, full):
    """:func:`_dim_moves` of dim ``i`` (all-to-all cap) with, per destination dim ``j``,
    the step ``(all_to_all, i, j, X)``: as a one-step move where ``X`` is the suffix
    (``direct``), else alone (after the permute); cached per dim, axes and pass."""
    key = ("a2a", i, ax, full)
    v = sp._sub.get(key)
    if v is None:
        v = []
        for X, rest, n, direct in _dim_moves(sp, i, ax, full, True):
            steps = tuple(("all_to_all", i, j, X) for j in range(sp.rank))
            if direct:
                steps = tuple((st,) for st in steps)
            v.append((X, rest, n, direct, rest + X, steps))
        sp._sub[key] = v
    return v


@cython.locals(sp=Space)
def _permute_moves(sp: Space, state, full):
    """AllPermute. The full pass (the one that proves "optimal"): one move to any type one
    permute reaches from ``state`` (the permute closure, :meth:`Space.permute_classes`),
    costed as that one permute from ``state``; the engine makes no permute move right
    after a permute there (``Plan.build`` would merge the two into one), so no plan is
    costed as a chain. The closure is listed as one *class entry* per class (the types of
    the same splits and pending sums, ``(("permute_class",),)``, and every other class
    one permute reaches, ``(("permute_class", (splits, U)),)``), whose members the engine
    enumerates when it pops the entry, each costed from ``state``; the permutes to other
    splits that move nothing (:func:`_free_relabel_moves`, the class entries' key being a
    permute of the shard) and those found cheaply (:func:`_relabel_moves`,
    :func:`_other_split_moves`, :func:`_pending_swap_moves`) are single moves as well.

    The directed pass (a first plan, an upper bound; it claims nothing): the target, the
    types from which the target is reached by gathers and slices
    (:meth:`Space.goal_adjacent`), and the relabels and pending swaps, permutes in a row
    allowed (a plan it returns is costed as ``Plan.build`` merges it).

    Example (bench case 974), ``x=2,y=3,z=4,w=2``: from ``[6, 5{y,z}, 7{w}]`` (after the
    gather of dim 0) the target ``[6, 5{z,w}, 7{x}]`` has other splits of the same local
    shape: one permute of 96 B in the target's class entry, where the chain a relabel then
    a reordering permute was counted twice."""
    dims, U = state
    splits = sp.info(dims)[0]
    if sp.relabel:
        yield from _relabel_moves(sp, state)
        if full:
            yield from _free_relabel_moves(sp, state)
            yield from _other_split_moves(sp, state)
    if U:
        yield from _pending_swap_moves(sp, state)
    if full:  # one entry per class; the engine enumerates the members when it pops one
        yield (("permute_class",),), state
        for cls in sp.permute_classes(splits, U):
            yield (("permute_class", cls),), state
        return
    targets = sp.goal_adjacent(splits, U)
    if U == sp.T[1] and splits == sp.info(sp.T[0])[0] and sp.T[0] not in targets:
        targets = [sp.T[0]] + list(targets)
    for d2 in targets:
        if d2 != dims:
            yield (("all_permute", (d2, U)),), (d2, U)


@cython.locals(sp=Space)
def _other_split_permutes(sp: Space, state, full):
    """The single moves of :func:`_permute_moves` to other splits, in its order (the
    permutes :meth:`Space.local_successors` keeps: each may move nothing)."""
    splits = sp.info(state[0])[0]
    for steps, s2 in _permute_moves(sp, state, full):
        if steps[0][0] == "all_permute" and sp.info(s2[0])[0] != splits:
            yield steps, s2


#: Permutes of :func:`_free_relabel_moves` from one state, at most, and placements it
#: tries to find them; past either the rest are dropped and :attr:`Space.closure_capped`
#: is set.
MAX_FREE_RELABELS = 16
MAX_FREE_RELABEL_NODES = 128


@cython.locals(sp=Space)
def _free_relabel_moves(sp: Space, state):
    """AllPermute to every type of other splits that moves nothing (each device already
    holds its new block, or its new block is empty): the members of the other classes of
    :meth:`Space.permute_classes` that cost nothing, as single moves (the class entries'
    key is a permute of the shard, the least any other member costs).

    Such a type keeps each dim's *core*, the shortest minor-most suffix of its axes whose
    blocks cover the dim (``ceil(N / L)`` real blocks of local size ``L`` at most its
    product), and puts *dead* factors before it: a device whose coordinate on a dead
    factor is not 0 has a block past the dim's end. Every factor before a core in the
    source must stay dead (anywhere, in any order); unused, not pending factors may join
    them; each dim keeps its local size. Example, ``x=y=z=2,w=16`` (work mesh factors of
    ``w`` 2 each): ``[16{y,w:(4)2,z,w:(1)2}, 8]`` (core: all four, 16 blocks of one
    element) reaches ``[16{x,y,w:(4)2,z,w:(1)2}, 8]`` and the other 15 orders of dead
    ``x, w:(2)2, w:(8)2`` on dim 0; ``[6{x,y}]`` on ``x=y=4`` (local size 1, but 6 blocks
    need both) is its own core; ``[3{x}]`` on ``x=2,y=2`` (blocks of 2: core ``x``) reaches
    ``[3{y,x}]``. At most :data:`MAX_FREE_RELABELS` a state, from at most
    :data:`MAX_FREE_RELABEL_NODES` placements tried (in a fixed order); memoised per state."""
    got = sp._pclass.get(("free", state))
    if got is None:
        got = sp._pclass[("free", state)] = list(_free_relabels(sp, state))
    return iter(got)


@cython.locals(sp=Space)
def _free_relabels(sp: Space, state):
    """The moves of :func:`_free_relabel_moves`, generated."""
    dims, U = state
    splits, loc, _, used = sp.info(dims)
    sz, shape, rank = sp.sz, sp.shape, sp.rank
    cores, dead = [], []
    for i, ax in enumerate(dims):
        r = -(-shape[i] // loc[i])  # real blocks
        k, p = len(ax), 1
        while p < r:
            k -= 1
            p *= sz[ax[k]]
        cores.append(ax[k:])
        dead += ax[:k]
    free = [a for a in range(len(sz)) if not (used >> a) & 1 and a not in U]
    if not dead and not free:
        return
    core_p = [math.prod(sz[a] for a in c) for c in cores]
    axes = dead + free
    must = len(dead)
    count = 0
    out_of = [False]

    nodes = 0
    still = sp._cost

    def place(k, pre, prods):
        nonlocal count, nodes
        nodes += 1
        if count >= MAX_FREE_RELABELS or nodes > MAX_FREE_RELABEL_NODES:
            out_of[0] = True
            return
        if k == len(axes):
            if all(-(-n // (q * c)) == L for n, q, c, L in zip(shape, prods, core_p, loc)):
                d2 = tuple(tuple(pr) + c for pr, c in zip(pre, cores))
                if d2 != dims and tuple(q * c for q, c in zip(prods, core_p)) != splits:
                    # moves nothing (Space.moves_nothing, known here): a device with a dead
                    # coordinate not 0 has an empty block; the others keep theirs (cores kept,
                    # the source's dead coordinates 0). test_synth_chain checks it
                    still[("still", dims, d2)] = True
                    yield (("all_permute", (d2, U)),), (d2, U)
                    count += 1
            return
        a = axes[k]
        if k >= must:  # a free factor may stay unused
            yield from place(k + 1, pre, prods)
        for i in range(rank):
            if -(-shape[i] // (prods[i] * sz[a] * core_p[i])) != loc[i]:
                continue  # the local size must stay: a dead factor on a dim that keeps it
            for pos in range(len(pre[i]) + 1):
                if out_of[0]:
                    return
                pre[i].insert(pos, a)
                prods[i] *= sz[a]
                yield from place(k + 1, pre, prods)
                prods[i] //= sz[a]
                pre[i].pop(pos)

    try:
        yield from place(0, [[] for _ in range(rank)], [1] * rank)
    finally:
        place = None  # a recursive closure is a reference cycle (synth.planners.gcpause)
    if out_of[0]:
        sp.closure_capped = True


@cython.locals(sp=Space)
def _relabel_moves(sp: Space, state):
    """AllPermute to other splits of the same local shape (uneven problems only,
    :attr:`Space.relabel`). One that moves nothing: an unused, not pending factor ``a`` becomes
    the *major-most* of a dim whose local size that keeps (one element a device, the dim
    split at least its size ways). Block ``b`` of the old split is block ``b`` of the new
    one where ``a`` is 0; where ``a`` is not 0 the block is past the dim's end (empty).
    Example, ``x=y=z=w=2``: ``[16, 8, 8{y,z,w}] -> [16, 8, 8{x,y,z,w}]``. Any ordered set
    of factors is reached one at a time (each move free). Also: any one factor leaves
    such a dim (``8{x,z,y} -> 8{x,y}`` on ``x=4,y=2,z=4``: 32 blocks of one element, 8
    of them real, become the 8), a permute costed like any other."""
    dims, U = state
    splits, loc, _, used = sp.info(dims)
    free = [a for a in range(len(sp.sz)) if not (used >> a) & 1 and a not in U]
    for i, ax in enumerate(dims):
        if not ax:
            continue
        n = sp.shape[i]
        for a in free:
            if -(-n // (splits[i] * sp.sz[a])) == loc[i]:
                d2 = dims[:i] + ((a,) + ax,) + dims[i + 1:]
                yield (("all_permute", (d2, U)),), (d2, U)
        # the reverse, and more: any one factor leaves a dim whose local size that keeps
        # (a real permute where the devices it frees held blocks past the dim's end)
        for m, a in enumerate(ax):
            if -(-n // (splits[i] // sp.sz[a])) == loc[i]:
                d2 = dims[:i] + (ax[:m] + ax[m + 1:],) + dims[i + 1:]
                yield (("all_permute", (d2, U)),), (d2, U)


#: Classes one permute reaches from a class (:meth:`Space.permute_classes`), at most, and
#: candidate split vectors examined to find them: a bound on the class entries a state
#: adds; past it :attr:`Space.closure_capped` is set and the claims say so.
MAX_PERMUTE_CLASSES = 32
MAX_PERMUTE_CLASS_CANDIDATES = 4096


#: Permutes of :func:`_other_split_moves` tried from one state, at most (the first in dim
#: order): a bound on the branching they add to the search's work budget.
MAX_OTHER_SPLITS = 16


@cython.locals(sp=Space)
def _other_split_moves(sp: Space, state):
    """AllPermute to the goal-adjacent types (:meth:`Space.goal_adjacent`: a prefix of every
    target dim, then other factors) where one dim of ``N`` elements and local size ``L`` goes
    to the fewest blocks that hold it, ``ceil(N / L)``, from more (the blocks dropped are
    empty), with the same local shape (uneven problems only, the full pass; at most
    :data:`MAX_OTHER_SPLITS` a state). Example, ``x=3,y=2,z=2``: ``[6{y,z}] -> [6{z,y,x}]`` (bound: 2 elements a
    device): ``[6{y,z}]`` (4 blocks of 2) permutes to ``[6{x}]`` (3 blocks of 2), slices
    ``y`` and permutes to the target, within the bound, where the one-factor relabels cannot
    leave ``[6{y,z}]`` and the plan gathered the whole array (3x the bound)."""
    dims, U = state
    splits, loc, _, _ = sp.info(dims)
    count = 0
    prods = sp.split_products(U)
    for i, n in enumerate(sp.shape):
        p = -(-n // loc[i])  # the fewest blocks of this local size that hold the dim
        if p >= splits[i] or p not in prods or -(-n // p) != loc[i]:
            continue
        for d2 in sp.goal_adjacent(splits[:i] + (p,) + splits[i + 1:], U):
            if d2 != dims:
                yield (("all_permute", (d2, U)),), (d2, U)
                count += 1
                if count >= MAX_OTHER_SPLITS:
                    return


@cython.locals(sp=Space)
def _pending_swap_moves(sp: Space, state):
    """AllPermute that moves a pending sum to another factor of the same size: a pending
    factor ``a`` and a factor ``b`` not pending (splitting a dim, or replicated) swap
    places, so the blocks per dim stay and the group of partial parts keeps its size (see
    :class:`synth.collectives.AllPermute`). Example, ``a=4,b=2`` (factors ``a:(1)2,
    a:(2)2, b``): ``[16{a}, 24]{U:b} -> [16{b,a:(2)2}, 24]{U:a:(1)2}``, after which a
    ShardedToUnreduced and one all-reduce reach ``[16{b}, 24]`` in 2 collectives within the
    bound (DTensor reduces, gathers 16 rows, then slices: 2 collectives, twice the bound)."""
    dims, U = state
    sz = sp.sz
    for a in U:
        for b in range(len(sz)):
            if b in U or sz[b] != sz[a]:
                continue
            d2 = tuple(tuple(a if x == b else x for x in ax) for ax in dims)
            U2 = tuple(sorted(b if x == a else x for x in U))
            yield (("all_permute", (d2, U2)),), (d2, U2)


def _subsets(xs):
    for r in range(1, len(xs) + 1):
        yield from itertools.combinations(xs, r)


@cython.locals(sp=Space)
def _reduce_moves(sp: Space, state, full):
    """AllReduce of any subset of the pending axes."""
    dims, U = state
    for X in _subsets(U):
        yield (("all_reduce", X),), (dims, tuple(a for a in U if a not in X))


@cython.locals(sp=Space)
def _reduce_scatter_moves(sp: Space, state, full):
    """ReduceScatter of any ordered subset of the pending axes into any dim where it
    divides the local size (or the dim is whole)."""
    dims, U = state
    if not U:
        return
    splits, loc, _, _ = sp.info(dims)
    for X in _subsets(U):
        U2 = tuple(a for a in U if a not in X)
        n = _nprod(sp, X)
        for Xo in (itertools.permutations(X) if len(X) <= MAX_ORDERED_SUBSET else (X,)):
            for j in range(sp.rank):
                if _divides(loc[j], splits[j], n):
                    yield (("reduce_scatter", j, Xo),), (dims[:j] + (dims[j] + Xo,) + dims[j + 1:], U2)


@cython.locals(sp=Space)
def _unreduce_moves(sp: Space, state, full):
    """Unreduce (local) of replicated axes the target leaves pending: each one alone, or
    all of them at once."""
    dims, U = state
    used = sp.info(dims)[3]
    want = tuple(a for a in sorted(sp.TU) if a not in U and not (used >> a) & 1)
    if not want:
        return
    opts = [(a,) for a in want] + ([want] if len(want) > 1 else [])
    for X in opts:
        yield (("unreduce", X),), (dims, tuple(sorted(U + X)))


#: Most multi-dim gathers tried from one state (combinations of per-dim suffixes, in a
#: fixed order): a bound on the branching of the fused forms.
MAX_MULTI_GATHERS = 64


@cython.locals(sp=Space)
def _multi_gather_moves(sp: Space, state, full):
    """One AllGather over several ``(dim, suffix)`` pairs at once (Shardy's all_gather on
    several dims; one collective over the product group): every combination of one
    minor-most suffix on each of two or more dims, at most :data:`MAX_MULTI_GATHERS`."""
    if sp.rank == 1:
        return
    dims, U = state
    opts = []
    for i, ax in enumerate(dims):
        o = _suffix_plan(sp, i, ax)
        if o:
            opts.append(o)
    if len(opts) < 2:
        return
    count = 0
    for r in range(2, len(opts) + 1):
        for group in itertools.combinations(opts, r):
            for combo in itertools.product(*group):
                d2 = list(dims)
                for _X, rest, _n, pair in combo:
                    d2[pair[0]] = rest
                yield (("multi_all_gather", tuple([c[3] for c in combo])),), (tuple(d2), U)
                count += 1
                if count >= MAX_MULTI_GATHERS:
                    return


#: Most multi-move all-to-alls tried from one state (pairs of moves, in the fixed order of
#: :func:`_multi_a2a_moves`): a bound on the branching of the fused all-to-all.
MAX_MULTI_ALL_TO_ALLS = 64


@cython.locals(sp=Space)
def _multi_a2a_moves(sp: Space, state, full):
    """One AllToAll carrying two ``(src_dim, dst_dim, suffix)`` moves (Shardy's all_to_all
    with several pairs; one collective over the product group), of three shapes:

    * *disjoint*: four distinct dims (rank >= 4);
    * *shared destination*: two source dims into one dim ``j``, in either order (the first
      is the more major in ``j``), where the second still divides ``j``'s local size after
      the first (the chain's type rule). Mesh ``x=4,y=2``: from ``[16{y}, 16, 16{x}]``,
      ``AllToAll(2->1:x, 0->1:y)`` reaches ``[16, 16{x,y}, 16]`` in one collective (7/8 of
      the block received; the two-step chain receives 5/4);
    * *shared source*: a minor-most suffix ``X`` of dim ``i`` to dim ``j``, then a minor-most
      suffix ``Y`` of what remains of dim ``i`` to another dim ``m``: from ``[8{a,b}, 4, 4]``,
      ``AllToAll(0->1:b, 0->2:a)`` reaches ``[8, 4{b}, 4{a}]``.

    A dim is never both a source and a destination. Each move is a minor-most suffix whose
    result nests (:func:`_dim_moves`, all-to-all cap); a pair whose group spans factors of
    more than one mesh axis holds at most ``max_fused`` devices. The pairs come in a fixed
    order: the one-dim moves ordered by source dim, suffix length and destination dim;
    pairs ``(first, second)`` by the first's place, then the second's (one-dim moves in
    that order, then the suffixes of what remains of the first's source dim); the first
    :data:`MAX_MULTI_ALL_TO_ALLS` valid pairs are tried (rank >= 3)."""
    if sp.rank < 3:
        return
    dims, U = state
    splits, loc, _, _ = sp.info(dims)
    shape, base = sp.shape, sp.base_of
    singles = []
    for i, ax in enumerate(dims):
        for X, rest, n, direct in _dim_moves(sp, i, ax, True, True):
            if not direct:
                continue
            for j in range(sp.rank):
                if j != i and (splits[j] == 1 or loc[j] % n == 0):
                    singles.append((i, j, X, rest, n))
    count = 0
    for a, (i, j, X, rx, nx) in enumerate(singles):
        # the second move: any later single (disjoint or shared destination, either order
        # among the pair), or a suffix of dim i's rest (shared source)
        seconds = []
        for b, (k, m, Y, ry, ny) in enumerate(singles):
            if b == a or k in (i, j) or m == i:
                continue
            if m != j:
                if b < a or len({i, j, k, m}) < 4:
                    continue
                seconds.append((k, m, Y, ry, ny))
            else:  # shared destination: Y must divide dim j's local size after X
                kj = splits[j] * nx
                lj = loc[j] // nx if splits[j] > 1 else -(-shape[j] // nx)
                if kj > 1 and lj % ny:
                    continue
                seconds.append((k, m, Y, ry, ny))
        if rx:
            for Y, ry, ny, direct in _dim_moves(sp, i, rx, True, True):
                if not direct:
                    continue
                for m in range(sp.rank):
                    if m not in (i, j) and (splits[m] == 1 or loc[m] % ny == 0):
                        seconds.append((i, m, Y, ry, ny))
        for k, m, Y, ry, ny in seconds:
            if nx * ny > sp.max_fused and len({base[x] for x in X + Y}) > 1:
                continue
            d2 = list(dims)
            d2[i], d2[k] = rx, ry  # shared source: k == i, ry is what remains after both
            if m == j:
                d2[j] = dims[j] + X + Y
            else:
                d2[j], d2[m] = dims[j] + X, dims[m] + Y
            if k == i or m == j:
                mv = ((i, j, X), (k, m, Y))  # sharing a dim: the order is the meaning
            else:
                mv = tuple(sorted(((i, j, X), (k, m, Y))))
            yield (("multi_all_to_all", mv),), (tuple(d2), U)
            count += 1
            if count >= MAX_MULTI_ALL_TO_ALLS:
                return


@cython.locals(sp=Space)
def _s2u_moves(sp: Space, state, full):
    """ShardedToUnreduced (local): a minor-most suffix of a dim leaves it and joins the
    pending sums (each device zero-fills the rest of the unsplit dim)."""
    dims, U = state
    for i, ax in enumerate(dims):
        for X, rest, _n, _pair in _suffix_plan(sp, i, ax):
            yield (("sharded_to_unreduced", i, X),), (dims[:i] + (rest,) + dims[i + 1:],
                                                        tuple(sorted(U + X)))


@cython.locals(sp=Space)
def _suffix_plan(sp: Space, i, ax):
    """The minor-most suffixes of dim ``i``'s axes ``ax`` that a gather (uncapped) takes
    as they are (:func:`_dim_moves` of the full pass, ``direct``): ``(X, rest, n, (i,
    X))``, cached per dim and axes (multi-dim gathers and ShardedToUnreduced read it)."""
    key = ("suffix", i, ax)
    v = sp._sub.get(key)
    if v is None:
        v = sp._sub[key] = [(X, rest, n, (i, X)) for X, rest, n, direct
                            in _dim_moves(sp, i, ax, True, False) if direct]
    return v


#: Move generators keyed by collective kind: the search's view of the collectives table.
MOVES = {
    "dyn_slice": _slice_moves,
    "all_gather": _gather_moves,
    "all_to_all": _a2a_moves,
    "all_permute": _permute_moves,
    "all_reduce": _reduce_moves,
    "reduce_scatter": _reduce_scatter_moves,
    "unreduce": _unreduce_moves,
    "multi_all_gather": _multi_gather_moves,
    "multi_all_to_all": _multi_a2a_moves,
    "sharded_to_unreduced": _s2u_moves,
}

__all__ = ["MOVES", "Space", "work_mesh", "primes", "refine_type"]
