"""Pure helpers of the Cross-mesh page (ui/pages/crossmesh.py): plan, simulate and draw a
redistribution between two meshes, and the whole-model weight-sync table. Cached by their
text inputs; no Streamlit widgets here (the page owns them)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

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


#: Vega-Lite, not plotly: the page fetches no plotly.js (4.7 MB) and draws in a fraction of the time.
_SVG = {"embedOptions": {"renderer": "svg"}}
PHASE_COLORS = {"on A": "#4C78A8", "transfer": "#F58518", "on B": "#54A24B"}


def _inline(spec: dict) -> dict:
    """``spec`` with its data set carried by every layer (a one-view spec becomes one
    layer): Streamlit sends a top-level data set apart from the spec, and a layer's own
    data travels inside it, so the spec on the page is the whole chart."""
    data = spec.pop("data")
    layers = spec.pop("layer", None) or [{"mark": spec.pop("mark"), "encoding": spec.pop("encoding")}]
    spec["layer"] = [dict(layer, data=data) for layer in layers]
    return spec


def layout_spec(plan, which: str) -> dict:
    """Devices of one mesh on a grid (first axis down, the rest across), each tile
    labelled with its device id and coloured by the block of the array it holds (replicas
    share a colour; blocks numbered in the order of their first corner).

    Worked example: ``[16384{fsdp}, 4096]`` on ``fsdp=8@0-7``: one row of 8 tiles ``dev 0``
    .. ``dev 7``, blocks 0..7, eight colours; ``[16384, 4096{tp}]`` on ``dp=2,tp=4@8-15``: 2 rows
    of 4, blocks 0..3 across, the two rows alike (dp replicates).
    """
    mesh = plan.src_mesh if which == "src" else plan.dst_mesh
    t = plan.src if which == "src" else plan.dst
    local = mesh.local()
    s, _ = type(t)(t.dims).regions(local)
    keys = {tuple(r): i for i, r in enumerate(np.unique(s, axis=0))}
    rows = local.sizes[0]
    cols = local.size // rows
    values = [{"row": pos // cols, "col": pos % cols, "device": f"dev {int(d)}", "block": keys[tuple(s[pos])]}
              for pos, d in enumerate(mesh.device_ids)]
    text = [] if local.size > 256 else [{"mark": {"type": "text", "fontSize": 11},
                                         "encoding": {"x": {"field": "col", "type": "ordinal"},
                                                      "y": {"field": "row", "type": "ordinal"},
                                                      "text": {"field": "device"}, "color": {"value": "black"}}}]
    return _inline({
        "title": {"text": f"{'source' if which == 'src' else 'target'}: {t} on {mesh}", "anchor": "start",
                  "subtitle": "tile: a device (its id); colour: the block of the array it holds (replicas alike)"},
        "data": {"values": values}, "height": 70 + 28 * min(rows, 16),  # title and subtitle included: 28 px a row
        "layer": [{"mark": {"type": "rect", "stroke": "white"},
                   "encoding": {"x": {"field": "col", "type": "ordinal", "axis": None},
                                "y": {"field": "row", "type": "ordinal", "axis": None},
                                "color": {"field": "block", "type": "ordinal", "legend": None,
                                          "scale": {"scheme": "tableau20"}},
                                "tooltip": [{"field": "device"}, {"field": "block"}]}}] + text,
        "usermeta": _SVG,
    })


def matrix_spec(view: dict) -> dict:
    """Who sends what to whom in the transfer step: one tile per sending and receiving
    device, coloured by the MiB sent (a scale from 0)."""
    mat = np.asarray(view["matrix"], dtype=float)
    values = [{"from": str(view["senders"][i]), "to": str(view["receivers"][j]), "MiB": float(mat[i, j]) / 2 ** 20}
              for i in range(mat.shape[0]) for j in range(mat.shape[1])] if mat.size else []
    return _inline({
        "title": {"text": "Who sends what to whom (transfer step)", "anchor": "start"},
        "data": {"values": values}, "height": 320,
        "mark": {"type": "rect"},
        "encoding": {"x": {"field": "to", "type": "ordinal", "sort": [str(d) for d in view["receivers"]],
                           "title": "receiving device"},
                     "y": {"field": "from", "type": "ordinal", "sort": [str(d) for d in view["senders"]],
                           "title": "sending device"},
                     "color": {"field": "MiB", "type": "quantitative", "title": "sent (MiB)",
                               "scale": {"scheme": "blues", "domainMin": 0}},
                     "tooltip": [{"field": "from", "title": "from"}, {"field": "to", "title": "to"},
                                 {"field": "MiB", "format": ".3f", "title": "MiB"}]},
        "usermeta": _SVG,
    })


def timeline_spec(view: dict) -> dict:
    """The three phases (collectives on A, the transfer, collectives on B) as bars over
    time in ms, one row per phase, A on top."""
    values = [{"phase": r["phase"], "start": r["start_s"] * 1e3, "end": r["end_s"] * 1e3,
               "what": f"{r['kind']} {r['label']}".strip(),
               "when": f"{r['start_s'] * 1e3:.4f} .. {r['end_s'] * 1e3:.4f} ms"} for r in view["timeline"]]
    order = ["on A", "transfer", "on B"]
    return _inline({
        "title": {"text": "Timeline of the three phases", "anchor": "start"},
        "data": {"values": values}, "height": 190,  # title and axis included: 3 rows of about 40 px
        "mark": {"type": "bar", "height": {"band": 0.7}},
        "encoding": {"y": {"field": "phase", "type": "nominal", "sort": order, "title": None},
                     "x": {"field": "start", "type": "quantitative", "title": "time (ms)"},
                     "x2": {"field": "end"},
                     "color": {"field": "phase", "type": "nominal", "legend": None,
                               "scale": {"domain": order, "range": [PHASE_COLORS[p] for p in order]}},
                     "tooltip": [{"field": "what"}, {"field": "when", "title": "start .. end"}]},
        "usermeta": _SVG,
    })


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
