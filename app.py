"""Redistribution explorer: the Streamlit front end.

Run it with ``streamlit run app.py`` (or ``make run``). ``st.navigation`` routes to
the page modules in ``ui/pages/``; the shared scenario inputs (machine, mesh, array,
shardings, planner) sit in the sidebar of the Plan, Simulate and Compare pages.
Pages only call cached functions of ``ui.compute``, which call the packages.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from ui import compute, scenario  # noqa: E402

st.set_page_config(page_title="Redistribution explorer", page_icon=":material/swap_horiz:",
                   layout="wide")

PAGES = [
    st.Page("ui/pages/plan.py", title="Plan", icon=":material/account_tree:", url_path="plan",
            default=True),
    st.Page("ui/pages/simulate.py", title="Simulate", icon=":material/timeline:",
            url_path="simulate"),
    st.Page("ui/pages/compare.py", title="Compare", icon=":material/compare_arrows:",
            url_path="compare"),
    st.Page("ui/pages/calibration.py", title="Calibration", icon=":material/tune:",
            url_path="calibration"),
    st.Page("ui/pages/sweeps.py", title="Sweeps", icon=":material/table_chart:",
            url_path="sweeps"),
]
#: Pages that read the shared scenario (and so draw its inputs in the sidebar).
SCENARIO_PAGES = {"", "plan", "simulate", "compare"}

page = st.navigation(PAGES)
if page.url_path in SCENARIO_PAGES:
    scenario.render_sidebar(compute.machine_profiles(), compute.planners(), compute.default_size)
page.run()
