"""The ledger's verdict rule (v2): an accuracy cell is judged against the paper's own difference for
that cell, on the more conservative of two intervals (sentence bootstrap and seeds), with an
equivalence margin per claim and the effect the cell could have detected; the other cells' checks
map onto the same words, and a claim's verdict is drawn from its cells'. :data:`VERDICT_RULE` states
the rule; the report prints it and ``crfbench.report.ledger``'s docstring carries it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from .bethe import OBJECTIVE_TOLERANCE
from .claims import (
    CONTRADICTED,
    GAP_TIE,
    HV_SAME_ORDER,
    INCONCLUSIVE,
    LEVEL,
    MIXED,
    NOT_REPRODUCED,
    REPRODUCED,
    REPRODUCED_IN_DIRECTION,
    SOLVER_BUDGETS,
    Expect,
)
from .paper_difference import PaperDifference, PaperRange

#: Power at which the minimum detectable effect is stated, and its multiplier of a standard error:
#: z(1 − α/2) + z(power), ≈ 2.80 for α = 0.05 and 80% power (a normal approximation).
POWER = 0.8
MDE_FACTOR = float(stats.norm.ppf(1 - (1 - LEVEL) / 2) + stats.norm.ppf(POWER))
#: How many of our seed standard deviations an equivalence margin spans at least.
SEED_SD_FACTOR = 2.0
#: The factors of the sensitivity table: every cell's verdict at these multiples of its margin.
SENSITIVITY_FACTORS = (0.5, 1.0, 2.0)
#: The verdicts that support a claim, and those that go against it.
POSITIVE = (REPRODUCED, REPRODUCED_IN_DIRECTION)
NEGATIVE = (NOT_REPRODUCED, CONTRADICTED)

VERDICT_RULE = f"""\
Verdict rule v2. An accuracy cell compares runs A and B (same seeds, same test sentences) by two
95% intervals of A − B in points: the paired bootstrap over test sentences and seeds, and a t
interval over the per-seed differences (seed level; none with one seed). Every test below asks
whether an interval excludes a value, and a value counts as excluded only when both intervals
exclude it (their hull [lo, hi], the more conservative of the two). Direction: the hull lies above
0 (> 0), below 0 (< 0), or spans 0. Magnitude: whether the hull overlaps the paper's own difference
for the cell (claims.csv, its task's value where the text gives one per task; a list of values is
the range they span), and the ratio of our difference to the middle of the paper's. MDE, the
minimum detectable effect: {MDE_FACTOR:.2f} × the wider of the two standard errors (half the
bootstrap interval's width / 1.96; the seed SD of the differences / √seeds), the true difference a
cell would find at α = 0.05 with 80% power. Margin m, per claim: for an equivalence claim
("matches", "few iterations suffice"), max(the largest |difference| the paper itself calls equal,
{SEED_SD_FACTOR:g} × the median over the claim's cells of our seed SD of B's score): the paper's own "equal"
spans its differences, and no test of three seeds tells apart differences under the seed-to-seed
spread; for a directional claim, {SEED_SD_FACTOR:g} × that seed SD, read only where the paper gives no
difference. An equivalence cell is reproduced when −m ≤ lo and hi ≤ m, contradicted when the hull
lies wholly beyond ±m, not reproduced when it excludes both 0 and the paper's difference (a
difference the paper did not see, of a size the margin cannot settle), else inconclusive
(underpowered: MDE). A directional cell ("beats", "loses accuracy": A − B > 0, or < 0; signs below
are on the claimed side) is reproduced when the hull excludes 0 on the claimed side and overlaps the
paper's difference, reproduced in direction, not in size when it excludes 0 there but not the
paper's difference, contradicted when it excludes 0 on the other side, not reproduced when its
claimed-side end is at most the paper's smallest difference for the cell (m where the paper gives
none): an effect of the paper's size is ruled out; else inconclusive (underpowered: MDE). The
sensitivity table gives every accuracy cell's verdict at ½ m, m and 2 m. Each cell carries its
regime (training sentences, encoder, split protocol) beside the paper's; "proxy" marks a cell run
in another regime.
A GPU speed claim rests on compiled CUDA timings (eager ones measure kernel launches) and has a
verdict per baseline implementation (sequential, parallel scan, pytorch-crf), the claim's own being
the sequential one's: a cell (dataset, encoder, baseline) is reproduced when the method was faster
than the baseline in every timing round, contradicted when slower in every round, else
inconclusive. A sparsity claim's cell (one SparseMAP loss on one dataset) is reproduced when the mean
dev support size at the selected epoch is below epoch 1's in every seed, not reproduced when in
none, else inconclusive. A solver claim's cell (the active set against one other solver on the
sweep) is reproduced when its mean Wolfe gap (ties within {GAP_TIE:g}) and mean support size are no
larger at every budget of {", ".join(map(str, SOLVER_BUDGETS))} iterations, not reproduced when at
none, else inconclusive. A CGM speed claim's cell (one problem size) is reproduced when the interior
point's mean seconds over Bethe-RDA's is at least 10 and every trial's two objectives agree to a
relative {OBJECTIVE_TOLERANCE:g}, reproduced in direction, not in size when Bethe-RDA is faster by
less, contradicted when it is slower, inconclusive when an interior-point solve is inaccurate. The
Hessian-vector cost claim's cell (one grid point of the Newton cost sweep) is reproduced when one DP
Hv, its forward–backward sweep included, takes at most {HV_SAME_ORDER:g} times one gradient's seconds,
else not reproduced. The trust-region Newton claim's cell (one relative suboptimality) is reproduced
when TRON with DP Hv reaches it no later in seconds than L-BFGS, not reproduced when later or never
while L-BFGS does, inconclusive when neither does. A claim is reproduced when every cell is,
reproduced in direction, not in size when every cell is that or reproduced, contradicted when every
cell is contradicted, not reproduced when some cell is not reproduced or contradicted and none
reproduced, mixed when both occur, else inconclusive; it is not testable here when its method is not
built, when it is a GPU claim and no timing ran on CUDA, or when no cell was run."""


def seed_interval(differences: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """The t interval (coverage ``LEVEL``) of the mean of per-seed differences, and its standard
    error; NaNs with fewer than two seeds (no spread to measure)."""
    values = np.asarray(differences, dtype=float)
    if len(values) < 2:
        return math.nan, math.nan, math.nan
    error = float(values.std(ddof=1) / math.sqrt(len(values)))
    half = float(stats.t.ppf(1 - (1 - LEVEL) / 2, len(values) - 1)) * error
    mean = float(values.mean())
    return mean - half, mean + half, error


def minimum_detectable_effect(low: float, high: float, seed_error: float) -> float:
    """:data:`MDE_FACTOR` × the wider of the bootstrap interval's standard error (its half-width
    over the normal quantile) and the seed-level one (NaN: absent)."""
    bootstrap_error = (high - low) / (2 * float(stats.norm.ppf(1 - (1 - LEVEL) / 2)))
    return MDE_FACTOR * float(np.nanmax([bootstrap_error, seed_error]))


def hull(low: float, high: float, seed_low: float, seed_high: float) -> tuple[float, float]:
    """The smallest interval holding both intervals (the seed one may be NaN: absent)."""
    return float(np.nanmin([low, seed_low])), float(np.nanmax([high, seed_high]))


def direction(low: float, high: float) -> str:
    """Which side of 0 the interval lies on: "> 0", "< 0" or "spans 0"."""
    return "> 0" if low > 0 else "< 0" if high < 0 else "spans 0"


def _overlaps(low: float, high: float, paper: PaperRange) -> bool:
    return low <= paper.high and paper.low <= high


def magnitude(low: float, high: float, difference: float, paper: PaperRange | None) -> tuple[str, float]:
    """Whether [low, high] overlaps the paper's difference ("yes", "no"; "" when the paper gives
    none in points), and our difference over the middle of the paper's (NaN when that is 0)."""
    if paper is None or paper.ratio:
        return "", math.nan
    middle = paper.middle
    return ("yes" if _overlaps(low, high, paper) else "no"), (difference / middle if middle else math.nan)


def underpowered(mde: float) -> str:
    """The inconclusive verdict of an accuracy cell, with the effect it could have detected."""
    return f"{INCONCLUSIVE} (underpowered: MDE {mde:.2f})"


def cell_verdict(
    expect: Expect, low: float, high: float, paper: PaperRange | None, margin: float, mde: float
) -> str:
    """An accuracy cell's verdict from the conservative interval [low, high] of A − B, the paper's
    difference for the cell (None: not stated in points), the claim's margin and the cell's MDE
    (see :data:`VERDICT_RULE`)."""
    paper = None if paper is None or paper.ratio else paper
    if expect == "equal":
        if -margin <= low and high <= margin:
            return REPRODUCED
        if low > margin or high < -margin:
            return CONTRADICTED
        if (low > 0 or high < 0) and paper is not None and not _overlaps(low, high, paper):
            return NOT_REPRODUCED
        return underpowered(mde)
    sign = 1.0 if expect == "higher" else -1.0
    low, high = sorted((sign * low, sign * high))  # oriented: positive is the claimed direction
    oriented = None
    if paper is not None:
        ends = sorted((sign * paper.low, sign * paper.high))
        oriented = PaperRange(ends[0], ends[1], False)
    if low > 0:
        return REPRODUCED if oriented is None or _overlaps(low, high, oriented) else REPRODUCED_IN_DIRECTION
    if high < 0:
        return CONTRADICTED
    floor = margin if oriented is None else oriented.low  # the smallest effect the paper reports
    return NOT_REPRODUCED if high <= floor else underpowered(mde)


@dataclass(frozen=True)
class Margin:
    """A claim's margin and how it was derived (:data:`VERDICT_RULE`)."""

    value: float
    paper: float  # the largest |difference| the paper calls equal (0 for a directional claim)
    seed_sd: float  # the median of our seed SDs of B's score over the claim's cells (0: unmeasured)

    def derivation(self) -> str:
        """The margin and its two terms, e.g. "0.80 = max(paper 0.80, 2 × seed SD 0.31)"."""
        seed = f"{SEED_SD_FACTOR:g} × seed SD {self.seed_sd:.2f}"
        if not self.paper:
            return f"{self.value:.2f} = {seed}"
        return f"{self.value:.2f} = max(paper {self.paper:.2f}, {seed})"


def claim_margin(expect: Expect, paper: PaperDifference | None, seed_sds: Iterable[float]) -> Margin:
    """The margin of a claim's cells: the paper's largest |difference| (equivalence claims only,
    every task's value) against :data:`SEED_SD_FACTOR` × the median of our seed SDs of B's score
    over the claim's cells (NaN ones, single seeds, left out; the median, so that one noisy dataset
    does not widen every cell's margin)."""
    measured = [value for value in seed_sds if not math.isnan(value)]
    seed_sd = float(np.median(measured)) if measured else 0.0
    ranges = [] if paper is None else [*paper.by_task.values(), *([paper.default] if paper.default else [])]
    stated = max((max(abs(r.low), abs(r.high)) for r in ranges if not r.ratio), default=0.0)
    own = stated if expect == "equal" else 0.0
    return Margin(max(own, SEED_SD_FACTOR * seed_sd), own, seed_sd)


def _base(verdict: str) -> str:
    """A verdict without its note (an inconclusive cell's MDE)."""
    return INCONCLUSIVE if verdict.startswith(INCONCLUSIVE) else verdict


def overall_verdict(verdicts: Iterable[str]) -> str:
    """A claim's verdict from its cells' (see :data:`VERDICT_RULE`); at least one cell."""
    found = {_base(verdict) for verdict in verdicts}
    if not found:
        raise ValueError("overall_verdict: no cells")
    if found == {REPRODUCED}:
        return REPRODUCED
    if found <= set(POSITIVE):
        return REPRODUCED_IN_DIRECTION
    if found == {CONTRADICTED}:
        return CONTRADICTED
    if found & set(NEGATIVE):
        return MIXED if found & set(POSITIVE) else NOT_REPRODUCED
    return INCONCLUSIVE


def _judged(cell: pd.Series, factor: float = 1.0) -> dict[str, object]:
    """One accuracy cell's direction, magnitude and verdict (its margin times ``factor``)."""
    low, high = hull(cell["ci_low"], cell["ci_high"], cell["seed_low"], cell["seed_high"])
    unstated = math.isnan(cell["paper_low"])
    paper = None if unstated else PaperRange(cell["paper_low"], cell["paper_high"], False)
    contains, ratio = magnitude(low, high, cell["difference"], paper)
    found = cell_verdict(cell["expect"], low, high, paper, factor * cell["margin"], cell["mde"])
    return {"direction": direction(low, high), "contains_paper": contains, "ratio": ratio, "verdict": found}


def judge_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """``cells`` (accuracy cells with their intervals, paper's difference, MDE and margin) with
    their direction, magnitude and verdict filled in."""
    if cells.empty:
        return cells
    judged = pd.DataFrame([_judged(cell) for _, cell in cells.iterrows()], index=cells.index)
    return cells.assign(**{name: judged[name] for name in judged.columns})


#: Columns of the sensitivity table: the cell, its margin, and its verdict at each factor.
SENSITIVITY_KEYS = ("claim", "dataset", "encoder", "a", "b", "metric", "expect", "margin")


def sensitivity_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Every accuracy cell of ``cells`` (those with an interval) with its verdict at each of
    :data:`SENSITIVITY_FACTORS` times its margin: how much the verdicts rest on the margin."""
    accuracy = cells[cells["ci_low"].notna() & cells["margin"].notna()]
    rows = [
        {key: cell[key] for key in SENSITIVITY_KEYS}
        | {"margin": round(float(cell["margin"]), 3)}
        | {
            f"verdict at {factor:g} × margin": _judged(cell, factor)["verdict"]
            for factor in SENSITIVITY_FACTORS
        }
        for _, cell in accuracy.iterrows()
    ]
    columns = [*SENSITIVITY_KEYS, *(f"verdict at {factor:g} × margin" for factor in SENSITIVITY_FACTORS)]
    return pd.DataFrame(rows, columns=columns)


def claim_verdict(cells: pd.DataFrame) -> str:
    """A claim's verdict from its cells (:func:`overall_verdict`); an inconclusive one gives the
    range of its underpowered cells' MDEs."""
    found = overall_verdict(cells["verdict"])
    mde = cells.loc[cells["verdict"].str.startswith(INCONCLUSIVE) & cells["mde"].notna(), "mde"]
    if found != INCONCLUSIVE or mde.empty:
        return found
    low, high = f"{mde.min():.2f}", f"{mde.max():.2f}"
    return f"{INCONCLUSIVE} (underpowered: MDE {low if low == high else f'{low} to {high}'})"


def _margin_groups(cells: pd.DataFrame) -> Iterable[tuple[tuple[str, str, bool], pd.DataFrame]]:
    """A claim's cells that share a margin: one measure (a score, or the violation rate, whose
    spread differs) and one kind of comparison (equivalence or directional)."""
    measure = cells["metric"].where(cells["metric"] == "violations", "score")
    return cells.groupby([cells["claim"], measure, cells["expect"] == "equal"], sort=False)


def _group_margin(
    key: tuple[str, str, bool], group: pd.DataFrame, paper: Mapping[str, PaperDifference | None]
) -> Margin:
    claim, measure, equal = key
    stated = paper.get(claim) if measure == "score" else None  # the paper's differences are scores
    return claim_margin("equal" if equal else "higher", stated, group["b_seed_sd"])


def with_margins(cells: pd.DataFrame, paper: Mapping[str, PaperDifference | None]) -> pd.DataFrame:
    """``cells`` (accuracy cells with ``b_seed_sd``) with each one's claim margin filled in."""
    margins = cells["margin"].astype(float).copy()
    for key, group in _margin_groups(cells):
        margins[group.index] = _group_margin(key, group, paper).value
    return cells.assign(margin=margins)


def margin_derivation(cells: pd.DataFrame, paper: Mapping[str, PaperDifference | None]) -> str:
    """How the margin of a claim's accuracy cells was derived (:func:`claim_margin`), per measure
    where the claim reads two (a score and the violation rate); "" for cells without a margin."""
    measured = cells[cells["margin"].notna()]
    parts = {key[1]: _group_margin(key, group, paper) for key, group in _margin_groups(measured)}
    if len(parts) == 1:
        return next(iter(parts.values())).derivation()
    return "; ".join(f"{name}: {margin.derivation()}" for name, margin in parts.items())
