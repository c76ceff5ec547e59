"""The SparseMAP reference (``implementations/reference/sparsemap.py``), the oracle the SparseMAP
solvers will be checked against: it must itself be right.

Checked against a closed form (length 1: SparseMAP is sparsemax, Martins & Astudillo 2016),
against an independent solve of the primal problem over the weights of every sequence (SciPy's
SLSQP on the simplex, tiny instances), and against its own optimality conditions (the
certificate ``θ_s − m_sᵀu* ≤ τ*`` with equality on the support, ``u* = Σ y_s m_s``); plus the
limits the definition implies (large scores give MAP; ``-inf`` sequences never enter) and the
properties of the SparseMAP loss (Niculae et al. 2018, Prop. 2: non-negative, zero at a
well-separated gold MAP, ``ℓ_{tΩ}(η) = t ℓ_Ω(η/t)``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from implementations.reference import brute_force
from implementations.reference.sparsemap import sparsemap


def random_chain(seed: int, n: int, num_tags: int, scale: float = 1.0, neg_inf: float = 0.0) -> dict:
    rng = np.random.default_rng(seed)
    chain = {
        "emissions": scale * rng.normal(size=(n, num_tags)),
        "transitions": scale * rng.normal(size=(max(n - 1, 0), num_tags, num_tags)),
        "start": scale * rng.normal(size=num_tags),
        "end": scale * rng.normal(size=num_tags),
    }
    if neg_inf:
        chain["transitions"][rng.random(chain["transitions"].shape) < neg_inf] = -np.inf
        gold = rng.integers(num_tags, size=n)  # keep one sequence finite
        chain["transitions"][np.arange(n - 1), gold[:-1], gold[1:]] = 0.0
    return chain


def indicators(paths: np.ndarray, num_tags: int) -> np.ndarray:
    """(k, n·T): row s is the flattened one-hot tags of sequence s."""
    return np.eye(num_tags)[paths].reshape(len(paths), -1)


def primal_value(chain: dict, weight: float = 1.0) -> tuple[float, np.ndarray]:
    """``max_{y ∈ Δ} θᵀy − weight·½‖My‖²`` and its ``u``, solved directly over the weights of every
    sequence (SciPy's SLSQP on the simplex): independent of the reference's dual route."""
    enumeration = brute_force.enumerate_scores(**chain)
    num_tags = chain["emissions"].shape[1]
    m, theta = indicators(enumeration.paths, num_tags), enumeration.scores
    size = len(theta)
    primal = minimize(
        lambda y: weight * 0.5 * (m.T @ y) @ (m.T @ y) - theta @ y,
        np.full(size, 1 / size),
        jac=lambda y: weight * m @ (m.T @ y) - theta,
        bounds=[(0, None)] * size,
        constraints=[{"type": "eq", "fun": lambda y: y.sum() - 1, "jac": lambda y: np.ones(size)}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 2000},
    )
    return -primal.fun, m.T @ primal.x


def sparsemax(z: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the simplex, by sorting."""
    ordered = np.sort(z)[::-1]
    cumulative = np.cumsum(ordered)
    k = np.arange(1, len(z) + 1)
    support = k[1 + k * ordered > cumulative][-1]
    return np.maximum(z - (cumulative[support - 1] - 1) / support, 0.0)


@pytest.mark.parametrize("num_tags", [1, 2, 3, 7])
@pytest.mark.parametrize("seed", range(3))
def test_length_one_is_sparsemax(num_tags: int, seed: int) -> None:
    chain = random_chain(seed, 1, num_tags, scale=2.0)
    scores = chain["emissions"][0] + chain["start"] + chain["end"]
    solution = sparsemap(**chain)
    np.testing.assert_allclose(solution.unary[0], sparsemax(scores), atol=1e-12)
    assert solution.pairwise.shape == (0, num_tags, num_tags)


@pytest.mark.parametrize(("n", "num_tags"), [(2, 2), (2, 3), (3, 2), (3, 3), (4, 2)])
@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_the_primal_problem_over_every_sequence(n: int, num_tags: int, seed: int) -> None:
    """``argmin_{y ∈ Δ} ½‖My‖² − θᵀy`` solved directly over the T**n weights gives the same u*
    (unique) and value."""
    chain = random_chain(seed, n, num_tags, scale=1.5)
    value, unary = primal_value(chain)
    solution = sparsemap(**chain)
    np.testing.assert_allclose(solution.unary.ravel(), unary, atol=1e-6)
    assert solution.value == pytest.approx(value, abs=1e-8)


@pytest.mark.parametrize(("n", "num_tags", "neg_inf"), [(3, 3, 0.0), (5, 4, 0.0), (6, 3, 0.3), (6, 4, 0.5)])
@pytest.mark.parametrize("seed", range(3))
def test_optimality_certificate(n: int, num_tags: int, neg_inf: float, seed: int) -> None:
    chain = random_chain(seed, n, num_tags, neg_inf=neg_inf)
    solution = sparsemap(**chain)
    enumeration = brute_force.enumerate_scores(**chain)
    finite = np.isfinite(enumeration.scores)
    m, theta = indicators(enumeration.paths[finite], num_tags), enumeration.scores[finite]
    slack = theta - m @ solution.unary.ravel()
    assert slack.max() <= solution.tau + 1e-9  # no sequence beats the support
    on_support = [brute_force.path_score(path, **chain) for path in solution.paths]
    support_rows = indicators(solution.paths, num_tags)
    np.testing.assert_allclose(
        np.array(on_support) - support_rows @ solution.unary.ravel(), solution.tau, atol=1e-9
    )
    assert (solution.weights > 0).all() and solution.weights.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(solution.weights @ support_rows, solution.unary.ravel(), atol=1e-12)
    assert np.isfinite(on_support).all()  # a -inf sequence never enters
    # the value is θᵀy − ½‖u‖² = τ + ½‖u‖² (θ_s = τ + m_sᵀu on the support)
    norm = solution.unary.ravel() @ solution.unary.ravel()
    assert solution.value == pytest.approx(solution.tau + 0.5 * norm, abs=1e-9)
    np.testing.assert_allclose(solution.pairwise.sum(-1), solution.unary[:-1], atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_large_scores_give_the_map_sequence(seed: int) -> None:
    """At scale t → ∞ the penalty stops mattering: u* is the Viterbi path, value/t → its score."""
    chain = random_chain(seed, 4, 3)
    best_score, best_path, gap = brute_force.best(**chain)
    assert gap > 1e-3  # a unique MAP sequence
    scaled = {key: 1e4 * value for key, value in chain.items()}
    solution = sparsemap(**scaled)
    np.testing.assert_allclose(solution.unary, np.eye(3)[best_path], atol=1e-9)
    assert solution.value / 1e4 == pytest.approx(best_score, abs=1e-3)


@pytest.mark.parametrize("seed", range(4))
def test_sparsemap_loss_properties(seed: int) -> None:
    """Prop. 2 for ``ℓ_Ω(η, ȳ) = value + ½‖m_ȳ‖² − θ_ȳ``: ≥ 0; 0 when the gold sequence is the
    unique solution; and ``ℓ_{tΩ}(η) = t ℓ_Ω(η/t)``, the left side solved directly with the
    penalty ``t·½‖u‖²`` over every sequence's weight, the right side by the reference."""
    chain = random_chain(seed, 3, 3)
    n = chain["emissions"].shape[0]
    gold = np.random.default_rng(100 + seed).integers(3, size=n)
    gold_score = brute_force.path_score(gold, **chain)
    loss = sparsemap(**chain).value + 0.5 * n - gold_score
    assert loss >= -1e-12
    t = 2.5
    scaled_penalty = primal_value(chain, weight=t)[0] + t * 0.5 * n - gold_score
    shrunk = {key: value / t for key, value in chain.items()}
    assert scaled_penalty == pytest.approx(
        t * (sparsemap(**shrunk).value + 0.5 * n - gold_score / t), abs=1e-7
    )
    planted = {key: value.copy() for key, value in chain.items()}
    planted["emissions"][np.arange(n), gold] += 10.0  # gold best by a wide margin: the whole solution
    assert sparsemap(**planted).value + 0.5 * n - brute_force.path_score(gold, **planted) == pytest.approx(
        0.0, abs=1e-9
    )


def test_refuses_more_sequences_than_it_can_enumerate() -> None:
    with pytest.raises(ValueError, match="enumeration limit"):
        sparsemap(np.zeros((7, 4)), np.zeros((4, 4)))
