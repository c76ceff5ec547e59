"""An accuracy claim's cells: per (dataset, encoder), run A minus run B in points, paired over seeds
and test sentences, with its percentile bootstrap interval, the t interval over per-seed
differences, and the verdict of ``crfbench.report.verdicts`` (see ``crfbench.report.ledger``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..metrics import PRIMARY_METRIC
from .claims import (
    BOOTSTRAP_SEED,
    CELL_COLUMNS,
    CLAIMS,
    LEVEL,
    RATIO_TERMS,
    RESAMPLES,
    AccuracyClaim,
    Claim,
    Comparison,
)
from .paper_difference import PaperDifference
from .verdicts import judge_cells, minimum_detectable_effect, seed_interval, with_margins


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (as F1 without any span)."""
    return np.divide(numerator, denominator, out=np.zeros(np.shape(numerator)), where=denominator != 0)


def paired_difference(
    num_a: np.ndarray,
    den_a: np.ndarray,
    num_b: np.ndarray,
    den_b: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """Mean over seeds of metric A − metric B in points, and its percentile bootstrap interval.

    Each array is (seeds, sentences): a sentence's numerator and denominator of the ratio metric for
    one seed, column j the same test sentence everywhere. A resample draws seeds and sentences with
    replacement, the same sentences for both sides and every seed, so that what two runs share
    (a sentence's difficulty, a seed's data order) cancels; draws are counts per index, so that all
    resamples are one matrix product.
    """
    n_seeds, n_sentences = num_a.shape
    rng = np.random.default_rng(seed)
    sentence_draws = rng.integers(0, n_sentences, size=(resamples, n_sentences))
    seed_draws = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    sentence_counts = _counts(sentence_draws, n_sentences)  # (resamples, sentences)
    seed_counts = _counts(seed_draws, n_seeds)  # (resamples, seeds)

    terms = np.concatenate([num_a, den_a, num_b, den_b]).T  # (sentences, 4 × seeds): one product
    estimate = 100 * _per_seed(np.ones((1, n_sentences)), terms)[0].mean()
    resampled = 100 * (seed_counts * _per_seed(sentence_counts, terms)[0]).sum(axis=1) / n_seeds
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return float(estimate), float(low), float(high)


def _per_seed(weights: np.ndarray, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Metric A − metric B, and metric B, per (row of ``weights``, seed): ``weights`` (rows,
    sentences) weigh the sentences, ``terms`` (sentences, 4 × seeds) are A's and B's numerators and
    denominators side by side."""
    sum_num_a, sum_den_a, sum_num_b, sum_den_b = np.split(weights @ terms, 4, axis=1)
    metric_b = _ratio(sum_num_b, sum_den_b)
    return _ratio(sum_num_a, sum_den_a) - metric_b, metric_b


def seed_differences(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per seed, metric A − metric B over all test sentences, and metric B, in points (arrays as
    :func:`paired_difference`'s): the seed-level test's data and B's seed-to-seed spread."""
    terms = np.concatenate([num_a, den_a, num_b, den_b]).T
    difference, metric_b = _per_seed(np.ones((1, num_a.shape[1])), terms)
    return 100 * difference[0], 100 * metric_b[0]


def _counts(draws: np.ndarray, size: int) -> np.ndarray:
    """How often each of ``size`` indices occurs in each row of ``draws``, as floats."""
    rows = draws.shape[0]
    offsets = draws + size * np.arange(rows)[:, None]
    return np.bincount(offsets.ravel(), minlength=rows * size).reshape(rows, size).astype(float)


def _paired_arrays(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Numerators and denominators (2 sides, seeds, sentences) of the seeds both sides ran and the
    sentences every run scored; None when nothing is shared. ``a``/``b``: seed, sentence, num, den."""
    both = pd.concat([a.assign(side=0), b.assign(side=1)], ignore_index=True)
    repeated = both.duplicated(["side", "seed", "sentence"])
    if repeated.any():
        raise ValueError(
            f"sentences: a (run, seed, sentence) occurs twice: {both[repeated].iloc[0].to_dict()}"
        )
    seeds = sorted(set(a["seed"]) & set(b["seed"]))
    if not seeds:
        return None
    shared = both[both["seed"].isin(seeds)]
    num, den = (
        shared.pivot(index=["side", "seed"], columns="sentence", values=name) for name in ("num", "den")
    )
    complete = (num.notna() & den.notna()).all()
    if not complete.any():
        return None
    shape = (2, len(seeds), -1)
    return num.loc[:, complete].to_numpy(float).reshape(shape), den.loc[:, complete].to_numpy(float).reshape(
        shape
    )


def _measured(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """seed, sentence and the metric's per-sentence numerator and denominator of ``runs``."""
    num, den = RATIO_TERMS[metric](runs)
    return pd.DataFrame({"seed": runs["seed"], "sentence": runs["sentence"], "num": num, "den": den})


def _metric(comparison: Comparison, dataset: str, tasks: Mapping[str, str]) -> str:
    """The metric a comparison reads on ``dataset``: violations, or the task's table metric."""
    if comparison.measure == "violations":
        return "violations"
    if dataset not in tasks:
        raise ValueError(f"claim ledger: no task given for dataset {dataset!r}")
    return PRIMARY_METRIC[tasks[dataset]]


def _cell(
    runs: Mapping[tuple[str, ...], pd.DataFrame],
    dataset: str,
    encoder: str,
    comparison: Comparison,
    metric: str,
    resamples: int,
    seed: int,
) -> dict[str, object] | None:
    """The cell's numbers but its claim, the paper's, margin, verdict and regime; None when a side
    was not run or the sides share nothing."""
    sides = [runs.get((dataset, encoder, *run.split("/"))) for run in (comparison.a, comparison.b)]
    if sides[0] is None or sides[1] is None:
        return None
    arrays = _paired_arrays(_measured(sides[0], metric), _measured(sides[1], metric))
    if arrays is None:
        return None
    num, den = arrays
    difference, low, high = paired_difference(num[0], den[0], num[1], den[1], resamples=resamples, seed=seed)
    per_seed, metric_b = seed_differences(num[0], den[0], num[1], den[1])
    seed_low, seed_high, seed_error = seed_interval(per_seed)
    return {
        "dataset": dataset,
        "encoder": encoder,
        "a": comparison.a,
        "b": comparison.b,
        "metric": metric,
        "expect": comparison.expect,
        "n_seeds": num.shape[1],
        "n_sentences": num.shape[2],
        "difference": difference,
        "ci_low": low,
        "ci_high": high,
        "seed_low": seed_low,
        "seed_high": seed_high,
        "mde": minimum_detectable_effect(low, high, seed_error),
        "b_seed_sd": float(np.std(metric_b, ddof=1)) if len(metric_b) > 1 else np.nan,
    }


def accuracy_cells(
    sentences: pd.DataFrame,
    tasks: Mapping[str, str],
    *,
    claims: Mapping[str, Claim] = CLAIMS,
    paper: Mapping[str, PaperDifference | None] | None = None,
    regimes: Mapping[tuple[str, str], str] | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """One row per (accuracy claim, comparison, dataset, encoder) whose two sides ran on the test
    split: our paired difference in points, its intervals, the paper's difference, margin and
    verdict (:data:`CELL_COLUMNS`), in ``claims`` order (by default :data:`CLAIMS`), then the
    claim's dataset order, then encoder name.

    ``sentences``: the per-sentence counts (dataset, encoder_name, loss, seed, split, decoder,
    sentence, tokens, correct, gold_spans, predicted_spans, matched_spans, invalid); ``tasks``: the
    task ("pos", "seg" or "ner") of each dataset, read for every dataset a claim covers that ran;
    ``paper``: each claim's parsed ``paper_difference`` (absent: none); ``regimes``: each (dataset,
    encoder)'s regime text (absent: "not recorded").
    """
    paper, regimes = paper or {}, regimes or {}
    test = sentences[sentences["split"] == "test"]
    runs = dict(tuple(test.groupby(["dataset", "encoder_name", "loss", "decoder"])))
    encoders = test.groupby("dataset")["encoder_name"].unique()
    rows = []
    for claim, spec in claims.items():
        if not isinstance(spec, AccuracyClaim):
            continue
        for comparison in spec.comparisons:
            for dataset in spec.datasets:
                for encoder in sorted(encoders.get(dataset, ())):
                    metric = _metric(comparison, dataset, tasks)
                    row = _cell(runs, dataset, encoder, comparison, metric, resamples, seed)
                    if row is None:
                        continue
                    stated = paper.get(claim)
                    on_task = stated.for_task(tasks[dataset]) if stated and metric != "violations" else None
                    on_task = None if on_task is None or on_task.ratio else on_task  # a speed-up: no points
                    rows.append(
                        {"claim": claim, **row}
                        | {"paper_low": on_task.low if on_task else np.nan}
                        | {"paper_high": on_task.high if on_task else np.nan}
                        | {"regime": regimes.get((dataset, encoder), "not recorded")}
                    )
    return judge_cells(with_margins(pd.DataFrame(rows, columns=list(CELL_COLUMNS)), paper))
