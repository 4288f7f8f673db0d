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

from ui.fmt import byte_unit, fmt_bytes

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
