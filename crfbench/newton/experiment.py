"""The Newton-CRF study (digest §3; the thesis has no experiments, so these are the first numbers
for its claims): every solver of ``solvers.SOLVERS`` trains the same L2-regularised feature CRF on
CoNLL-2003 English NER from λ = 0, and a timing sweep compares one Hv with one gradient.

``train`` returns two tables: ``trace`` (a row per solver iteration: seconds, objective, ‖∇f‖,
passes by kind) and ``solvers`` (a row per solver: its final objective recomputed by our code at its
λ, iterations, seconds, passes, and test entity F1 of Viterbi decoding with that λ). All solvers
run one after the other in one process on one thread, so their times are comparable within the
run (not across runs or machines).

``cost`` times, on random corpora over a grid of sentence length N, tag count T and attribute count
F, one gradient (forward–backward and scatter), one DP Hv on stored sweeps, one DP Hv including its
sweep, and one forward-over-reverse autodiff Hv: the thesis's "same complexity as the gradient".
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse
import torch

import implementations

from ..data.types import Dataset, Sentence
from ..metrics import entity_scores
from ..stopwatch import best_seconds
from .features import FeatureCorpus, Vocabulary, crfsuite_items, featurize
from .problem import Layout
from .solvers import SOLVERS, Budget, run_solver


@dataclass(frozen=True)
class Settings:
    train_sentences: int = 0  # the first n training sentences (0: all 14,041)
    min_count: int = 1  # an attribute needs this many training occurrences to get a weight row
    sigma: float = 1.0  # the prior's σ: penalty ‖λ‖²/(2σ²) (CRFsuite's c2 = 1/(2σ²) = 0.5)
    epsilon: float = 1e-7  # TRON and trust-ncg stop at ‖∇f‖ ≤ ε‖∇f(0)‖ (L-BFGS-B's gtol too)
    max_iterations: int = 1000
    adam_steps: int = 300
    adam_learning_rate: float = 0.05
    solvers: tuple[str, ...] = SOLVERS
    backend: str = "torch"  # torch or jax: the objective's (lbfgs-optax always runs on jax's)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.solvers) - set(SOLVERS))
        if unknown:
            raise ValueError(f"solvers: unknown {unknown}; valid: {', '.join(SOLVERS)}")
        if self.backend not in ("torch", "jax"):
            raise ValueError(f"backend: expected torch or jax, got {self.backend!r}")


def objective_class(backend: str) -> type:
    if backend == "jax":
        from . import jax_objective

        return jax_objective.Objective
    from . import torch_objective

    return torch_objective.Objective


def decode(corpus: FeatureCorpus, x: np.ndarray, tag_names: tuple[str, ...]) -> list[list[str]]:
    """Viterbi tags of every sentence under λ = ``x`` (the suite's exact CRF decoder)."""
    layout = Layout(corpus.num_attributes, corpus.num_tags)
    weights, transitions = layout.split(x)
    rows = scipy.sparse.csr_matrix(
        (np.ones(len(corpus.indices)), corpus.indices, corpus.indptr),
        shape=(corpus.num_tokens, layout.num_attributes),
    )
    scores = np.asarray(rows @ weights)
    starts = np.concatenate([[0], np.cumsum(corpus.lengths)])
    padded = np.zeros((len(corpus.lengths), int(corpus.lengths.max()), corpus.num_tags))
    for s, (a, b) in enumerate(itertools.pairwise(starts)):
        padded[s, : b - a] = scores[a:b]
    crf = implementations.get("crf", "torch")
    best = crf.decode(
        torch.from_numpy(padded), torch.from_numpy(transitions.copy()), torch.from_numpy(corpus.lengths)
    )
    return [
        [tag_names[k] for k in row[:n]] for row, n in zip(best.tolist(), corpus.lengths.tolist(), strict=True)
    ]


def train(
    dataset: Dataset, settings: Settings, progress: Callable[[str, dict], None] | None = None
) -> dict[str, pd.DataFrame]:
    """Run every solver of ``settings.solvers`` on the dataset's train split; ``trace`` and ``solvers``."""
    sentences: tuple[Sentence, ...] = dataset.train[: settings.train_sentences or None]
    absent = set(dataset.tagset.tags) - {tag for s in sentences for tag in s.tags}
    if absent and "crfsuite" in settings.solvers:
        raise ValueError(
            f"train_sentences={settings.train_sentences}: tag(s) {', '.join(sorted(absent))} never occur in "
            "the training sentences, so CRFsuite would fit a model without them (another objective); "
            "train on more sentences"
        )
    vocabulary = Vocabulary.fit(sentences, settings.min_count)
    corpus = featurize(sentences, vocabulary, dataset.tagset)
    test = featurize(dataset.test, vocabulary, dataset.tagset)
    objective = objective_class(settings.backend)(corpus, settings.sigma)
    on_jax = objective if settings.backend == "jax" else None  # lbfgs-optax's, built when needed
    budget = Budget(
        settings.epsilon, settings.max_iterations, settings.adam_steps, settings.adam_learning_rate
    )
    crfsuite_data = (
        crfsuite_items(sentences, vocabulary),
        [s.tags for s in sentences],
        vocabulary,
        dataset.tagset.tags,
    )
    gold = [list(s.tags) for s in dataset.test]
    traces, summary = [], []
    for solver in settings.solvers:
        solver_objective = objective
        if solver == "lbfgs-optax":
            if on_jax is None:
                on_jax = objective_class("jax")(corpus, settings.sigma)
            solver_objective = on_jax
        report: Callable[[dict[str, float]], None] | None = (
            None if progress is None else (lambda row, solver=solver: progress(solver, row))
        )
        run = run_solver(
            solver,
            solver_objective,
            budget,
            crfsuite_data=crfsuite_data,
            progress=report,
        )
        traces.append(pd.DataFrame(run.rows).assign(solver=solver))
        final_value, final_gradient = objective.value_and_gradient(run.x)  # recomputed by our code
        last = run.rows[-1]
        summary.append(
            {
                "solver": solver,
                "objective": final_value,
                "gradient_norm": float(np.linalg.norm(final_gradient)),
                "iterations": last["iteration"],
                "seconds": last["seconds"],
                **{kind: last[kind] for kind in ("function", "gradient", "hvp")},
                "test_f1": 100 * entity_scores(gold, decode(test, run.x, dataset.tagset.tags))["f1"],
            }
        )
    described = {
        "dataset": dataset.name,
        "train_sentences": len(sentences),
        "train_tokens": corpus.num_tokens,
        "attributes": len(vocabulary),
        "parameters": objective.size,
        "sigma": settings.sigma,
        "backend": settings.backend,
    }
    trace = pd.concat(traces, ignore_index=True)
    columns = ["solver", *[c for c in trace.columns if c != "solver"]]
    return {
        "trace": trace[columns].assign(**described),
        "solvers": pd.DataFrame(summary).assign(**described),
    }


@dataclass(frozen=True)
class CostGrid:
    """The sweep's axes around a base point (one axis varied at a time) and its repeats."""

    lengths: tuple[int, ...] = (8, 32, 128)  # N, every sentence this long
    num_tags: tuple[int, ...] = (5, 9, 17)  # T
    attributes: tuple[int, ...] = (1_000, 10_000, 100_000)  # F
    tokens: int = 4096  # tokens per corpus (sentences = tokens / N)
    per_token: int = 12  # active attributes per token (CoNLL-2003: 11.9 on average)
    repeats: int = 3  # best of


def random_corpus(
    rng: np.random.Generator, length: int, num_tags: int, attributes: int, grid: CostGrid = CostGrid()
) -> FeatureCorpus:
    """About ``grid.tokens`` tokens in sentences of ``length``, each token with ``grid.per_token``
    attribute ids drawn from ``attributes`` (with repetition) and a random tag of ``num_tags``: the
    input of the cost sweep and of the asv suite's Newton benchmarks."""
    sentences = max(grid.tokens // length, 1)
    tokens = sentences * length
    indices = np.sort(rng.integers(0, attributes, (tokens, grid.per_token)), axis=1).ravel()
    return FeatureCorpus(
        np.full(sentences, length),
        rng.integers(0, num_tags, tokens),
        np.arange(0, tokens * grid.per_token + 1, grid.per_token),
        indices,
        attributes,
        num_tags,
    )


def hv_tasks(objective: Any, x: np.ndarray, v: np.ndarray) -> dict[str, Callable[[], object]]:
    """The four timed calls at (x, v): a gradient, a DP Hv on the sweeps a gradient call stored, a
    DP Hv with its sweep, and an autodiff Hv."""
    return {
        "gradient": lambda: objective.value_and_gradient(x),
        "hvp_dp": lambda: objective.hvp(x, v),
        "hvp_dp_with_sweep": lambda: (objective.value_and_gradient(x), objective.hvp(x, v)),
        "hvp_autodiff": lambda: objective.hvp_autodiff(x, v),
    }


def _seconds(objective: Any, x: np.ndarray, v: np.ndarray, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` seconds of a gradient and of the three Hv at (x, v), after a warm-up call
    of each (jax compiles)."""
    work = hv_tasks(objective, x, v)
    for task in work.values():
        task()
    objective.value_and_gradient(x)
    return {name: best_seconds(task, repeats) for name, task in work.items()}


def cost(grid: CostGrid = CostGrid(), backend: str = "torch", seed: int = 0) -> pd.DataFrame:
    """Seconds of one gradient and of one Hv three ways, per grid point (best of ``repeats``,
    after one untimed call that also compiles jax)."""
    rng = np.random.default_rng(seed)
    base = (
        grid.lengths[len(grid.lengths) // 2],
        grid.num_tags[len(grid.num_tags) // 2],
        grid.attributes[len(grid.attributes) // 2],
    )
    points = sorted(
        {(n, base[1], base[2]) for n in grid.lengths}
        | {(base[0], t, base[2]) for t in grid.num_tags}
        | {(base[0], base[1], f) for f in grid.attributes}
    )
    rows = []
    for length, num_tags, attributes in points:
        corpus = random_corpus(rng, length, num_tags, attributes, grid)
        objective = objective_class(backend)(corpus, sigma=1.0)
        seconds = _seconds(
            objective, 0.1 * rng.normal(size=objective.size), rng.normal(size=objective.size), grid.repeats
        )
        rows.append(
            {
                "backend": backend,
                "N": length,
                "T": num_tags,
                "F": attributes,
                "tokens": corpus.num_tokens,
                **seconds,
            }
        )
    return pd.DataFrame(rows)
