"""The pages' calls into the packages, by concern (this module only re-exports them,
so code written against ``ui.compute`` keeps working):

* :mod:`ui.plans`    -- plans and code: parsing, planning, plan JSON, JAX code;
* :mod:`ui.machines` -- machines and models: profiles, sized machines, HBM, model error;
* :mod:`ui.runs`     -- background work: simulations (inline or a worker job), the
  executor's subprocesses (XLA's schedules, local measurements);
* :mod:`ui.files`    -- results and files: the results root, sweeps, calibration files.

New code imports the module of its concern directly.
"""

from __future__ import annotations

from synth.errors import RedistributionError
from ui.files import (
                      REPO_ROOT,
                      build_sweep_report,
                      calibrated_dir,
                      calibrated_profiles,
                      check_calibration_dir,
                      check_results_path,
                      read_calibration,
                      results_folders,
                      results_root,
                      sweep_rows,
)
from ui.machines import (
                      FALLBACK_PROFILES,
                      default_size,
                      hbm_capacity,
                      machine,
                      machine_profiles,
                      missing,
                      model_error,
                      scenario_devices,
)
from ui.plans import (
                      AUTO_BUDGET_S,
                      SHARDING_FORMS,
                      clean_message,
                      jax_code,
                      make_plan,
                      parse_inputs,
                      plan_document,
                      plan_for,
                      plan_json,
                      planners,
)
from ui.runs import (
                      MAX_SIM_DEVICES,
                      Pending,
                      WorkerError,
                      check_placement,
                      check_replay,
                      compare_simulations,
                      measure_local,
                      run_work,
                      simulation,
                      split_replayable,
                      strategy_schedules,
                      warm_up,
                      xla_schedules,
)

__all__ = [
    "AUTO_BUDGET_S", "FALLBACK_PROFILES", "MAX_SIM_DEVICES", "REPO_ROOT", "SHARDING_FORMS", "Pending",
    "RedistributionError", "WorkerError", "build_sweep_report", "calibrated_dir", "calibrated_profiles",
    "check_calibration_dir", "check_placement", "check_replay", "check_results_path", "clean_message",
    "compare_simulations", "default_size", "hbm_capacity", "jax_code", "machine", "machine_profiles",
    "make_plan", "measure_local", "missing", "model_error", "parse_inputs", "plan_document", "plan_for",
    "plan_json", "planners", "read_calibration", "results_folders", "results_root", "run_work",
    "scenario_devices", "simulation", "split_replayable", "strategy_schedules", "sweep_rows", "warm_up",
    "xla_schedules",
]
