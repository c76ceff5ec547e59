"""TRON and its Steihaug CG on quadratics (where the model is exact) and on a small feature CRF
(against SciPy's ``trust-ncg``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.optimize

from crfbench.newton import tron
from crfbench.newton.torch_objective import Objective

from .brute_force import random_corpus


def _quadratic(seed: int, size: int = 6):
    """f(x) = ½ xᵀHx − bᵀx with H SPD: (value, value_and_gradient, hvp, H, b)."""
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(size, size))
    hessian, linear = root @ root.T + 0.5 * np.eye(size), rng.normal(size=size)

    def value(x):
        return 0.5 * x @ hessian @ x - linear @ x

    return value, lambda x: (value(x), hessian @ x - linear), lambda x, v: hessian @ v, hessian, linear


def test_cg_inside_the_region_returns_the_newton_step_and_its_residual():
    _, _, _, hessian, linear = _quadratic(0)
    step, residual, steps, boundary = tron.steihaug_cg(-linear, lambda v: hessian @ v, 1e6, 1e-12, 100)
    np.testing.assert_allclose(step, np.linalg.solve(hessian, linear), rtol=1e-9)
    np.testing.assert_allclose(residual, linear - hessian @ step, atol=1e-10)
    assert not boundary and steps <= len(linear) + 1


@pytest.mark.parametrize("radius", [1e-3, 0.1, 0.5])
def test_cg_stops_on_the_boundary_with_the_residual_of_its_step(radius):
    _, _, _, hessian, linear = _quadratic(1)
    step, residual, _, boundary = tron.steihaug_cg(-linear, lambda v: hessian @ v, radius, 1e-12, 100)
    assert boundary
    assert np.linalg.norm(step) == pytest.approx(radius, rel=1e-12)
    np.testing.assert_allclose(residual, linear - hessian @ step, atol=1e-10)


def test_cg_rejects_a_hessian_that_is_not_positive_definite():
    with pytest.raises(FloatingPointError, match="positive definite"):
        tron.steihaug_cg(np.ones(2), lambda v: -v, 10.0, 1e-12, 10)


def test_the_boundary_root_is_nonnegative_and_exact():
    rng = np.random.default_rng(2)
    for _ in range(50):
        step, direction = rng.normal(size=4) * 0.1, rng.normal(size=4)
        radius = np.linalg.norm(step) + rng.uniform(0.01, 2)
        tau = tron._to_boundary(step, direction, radius)
        assert tau >= 0
        assert np.linalg.norm(step + tau * direction) == pytest.approx(radius, rel=1e-12)


def test_on_a_quadratic_the_ratio_is_one_and_tron_finds_the_minimiser():
    value, value_and_gradient, hvp, hessian, linear = _quadratic(3)
    result = tron.tron(
        value, value_and_gradient, hvp, np.zeros(6), tron.Settings(epsilon=1e-12, cg_tolerance=1e-3)
    )
    assert result.converged
    np.testing.assert_allclose(result.x, np.linalg.solve(hessian, linear), rtol=1e-8)
    assert all(it.ratio == pytest.approx(1.0, rel=1e-6) for it in result.history)
    assert all(it.accepted for it in result.history)


def _crf_objective(seed: int = 4) -> Objective:
    rng = np.random.default_rng(seed)
    return Objective(random_corpus(rng, list(rng.integers(1, 8, size=40)), 20, 4, per_token=4), sigma=0.8)


def test_tron_reaches_trust_ncgs_optimum_and_never_increases_the_objective():
    objective = _crf_objective()
    x0 = np.zeros(objective.size)
    seen = []
    result = tron.tron(
        objective.value,
        objective.value_and_gradient,
        objective.hvp,
        x0,
        tron.Settings(epsilon=1e-10),
        callback=lambda x, it: seen.append((it, np.linalg.norm(x))),
    )
    reference = scipy.optimize.minimize(
        objective.value_and_gradient,
        x0,
        jac=True,
        hessp=objective.hvp,
        method="trust-ncg",
        options={"gtol": 1e-9},
    )
    assert result.objective == pytest.approx(reference.fun, rel=1e-12)
    np.testing.assert_allclose(result.x, reference.x, atol=1e-6)
    objectives = [it.objective for it, _ in seen]
    assert all(later <= earlier for earlier, later in itertools.pairwise(objectives))
    assert [it.iteration for it, _ in seen] == list(range(1, len(seen) + 1))


def test_with_exact_subproblems_tron_converges_quadratically():
    """CG to 1e-10·‖g‖ makes each step Newton's: ‖g_{k+1}‖ ≤ C‖g_k‖² once close."""
    objective = _crf_objective(5)
    result = tron.tron(
        objective.value,
        objective.value_and_gradient,
        objective.hvp,
        np.zeros(objective.size),
        tron.Settings(epsilon=1e-13, cg_tolerance=1e-10),
    )
    norms = [it.gradient_norm for it in result.history if it.accepted]
    tail = [(b, a) for a, b in itertools.pairwise(norms) if b > 1e-11 and a < 1e-1]
    assert tail, norms
    assert all(b <= 10 * a**2 for b, a in tail), norms


def test_with_liblinears_cg_tolerance_tron_converges_linearly_to_its_tolerance():
    """ξ = 0.1 solves each subproblem to a tenth of ‖g‖, so ‖g‖ falls about tenfold per step."""
    objective = _crf_objective(6)
    g0 = np.linalg.norm(objective.value_and_gradient(np.zeros(objective.size))[1])
    result = tron.tron(
        objective.value,
        objective.value_and_gradient,
        objective.hvp,
        np.zeros(objective.size),
        tron.Settings(epsilon=1e-6),
    )
    assert result.converged and result.gradient_norm <= 1e-6 * g0
    norms = [it.gradient_norm for it in result.history]
    assert all(b < 0.5 * a for a, b in itertools.pairwise(norms)), norms


def test_every_outer_iteration_is_logged_with_its_radius_and_cg_steps(caplog):
    value, value_and_gradient, hvp, _, _ = _quadratic(7)
    with caplog.at_level("INFO", logger="crfbench.newton.tron"):
        result = tron.tron(value, value_and_gradient, hvp, np.zeros(6), tron.Settings(epsilon=1e-10))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tron ")]
    assert len(lines) == len(result.history)
    assert all("radius" in line and " cg " in line for line in lines)
