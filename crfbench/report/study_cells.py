"""The cells of the claims that are not paired accuracy differences: SparseMAP's sparsity over
training (chains and trees), its solvers (the sweep's chains and random trees), the Bethe paper's
CGM speed-up and the Newton study's cost and solver comparisons. Each function turns one result table
into ledger cells (``claims.CELL_COLUMNS``) with a verdict; ``ledger.claim_ledger`` gathers them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

from .bethe import OBJECTIVE_TOLERANCE, cgm_speedups, relative_gaps
from .claims import (
    CELL_COLUMNS,
    CLAIMS,
    CONTRADICTED,
    GAP_TIE,
    HV_SAME_ORDER,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    REPRODUCED_IN_DIRECTION,
    CgmClaim,
    HvCostClaim,
    NewtonSolverClaim,
    SolverClaim,
    SparsityClaim,
)
from .newton import cost_ratios, first_reach
from .parse_inputs import PARSE_DATASETS, TREE_SUPPORT
from .tree_solvers import budget_means


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


#: How the ledger names the parsers' support size (``parse_inputs.TREE_SUPPORT``).
TREE_SUPPORT_METRIC = "support size (trees per sentence)"


def tree_sparsity_cells(curves: pd.DataFrame) -> pd.DataFrame:
    """:func:`sparsity_cells` of the parsers: their support size per epoch (``TREE_SUPPORT``, trees
    per sentence) at the selected epoch minus at epoch 1, as the taggers'; a parser's epoch 0 (the
    untrained model) is left out. Empty when the curves have no such column."""
    if TREE_SUPPORT not in curves.columns:
        return pd.DataFrame(columns=list(CELL_COLUMNS))
    trees = curves[curves["dataset"].isin(PARSE_DATASETS) & (curves["epoch"] >= 1)]
    cells = sparsity_cells(trees.assign(dev_support=pd.to_numeric(trees[TREE_SUPPORT], errors="coerce")))
    return cells.assign(metric=TREE_SUPPORT_METRIC)


def _against_reference(
    means: pd.DataFrame, reference: str, solvers: Iterable[str], gap: str, support: str
) -> Iterator[tuple[str, int, float, pd.Series, str]]:
    """The solver claims' check, for each solver of ``solvers`` but ``reference``: at every budget
    both reached (``means`` holds a row per (solver, budget), budgets ascending), the reference's
    mean ``gap`` no higher (to :data:`GAP_TIE`) and its mean ``support`` no larger. Yields (solver,
    the largest shared budget, the reference's gap minus the solver's there, the solver's row
    there, the verdict); nothing where ``reference`` is absent."""
    if reference not in means.index.get_level_values(0):
        return
    ours = means.loc[reference]
    for other in solvers:
        if other == reference or other not in means.index.get_level_values(0):
            continue
        theirs = means.loc[other]
        shared = [k for k in ours.index if k in theirs.index]
        if not shared:
            continue
        checks = (
            ours.loc[k, gap] <= theirs.loc[k, gap] + GAP_TIE
            and ours.loc[k, support] <= theirs.loc[k, support]
            for k in shared
        )
        last = shared[-1]
        difference = float(ours.loc[last, gap] - theirs.loc[last, gap])
        yield other, int(last), difference, theirs.loc[last], _ordered(checks)


def solver_cells(sweep: pd.DataFrame) -> pd.DataFrame:
    """One row (:data:`CELL_COLUMNS`) per (solver claim, dataset, encoder, other solver) swept: the
    reference solver's mean Wolfe gap minus the other's at the largest budget, and the verdict."""
    rows = []
    swept = sweep[sweep["method"] == "sparsemap"]
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, SolverClaim):
            continue
        for (dataset, encoder), panel in swept.groupby(["dataset", "encoder_name"], sort=False):
            within = panel[panel["iterations"].isin(spec.budgets)]
            values = within.pivot_table(index=["solver", "iterations"], columns="metric", values="value")
            compared = _against_reference(
                values, spec.reference, dict.fromkeys(panel["solver"]), "wolfe_gap", "support_size"
            )
            for other, last, difference, _, verdict in compared:
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
                        "difference": difference,
                        "verdict": verdict,
                    }
                )
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def tree_solver_cells(trace: pd.DataFrame) -> pd.DataFrame:
    """One row (:data:`CELL_COLUMNS`) per (solver claim, other solver) of the random-tree study
    (results/sparsemap/tree-solvers.csv, the paper's own setting), the same check as
    :func:`solver_cells` with the gap to the optimum (the paper's objective) in place of the Wolfe
    gap, means over the instances: the reference solver's mean gap minus the other's at the largest
    budget, and the verdict."""
    rows = []
    for claim, spec in CLAIMS.items():
        if not isinstance(spec, SolverClaim):
            continue
        means = budget_means(trace, spec.budgets).set_index(["solver", "budget"])
        solvers = dict.fromkeys(means.index.get_level_values("solver"))
        for other, last, difference, theirs, verdict in _against_reference(
            means, spec.reference, solvers, "gap", "support"
        ):
            rows.append(
                {
                    "claim": claim,
                    "dataset": f"random trees, {int(trace['words'].iloc[0])} words",
                    "encoder": "",
                    "a": f"tree-sparsemap/{spec.reference}",
                    "b": f"tree-sparsemap/{other}",
                    "metric": f"objective gap at {last} it. (trees)",
                    "expect": "lower",
                    "n_seeds": 1,
                    "n_sentences": int(theirs["n"]),
                    "difference": difference,
                    "verdict": verdict,
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
            elif gaps[trials.index].max() > OBJECTIVE_TOLERANCE:
                found = NOT_REPRODUCED  # not at equal objective
            elif size.speedup >= spec.factor:
                found = REPRODUCED
            else:
                found = REPRODUCED_IN_DIRECTION if size.speedup > 1 else CONTRADICTED
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
