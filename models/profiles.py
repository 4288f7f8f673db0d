"""Hardware profiles: data files under ``models/profiles/`` turned into sized,
immutable :class:`HardwareProfile` values.

A profile is named and sized in one string, ``NAME[:SIZE]``::

    load_profile("tpu-v4:4x4x4")     # 3-D torus of 64 chips
    load_profile("tpu-v5e:4x4")      # 2-D torus
    load_profile("dgx-h100:2")       # 2 nodes of 8 GPUs (NVSwitch inside, InfiniBand between)
    load_profile("dgx-h100:2x4")     # 2 nodes, 4 GPUs used in each
    load_profile("cpu-host:8")       # 8 host-CPU devices sharing memory
    load_profile("calibrated/cpu-8") # models/profiles/calibrated/cpu-8.json (also "cpu-8")
    load_profile("path/to/my.yaml:16")

The file schema is documented in ``docs/simulator.md``. Every parameter may be a
bare number or ``{value: NUMBER, source: "URL or document"}``; built-in profiles give
a source for every number (a test checks it).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path

from models.errors import ProfileError

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
CALIBRATED_DIR = PROFILE_DIR / "calibrated"

TOPOLOGY_KINDS = ("torus", "switched", "cpu-host")
WRAPAROUND_POLICIES = ("always", "never", "multiple_of_4", "full", "cubes", "v4_torus_shapes")
#: Algorithms the simulator and the analytic model know, per schedule-op kind.
ALGORITHMS = {
    "all_gather": ("auto", "ring", "bidir_ring", "hier_ring"),
    "reduce_scatter": ("auto", "ring", "bidir_ring", "hier_ring"),
    "all_reduce": ("auto", "ring", "bidir_ring", "hier_ring", "tree", "nvls", "nvls_tree", "sharp"),
    "all_to_all": ("auto", "direct"),
    "permute": ("auto", "direct"),
}
#: ``auto`` = chosen per op and size by :mod:`models.collectives` (NCCL's tuner on switched
#: machines, multi-axis / line / bidirectional rings on tori).
DEFAULT_ALGORITHMS = {
    "all_gather": "auto",
    "reduce_scatter": "auto",
    "all_reduce": "auto",
    "all_to_all": "direct",
    "permute": "direct",
}
OVERRIDE_KINDS = ("dyn_slice", "copy", "all_gather", "all_to_all", "permute", "all_reduce",
                  "reduce_scatter")

# parameter name -> (required for kinds, type)
_PARAMS = {
    "link_bandwidth_Bps": (TOPOLOGY_KINDS, float),
    "link_latency_s": (TOPOLOGY_KINDS, float),
    "links_per_chip": (TOPOLOGY_KINDS, int),
    "launch_overhead_s": (TOPOLOGY_KINDS, float),
    "hbm_bandwidth_Bps": (TOPOLOGY_KINDS, float),
    "hbm_capacity_bytes": (TOPOLOGY_KINDS, int),
    "gpus_per_node": (("switched",), int),
    "nic_bandwidth_Bps": (("switched",), float),
    "nic_latency_s": (("switched",), float),
    "bus_bandwidth_Bps": (("cpu-host",), float),
}
#: Optional parameters (issue 9): achieved-vs-line-rate factors, the bandwidth ramp, NCCL's
#: protocol latencies, in-network reduction and reduction bandwidth. Absent = the default here.
_OPTIONAL = {
    "nics_per_node": (int, 0),            # switched: NICs per node (0 = one per GPU)
    "link_efficiency": (float, 1.0),      # achieved / line rate on NVLink or ICI links
    "nic_efficiency": (float, 1.0),       # achieved / line rate on a NIC
    "nvls_efficiency": (float, 0.0),      # NVLink SHARP all-reduce: algbw / NVLink line rate (0 = none)
    "sharp": (int, 0),                    # 1 = InfiniBand SHARP (in-fabric reduction) between nodes
    "max_net_rings": (int, 0),            # most rings (channels) NCCL runs across the network (0 = NICs)
    "ramp_half_bytes": (float, 0.0),      # message size at which half the bandwidth is reached (8 ranks)
    "ramp_ranks_exponent": (float, 0.0),  # ramp_half_bytes grows as (ranks / 8) ** exponent
    "ramp_size_exponent": (float, 1.0),   # ramp = 1 / (1 + (h / S) ** exponent); 1 = S / (S + h)
    "pair_efficiency": (float, 0.0),      # link efficiency of a 2-rank group (0 = link_efficiency)
    "a2a_efficiency": (float, 0.0),       # achieved / line rate of an all-to-all's sends (0 = link_efficiency)
    "a2a_ramps": (int, 0),                # 1 = all-to-alls follow the bandwidth ramp (NCCL's chunked sends)
    "a2a_latency_s": (float, 0.0),        # fixed latency of an all-to-all's grouped sends (0 = Simple's)
    "a2a_pair_efficiency": (float, 0.0),  # all-to-all efficiency of a 2-rank group (0 = a2a_efficiency)
    "reduce_input_bandwidth_Bps": (float, 0.0),  # input bytes/s a GPU's reduction kernel reads (0 = no limit)
    "nvls_tree_busbw_2node_Bps": (float, 0.0),  # NCCL's NVLS-tree bus bandwidth cap over 2 nodes (0 = none)
    "nvls_tree_busbw_Bps": (float, 0.0),        # ... over 3 or more nodes
    "reduce_bandwidth_Bps": (float, 0.0), # bytes/s one device reduces (0 = HBM bandwidth / 3)
    "ll_base_latency_s": (float, 0.0),    # NCCL protocol LL / LL128 / Simple: fixed latency ...
    "ll128_base_latency_s": (float, 0.0),
    "simple_base_latency_s": (float, 0.0),
    "ll_hop_latency_s": (float, 0.0),     # ... and latency per algorithm step (hop) within a node
    "ll128_hop_latency_s": (float, 0.0),
    "simple_hop_latency_s": (float, 0.0),
    "ll_max_bandwidth_Bps": (float, 0.0), # NCCL LL protocol: most bus bytes/s per GPU (0 = no cap)
    # optional (issue 23, round 3): NCCL's tuner rules for multi-node NVLink (GB200 NVL72)
    "mnnvl": (int, 0),                    # 1 = NVLink domains span trays (MNNVL): no NVLS tree across them
    "ll128": (int, 1),                    # 0 = NCCL does not enable LL128 by default on this GPU
    "tree_simple_hop_latency_s": (float, 0.0),  # Simple step latency of a tree inside a node (0 = simple_hop)
    "nvls_latency_s": (float, 0.0),       # NVLS fixed latency inside a node (0 = Simple's base + 2 steps)
}
#: NCCL protocols: name -> fraction of the link bandwidth the protocol's wire format leaves for
#: data (LL: 4 B flag per 4 B data; LL128: 8 B flag per 128 B line; Simple: none).
PROTOCOLS = {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0}
_SIZE_RE = re.compile(r"^\d+(x\d+)*$")


@dataclass(frozen=True)
class KindParams:
    """Per-collective-kind overrides (e.g. fitted by calibration). ``None`` = use the
    machine-wide value. ``bandwidth_Bps`` replaces every link's bandwidth for that
    kind's transfers (for local kinds: the HBM bandwidth); ``latency_s`` replaces every
    link's per-hop latency; ``alpha_s`` replaces the launch overhead."""

    alpha_s: float | None = None
    bandwidth_Bps: float | None = None
    latency_s: float | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in (("alpha_s", self.alpha_s), ("bandwidth_Bps", self.bandwidth_Bps),
                                  ("latency_s", self.latency_s)) if v is not None}


@dataclass(frozen=True)
class HardwareProfile:
    """A sized machine. Units: bytes, seconds, bytes/s (per direction).

    ``dims`` is the physical shape: torus dimensions (``kind="torus"``), ``(nodes,
    gpus_per_node)`` (``"switched"``) or ``(devices,)`` (``"cpu-host"``); ``dim_names``
    names them for placements. ``wraparound`` says, per torus dimension, whether the
    ring closes."""

    name: str
    kind: str
    dims: tuple[int, ...]
    dim_names: tuple[str, ...]
    link_bandwidth_Bps: float
    link_latency_s: float
    links_per_chip: int
    launch_overhead_s: float
    hbm_bandwidth_Bps: float
    hbm_capacity_bytes: int
    wraparound: tuple[bool, ...] = ()
    nic_bandwidth_Bps: float = 0.0
    nic_latency_s: float = 0.0
    bus_bandwidth_Bps: float = 0.0
    nics_per_node: int = 0
    link_efficiency: float = 1.0
    nic_efficiency: float = 1.0
    nvls_efficiency: float = 0.0
    sharp: int = 0
    max_net_rings: int = 0
    ramp_half_bytes: float = 0.0
    ramp_ranks_exponent: float = 0.0
    ramp_size_exponent: float = 1.0
    pair_efficiency: float = 0.0
    a2a_efficiency: float = 0.0
    a2a_ramps: int = 0
    a2a_latency_s: float = 0.0
    a2a_pair_efficiency: float = 0.0
    reduce_input_bandwidth_Bps: float = 0.0
    nvls_tree_busbw_2node_Bps: float = 0.0
    nvls_tree_busbw_Bps: float = 0.0
    reduce_bandwidth_Bps: float = 0.0
    ll_base_latency_s: float = 0.0
    ll128_base_latency_s: float = 0.0
    simple_base_latency_s: float = 0.0
    ll_hop_latency_s: float = 0.0
    ll128_hop_latency_s: float = 0.0
    simple_hop_latency_s: float = 0.0
    ll_max_bandwidth_Bps: float = 0.0
    mnnvl: int = 0
    ll128: int = 1
    tree_simple_hop_latency_s: float = 0.0
    nvls_latency_s: float = 0.0
    overrides: tuple[tuple[str, KindParams], ...] = ()
    algorithms: tuple[tuple[str, str], ...] = ()
    description: str = field(default="", compare=False, repr=False)
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    origin: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        if self.kind not in TOPOLOGY_KINDS:
            raise ProfileError(f"profile {self.name!r}: topology kind {self.kind!r} is not one of "
                               f"{list(TOPOLOGY_KINDS)}")
        if not self.dims or any(int(d) < 1 for d in self.dims):
            raise ProfileError(f"profile {self.name!r}: size {self.dims} must have positive dimensions")
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        for p in ("link_bandwidth_Bps", "hbm_bandwidth_Bps"):
            if not getattr(self, p) > 0:
                raise ProfileError(f"profile {self.name!r}: {p} must be > 0, got {getattr(self, p)}")
        for p in ("link_latency_s", "launch_overhead_s"):
            if getattr(self, p) < 0:
                raise ProfileError(f"profile {self.name!r}: {p} must be >= 0, got {getattr(self, p)}")
        if self.kind == "torus" and len(self.wraparound) != len(self.dims):
            object.__setattr__(self, "wraparound", tuple(d > 2 for d in self.dims))
        if self.kind == "switched" and len(self.dims) != 2:
            raise ProfileError(f"profile {self.name!r}: a switched machine is sized (nodes, gpus)")
        for p in ("link_efficiency", "nic_efficiency"):
            if not 0 < getattr(self, p) <= 1:
                raise ProfileError(f"profile {self.name!r}: {p} must be in (0, 1], got {getattr(self, p)}")
        for p in ("pair_efficiency", "a2a_efficiency", "a2a_pair_efficiency"):
            if not 0 <= getattr(self, p) <= 1:
                raise ProfileError(f"profile {self.name!r}: {p} must be in [0, 1] (0 = link_efficiency), "
                                   f"got {getattr(self, p)}")
        if not 0 < self.ramp_size_exponent <= 4:
            raise ProfileError(f"profile {self.name!r}: ramp_size_exponent must be in (0, 4], "
                               f"got {self.ramp_size_exponent}")
        if not 0 <= self.nvls_efficiency <= 1:
            raise ProfileError(f"profile {self.name!r}: nvls_efficiency must be in [0, 1], got {self.nvls_efficiency}")

    # -- derived numbers used by models.collectives ----------------------------------
    @property
    def nics(self) -> int:
        """NICs per node of a switched machine (one per GPU unless ``nics_per_node`` says)."""
        if self.kind != "switched":
            return 0
        return self.nics_per_node or self.dims[1]

    @property
    def has_protocols(self) -> bool:
        """Whether the profile gives NCCL's protocol latencies (LL / LL128 / Simple)."""
        return self.simple_base_latency_s > 0

    def protocol_latency_s(self, proto: str) -> tuple[float, float]:
        """(fixed latency, latency per step within a node) of NCCL protocol ``proto``."""
        key = {"LL": "ll", "LL128": "ll128", "Simple": "simple"}[proto]
        return getattr(self, f"{key}_base_latency_s"), getattr(self, f"{key}_hop_latency_s")

    def ramp(self, nbytes: float, ranks: int) -> float:
        """Fraction of the peak bandwidth a collective of ``nbytes`` (nccl-tests size) over
        ``ranks`` devices reaches: ``1 / (1 + (h / S) ** g)``, ``h = ramp_half_bytes *
        (ranks/8)**ramp_ranks_exponent``, ``g = ramp_size_exponent`` (``g = 1`` is ``S / (S + h)``).

        Half the bandwidth at ``S = h`` whatever ``g``; a ``g`` below 1 spreads the climb over
        more sizes, as measured curves do (H100, 8 ranks, all-gather: 64% of plateau at 64 MiB,
        87% at 256 MiB; XLA's collective table): e.g. ``h = 18 MB, g = 0.75`` gives 0.72 at 64 MiB."""
        if self.ramp_half_bytes <= 0 or nbytes <= 0:
            return 1.0
        h = self.ramp_half_bytes * (max(ranks, 2) / 8.0) ** self.ramp_ranks_exponent
        g = self.ramp_size_exponent
        return float(1.0 / (1.0 + (h / nbytes) ** g))

    def group_link_efficiency(self, ranks: int) -> float:
        """Achieved fraction of the NVLink/ICI line rate of a ring collective over ``ranks``
        devices: ``link_efficiency`` from 8 ranks up; ``pair_efficiency`` at 2 ranks (two GPUs
        exchange over fewer NCCL channels and pay each step's overhead on half the data),
        linear in ``1/ranks`` in between: 4 ranks get ``link_efficiency - (link_efficiency -
        pair_efficiency) / 3``. Without ``pair_efficiency`` every group size gets
        ``link_efficiency``. (H100, XLA's collective table: busbw at 1 GiB 344 / 326 / 248 GB/s
        for 8 / 4 / 2-rank all-gathers.)"""
        e8 = self.link_efficiency
        if self.pair_efficiency <= 0 or ranks >= 8:
            return e8
        e2 = self.pair_efficiency
        t = (2.0 / max(ranks, 2) - 0.25) / 0.75          # 2 ranks: 1, 4: 1/3, 8: 0
        return float(e8 - (e8 - e2) * t)

    def group_a2a_efficiency(self, ranks: int | None) -> float:
        """Achieved fraction of the NVLink line rate of an all-to-all over ``ranks`` devices:
        ``a2a_efficiency`` from 8 ranks up, ``a2a_pair_efficiency`` at 2, linear in ``1/ranks``
        between (as :meth:`group_link_efficiency`). NCCL runs a fixed number of channels per peer
        (``p2pnChannelsPerPeer``), so a GPU with one peer drives fewer channels than one with
        seven. Without ``a2a_efficiency`` it is the ring's efficiency; without
        ``a2a_pair_efficiency`` every group size gets ``a2a_efficiency``. (B200, XLA's table:
        a 2-rank all-to-all reaches 0.47 of the line rate at 1 GiB, an 8-rank one 0.67.)"""
        e8 = self.a2a_efficiency or self.link_efficiency
        if self.a2a_pair_efficiency <= 0 or not ranks or ranks >= 8:
            return e8
        t = (2.0 / max(ranks, 2) - 0.25) / 0.75
        return float(e8 - (e8 - self.a2a_pair_efficiency) * t)

    def reduce_time_s(self, kind: str, nbytes_in: float, ranks: int, ramp: float = 1.0) -> float:
        """Least time a GPU spends on the arithmetic of a GPU-reduced collective (reduce-scatter,
        all-reduce by ring or tree) whose nccl-tests size is ``nbytes_in`` over ``ranks`` devices,
        overlapped with the transfers (the op takes the longer). Two limits: the arithmetic on
        the ``(ranks-1)/ranks`` received part at ``reduce_Bps``, and NCCL's reduction kernel
        reading the GPU's whole input at ``reduce_input_bandwidth_Bps`` times ``ramp`` (it runs on
        the few SMs of NCCL's channels, in the same pipelined chunks as the transfers, so it
        climbs to its rate with them). Worked example, H100 (``reduce_input_bandwidth_Bps``
        4.0e11, ramp 0.93-0.95 at 256 MiB), a 256 MiB reduce-scatter: 0.70-0.72 ms whatever
        the group size -- XLA's table measures 0.77 ms over 2, 4 and 8 ranks alike, while its
        all-gathers take 0.55 / 0.67 / 0.73 ms."""
        if kind not in ("reduce_scatter", "all_reduce") or ranks < 2:
            return 0.0
        t = (ranks - 1) / ranks * nbytes_in / self.reduce_Bps
        if self.reduce_input_bandwidth_Bps > 0:
            t = max(t, nbytes_in / (self.reduce_input_bandwidth_Bps * ramp))
        return float(t)

    @property
    def reduce_Bps(self) -> float:
        """Bytes/s one device combines in a reduction (reads two operands, writes one)."""
        return self.reduce_bandwidth_Bps or self.hbm_bandwidth_Bps / 3.0

    # -- size ---------------------------------------------------------------------
    @property
    def num_devices(self) -> int:
        return math.prod(self.dims)

    @property
    def size_str(self) -> str:
        return "x".join(str(d) for d in self.dims)

    @property
    def spec(self) -> str:
        """``name:size``, the string :func:`load_profile` takes back."""
        return f"{self.name}:{self.size_str}"

    def __str__(self) -> str:
        return self.spec

    # -- per-kind parameters ------------------------------------------------------
    def kind_params(self, kind: str) -> KindParams:
        for k, v in self.overrides:
            if k == kind:
                return v
        return KindParams()

    def alpha_s(self, kind: str) -> float:
        """Fixed cost of one op of ``kind`` (launch overhead, or its override)."""
        kp = self.kind_params(kind)
        return self.launch_overhead_s if kp.alpha_s is None else kp.alpha_s

    def local_bandwidth_Bps(self, kind: str = "copy") -> float:
        kp = self.kind_params(kind)
        return self.hbm_bandwidth_Bps if kp.bandwidth_Bps is None else kp.bandwidth_Bps

    def algorithm(self, kind: str) -> str:
        for k, v in self.algorithms:
            if k == kind:
                return v
        return DEFAULT_ALGORITHMS.get(kind, "direct")

    def with_algorithm(self, **kinds: str) -> HardwareProfile:
        """A copy that forces an algorithm per kind (e.g. ``all_reduce="ring"``, like
        ``NCCL_ALGO=Ring``); ``"auto"`` restores the tuner."""
        d = dict(self.algorithms)
        for k, a in kinds.items():
            if k not in ALGORITHMS or a not in ALGORITHMS[k]:
                raise ProfileError(f"with_algorithm: {a!r} is not an algorithm for {k!r}; choose from "
                                   f"{list(ALGORITHMS.get(k, ()))}")
            d[k] = a
        return replace(self, algorithms=tuple(sorted(d.items())))

    # -- what-if knobs --------------------------------------------------------------
    def with_scale(self, bandwidth_scale: float = 1.0, latency_scale: float = 1.0) -> HardwareProfile:
        """A new profile whose link/NIC/bus bandwidths are multiplied by
        ``bandwidth_scale`` and whose per-hop latencies and launch overheads are
        multiplied by ``latency_scale`` (HBM bandwidth is left alone)."""
        def _num(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        if not (_num(bandwidth_scale) and _num(latency_scale)) or not (bandwidth_scale > 0) \
                or not (latency_scale >= 0):
            raise ProfileError(
                f"with_scale: bandwidth_scale must be > 0 and latency_scale >= 0, got "
                f"{bandwidth_scale}, {latency_scale}")
        b, a = float(bandwidth_scale), float(latency_scale)

        def kp(p: KindParams) -> KindParams:
            return KindParams(None if p.alpha_s is None else p.alpha_s * a,
                              None if p.bandwidth_Bps is None else p.bandwidth_Bps * b,
                              None if p.latency_s is None else p.latency_s * a)

        return replace(
            self,
            link_bandwidth_Bps=self.link_bandwidth_Bps * b,
            nic_bandwidth_Bps=self.nic_bandwidth_Bps * b,
            bus_bandwidth_Bps=self.bus_bandwidth_Bps * b,
            link_latency_s=self.link_latency_s * a,
            nic_latency_s=self.nic_latency_s * a,
            launch_overhead_s=self.launch_overhead_s * a,
            overrides=tuple((k, kp(v)) for k, v in self.overrides),
        )

    def with_overrides(self, **kinds: KindParams) -> HardwareProfile:
        d = dict(self.overrides)
        d.update(kinds)
        return replace(self, overrides=tuple(sorted(d.items())))

    # -- topology -------------------------------------------------------------------
    @cached_property
    def topology(self):
        """The :class:`models.topology.Topology` of this machine (built once)."""
        from models.topology import build_topology

        return build_topology(self)

    def graph(self):
        """A new networkx DiGraph of this machine."""
        from models.topology import machine_graph

        return machine_graph(self)

    def source(self, param: str) -> str | None:
        return dict(self.sources).get(param)

    def unsourced(self) -> list[str]:
        """Parameters used by this profile that carry no source."""
        src = dict(self.sources)
        need = [p for p, (kinds, _) in _PARAMS.items() if self.kind in kinds]
        return [p for p in need if not src.get(p)]

    def to_dict(self) -> dict:
        d = {
            "name": self.name, "spec": self.spec, "kind": self.kind, "dims": list(self.dims),
            "dim_names": list(self.dim_names), "num_devices": self.num_devices,
            "link_bandwidth_Bps": self.link_bandwidth_Bps, "link_latency_s": self.link_latency_s,
            "links_per_chip": self.links_per_chip, "launch_overhead_s": self.launch_overhead_s,
            "hbm_bandwidth_Bps": self.hbm_bandwidth_Bps, "hbm_capacity_bytes": self.hbm_capacity_bytes,
            "algorithms": {k: self.algorithm(k) for k in ALGORITHMS},
            "sources": dict(self.sources),
        }
        if self.kind == "torus":
            d["wraparound"] = list(self.wraparound)
        if self.kind == "switched":
            d.update(nic_bandwidth_Bps=self.nic_bandwidth_Bps, nic_latency_s=self.nic_latency_s,
                     nics_per_node=self.nics)
        for p, (_t, default) in _OPTIONAL.items():
            if p != "nics_per_node" and getattr(self, p) != default:
                d[p] = getattr(self, p)
        if self.kind == "cpu-host":
            d["bus_bandwidth_Bps"] = self.bus_bandwidth_Bps
        if self.overrides:
            d["collectives"] = {k: v.to_dict() for k, v in self.overrides}
        return d


#: The name the brief uses for the same value.
Machine = HardwareProfile


# -- loading ------------------------------------------------------------------------------
def available_profiles() -> list[str]:
    """Names :func:`load_profile` resolves (built-ins, then calibrated ones)."""
    names = sorted(p.stem for p in PROFILE_DIR.glob("*") if p.suffix in (".yaml", ".yml", ".json"))
    if CALIBRATED_DIR.is_dir():
        # ``NAME.report.json`` files are calibration reports, not profiles.
        names += sorted("calibrated/" + p.stem for p in CALIBRATED_DIR.glob("*")
                        if p.suffix in (".yaml", ".yml", ".json") and not p.stem.endswith(".report"))
    return names


def auto_size(kind: str, ndims: int, n: int, gpus_per_node: int = 8) -> str:
    """The machine size with ``n`` devices that the experiments runner and ``simulator
    bound-ratio`` use when a config names none: a torus as close to a cube as the prime
    factors allow (64 -> 4x4x4, 4096 -> 16x16x16), whole nodes of a switched machine when
    ``n`` fills them (64 -> 8 nodes), else one partly used node (4 -> 1x4); ``n`` CPU
    devices."""
    if kind == "torus":
        dims = [1] * max(ndims, 1)
        rest = n
        # grow the smallest dimension by the smallest prime factor left
        while rest > 1:
            f = next(p for p in range(2, rest + 1) if rest % p == 0)
            k = min(range(len(dims)), key=lambda i: (dims[i], i))
            dims[k] *= f
            rest //= f
        return "x".join(str(d) for d in sorted(dims, reverse=True))
    if kind == "switched":
        return str(n // gpus_per_node) if n % gpus_per_node == 0 else f"1x{n}"
    return str(n)


def load_profile(spec, size: str | None = None) -> HardwareProfile:
    """Load and size a profile from ``"name[:size]"``, a file path, or a profile.

    Raises :class:`ProfileError` (a ``RedistributionError``) for unknown names,
    malformed files, missing parameters and impossible sizes."""
    if isinstance(spec, HardwareProfile):
        return spec if size is None else resize(spec, size)
    if not isinstance(spec, (str, os.PathLike)):
        raise ProfileError(f"hardware: expected a string like 'tpu-v4:4x4x4', got {str(spec)[:60]!r}")
    text = str(spec).strip()
    if not text:
        raise ProfileError("hardware: empty spec; write e.g. 'tpu-v4:4x4x4' or 'cpu-host:8'")
    name, size_text = text, size
    head, sep, tail = text.rpartition(":")
    if sep and _SIZE_RE.match(tail.strip()):
        name, size_text = head.strip(), tail.strip() if size is None else size
    elif sep and not os.path.exists(text):
        raise ProfileError(
            f"hardware {text!r}: size {tail!r} is malformed; write sizes as '4x4x4' (torus), "
            "'2' or '2x8' (nodes x GPUs) or '8' (CPU devices)")
    path = _resolve(name)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = 0
    prof = _load_cached(str(path.resolve()), mtime, size_text)
    from synth.limits import check_devices

    check_devices(prof.num_devices, f"hardware {text}")
    return prof


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime: int, size_text: str | None) -> HardwareProfile:
    """Profiles are immutable, so equal loads share one value (and its topology).
    The file's mtime is part of the key: an edited file is read again."""
    p = Path(path)
    return _from_raw(_read_raw(p, set()), p, size_text)


def _resolve(name: str) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml", ".json") or os.sep in name and not name.startswith("calibrated/"):
        if p.is_file() or os.path.lexists(p):  # a folder, FIFO or link is refused by the reader
            return p
        raise ProfileError(f"hardware: profile file {name!r} does not exist")
    cands = []
    if name.startswith("calibrated/"):
        stem = name.split("/", 1)[1]
        cands += [CALIBRATED_DIR / (stem + ext) for ext in (".json", ".yaml", ".yml")]
    else:
        cands += [PROFILE_DIR / (name + ext) for ext in (".yaml", ".yml", ".json")]
        cands += [CALIBRATED_DIR / (name + ext) for ext in (".json", ".yaml", ".yml")]
    for c in cands:
        if c.is_file():
            return c
    if p.is_file():
        return p
    raise ProfileError(
        f"hardware: unknown hardware profile {name!r}; available: {', '.join(available_profiles())} "
        "(or give a path to a .yaml/.json profile file)")


def _read_raw(path: Path, seen: set, depth: int = 0) -> dict:
    """The merged document of a profile file and its ``extends`` chain. Read through
    synth.fileio (regular files only, ``yaml_bytes`` cap before reading, UTF-8, safe YAML);
    the chain is at most ``extends_depth`` files deep and may not loop."""
    from synth.fileio import FileError, read_yaml
    from synth.limits import limit

    if path in seen:
        raise ProfileError(f"profile {path}: 'extends' forms a cycle")
    if depth >= limit("extends_depth"):
        raise ProfileError(f"profile {path}: the 'extends' chain is over {limit('extends_depth')} files deep "
                           "(set REDIST_LIMIT_EXTENDS_DEPTH to change it); extend the base profile directly")
    seen.add(path)
    try:
        raw = read_yaml(path, "profile file")
    except FileError as e:
        raise ProfileError(str(e)) from None
    if not isinstance(raw, dict):
        raise ProfileError(f"profile file {path}: expected a mapping at the top level")
    _validate_schema(raw, path, partial=bool(raw.get("extends")))
    base = raw.get("extends")
    if base:
        parent = _read_raw(_resolve(str(base)), seen, depth + 1)
        raw = _merge(parent, {k: v for k, v in raw.items() if k != "extends"})
    return raw


def _schema():
    """The pydantic v2 models of a profile file (built once, imported lazily)."""
    global _SCHEMA
    if _SCHEMA is not None:
        return _SCHEMA
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

    class Sourced(BaseModel):
        model_config = ConfigDict(extra="forbid")
        value: float = Field(ge=0, allow_inf_nan=False)
        source: str | None = None

        @field_validator("value", mode="before")
        @classmethod
        def _no_bool(cls, v):
            if isinstance(v, bool):
                raise ValueError("must be a number, not a boolean")
            return v

    Number = Sourced | float

    def _num_ok(v):
        if isinstance(v, bool):
            raise ValueError("must be a number, not a boolean")
        if isinstance(v, (int, float)) and (v != v or v in (float("inf"), float("-inf")) or v < 0):
            raise ValueError("must be a finite number >= 0")
        return v

    fields = {k: (Number | None, None) for k in list(_PARAMS) + list(_OPTIONAL)}

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        __annotations__ = {k: Number | None for k in fields}
        locals().update({k: None for k in fields})

        @field_validator("*", mode="before")
        @classmethod
        def _check(cls, v):
            return _num_ok(v)

    class Topo(BaseModel):
        model_config = ConfigDict(extra="forbid")
        kind: Literal["torus", "switched", "cpu-host"] | None = None
        default_size: str | int | None = None
        max_size: str | int | None = None
        dim_names: list[str] | None = None
        wraparound: Literal["always", "never", "multiple_of_4", "full", "cubes", "v4_torus_shapes"] | None = None
        source: str | None = None

    class KindOverride(BaseModel):
        model_config = ConfigDict(extra="forbid")
        alpha_s: Number | None = None
        bandwidth_Bps: Number | None = None
        latency_s: Number | None = None
        algorithm: str | None = None

        @field_validator("alpha_s", "bandwidth_Bps", "latency_s", mode="before")
        @classmethod
        def _check(cls, v):
            return _num_ok(v)

    Kind = Literal["dyn_slice", "copy", "all_gather", "all_to_all", "permute", "all_reduce", "reduce_scatter"]

    class ProfileFile(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str | None = None
        extends: str | None = None
        description: str | None = None
        topology: Topo | None = None
        algorithms: dict[Kind, str] | None = None
        params: Params | None = None
        collectives: dict[Kind, KindOverride] | None = None
        calibration: dict | None = None      # free-form notes written by executor calibration

    _ = StrictBool
    _SCHEMA = ProfileFile
    return _SCHEMA


_SCHEMA = None


def _validate_schema(raw: dict, path: Path, partial: bool) -> None:
    """Check a profile document against the pydantic schema; the first problem becomes one
    line naming the field path, the value and the rule."""
    from pydantic import ValidationError

    try:
        _schema().model_validate(raw)
    except ValidationError as e:
        errs = e.errors()
        err = errs[0]
        branches = ("Sourced", "float", "function-before[_no_bool(), float]")
        loc = [str(x) for x in err["loc"]]
        union = any(x in branches for x in loc)
        # unions report each branch; keep the path of the field itself
        loc = [x for x in loc if x not in branches and not x.startswith("function-")]
        where = ".".join(loc) or "(top level)"
        val = err.get("input")
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field (a typo must not silently fall back to a default)"
        elif union and err["type"] in ("dict_type", "model_type", "model_attributes_type"):
            msg = "expected a number or {value: NUMBER, source: TEXT}"
        raise ProfileError(f"profile file {path}: {where}: {msg} (got {val!r})") from None


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and "value" not in v:
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


#: Bounds of every number a profile may give: (smallest, whether the smallest is allowed,
#: largest). Far beyond any machine, close enough that no sum or power overflows and no
#: flow gets zero bandwidth: bandwidths are > 0 where a link needs one, latencies <= 10 s.
_MAX_BPS = 1e16  # 10 PB/s
_BOUNDS = {
    "link_bandwidth_Bps": (0.0, False, _MAX_BPS), "hbm_bandwidth_Bps": (0.0, False, _MAX_BPS),
    "nic_bandwidth_Bps": (0.0, False, _MAX_BPS), "bus_bandwidth_Bps": (0.0, False, _MAX_BPS),
    "bandwidth_Bps": (0.0, False, _MAX_BPS),
    "reduce_bandwidth_Bps": (0.0, True, _MAX_BPS), "ll_max_bandwidth_Bps": (0.0, True, _MAX_BPS),
    "link_latency_s": (0.0, True, 10.0), "launch_overhead_s": (0.0, True, 10.0),
    "nic_latency_s": (0.0, True, 10.0), "latency_s": (0.0, True, 10.0), "alpha_s": (0.0, True, 10.0),
    "ll_base_latency_s": (0.0, True, 10.0), "ll128_base_latency_s": (0.0, True, 10.0),
    "simple_base_latency_s": (0.0, True, 10.0), "ll_hop_latency_s": (0.0, True, 10.0),
    "ll128_hop_latency_s": (0.0, True, 10.0), "simple_hop_latency_s": (0.0, True, 10.0),
    "links_per_chip": (1, True, 1024), "hbm_capacity_bytes": (1, True, 2**50),
    "gpus_per_node": (1, True, 65_536), "nics_per_node": (0, True, 1024),
    "link_efficiency": (0.0, False, 1.0), "nic_efficiency": (0.0, False, 1.0),
    "nvls_efficiency": (0.0, True, 4.0), "sharp": (0, True, 1), "max_net_rings": (0, True, 1024),
    "ramp_half_bytes": (0.0, True, 2.0**50), "ramp_ranks_exponent": (0.0, True, 4.0),
    "reduce_input_bandwidth_Bps": (0.0, True, _MAX_BPS), "a2a_pair_efficiency": (0.0, True, 1.0),
    "nvls_tree_busbw_2node_Bps": (0.0, True, _MAX_BPS), "nvls_tree_busbw_Bps": (0.0, True, _MAX_BPS),
    "a2a_latency_s": (0.0, True, 10.0),
    "mnnvl": (0, True, 1), "ll128": (0, True, 1), "tree_simple_hop_latency_s": (0.0, True, 10.0),
    "nvls_latency_s": (0.0, True, 10.0),
}


def _bounded(where: str, x):
    name = where.rsplit(".", 1)[-1]
    if name not in _BOUNDS:
        return x
    lo, lo_ok, hi = _BOUNDS[name]
    if x < lo or (x == lo and not lo_ok) or x > hi:
        low = f">= {lo:g}" if lo_ok else f"> {lo:g}"
        raise ProfileError(f"{where}: {x!r} is out of range; it must be {low} and <= {hi:g}")
    return x


def _num(where: str, v, typ=float):
    """A number from ``v`` or ``{value, source}``; returns (number, source or None)."""
    src = None
    if isinstance(v, dict):
        if "value" not in v:
            raise ProfileError(f"{where}: expected a number or {{value: NUMBER, source: TEXT}}, got {v!r}")
        src = v.get("source")
        v = v["value"]
    if isinstance(v, bool):
        raise ProfileError(f"{where}: expected a number, got {v!r}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ProfileError(f"{where}: expected a number, got {v!r}") from None
    if not math.isfinite(x) or x < 0:
        raise ProfileError(f"{where}: must be a finite number >= 0, got {v!r}")
    if typ is int:
        if x != int(x):
            raise ProfileError(f"{where}: must be an integer, got {v!r}")
        x = int(x)
    return _bounded(where, x), (str(src) if src else None)


def _from_raw(raw: dict, path: Path, size_text: str | None) -> HardwareProfile:
    where = f"profile file {path}"
    name = str(raw.get("name") or path.stem)
    topo = raw.get("topology") or {}
    if not isinstance(topo, dict):
        raise ProfileError(f"{where}: 'topology' must be a mapping")
    kind = topo.get("kind")
    if kind not in TOPOLOGY_KINDS:
        raise ProfileError(f"{where}: topology.kind must be one of {list(TOPOLOGY_KINDS)}, got {kind!r}")
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        raise ProfileError(f"{where}: 'params' must be a mapping")
    unknown = set(params) - set(_PARAMS) - set(_OPTIONAL)
    if unknown:
        raise ProfileError(f"{where}: unknown params {sorted(unknown)}; known: {sorted(_PARAMS) + sorted(_OPTIONAL)}")
    vals, sources = {}, {}
    for p, (kinds, typ) in _PARAMS.items():
        if p not in params:
            if kind in kinds:
                raise ProfileError(f"{where}: params.{p} is required for a {kind} machine")
            continue
        vals[p], s = _num(f"{where}: params.{p}", params[p], typ)
        if s:
            sources[p] = s
    for p, (typ, default) in _OPTIONAL.items():
        if p in params:
            vals[p], src = _num(f"{where}: params.{p}", params[p], typ)
            if src:
                sources[p] = src
        else:
            vals[p] = default
    if isinstance(topo.get("source"), str):
        sources["topology"] = topo["source"]

    overrides = []
    coll = raw.get("collectives") or {}
    if not isinstance(coll, dict):
        raise ProfileError(f"{where}: 'collectives' must be a mapping of kind -> overrides")
    algorithms = dict(raw.get("algorithms") or {})
    for k, ov in coll.items():
        if k not in OVERRIDE_KINDS:
            raise ProfileError(f"{where}: collectives.{k}: unknown kind; expected one of {list(OVERRIDE_KINDS)}")
        if not isinstance(ov, dict):
            raise ProfileError(f"{where}: collectives.{k} must be a mapping")
        kp = {}
        for f in ("alpha_s", "bandwidth_Bps", "latency_s"):
            if f in ov:
                kp[f], s = _num(f"{where}: collectives.{k}.{f}", ov[f])
                if s:
                    sources[f"collectives.{k}.{f}"] = s
        bad = set(ov) - {"alpha_s", "bandwidth_Bps", "latency_s", "algorithm"}
        if bad:
            raise ProfileError(f"{where}: collectives.{k}: unknown fields {sorted(bad)}; "
                               "use alpha_s, bandwidth_Bps, latency_s, algorithm")
        if kp.get("bandwidth_Bps") == 0:
            raise ProfileError(f"{where}: collectives.{k}.bandwidth_Bps must be > 0")
        if "algorithm" in ov:
            algorithms[k] = ov["algorithm"]
        overrides.append((k, KindParams(**kp)))
    for k, a in algorithms.items():
        if k not in ALGORITHMS or a not in ALGORITHMS[k]:
            raise ProfileError(f"{where}: algorithm {a!r} for {k!r} is not known; choose from "
                               f"{ {kk: list(v) for kk, v in ALGORITHMS.items()} }")

    dim_names = tuple(str(n) for n in topo.get("dim_names") or ())
    default_size = str(topo.get("default_size") or "")
    max_size = str(topo.get("max_size") or "")
    text = size_text if size_text else default_size
    if not text:
        raise ProfileError(f"{where}: no size given and no topology.default_size; write {name}:SIZE")
    dims = _parse_size(name, kind, text, dim_names, vals, max_size)
    if kind == "switched":
        dim_names = ("node", "gpu")
    elif kind == "cpu-host":
        dim_names = ("cpu",)
    elif len(dim_names) != len(dims):
        dim_names = tuple("XYZWVU"[i] for i in range(len(dims)))
    wrap = ()
    if kind == "torus":
        policy = topo.get("wraparound", "always")
        if policy not in WRAPAROUND_POLICIES:
            raise ProfileError(f"{where}: topology.wraparound must be one of {list(WRAPAROUND_POLICIES)}")
        full = _parse_dims(max_size) if max_size else ()
        if policy == "cubes":
            # Google Cloud TPU v4/v5p: a slice made of whole 4x4x4 cubes is a full 3-D torus;
            # smaller slices have no wraparound links at all.
            whole = all(d % 4 == 0 for d in dims) and math.prod(dims) >= 64
            wrap = tuple(whole and d > 1 for d in dims)
        elif policy == "v4_torus_shapes":
            # Google Cloud TPU v4: a 3-D torus only for AxBxC with A=B=C, 2A=B=C or 2A=2B=C,
            # every dimension a multiple of 4; any other slice is a mesh.
            a, b, c = sorted(dims) if len(dims) == 3 else (0, 0, 0)
            ok = (len(dims) == 3 and all(d % 4 == 0 for d in dims)
                  and (a == b == c or 2 * a == b == c or 2 * a == 2 * b == c))
            wrap = tuple(ok for _ in dims)
        else:
            wrap = tuple(_wraps(policy, d, full) for d in dims)
    return HardwareProfile(
        name=name, kind=kind, dims=dims, dim_names=dim_names,
        link_bandwidth_Bps=vals["link_bandwidth_Bps"], link_latency_s=vals["link_latency_s"],
        links_per_chip=vals["links_per_chip"], launch_overhead_s=vals["launch_overhead_s"],
        hbm_bandwidth_Bps=vals["hbm_bandwidth_Bps"], hbm_capacity_bytes=vals["hbm_capacity_bytes"],
        wraparound=wrap, nic_bandwidth_Bps=vals.get("nic_bandwidth_Bps", 0.0),
        nic_latency_s=vals.get("nic_latency_s", 0.0), bus_bandwidth_Bps=vals.get("bus_bandwidth_Bps", 0.0),
        **{p: vals[p] for p in _OPTIONAL},
        overrides=tuple(sorted(overrides)), algorithms=tuple(sorted(algorithms.items())),
        description=str(raw.get("description", "")), sources=tuple(sorted(sources.items())),
        origin=str(path),
    )


def _wraps(policy: str, d: int, full: tuple) -> bool:
    if d < 2:
        return False
    if policy == "always":
        return True
    if policy == "never":
        return False
    if policy == "multiple_of_4":
        return d % 4 == 0
    return bool(full) and d == max(full)  # "full": only a full-length axis closes its ring


def _parse_dims(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("x"))


def _parse_size(name, kind, text, dim_names, vals, max_size) -> tuple[int, ...]:
    text = str(text).strip()
    if not _SIZE_RE.match(text):
        raise ProfileError(f"hardware {name}:{text}: size must look like '4x4x4', '2x8' or '8'")
    from synth.limits import check_digits

    for part in text.split("x"):
        check_digits(part, f"hardware {name}: size")
    dims = _parse_dims(text)
    if any(d < 1 for d in dims):
        raise ProfileError(f"hardware {name}:{text}: every size must be >= 1")
    if kind == "torus":
        nd = len(dim_names) or len(dims)
        if len(dims) > nd:
            raise ProfileError(f"hardware {name}:{text}: {name} is a {nd}-D torus; give at most {nd} "
                               f"dimensions, e.g. {'x'.join(['4'] * nd)}")
        dims = dims + (1,) * (nd - len(dims))
        if max_size:
            mx = _parse_dims(max_size)
            if math.prod(dims) > math.prod(mx) or max(dims) > max(mx):
                raise ProfileError(f"hardware {name}:{text}: larger than the largest {name} slice "
                                   f"({max_size})")
        return dims
    if kind == "switched":
        g = vals["gpus_per_node"]
        if len(dims) == 1:
            return (dims[0], g)
        if len(dims) == 2:
            if dims[1] > g:
                raise ProfileError(f"hardware {name}:{text}: a {name} node has {g} GPUs, not {dims[1]}")
            return dims
        raise ProfileError(f"hardware {name}:{text}: size is NODES or NODESxGPUS, e.g. 2 or 2x8")
    if len(dims) != 1:
        raise ProfileError(f"hardware {name}:{text}: a cpu-host machine is sized by its device count, e.g. 8")
    return dims


def resize(profile: HardwareProfile, size: str) -> HardwareProfile:
    """The same profile at another size (re-read from its file)."""
    if profile.origin and Path(profile.origin).is_file():
        return _from_raw(_read_raw(Path(profile.origin), set()), Path(profile.origin), size)
    raise ProfileError(f"resize: profile {profile.name!r} was not loaded from a file")
