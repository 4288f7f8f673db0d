"""Vega-Lite charts (plain spec dicts, drawn with ``st.vega_lite_chart``).

The first picture a visitor sees, the Plan page's memory chart, is drawn with
Vega-Lite rather than plotly: Streamlit's Vega-Lite component is a fraction of the
size of its plotly one (4.7 MB of JavaScript), so the first load does not wait for the
browser to fetch and compile plotly. The spec is plain data (no altair, nothing
imported), built from the plan's own rows; ``tests/test_app_explorer.py`` validates it
against altair's Vega-Lite schema and reads every value back.

Every layer carries its data inline (``{"data": {"values": [...]}}``), so the whole
chart is one JSON document: what the page draws is what the spec says.
"""

from __future__ import annotations

from ui.fmt import byte_unit, fmt_bytes, fmt_seconds, time_unit

#: Colours shared with the plotly figures (Tableau 10, as Vega's default scheme).
SHARD_COLOR, LIVE_COLOR, BOUND_COLOR, EASY_COLOR, HBM_COLOR = (
    "#4C78A8", "#F58518", "#54A24B", "#E45756", "#B22222")
SHARD_SERIES = "shard per device (type after step)"
LIVE_SERIES = "live during step (input + output)"
#: Title of the memory chart (the browser tests look for it).
MEMORY_TITLE = "Per-device memory along the plan"
#: Its height in pixels, title and legend included.
MEMORY_HEIGHT_PX = 440


def _rule(y: float, color: str, dash: list[int] | None, label: str, right: bool = False) -> list[dict]:
    """A horizontal line at ``y`` (axis units) and its label above it, left- or right-aligned."""
    one = {"values": [{}]}  # one empty row: the layer draws from its datum encodings alone
    mark = {"type": "rule", "color": color, "strokeWidth": 1.5}
    if dash:
        mark["strokeDash"] = dash
    return [
        {"data": one, "mark": mark, "encoding": {"y": {"datum": y}}},
        {"data": one,
         "mark": {"type": "text", "color": color, "align": "right" if right else "left",
                  "baseline": "bottom", "dx": -4 if right else 4, "dy": -3, "fontSize": 11},
         "encoding": {"x": {"value": "width" if right else 0}, "y": {"datum": y},
                      "text": {"value": label}}},
    ]


def plan_memory_spec(plan, easy_peak_bytes: int | None = None, capacity_bytes: int | None = None) -> dict:
    """The Plan page's memory chart: per-device shard after each step (bars) against
    ``max(src, dst)`` (dashed), the input + output live during each step (line) against
    its own bound ``2 x max(src, dst)`` (dotted), the easy planner's largest shard and the
    device's HBM capacity when given and in range. The byte unit fits the largest value.

    Worked example (default scenario, ``normal`` plan, 8 MiB shards): bars at 8, 8, 8, 8
    MiB, the line at 8 (the source alone), then 16 MiB per step (input + output), the
    shard bound at 8 MiB and the live bound at 16 MiB; the easy plan's 512 MiB is off
    scale and named in the top-right corner.
    """
    rows = plan.rows()
    live_b = [rows[0]["shard_bytes"]] + [a["shard_bytes"] + b["shard_bytes"] for a, b in zip(rows[:-1], rows[1:])]
    top_b = max(max(live_b), plan.bound_bytes)
    div, unit = byte_unit(top_b)
    def row(i, r, series, b):
        return {"step": f"{r['step']}: {r['collective']}", "order": i, "series": series, "value": b / div,
                "bytes": fmt_bytes(b), "type": str(r["type"]), "local_shape": str(tuple(r["local_shape"]))}

    shard_rows = [row(i, r, SHARD_SERIES, r["shard_bytes"]) for i, r in enumerate(rows)]
    live_rows = [row(i, r, LIVE_SERIES, b) for i, (r, b) in enumerate(zip(rows, live_b))]
    top = top_b / div * 1.25
    layers: list[dict] = []
    bound = plan.bound_bytes / div
    layers += _rule(bound, BOUND_COLOR, [6, 4], f"shard bound max(src, dst) = {fmt_bytes(plan.bound_bytes)}", right=True)
    live_bound = 2 * plan.bound_bytes / div
    if live_bound <= top * 1.6:  # the live pair's own bound: two buffers within the shard bound
        top = max(top, live_bound * 1.1)
        layers += _rule(live_bound, LIVE_COLOR, [2, 3], f"live bound 2 x max(src, dst) = {fmt_bytes(2 * plan.bound_bytes)}",
                        right=True)
    notes = []
    if easy_peak_bytes is not None and easy_peak_bytes > plan.bound_bytes:
        easy = easy_peak_bytes / div
        if easy <= top * 1.6:
            top = max(top, easy * 1.1)
            layers += _rule(easy, EASY_COLOR, [2, 3], f"easy planner's largest shard = {fmt_bytes(easy_peak_bytes)}",
                            right=True)
        else:
            notes.append((EASY_COLOR, f"easy planner's largest shard: {fmt_bytes(easy_peak_bytes)} (off scale)"))
    if capacity_bytes:
        cap = capacity_bytes / div
        if cap <= top * 1.6:
            top = max(top, cap * 1.1)
            layers += _rule(cap, HBM_COLOR, None, f"HBM capacity {fmt_bytes(capacity_bytes)}", right=True)
    x = {"field": "step", "type": "ordinal", "sort": {"field": "order"}, "title": "step (collective)",
         "axis": {"labelAngle": 0 if len(rows) <= 6 else -30, "labelLimit": 180}}
    y = {"type": "quantitative", "title": f"memory per device ({unit})",
         "scale": {"domain": [0, top], "nice": False}}
    color = {"field": "series", "type": "nominal",
             "scale": {"domain": [SHARD_SERIES, LIVE_SERIES], "range": [SHARD_COLOR, LIVE_COLOR]},
             "legend": {"orient": "bottom", "title": None, "labelLimit": 320}}
    tip = [{"field": "step", "title": "step"}, {"field": "type", "title": "type after"},
           {"field": "local_shape", "title": "local shape"}]
    series = [
        {"data": {"values": shard_rows}, "mark": {"type": "bar", "width": {"band": 0.6}},
         "encoding": {"x": x, "y": dict(y, field="value"), "color": color,
                      "tooltip": tip + [{"field": "bytes", "title": "shard per device"}]}},
        {"data": {"values": live_rows}, "mark": {"type": "line", "point": True, "strokeWidth": 2},
         "encoding": {"x": x, "y": dict(y, field="value"), "color": color,
                      "tooltip": tip[:1] + [{"field": "bytes", "title": "live (input + output)"}]}},
    ]
    for color_, text in notes:
        series.append({"data": {"values": [{}]},
                       "mark": {"type": "text", "color": color_, "align": "right", "baseline": "top",
                                "dx": -4, "dy": 4, "fontSize": 11},
                       "encoding": {"x": {"value": "width"}, "y": {"value": 0}, "text": {"value": text}}})
    return {
        "title": {"text": MEMORY_TITLE,
                  "subtitle": "bars: shard after each step, against max(src, dst); "
                              "line: input + output live during the step, against 2 x max(src, dst)",
                  "anchor": "start"},
        "layer": series + layers,
        "config": {"legend": {"symbolType": "square"}},
        # SVG: crisp when zoomed or printed, and its text (title, labels) is the page's text
        "usermeta": {"embedOptions": {"renderer": "svg"}},
    }


# -- the Simulate page's timeline --------------------------------------------------------------
#: Tableau 10, one colour per op (shared with the plotly figures of ``ui.figures``).
PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#BAB0AC", "#EECA3B"]
#: The timeline's first row: one bar per op.
OPS_ROW = "ops"


def timeline_rows(res, max_transfers: int = 4000, max_rows: int = 64) -> dict:
    """What the timeline draws, as plain data (one pass over ``res.trace_rows()``).

    With at most ``max_transfers`` transfers and ``max_rows`` sending devices every transfer
    is a bar on its sender's row (``detailed``). Otherwise nothing is dropped: each bar spans
    the first to the last transfer of one op sent by one device, or by one group of
    ``group`` consecutive devices when there are more than ``max_rows``, and carries their
    bytes and count. Worked example: 8 devices, 16 transfers of op 0, ``max_rows=2``: group 4,
    rows ``dev 0-3`` and ``dev 4-7``, two bars of op 0 with count 8 each.

    Returns ``{"ops": [{"op", "kind", "algorithm", "label", "start_s", "end_s"}], "bars":
    [{"row", "op", "start_s", "end_s", "bytes", "count", "dst", "hops"}], "rows": [row labels,
    top first], "title", "note", "transfers", "detailed", "group", "aggregate_ops"}``
    (``dst`` and ``hops`` only on detailed bars).
    """
    from simulator.chrome_trace import aggregate_note

    ops = [{"op": o["index"], "kind": o["kind"], "algorithm": o.get("algorithm") or "-",
            "label": o.get("label") or "", "start_s": o["start_s"], "end_s": o["end_s"]} for o in res.ops]
    ndev = res.num_devices
    group = 1 if ndev <= max_rows else -(-ndev // max_rows)
    kept, n, agg, senders = [], 0, {}, set()
    for r in res.trace_rows():
        n += 1
        if n <= max_transfers:
            kept.append(r)
        senders.add(r["src"])
        key = (r["op"], r["src"] // group)
        a = agg.get(key)
        if a is None:
            agg[key] = [r["start_s"], r["end_s"], r["bytes"], 1]
        else:
            a[0], a[1], a[2], a[3] = min(a[0], r["start_s"]), max(a[1], r["end_s"]), a[2] + r["bytes"], a[3] + 1
    detailed = n <= max_transfers and len(senders) <= max_rows

    def lab(g):
        return f"dev {g}" if group == 1 else f"dev {g * group}-{min(ndev, (g + 1) * group) - 1}"

    if detailed:
        bars = [{"row": f"dev {r['src']}", "op": int(r["op"]), "start_s": r["start_s"], "end_s": r["end_s"],
                 "bytes": r["bytes"], "count": 1, "dst": r["dst"], "hops": r["hops"]}
                for r in sorted(kept, key=lambda r: (r["op"], r["src"], r["start_s"]))]
        rows = [f"dev {d}" for d in sorted(senders)]
        title = f"Timeline: ops and every transfer each device sends ({n} transfers)"
    else:
        bars = [{"row": lab(g), "op": int(k), "start_s": v[0], "end_s": v[1], "bytes": v[2], "count": v[3]}
                for (k, g), v in sorted(agg.items())]
        rows = [lab(g) for g in sorted({g for (_k, g) in agg})]
        if group == 1:
            title = (f"Timeline: all {n} transfers, one bar per op and sending device "
                     "(first to last transfer; bytes and count in the hover)")
        else:
            title = (f"Timeline: all {n} transfers, one bar per op and group of {group} consecutive "
                     "devices (first to last transfer; bytes and count in the hover)")
    return {"ops": ops, "bars": bars, "rows": rows, "title": title, "note": aggregate_note(res),
            "transfers": n, "detailed": detailed, "group": group,
            "aggregate_ops": [a["op"] for a in res.aggregate_ops]}


def timeline_spec(tl: dict) -> dict:
    """The Simulate page's timeline (Vega-Lite, so its first visit does not fetch plotly.js):
    the rows of :func:`timeline_rows` as horizontal bars, ``ops`` on top, coloured by op,
    time in the unit that fits the last op's end. Every bar is one datum of the spec's one
    data set; ``usermeta["timeline"]`` keeps ``transfers``, ``detailed``, ``group`` and
    ``aggregate_ops``."""
    from ui.fmt import fmt_seconds, time_unit

    span = max((o["end_s"] for o in tl["ops"]), default=0.0)
    div, unit = time_unit(span)
    names = {o["op"]: f"op {o['op']}: {o['kind']}" for o in tl["ops"]}
    values = []
    for o in tl["ops"]:
        values.append({"row": OPS_ROW, "series": names[o["op"]], "start": o["start_s"] / div, "end": o["end_s"] / div,
                       "what": f"op {o['op']} {o['kind']} {o['label']}".strip(), "algorithm": o["algorithm"],
                       "when": f"{fmt_seconds(o['start_s'])} + {fmt_seconds(o['end_s'] - o['start_s'])}",
                       "sent": "-"})
    for b in tl["bars"]:
        what = (f"{b['row']} -> dev {b['dst']}, {b['hops']} hops" if "dst" in b
                else f"op {b['op']}: {b['row']} send {b['count']} transfers")
        values.append({"row": b["row"], "series": names.get(b["op"], f"op {b['op']}"),
                       "start": b["start_s"] / div, "end": b["end_s"] / div, "what": what, "algorithm": "",
                       "when": f"{fmt_seconds(b['start_s'])} + {fmt_seconds(b['end_s'] - b['start_s'])}",
                       "sent": fmt_bytes(b["bytes"]), "count": b["count"]})
    order = [OPS_ROW] + tl["rows"]
    domain = [names[o["op"]] for o in tl["ops"]]
    title = {"text": tl["title"], "anchor": "start", "limit": 1100}
    if tl["note"]:  # e.g. a 4096-device all-to-all costed in aggregate: named under the title
        title["subtitle"] = tl["note"]
    height = min(1400, 24 + 16 * len(order))  # 16 px a row: every row label fits at 11 px
    return {
        "title": title,
        "data": {"values": values},
        "mark": {"type": "bar", "height": {"band": 0.8}},
        "height": height,
        "encoding": {
            "y": {"field": "row", "type": "nominal", "sort": order, "title": None,
                  "axis": {"labelLimit": 120, "labelOverlap": False}},  # at most 65 rows of 16 px: all fit
            "x": {"field": "start", "type": "quantitative", "title": f"time ({unit})",
                  "scale": {"domain": [0, span / div if span else 1], "nice": False}},
            "x2": {"field": "end"},
            "color": {"field": "series", "type": "nominal", "title": None,
                      "scale": {"domain": domain, "range": [PALETTE[o["op"] % len(PALETTE)] for o in tl["ops"]]},
                      "legend": {"orient": "top", "labelLimit": 260}},
            "opacity": {"condition": {"test": f"datum.row === '{OPS_ROW}'", "value": 1.0}, "value": 0.75},
            "tooltip": [{"field": "what", "title": "what"}, {"field": "when", "title": "start + duration"},
                        {"field": "sent", "title": "bytes"}, {"field": "algorithm", "title": "algorithm"}],
        },
        "usermeta": {"embedOptions": {"renderer": "canvas" if len(values) > 2000 else "svg"},
                     "timeline": {k: tl[k] for k in ("transfers", "detailed", "group", "aggregate_ops")}},
    }


# -- the Compare page's strategies chart -----------------------------------------------------
#: Title of the Compare chart (the browser tests look for it).
STRATEGIES_TITLE = "Strategies on the simulated machine"
BOUND_RULE_COLOR = "#1B7F3A"


def _log_values(lo: float, hi: float, div: float) -> list[float]:
    """1-2-5 tick values (in axis units) covering ``[lo, hi]`` seconds or bytes / ``div``."""
    import math

    lo, hi = lo / div, hi / div
    out = []
    for e in range(int(math.floor(math.log10(lo))) - 1, int(math.ceil(math.log10(hi))) + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** e
            if lo / 2.01 <= v <= hi * 2.01:
                out.append(v)
    return out or [lo]


def strategies_spec(names, times_s, peaks_bytes, bound_s: float) -> dict:
    """The Compare page's chart (Vega-Lite: the page fetches no plotly.js): two panels
    side by side, the simulated time of every strategy with the machine's lower bound drawn
    as a rule in front of the bars, and the peak memory per device. Both axes are
    logarithmic (when every value is positive) with 1-2-5 ticks, in the unit that fits the
    largest value.

    Worked example: ``ours`` 98 us and ``easy`` 2.1 ms against a 95 us bound: the time axis
    runs in us from 50 to 5000 with ticks 50, 100, 200, ..., 5000, the green rule at 95; the
    memory panel in MiB.
    """
    names = [str(n) for n in names]
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    tdiv, tunit = time_unit(max([*times_s, bound_s, 0.0]))
    bdiv, bunit = byte_unit(max([*peaks_bytes, 0]))
    tlog = bool(times_s) and all(t > 0 for t in times_s)
    blog = bool(peaks_bytes) and all(b > 0 for b in peaks_bytes)
    color = {"field": "strategy", "type": "nominal", "legend": None,
             "scale": {"domain": names, "range": colors}}
    x = {"field": "strategy", "type": "nominal", "sort": names, "title": None,
         "axis": {"labelAngle": -20, "labelLimit": 160}}

    def scale(log, vals):
        if not log:
            return {"zero": True}
        lo, hi = min(vals), max(vals)
        return {"type": "log", "domain": [lo / 1.6, hi * 1.6], "nice": False}

    def base(y):  # a bar on a log axis starts at the axis' low end (log 0 is not on the axis)
        dom = y["scale"].get("domain")
        return {"y2": {"datum": dom[0]}} if y["scale"].get("type") == "log" else {}

    tvals = [t / tdiv for t in times_s] + ([bound_s / tdiv] if bound_s > 0 else [])
    trows = [{"strategy": n, "value": t / tdiv, "text": fmt_seconds(t)} for n, t in zip(names, times_s)]
    time_y = {"field": "value", "type": "quantitative", "title": f"simulated time ({tunit})",
              "scale": scale(tlog, tvals)}
    if tlog:
        time_y["axis"] = {"values": _log_values(min(tvals) * tdiv, max(tvals) * tdiv, tdiv), "format": "~g"}
    time_layers = [{"data": {"values": trows}, "mark": {"type": "bar"},
                    "encoding": {"x": x, "y": time_y, **base(time_y), "color": color,
                                 "tooltip": [{"field": "strategy"}, {"field": "text", "title": "simulated time"}]}}]
    if bound_s > 0:  # drawn after the bars: in front of them
        label = f"lower bound {fmt_seconds(bound_s)}"
        time_layers += [
            {"data": {"values": [{"value": bound_s / tdiv, "label": label}]},
             "mark": {"type": "rule", "color": BOUND_RULE_COLOR, "strokeDash": [6, 4], "strokeWidth": 2.5},
             "encoding": {"y": {"field": "value", "type": "quantitative"},
                          "tooltip": [{"field": "label", "title": "machine"}]}},
            {"data": {"values": [{"value": bound_s / tdiv, "label": label}]},
             "mark": {"type": "text", "color": BOUND_RULE_COLOR, "align": "left", "baseline": "bottom",
                      "dx": 4, "dy": -3, "fontSize": 11},
             "encoding": {"x": {"value": 0}, "y": {"field": "value", "type": "quantitative"},
                          "text": {"field": "label"}}},
        ]
    brows = [{"strategy": n, "value": b / bdiv, "text": fmt_bytes(b)} for n, b in zip(names, peaks_bytes)]
    bvals = [b / bdiv for b in peaks_bytes]
    mem_y = {"field": "value", "type": "quantitative", "title": f"peak memory per device ({bunit})",
             "scale": scale(blog, bvals or [1])}
    if blog:
        mem_y["axis"] = {"values": _log_values(min(bvals) * bdiv, max(bvals) * bdiv, bdiv), "format": "~g"}
    return {
        "title": {"text": STRATEGIES_TITLE, "anchor": "start",
                  "subtitle": "log axes; the dashed green rule is the machine's lower bound of this redistribution"},
        "hconcat": [
            {"title": "simulated time", "width": 330, "height": 300, "layer": time_layers,
             "resolve": {"scale": {"y": "shared"}}},
            {"title": "peak memory per device", "width": 330, "height": 300,
             "layer": [{"data": {"values": brows}, "mark": {"type": "bar"},
                        "encoding": {"x": x, "y": mem_y, **base(mem_y), "color": color,
                                     "tooltip": [{"field": "strategy"},
                                                 {"field": "text", "title": "peak memory per device"}]}}]},
        ],
        "usermeta": {"embedOptions": {"renderer": "svg"}},
    }


# -- the Calibration page's scatters ----------------------------------------------------------
def measured_vs_predicted_spec(groups: dict, title: str, x_label: str, y_label: str) -> dict:
    """Log-log scatter (Vega-Lite) of measured against predicted seconds, one colour per
    group, with the ``predicted = measured`` diagonal dashed; both axes in the time unit
    that fits the smallest value, with 1-2-5 ticks. ``groups``: name -> (measured seconds,
    predicted seconds, hover texts).

    Worked example: one group with points (1 ms, 2 ms) and (10 ms, 9 ms): axes in ms from
    1/1.5 to 15, the diagonal from (0.67, 0.67) to (15, 15); the first point sits above it
    (the model over-predicts by 100 %).
    """
    pts = [(name, x, y, t) for name, (xs, ys, texts) in groups.items() for x, y, t in zip(xs, ys, texts)]
    pos = [v for _n, x, y, _t in pts for v in (x, y) if v and v > 0]
    lo, hi = (min(pos), max(pos)) if pos else (1e-6, 1e-3)
    div, unit = time_unit(lo)
    names = [n for n, (xs, _ys, _t) in groups.items() if xs]
    values = [{"group": n, "measured": x / div, "predicted": y / div, "what": str(t).replace("<br>", "; "),
               "measured_text": fmt_seconds(x), "predicted_text": fmt_seconds(y)}
              for n, x, y, t in pts if x and y and x > 0 and y > 0]
    dom = [lo / 1.5 / div, hi * 1.5 / div]
    ticks = _log_values(lo / 1.5, hi * 1.5, div)
    if len(ticks) > 12:
        ticks = [v for v in ticks if str(v)[0] == "1"]
    ax = {"values": ticks, "format": "~g"}
    x = {"field": "measured", "type": "quantitative", "title": f"{x_label} ({unit})",
         "scale": {"type": "log", "domain": dom, "nice": False}, "axis": ax}
    y = {"field": "predicted", "type": "quantitative", "title": f"{y_label} ({unit})",
         "scale": {"type": "log", "domain": dom, "nice": False}, "axis": ax}
    return {
        "title": {"text": title, "anchor": "start",
                  "subtitle": "log-log; on the dashed diagonal the prediction equals the measurement"},
        "width": 520, "height": 380,
        "layer": [
            {"data": {"values": [{"measured": dom[0], "predicted": dom[0]}, {"measured": dom[1], "predicted": dom[1]}]},
             "mark": {"type": "line", "color": "#888", "strokeDash": [6, 4]},
             "encoding": {"x": x, "y": y}},
            {"data": {"values": values}, "mark": {"type": "point", "filled": True, "size": 70, "opacity": 0.8},
             "encoding": {"x": x, "y": y,
                          "color": {"field": "group", "type": "nominal", "title": None,
                                    "scale": {"domain": names, "range": [PALETTE[i % len(PALETTE)]
                                                                         for i in range(len(names))]},
                                    "legend": {"orient": "bottom", "labelLimit": 260, "columns": 4}},
                          "tooltip": [{"field": "what", "title": "what"},
                                      {"field": "measured_text", "title": "measured"},
                                      {"field": "predicted_text", "title": "predicted"}]}},
        ],
        "usermeta": {"embedOptions": {"renderer": "svg"}},
    }


# -- the Sweeps page's strip charts -------------------------------------------------------------
def sweep_strip_spec(df, y: str, title: str, y_title: str, bound: float | None = None,
                     bound_label: str = "") -> dict:
    """One point per row of ``df``: column ``y`` per planner (x), coloured by machine, on a
    log axis with 1-2-5 ticks labelled as ratios (``2x``), the bound drawn as a dashed
    green rule with its label; the hover names the case. ``usermeta["y"]`` is the column.

    Worked example: rows (auto, tpu-v4, 1.0), (easy, tpu-v4, 64.0), bound 1: planners
    ``auto``, ``easy`` across, points at 1 and 64, ticks 0.5x .. 100x, the rule at 1.
    """
    planners = sorted(str(p) for p in df["planner"].dropna().unique())
    machines = sorted(str(m) for m in df["machine"].dropna().unique()) if "machine" in df else []
    vals = [float(v) for v in df[y].dropna() if float(v) > 0] + ([bound] if bound else [])
    points = [{"planner": str(p), "machine": str(m) if "machine" in df else "", "case": str(c), "value": float(v),
               "text": f"{float(v):.3g}x"}
              for p, m, c, v in zip(df["planner"], df["machine"] if "machine" in df else [""] * len(df),
                                    df["case"], df[y]) if v == v and v is not None and float(v) > 0]
    yenc = {"field": "value", "type": "quantitative", "title": y_title,
            "scale": {"type": "log", "domain": [min(vals) / 1.5, max(vals) * 1.5] if vals else [0.5, 2],
                      "nice": False}}
    if vals:
        yenc["axis"] = {"values": _log_values(min(vals) / 1.5, max(vals) * 1.5, 1.0), "labelExpr": "datum.label + 'x'"}
    x = {"field": "planner", "type": "nominal", "sort": planners, "title": "planner", "axis": {"labelAngle": 0}}
    layers = [{"data": {"values": points},
               "mark": {"type": "point", "filled": True, "size": 80, "opacity": 0.75},
               "encoding": {"x": x, "y": yenc, "xOffset": {"field": "machine", "type": "nominal"},
                            "color": {"field": "machine", "type": "nominal", "title": "machine",
                                      "scale": {"domain": machines,
                                                "range": [PALETTE[i % len(PALETTE)] for i in range(len(machines))]}},
                            "tooltip": [{"field": "case"}, {"field": "planner"}, {"field": "machine"},
                                        {"field": "text", "title": y_title}]}}]
    if bound is not None and planners:
        b = [{"value": float(bound), "label": bound_label or "bound"}]
        layers += [
            {"data": {"values": b}, "mark": {"type": "rule", "color": BOUND_RULE_COLOR, "strokeDash": [6, 4],
                                             "strokeWidth": 2},
             "encoding": {"y": {"field": "value", "type": "quantitative"}}},
            {"data": {"values": b}, "mark": {"type": "text", "color": BOUND_RULE_COLOR, "align": "left",
                                             "baseline": "bottom", "dx": 4, "dy": -3, "fontSize": 11},
             "encoding": {"x": {"value": 0}, "y": {"field": "value", "type": "quantitative"},
                          "text": {"field": "label"}}},
        ]
    return {"title": {"text": title, "anchor": "start"}, "height": 340, "layer": layers,
            "usermeta": {"embedOptions": {"renderer": "svg"}, "y": y}}
