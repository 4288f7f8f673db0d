"""Pure helpers of the Cross-mesh page (ui/pages/crossmesh.py): plan, simulate and draw a
redistribution between two meshes, and the whole-model weight-sync table. Cached by their
text inputs; no Streamlit widgets here (the page owns them)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas  # noqa: F401 - before plotly, which fails on a half-imported pandas (ui.runs.warm_up)

ROOT = Path(__file__).resolve().parents[1]
SYNC_CONFIGS = ROOT / "experiments" / "configs" / "weight-sync"
EXAMPLE = {"src_mesh": "fsdp=8@0-7", "src": "[16384{fsdp}, 4096]", "dst_mesh": "dp=2,tp=4@8-15",
           "dst": "[16384, 4096{tp}]", "machine": "h100-multinode:2", "itemsize": 2}
_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text: str) -> str:
    """``text`` with Markdown's special characters escaped (user text on the page)."""
    return _MD.sub(r"\\\1", str(text))


@lru_cache(maxsize=32)
def cross_view(src_mesh: str, src: str, dst_mesh: str, dst: str, machine: str, itemsize: int) -> dict:
    """The plan (ranked on the machine), its simulation and the figures' data."""
    from simulator.crossmesh import plan_on_machine, simulate_crossmesh

    plan = plan_on_machine(src_mesh, src, dst_mesh, dst, machine, itemsize)
    res = simulate_crossmesh(plan, machine)
    snd, rcv, mat = plan.transfer.matrix()
    return {"plan": plan, "text": str(plan), "sim": res.to_dict(), "timeline": res.timeline_rows(),
            "senders": snd, "receivers": rcv, "matrix": mat, "metrics": plan.metrics()}


def layout_rows(plan, which: str) -> list[dict]:
    """Per device of one mesh: machine id, mesh coordinates, the box it holds."""
    mesh = plan.src_mesh if which == "src" else plan.dst_mesh
    t = plan.src if which == "src" else plan.dst
    local = mesh.local()
    s, e = type(t)(t.dims).regions(local)
    rows = []
    for pos, d in enumerate(mesh.device_ids):
        coord = ",".join(f"{n}={int(c)}" for n, c in zip(local.names, local.coords[pos]))
        box = " x ".join(f"[{int(a)}:{int(b)})" for a, b in zip(s[pos], e[pos]))
        rows.append({"device": int(d), "coords": coord, "block": box})
    return rows


def layout_figure(plan, which: str):
    """Devices of one mesh on a grid (first axis down, the rest across), coloured by the block
    of the array each holds (replicas share a colour)."""
    import plotly.graph_objects as go

    mesh = plan.src_mesh if which == "src" else plan.dst_mesh
    t = plan.src if which == "src" else plan.dst
    local = mesh.local()
    s, _ = type(t)(t.dims).regions(local)
    keys = {tuple(r): i for i, r in enumerate(np.unique(s, axis=0))}
    block = np.array([keys[tuple(r)] for r in s])
    rows = local.sizes[0]
    cols = local.size // rows
    z = block.reshape(rows, cols)
    ids = np.array(mesh.device_ids).reshape(rows, cols)
    fig = go.Figure(go.Heatmap(z=z, text=[[f"dev {v}" for v in r] for r in ids], texttemplate="%{text}",
                               colorscale="Viridis", showscale=False,
                               hovertemplate="device %{text}<br>block %{z}<extra></extra>"))
    fig.update_layout(title=f"{'source' if which == 'src' else 'target'}: {t} on {mesh}", height=260,
                      margin=dict(l=10, r=10, t=40, b=10), yaxis=dict(autorange="reversed", showticklabels=False),
                      xaxis=dict(showticklabels=False))
    return fig


def matrix_figure(view: dict):
    import plotly.graph_objects as go

    mat = view["matrix"]
    fig = go.Figure(go.Heatmap(z=mat / 2**20 if mat.size else [[0]], x=[f"{d}" for d in view["receivers"]],
                               y=[f"{d}" for d in view["senders"]], colorscale="Blues",
                               colorbar=dict(title="MiB"),
                               hovertemplate="from %{y} to %{x}: %{z:.3f} MiB<extra></extra>"))
    fig.update_layout(title="who sends what to whom (transfer step)", xaxis_title="receiving device",
                      yaxis_title="sending device", height=360, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis=dict(type="category"), yaxis=dict(type="category", autorange="reversed"))
    return fig


def timeline_figure(view: dict):
    import plotly.graph_objects as go

    rows = view["timeline"]
    fig = go.Figure()
    colors = {"on A": "#4c78a8", "transfer": "#f58518", "on B": "#54a24b"}
    for r in rows:
        fig.add_trace(go.Bar(x=[(r["end_s"] - r["start_s"]) * 1e3], y=[r["phase"]], base=[r["start_s"] * 1e3],
                             orientation="h", marker_color=colors.get(r["phase"], "#999"),
                             name=f"{r['kind']} {r['label']}", showlegend=False,
                             hovertemplate=f"{r['kind']} {r['label']}<br>%{{base:.4f}} .. %{{x:.4f}} ms<extra></extra>"))
    fig.update_layout(title="timeline (ms)", barmode="overlay", height=220, xaxis_title="ms",
                      margin=dict(l=10, r=10, t=40, b=10), yaxis=dict(categoryorder="array",
                                                                      categoryarray=["on B", "transfer", "on A"]))
    return fig


def sync_configs() -> list[str]:
    return sorted(p.stem for p in SYNC_CONFIGS.glob("*.yaml"))


@lru_cache(maxsize=8)
def sync_table(name: str) -> dict:
    """The whole-model table of one shipped config: ours, the baselines, the bound, the published figure."""
    from experiments.weightsync import load_sync_config, plan_sync

    if name not in sync_configs():
        from synth.errors import RedistributionError

        raise RedistributionError(f"weight-sync config {name!r} is not one of {sync_configs()}")
    r = plan_sync(load_sync_config(SYNC_CONFIGS / f"{name}.yaml")).to_dict()
    lb = r["lower_bound_s"]
    rows = [{"schedule": "ours", "time_s": r["time_s"], "x bound": r["time_s"] / lb if lb else None}]
    for k, v in r["baselines"].items():
        rows.append({"schedule": k, "time_s": v["time_s"], "x bound": v["time_s"] / lb if lb else None})
    rows.append({"schedule": f"lower bound ({r['lower_bound_kind']})", "time_s": lb, "x bound": 1.0})
    pub = r.get("published")
    if pub:
        rows.append({"schedule": f"published ({pub['method']})", "time_s": pub["time_s"],
                     "x bound": pub["time_s"] / lb if lb else None})
    return {"result": r, "rows": rows}
