"""The simulator's result value."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


@dataclass(frozen=True, eq=False)
class SimResult:
    """What :func:`simulator.simulate` returns. Units: seconds and bytes.

    * ``time_s`` -- end of the last op; ``lower_bound_s``, ``lower_bound_kind`` (which term
      binds: ``injection``, ``nic_cut``, ``node_cut``, ``bisection_<dim>``, ``lp``, or with a
      ``schedule:`` prefix when only the schedule is known) and ``lower_bound_terms`` (every
      term, seconds); ``analytic_s`` -- the analytic estimate of the same schedule;
    * ``engine`` -- ``"flow"`` (flow-level max-min model) or ``"packet"`` (per-transfer);
    * ``peak_bytes`` -- per-device peak (array), ``peak_bytes_max_device``;
    * ``link_bytes`` -- ``{(u, v): bytes}`` for every link that carried data;
      ``link_bytes_max``; ``link_util`` -- busy time / total time;
    * ``ops`` -- one dict per op: index, kind, label, algorithm (e.g. ``ring x8 rails/Simple``,
      ``nvls/Simple``, ``multi_axis(X,Y)``, ``direct``; ``None`` for local ops), protocol, engine,
      flows, start_s, end_s, duration_s, analytic_s, units/components/simulated;
    * ``memory_times_s`` / ``memory_bytes`` -- bytes held by each device after each
      allocation/free (``memory_bytes[i, d]`` from ``memory_times_s[i]`` on);
    * :meth:`trace_rows` / :meth:`trace_df` -- one row per transfer, except for the ops in
      :attr:`aggregate_ops` (all-to-alls costed in aggregate: no per-transfer rows).
    """

    machine: object
    schedule: object
    placement: object
    time_s: float
    lower_bound_s: float
    lower_bound_kind: str
    analytic_s: float
    peak_bytes: np.ndarray
    link_bytes_array: np.ndarray
    link_busy_array: np.ndarray
    ops: list
    memory_times_s: np.ndarray
    memory_bytes: np.ndarray
    warnings: list = field(default_factory=list)
    events: int = 0
    wall_s: float = 0.0
    _trace: list = field(default_factory=list, repr=False)
    engine: str = "flow"
    lower_bound_terms: dict = field(default_factory=dict)
    _device_of: dict = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return (f"SimResult(machine={self.machine.spec!r}, time_s={self.time_s:.6g}, "
                f"lower_bound_s={self.lower_bound_s:.6g}, peak_bytes_max_device={self.peak_bytes_max_device}, "
                f"ops={len(self.ops)})")

    # -- scalar summaries ------------------------------------------------------------
    @property
    def peak_bytes_max_device(self) -> int:
        return int(self.peak_bytes.max()) if len(self.peak_bytes) else 0

    @property
    def link_bytes_max(self) -> float:
        return float(self.link_bytes_array.max()) if len(self.link_bytes_array) else 0.0

    @property
    def ratio_to_bound(self) -> float | None:
        return self.time_s / self.lower_bound_s if self.lower_bound_s > 0 else None

    @cached_property
    def link_bytes(self) -> dict:
        links = self.machine.topology.links
        return {links[i]: float(self.link_bytes_array[i]) for i in np.nonzero(self.link_bytes_array)[0]}

    @cached_property
    def link_util(self) -> dict:
        if self.time_s <= 0:
            return {}
        links = self.machine.topology.links
        return {links[i]: float(self.link_busy_array[i] / self.time_s)
                for i in np.nonzero(self.link_busy_array)[0]}

    @property
    def num_devices(self) -> int:
        return len(self.peak_bytes)

    @property
    def aggregate_ops(self) -> list[dict]:
        """The ops costed in aggregate (``engine == "aggregate"``: an all-to-all too large to
        route flow by flow, its per-link loads counted exactly, its time the busiest link's).
        They have a row in ``ops`` but no transfers in :meth:`trace_rows`; e.g.
        ``[{"op": 0, "kind": "all_to_all", "flows": 3547136}]``."""
        return [{"op": int(o["index"]), "kind": o["kind"], "flows": int(o.get("flows") or 0)}
                for o in self.ops if o.get("engine") == "aggregate"]

    # -- tables ------------------------------------------------------------------------
    def trace_rows(self):
        """Yield one dict per transfer: op, kind, unit, step, direction, src, dst (mesh devices;
        -1 for a switch end of an in-network reduction), src_chip, dst_chip, bytes, hops,
        start_s, end_s. Packet engine: one row per ring step / flow (coarsened units reuse their
        representative's times). Flow engine: one row per flow (``step`` = phase; a flow carries
        all the steps of its ring between two neighbours, ``bytes`` summed over merged rings).
        An op in :attr:`aggregate_ops` yields no rows (its flows are not replayed one by one)."""
        chips = self.placement.chips
        topo = self.machine.topology
        dev = self._device_of or {c: d for d, c in enumerate(chips)}
        for entry in self._trace:
            if entry[0] == "flow":
                _tag, k, t0, lat, rows = entry
                kind = self.ops[k]["kind"]
                for pi, fi, route, b, s, e in rows:
                    a = topo.links[route[0]][0]
                    z = topo.links[route[-1]][1]
                    sd, dd = dev.get(a, -1), dev.get(z, -1)
                    yield {"op": k, "kind": kind, "unit": f"{pi}.{fi}", "step": pi, "direction": 0,
                           "src": int(sd if sd >= 0 else dd), "dst": int(dd),
                           "src_chip": int(a) if isinstance(a, (int, np.integer)) else -1,
                           "dst_chip": int(z) if isinstance(z, (int, np.integer)) else -1,
                           "bytes": float(b), "hops": len(route), "start_s": t0 + s, "end_s": t0 + e + lat,
                           "links": tuple(route)}
                continue
            _tag, k, t0, classes, rows = entry
            kind = self.ops[k]["kind"]
            by_cls: dict = {}
            for r in rows:
                by_cls.setdefault(r[0], []).append(r)
            for members_cls_idx, members in enumerate(classes):
                rep_rows = by_cls.get(members_cls_idx, ())
                for gi, comp in enumerate(members):
                    for _cls, ui, key, step, direction, s, e, b in rep_rows:
                        u = comp[ui]
                        if u.algo == "ring":
                            d, i = key
                            n = len(u.devices)
                            src, dst = u.devices[i], u.devices[(i + d) % n]
                            route = (u.routes_fwd if d == 1 else u.routes_bwd)[i]
                        else:
                            src, dst, _b, route = u.flows[key]
                        yield {"op": k, "kind": kind, "unit": f"{members_cls_idx}.{gi}.{ui}", "step": step,
                               "direction": direction, "src": int(src), "dst": int(dst),
                               "src_chip": int(chips[src]), "dst_chip": int(chips[dst]),
                               "bytes": float(b), "hops": len(route), "start_s": t0 + s, "end_s": t0 + e,
                               "links": tuple(route)}

    def trace_df(self):
        import pandas as pd

        cols = ["op", "kind", "unit", "step", "direction", "src", "dst", "src_chip", "dst_chip", "bytes",
                "hops", "start_s", "end_s"]
        df = pd.DataFrame([{c: r[c] for c in cols} for r in self.trace_rows()], columns=cols)
        return df.sort_values(["op", "start_s", "src", "dst"], kind="stable").reset_index(drop=True)

    def ops_df(self):
        import pandas as pd

        return pd.DataFrame(self.ops)

    def memory_df(self, devices=None):
        """Long table: time_s, device, bytes (a step function per device)."""
        import pandas as pd

        devs = range(self.num_devices) if devices is None else devices
        rows = [{"time_s": float(t), "device": int(d), "bytes": int(self.memory_bytes[i, d])}
                for i, t in enumerate(self.memory_times_s) for d in devs]
        return pd.DataFrame(rows, columns=["time_s", "device", "bytes"])

    def link_df(self):
        import pandas as pd

        links = self.machine.topology.links
        g = self.machine.topology.graph
        rows = []
        for i in np.nonzero(self.link_bytes_array)[0]:
            u, v = links[i]
            rows.append({"src": str(u), "dst": str(v), "kind": g.edges[u, v].get("kind", ""),
                         "bytes": float(self.link_bytes_array[i]), "busy_s": float(self.link_busy_array[i]),
                         "util": float(self.link_busy_array[i] / self.time_s) if self.time_s > 0 else 0.0})
        return pd.DataFrame(rows, columns=["src", "dst", "kind", "bytes", "busy_s", "util"])

    # -- forms -----------------------------------------------------------------------
    def to_dict(self, full: bool = False) -> dict:
        """JSON-ready summary. ``full=True`` adds every link's bytes and the trace."""
        lb = self.link_bytes_array
        used = lb > 0
        topo = self.machine.topology
        order = np.argsort(-lb, kind="stable")[:10]
        d = {
            "machine": self.machine.spec,
            "schedule": getattr(self.schedule, "name", ""),
            "num_devices": self.num_devices,
            "placement": self.placement.text,
            "time_s": self.time_s,
            "lower_bound_s": self.lower_bound_s,
            "lower_bound_kind": self.lower_bound_kind,
            "lower_bound_terms": {k: float(v) for k, v in self.lower_bound_terms.items()},
            "engine": self.engine,
            "ratio_to_bound": self.ratio_to_bound,
            "analytic_s": self.analytic_s,
            "peak_bytes_max_device": self.peak_bytes_max_device,
            "peak_bytes": [int(x) for x in self.peak_bytes],
            "link_bytes_max": self.link_bytes_max,
            "links_used": int(used.sum()),
            "link_bytes_total": float(lb.sum()),
            "link_util_max": float(self.link_busy_array.max() / self.time_s) if self.time_s > 0 and len(lb) else 0.0,
            "busiest_links": [{"link": topo.link_name(int(i)), "bytes": float(lb[i])} for i in order if lb[i] > 0],
            "ops": [{k: (v if not isinstance(v, (np.floating, np.integer)) else v.item()) for k, v in o.items()}
                    for o in self.ops],
            "warnings": list(self.warnings),
            "events": int(self.events),
            "wall_s": self.wall_s,
        }
        if full:
            d["link_bytes"] = [{"link": topo.link_name(int(i)), "bytes": float(lb[i]),
                                "util": float(self.link_busy_array[i] / self.time_s) if self.time_s > 0 else 0.0}
                               for i in np.nonzero(used)[0]]
            d["trace"] = [{k: v for k, v in r.items() if k != "links"} for r in self.trace_rows()]
        return d

    def summary(self) -> str:
        from simulator.format import format_result

        return format_result(self)
