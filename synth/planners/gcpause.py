"""The cyclic garbage collector paused while a search runs.

A search allocates a few million small tuples (states, steps, successor entries) and
keeps most of them until it ends; CPython's generational collector then re-walks that
growing heap at every older-generation collection, which cost about a quarter of
the search's CPU on the bench's budget-exhausting cases (measured: 1,000,000 moves over
20 cases took 9.8 s of CPU with the default thresholds, 7.5 s with the collector off,
one run each on a loaded machine; the plans are the same either way). :func:`gc_paused`
turns the collector off for the duration of a planner call or a search pass and
restores it after.

Invariants, stated once:

* the collector's state is restored exactly: it is re-enabled when the outermost paused
  region ends, and only if it was enabled when the first began (a caller who disabled it
  keeps it disabled);
* nested and concurrent regions (planning threads) share one count under a lock: the
  collector stays off while any region is open;
* nothing is freed late: reference counting frees every acyclic object as before, and
  a planner call makes no cyclic garbage (``tests/test_synth_no_cycles.py``, compiled and
  pure), so its whole search is freed when it returns, not left for the collector to walk
  later in whatever code runs next.

Closures and cycles. A cycle through a search's objects keeps all of them alive until the
collector runs (one budget-spending call left 804,120 objects; over the bench's 2000 cases
a plain loop of calls took 108 s of CPU with the cycles and 71 s without, side by side). The rules the planners
follow:

* an inner function that calls a sibling inner function takes it as a default argument
  (``def relax(..., key=key)``), not from the enclosing scope: compiled (Cython), the
  enclosing scope is one object holding every variable an inner function reads, so a
  sibling read through it is a cycle, scope -> function -> scope;
* a recursive closure (``rec``, ``pick``, ``place``) is cleared (``rec = None``) in a
  ``finally`` once the recursion ends: it refers to itself;
* an error kept past its ``except`` block is kept without its traceback and chained
  errors (``synth.errors.kept_for_message``): their frames would hold the list it is in.

Example::

    with gc_paused():
        found = astar(sp, budget, cap, full)
"""

from __future__ import annotations

import functools
import gc
import threading

_lock = threading.Lock()
_depth = 0          # paused regions open now (all threads)
_restore = False    # whether the collector was enabled when the outermost region began


class gc_paused:
    """A context manager (and decorator) pausing the cyclic garbage collector; see the
    module doc. Reentrant and thread-safe."""

    __slots__ = ()

    def __enter__(self):
        global _depth, _restore
        with _lock:
            if _depth == 0:
                _restore = gc.isenabled()
                gc.disable()
            _depth += 1
        return self

    def __exit__(self, *exc):
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def paused(*args, **kwargs):
            with gc_paused():
                return fn(*args, **kwargs)

        return paused

    def __repr__(self):
        return "gc_paused()"


def paused_depth() -> int:
    """Paused regions open now (for tests)."""
    return _depth


__all__ = ["gc_paused", "paused_depth"]
