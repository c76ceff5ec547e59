"""The claims the ledger tests (:data:`CLAIMS`: what each row of ``claims.csv`` compares) and the
fixed rule that turns a cell's interval into a verdict, and a claim's cells into its verdict
(:data:`VERDICT_RULE`, which ``crfbench.report.ledger``'s docstring states)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from ..schema import CITATION_DATASET, OCR_DATASET
from .bethe import OBJECTIVE_TOLERANCE
from .layout import (
    DECODE_BASELINE,
    NER,
    NER_PARTIAL,
    POS,
    SEG,
    TRAIN_BASELINES,
    TRAIN_ITERATIONS,
    baselines_of,
)
from .newton import LEVELS as NEWTON_LEVELS
from .parse_inputs import MAP_DECODER, PARSE_DATASETS, UAS

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
rests on compiled CUDA timings (eager ones measure kernel launches) and has a verdict per baseline
implementation (sequential, parallel scan, pytorch-crf), the claim's own being the sequential one's:
a cell (dataset, encoder, baseline) is reproduced when the method was faster than the baseline in
every timing round, not reproduced when slower in every round, else inconclusive.
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
    UAS: lambda runs: (runs["correct"], runs["tokens"]),  # a parser's words with the gold head
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
class BestOfClaim:
    """Per (dataset, encoder) of ``datasets``: the best of the training losses ``a`` minus the best
    of ``b``, both decoded with ``decoder``, each side's best the loss of the highest mean dev score
    over seeds (the test set never chooses; ties go to the first listed), then paired over seeds and
    test sentences as an accuracy claim's comparison (``crfbench.report.parse_claims``). Where no
    dataset has both sides, ``proxy`` (an accuracy claim on other data) stands in, and the ledger's
    reason calls its cells a proxy."""

    datasets: tuple[str, ...]
    a: tuple[str, ...]
    b: tuple[str, ...]
    decoder: str
    expect: Expect
    proxy: AccuracyClaim | None = None


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
Claim = (
    AccuracyClaim
    | BestOfClaim
    | SpeedClaim
    | SparsityClaim
    | SolverClaim
    | CgmClaim
    | HvCostClaim
    | NewtonSolverClaim
)
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
    "bcrf-9": SpeedClaim(
        "train",
        tuple(
            (baseline, loss)
            for loss in ("bcrf", "bcrf-partial")
            for baseline in baselines_of(TRAIN_BASELINES[loss]).values()
        ),
        TRAIN_ITERATIONS,
    ),
    "bcrf-10": SpeedClaim(
        "decode", tuple((baseline, "bcrf-10") for baseline in baselines_of(DECODE_BASELINE).values())
    ),
    # The SparseMAP paper's Table 1: per language, the better of its two losses against the better
    # of CRF and SSVM in UAS, every parser decoded with the MAP tree. Without parser results, the
    # chains stand in (a proxy): each SparseMAP loss against the CRF loss, decoded alike (Viterbi).
    "sparsemap-1": BestOfClaim(
        PARSE_DATASETS,
        ("sparsemap", "m-sparsemap"),
        ("crf", "ssvm"),
        MAP_DECODER,
        "higher",
        proxy=AccuracyClaim(
            SUPERVISED,
            (
                Comparison("sparsemap/viterbi", "crf/viterbi", "higher"),
                Comparison("m-sparsemap/viterbi", "crf/viterbi", "higher"),
            ),
        ),
    ),
    # Fig. 4 (dependency parsing) tracks the support of the trained model over epochs; ours is the
    # same measure on every sequence-labelling task trained with a SparseMAP loss, and on the
    # parsers (trees per sentence, parse_inputs.TREE_SUPPORT) where they ran.
    "sparsemap-2": SparsityClaim(("sparsemap", "m-sparsemap")),
    # Fig. 2 (random-potential trees): objective and sparsity against iterations; ours on the
    # sweep's CRF-trained chains, from 10 iterations (below that every solver is still adding), and
    # on random trees where that study ran (ledger.tree_solver_cells: the gap to the optimum).
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
