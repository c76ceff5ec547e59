"""The claim ledger: a verdict on each claim of the paper list (``claims.csv``: id, paper, claim,
comparison, paper_evidence, paper_difference, kind), computed from our result tables.

An accuracy claim compares two (training loss, decoder) runs A and B, as its ``comparison`` says,
within each (dataset, encoder) cell: our difference is A − B in percentage points, paired (same seed,
same test sentences), averaged over seeds, each metric a corpus ratio of sums over the test sentences
(accuracy Σcorrect/Σtokens, F1 2Σmatched/(Σgold+Σpredicted), violation rate mean of invalid). Its
95% interval is a percentile bootstrap resampling seeds and test sentences with replacement, the same
sentences for both sides and every seed, with a fixed random seed (byte-for-byte reproducible). The
comparisons are data (:data:`CLAIMS`), the verdict a fixed rule (:data:`VERDICT_RULE`, appended
below).

"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ..metrics import PRIMARY_METRIC
from ..schema import CITATION_DATASET, OCR_DATASET
from .bethe import OBJECTIVE_TOLERANCE, cgm_speedups, relative_gaps
from .layout import NER, NER_PARTIAL, POS, SEG, TRAIN_ITERATIONS
from .newton import LEVELS as NEWTON_LEVELS
from .newton import cost_ratios, first_reach

#: Half-width, in percentage points, of the band around 0 that counts as "no difference".
MARGIN = 1.0
#: Bootstrap resamples per cell, the interval's coverage, and the fixed seed of every cell's draws.
RESAMPLES = 1000
LEVEL = 0.95
BOOTSTRAP_SEED = 0

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
MIXED = "mixed"
NOT_TESTABLE = "not testable here"

#: Iteration budgets at which a solver claim compares solvers, and the Wolfe gaps that count as
#: equal (both solvers at rounding once converged).
SOLVER_BUDGETS = (10, 20, 50)
GAP_TIE = 1e-9
#: "The same order as a gradient": the largest Hv / gradient time ratio that counts.
HV_SAME_ORDER = 3.0

VERDICT_RULE = f"""\
MARGIN is 1 percentage point; [lo, hi] is the 95% bootstrap interval of our A − B in
one cell. An equivalence claim ("matches", "close to", "few iterations suffice": the paper's
difference is about 0) is reproduced when −MARGIN ≤ lo and hi ≤ +MARGIN, not reproduced when the
interval lies wholly beyond the margin (lo > +MARGIN or hi < −MARGIN), else inconclusive. A
directional claim ("beats", "loses accuracy", "breaks constraints": A − B > 0, or < 0) is reproduced
when the interval excludes 0 on the claimed side, not reproduced when its claimed-side end stays
within the margin (an effect of MARGIN or more in the claimed direction is ruled out: this covers an
interval on the wrong side of 0, and no difference at all), else inconclusive. A GPU speed claim
measured on CUDA timings is reproduced in a cell when the speed-up is above 1, else not reproduced.
A sparsity claim's cell (one SparseMAP loss on one dataset) is reproduced when the mean dev
support size at the selected epoch is below epoch 1's in every seed, not reproduced when in none,
else inconclusive. A solver claim's cell (the active set against one other solver on the sweep) is
reproduced when its mean Wolfe gap (ties within {GAP_TIE:g}) and mean support size are no larger at
every budget of {", ".join(map(str, SOLVER_BUDGETS))} iterations, not reproduced when at none, else
inconclusive. A CGM speed claim's cell (one problem size) is reproduced when the interior point's mean
seconds over Bethe-RDA's is at least 10 and every trial's two objectives agree to a relative
{OBJECTIVE_TOLERANCE:g}, inconclusive when an interior-point solve is inaccurate, else not reproduced.
The Hessian-vector cost claim's cell (one grid point of the Newton cost sweep) is reproduced when one
DP Hv, its forward–backward sweep included, takes at most {HV_SAME_ORDER:g} times one gradient's
seconds, else not reproduced. The trust-region Newton claim's cell (one relative suboptimality) is
reproduced when TRON with DP Hv reaches it no later in seconds than L-BFGS, not reproduced when
later or never while L-BFGS does, inconclusive when neither does.
A claim is reproduced when every cell is, not reproduced when some cell is not and none is, mixed
when some cells are reproduced and some are not, else inconclusive; it is not testable here when its
method is not built, when it is a GPU claim and no timing ran on CUDA, or when no cell was run."""
__doc__ += f"\nVerdict rule. {VERDICT_RULE}\n"  # stated once, read by the report and by help()

#: The claims list beside the paper's tables (``../shared/data/paper/claims.csv``) and its columns.
CLAIMS_FILE = "claims.csv"
CLAIMS_COLUMNS = ("id", "paper", "claim", "comparison", "paper_evidence", "paper_difference", "kind")

#: Papers whose methods this suite implements; claims of the others are not testable here.
BUILT_PAPERS = ("bcrf", "sparsemap", "bethe", "newton")
#: How a paper's method is named in a "not built" reason (others: the paper column as it is).
PAPER_LABELS = {"sparsemap": "SparseMAP", "bethe": "Bethe", "newton": "Newton"}

Expect = Literal["equal", "higher", "lower"]  # A − B about 0, > 0, < 0
Measure = Literal["score", "violations"]  # score: the task's table metric (accuracy or F1)

#: Each metric as a ratio of sums over sentences: (numerator, denominator) per sentence.
RATIO_TERMS: dict[str, Callable[[pd.DataFrame], tuple[pd.Series, pd.Series]]] = {
    "accuracy": lambda runs: (runs["correct"], runs["tokens"]),
    "f1": lambda runs: (2 * runs["matched_spans"], runs["gold_spans"] + runs["predicted_spans"]),
    "violations": lambda runs: (runs["invalid"], pd.Series(1, index=runs.index)),
}


@dataclass(frozen=True)
class Comparison:
    """Run A minus run B, each "training loss/decoder", on ``measure``, expected ``expect``."""

    a: str
    b: str
    expect: Expect
    measure: Measure = "score"


@dataclass(frozen=True)
class AccuracyClaim:
    """Paired comparisons of test-set metrics on each (dataset, encoder) cell of ``datasets``."""

    datasets: tuple[str, ...]
    comparisons: tuple[Comparison, ...]


@dataclass(frozen=True)
class SpeedClaim:
    """Speed-up = median seconds of ``baseline`` / median seconds of ``compared`` (at ``iterations``
    when set), for each (baseline, compared) name pair of timing rows of ``kind``."""

    kind: Literal["train", "decode"]
    pairs: tuple[tuple[str, str], ...]
    iterations: int | None = None


@dataclass(frozen=True)
class SparsityClaim:
    """The mean dev support size of each SparseMAP loss's model (curves.csv ``dev_support``) at
    its selected epoch against epoch 1, per (dataset, encoder, loss) cell: reproduced when it fell
    in every seed, not reproduced when it fell in none, else inconclusive."""

    losses: tuple[str, ...]


@dataclass(frozen=True)
class CgmClaim:
    """Bethe-RDA against the interior-point solver on the CGM experiment (results/bethe/cgm.csv),
    per problem size: the speed-up (the interior point's mean seconds / Bethe-RDA's) at equal
    objective. Reproduced when the speed-up is at least ``factor`` and every trial's objectives
    agree within ``OBJECTIVE_TOLERANCE``; inconclusive when an interior-point solve is inaccurate;
    else not reproduced."""

    factor: float = 10.0


@dataclass(frozen=True)
class SolverClaim:
    """SparseMAP's ``reference`` solver against each other one on the sweep (CRF-trained models),
    per (dataset, encoder, other solver) cell: at each iteration budget of ``budgets``, a mean
    Wolfe gap (up to ``GAP_TIE``) and a mean support size no larger. Reproduced when that holds
    at every budget, not reproduced when at none, else inconclusive."""

    budgets: tuple[int, ...]
    reference: str = "active-set"


@dataclass(frozen=True)
class HvCostClaim:
    """One DP Hessian-vector product (its forward–backward sweep included) against one gradient,
    per grid point of the Newton cost sweep (results/newton/cost.csv): reproduced when the time
    ratio is at most ``HV_SAME_ORDER``."""


@dataclass(frozen=True)
class NewtonSolverClaim:
    """TRON (DP Hv) against L-BFGS on the Newton study (results/newton/), per relative
    suboptimality of ``levels``: the ratio of L-BFGS's seconds to reach it over TRON's."""

    levels: tuple[float, ...] = NEWTON_LEVELS
    newton: str = "tron"
    baseline: str = "lbfgs"


SUPERVISED = POS + SEG + NER
#: What each claim of claims.csv (``/work/shared/data/paper/claims.csv``, column ``comparison``)
#: compares. A claim that names no dataset covers every supervised dataset; the partial-label data
#: has its own losses (bcrf-8). bcrf-11 names no training loss: both models that BCRF decodes in
#: Tables 1a-1c. bcrf-9's "bcrf-10" is the bcrf loss at TRAIN_ITERATIONS, as in Table 2.
Claim = AccuracyClaim | SpeedClaim | SparsityClaim | SolverClaim | CgmClaim | HvCostClaim | NewtonSolverClaim
CLAIMS: dict[str, Claim] = {
    "bcrf-1": AccuracyClaim(SUPERVISED, (Comparison("bcrf/viterbi", "crf/viterbi", "equal"),)),
    "bcrf-2": AccuracyClaim(SUPERVISED, (Comparison("crf/bcrf-10", "crf/viterbi", "equal"),)),
    "bcrf-3": AccuracyClaim(SUPERVISED, (Comparison("crf/bcrf-10", "crf/meanfield-10", "higher"),)),
    "bcrf-4": AccuracyClaim(
        SEG,
        (
            Comparison("crf/meanfield-10", "crf/viterbi", "lower"),
            Comparison("crf/meanfield-10", "crf/viterbi", "higher", "violations"),
        ),
    ),
    "bcrf-5": AccuracyClaim(
        SUPERVISED, (Comparison("meanfield/viterbi", "meanfield/meanfield-10", "lower"),)
    ),
    "bcrf-6": AccuracyClaim(SUPERVISED, (Comparison("unstructured/argmax", "crf/viterbi", "lower"),)),
    "bcrf-7": AccuracyClaim(
        NER,
        (
            Comparison("bcrf/viterbi", "crf/viterbi", "equal"),
            Comparison("bcrf/bcrf-10", "crf/bcrf-10", "equal"),
        ),
    ),
    "bcrf-8": AccuracyClaim(
        NER_PARTIAL, (Comparison("bcrf-partial/viterbi", "crf-partial/viterbi", "equal"),)
    ),
    "bcrf-9": SpeedClaim("train", (("crf", "bcrf"), ("crf-partial", "bcrf-partial")), TRAIN_ITERATIONS),
    "bcrf-10": SpeedClaim("decode", (("viterbi", "bcrf-10"),)),
    # The SparseMAP paper's Table 1 is dependency parsing, and it compares the better of its two
    # losses with the better of CRF and SSVM per language; on our chains each SparseMAP loss is
    # compared with the CRF loss, decoded alike (Viterbi).
    "sparsemap-1": AccuracyClaim(
        SUPERVISED,
        (
            Comparison("sparsemap/viterbi", "crf/viterbi", "higher"),
            Comparison("m-sparsemap/viterbi", "crf/viterbi", "higher"),
        ),
    ),
    # Fig. 4 (dependency parsing) tracks the support of the trained model over epochs; ours is the
    # same measure on every sequence-labelling task trained with a SparseMAP loss.
    "sparsemap-2": SparsityClaim(("sparsemap", "m-sparsemap")),
    # Fig. 2 (random-potential trees): objective and sparsity against iterations; ours on the
    # sweep's CRF-trained chains, from 10 iterations (below that every solver is still adding).
    "sparsemap-3": SolverClaim(SOLVER_BUDGETS),
    # Table 1: the non-local model against the chain CRF it starts from, paired over test citations.
    "bethe-1": AccuracyClaim(
        (CITATION_DATASET,), (Comparison("nonlocal-energies/bethe", "chain-crf-baseline/viterbi", "higher"),)
    ),
    # Table 4: each template energy against the 2-gram base, test words of every fold pooled.
    "bethe-2": AccuracyClaim(
        (OCR_DATASET,),
        tuple(
            Comparison(f"{model}/bethe", "2gram-base/viterbi", "higher")
            for model in ("Lu", "Lu-MM", "Lw", "Lw-MM")
        ),
    ),
    # Table 5: "an order of magnitude faster" on the same convex problem.
    "bethe-3": CgmClaim(),
    # Fig. 1: "most of our accuracy gain is captured within the first 5-10 iterations": F1 at a cap
    # of 10 iterations against the test-time solver's (40), paired over test citations.
    "bethe-4": AccuracyClaim(
        (CITATION_DATASET,), (Comparison("nonlocal-energies/bethe-10", "nonlocal-energies/bethe", "equal"),)
    ),
    # The thesis's analysis (Chapter IV): an Hv by dynamic programming costs the order of a gradient.
    "newton-1": HvCostClaim(),
    # Cited, not measured, by the thesis: TRON is competitive with L-BFGS on CRFs.
    "newton-2": NewtonSolverClaim(),
    "bcrf-11": AccuracyClaim(
        SUPERVISED,
        (
            Comparison("crf/bcrf-5", "crf/bcrf-10", "equal"),
            Comparison("bcrf/bcrf-5", "bcrf/bcrf-10", "equal"),
        ),
    ),
}

#: Claims this suite cannot test whatever is run, and why.
OUT_OF_SCOPE = {
    "sparsemap-4": "no NLI task: SparseMAP attention needs a sentence-pair model, outside sequence labelling",
}

#: Columns of the per-cell table and of the per-claim summary, in order.
CELL_COLUMNS = (
    "claim",
    "dataset",
    "encoder",
    "a",
    "b",
    "metric",
    "expect",
    "n_seeds",
    "n_sentences",
    "difference",
    "ci_low",
    "ci_high",
    "verdict",
)
SUMMARY_COLUMNS = ("claim", "paper", "text", "paper_difference", "our_range", "n_cells", "verdict", "reason")


def verdict(expect: Expect, low: float, high: float, margin: float = MARGIN) -> str:
    """One cell's verdict from the interval [low, high] of A − B (see :data:`VERDICT_RULE`)."""
    if expect == "equal":
        if -margin <= low and high <= margin:
            return REPRODUCED
        return NOT_REPRODUCED if low > margin or high < -margin else INCONCLUSIVE
    sign = 1.0 if expect == "higher" else -1.0
    low, high = sorted((sign * low, sign * high))  # oriented: positive is the claimed direction
    if low > 0:
        return REPRODUCED
    return NOT_REPRODUCED if high <= margin else INCONCLUSIVE


def overall_verdict(verdicts: Iterable[str]) -> str:
    """A claim's verdict from its cells' (see :data:`VERDICT_RULE`); at least one cell."""
    found = set(verdicts)
    if not found:
        raise ValueError("overall_verdict: no cells")
    if found == {REPRODUCED}:
        return REPRODUCED
    if NOT_REPRODUCED in found:
        return MIXED if REPRODUCED in found else NOT_REPRODUCED
    return INCONCLUSIVE


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

    def per_seed(weights: np.ndarray) -> np.ndarray:  # metric A − metric B, (rows of weights, seeds)
        sum_num_a, sum_den_a, sum_num_b, sum_den_b = np.split(weights @ terms, 4, axis=1)
        return _ratio(sum_num_a, sum_den_a) - _ratio(sum_num_b, sum_den_b)

    estimate = 100 * per_seed(np.ones((1, n_sentences))).mean()
    resampled = 100 * (seed_counts * per_seed(sentence_counts)).sum(axis=1) / n_seeds
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return float(estimate), float(low), float(high)


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
    margin: float,
    resamples: int,
    seed: int,
) -> dict[str, object] | None:
    """The cell's row but its claim; None when a side was not run or the sides share nothing."""
    sides = [runs.get((dataset, encoder, *run.split("/"))) for run in (comparison.a, comparison.b)]
    if sides[0] is None or sides[1] is None:
        return None
    arrays = _paired_arrays(_measured(sides[0], metric), _measured(sides[1], metric))
    if arrays is None:
        return None
    num, den = arrays
    difference, low, high = paired_difference(num[0], den[0], num[1], den[1], resamples=resamples, seed=seed)
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
        "verdict": verdict(comparison.expect, low, high, margin),
    }


def accuracy_cells(
    sentences: pd.DataFrame,
    tasks: Mapping[str, str],
    *,
    margin: float = MARGIN,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """One row per (accuracy claim, comparison, dataset, encoder) whose two sides ran on the test
    split: our paired difference in points, its interval and verdict (:data:`CELL_COLUMNS`), in
    :data:`CLAIMS` order, then the claim's dataset order, then encoder name.

    ``sentences``: the per-sentence counts (dataset, encoder_name, loss, seed, split, decoder,
    sentence, tokens, correct, gold_spans, predicted_spans, matched_spans, invalid); ``tasks``: the
    task ("pos", "seg" or "ner") of each dataset, read for every dataset a claim covers that ran.
    """
    test = sentences[sentences["split"] == "test"]
    runs = dict(tuple(test.groupby(["dataset", "encoder_name", "loss", "decoder"])))
    encoders = test.groupby("dataset")["encoder_name"].unique()
    rows = []
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, AccuracyClaim):
            continue
        for comparison in spec.comparisons:
            for dataset in spec.datasets:
                for encoder in sorted(encoders.get(dataset, ())):
                    metric = _metric(comparison, dataset, tasks)
                    row = _cell(runs, dataset, encoder, comparison, metric, margin, resamples, seed)
                    if row is not None:
                        rows.append({"claim": claim, **row})
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def _ordered(verdicts: Iterable[bool]) -> str:
    """A cell's verdict from checks that each hold or not: all, none, or some."""
    found = list(verdicts)
    if all(found):
        return REPRODUCED
    return NOT_REPRODUCED if not any(found) else INCONCLUSIVE


def sparsity_cells(curves: pd.DataFrame) -> pd.DataFrame:
    """One row (:data:`CELL_COLUMNS`) per (sparsity claim, dataset, encoder, loss) trained: the
    mean over seeds of the dev support size at the selected epoch minus at epoch 1."""
    rows = []
    measured = curves[curves["dev_support"].notna()]
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, SparsityClaim):
            continue
        chosen = measured[measured["loss"].isin(spec.losses)]
        for (dataset, encoder, loss), runs in chosen.groupby(["dataset", "encoder_name", "loss"], sort=False):
            changes = []
            for _, run in runs.groupby("seed"):
                support = run.set_index("epoch")["dev_support"]
                changes.append(support[run["best_epoch"].iloc[0]] - support[support.index.min()])
            rows.append(
                {
                    "claim": claim,
                    "dataset": dataset,
                    "encoder": encoder,
                    "a": f"{loss} (selected epoch)",
                    "b": f"{loss} (epoch 1)",
                    "metric": "dev support size",
                    "expect": "lower",
                    "n_seeds": len(changes),
                    "difference": float(np.mean(changes)),
                    "verdict": _ordered(change < 0 for change in changes),
                }
            )
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def solver_cells(sweep: pd.DataFrame) -> pd.DataFrame:
    """One row (:data:`CELL_COLUMNS`) per (solver claim, dataset, encoder, other solver) swept: the
    reference solver's mean Wolfe gap minus the other's at the largest budget, and the verdict."""
    rows = []
    swept = sweep[sweep["method"] == "sparsemap"]
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, SolverClaim):
            continue
        for (dataset, encoder), panel in swept.groupby(["dataset", "encoder_name"], sort=False):
            values = panel.pivot_table(index=["solver", "iterations"], columns="metric", values="value")
            budgets = [k for k in spec.budgets if (spec.reference, k) in values.index]
            if not budgets:
                continue
            for other in dict.fromkeys(panel["solver"]):
                if other == spec.reference:
                    continue
                shared = [k for k in budgets if (other, k) in values.index]
                if not shared:
                    continue
                ours, theirs = values.loc[spec.reference], values.loc[other]
                checks = (
                    ours.loc[k, "wolfe_gap"] <= theirs.loc[k, "wolfe_gap"] + GAP_TIE
                    and ours.loc[k, "support_size"] <= theirs.loc[k, "support_size"]
                    for k in shared
                )
                last = shared[-1]
                rows.append(
                    {
                        "claim": claim,
                        "dataset": dataset,
                        "encoder": encoder,
                        "a": f"sparsemap/{spec.reference}",
                        "b": f"sparsemap/{other}",
                        "metric": f"Wolfe gap at {last} it.",
                        "expect": "lower",
                        "n_seeds": panel["seed"].nunique(),
                        "n_sentences": int(panel["sentences"].max()),
                        "difference": float(ours.loc[last, "wolfe_gap"] - theirs.loc[last, "wolfe_gap"]),
                        "verdict": _ordered(checks),
                    }
                )
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def cgm_cells(cgm: pd.DataFrame) -> pd.DataFrame:
    """One row (:data:`CELL_COLUMNS`) per (CGM claim, problem size): the speed-up and the verdict."""
    rows = []
    gaps = relative_gaps(cgm)
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, CgmClaim):
            continue
        for size in cgm_speedups(cgm).itertuples(index=False):
            trials = cgm[cgm["dataset"] == size.dataset]
            if size.ip_converged < size.trials:
                found = INCONCLUSIVE
            elif gaps[trials.index].max() <= OBJECTIVE_TOLERANCE and size.speedup >= spec.factor:
                found = REPRODUCED
            else:
                found = NOT_REPRODUCED
            rows.append(
                {
                    "claim": claim,
                    "dataset": size.dataset,
                    "encoder": "",
                    "a": "interior-point",
                    "b": "bethe-rda",
                    "metric": "speed-up (mean seconds)",
                    "expect": "higher",
                    "n_seeds": size.trials,
                    "difference": size.speedup,
                    "verdict": found,
                }
            )
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def hv_cost_cells(cost: pd.DataFrame) -> pd.DataFrame:
    """newton-1's cells: one per grid point of the cost sweep."""
    rows = []
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, HvCostClaim):
            continue
        for point in cost_ratios(cost).itertuples(index=False):
            ratio = float(point.hvp_dp_with_sweep / point.gradient)
            rows.append(
                {
                    "claim": claim,
                    "dataset": f"random N={point.N} T={point.T} F={point.F}",
                    "encoder": "",
                    "a": "hvp-dp (with its sweep)",
                    "b": "gradient",
                    "metric": "ratio: Hv / gradient seconds",
                    "expect": "lower",
                    "n_seeds": 1,
                    "difference": ratio,
                    "verdict": REPRODUCED if ratio <= HV_SAME_ORDER else NOT_REPRODUCED,
                }
            )
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def newton_solver_cells(trace: pd.DataFrame, solvers: pd.DataFrame) -> pd.DataFrame:
    """newton-2's cells: one per suboptimality level (the ratio NaN when a solver never reached it)."""
    rows = []
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, NewtonSolverClaim):
            continue
        if not {spec.newton, spec.baseline} <= set(solvers["solver"]):
            continue
        for level in spec.levels:
            seconds = first_reach(trace, solvers, level).set_index("solver")["seconds"]
            newton, baseline = seconds[spec.newton], seconds[spec.baseline]
            if np.isnan(newton) and np.isnan(baseline):
                found = INCONCLUSIVE
            elif np.isnan(baseline) or (not np.isnan(newton) and newton <= baseline):
                found = REPRODUCED
            else:
                found = NOT_REPRODUCED
            rows.append(
                {
                    "claim": claim,
                    "dataset": f"conll03-ner, (f − f*)/f* ≤ {level:g}",
                    "encoder": "",
                    "a": spec.newton,
                    "b": spec.baseline,
                    "metric": "ratio: L-BFGS / TRON seconds",
                    "expect": "higher",
                    "n_seeds": 1,
                    "difference": baseline / newton,
                    "verdict": found,
                }
            )
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def speedups(timing: pd.DataFrame, spec: SpeedClaim) -> pd.DataFrame:
    """dataset, encoder and speed-up (baseline / compared median seconds, over rounds and the cell's
    timing runs) for each (dataset, encoder) that timed both names of one of ``spec.pairs``."""
    rows = timing[timing["kind"] == spec.kind]
    parts = []
    for baseline, compared in spec.pairs:
        base, other = rows[rows["name"] == baseline], rows[rows["name"] == compared]
        if spec.iterations is not None:
            other = other[other["iterations"] == spec.iterations]
        medians = [part.groupby(["dataset", "encoder_name"])["seconds"].median() for part in (base, other)]
        parts.append((medians[0] / medians[1]).dropna())
    ratios = pd.concat(parts).rename("speedup").rename_axis(["dataset", "encoder"]).reset_index()
    return ratios.sort_values(["dataset", "encoder"], ignore_index=True)


def _range(values: pd.Series, style: str) -> str:
    """The range "low to high" of ``values``, each end formatted with ``style``; one value when both
    ends read the same."""
    low, high = style.format(values.min()), style.format(values.max())
    return low if low == high else f"{low} to {high}"


def _cells_range(cells: pd.DataFrame) -> str:
    """Our differences' range per metric, named when the claim reads several metrics."""
    ranges = {
        metric: _range(group["difference"], "{:+.1e}")
        if metric.startswith("Wolfe gap")  # gaps span orders of magnitude
        else _range(group["difference"], "x{:.0f}")
        if metric.startswith("speed-up")
        else _range(group["difference"], "x{:.2f}")
        if metric.startswith("ratio")
        else _range(group["difference"].round(1) + 0.0, "{:+.1f}")  # no "-0.0"
        for metric, group in cells.groupby("metric", sort=False)
    }
    if len(ranges) == 1:
        return next(iter(ranges.values()))
    return "; ".join(f"{metric} {text}" for metric, text in ranges.items())


def _status(our_range: str, n_cells: int, found: str, reason: str = "") -> dict[str, object]:
    return {"our_range": our_range, "n_cells": n_cells, "verdict": found, "reason": reason}


def _speed_status(spec: SpeedClaim, gpu: bool, timing: pd.DataFrame) -> dict[str, object]:
    """A speed claim's range of speed-ups and verdict; a GPU claim without CUDA timings is not
    testable, with our CPU speed-ups given as information."""
    cuda = timing[timing["device"].astype(str).str.startswith("cuda")]
    if gpu and cuda.empty and not timing.empty:
        cpu = speedups(timing, spec)["speedup"]
        our_range = f"CPU {_range(cpu, 'x{:.2f}')}" if len(cpu) else ""
        return _status(our_range, len(cpu), NOT_TESTABLE, "GPU claim, CPU run")
    ratios = speedups(cuda if gpu else timing, spec)["speedup"]
    if ratios.empty:
        return _status("", 0, NOT_TESTABLE, "no timing runs in this profile")
    verdicts = [REPRODUCED if ratio > 1 else NOT_REPRODUCED for ratio in ratios]
    names = cuda["device_name"] if "device_name" in cuda else cuda["device"]  # the GPU's name, where recorded
    where = ", ".join(sorted(set(names.astype(str)))) + " " if gpu else ""
    return _status(where + _range(ratios, "x{:.2f}"), len(ratios), overall_verdict(verdicts))


def _no_cell_reason(spec: Claim) -> str:
    """Why a claim has no cell in this profile: what it needs that was not run."""
    if isinstance(spec, HvCostClaim):
        return "the Newton cost sweep (crfbench newton cost) did not run in this profile"
    if isinstance(spec, NewtonSolverClaim):
        return f"the Newton study (crfbench newton train) did not run {spec.newton} and {spec.baseline}"
    if isinstance(spec, CgmClaim):
        return "the CGM experiment (crfbench bethe cgm) did not run in this profile"
    if isinstance(spec, SparsityClaim):
        return f"no run in this profile trained {' or '.join(spec.losses)} (curves.csv dev_support)"
    if isinstance(spec, SolverClaim):
        return f"no SparseMAP solver sweep with {spec.reference} at {', '.join(map(str, spec.budgets))} it."
    pairs = " or ".join(dict.fromkeys(f"{c.a} and {c.b}" for c in spec.comparisons))
    return f"no cell of {', '.join(spec.datasets)} in this profile has both {pairs}"


def _claim_status(
    claim: Mapping[str, object], cells: pd.DataFrame, timing: pd.DataFrame
) -> dict[str, object]:
    """our_range, n_cells (the cells behind our_range), verdict and reason of one claims.csv row."""
    paper, claim_id = str(claim["paper"]), str(claim["id"])
    if paper not in BUILT_PAPERS:
        return _status("", 0, NOT_TESTABLE, f"method not built yet ({PAPER_LABELS.get(paper, paper)})")
    if claim_id in OUT_OF_SCOPE:
        return _status("", 0, NOT_TESTABLE, OUT_OF_SCOPE[claim_id])
    spec = CLAIMS.get(claim_id)
    if spec is None:
        return _status("", 0, NOT_TESTABLE, "comparison not encoded in crfbench.report.ledger.CLAIMS")
    if isinstance(spec, SpeedClaim):
        return _speed_status(spec, claim["kind"] == "speed-gpu", timing)
    own = cells[cells["claim"] == claim_id]
    if own.empty:
        return _status("", 0, NOT_TESTABLE, _no_cell_reason(spec))
    return _status(_cells_range(own), len(own), overall_verdict(own["verdict"]))


def claim_ledger(
    claims: pd.DataFrame,
    sentences: pd.DataFrame,
    timing: pd.DataFrame,
    tasks: Mapping[str, str],
    *,
    curves: pd.DataFrame | None = None,
    sweep: pd.DataFrame | None = None,
    cgm: pd.DataFrame | None = None,
    newton: tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None] = (None, None, None),
    margin: float = MARGIN,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-claim summary (:data:`SUMMARY_COLUMNS`, one row per row of ``claims``, in its order)
    and the per-cell rows behind it (:data:`CELL_COLUMNS`, claims in the same order).

    ``claims``: claims.csv (id, paper, claim, comparison, paper_evidence, paper_difference, kind);
    ``sentences``: see :func:`accuracy_cells`; ``timing``: results/timing.csv (dataset, encoder_name,
    kind, name, iterations, round, seconds, device); ``tasks``: dataset -> "pos", "seg" or "ner";
    ``curves`` and ``sweep``: results/curves.csv and sweep.csv, for the sparsity and solver claims;
    ``cgm``: results/bethe/cgm.csv, for the CGM speed claim; ``newton``: results/newton/'s trace,
    solvers and cost tables (``report.newton.read_newton``), for the Newton claims.
    """
    order = {claim_id: position for position, claim_id in enumerate(claims["id"])}
    parts = [accuracy_cells(sentences, tasks, margin=margin, resamples=resamples, seed=seed)]
    if curves is not None:
        parts.append(sparsity_cells(curves))
    if sweep is not None:
        parts.append(solver_cells(sweep))
    if cgm is not None:
        parts.append(cgm_cells(cgm))
    trace, solvers, cost = newton
    if trace is not None and solvers is not None:
        parts.append(newton_solver_cells(trace, solvers))
    if cost is not None:
        parts.append(hv_cost_cells(cost))
    cells = pd.concat([part for part in parts if not part.empty] or parts[:1], ignore_index=True)
    cells = cells[cells["claim"].isin(order)]
    cells = cells.sort_values("claim", key=lambda ids: ids.map(order), kind="stable", ignore_index=True)
    rows = [
        {
            "claim": claim["id"],
            "paper": claim["paper"],
            "text": claim["claim"],
            "paper_difference": claim["paper_difference"],
            **_claim_status(claim, cells, timing),
        }
        for claim in claims.to_dict("records")
    ]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS)), cells


def ledger_csv(table: pd.DataFrame) -> str:
    """``table`` (the summary or the cells of :func:`claim_ledger`) as CSV text, rows in the ledger's
    order, floats with 3 decimals ("-0.000" written 0.000), empty for missing: the same input gives
    the same bytes."""
    floats = table.select_dtypes("float").columns
    fixed = table.assign(**{name: table[name].round(3) + 0.0 for name in floats})
    return fixed.to_csv(index=False, float_format="%.3f", lineterminator="\n")
