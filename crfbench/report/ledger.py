"""The claim ledger: a verdict on each claim of the paper list (``claims.csv``: id, paper, claim,
comparison, paper_evidence, paper_difference, kind), computed from our result tables.

An accuracy claim compares two (training loss, decoder) runs A and B, as its ``comparison`` says,
within each (dataset, encoder) cell: our difference is A − B in percentage points, paired (same seed,
same test sentences), averaged over seeds, each metric a corpus ratio of sums over the test sentences
(accuracy Σcorrect/Σtokens, F1 2Σmatched/(Σgold+Σpredicted), violation rate mean of invalid). Its
95% interval is a percentile bootstrap resampling seeds and test sentences with replacement, the same
sentences for both sides and every seed, with a fixed random seed (byte-for-byte reproducible); beside
it, a t interval over the per-seed differences. The comparisons are data (:data:`CLAIMS`), the
paper's own differences are parsed from claims.csv (``paper_difference``), the verdict a fixed rule
(``crfbench.report.verdicts``, its text appended below).

"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .claims import (
    BOOTSTRAP_SEED,
    BUILT_PAPERS,
    CLAIMS,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTABLE,
    OUT_OF_SCOPE,
    PAPER_LABELS,
    REPRODUCED,
    RESAMPLES,
    SUMMARY_COLUMNS,
    AccuracyClaim,
    BestOfClaim,
    CgmClaim,
    HvCostClaim,
    NewtonSolverClaim,
    SolverClaim,
    SparsityClaim,
    SpeedClaim,
)
from .layout import BASELINE_KINDS
from .paired import accuracy_cells
from .paper_difference import parse_paper_difference
from .parse_claims import best_of_cells, best_of_reason
from .parse_inputs import PARSE_DATASETS, ParseResults
from .regime import regime_summary
from .stats import ITEM_COLUMNS
from .study_cells import (
    cgm_cells,
    hv_cost_cells,
    newton_solver_cells,
    solver_cells,
    sparsity_cells,
    tree_solver_cells,
    tree_sparsity_cells,
)
from .verdicts import VERDICT_RULE, claim_verdict, margin_derivation, overall_verdict

__doc__ += f"\nVerdict rule. {VERDICT_RULE}\n"  # stated once, read by the report and by help()


def speedups(timing: pd.DataFrame, spec: SpeedClaim) -> pd.DataFrame:
    """dataset, encoder, timing mode, baseline, its kind (``BASELINE_KINDS``) and speed-up (baseline /
    compared median seconds, over rounds and the cell's timing runs of that mode) for each (dataset,
    encoder, mode) that timed both names of one of ``spec.pairs``, with the lowest and highest ratio
    of single rounds (baseline over compared in the same timing run and round) and their number:
    eager and compiled rows never meet in one ratio."""
    rows = timing[timing["kind"] == spec.kind]
    run_columns = [name for name in timing.columns if name not in ITEM_COLUMNS]
    rows = rows.assign(run=rows.groupby(run_columns, dropna=False).ngroup() if len(rows) else 0)
    rows = rows.assign(mode=_framework_mode(rows))
    keys = ["dataset", "encoder_name", "mode"]
    parts = []
    for baseline, compared in spec.pairs:
        base, other = rows[rows["name"] == baseline], rows[rows["name"] == compared]
        if spec.iterations is not None:
            other = other[other["iterations"] == spec.iterations]
        medians = [part.groupby(keys)["seconds"].median() for part in (base, other)]
        paired = other.merge(base[["run", "round", "seconds"]], on=["run", "round"], suffixes=("", "_base"))
        rounds = (paired["seconds_base"] / paired["seconds"]).groupby([paired[key] for key in keys])
        spread = rounds.agg(["min", "max", "count"]).set_axis(["low", "high", "rounds"], axis=1)
        ratio = (medians[0] / medians[1]).dropna().rename("speedup").to_frame().join(spread)
        parts.append(ratio.assign(baseline=baseline, baseline_kind=_kind_of(baseline)))
    columns = ["dataset", "encoder", "mode", "baseline", "baseline_kind", "speedup", "low", "high", "rounds"]
    if not parts:
        return pd.DataFrame(columns=columns)
    ratios = pd.concat(parts).rename_axis(["dataset", "encoder", "mode"]).reset_index()[columns]
    return ratios.sort_values(["mode", "dataset", "encoder"], ignore_index=True)


def _framework_mode(rows: pd.DataFrame) -> pd.Series:
    """Each row's timing mode, with its framework where it is not torch ("jax compiled"): torch's and
    JAX's timings never meet in one ratio, and a verdict rests on either's compiled mode."""
    if "backend" not in rows.columns:
        return rows["mode"]
    backend = rows["backend"].fillna("torch").astype(str)
    return rows["mode"].where(backend == "torch", backend + " " + rows["mode"].astype(str))


def _kind_of(baseline: str) -> str:
    """The kind (``BASELINE_KINDS``) of a baseline timing name."""
    return next(kind for kind, names in BASELINE_KINDS.items() if baseline in names.values())


def round_verdict(low: float, high: float) -> str:
    """A speed-up cell's verdict from its single-round ratios: reproduced when the compared item was
    faster in every round (lowest ratio > 1), contradicted when slower in every round (highest
    ratio < 1), inconclusive when the rounds disagree."""
    if low > 1:
        return REPRODUCED
    return CONTRADICTED if high < 1 else INCONCLUSIVE


#: The timing mode a speed verdict rests on, where it was timed; eager timings are shown beside.
VERDICT_MODE = "compiled"


def _range(values: pd.Series, style: str) -> str:
    """The range "low to high" of ``values``, each end formatted with ``style``; one value when both
    ends read the same."""
    low, high = style.format(values.min()), style.format(values.max())
    return low if low == high else f"{low} to {high}"


def _cells_range(cells: pd.DataFrame) -> str:
    """Our differences' range per metric, named when the claim reads several metrics."""
    ranges = {
        metric: _range(group["difference"], "{:+.1e}")
        if metric.startswith(("Wolfe gap", "objective gap"))  # gaps span orders of magnitude
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


def _status(
    our_range: str, n_cells: int, found: str, reason: str = "", margin: str = "", regime: str = ""
) -> dict[str, object]:
    return {
        "our_range": our_range,
        "n_cells": n_cells,
        "verdict": found,
        "margin": margin,
        "regime": regime,
        "reason": reason,
    }


def _speed_range(ratios: pd.DataFrame, mode: str, where: str = "") -> str:
    """``ratios`` of one ``mode`` as "<where><mode>, vs <baseline kind>: x<low> to x<high> (<n> rounds:
    x<lowest> to x<highest>)", a part per baseline kind: the range of the cells' speed-ups, then the
    number of timing rounds behind them and the range of their single-round ratios."""
    rows = ratios[ratios["mode"] == mode]
    return "; ".join(
        f"{where}{mode}, vs {kind}: {_range(group['speedup'], 'x{:.2f}')} ({int(group['rounds'].sum())} "
        f"rounds: {_range(pd.concat([group['low'], group['high']]), 'x{:.2f}')})"
        for kind, group in rows.groupby("baseline_kind", sort=False)
    )


def _short(revision: str) -> str:
    """A commit as the notes name it: its first 7 hex digits, ``+dirty`` kept."""
    return revision[:7] + ("+dirty" if revision.endswith("+dirty") else "")


def _speed_status(spec: SpeedClaim, gpu: bool, timing: pd.DataFrame) -> dict[str, object]:
    """A speed claim's speed-ups per timing mode and baseline, and its verdict, drawn from compiled
    timings (:data:`VERDICT_MODE`; on CUDA for a GPU claim) where there are any. A GPU claim
    without CUDA timings is not testable, with our CPU speed-ups given as information; one with
    eager CUDA timings only is pending a compiled GPU run (eager GPU timings measure kernel
    launches), its eager speed-ups shown with the revisions they were measured at."""
    cuda = timing[timing["device"].astype(str).str.startswith("cuda")]
    if gpu and cuda.empty and not timing.empty:
        cpu = speedups(timing, spec)
        our_range = "; ".join(f"CPU {_speed_range(cpu, mode)}" for mode in sorted(set(cpu["mode"])))
        return _status(our_range, len(cpu), NOT_TESTABLE, "GPU claim, CPU run")
    measured = cuda if gpu else timing
    ratios = speedups(measured, spec)
    if ratios.empty:
        return _status("", 0, NOT_TESTABLE, "no timing runs in this profile")
    names = measured["device_name"].where(measured["device_name"] != "", measured["device"])
    where = ", ".join(sorted(set(names.astype(str)))) + " " if gpu else ""
    modes = sorted(set(ratios["mode"]), key=lambda mode: (not mode.endswith(VERDICT_MODE), mode))
    our_range = "; ".join(_speed_range(ratios, mode, where) for mode in modes)
    if not any(mode.endswith(VERDICT_MODE) for mode in modes):
        revisions = ", ".join(sorted({_short(revision) for revision in measured["revision"].astype(str)}))
        reason = f"pending a compiled {'GPU ' if gpu else ''}run (eager timings at {revisions})"
        return _status(our_range, len(ratios), NOT_TESTABLE, reason)
    compiled = ratios[ratios["mode"].str.endswith(VERDICT_MODE)]
    by_kind = {  # in BASELINE_KINDS's order, the paper's first
        kind: overall_verdict(map(round_verdict, group["low"], group["high"]))
        for kind in BASELINE_KINDS
        if not (group := compiled[compiled["baseline_kind"] == kind]).empty
    }
    judged_by = next(iter(by_kind))  # PAPER_BASELINE_KIND, where it was timed
    reason = "; ".join(f"vs {kind}: {verdict}" for kind, verdict in by_kind.items())
    return _status(our_range, len(compiled), by_kind[judged_by], f"verdict vs {judged_by}; {reason}")


def _no_cell_reason(
    spec: AccuracyClaim
    | BestOfClaim
    | SparsityClaim
    | SolverClaim
    | CgmClaim
    | HvCostClaim
    | NewtonSolverClaim,
) -> str:
    """Why a claim has no cell in this profile: what it needs that was not run (a speed claim
    always has its status from the timing table, never from cells)."""
    if isinstance(spec, BestOfClaim):
        proxy = "" if spec.proxy is None else f"; its proxy: {_no_cell_reason(spec.proxy)}"
        sides = f"{' or '.join(spec.a)} and {' or '.join(spec.b)}"
        return f"no parser run in this profile has {sides} on dev and test{proxy}"
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
    reason = best_of_reason(spec, own) if isinstance(spec, BestOfClaim) else ""
    stated = {claim_id: parse_paper_difference(str(claim["paper_difference"]))}
    found, margin = claim_verdict(own), margin_derivation(own, stated)
    return _status(_cells_range(own), len(own), found, reason, margin=margin, regime=regime_summary(own))


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
    parse: ParseResults | None = None,
    trees: pd.DataFrame | None = None,
    regimes: Mapping[tuple[str, str], str] | None = None,
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
    solvers and cost tables (``report.newton.read_newton``), for the Newton claims; ``parse``: the
    dependency parsers' rows (``parse_inputs.parse_results``), for the parsing claims; ``trees``:
    results/sparsemap/tree-solvers.csv, the solver claim on random trees beside the sweep's chains;
    ``regimes``: the regime text of each (dataset, encoder) (``report.regime.regimes``), absent:
    "not recorded".
    """
    order = {claim_id: position for position, claim_id in enumerate(claims["id"])}
    paper = {
        str(claim_id): parse_paper_difference(str(text))
        for claim_id, text in zip(claims["id"], claims["paper_difference"], strict=True)
    }
    judged: dict[str, Any] = {"paper": paper, "regimes": regimes, "resamples": resamples, "seed": seed}
    parts = [accuracy_cells(sentences, tasks, **judged), best_of_cells(parse, sentences, tasks, **judged)]
    if curves is not None:
        parts.append(sparsity_cells(curves[~curves["dataset"].isin(PARSE_DATASETS)]))
    if parse is not None:
        parts.append(tree_sparsity_cells(parse.curves))
    if sweep is not None:
        parts.append(solver_cells(sweep))
    if trees is not None:
        parts.append(tree_solver_cells(trees))
    if cgm is not None:
        parts.append(cgm_cells(cgm))
    trace, solvers, cost = newton
    if trace is not None and solvers is not None:
        parts.append(newton_solver_cells(trace, solvers))
    if cost is not None:
        parts.append(hv_cost_cells(cost))
    cells = pd.concat([part for part in parts if not part.empty] or parts[:1], ignore_index=True)
    cells = cells[cells["claim"].isin(order)]
    recorded = pd.Series(
        [(regimes or {}).get(key) for key in zip(cells["dataset"], cells["encoder"], strict=True)],
        cells.index,
    )
    cells = cells.assign(regime=cells["regime"].where(cells["regime"].notna(), recorded))  # the other cells'
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
