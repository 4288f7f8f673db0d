"""``python -m ui.serve [streamlit options]``: the explorer with the first page's work done
before the first visitor asks for it.

``streamlit run app.py`` runs nothing of the app until a browser connects, so the first
page pays every first-call cost: the app's imports, the ``auto`` planner's search of the
default scenario with cold per-op cost caches, the generated JAX code (about 1.5 s of the
script run on a 2-core machine). This launcher starts the same server
(``streamlit.web.cli``, options after ``ui.serve`` are Streamlit's: ``--server.port 8502``)
at once and, in a background thread started first, fills the caches the default Plan page
reads (:func:`warm_first_page`: the same cached functions, called with the default
scenario, so the page's script run finds them computed, or waits on Streamlit's per-key
lock for the one being computed). Then it pays the other pages' first-call costs (pandas,
pyarrow, plotly's validators) and simulates the default scenario for the Simulate page
(:func:`warm_other_pages`), after the first page has been drawn or a few seconds have
passed, so they do not compete with it.
``make run`` starts the app this way; a warm-up that fails logs one line and changes
nothing else (the page computes what it needs itself).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Seconds the second warm-up phase waits for the first page to be drawn before it starts.
OTHER_PAGES_AFTER_S = 8.0
#: Set when the first warm-up phase (the default Plan page's caches) has finished.
FIRST_PAGE_WARM = threading.Event()
_log = logging.getLogger(__name__)


def warm_first_page() -> float:
    """Call the cached functions the default Plan page calls, with the default scenario
    (``ui.scenario.DEFAULT_SCENARIO``); seconds taken."""
    t0 = time.perf_counter()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from ui import machines, plans, scenario

    sc = scenario.DEFAULT_SCENARIO
    machines.machine_profiles()
    plans.planners()
    machines.default_size(sc.machine_profile)
    plan = plans.plan_for(sc)
    easy = plans.plan_for(sc, "easy")
    cap = machines.hbm_capacity(sc)
    plans.plan_memory_chart(plan, easy.max_shard_bytes, cap)
    plans.steps_table(plan)
    plans.plan_document(plan, sc)
    plans.jax_code(plan, sc.dtype)
    return time.perf_counter() - t0


def warm_other_pages() -> float:
    """The other pages' first-call imports (pandas, pyarrow, plotly and its validators, the
    figure modules), then the default scenario's simulation, the Simulate page's view
    (``ui.runs.prefill_simulation``); seconds taken. (The job workers' fork server is
    ``ui.runs.warm_up``'s, started by ``app.py`` after the first page.)"""
    t0 = time.perf_counter()
    import pandas  # noqa: F401  (before plotly: see docs/app.md, "Background work and limits")
    import plotly.graph_objects as go
    import pyarrow  # noqa: F401

    go.Figure(go.Scatter(x=[0], y=[0])).to_json()
    from ui import figures, plans, runs, scenario, texts  # noqa: F401

    sc = scenario.DEFAULT_SCENARIO
    runs.prefill_simulation(plans.plan_for(sc), sc)
    return time.perf_counter() - t0


def _first_page_drawn() -> bool:
    """``app.py`` starts ``ui.runs.warm_up``'s thread once a page has been drawn."""
    return any(t.name == "app-warm-up" for t in threading.enumerate())


def _warm(other_after_s: float = OTHER_PAGES_AFTER_S) -> None:
    try:
        secs = warm_first_page()
        print(f"ui.serve: the default Plan page's caches filled in {secs:.1f} s", file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - the page computes it itself then
        _log.warning("ui.serve: first-page warm-up skipped: %s: %s", type(e).__name__, e)
    finally:
        FIRST_PAGE_WARM.set()
    deadline = time.monotonic() + other_after_s
    while time.monotonic() < deadline and not _first_page_drawn():
        time.sleep(0.1)
    if _first_page_drawn():  # the browser is still drawing it: as ui.runs.warm_up, wait first
        from ui import runs

        time.sleep(runs.warm_up_delay_s())
    try:
        secs = warm_other_pages()
        print(f"ui.serve: the other pages' first-call costs paid in {secs:.1f} s", file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - a cold first simulation is only slower
        _log.warning("ui.serve: warm-up of the other pages skipped: %s: %s", type(e).__name__, e)


def start_warm_up() -> threading.Thread:
    """Start the warm-up thread (:func:`warm_first_page`, then :func:`warm_other_pages`)."""
    t = threading.Thread(target=_warm, name="ui-serve-warm-up", daemon=True)
    t.start()
    return t


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    start_warm_up()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *argv]
    return cli.main()


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
