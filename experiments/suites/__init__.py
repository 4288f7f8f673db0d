"""Named suites of redistribution cases.

``load_suite(name, **params)`` returns a list of :class:`experiments.case.Case`:

* ``transformer`` -- layout changes from real training and serving jobs;
* ``random``      -- seeded random cases (params: ``count``, ``seed``, ``max_devices``,
  ``min_devices``);
* ``xla-issues``  -- reshardings reported as slow or memory-hungry in public issues;
* ``pending-sums`` -- unreduced (pending) sums reduced on the way: TP -> SP, gradients.

Every suite also accepts the filters ``names`` (list of case names to keep),
``max_devices`` and ``min_devices``.
"""

from __future__ import annotations

from experiments.case import Case, ExperimentError


def _transformer(**kw):
    from experiments.suites import transformer

    return transformer.cases(**kw)


def _random(**kw):
    from experiments.suites import random_cases

    return random_cases.cases(**kw)


def _xla_issues(**kw):
    from experiments.suites import xla_issues

    return xla_issues.cases(**kw)


def _pending_sums(**kw):
    from experiments.suites import pending_sums

    return pending_sums.cases(**kw)


SUITES = {"transformer": _transformer, "random": _random, "xla-issues": _xla_issues,
          "pending-sums": _pending_sums}
_GENERATOR_PARAMS = {"random": {"count", "seed", "max_devices", "min_devices"}}
_FILTERS = {"names", "max_devices", "min_devices"}


def load_suite(name: str, **params) -> list[Case]:
    """The cases of suite ``name`` after the generator params and filters."""
    if name not in SUITES:
        raise ExperimentError(f"unknown suite {name!r}; choose one of {sorted(SUITES)}")
    gen_keys = _GENERATOR_PARAMS.get(name, set())
    unknown = set(params) - gen_keys - _FILTERS
    if unknown:
        raise ExperimentError(
            f"suite {name!r}: unknown parameter(s) {sorted(unknown)}; allowed: "
            f"{sorted(gen_keys | _FILTERS)}"
        )
    cases = SUITES[name](**{k: v for k, v in params.items() if k in gen_keys})
    names = params.get("names")
    if names is not None:
        known = {c.name for c in cases}
        missing = [n for n in names if n not in known]
        if missing:
            raise ExperimentError(
                f"suite {name!r}: no case named {missing}; known: {sorted(known)}"
            )
        cases = [c for c in cases if c.name in set(names)]
    if "max_devices" in params and name not in _GENERATOR_PARAMS:
        cases = [c for c in cases if c.num_devices <= params["max_devices"]]
    if "min_devices" in params and name not in _GENERATOR_PARAMS:
        cases = [c for c in cases if c.num_devices >= params["min_devices"]]
    return cases
