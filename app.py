"""Redistribution explorer: the Streamlit front end.

Run it with ``streamlit run app.py`` (or ``make run``). ``st.navigation`` routes to
the page modules in ``ui/pages/``; the shared scenario inputs (machine, mesh, array,
shardings, planner) sit in the sidebar of the Plan, Simulate and Compare pages.
Pages only call the cached functions of ``ui.plans``, ``ui.machines``, ``ui.runs`` and
``ui.files`` (re-exported by ``ui.compute``), which call the packages.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from ui import machines, plans, runs, scenario, share  # noqa: E402
from ui.errors import escape_md  # noqa: E402

st.set_page_config(page_title="Redistribution explorer", page_icon=":material/swap_horiz:",
                   layout="wide")

PAGES = [
    # the default page is served at "/"; the hidden alias serves the same page at /plan,
    # so deep links to /plan work (Streamlit gives the default page no other path)
    st.Page("ui/pages/plan.py", title="Plan", icon=":material/account_tree:", url_path="home",
            default=True),
    st.Page("ui/pages/plan.py", title="Plan", icon=":material/account_tree:", url_path="plan",
            visibility="hidden"),
    st.Page("ui/pages/simulate.py", title="Simulate", icon=":material/timeline:",
            url_path="simulate"),
    st.Page("ui/pages/compare.py", title="Compare", icon=":material/compare_arrows:",
            url_path="compare"),
    st.Page("ui/pages/calibration.py", title="Calibration", icon=":material/tune:",
            url_path="calibration"),
    st.Page("ui/pages/sweeps.py", title="Sweeps", icon=":material/table_chart:",
            url_path="sweeps"),
    st.Page("ui/pages/crossmesh.py", title="Cross-mesh", icon=":material/hub:", url_path="crossmesh"),
]
#: Pages that read the shared scenario (and so draw its inputs in the sidebar).
SCENARIO_PAGES = {"", "home", "plan", "simulate", "compare"}

share.load_from_url()
page = st.navigation(PAGES)
try:
    if page.url_path in SCENARIO_PAGES:
        scenario.render_sidebar(machines.machine_profiles(), plans.planners(), machines.default_size)
        for w in share.url_warnings():
            st.sidebar.warning(escape_md(w))
    page.run()
    share.save_page_fields()
    share.sync_url()
    runs.warm_up()  # once per server, in a background thread, after the first page is drawn
except Exception as e:  # noqa: BLE001 - the last net: one line on the page, never a traceback
    if type(e).__module__.startswith("streamlit"):  # st.rerun / st.stop and friends
        raise
    st.error(escape_md(f"Something went wrong on this page: {type(e).__name__}: {e}. The other pages still "
             "work; please report this with the link in the address bar."))
