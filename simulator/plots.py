"""Plotly figures for simulation results. plotly is imported inside each function."""

from __future__ import annotations

import numpy as np


def timeline_figure(res, max_rows: int = 2000, title: str | None = None):
    """Ops as bars (top rows), then transfers grouped by source device (one row per
    device, at most ``max_rows`` transfers drawn, earliest first). Times in us."""
    import plotly.graph_objects as go

    fig = go.Figure()
    us = 1e6
    ys, xs, bases, texts = [], [], [], []
    for o in res.ops:
        ys.append(f"op {o['index']}: {o['kind']}")
        bases.append(o["start_s"] * us)
        xs.append(max(o["end_s"] - o["start_s"], 0.0) * us)
        texts.append(f"{o['label']}<br>{o['duration_s'] * us:.2f} us (analytic {o['analytic_s'] * us:.2f} us)")
    fig.add_trace(go.Bar(y=ys, x=xs, base=bases, orientation="h", name="ops", hovertext=texts,
                         hoverinfo="text", marker_color="#4c78a8"))
    df = res.trace_df()
    if len(df):
        df = df.sort_values(["start_s", "src"], kind="stable").head(max_rows)
        kinds = sorted(df["kind"].unique())
        palette = ["#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6"]
        for i, k in enumerate(kinds):
            d = df[df["kind"] == k]
            fig.add_trace(go.Bar(
                y=[f"dev {s}" for s in d["src"]], x=(d["end_s"] - d["start_s"]) * us, base=d["start_s"] * us,
                orientation="h", name=f"{k} transfers", marker_color=palette[i % len(palette)], opacity=0.7,
                hovertext=[f"{r.src}->{r.dst} step {r.step} {r.bytes:.0f} B, {r.hops} hops"
                           for r in d.itertuples()], hoverinfo="text"))
    fig.update_layout(
        title=title or f"{res.machine.spec}: {res.time_s * us:.2f} us (lower bound {res.lower_bound_s * us:.2f} us)",
        barmode="overlay", xaxis_title="time (us)", yaxis={"autorange": "reversed"}, height=max(300, 22 * (len(res.ops) + 10)))
    return fig


def memory_figure(res, devices=None, title: str | None = None):
    """Bytes held per device over time (step lines). By default: device 0 and the
    devices with the highest and the lowest peak."""
    import plotly.graph_objects as go

    if devices is None:
        p = res.peak_bytes
        devices = sorted({0, int(np.argmax(p)), int(np.argmin(p))})
    fig = go.Figure()
    t = res.memory_times_s * 1e6
    for d in devices:
        fig.add_trace(go.Scatter(x=t, y=res.memory_bytes[:, d] / 2**20, mode="lines", line_shape="hv",
                                 name=f"device {d}"))
    cap = res.machine.hbm_capacity_bytes / 2**20
    if res.peak_bytes_max_device / 2**20 > 0.5 * cap:
        fig.add_hline(y=cap, line_dash="dash", annotation_text="HBM capacity")
    fig.update_layout(title=title or f"memory per device (peak {res.peak_bytes_max_device / 2**20:.2f} MiB)",
                      xaxis_title="time (us)", yaxis_title="MiB held")
    return fig


def _positions(machine, graph):
    pos = {}
    if machine.kind == "torus":
        dims = list(machine.dims) + [1] * (3 - len(machine.dims))
        for n, c in graph.nodes(data="coord"):
            c = list(c) + [0] * (3 - len(c))
            pos[n] = (c[1] + c[2] * (dims[1] + 1), -c[0])
    elif machine.kind == "switched":
        nodes, g = machine.dims
        for n, data in graph.nodes(data=True):
            if data.get("chip"):
                node, i = data["coord"]
                pos[n] = (i + node * (g + 1), 0.0)
            elif str(n).startswith("nvswitch"):
                k = int(str(n)[len("nvswitch"):])
                pos[n] = (k * (g + 1) + (g - 1) / 2, 1.0)
            else:
                pos[n] = ((nodes * (g + 1) - 2) / 2, -1.5)
    else:
        n = machine.num_devices
        for i in range(n):
            a = 2 * np.pi * i / max(n, 1)
            pos[i] = (np.cos(a), np.sin(a))
        pos["bus_in"], pos["bus_out"] = (-0.15, 0.0), (0.15, 0.0)
    return pos


def topology_figure(machine, res=None, title: str | None = None):
    """The machine's graph with links coloured by bytes carried in ``res`` (grey if
    ``res`` is None). Tori are drawn as their X-Y planes side by side along Z."""
    import plotly.graph_objects as go

    topo = machine.topology
    g = topo.graph
    pos = _positions(machine, g)
    lb = res.link_bytes_array if res is not None else np.zeros(len(topo.links))
    vmax = float(lb.max()) if lb.max() > 0 else 1.0
    nbins = 8
    colors = ["#d9d9d9", "#fde0c5", "#facba6", "#f8b58b", "#f59e72", "#f2855d", "#ef6a4c", "#eb4a40", "#b30000"]
    bins = [[] for _ in range(nbins + 1)]
    for i, (u, v) in enumerate(topo.links):
        b = 0 if lb[i] <= 0 else 1 + min(nbins - 1, int(nbins * lb[i] / vmax))
        bins[b].append((u, v))
    fig = go.Figure()
    for b, edges in enumerate(bins):
        if not edges:
            continue
        xs, ys = [], []
        for u, v in edges:
            (x0, y0), (x1, y1) = pos[u], pos[v]
            dx, dy = x1 - x0, y1 - y0
            norm = (dx * dx + dy * dy) ** 0.5 or 1.0
            ox, oy = -dy / norm * 0.06, dx / norm * 0.06  # offset the two directions apart
            xs += [x0 + ox, x1 + ox, None]
            ys += [y0 + oy, y1 + oy, None]
        lo, hi = (0, 0) if b == 0 else ((b - 1) * vmax / nbins, b * vmax / nbins)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": colors[b], "width": 1 + b * 0.4},
                                 hoverinfo="skip",
                                 name="idle" if b == 0 else f"{lo / 2**20:.2f}-{hi / 2**20:.2f} MiB"))
    chips = [n for n, c in g.nodes(data="chip") if c]
    others = [n for n, c in g.nodes(data="chip") if not c]
    fig.add_trace(go.Scatter(x=[pos[n][0] for n in chips], y=[pos[n][1] for n in chips], mode="markers",
                             marker={"size": 7 if len(chips) <= 256 else 3, "color": "#4c78a8"},
                             text=[f"chip {n} {g.nodes[n].get('coord')}" for n in chips], hoverinfo="text",
                             name="chips"))
    if others:
        fig.add_trace(go.Scatter(x=[pos[n][0] for n in others], y=[pos[n][1] for n in others], mode="markers+text",
                                 marker={"size": 12, "symbol": "square", "color": "#54a24b"}, text=[str(n) for n in others],
                                 textposition="top center", name="switches"))
    fig.update_layout(title=title or f"{machine.spec} topology" + (" (link load)" if res is not None else ""),
                      xaxis={"visible": False}, yaxis={"visible": False, "scaleanchor": "x"},
                      showlegend=True, height=500)
    return fig
