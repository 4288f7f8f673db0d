"""Chrome Trace Event JSON of a simulation (opens in Perfetto / chrome://tracing),
and nccl-tests style bandwidths per op.

``chrome_trace(res)`` returns ``{"traceEvents": [...], "displayTimeUnit": "ns",
"otherData": {...}}``. Timestamps are microseconds (the format's unit). Tracks:

* process 0 ``schedule``: one track with an event per op (name ``op K: KIND``; args:
  algorithm, bytes per device, algbw/busbw);
* process 1 ``devices``: one track per mesh device (``device D (chip C)``); each
  transfer the device *sends* is one complete event named after its op, with the
  bytes, the algorithm, the receiving device and the hop count as args;
* process 2 ``links``: one track per link that carried data (``U->V``); one event per
  op that used it, from the first to the last transfer of that op crossing it, with
  the bytes the op put on it. Routes are ``models.Topology.route`` of the two chips.

When a simulation has more transfers than ``max_events``, the device tracks carry one
event per device and op instead (first start to last end, bytes summed, ``transfers``
counted) and ``otherData.device_detail`` says so; nothing is dropped silently. An op costed in
aggregate (``res.aggregate_ops``: a large all-to-all whose flows are not replayed one by one)
has its event on the schedule track and none on the device and link tracks;
``otherData.aggregate_ops`` lists such ops and ``otherData.note`` says so in words.

Bandwidths (:func:`op_bandwidths`) follow nccl-tests' PERFORMANCE.md: ``algbw = S / t``
with ``t`` the op's simulated duration and ``S`` the per-rank size nccl-tests reports:
the output buffer for all-gather, the input buffer for reduce-scatter, all-reduce and
all-to-all, the bytes sent for a permute (send/recv). ``busbw = algbw * f`` with
``f = 2(n-1)/n`` for all-reduce, ``(n-1)/n`` for all-gather, reduce-scatter and
all-to-all, and 1 for a permute, ``n`` the group size.
"""

from __future__ import annotations

import json

#: Device-track events above which transfers are aggregated per device and op.
MAX_EVENTS = 200_000

US = 1e6

_BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "permute": lambda n: 1.0,
}


def _nccl_size_bytes(op) -> float:
    if op.kind == "all_gather":
        return float(op.out_bytes)
    if op.kind == "permute":
        return float(op.send_bytes)
    return float(op.in_bytes)


def _group_size(op) -> int:
    if op.kind == "permute":
        return 2
    return max((len(g) for g in op.groups), default=1)


def op_bandwidths(res) -> list[dict]:
    """Per op of ``res`` (a ``SimResult``): ``nccl_bytes`` (S), ``group_size`` (n),
    ``algbw_Bps``, ``busbw_Bps`` (``None`` for local ops and zero-time ops),
    ``link_peak_Bps`` (the line rate of one physical link -- one NVLink, one ICI link -- in one
    direction: the profile's ``link_bandwidth_Bps``, 25 GB/s on H100, not the 450 GB/s of its 18
    NVLinks to the switch together) and ``bus_peak_Bps`` (the largest injection bandwidth of a
    participating chip: all its links, one direction)."""
    machine = res.machine
    topo = machine.topology
    chips = res.placement.chips
    sched_ops = res.schedule.ops
    link_peak = float(machine.link_bandwidth_Bps) if len(topo.bandwidth) else None
    inj_cache: dict = {}

    def inj(chip):
        if chip not in inj_cache:
            inj_cache[chip] = topo.out_bandwidth(chip)
        return inj_cache[chip]

    out = []
    for o, op in zip(res.ops, sched_ops):
        row = {"index": o["index"], "kind": op.kind, "nccl_bytes": None, "group_size": None,
               "algbw_Bps": None, "busbw_Bps": None, "link_peak_Bps": None, "bus_peak_Bps": None}
        if not op.is_local:
            n = _group_size(op)
            s = _nccl_size_bytes(op)
            t = float(o["duration_s"])
            members = op.participants()
            bus = max((inj(int(chips[d])) for d in list(members)[:64]), default=None)
            row.update(nccl_bytes=s, group_size=n, link_peak_Bps=link_peak, bus_peak_Bps=bus)
            if t > 0 and s > 0:
                algbw = s / t
                row.update(algbw_Bps=algbw, busbw_Bps=algbw * _BUS_FACTOR.get(op.kind, lambda n: 1.0)(n))
        out.append(row)
    return out


def _op_name(o) -> str:
    return f"op {o['index']}: {o['kind']}"


def aggregate_note(res) -> str:
    """One sentence naming the ops costed in aggregate (no per-transfer rows), or ``""``.

    Example: ``"op 0 (all_to_all, 3,547,136 flows) is costed in aggregate (busiest link's
    bytes / capacity): it has no per-transfer rows"``."""
    agg = res.aggregate_ops
    if not agg:
        return ""
    what = ", ".join(f"op {a['op']} ({a['kind']}, {a['flows']:,} flows)" for a in agg)
    verb = "is" if len(agg) == 1 else "are"
    return (f"{what} {verb} costed in aggregate (busiest link's bytes / capacity): "
            f"{'it has' if len(agg) == 1 else 'they have'} no per-transfer rows")


def chrome_trace(res, max_events: int = MAX_EVENTS) -> dict:
    """The Chrome Trace Event document of a simulation (see the module docstring)."""
    topo = res.machine.topology
    chips = res.placement.chips
    ops = res.ops
    bws = op_bandwidths(res)
    ev: list[dict] = []
    meta = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "schedule"}},
            {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "ops"}},
            {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "devices"}},
            {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "links"}}]
    for o, bw in zip(ops, bws):
        ev.append({"ph": "X", "pid": 0, "tid": 0, "name": _op_name(o), "cat": o["kind"],
                   "ts": o["start_s"] * US, "dur": o["duration_s"] * US,
                   "args": {"op": o["index"], "kind": o["kind"], "label": o.get("label") or "",
                            "algorithm": o.get("algorithm") or "local",
                            "send_bytes": o.get("send_bytes"), "recv_bytes": o.get("recv_bytes"),
                            "algbw_GBps": None if bw["algbw_Bps"] is None else bw["algbw_Bps"] / 1e9,
                            "busbw_GBps": None if bw["busbw_Bps"] is None else bw["busbw_Bps"] / 1e9}})

    rows = res.trace_rows()
    per_transfer: list[dict] = []
    agg: dict = {}      # (op, device) -> [start, end, bytes, n]
    links: dict = {}    # (op, link id) -> [start, end, bytes]
    n_rows = 0
    devices = set()
    for r in rows:
        n_rows += 1
        k, src = r["op"], r["src"]
        devices.add(src)
        s, e, b = r["start_s"], r["end_s"], r["bytes"]
        if per_transfer is not None:
            if len(per_transfer) < max_events:
                per_transfer.append(r)
            else:
                per_transfer = None
        a = agg.get((k, src))
        if a is None:
            agg[(k, src)] = [s, e, b, 1]
        else:
            a[0], a[1], a[2], a[3] = min(a[0], s), max(a[1], e), a[2] + b, a[3] + 1
        route = r.get("links")
        if route is None:
            route = topo.route(int(r["src_chip"]), int(r["dst_chip"]))
        for lk in route:
            li = links.get((k, lk))
            if li is None:
                links[(k, lk)] = [s, e, b]
            else:
                li[0], li[1], li[2] = min(li[0], s), max(li[1], e), li[2] + b
    algo = {o["index"]: (o.get("algorithm") or "local") for o in ops}
    kind = {o["index"]: o["kind"] for o in ops}
    for d in sorted(devices):
        meta.append({"ph": "M", "pid": 1, "tid": int(d), "name": "thread_name",
                     "args": {"name": f"device {d} (chip {int(chips[d])})"}})
        meta.append({"ph": "M", "pid": 1, "tid": int(d), "name": "thread_sort_index",
                     "args": {"sort_index": int(d)}})
    if per_transfer is not None:
        detail = "per transfer"
        for r in per_transfer:
            k = r["op"]
            ev.append({"ph": "X", "pid": 1, "tid": int(r["src"]), "name": f"op {k}: {kind[k]}",
                       "cat": kind[k], "ts": r["start_s"] * US, "dur": (r["end_s"] - r["start_s"]) * US,
                       "args": {"op": k, "algorithm": algo[k], "bytes": r["bytes"], "dst": int(r["dst"]),
                                "hops": int(r["hops"]), "step": r["step"]}})
    else:
        detail = (f"per device and op: {n_rows} transfers are more than {max_events}, so each event "
                  "spans a device's first to last transfer of the op, with their bytes summed")
        for (k, d), (s, e, b, n) in sorted(agg.items()):
            ev.append({"ph": "X", "pid": 1, "tid": int(d), "name": f"op {k}: {kind[k]}", "cat": kind[k],
                       "ts": s * US, "dur": (e - s) * US,
                       "args": {"op": k, "algorithm": algo[k], "bytes": b, "transfers": n}})
    used = sorted({lk for (_k, lk) in links})
    for lk in used:
        meta.append({"ph": "M", "pid": 2, "tid": int(lk), "name": "thread_name",
                     "args": {"name": topo.link_name(int(lk))}})
    for (k, lk), (s, e, b) in sorted(links.items()):
        ev.append({"ph": "X", "pid": 2, "tid": int(lk), "name": f"op {k}: {kind[k]}", "cat": kind[k],
                   "ts": s * US, "dur": (e - s) * US,
                   "args": {"op": k, "algorithm": algo[k], "bytes": b, "link": topo.link_name(int(lk))}})
    return {
        "traceEvents": meta + ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "machine": res.machine.spec, "placement": res.placement.text,
            "time_s": res.time_s, "lower_bound_s": res.lower_bound_s,
            "transfers": n_rows, "device_detail": detail, "busy_links": len(used),
            "aggregate_ops": res.aggregate_ops, "note": aggregate_note(res),
            "source": "python -m simulator (SimPy replay); times in microseconds",
        },
    }


def chrome_trace_json(res, max_events: int = MAX_EVENTS) -> str:
    return json.dumps(chrome_trace(res, max_events), separators=(",", ":"))


def write_chrome_trace(res, path, max_events: int = MAX_EVENTS, what: str = "--chrome-trace") -> None:
    """Write :func:`chrome_trace` to ``path`` atomically (``synth.fileio``)."""
    from synth.fileio import atomic_write_text

    atomic_write_text(path, chrome_trace_json(res, max_events), what=what)
