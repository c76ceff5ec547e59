"""The cells of a best-of claim (sparsemap-1, :class:`~crfbench.report.claims.BestOfClaim`): per
parsing dataset, the best SparseMAP loss against the best of CRF and SSVM in UAS, each side's best
chosen on dev, then paired over seeds and test sentences exactly as an accuracy claim's comparison
(``paired.accuracy_cells``, whose verdict rule applies); and, where no parser ran, the claim's proxy
on the taggers, which the ledger's reason names as a proxy.

The best loss of a side is the one of the highest dev UAS (``evaluation.csv``'s dev rows, mean over
seeds), as the paper tuned on dev; choosing on the test set would favour whichever side has more
losses to pick from. The cells' ``a`` and ``b`` name the chosen losses and the candidates; a cell on a
substitute protocol (``parse_inputs.proxy_datasets``) has its metric marked "(proxy)".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .claims import (
    BOOTSTRAP_SEED,
    CELL_COLUMNS,
    CLAIMS,
    RESAMPLES,
    AccuracyClaim,
    BestOfClaim,
    Comparison,
)
from .paired import accuracy_cells
from .paper_difference import PaperDifference
from .parse_inputs import PARSE_TASKS, UAS, ParseResults, proxy_datasets

#: Appended to the metric of a cell whose dataset is a proxy of the paper's setting.
PROXY_MARK = " (proxy)"


def dev_choices(metrics: pd.DataFrame, spec: BestOfClaim) -> pd.DataFrame:
    """Per (dataset, encoder) of ``spec.datasets`` with a dev UAS on both sides: the chosen loss of
    each side (``a``, ``b``) and its mean dev UAS over seeds in % (``a_dev``, ``b_dev``)."""
    dev = metrics[
        metrics["dataset"].isin(spec.datasets)
        & (metrics["split"] == "dev")
        & (metrics["decoder"] == spec.decoder)
        & (metrics["metric"] == UAS)
        & metrics["loss"].isin(spec.a + spec.b)
    ]
    per_seed = dev.groupby(["dataset", "encoder_name", "loss", "seed"], as_index=False)["value"].mean()
    means = per_seed.groupby(["dataset", "encoder_name", "loss"])["value"].mean()
    rows = []
    for dataset in spec.datasets:
        for encoder in sorted(set(per_seed.loc[per_seed["dataset"] == dataset, "encoder_name"])):
            scores = means.loc[(dataset, encoder)]
            chosen = [_best(scores, side) for side in (spec.a, spec.b)]
            if chosen[0] is None or chosen[1] is None:
                continue
            rows.append(
                {
                    "dataset": dataset,
                    "encoder": encoder,
                    "a": chosen[0],
                    "b": chosen[1],
                    "a_dev": 100 * scores[chosen[0]],
                    "b_dev": 100 * scores[chosen[1]],
                }
            )
    return pd.DataFrame(rows, columns=["dataset", "encoder", "a", "b", "a_dev", "b_dev"])


def _best(scores: pd.Series, losses: tuple[str, ...]) -> str | None:
    """The loss of ``losses`` with the highest score (the first listed on a tie); None if none ran."""
    ran = [loss for loss in losses if loss in scores.index and pd.notna(scores[loss])]
    return max(ran, key=lambda loss: scores[loss]) if ran else None


def _tree_cells(
    parse: ParseResults, claim_id: str, spec: BestOfClaim, judged: dict[str, Any]
) -> list[pd.DataFrame]:
    """The cells of one best-of claim on the parsers: one per (dataset, encoder) chosen on dev whose
    two losses both ran on test."""
    proxies = proxy_datasets(parse.metrics)
    cells = []
    for choice in dev_choices(parse.metrics, spec).itertuples(index=False):
        comparison = Comparison(f"{choice.a}/{spec.decoder}", f"{choice.b}/{spec.decoder}", spec.expect)
        runs = parse.sentences[parse.sentences["encoder_name"] == choice.encoder]
        one = {claim_id: AccuracyClaim((str(choice.dataset),), (comparison,))}
        found = accuracy_cells(runs, PARSE_TASKS, claims=one, **judged)
        if found.empty:
            continue
        cells.append(
            found.assign(
                a=f"{comparison.a} (best on dev of {', '.join(spec.a)})",
                b=f"{comparison.b} (best on dev of {', '.join(spec.b)})",
                metric=found["metric"] + (PROXY_MARK if choice.dataset in proxies else ""),
            )
        )
    return cells


def best_of_cells(
    parse: ParseResults | None,
    sentences: pd.DataFrame,
    tasks: Mapping[str, str],
    *,
    paper: Mapping[str, PaperDifference | None] | None = None,
    regimes: Mapping[tuple[str, str], str] | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """One row (:data:`CELL_COLUMNS`) per (best-of claim, parsing dataset, encoder) whose chosen
    losses both ran on test (``parse``: the parser's rows, None when none ran); for a claim with no
    such cell, its proxy's cells on ``sentences`` (the taggers', with their ``tasks``), as
    ``accuracy_cells`` makes them (``paper``, ``regimes``, ``resamples`` and ``seed`` as there)."""
    judged: dict[str, Any] = {"paper": paper, "regimes": regimes, "resamples": resamples, "seed": seed}
    parts = []
    for claim_id, spec in CLAIMS.items():
        if not isinstance(spec, BestOfClaim):
            continue
        trees = [] if parse is None else _tree_cells(parse, claim_id, spec, judged)
        if trees:
            parts += trees
        elif spec.proxy is not None:
            proxy = {claim_id: spec.proxy}
            parts.append(accuracy_cells(sentences, tasks, claims=proxy, **judged))
    if not parts:
        return pd.DataFrame(columns=list(CELL_COLUMNS))
    return pd.concat(parts, ignore_index=True)[list(CELL_COLUMNS)]


def best_of_reason(spec: BestOfClaim, cells: pd.DataFrame) -> str:
    """The ledger's reason for a best-of claim's cells: that they are its proxy (no parser run had
    both sides), or which of its datasets are proxies of the paper's setting; "" otherwise."""
    if not cells["dataset"].isin(spec.datasets).any():
        proxied = ", ".join(dict.fromkeys(cells["dataset"]))
        return f"proxy: no dependency-parsing cell in this profile; the taggers' cells ({proxied}) stand in"
    marked = cells.loc[cells["metric"].str.endswith(PROXY_MARK), "dataset"]
    if marked.empty:
        return ""
    return f"proxy: {', '.join(dict.fromkeys(marked))} on a substitute protocol (no official train split)"
