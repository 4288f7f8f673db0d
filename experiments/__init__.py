"""experiments: named suites of redistributions, sweep configs, the resumable batch
runner and the HTML report (``python -m experiments --help``).

Layering: experiments -> executor -> simulator -> models -> synth. Nothing here
imports jax; XLA schedules and measurements come from the executor inside worker
processes.
"""

from experiments.case import Case, ExperimentError

__all__ = ["Case", "ExperimentError"]
