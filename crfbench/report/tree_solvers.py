"""The SparseMAP paper's Fig. 2 in its own setting, from ``results/sparsemap/tree-solvers.csv``
(``crfbench sparsemap trees``, :mod:`crfbench.tree_solvers`): each solver's gap to the optimum
against iterations and against seconds, and its support size, on random-potential trees; and the
means at iteration budgets that the table and the ledger's solver claim read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ..schema import TREE_SOLVER_COLUMNS, TREE_SOLVERS_TABLE
from .figures import Drawn, save_png, subplots
from .inputs import read_table

#: Gaps below this are drawn at it (the solvers stop at rounding, and a log axis has no 0).
GAP_FLOOR = 1e-12
#: The budgets (iterations) of the table.
TABLE_BUDGETS = (10, 20, 50, 100)


def read_tree_solvers(results_dir: Path) -> pd.DataFrame | None:
    """The study's table, or None when it did not run."""
    return read_table(results_dir, TREE_SOLVERS_TABLE, TREE_SOLVER_COLUMNS)


def filled(trace: pd.DataFrame) -> pd.DataFrame:
    """``trace`` with every (instance, solver) carried to the last iteration any solver ran: a
    solver that stopped keeps its last iterate (what it returns given more iterations)."""
    last = int(trace["iteration"].max())
    parts = []
    for (instance, solver), rows in trace.groupby(["instance", "solver"], sort=False):
        rows = rows.set_index("iteration").reindex(range(last + 1)).ffill()
        parts.append(rows.assign(instance=instance, solver=solver).reset_index())
    return pd.concat(parts, ignore_index=True)


def budget_means(trace: pd.DataFrame, budgets: Iterable[int]) -> pd.DataFrame:
    """Per (solver, budget) of ``budgets`` that the trace reaches (some solver ran that many
    iterations): the mean over instances of the gap, Wolfe gap, support size and seconds of each
    solver's iterate after at most that many iterations, and the instances (n)."""
    last = int(trace["iteration"].max())
    reached = [k for k in budgets if k <= last]
    full = filled(trace)
    at = full[full["iteration"].isin(reached)]
    means = at.groupby(["solver", "iteration"], sort=False)[["gap", "wolfe_gap", "support", "seconds"]].mean()
    counts = at.groupby(["solver", "iteration"], sort=False)["instance"].nunique().rename("n")
    return means.join(counts).reset_index().rename(columns={"iteration": "budget"})


def tree_solver_table(trace: pd.DataFrame) -> pd.DataFrame:
    """The report's table: per solver and budget, the mean gap to the optimum, Wolfe gap, support
    size and milliseconds."""
    means = budget_means(trace, TABLE_BUDGETS)
    return pd.DataFrame(
        {
            "solver": means["solver"],
            "iterations": means["budget"],
            "mean gap f* − f": means["gap"].map("{:.2e}".format),
            "mean Wolfe gap": means["wolfe_gap"].map("{:.2e}".format),
            "mean support size": means["support"].round(2),
            "mean ms": (1000 * means["seconds"]).round(1),
        }
    )


def tree_solver_figure(trace: pd.DataFrame, path: Path) -> Drawn:
    """Gap to the optimum against iterations and against seconds (log scale) and support size
    against iterations: a thin line per instance, a thick one for the median over instances."""
    full = filled(trace)
    figure, axes = subplots(1, 3, (13.5, 3.8))
    gap, timed, support = axes[0]
    for k, (solver, rows) in enumerate(full.groupby("solver", sort=False)):
        colour = f"C{k}"
        for _, own in trace[trace["solver"] == solver].groupby("instance"):
            thin = {"color": colour, "linewidth": 0.5, "alpha": 0.35}
            gap.plot(own["iteration"], own["gap"].clip(lower=GAP_FLOOR), **thin)
            timed.plot(own["seconds"], own["gap"].clip(lower=GAP_FLOOR), **thin)
            support.plot(own["iteration"], own["support"], **thin)
        median = rows.groupby("iteration")[["gap", "seconds", "support"]].median()
        thick = {"color": colour, "linewidth": 1.8, "label": solver}
        gap.plot(median.index, median["gap"].clip(lower=GAP_FLOOR), **thick)
        timed.plot(median["seconds"], median["gap"].clip(lower=GAP_FLOOR), **thick)
        support.plot(median.index, median["support"], **thick)
    for axis in (gap, timed):
        axis.set_yscale("log")
        axis.set_ylabel("gap to the optimum, f* − f")
    gap.set_xlabel("iterations")
    timed.set_xlabel("solver time (s, one thread)")
    support.set_xlabel("iterations")
    support.set_ylabel("support size (trees)")
    gap.legend(fontsize="small")
    words, instances = int(trace["words"].iloc[0]), trace["instance"].nunique()
    figure.suptitle(f"SparseMAP solvers on random-potential trees of {words} words ({instances} instances)")
    caption = (
        f"The SparseMAP paper's Fig. 2 in its own setting: SparseMAP over single-root dependency trees "
        f"of {words} words with standard normal arc scores, {instances} random instances, solved by "
        "the active set and by vanilla, away-step and pairwise Frank–Wolfe (torch, float64, one CPU "
        "thread, Chu-Liu-Edmonds on the host as the oracle). Left to right: the gap f* − f of the "
        "objective θᵀy − ½‖μ‖² to the best value found on the instance (the active set's run "
        "continued to its iteration cap, and every traced iterate), against iterations and against "
        "the solver's own wall-clock time (the solvers one after the other in one job: compare them "
        "within the figure, not across runs); the number of trees in the support. Thin lines: one "
        "instance each; thick lines: the median over instances, a solver that stopped converged kept "
        f"at its last iterate. Gaps below {GAP_FLOOR:g} drawn at {GAP_FLOOR:g} (log scale). The means at "
        f"{', '.join(map(str, TABLE_BUDGETS))} iterations are in tables/sparsemap-tree-solvers.md."
    )
    return save_png(figure, path, caption)


def tree_solver_figures(trace: pd.DataFrame | None, out_dir: Path) -> list[Drawn]:
    """The figure, when the study ran."""
    if trace is None or trace.empty:
        return []
    return [tree_solver_figure(trace, out_dir / "sparsemap-tree-solvers.png")]
