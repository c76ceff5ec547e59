"""Eq. 3.1 by enumerating every tag sequence: value, gradient and the dense Hessian
``I/σ² + Σ_i Cov_{p(·|xⁱ)}[f]`` of a tiny ``FeatureCorpus`` (NumPy float64)."""

from __future__ import annotations

import itertools

import numpy as np

from crfbench.data.types import Sentence
from crfbench.newton.features import FeatureCorpus
from crfbench.newton.problem import Layout


def features(corpus: FeatureCorpus, sentence: int, tags: tuple[int, ...]) -> np.ndarray:
    """f(y, x) of one sentence as a flat vector of ``Layout``."""
    layout = Layout(corpus.num_attributes, corpus.num_tags)
    flat = np.zeros(layout.size)
    emission, transition = layout.split(flat)
    first = int(corpus.lengths[:sentence].sum())
    for k, tag in enumerate(tags):
        token = first + k
        emission[corpus.indices[corpus.indptr[token] : corpus.indptr[token + 1]], tag] += 1
        if k:
            transition[tags[k - 1], tag] += 1
    return flat


def objective(corpus: FeatureCorpus, x: np.ndarray, sigma: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(L(λ), ∇L(λ), ∇²L(λ)) by enumeration."""
    value, gradient, hessian = x @ x / (2 * sigma**2), x / sigma**2, np.eye(len(x)) / sigma**2
    first = 0
    for sentence, length in enumerate(corpus.lengths):
        sequences = list(itertools.product(range(corpus.num_tags), repeat=int(length)))
        table = np.array([features(corpus, sentence, tags) for tags in sequences])
        scores = table @ x
        top = scores.max()
        weights = np.exp(scores - top)
        log_z = top + np.log(weights.sum())
        probabilities = weights / weights.sum()
        gold = tuple(int(tag) for tag in corpus.tags[first : first + length])
        mean = probabilities @ table
        value += log_z - scores[sequences.index(gold)]
        gradient += mean - table[sequences.index(gold)]
        hessian += (table * probabilities[:, None]).T @ table - np.outer(mean, mean)
        first += int(length)
    return float(value), gradient, hessian


def random_corpus(
    rng: np.random.Generator, lengths: list[int], num_attributes: int, num_tags: int, per_token: int = 3
) -> FeatureCorpus:
    """Random attribute rows (1 to ``per_token`` distinct attributes per token) and gold tags."""
    rows = [
        np.sort(rng.choice(num_attributes, size=rng.integers(1, per_token + 1), replace=False))
        for _ in range(sum(lengths))
    ]
    indptr = np.concatenate([[0], np.cumsum([len(row) for row in rows])])
    return FeatureCorpus(
        np.asarray(lengths),
        rng.integers(0, num_tags, sum(lengths)),
        indptr,
        np.concatenate(rows),
        num_attributes,
        num_tags,
    )


def random_sentences(
    rng: np.random.Generator, count: int, tags: tuple[str, ...], words: int = 12
) -> list[Sentence]:
    """Sentences of 1–6 made-up words whose tag depends on the word (plus noise), so a CRF learns."""
    vocabulary = [f"{'Ww'[k % 2]}ord{k}" for k in range(words)]
    sentences = []
    for _ in range(count):
        chosen = rng.integers(0, words, rng.integers(1, 7))
        labels = [
            tags[k % len(tags)] if rng.random() > 0.2 else tags[rng.integers(len(tags))] for k in chosen
        ]
        sentences.append(Sentence(tuple(vocabulary[k] for k in chosen), tuple(labels)))
    return sentences


def hvp_high_precision(
    corpus: FeatureCorpus, x: np.ndarray, v: np.ndarray, sigma: float, digits: int = 40
) -> np.ndarray:
    """∇²L(λ)·v of a one-sentence corpus by the thesis's linear-space recursions (α, β, ᾱ, β̄ of
    Eqs. 4.9–4.14) in ``digits``-digit arithmetic (mpmath), where nothing overflows or cancels:
    the reference for the float64 dynamic program on long sentences."""
    import mpmath

    if len(corpus.lengths) != 1:
        raise ValueError("hvp_high_precision: one sentence only")
    layout = Layout(corpus.num_attributes, corpus.num_tags)
    length, tags = int(corpus.lengths[0]), range(corpus.num_tags)
    (weights, transitions), (tangent_weights, tangent_transitions) = layout.split(x), layout.split(v)
    with mpmath.workdps(digits):
        mpf = mpmath.mpf

        def scores(matrix: np.ndarray) -> list[list[mpmath.mpf]]:
            rows = (corpus.indices[corpus.indptr[t] : corpus.indptr[t + 1]] for t in range(length))
            return [[mpmath.fsum(mpf(matrix[o, j]) for o in row) for j in tags] for row in rows]

        e, e_dot = scores(weights), scores(tangent_weights)
        psi = [
            [[mpmath.exp(mpf(transitions[i, j]) + e[t][j]) for j in tags] for i in tags]
            for t in range(length)
        ]
        arc = [
            [[mpf(tangent_transitions[i, j]) + e_dot[t][j] for j in tags] for i in tags]
            for t in range(length)
        ]
        alpha, alpha_bar = (
            [[mpmath.exp(s) for s in e[0]]],
            [[mpmath.exp(s) * d for s, d in zip(e[0], e_dot[0], strict=True)]],
        )
        for t in range(1, length):
            alpha.append([mpmath.fsum(psi[t][i][j] * alpha[-1][i] for i in tags) for j in tags])
            alpha_bar.append(
                [
                    mpmath.fsum(psi[t][i][j] * (arc[t][i][j] * alpha[-2][i] + alpha_bar[-1][i]) for i in tags)
                    for j in tags
                ]
            )
        beta, beta_bar = [[mpf(1)] * len(tags)], [[mpf(0)] * len(tags)]
        for t in range(length - 2, -1, -1):
            beta_bar.append(
                [
                    mpmath.fsum(
                        psi[t + 1][i][j] * (arc[t + 1][i][j] * beta[-1][j] + beta_bar[-1][j]) for j in tags
                    )
                    for i in tags
                ]
            )
            beta.append([mpmath.fsum(psi[t + 1][i][j] * beta[-1][j] for j in tags) for i in tags])
        beta, beta_bar = beta[::-1], beta_bar[::-1]
        z = mpmath.fsum(alpha[-1])
        mean = mpmath.fsum(alpha_bar[-1]) / z
        result = np.array(v / sigma**2, dtype=np.float64)
        node_part, pair_part = layout.split(result)
        for t in range(length):
            row = corpus.indices[corpus.indptr[t] : corpus.indptr[t + 1]]
            for j in tags:
                moment = (alpha_bar[t][j] * beta[t][j] + alpha[t][j] * beta_bar[t][j]) / z
                node_part[row, j] += float(moment - alpha[t][j] * beta[t][j] / z * mean)
            if t:
                for i in tags:
                    for j in tags:
                        joint = psi[t][i][j] * alpha[t - 1][i] * beta[t][j] / z
                        moment = (
                            psi[t][i][j]
                            * (
                                (alpha_bar[t - 1][i] + arc[t][i][j] * alpha[t - 1][i]) * beta[t][j]
                                + alpha[t - 1][i] * beta_bar[t][j]
                            )
                            / z
                        )
                        pair_part[i, j] += float(moment - joint * mean)
    return result
