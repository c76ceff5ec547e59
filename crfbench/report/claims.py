"""The claims the ledger tests (:data:`CLAIMS`: what each row of ``claims.csv`` compares), the words
of its verdicts and the columns of its tables; the rule that turns a cell's numbers into a verdict
is ``crfbench.report.verdicts``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from ..schema import CITATION_DATASET, OCR_DATASET
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

#: Bootstrap resamples per cell, the interval's coverage, and the fixed seed of every cell's draws.
RESAMPLES = 1000
LEVEL = 0.95
BOOTSTRAP_SEED = 0

REPRODUCED = "reproduced"
REPRODUCED_IN_DIRECTION = "reproduced in direction, not in size"
NOT_REPRODUCED = "not reproduced"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"  # an accuracy cell's reads "inconclusive (underpowered: MDE x)"
MIXED = "mixed"
NOT_TESTABLE = "not testable here"

#: Iteration budgets at which a solver claim compares solvers, and the Wolfe gaps that count as
#: equal (both solvers at rounding once converged).
SOLVER_BUDGETS = (10, 20, 50)
GAP_TIE = 1e-9
#: "The same order as a gradient": the largest Hv / gradient time ratio that counts.
HV_SAME_ORDER = 3.0

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
    reproduced in direction, not in size when Bethe-RDA is faster by less than ``factor``;
    contradicted when it is slower."""

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
    # The paper shows the coupling on POS and segmentation only; its NER cells do not (claims.csv).
    "bcrf-5": AccuracyClaim(POS + SEG, (Comparison("meanfield/viterbi", "meanfield/meanfield-10", "lower"),)),
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
    # on random trees where that study ran (study_cells.tree_solver_cells: the gap to the optimum).
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
    # On POS and NER only: on segmentation the paper's own 5 and 10 iterations differ (claims.csv).
    "bcrf-11": AccuracyClaim(
        POS + NER,
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
    "seed_low",  # the t interval over per-seed differences
    "seed_high",
    "direction",  # of the conservative interval: "> 0", "< 0", "spans 0"
    "paper_low",  # the paper's difference for this cell (claims.csv, parsed)
    "paper_high",
    "contains_paper",  # "yes"/"no": the conservative interval overlaps the paper's difference
    "ratio",  # our difference / the middle of the paper's
    "mde",  # minimum detectable effect (80% power, α = 0.05)
    "b_seed_sd",  # our seed SD of B's score, behind the margin
    "margin",  # the claim's margin (crfbench.report.verdicts.claim_margin)
    "verdict",
    "regime",  # ours beside the paper's: training sentences, encoder, split protocol
)
SUMMARY_COLUMNS = (
    "claim",
    "paper",
    "text",
    "paper_difference",
    "our_range",
    "n_cells",
    "verdict",
    "margin",
    "regime",
    "reason",
)
