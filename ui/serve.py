"""``python -m ui.serve [streamlit options]``: the explorer with its heavy imports paid
before the first visitor.

``streamlit run app.py`` runs nothing until a browser connects, so the first page
pays every first-call cost (pandas, pyarrow, plotly's validators, the simulator, the
models' tables: seconds on a small machine). This launcher pays them first, in the
server's own process, and then starts the same server (``streamlit.web.bootstrap``) on
``app.py``; options after ``ui.serve`` are Streamlit's (``--server.port 8502``). The
preload also plans the default scenario once, which fills the models' per-op cost
caches the ``auto`` planner's search reads.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def preload() -> float:
    """Import what the pages use and run the default scenario's plan once; seconds taken."""
    t0 = time.perf_counter()
    import pandas  # noqa: F401
    import plotly.graph_objects as go
    import pyarrow  # noqa: F401

    go.Figure(go.Scatter(x=[0], y=[0])).to_json()
    import synth
    from ui import figures, scenario, texts  # noqa: F401

    try:
        import models
        import simulator  # noqa: F401
        from models.plan_cost import machine_cost

        sc = scenario.DEFAULT_SCENARIO
        m = models.load_profile(sc.machine)
        mesh = synth.Mesh.parse(sc.mesh)
        src = synth.parse_type(sc.src, scenario.parse_shape(sc.shape))
        dst = synth.parse_type(sc.dst, src.shape)
        synth.synthesize(mesh, src, dst, planner="auto", itemsize=sc.itemsize, cost=machine_cost(m, mesh))
    except Exception:  # noqa: BLE001 - a missing package: the page says so later
        pass
    return time.perf_counter() - t0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    secs = preload()
    print(f"ui.serve: preloaded in {secs:.1f} s", file=sys.stderr, flush=True)
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *argv]
    return cli.main()


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
