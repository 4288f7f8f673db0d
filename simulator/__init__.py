"""simulator: SimPy replay of device-level schedules on machine topologies.

    from simulator import simulate, simulate_plan
    res = simulate_plan(synth.synthesize(mesh, src, dst), "tpu-v4:4x4x4")
    res.time_s, res.peak_bytes_max_device, res.trace_df()

Figures: :mod:`simulator.plots` (plotly, imported lazily).
"""

from simulator.engine import simulate, simulate_plan
from simulator.result import SimResult

__all__ = ["SimResult", "simulate", "simulate_plan"]
