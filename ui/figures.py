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
