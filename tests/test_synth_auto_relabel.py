"""Free device order (issue 11): the executor runs the plan on JAX CPU devices and checks
the relabelled result bit for bit; requests it cannot honour are clear errors."""

import random

import pytest

jax = pytest.importorskip("jax")

from executor.errors import ExecutorError  # noqa: E402
from executor.relabel import run_relabelled  # noqa: E402
from executor.run import OutputMismatch  # noqa: E402
from synth import synthesize  # noqa: E402
from synth.bench import random_case  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _eight_devices():
    from executor._jaxsetup import ensure_devices

    ensure_devices(8)  # before any smaller mesh starts the backend with fewer


def test_relabel_without_moving_data_runs_exactly():
    p = synthesize("x=2,y=2", "[8{x}, 8{y}]", "[8{y}, 8{x}]", free_device_order=True, budget_s=10.0)
    assert p.steps == ()
    r = run_relabelled(p)
    assert r["correct"] and r["positions_checked"] == 4 and r["moved_positions"] == 2


def test_random_relabelled_plans_run_exactly_on_8_devices():
    rng = random.Random(11)
    for i in range(6):
        mesh, src, dst = random_case(rng, 3, 3, precondition=bool(i % 2), axis_sizes=(2,), even=True)
        p = synthesize(mesh, src, dst, free_device_order=True, budget_s=10.0)
        assert run_relabelled(p)["correct"]


def test_a_wrong_permutation_is_caught_not_reported_correct():
    p = synthesize("x=2,y=2", "[8{x}, 8{y}]", "[8{y}, 8{x}]", free_device_order=True, budget_s=10.0)
    p.search["relabel"]["device_of_position"] = [0, 1, 2, 3]
    with pytest.raises(OutputMismatch, match="does not hold exactly"):
        run_relabelled(p)


def test_requests_the_executor_cannot_honour_are_clear_errors():
    with pytest.raises(ExecutorError, match="no device relabelling"):
        run_relabelled(synthesize("x=2,y=2", "[8{x}, 8{y}]", "[8{y}, 8{x}]"))
    p = synthesize("x=2,y=2", "[8{x}, 8{y}]", "[8{y}, 8{x}]", free_device_order=True, budget_s=10.0)
    p.search["relabel"]["device_of_position"] = [0, 0, 1, 2]
    with pytest.raises(ExecutorError, match="not a permutation"):
        run_relabelled(p)
