"""The feature CRF's objective, gradient and Hessian-vector products (dynamic program and
autodiff) against enumeration, finite differences and each other, in every backend."""

from __future__ import annotations

import numpy as np
import pytest

from crfbench.newton import jax_objective, torch_objective
from crfbench.newton.problem import Layout, buckets, gold_counts

from .brute_force import hvp_high_precision, random_corpus
from .brute_force import objective as brute_objective

BACKENDS = {"torch": torch_objective.Objective, "jax": jax_objective.Objective}
SIGMA = 1.3


def _instance(seed: int, lengths: list[int], num_tags: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    corpus = random_corpus(rng, lengths, num_attributes=5, num_tags=num_tags)
    size = Layout(5, num_tags).size
    return corpus, scale * rng.normal(size=size), rng.normal(size=size)


CASES = [(lengths, num_tags) for num_tags in (1, 2, 3) for lengths in ([1], [2], [3], [4], [3, 1, 4, 2])]
# max_tokens 1: a bucket per sentence; 64: one padded bucket. jax compiles every function once per
# bucket structure, so its half covers the corner cases with one bucket.
ENUMERATED = [("torch", *case, max_tokens) for case in CASES for max_tokens in (1, 64)] + [
    ("jax", lengths, num_tags, 64) for lengths, num_tags in (([1], 1), ([3, 1, 4, 2], 3))
]


@pytest.mark.parametrize("backend,lengths,num_tags,max_tokens", ENUMERATED)
def test_value_gradient_and_both_hvps_equal_enumeration(backend, lengths, num_tags, max_tokens):
    corpus, x, v = _instance(len(lengths) * 10 + num_tags, lengths, num_tags)
    objective = BACKENDS[backend](corpus, SIGMA, max_tokens=max_tokens)
    value, gradient, hessian = brute_objective(corpus, x, SIGMA)
    got_value, got_gradient = objective.value_and_gradient(x)
    np.testing.assert_allclose(got_value, value, rtol=1e-12)
    np.testing.assert_allclose(objective.value(x), value, rtol=1e-12)
    np.testing.assert_allclose(got_gradient, gradient, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(objective.hvp(x, v), hessian @ v, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(objective.hvp_autodiff(x, v), hessian @ v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hvp_equals_central_differences_of_the_gradient_and_is_symmetric(backend):
    corpus, x, v = _instance(3, [5, 2, 7, 1, 3], 4)
    objective = BACKENDS[backend](corpus, SIGMA, max_tokens=12)
    step = 1e-5
    difference = (
        objective.value_and_gradient(x + step * v)[1] - objective.value_and_gradient(x - step * v)[1]
    ) / (2 * step)
    hv = objective.hvp(x, v)
    np.testing.assert_allclose(hv, difference, rtol=1e-7, atol=1e-8)
    u = np.random.default_rng(1).normal(size=len(x))
    assert u @ hv == pytest.approx(v @ objective.hvp(x, u), rel=1e-12)
    assert v @ hv >= v @ v / SIGMA**2  # H = I/σ² + covariance
    np.testing.assert_allclose(
        objective.hvp(x, 2 * u - v), 2 * objective.hvp(x, u) - hv, rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_hvp_relinearizes_when_asked_at_another_point(backend):
    corpus, x, v = _instance(4, [3, 2], 3)
    objective = BACKENDS[backend](corpus, SIGMA)
    objective.value_and_gradient(x)
    elsewhere = x + 1.0
    np.testing.assert_allclose(
        objective.hvp(elsewhere, v), brute_objective(corpus, elsewhere, SIGMA)[2] @ v, rtol=1e-10
    )
    assert objective.counts["gradient"] == 2 and objective.counts["hvp"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_sentences_with_large_weights_keep_hvp_to_high_precision(backend):
    """Log space with normalised α and β: products of potentials over 300 positions would overflow
    float64 (digest §3.4), and unnormalised log α made the DP's Hv lose 7 digits here."""
    corpus, x, v = _instance(5, [300], 3, scale=30.0)
    objective = BACKENDS[backend](corpus, SIGMA)
    value, gradient = objective.value_and_gradient(x)
    assert np.isfinite(value) and np.isfinite(gradient).all()
    reference = hvp_high_precision(corpus, x, v, SIGMA)
    for hv in (objective.hvp(x, v), objective.hvp_autodiff(x, v)):
        assert np.linalg.norm(hv - reference) <= 1e-10 * np.linalg.norm(reference)


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_do_not_depend_on_the_bucketing(backend):
    corpus, x, v = _instance(6, [4, 1, 6, 2, 2, 5], 3)
    one, many = (BACKENDS[backend](corpus, SIGMA, max_tokens=m) for m in (1000, 6))
    assert len(one.data) == 1 and len(many.data) > 2
    np.testing.assert_allclose(
        one.value_and_gradient(x)[1], many.value_and_gradient(x)[1], rtol=1e-12, atol=1e-13
    )
    np.testing.assert_allclose(one.hvp(x, v), many.hvp(x, v), rtol=1e-12, atol=1e-13)


def test_buckets_cover_every_sentence_once_and_respect_the_token_cap():
    corpus, _, _ = _instance(7, [4, 1, 6, 2, 2, 5, 3], 2)
    parts = buckets(corpus, max_tokens=8)
    assert sorted(int(n) for part in parts for n in part.lengths) == sorted(corpus.lengths.tolist())
    assert all(len(part.lengths) * part.width <= 8 or len(part.lengths) == 1 for part in parts)
    assert sum(len(part.cols) for part in parts) == len(corpus.indices)
    with pytest.raises(ValueError, match="max_tokens"):
        buckets(corpus, max_tokens=0)


def test_gold_counts_are_the_gold_sequences_features():
    from .brute_force import features

    corpus, _, _ = _instance(8, [3, 1, 2], 3)
    expected = sum(
        features(corpus, s, tuple(int(t) for t in corpus.tags[start : start + n]))
        for s, (start, n) in enumerate(zip(np.cumsum([0, *corpus.lengths[:-1]]), corpus.lengths, strict=True))
    )
    np.testing.assert_array_equal(gold_counts(corpus), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigma_must_be_positive(backend):
    corpus, _, _ = _instance(9, [2], 2)
    with pytest.raises(ValueError, match="sigma"):
        BACKENDS[backend](corpus, 0.0)
