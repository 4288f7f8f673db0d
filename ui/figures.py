"""Plotly figures for the pages. Inputs are results; nothing is computed here beyond
unit conversion for the axes."""

from __future__ import annotations

import plotly.graph_objects as go

MIB = 1024 * 1024


def step_labels(plan) -> list[str]:
    return [f"{r['step']}: {r['collective']}" for r in plan.rows()]


def plan_memory_figure(plan, easy_peak_bytes: int | None = None) -> go.Figure:
    """Per-device shard size after each step (bars), the live in+out pair during each
    step (line), and the ``max(src, dst)`` bound (dashed)."""
    rows = plan.rows()
    x = step_labels(plan)
    shard = [r["shard_bytes"] / MIB for r in rows]
    live = [rows[0]["shard_bytes"] / MIB] + [
        (a["shard_bytes"] + b["shard_bytes"]) / MIB for a, b in zip(rows[:-1], rows[1:])
    ]
    fig = go.Figure()
    fig.add_bar(x=x, y=shard, name="shard per device (type after step)",
                marker_color="#4C78A8",
                customdata=[[r["type"], str(r["local_shape"])] for r in rows],
                hovertemplate="%{x}<br>%{customdata[0]}<br>local shape %{customdata[1]}"
                              "<br>%{y:.2f} MiB<extra></extra>")
    fig.add_scatter(x=x, y=live, name="live during step (input + output)", mode="lines+markers",
                    line=dict(color="#F58518"),
                    hovertemplate="%{x}<br>%{y:.2f} MiB live<extra></extra>")
    fig.add_hline(y=plan.bound_bytes / MIB, line_dash="dash", line_color="#54A24B",
                  annotation_text=f"bound max(src, dst) = {plan.bound_bytes / MIB:.2f} MiB",
                  annotation_position="top left")
    top = max(max(live), plan.bound_bytes / MIB) * 1.25
    if easy_peak_bytes is not None and easy_peak_bytes > plan.bound_bytes:
        easy = easy_peak_bytes / MIB
        if easy <= top * 1.6:
            top = max(top, easy * 1.1)
            fig.add_hline(y=easy, line_dash="dot", line_color="#E45756",
                          annotation_text=f"easy planner's largest shard = {easy:.2f} MiB",
                          annotation_position="bottom left")
        else:
            fig.add_annotation(xref="paper", yref="paper", x=1, y=1, showarrow=False,
                               xanchor="right", yanchor="top", font=dict(color="#E45756"),
                               text=f"easy planner's largest shard: {easy:.2f} MiB (off scale)")
    fig.update_yaxes(range=[0, top])
    fig.update_layout(
        title="Per-device memory along the plan",
        yaxis_title="MiB per device", xaxis_title="step",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        margin=dict(l=40, r=20, t=80, b=40), height=420,
    )
    return fig


def recv_heatmap(plan) -> go.Figure:
    """Bytes each device receives in each communicating step (rows: steps)."""
    r = plan.recv_bytes_per_device_per_step
    labels = step_labels(plan)[1:]
    fig = go.Figure(go.Heatmap(
        z=(r / MIB).tolist() if len(r) else [[0] * plan.mesh.size],
        x=list(range(plan.mesh.size)), y=labels if len(r) else ["(no steps)"],
        colorscale="Blues", colorbar=dict(title="MiB"),
        hovertemplate="device %{x}<br>%{y}<br>%{z:.2f} MiB received<extra></extra>",
    ))
    fig.update_layout(title="Bytes received per device per step", xaxis_title="device id",
                      yaxis_autorange="reversed", margin=dict(l=40, r=20, t=60, b=40),
                      height=120 + 40 * max(1, len(labels)))
    return fig


# -- simulation -------------------------------------------------------------------------
_PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
            "#9D755D", "#BAB0AC", "#EECA3B"]
US = 1e6


def timeline_figure(res, max_rows: int = 4000) -> go.Figure:
    """Gantt chart: one row per op (top) and one row per sending device with its
    transfers, coloured by op. Times in microseconds."""
    fig = go.Figure()
    ops = res.ops
    for o in ops:
        fig.add_bar(
            y=["ops"], x=[(o["end_s"] - o["start_s"]) * US], base=[o["start_s"] * US],
            orientation="h", marker_color=_PALETTE[o["index"] % len(_PALETTE)],
            name=f"op {o['index']}: {o['kind']}", legendgroup=f"op{o['index']}",
            hovertemplate=(f"op {o['index']} {o['kind']} {o.get('label') or ''}<br>"
                           f"algorithm {o.get('algorithm') or '-'}<br>"
                           "%{base:.2f} us + %{x:.2f} us<extra></extra>"),
        )
    df = res.trace_df()
    shown = len(df)
    if shown > max_rows:
        df = df.iloc[:max_rows]
    for k, part in df.groupby("op", sort=True):
        fig.add_bar(
            y=[f"dev {d}" for d in part["src"]], x=((part["end_s"] - part["start_s"]) * US).tolist(),
            base=(part["start_s"] * US).tolist(), orientation="h",
            marker_color=_PALETTE[int(k) % len(_PALETTE)], opacity=0.75, showlegend=False,
            legendgroup=f"op{k}",
            customdata=list(zip(part["dst"], part["bytes"] / MIB, part["hops"])),
            hovertemplate=("dev %{y} -> dev %{customdata[0]}<br>%{customdata[1]:.3f} MiB, "
                           "%{customdata[2]} hops<br>%{base:.2f} us + %{x:.2f} us<extra></extra>"),
        )
    devices = sorted(set(int(d) for d in df["src"])) if len(df) else []
    order = ["ops"] + [f"dev {d}" for d in devices]
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(order)))
    title = "Timeline: ops and the transfers each device sends"
    if shown > max_rows:
        title += f" (first {max_rows} of {shown} transfers)"
    fig.update_layout(title=title, barmode="overlay", xaxis_title="time (us)",
                      height=min(1600, 160 + 14 * len(order)), margin=dict(l=60, r=20, t=60, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1))
    return fig


def memory_figure(res, capacity_bytes: int | None = None) -> go.Figure:
    """Bytes each device holds over time (step lines), max over devices in bold."""
    t = res.memory_times_s * US
    mem = res.memory_bytes / MIB
    fig = go.Figure()
    n = mem.shape[1]
    xs, ys = [], []
    for d in range(n):
        xs += list(t) + [None]
        ys += list(mem[:, d]) + [None]
    fig.add_scatter(x=xs, y=ys, mode="lines", line_shape="hv", name="each device",
                    line=dict(width=1, color="rgba(76,120,168,0.45)"),
                    hovertemplate="%{x:.2f} us<br>%{y:.2f} MiB<extra></extra>")
    fig.add_scatter(x=t, y=mem.max(axis=1), mode="lines", line_shape="hv",
                    line=dict(width=3, color="#E45756"), name="max over devices")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title=f"Memory held per device over time ({n} devices)", xaxis_title="time (us)",
                      yaxis_title="MiB", height=380, margin=dict(l=40, r=20, t=60, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1))
    return fig


def _positions(graph) -> dict:
    """2-D drawing positions: tori as grids (3-D tori as a row of planes), switched and
    shared-bus machines as rows of devices under their switches."""
    kind = graph.graph.get("kind", "")
    chips = [n for n, c in graph.nodes(data="chip") if c]
    pos = {}
    if kind == "torus":
        dims = graph.graph["dims"]
        for n in chips:
            c = graph.nodes[n]["coord"]
            if len(dims) == 1:
                pos[n] = (c[0], 0.0)
            elif len(dims) == 2:
                pos[n] = (c[1], -c[0])
            else:
                # planes of the first dim side by side; inside: (last, -middle)
                pos[n] = (c[0] * (dims[-1] + 1) + c[-1], -float(c[-2]) if len(dims) == 3 else -c[1])
        return pos
    others = [n for n, c in graph.nodes(data="chip") if not c]
    coords = {n: graph.nodes[n].get("coord", (0, i)) for i, n in enumerate(chips)}
    width = max((c[-1] for c in coords.values()), default=0) + 2
    for n, c in coords.items():
        node = c[0] if len(c) > 1 else 0
        pos[n] = (node * width + c[-1], 0.0)
    xs = [p[0] for p in pos.values()] or [0.0]
    for i, s in enumerate(others):
        nbrs = [pos[m][0] for m in graph.successors(s) if m in pos]
        if s in ("fabric", "bus_out", "bus_in") or not nbrs:
            pos[s] = ((min(xs) + max(xs)) / 2 + (i % 2) * 0.5, 2.0)
        else:
            pos[s] = (sum(nbrs) / len(nbrs), 1.0)
    return pos


def topology_figure(res, bins: int = 8) -> go.Figure:
    """The machine's links coloured by the bytes they carried (both directions summed);
    chips labelled with the mesh device placed on them."""
    topo = res.machine.topology
    g = topo.graph
    pos = _positions(g)
    lb = res.link_bytes_array
    pair_bytes: dict = {}
    for i, (u, v) in enumerate(topo.links):
        key = (u, v) if str(u) <= str(v) else (v, u)
        pair_bytes[key] = pair_bytes.get(key, 0.0) + float(lb[i])
    top = max(pair_bytes.values(), default=0.0) or 1.0
    import plotly.colors as pc

    scale = pc.sample_colorscale("YlOrRd", [i / (bins - 1) for i in range(bins)])
    groups: dict = {}
    mids_x, mids_y, mids_c, mids_t = [], [], [], []
    for (u, v), b in pair_bytes.items():
        (x0, y0), (x1, y1) = pos[u], pos[v]
        pts = [(x0, y0), (x1, y1)]
        dims = g.graph.get("dims", ())
        between_planes = len(dims) == 3 and g.edges[u, v].get("dim") == 0
        if g.graph.get("kind") == "torus" and (between_planes or abs(x0 - x1) + abs(y0 - y1) > 1.5):
            # links between the drawn planes, and wraparound links, are bowed so they
            # do not hide the rows they would otherwise run along
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            span = abs(x0 - x1) / (dims[-1] + 1) if between_planes else 1.0
            off = (0.3 * span if between_planes else 0.35) if y0 == y1 else 0.0
            offx = 0.35 if x0 == x1 else 0.0
            pts = [(x0, y0), (mx + offx, my + off), (x1, y1)]
        level = 0 if b <= 0 else min(bins - 1, int(b / top * (bins - 1) + 0.5))
        xs, ys = groups.setdefault(level, ([], []))
        xs += [p[0] for p in pts] + [None]
        ys += [p[1] for p in pts] + [None]
        mx, my = pts[len(pts) // 2] if len(pts) == 3 else ((x0 + x1) / 2, (y0 + y1) / 2)
        mids_x.append(mx)
        mids_y.append(my)
        mids_c.append(b / MIB)
        mids_t.append(f"{u} <-> {v}: {b / MIB:.2f} MiB")
    fig = go.Figure()
    for level in sorted(groups):
        xs, ys = groups[level]
        fig.add_scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                        line=dict(color=scale[level] if level else "#D0D0D0", width=1.5 + 3 * level / bins))
    fig.add_scatter(x=mids_x, y=mids_y, mode="markers", showlegend=False, text=mids_t,
                    hovertemplate="%{text}<extra></extra>",
                    marker=dict(size=7, color=mids_c, colorscale="YlOrRd", cmin=0, cmax=top / MIB,
                                colorbar=dict(title="MiB on link"), opacity=0.9))
    chips = [n for n, c in g.nodes(data="chip") if c]
    dev_of = {c: d for d, c in enumerate(res.placement.chips)}
    fig.add_scatter(x=[pos[n][0] for n in chips], y=[pos[n][1] for n in chips], mode="markers+text",
                    text=[str(dev_of.get(n, "")) for n in chips], textposition="middle center",
                    textfont=dict(size=9, color="white"), showlegend=False,
                    marker=dict(size=18, color="#4C78A8"),
                    hovertemplate=[f"chip {n} {g.nodes[n].get('coord', '')}<br>mesh device {dev_of.get(n, '-')}"
                                   "<extra></extra>" for n in chips])
    others = [n for n, c in g.nodes(data="chip") if not c]
    if others:
        fig.add_scatter(x=[pos[n][0] for n in others], y=[pos[n][1] for n in others], mode="markers+text",
                        text=[str(n) for n in others], textposition="top center", showlegend=False,
                        marker=dict(size=14, symbol="square", color="#555"), hoverinfo="text")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, scaleanchor="x")
    fig.update_layout(title=f"Link load on {res.machine.spec} (each chip shows the mesh device placed on it)",
                      height=460, margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="white")
    return fig


def strategies_figure(names, times_s, peaks_bytes, bound_s) -> go.Figure:
    """Two panels: simulated time per strategy (with the lower bound) and peak memory
    per device. Log scales when every value is positive."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("simulated time (us)", "peak memory per device (MiB)"))
    t_us = [t * US for t in times_s]
    mem = [b / MIB for b in peaks_bytes]
    colors = [_PALETTE[i % len(_PALETTE)] for i in range(len(names))]
    fig.add_bar(x=list(names), y=t_us, marker_color=colors, showlegend=False, row=1, col=1,
                hovertemplate="%{x}<br>%{y:.2f} us<extra></extra>")
    fig.add_bar(x=list(names), y=mem, marker_color=colors, showlegend=False, row=1, col=2,
                hovertemplate="%{x}<br>%{y:.2f} MiB<extra></extra>")
    if bound_s > 0:
        # a trace, not add_hline: hline annotations are placed wrongly on log axes
        fig.add_scatter(x=list(names), y=[bound_s * US] * len(names), mode="lines+markers",
                        line=dict(dash="dash", color="#54A24B"), marker=dict(symbol="line-ew-open", size=30),
                        name=f"lower bound {bound_s * US:.2f} us", row=1, col=1,
                        hovertemplate="lower bound %{y:.2f} us<extra></extra>")
    if all(v > 0 for v in t_us):
        fig.update_yaxes(type="log", dtick=1, row=1, col=1)
    if all(v > 0 for v in mem):
        fig.update_yaxes(type="log", dtick=1, row=1, col=2)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.08, xanchor="left", x=0))
    fig.update_layout(height=400, margin=dict(l=40, r=20, t=60, b=40))
    return fig
