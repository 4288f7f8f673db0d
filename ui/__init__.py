"""Streamlit front end helpers for ``app.py``.

Layout:

* :mod:`ui.scenario`  -- the scenario inputs (machine, mesh, array, shardings, planner),
  shared by the Plan, Simulate and Compare pages through ``st.session_state``;
* :mod:`ui.compute`   -- thin cached wrappers around the packages (synth, models,
  simulator, executor, experiments). No algorithm lives here, only calls;
* :mod:`ui.figures`   -- plotly figures built from results;
* :mod:`ui.fmt`       -- formatting at the edge (bytes -> MiB, seconds -> us);
* ``ui/pages/*.py``   -- one module per page, routed by ``st.navigation`` in ``app.py``.

This package is named ``ui`` (not ``app``) so it does not shadow ``app.py``.
"""
