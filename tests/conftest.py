"""Shared test set-up.

JAX's CPU backend must see 8 virtual devices; the flag has to be set before the
backend starts, so it is set here, before any test module imports jax.
"""

import os

_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")


import pytest  # noqa: E402


@pytest.fixture
def space_methods(monkeypatch):
    """``space_methods(name=fn, ...)``: ``auto`` plans with a subclass of ``Space`` whose
    methods ``name`` are ``fn`` (taking ``self``), for this test. The compiled ``Space`` is
    an extension type (synth/planners/moves.pxd), whose methods cannot be patched on the
    class itself; a subclass overrides them in both copies."""
    from synth.planners import auto
    from synth.planners.moves import Space

    def override(**methods):
        base = auto.Space
        sub = type("PatchedSpace", (base,), dict(methods))
        monkeypatch.setattr(auto, "Space", sub)
        return sub

    assert Space is auto.Space
    return override
