"""The collective-graphical-model experiment (Table 5 of the Bethe paper; crfbench.bethe.cgm): the
synthetic migration is a proper chain with Poisson counts; its objective is the Bethe solver's own
value; Bethe-RDA and the interior-point program reach the same minimiser, which is also the
brute-force minimiser over all distributions on a tiny grid; the table has one row per size,
trial and solver."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

import implementations
from crfbench.bethe import cgm
from implementations.energies import PoissonCounts
from implementations.reference import bethe as reference

pytest.importorskip("cvxpy")


def tiny(seed: int, steps: int = 4) -> cgm.CGM:
    return cgm.synthetic((2, 2), np.random.default_rng(seed), steps=steps, population=500, detection=0.5)


def test_the_synthetic_migration_is_a_chain_with_poisson_counts() -> None:
    problem = cgm.synthetic((3, 4), np.random.default_rng(0), steps=6, population=2000, detection=0.3)
    assert problem.cells == 12 and problem.steps == 6 and problem.counts.shape == (6, 12)
    np.testing.assert_allclose(logsumexp(problem.initial), 0.0, atol=1e-12)
    np.testing.assert_allclose(logsumexp(problem.transitions, axis=1), 0.0, atol=1e-12)
    assert (problem.counts >= 0).all() and (problem.counts == np.round(problem.counts)).all()
    # about α M individuals counted each week (Poisson noise on a fixed population)
    assert problem.counts.sum(1) == pytest.approx(np.full(6, 0.3 * 2000), rel=0.15)
    # the southern rows start fuller, and the drift is one row north per week
    assert problem.initial[0] > problem.initial[-1]
    assert problem.transitions[0].argmax() == 4


def test_the_objective_is_minus_the_solvers_value() -> None:
    """F(μ) computed from its definition in NumPy equals −(the bethe method's value) at any
    iterate, including one far from the optimum (one iteration)."""
    problem = tiny(1, steps=5)
    solution = cgm.bethe_rda(problem, iterations=1, tolerance=None)
    method = implementations.get("bethe", "torch")
    emissions = np.zeros((1, 5, 4))
    emissions[0, 0] = problem.initial
    energy = PoissonCounts(torch.tensor(problem.counts[None]), 250.0, 1 / 500)
    out = method.solve(
        torch.tensor(emissions), torch.tensor(problem.transitions), torch.tensor([5]),
        energy=energy, iterations=1, tolerance=None,
    )  # fmt: skip
    assert solution.objective == pytest.approx(-float(out.value[0]), abs=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_rda_interior_point_and_brute_force_reach_the_same_minimiser(seed: int) -> None:
    """A 2 × 2 grid over 4 weeks (256 paths): Bethe-RDA, Clarabel and L-BFGS over all
    distributions (implementations.reference.bethe) agree on μ* and F(μ*)."""
    problem = tiny(seed)
    rda = cgm.bethe_rda(problem, tolerance=1e-10, iterations=5000)
    conic = cgm.interior_point(problem)
    emissions = np.zeros((4, 4))
    emissions[0] = problem.initial
    brute = reference.solve(emissions, problem.transitions, energy=problem.energy)
    assert rda.converged
    np.testing.assert_allclose(rda.unary, brute.unary, atol=1e-6)
    np.testing.assert_allclose(conic.unary, brute.unary, atol=5e-5)  # Clarabel: gap 1e-8
    np.testing.assert_allclose(rda.pairwise, brute.pairwise, atol=1e-6)
    assert rda.objective == pytest.approx(-brute.value, abs=1e-9)
    assert conic.objective == pytest.approx(rda.objective, abs=1e-6)


def test_run_has_a_row_per_size_trial_and_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cgm.GRIDS, "s16", (2, 2))
    settings = cgm.Settings(sizes=("s16",), trials=2, steps=3, population=300)
    table = cgm.run(settings, seed=3)
    assert list(table.columns) == list(cgm.COLUMNS)
    assert table[["trial", "model"]].values.tolist() == [
        [0, "bethe-rda"], [0, "interior-point"], [1, "bethe-rda"], [1, "interior-point"]
    ]  # fmt: skip
    assert (table["dataset"] == "cgm-synthetic-s16").all() and (table["edge_entries"] == 16).all()
    assert (table["objective_gap"] >= 0).all() and (table.groupby("trial")["objective_gap"].min() == 0).all()
    assert table["objective_gap"].max() < 1e-6 and table["marginal_difference"].max() < 1e-4
    assert table["converged"].all() and (table["seconds"] > 0).all()
    again = cgm.run(settings, seed=3)
    np.testing.assert_array_equal(table["objective"], again["objective"])
