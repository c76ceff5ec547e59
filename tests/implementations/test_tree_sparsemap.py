"""``tree-sparsemap``: SparseMAP over single-root dependency trees, in both backends, against the
projection onto the trees' marginal polytope by enumeration (``reference.tree_sparsemap``).

Every batch is padded to one shape (:data:`BATCH` sentences of :data:`PADDED` words, garbage past
each length) so that jax compiles the solve once per dtype and options.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

import implementations
from implementations import arborescence
from implementations.public import DependencyBound
from implementations.reference import tree_sparsemap as reference

from .backends import Backend
from .test_tree_crf import random_batch

PADDED, BATCH = 5, 4
#: Tolerances on μ* (in [0, 1]) and on values of order 10, per dtype of the scores.
TOLERANCE = {"float64": 1e-8, "float32": 2e-5}


def mixed(n: int) -> list[int]:
    """:data:`BATCH` lengths, the longest ``n``."""
    rng = np.random.default_rng(n)
    return [n, *(int(v) for v in rng.integers(1, n + 1, size=BATCH - 1))]


def module(backend: Backend) -> DependencyBound:
    return cast(DependencyBound, implementations.get("tree-sparsemap", backend.name))


def own_scores(scores: np.ndarray, length: int) -> np.ndarray:
    """One sentence's ``(n+1, n+1)`` arc scores, off-arc entries ``-inf``."""
    return arborescence.arcs(scores, length)


def augmented(scores: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """m-SparseMAP's scores: +1 on every arc but the gold ones."""
    index = np.arange(scores.shape[-1])
    return scores + (index[None, :, None] != heads[:, None, :])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("forbid", [0.0, 0.4])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_matches_projection(backend: Backend, n: int, forbid: float, dtype: str) -> None:
    """μ*, the value and the support against the enumerated projection; the support is a
    distribution over valid single-root trees that avoid forbidden arcs; decode is its heaviest."""
    tol = TOLERANCE[dtype]
    scores, lengths, _ = random_batch(
        np.random.default_rng([n, int(forbid * 10)]), mixed(n), PADDED, forbid=forbid
    )
    scores = scores.astype(dtype).astype(np.float64)  # what the backend sees, exactly
    s, sizes = backend.array(scores, dtype), backend.array(lengths)
    out = module(backend).solve(s, sizes)
    marginals = backend.numpy(module(backend).marginals(s, sizes))
    decoded = backend.numpy(module(backend).decode(s, sizes))
    trees, weights = backend.numpy(out.trees), backend.numpy(out.weights)
    np.testing.assert_allclose(backend.numpy(out.marginals), marginals, atol=tol)
    assert backend.numpy(out.converged).all() and isinstance(out.iterations, int)
    for b, length in enumerate(lengths):
        own = own_scores(scores[b], length)
        want = reference.sparsemap(own)
        np.testing.assert_allclose(marginals[b, : length + 1, : length + 1], want.marginals, atol=tol)
        np.testing.assert_allclose(backend.numpy(out.value)[b], want.value, rtol=tol, atol=tol)
        outside = marginals[b].copy()
        outside[: length + 1, : length + 1] = 0
        assert not outside.any(), "μ* must be zero on padding"
        assert not marginals[b, : length + 1, : length + 1][np.isneginf(own)].any(), "μ* zero off the arcs"
        used = weights[b] > 0
        np.testing.assert_allclose(weights[b].sum(), 1.0, atol=tol)
        assert (trees[b, ~used] == -1).all() and (weights[b, ~used] == 0).all()
        total = np.zeros((length + 1, length + 1))
        for heads, weight in zip(trees[b, used], weights[b, used], strict=True):
            assert arborescence.tree_problem(heads, length) is None
            assert (heads[length + 1 :] == -1).all() and heads[0] == -1
            assert np.isfinite(arborescence.tree_score(own, heads[: length + 1]))
            total[heads[1 : length + 1], np.arange(1, length + 1)] += weight
        np.testing.assert_allclose(marginals[b, : length + 1, : length + 1], total, atol=tol)
        heaviest = trees[b, np.argmax(weights[b])]
        np.testing.assert_array_equal(decoded[b], heaviest)


@pytest.mark.parametrize("cost", ["none", "hamming"])
def test_loss_and_gradient(backend: Backend, cost: str) -> None:
    """The loss is ``value(η) + n/2 − θ_gold`` and its gradient ``μ*(η) − a_gold`` (Danskin), η
    the (cost-augmented) scores; both against the oracle, and ``≥ 0``."""
    scores, lengths, heads = random_batch(np.random.default_rng(5), [5, 3, 1, 4], PADDED, forbid=0.2)
    inputs = {
        "scores": backend.array(scores),
        "lengths": backend.array(lengths),
        "heads": backend.array(heads),
    }

    def loss(kw):
        return module(backend).loss(kw["scores"], kw["lengths"], kw["heads"], cost=cost)

    value, grads = backend.value_and_grad(loss, inputs, ["scores"])
    eta = augmented(scores, heads) if cost == "hamming" else scores
    assert (value >= -1e-9).all()
    for b, length in enumerate(lengths):
        own = own_scores(eta[b], length)
        want = reference.sparsemap(own)
        gold = arborescence.tree_score(own, heads[b, : length + 1])
        np.testing.assert_allclose(value[b], want.value + 0.5 * length - gold, atol=1e-8)
        expected = np.zeros_like(scores[b])
        expected[: length + 1, : length + 1] = want.marginals
        expected[heads[b, 1 : length + 1], np.arange(1, length + 1)] -= 1
        np.testing.assert_allclose(grads["scores"][b], expected, atol=1e-8)


def test_marginals_jacobian_matches_finite_differences(backend: Backend) -> None:
    """Prop. 1's backward pass against central differences of μ* (the support is locally fixed)."""
    rng = np.random.default_rng(11)
    scores, lengths, _ = random_batch(rng, [5, 4, 2, 3], PADDED)
    probe, direction = rng.normal(size=scores.shape), rng.normal(size=scores.shape)
    inputs = {
        "scores": backend.array(scores),
        "lengths": backend.array(lengths),
        "probe": backend.array(probe),
    }

    def projected(kw):
        return (module(backend).marginals(kw["scores"], kw["lengths"]) * kw["probe"]).sum((1, 2))

    _, grads = backend.value_and_grad(projected, inputs, ["scores"])
    step = 1e-6
    ahead = backend.numpy(
        module(backend).marginals(backend.array(scores + step * direction), inputs["lengths"])
    )
    behind = backend.numpy(
        module(backend).marginals(backend.array(scores - step * direction), inputs["lengths"])
    )
    numeric = ((ahead - behind) / (2 * step) * probe).sum((1, 2))
    np.testing.assert_allclose((grads["scores"] * direction).sum((1, 2)), numeric, atol=1e-6)


def test_loss_zero_when_gold_dominates(backend: Backend) -> None:
    """0 once the gold beats every tree by its Hamming distance (twice it for m-SparseMAP): gold
    arcs 3, every other arc 0."""
    _, lengths, heads = random_batch(np.random.default_rng(3), [5, 2, 1, 4], PADDED)
    scores = np.zeros((BATCH, PADDED + 1, PADDED + 1))
    for b, length in enumerate(lengths):
        scores[b, heads[b, 1 : length + 1], np.arange(1, length + 1)] = 3.0
    s, n, h = backend.array(scores), backend.array(lengths), backend.array(heads)
    for cost in ("none", "hamming"):
        np.testing.assert_allclose(backend.numpy(module(backend).loss(s, n, h, cost=cost)), 0.0, atol=1e-9)


def test_torch_equals_jax() -> None:
    pytest.importorskip("jax")
    from .backends import get

    torch_backend, jax_backend = get("torch"), get("jax")
    scores, lengths, heads = random_batch(np.random.default_rng(9), [5, 3, 4, 1], PADDED, forbid=0.3)
    results = []
    for backend in (torch_backend, jax_backend):
        s, n, h = backend.array(scores), backend.array(lengths), backend.array(heads)
        mod = module(backend)
        out = mod.solve(s, n)
        results.append(
            [backend.numpy(x) for x in (out.marginals, out.value, mod.loss(s, n, h, cost="hamming"))]
            + [out.iterations]
        )
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("solver", ["fw", "away-fw", "pairwise-fw"])
def test_frank_wolfe_solvers_agree(solver: str) -> None:
    """The chain's Frank–Wolfe variants reach the active set's μ* (torch: no new compilation)."""
    import torch

    scores, lengths, _ = random_batch(np.random.default_rng(4), [5, 4, 3, 2], PADDED)
    s, n = torch.tensor(scores), torch.tensor(lengths)
    mod = cast(DependencyBound, implementations.get("tree-sparsemap", "torch"))
    exact = mod.marginals(s, n).numpy()
    out = mod.solve(s, n, solver=solver, iterations=5000, tolerance=1e-10)
    np.testing.assert_allclose(out.marginals.numpy(), exact, atol=1e-5)


def test_registry_options_and_bad_inputs(backend: Backend) -> None:
    """A dependency method with ``solve`` and the chain's options but the oracle; bad inputs are
    one-line errors (``dependency_contract``'s checks)."""
    assert "tree-sparsemap" in implementations.DEPENDENCY_METHODS
    mod = module(backend)
    assert mod.method.functions == ("marginals", "decode", "loss", "log_partition", "solve")
    assert [o.name for o in mod.method.options] == [
        "solver",
        "iterations",
        "tolerance",
        "max_support",
        "cost",
    ]
    scores, lengths, heads = random_batch(np.random.default_rng(2), [3, 2, 1, 3], PADDED)
    s, n = backend.array(scores), backend.array(lengths)
    cases = [
        (lambda: mod.marginals(s, n, oracle="scan"), TypeError, "unexpected option"),
        (lambda: mod.solve(s, n, solver="newton"), ValueError, "solver"),
        (lambda: mod.marginals(backend.array(scores[:, :, :3]), n), ValueError, "scores must have shape"),
        (lambda: mod.log_partition(s, backend.array(np.array([3, 6, 1, 2]))), ValueError, "lengths"),
        (lambda: mod.loss(s, n, backend.array(np.zeros_like(heads))), ValueError, "heads"),
        (lambda: mod.decode(backend.array(np.full_like(scores, -np.inf)), n), ValueError, "tree"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match) as raised:
            call()
        assert "\n" not in str(raised.value)
