"""Streamlit front end helpers for ``app.py``.

Layout:

* :mod:`ui.scenario`  -- the scenario inputs (machine, mesh, array, shardings, planner),
  shared by the Plan, Simulate and Compare pages through ``st.session_state``;
* :mod:`ui.plans`     -- plans and code (parsing, planning, plan JSON, JAX code);
* :mod:`ui.machines`  -- machines and models (profiles, sized machines, model error);
* :mod:`ui.runs`      -- background work (simulations, executor subprocesses);
* :mod:`ui.files`     -- results and files (results root, sweeps, calibration files);
* :mod:`ui.compute`   -- re-exports the four above. No algorithm lives in any of them;
* :mod:`ui.figures`   -- plotly figures built from results;
* :mod:`ui.fmt`       -- formatting at the edge (bytes -> MiB, seconds -> us);
* ``ui/pages/*.py``   -- one module per page, routed by ``st.navigation`` in ``app.py``.

This package is named ``ui`` (not ``app``) so it does not shadow ``app.py``.
"""
