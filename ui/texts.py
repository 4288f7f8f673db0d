"""Tables and sentences shared by the Simulate and Compare pages."""

from __future__ import annotations

import pandas as pd

from ui.fmt import fmt_bandwidth, fmt_bytes, fmt_seconds

BANDWIDTH_NOTE = (
    "**algbw** and **busbw** follow nccl-tests (PERFORMANCE.md): algbw = S / t, with t the op's "
    "simulated time and S the per-device size nccl-tests reports (the output buffer of an "
    "all-gather; the input buffer of a reduce-scatter, all-reduce or all-to-all; the bytes sent "
    "by a permute). busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, "
    "reduce-scatter and all-to-all, x 1 for a permute (n: group size). GB/s are 10^9 bytes/s. "
    "**link peak** is one link in one direction; **bus peak** a chip's injection bandwidth "
    "(all its links, one direction)."
)


#: The Simulate page's op table in two parts, each narrow enough for the page.
OPS_TIME_COLUMNS = ("op", "kind", "algorithm", "n", "start", "duration", "analytic estimate", "recv per device",
                    "out buffer")
OPS_BANDWIDTH_COLUMNS = ("op", "kind", "algbw", "busbw", "link peak", "bus peak")


def ops_frame(ops: list[dict]) -> pd.DataFrame:
    return pd.DataFrame({
        "op": [o["index"] for o in ops],
        "kind": [o["kind"] for o in ops],
        "algorithm": [o.get("algorithm") or "-" for o in ops],
        "start": [fmt_seconds(o["start_s"]) for o in ops],
        "duration": [fmt_seconds(o["duration_s"]) for o in ops],
        "analytic estimate": [fmt_seconds(o["analytic_s"]) for o in ops],
        "recv per device": [fmt_bytes(o["recv_bytes"]) for o in ops],
        "out buffer": [fmt_bytes(o["out_bytes"]) for o in ops],
        "n": [str(o.get("group_size") or "-") for o in ops],  # one type per column (Arrow)
        "algbw": [fmt_bandwidth(o.get("algbw_Bps")) for o in ops],
        "busbw": [fmt_bandwidth(o.get("busbw_Bps")) for o in ops],
        "link peak": [fmt_bandwidth(o.get("link_peak_Bps")) for o in ops],
        "bus peak": [fmt_bandwidth(o.get("bus_peak_Bps")) for o in ops],
    })


#: What each binding term of ``models.analytic.schedule_lower_bound`` means (its
#: ``lower_bound_kind``). Torus bisections are ``bisection_<dim>``; a ``schedule:`` prefix
#: means the schedule carried no redistribution (no mesh/src/dst in its meta), so the
#: bound is the sum over its ops of each op's largest term.
LOWER_BOUND_HELP = {
    "injection": "what one device (or a group of devices that share a block) must receive, "
                 "namely the part of its target block it does not already hold, over the line "
                 "rate of all its incoming links",
    "reduction": "the partial-sum values that must be merged, (nR-1) N for a sum pending over "
                 "nR devices, received somewhere, over every device's incoming links together "
                 "(no switch or fabric reduces in the network on this machine)",
    "nic_cut": "what the GPUs of one node lack from other nodes, over the node's NICs (the "
               "links into the node)",
    "bisection": "what one half of a torus dimension lacks from the other half, over the links "
                 "that cross into it (the dimension's bisection)",
    "latency": "the least latency any plan that moves data pays on this machine under the "
               "model: one collective launch (the cheapest protocol's fixed latency) plus the "
               "link latencies of the hops its data must cross, on top of the bytes over the "
               "line rate",
    "lp": "a max-concurrent-flow linear program: every byte routed over the real links at "
          "their line rates at once, the least time any routing needs (computed on small "
          "machines only)",
    # kept for results written before the term names above
    "redistribution": "the bytes a device must receive (the part of its target block it does not "
                      "hold) over its injection bandwidth",
    "schedule": "the bytes this schedule makes a device receive, over its injection bandwidth",
}


#: What the two lower bounds the pages show are, in one sentence each (the Plan page's is the
#: ``auto`` search's, ``Plan.search["lower_bound_s"]``: ``synth.planners.cost.lower_bound_s``;
#: Simulate's is the machine's, ``models.analytic.schedule_lower_bound``). Worked example, the
#: default scenario (tpu-v4 4x4x4): search bound 36.1 us (one launch plus the neediest device's
#: bytes over its links); machine bound 98.2 us, the bisection cut of a torus dimension (its
#: injection term, with the hops' latency, is 40.1 us; its latency floor 9 us). At 16x16x16,
#: data=512,model=8: 5.49 us against 10.8 us.
SEARCH_BOUND_TEXT = ("the injection term alone: the bytes the neediest device must "
                     "receive over its own links' rate plus the least launch cost, under the planner's cost "
                     "model; it leaves out the hops' latency and the torus or network cuts, so the Simulate "
                     "page's machine lower bound, which has them, can be larger")
MACHINE_BOUND_TEXT = ("the machine's lower bound for every plan of this redistribution under the model: the "
                      "largest of the injection term (with the hops' latency), the latency floor, the cuts "
                      "(bisection of each torus dimension, a node's NICs) and, on small machines, the LP")


def lower_bound_terms_text(terms: dict, fmt_seconds) -> str:
    """``'injection 40.1 us, latency 9 us, bisection_X 98.2 us'``: every term of the machine
    bound, in the order the model gives them."""
    return ", ".join(f"{k} {fmt_seconds(v)}" for k, v in (terms or {}).items())


def lower_bound_help(kind: str | None) -> str:
    """One sentence on the binding term ``kind`` of the lower bound."""
    if not kind:
        return "not known (see docs/simulator.md)"
    base, per_op = kind, False
    if base.startswith("schedule:"):
        base, per_op = base[len("schedule:"):], True
    dim = None
    if base.startswith("bisection_"):
        base, dim = "bisection", base[len("bisection_"):]
    text = LOWER_BOUND_HELP.get(base)
    if text is None:
        return f"{kind}: see docs/simulator.md"
    if dim:
        text = text.replace("a torus dimension", f"torus dimension {dim}")
    if per_op:
        text = ("summed over the schedule's ops, each op's largest term; here mostly " + text
                + " (the schedule names no redistribution, so no whole-plan bound applies)")
    return text + "."


def model_error_text(me) -> str | None:
    """One line on the model's error against published measurements, or ``None``."""
    if not me:
        return None
    if me.get("pending"):
        return ("Model error against published measurements: being computed (`simulator validate`); "
                "it appears on the next update.")
    if "missing" in me:
        return ("No published measurements for this machine class in `simulator validate` "
                f"(it covers {', '.join(me['missing'][:8])}); the model's error here is unknown.")
    worst = f", worst {me['worst_pct']:.0f} %" if me.get("worst_pct") is not None else ""
    return (f"Model error for this machine class ({me.get('system')}): {me['mape_pct']:.1f} % mean absolute "
            f"error against {me.get('n') or 'the'} published measurements{worst} "
            "(`python -m simulator validate`).")


#: The strategies' table in three parts, each narrow enough for the page: ``(title, columns
#: after "strategy", caption)``.
COMPARE_TABLES = (
    ("Time", ("compiler", "collectives", "simulated time", "collectives only", "local ops",
              "time / lower bound"), None),
    ("Memory", ("peak memory per device", "compiled temp", "compiled peak", "full rematerialization"),
     "Peak memory per device: the simulated schedule's largest live bytes on a device. Compiled temp: the "
     "compiled program's temporaries per device; compiled peak: the compiler's own peak of live buffers per "
     "device (arguments, outputs and temporaries in every memory space, from memory_analysis), which shows a "
     "rematerialisation that libtpu keeps out of HBM temporaries."),
    ("Links", ("bytes on links", "slowest op", "its algbw", "its busbw", "bus peak"),
     "algbw/busbw of each strategy's slowest op, by nccl-tests' conventions (see the Simulate page); "
     "bus peak: a chip's injection bandwidth."),
)
