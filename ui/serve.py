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
lock for the one being computed). Then, once the first page has been drawn (or after
:data:`OTHER_PAGES_AFTER_S`), the same thread pays every other page's first-call costs
(:func:`warm_other_pages`, ``ui.runs.warm_pages``: imports, the job workers' fork server,
and the cached functions of Simulate, Compare, Cross-mesh, Sweeps and Calibration with their
defaults), so they do not compete with the first page. It is the server's only warm-up:
``app.py``'s ``ui.runs.warm_up`` starts none when this thread owns it.
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


def warm_other_pages() -> tuple[float, str]:
    """The other pages' first-call costs (``ui.runs.warm_pages``: pandas, pyarrow, plotly,
    the job workers' fork server, and the cached functions Simulate, Compare, Cross-mesh,
    Sweeps and Calibration call on their first visit with their defaults); seconds taken
    and the per-step line (``ui.runs.warm_text``)."""
    from ui import runs

    t0 = time.perf_counter()
    steps = runs.warm_pages()
    return time.perf_counter() - t0, runs.warm_text(steps)


def _warm(other_after_s: float = OTHER_PAGES_AFTER_S) -> None:
    from ui import runs

    try:
        secs = warm_first_page()
        print(f"ui.serve: the default Plan page's caches filled in {secs:.1f} s", file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - the page computes it itself then
        _log.warning("ui.serve: first-page warm-up skipped: %s: %s", type(e).__name__, e)
    finally:
        FIRST_PAGE_WARM.set()
    # the browser is still drawing the first page when its script run ends: as ui.runs.warm_up, wait
    if runs.FIRST_PAGE_DRAWN.wait(other_after_s) and runs._STOP.wait(runs.warm_up_delay_s()):
        return  # the interpreter is exiting
    try:
        secs, steps = warm_other_pages()
        print(f"ui.serve: the other pages' first-call costs paid in {secs:.1f} s ({steps})", file=sys.stderr,
              flush=True)
    except Exception as e:  # noqa: BLE001 - a cold first visit is only slower
        _log.warning("ui.serve: warm-up of the other pages skipped: %s: %s", type(e).__name__, e)


def start_warm_up() -> threading.Thread:
    """Start the one warm-up thread of the server (:func:`warm_first_page`, then
    :func:`warm_other_pages`); ``app.py``'s ``ui.runs.warm_up`` then starts none."""
    from ui import runs

    runs.SERVE_OWNS_WARM_UP.set()
    return runs.start_warm_thread(_warm, "ui-serve-warm-up")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    start_warm_up()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), *argv]
    return cli.main()


if __name__ == "__main__":
    from synth.cliutil import exit_main

    exit_main(main)
