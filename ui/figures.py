"""Plotly figures for the pages. Inputs are results; nothing is computed here beyond
unit conversion for the axes."""

from __future__ import annotations

import pandas  # noqa: F401 - before plotly, which fails on a half-imported pandas (ui.runs.warm_up)
import plotly.graph_objects as go

from ui.fmt import byte_unit, fmt_bytes, time_unit

MIB = 1024 * 1024


def step_labels(plan) -> list[str]:
    return [f"{r['step']}: {r['collective']}" for r in plan.rows()]


def recv_heatmap(plan) -> go.Figure:
    """Bytes each device receives in each communicating step (rows: steps). The colour
    scale starts at 0."""
    r = plan.recv_bytes_per_device_per_step
    labels = step_labels(plan)[1:]
    top = float(r.max()) if len(r) and r.size else 0.0
    div, unit = byte_unit(top)
    z = (r / div).tolist() if len(r) else [[0] * plan.mesh.size]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(plan.mesh.size)), y=labels if len(r) else ["(no steps)"],
        zmin=0, zmax=max(top / div, 1e-12), colorscale="Blues", colorbar=dict(title=unit),
        hovertemplate="device %{x}<br>%{y}<br>%{z:.3~g} " + unit + " received<extra></extra>",
    ))
    fig.update_layout(title="Bytes received per device per step", xaxis_title="mesh device (row-major id)",
                      yaxis_autorange="reversed", margin=dict(l=40, r=20, t=60, b=40),
                      height=120 + 40 * max(1, len(labels)))
    return fig


# -- layout pictures ----------------------------------------------------------------------
_CELL_COLORS = ["#AEC7E8", "#FFBB78", "#98DF8A", "#FF9896", "#C5B0D5", "#C49C94", "#F7B6D2",
                "#DBDB8D", "#9EDAE5", "#D9D9D9"]


def _device_list(devs) -> str:
    devs = sorted(int(d) for d in devs)
    if len(devs) <= 4:
        return ",".join(map(str, devs))
    step = devs[1] - devs[0]
    if all(b - a == step for a, b in zip(devs, devs[1:])):
        return f"{devs[0]}..{devs[-1]}" + (f" step {step}" if step != 1 else "") + f" ({len(devs)})"
    return f"{devs[0]},{devs[1]},..,{devs[-1]} ({len(devs)})"


def layout_cells(t, mesh) -> dict:
    """Which devices hold which block of the array under type ``t`` (as
    ``jax.debug.visualize_array_sharding`` draws it). Returns ``{"rows", "cols",
    "cells": {(row, col): [devices]}, "partial": {(row, col): {unreduced index: [devices]}},
    "row_edges", "col_edges", "row_size", "col_size", "row_dim", "col_dims"}``.
    Rows are the blocks of dim 0, columns the blocks of the remaining dims (mixed
    radix, dim 1 most significant). Edges are in elements of the padded grid."""
    import numpy as np

    shape = t.shape
    rank = len(shape)
    splits = t.splits(mesh) if rank else ()
    local = t.local_shape(mesh) if rank else ()
    bi = t.block_indices(mesh) if rank else np.zeros((mesh.size, 0), dtype=np.int64)
    ui = t.unreduced_index(mesh)
    nrows = splits[0] if rank >= 1 else 1
    col_dims = list(range(1, rank))
    ncols = 1
    for d in col_dims:
        ncols *= splits[d]
    col_of = np.zeros(mesh.size, dtype=np.int64)
    for d in col_dims:
        col_of = col_of * splits[d] + bi[:, d]
    row_of = bi[:, 0] if rank >= 1 else np.zeros(mesh.size, dtype=np.int64)
    cells: dict = {}
    partial: dict = {}
    for dev in range(mesh.size):
        key = (int(row_of[dev]), int(col_of[dev]))
        cells.setdefault(key, []).append(dev)
        partial.setdefault(key, {}).setdefault(int(ui[dev]), []).append(dev)
    row_size = local[0] if rank >= 1 else 1
    if rank == 2:
        col_size, col_total = local[1], shape[1]
    else:
        col_size, col_total = 1, ncols
    return {"rows": int(nrows), "cols": int(ncols), "cells": cells, "partial": partial,
            "row_size": int(row_size), "col_size": int(col_size),
            "row_total": int(shape[0]) if rank >= 1 else 1, "col_total": int(col_total),
            "proportional_cols": rank == 2, "col_dims": col_dims}


def layout_figure(t, mesh, title: str = "", max_text_cells: int = 256) -> go.Figure:
    """A picture of type ``t`` on ``mesh``: the array as a grid of blocks (rows: dim 0,
    columns: the other dims), each labelled with the devices that hold it. Replicated
    blocks list every holder; with pending sums (``{U:...}``) each holder has a partial
    block, summed over the unreduced axes, and the label says so. Padding of uneven
    dims (the part of the last shards beyond the array) is hatched grey."""
    info = layout_cells(t, mesh)
    nr, nc = info["rows"], info["cols"]
    rs, cs = info["row_size"], info["col_size"]
    fig = go.Figure()
    xs, ys, texts, hovers, colors = [], [], [], [], []
    shapes = []
    many = nr * nc > max_text_cells
    for (r, c), devs in sorted(info["cells"].items()):
        x0, x1 = c * cs, (c + 1) * cs
        y0, y1 = r * rs, (r + 1) * rs
        groups = info["partial"][(r, c)]
        color = _CELL_COLORS[min(devs) % len(_CELL_COLORS)]
        shapes.append(dict(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line=dict(color="#333", width=1),
                           fillcolor=color, layer="below"))
        if t.unreduced and len(groups) > 1:
            label = "partial sums on " + _device_list(devs)
            hover = (f"block ({r}, {c}): unreduced over {','.join(t.unreduced)}; the true block is the "
                     f"sum of the partial blocks of " + "; ".join(
                         f"{_device_list(g)}" for g in list(groups.values())[:1]) + " (and the same for "
                     "each replica group)")
        else:
            label = _device_list(devs)
            hover = f"block ({r}, {c}) held by devices {_device_list(devs)}"
        xs.append((x0 + x1) / 2)
        ys.append((y0 + y1) / 2)
        texts.append(label if not many else "")
        hovers.append(hover)
        colors.append(color)
    if many:  # one heatmap instead of thousands of shapes: light enough for any browser
        import numpy as np

        z = np.full((nr, nc), np.nan)
        hov = np.full((nr, nc), "", dtype=object)
        for ((r, c), devs), h in zip(sorted(info["cells"].items()), hovers):
            z[r, c] = min(devs)
            hov[r, c] = h
        fig.add_heatmap(z=z, x0=cs / 2, dx=cs, y0=rs / 2, dy=rs, colorscale="Turbo", showscale=True,
                        colorbar=dict(title="first device"), customdata=hov,
                        hovertemplate="%{customdata}<extra></extra>")
        shapes = []
    else:
        fig.add_scatter(x=xs, y=ys, mode="text", text=texts,
                        textfont=dict(size=12 if nr * nc <= 32 else 9, color="#111"), hovertext=hovers,
                        hoverinfo="text", showlegend=False)
    # padding of uneven dims: the padded grid extends beyond the array
    pad_note = []
    pads = []
    if nr * rs > info["row_total"]:
        pads.append((0, nc * cs, info["row_total"], nr * rs))
        pad_note.append(f"dim 0: {nr * rs - info['row_total']} padding rows")
    if info["proportional_cols"] and nc * cs > info["col_total"]:
        pads.append((info["col_total"], nc * cs, 0, nr * rs))
        pad_note.append(f"dim 1: {nc * cs - info['col_total']} padding columns")
    for x0, x1, y0, y1 in pads:
        fig.add_scatter(x=[x0, x1, x1, x0, x0], y=[y0, y0, y1, y1, y0], fill="toself", mode="lines",
                        fillcolor="rgba(110,110,110,0.55)", fillpattern=dict(shape="/"),
                        line=dict(width=0), name="padding", showlegend=False, hoverinfo="text",
                        hovertext="padding: part of the last shards beyond the array (never in the result)")
    sub = []
    if t.unreduced:
        sub.append(f"pending sum over {','.join(t.unreduced)}")
    if pad_note:
        sub.append("hatched: padding (" + "; ".join(pad_note) + ")")
    if many:
        sub.append(f"{nr * nc} blocks: hover for the devices")
    if len(t.shape) > 2:
        sub.append("columns: blocks of dims " + ",".join(map(str, info["col_dims"])) + " (dim 1 major)")
    full = (title + " " if title else "") + str(t)
    if sub:
        full += "<br><sup>" + "; ".join(sub) + "</sup>"
    fig.update_layout(shapes=shapes, title=full, height=min(700, 140 + 34 * max(1, min(nr, 16))),
                      margin=dict(l=50, r=20, t=70, b=40), plot_bgcolor="white")
    fig.update_xaxes(range=[0, nc * cs], showgrid=False, zeroline=False,
                     title="dim 1 (elements)" if info["proportional_cols"] else
                     ("columns: blocks" if len(t.shape) > 2 else ""),
                     showticklabels=info["proportional_cols"])
    fig.update_yaxes(range=[nr * rs, 0], showgrid=False, zeroline=False,
                     title="dim 0 (elements)" if len(t.shape) >= 1 else "")
    return fig


#: A block grid wider or taller than this (or with more blocks) is drawn as a summary
#: first; the exact grid stays one click away.
GRID_MAX_SIDE = 16
GRID_MAX_BLOCKS = 64


def layout_needs_summary(t, mesh) -> bool:
    """Whether type ``t``'s block grid is beyond what a grid picture shows legibly (more
    than ``GRID_MAX_SIDE`` blocks along a side or ``GRID_MAX_BLOCKS`` in all: 64 stripes
    are a barcode)."""
    splits = t.splits(mesh) if t.rank else ()
    nr = splits[0] if splits else 1
    nc = 1
    for v in splits[1:]:
        nc *= v
    return nr > GRID_MAX_SIDE or nc > GRID_MAX_SIDE or nr * nc > GRID_MAX_BLOCKS


def layout_axes_text(t, mesh) -> str:
    """The per-axis view in words: for each dim, its size, how many blocks of what size
    and over which mesh axes; then the axes it is replicated over and any pending sum.
    E.g. ``dim 0: 8192 in 16 blocks of 512 (data=16); dim 1: 32768 whole; replicated
    over model=4``."""
    sizes = dict(zip(mesh.names, mesh.sizes))
    parts = []
    local = t.local_shape(mesh)
    for i, d in enumerate(t.dims):
        if d.axes:
            n = t.split(mesh, i)
            over = ",".join(f"{a}={sizes.get(a, '?')}" for a in d.axes)
            parts.append(f"dim {i}: {d.size} in {n} blocks of {local[i]} ({over})")
        else:
            parts.append(f"dim {i}: {d.size} whole")
    used = set(t.used_axes) | set(t.unreduced)
    rep = [f"{a}={sizes[a]}" for a in mesh.names if a not in used and sizes[a] > 1]
    if rep:
        parts.append("replicated over " + ",".join(rep))
    if t.unreduced:
        parts.append("pending sum over " + ",".join(t.unreduced))
    return "; ".join(parts)


def layout_summary_figure(t, mesh, title: str = "", max_text: int = 256) -> go.Figure:
    """The summary picture of type ``t`` on ``mesh`` for grids too big to draw: the
    *devices* laid out as the mesh (rows: the first mesh axis; columns: the others,
    mixed radix, so device ``d`` sits at ``divmod(d, columns)``), each tile coloured and
    labelled by the block it holds (``r,c``: row block of dim 0, column block of the
    other dims, as in the exact grid). Replicas of a block share a colour; with pending
    sums the hover names the partial-sum group. Up to ``max_text`` devices carry their
    label in the tile, beyond that in the hover.

    Worked example: ``[8192, 32768{data,model}]`` on ``data=16,model=4`` is one row of
    64 column blocks (a barcode as a grid); here it is a 16x4 tile map whose labels run
    ``0,0 0,1 ... 0,63`` in reading order: device ``4i+j`` holds column block ``4i+j``."""
    import numpy as np

    info = layout_cells(t, mesh)
    nc_blocks = info["cols"]
    rows = mesh.sizes[0] if mesh.sizes else 1
    cols = mesh.size // max(rows, 1)
    block_of = np.zeros(mesh.size, dtype=np.int64)
    label = np.empty(mesh.size, dtype=object)
    for (r, c), devs in info["cells"].items():
        for d in devs:
            block_of[d] = r * nc_blocks + c
            label[d] = f"{r},{c}"
    part_of = {}
    for (_r, _c), groups in info["partial"].items():
        for k, devs in groups.items():
            for d in devs:
                part_of[d] = (k, len(groups))
    z = block_of.reshape(rows, cols).astype(float)
    coords = mesh.coords
    hover = np.empty((rows, cols), dtype=object)
    for d in range(mesh.size):
        where = ", ".join(f"{a}={int(v)}" for a, v in zip(mesh.names, coords[d]))
        h = f"device {d} ({where})<br>holds block {label[d]}"
        if t.unreduced and part_of.get(d, (0, 1))[1] > 1:
            h += f"<br>partial sum {part_of[d][0] + 1} of {part_of[d][1]} over {','.join(t.unreduced)}"
        hover[d // cols, d % cols] = h
    text = label.reshape(rows, cols) if mesh.size <= max_text else None
    fig = go.Figure(go.Heatmap(
        z=z, customdata=hover, hovertemplate="%{customdata}<extra></extra>", colorscale="Turbo",
        showscale=True, colorbar=dict(title="block<br>(row-major)"), xgap=1 if mesh.size <= 1024 else 0,
        ygap=1 if mesh.size <= 1024 else 0, text=text, texttemplate="%{text}" if text is not None else None,
        textfont=dict(size=10 if mesh.size <= 64 else 8)))
    names = mesh.names
    xlab = ("x".join(f"{a}" for a in names[1:]) + " (device column)") if len(names) > 1 else ""
    # two short subtitle lines: the pictures sit side by side at half the page width
    sub = (f"summary: which block each of the {mesh.size} devices holds<br>"
           f"({info['rows']}x{nc_blocks} blocks; the exact grid is one click away)")
    fig.update_layout(title=(title + " " if title else "") + str(t) + f"<br><sup>{sub}</sup>",
                      height=min(700, 175 + 26 * min(rows, 24)), margin=dict(l=60, r=20, t=95, b=40),
                      plot_bgcolor="white")
    fig.update_xaxes(title=xlab, showgrid=False, zeroline=False, constrain="domain",
                     dtick=1 if cols <= 32 else None)  # device columns are whole numbers
    fig.update_yaxes(title=f"{names[0]} (device row)" if names else "", autorange="reversed",
                     showgrid=False, zeroline=False, dtick=1 if rows <= 32 else None)
    fig.update_layout(meta={"summary": True, "rows": rows, "cols": cols})
    return fig


# -- simulation -------------------------------------------------------------------------
from ui.charts import PALETTE as _PALETTE  # noqa: E402 - one palette for plotly and Vega-Lite


def memory_figure(res, capacity_bytes: int | None = None, max_lines: int = 256) -> go.Figure:
    """Bytes each device holds over time (step lines, the first ``max_lines`` devices),
    max over devices in bold. Units fit the values."""
    tdiv, tunit = time_unit(float(res.memory_times_s.max()) if len(res.memory_times_s) else 0.0)
    t = res.memory_times_s / tdiv
    top = float(res.memory_bytes.max()) if res.memory_bytes.size else 0.0
    bdiv, bunit = byte_unit(top)
    mem = res.memory_bytes / bdiv
    fig = go.Figure()
    n = mem.shape[1]
    xs, ys = [], []
    for d in range(min(n, max_lines)):
        xs += list(t) + [None]
        ys += list(mem[:, d]) + [None]
    fig.add_scatter(x=xs, y=ys, mode="lines", line_shape="hv",
                    name="each device" if n <= max_lines else f"devices 0-{max_lines - 1}",
                    line=dict(width=1, color="rgba(76,120,168,0.45)"),
                    hovertemplate="%{x:.3~g} " + tunit + "<br>%{y:.3~g} " + bunit + "<extra></extra>")
    fig.add_scatter(x=t, y=mem.max(axis=1), mode="lines", line_shape="hv",
                    line=dict(width=3, color="#E45756"), name="max over all devices")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title=f"Memory held per device over time ({n} devices)", xaxis_title=f"time ({tunit})",
                      yaxis_title=f"memory held per device ({bunit})", height=380, margin=dict(l=40, r=20, t=60, b=40),
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
    bdiv, bunit = byte_unit(top)
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
        mids_c.append(b / bdiv)
        mids_t.append(f"{u} <-> {v}: {fmt_bytes(b)}")
    fig = go.Figure()
    for level in sorted(groups):
        xs, ys = groups[level]
        fig.add_scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                        line=dict(color=scale[level] if level else "#D0D0D0", width=1.5 + 3 * level / bins))
    fig.add_scatter(x=mids_x, y=mids_y, mode="markers", showlegend=False, text=mids_t,
                    hovertemplate="%{text}<extra></extra>",
                    marker=dict(size=7, color=mids_c, colorscale="YlOrRd", cmin=0, cmax=top / bdiv,
                                colorbar=dict(title=f"{bunit} on link"), opacity=0.9))
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


#: Machines with more chips than this get the aggregated link-load picture.
TOPOLOGY_MAX_CHIPS = 256


def hot_links(res, n: int = 8) -> list[dict]:
    """The ``n`` links that carried the most bytes (one direction each):
    ``{"link", "bytes", "kind", "dim"}``, hottest first."""
    import numpy as np

    topo = res.machine.topology
    lb = np.asarray(res.link_bytes_array, dtype=float)
    out = []
    for i in np.argsort(-lb, kind="stable")[:n]:
        if lb[i] <= 0:
            break
        u, v = topo.links[int(i)]
        e = topo.graph.edges[u, v]
        cu, cv = topo.graph.nodes[u].get("coord"), topo.graph.nodes[v].get("coord")
        name = f"{u}{tuple(cu) if cu is not None else ''} -> {v}{tuple(cv) if cv is not None else ''}"
        out.append({"link": name, "bytes": float(lb[i]), "kind": e.get("kind", ""), "dim": e.get("dim")})
    return out


def topology_summary_figure(res) -> go.Figure:
    """Link load on a machine too big to draw link by link, aggregated so the hot links
    still show. Tori: one heat map per torus dimension over the coordinates of the other
    dimensions; a tile is one line of chips along that dimension and shows the most bytes
    any one of its links carried (either direction; the hover names that link and the
    line's total). E.g. on a 16x16x16 torus the ``dim 2`` panel is a 16x16 map over
    ``(c0, c1)``, and a hot tile at ``(3, 5)`` means a link between chips
    ``(3, 5, k)`` and ``(3, 5, k+1)`` is hot. Other machines: one heat map over their
    nodes, one row per link kind (NVLink, NIC, ...), each tile the most bytes a link of
    that kind in that node carried. The colour scale is shared and starts at 0."""
    import numpy as np
    from plotly.subplots import make_subplots

    topo = res.machine.topology
    g = topo.graph
    lb = np.asarray(res.link_bytes_array, dtype=float)
    top = float(lb.max()) if lb.size else 0.0
    bdiv, bunit = byte_unit(top or 1.0)
    if g.graph.get("kind") == "torus":
        dims = tuple(g.graph["dims"])
        live = [k for k, s in enumerate(dims) if s > 1]
        fig = make_subplots(rows=1, cols=max(1, len(live)), horizontal_spacing=0.06,
                            subplot_titles=[f"links along dim {k} ({dims[k]} chips a line)" for k in live])
        for j, k in enumerate(live):
            others = [d for d in range(len(dims)) if d != k]
            shape = tuple(dims[d] for d in others) or (1,)
            if len(shape) == 1:
                shape = (1,) + shape
            elif len(shape) > 2:
                shape = (shape[0], int(np.prod(shape[1:])))
            mx = np.zeros(shape)
            tot = np.zeros(shape)
            arg = np.full(shape, -1, dtype=np.int64)
            for i, (u, v) in enumerate(topo.links):
                e = g.edges[u, v]
                if e.get("dim") != k:
                    continue
                c = g.nodes[u]["coord"]
                oc = [c[d] for d in others]
                if len(oc) == 0:
                    r, q = 0, 0
                elif len(oc) == 1:
                    r, q = 0, oc[0]
                else:
                    r = oc[0]
                    q = int(np.ravel_multi_index(tuple(oc[1:]), tuple(dims[d] for d in others[1:])))
                tot[r, q] += lb[i]
                if lb[i] > mx[r, q] or arg[r, q] < 0:
                    mx[r, q], arg[r, q] = lb[i], i
            hover = np.empty(shape, dtype=object)
            for r in range(shape[0]):
                for q in range(shape[1]):
                    i = int(arg[r, q])
                    name = topo.link_name(i) if i >= 0 else "-"
                    hover[r, q] = (f"line {r},{q} along dim {k}<br>hottest link {name}: {fmt_bytes(mx[r, q])}"
                                   f"<br>all links of the line: {fmt_bytes(tot[r, q])}")
            fig.add_trace(go.Heatmap(z=mx / bdiv, customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                                     zmin=0, zmax=max(top / bdiv, 1e-12), colorscale="YlOrRd",
                                     showscale=j == len(live) - 1, colorbar=dict(title=f"{bunit} on the<br>hottest link")),
                          row=1, col=j + 1)
            ax = [f"dim {d}" for d in others]
            fig.update_xaxes(title=(" x ".join(ax[1:]) if len(ax) > 1 else (ax[0] if ax else "")),
                             row=1, col=j + 1)
            fig.update_yaxes(title=ax[0] if len(ax) > 1 else "", autorange="reversed", row=1, col=j + 1)
        what = "per torus dimension: each tile is one line of chips, coloured by its hottest link"
    else:
        node_of = {}
        for n, data in g.nodes(data=True):
            if data.get("chip"):
                c = data.get("coord", (0, n))
                node_of[n] = int(c[0]) if len(c) > 1 else 0
        for n, data in g.nodes(data=True):  # switches and NICs: the node of a chip they serve
            if not data.get("chip"):
                near = [node_of[m] for m in g.successors(n) if m in node_of]
                node_of[n] = near[0] if near and len(set(near)) == 1 else None
        kinds = sorted({g.edges[e].get("kind", "") for e in topo.links})
        nodes = sorted({v for v in node_of.values() if v is not None}) or [0]
        col = {v: i for i, v in enumerate(nodes)}
        mx = np.zeros((len(kinds), len(nodes)))
        arg = np.full(mx.shape, -1, dtype=np.int64)
        for i, (u, v) in enumerate(topo.links):
            kind = g.edges[u, v].get("kind", "")
            nd = node_of.get(u) if node_of.get(u) is not None else node_of.get(v)
            if nd is None:
                continue
            r, q = kinds.index(kind), col[nd]
            if lb[i] > mx[r, q] or arg[r, q] < 0:
                mx[r, q], arg[r, q] = lb[i], i
        hover = [[f"node {nodes[q]}, {kinds[r]} links<br>hottest {topo.link_name(int(arg[r, q])) if arg[r, q] >= 0 else '-'}: "
                  f"{fmt_bytes(mx[r, q])}" for q in range(len(nodes))] for r in range(len(kinds))]
        fig = go.Figure(go.Heatmap(z=mx / bdiv, x=nodes, y=kinds, customdata=hover, zmin=0,
                                   zmax=max(top / bdiv, 1e-12), colorscale="YlOrRd",
                                   hovertemplate="%{customdata}<extra></extra>",
                                   colorbar=dict(title=f"{bunit} on the<br>hottest link")))
        fig.update_xaxes(title="node")
        fig.update_yaxes(title="link kind")
        what = "per node and link kind: each tile is coloured by its hottest link"
    hot = hot_links(res, 3)
    hot_txt = "; ".join(f"{h['link']} {fmt_bytes(h['bytes'])}" for h in hot) or "no link carried bytes"
    fig.update_layout(title=f"Link load on {res.machine.spec}, aggregated {what}<br><sup>hottest links: "
                            f"{hot_txt}</sup>", height=460, margin=dict(l=50, r=20, t=90, b=50),
                      meta={"aggregated": True})
    return fig


def _log_ticks(lo: float, hi: float, unit_of, fmt) -> tuple[list, list]:
    """Tick values (1-2-5 per decade) and labels in adaptive units for a log axis."""
    import math

    if lo <= 0 or hi <= 0:
        return [], []
    vals = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo / 1.6 <= v <= hi * 1.6:
                vals.append(v)
    if len(vals) > 9:
        vals = [v for v in vals if str(v).lstrip("0.").startswith("1")] or vals
    return vals, [fmt(v) for v in vals]


#: Columns that identify a row of a sweep apart from its what-if knobs.
SWEEP_KEYS = ("suite", "case", "machine", "planner", "placement", "mesh", "src", "dst", "bandwidth_scale",
              "latency_scale", "itemsize", "itemsize_knob", "dtype", "strategy")
#: what-if knobs the what-if chart can put on its x axis -> (axis title, hover word, title words)
WHATIF_KNOBS = {"bandwidth_scale": ("link bandwidth scale (x the profile's)", "bandwidth", "link bandwidth"),
                "latency_scale": ("latency scale (x the profile's: every fixed and per-step latency)", "latency",
                                  "latency")}


def whatif_figure(df, x: str = "bandwidth_scale", y: str = "time_s") -> go.Figure:
    """Time against a what-if knob: one line per combination of every identifying
    column that is not on the x axis (so a line never joins two machines or two
    planners), coloured by planner, dashed per machine; the page passes one case at a
    time so a reader can follow it. Times are drawn in adaptive units (``meta`` keeps the
    divisor; the traces' ``customdata`` holds the seconds). ``x`` is a key of
    :data:`WHATIF_KNOBS`; the other knob, where it varies, splits lines like any other column."""
    axis_title, hover_word, title_words = WHATIF_KNOBS[x]
    keys = [k for k in SWEEP_KEYS if k in df.columns and k != x and df[k].nunique(dropna=False) > 1]
    fig = go.Figure()
    planners = sorted(str(p) for p in df["planner"].dropna().unique()) if "planner" in df else []
    machines = sorted(str(m) for m in df["machine"].dropna().unique()) if "machine" in df else []
    color = {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(planners)}
    dash = {m: ("solid", "dash", "dot", "dashdot", "longdash")[i % 5] for i, m in enumerate(machines)}
    div, unit = time_unit(float(df[y].max()) if len(df) else 0.0)
    groups = df.groupby(keys, dropna=False, sort=True) if keys else [((), df)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        part = part.sort_values(x)
        planner = str(part["planner"].iloc[0]) if "planner" in part else ""
        machine = str(part["machine"].iloc[0]) if "machine" in part else ""
        g = dict(zip(keys, [str(v) for v in key]))
        name = " on ".join(v for v in (planner, machine) if v) or "all rows"
        rest = {k: v for k, v in g.items() if k not in ("planner", "machine")}
        if rest:
            name += " (" + ", ".join(f"{k}={v}" for k, v in rest.items()) + ")"
        fig.add_scatter(x=part[x].tolist(), y=(part[y] / div).tolist(), customdata=part[y].tolist(),
                        mode="lines+markers", name=name, line=dict(color=color.get(planner, "#4C78A8"),
                                                                    dash=dash.get(machine, "solid")),
                        meta={"group": g},
                        hovertemplate=name + "<br>" + hover_word + " x%{x}<br>%{y:.4~g} " + unit + "<extra></extra>")
    fig.update_xaxes(type="log", title=axis_title)
    ys = [float(v) / div for v in df[y].dropna() if float(v) > 0]
    if ys:
        tv, _ = _log_ticks(min(ys), max(ys), None, str)
        fig.update_yaxes(tickvals=tv, ticktext=[f"{v:g}" for v in tv])
    xs = sorted({float(v) for v in df[x].dropna() if float(v) > 0})
    if xs and len(xs) <= 12:
        fig.update_xaxes(tickvals=xs, ticktext=[f"x{v:g}" for v in xs])
    fig.update_yaxes(type="log", title=f"simulated time ({unit})")
    cases = sorted(str(c) for c in df["case"].dropna().unique()) if "case" in df else []
    what = f"case {cases[0]}" if len(cases) == 1 else f"{len(cases)} cases"
    fig.update_layout(title=f"What if: simulated time of {what} vs {title_words}<br><sup>one line per planner "
                            "(colour) and machine (dash)</sup>", height=420, margin=dict(l=60, r=20, t=70, b=40),
                      meta={"divisor": div, "unit": unit})
    return fig
