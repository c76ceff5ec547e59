"""The Newton-CRF thesis's questions (Chen 2009; it reports no numbers, so there is no paper column)
from ``results/newton/``: how fast each solver reaches the optimum of the same convex objective, in
seconds and in passes over the data, its test F1, and what one Hessian-vector product costs against
one gradient."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..schema import (
    NEWTON_COST_COLUMNS,
    NEWTON_COST_TABLE,
    NEWTON_SOLVER_COLUMNS,
    NEWTON_SOLVERS_TABLE,
    NEWTON_TRACE_COLUMNS,
    NEWTON_TRACE_TABLE,
)
from .figures import Drawn, save_png, subplots
from .inputs import read_table

#: The study's tables and their columns (``crfbench.schema``'s).
TRACE_TABLE, TRACE_COLUMNS = NEWTON_TRACE_TABLE, NEWTON_TRACE_COLUMNS
SOLVERS_TABLE, SOLVER_COLUMNS = NEWTON_SOLVERS_TABLE, NEWTON_SOLVER_COLUMNS
COST_TABLE, COST_COLUMNS = NEWTON_COST_TABLE, NEWTON_COST_COLUMNS
#: Relative suboptimality levels (f − f*) / f* that the table and the ledger read. CRFsuite logs its
#: objective to 8 significant digits, so 1e-7 is the finest level its trace resolves.
LEVELS = (1e-3, 1e-5, 1e-7)
#: Relative suboptimality within which a solver's final objective agrees with f* (the problem is
#: convex, so every solver run to convergence must get there; Adam's fixed budget need not).
AGREEMENT = 1e-7
#: The passes over the data: forward only, forward–backward, Hv.
PASSES = ("function", "gradient", "hvp")
#: The Hv timings, as (column, label).
HV_KINDS = (
    ("hvp_dp", "DP Hv on stored sweeps"),
    ("hvp_dp_with_sweep", "DP Hv with its sweep"),
    ("hvp_autodiff", "autodiff Hv (forward-over-reverse)"),
)
NEWTON_INTRO = (
    "Newton methods for CRFs (Chen 2009): trust-region Newton (TRON) with a dynamic-programming "
    "Hessian-vector product against L-BFGS, SciPy's trust-ncg, CRFsuite and Adam, all on one L2-"
    "regularised feature CRF of CoNLL-2003 NER from λ = 0; f* is the lowest final objective of any "
    "solver, recomputed by our code at its λ. The thesis has no experiments: no paper column."
)


def read_newton(results_dir: Path) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """``(trace, solvers, cost)`` of results/newton/, each None when absent."""
    return (
        read_table(results_dir, TRACE_TABLE, TRACE_COLUMNS),
        read_table(results_dir, SOLVERS_TABLE, SOLVER_COLUMNS),
        read_table(results_dir, COST_TABLE, COST_COLUMNS),
    )


def suboptimality(trace: pd.DataFrame, solvers: pd.DataFrame) -> pd.DataFrame:
    """The trace with ``gap`` = (objective − f*) / |f*| (≥ 0) and ``passes`` = function + gradient +
    Hv evaluations, f* the lowest final objective in ``solvers``."""
    best = solvers["objective"].min()
    return trace.assign(
        gap=((trace["objective"] - best) / abs(best)).clip(lower=0.0),
        passes=trace[list(PASSES)].sum(axis=1),
    )


def first_reach(trace: pd.DataFrame, solvers: pd.DataFrame, level: float) -> pd.DataFrame:
    """Per solver, the seconds and passes of its first trace row with gap ≤ ``level`` (NaN: never)."""
    gaps = suboptimality(trace, solvers)
    rows = []
    for solver in solvers["solver"]:
        reached = gaps[(gaps["solver"] == solver) & (gaps["gap"] <= level)]
        first = reached.iloc[0] if len(reached) else None
        rows.append(
            {
                "solver": solver,
                "seconds": np.nan if first is None else float(first["seconds"]),
                "passes": np.nan if first is None else float(first["passes"]),
            }
        )
    return pd.DataFrame(rows)


def _cell(seconds: float, passes: float) -> str:
    return "never" if np.isnan(seconds) else f"{seconds:.1f} s / {passes:.0f}"


def solver_table(trace: pd.DataFrame, solvers: pd.DataFrame) -> pd.DataFrame:
    """One row per solver: seconds / passes to each level of suboptimality, final gap, iterations,
    total seconds and test F1."""
    best = solvers["objective"].min()
    reach = {level: first_reach(trace, solvers, level).set_index("solver") for level in LEVELS}
    rows = []
    for row in solvers.itertuples(index=False):
        rows.append(
            {
                "solver": row.solver,
                **{
                    f"to {level:g}: seconds / passes": _cell(*reach[level].loc[row.solver])
                    for level in LEVELS
                },
                "final (f − f*)/f*": f"{max(row.objective - best, 0.0) / abs(best):.1e}",
                f"at f* (≤ {AGREEMENT:g})": "yes" if row.objective - best <= AGREEMENT * abs(best) else "no",
                "final ‖∇f‖": f"{row.gradient_norm:.1e}",
                "iterations": int(row.iterations),
                "seconds": f"{row.seconds:.1f}",
                "test F1 %": f"{row.test_f1:.2f}",
            }
        )
    return pd.DataFrame(rows)


def cost_ratios(cost: pd.DataFrame) -> pd.DataFrame:
    """The cost table with each Hv's seconds over the gradient's (``<kind>/gradient``)."""
    return cost.assign(**{f"{kind}/gradient": cost[kind] / cost["gradient"] for kind, _ in HV_KINDS})


def cost_table(cost: pd.DataFrame) -> pd.DataFrame:
    ratios = cost_ratios(cost)
    shown = ratios[["backend", "N", "T", "F", "gradient", *[f"{kind}/gradient" for kind, _ in HV_KINDS]]]
    return shown.rename(columns={"gradient": "gradient seconds"}).round(3)


def convergence_figure(trace: pd.DataFrame, solvers: pd.DataFrame, path: Path) -> Drawn:
    """Relative suboptimality against seconds and against passes over the data, one line per solver."""
    gaps = suboptimality(trace, solvers)
    floor = 1e-12
    figure, axes = subplots(1, 2, (10, 3.8), sharey=True)
    for k, solver in enumerate(solvers["solver"]):
        rows = gaps[gaps["solver"] == solver]
        for axis, x in zip(axes[0], ("seconds", "passes"), strict=True):
            axis.plot(
                rows[x], rows["gap"].clip(lower=floor), marker=".", markersize=3, color=f"C{k}", label=solver
            )
    for axis, label in zip(
        axes[0], ("seconds (one thread)", "passes over the data (f + ∇f + Hv)"), strict=True
    ):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel(label)
        for level in LEVELS:
            axis.axhline(level, color="grey", linewidth=0.5, linestyle=":")
    axes[0, 0].set_ylabel("(f − f*) / f*")
    axes[0, 1].legend(fontsize="small")
    first = solvers.iloc[0]
    caption = (
        f"Newton-CRF: relative suboptimality of every solver against time and passes over the data, "
        f"CoNLL-2003, {int(first['train_sentences'])} training sentences, {int(first['parameters'])} "
        f"parameters, one run; gaps below {floor:g} drawn at {floor:g}, dotted lines at the table's levels."
    )
    return save_png(figure, path, caption)


def cost_figure(cost: pd.DataFrame, path: Path) -> Drawn:
    """Each Hv's seconds over one gradient's, against N, T and F (the others at the grid's middle)."""
    ratios = cost_ratios(cost)
    middle = {
        axis: sorted(ratios[axis].unique())[len(ratios[axis].unique()) // 2] for axis in ("N", "T", "F")
    }
    figure, axes = subplots(1, 3, (12, 3.6), sharey=True)
    for axis, varied in zip(axes[0], ("N", "T", "F"), strict=True):
        fixed = [name for name in ("N", "T", "F") if name != varied]
        rows = ratios[(ratios[fixed[0]] == middle[fixed[0]]) & (ratios[fixed[1]] == middle[fixed[1]])]
        rows = rows.sort_values(varied)
        for k, (kind, label) in enumerate(HV_KINDS):
            axis.plot(rows[varied], rows[f"{kind}/gradient"], marker="o", color=f"C{k}", label=label)
        axis.axhline(1.0, color="grey", linewidth=0.5)
        axis.set_xscale("log")
        axis.set_xlabel(f"{varied} ({', '.join(f'{n} = {middle[n]}' for n in fixed)})")
    axes[0, 0].set_ylabel("seconds / one gradient's")
    axes[0, 0].legend(fontsize="small")
    caption = (
        f"Newton-CRF: one Hessian-vector product's time over one gradient's (forward–backward and "
        f"scatter), {cost['backend'].iloc[0]}, one thread, best of repeated calls, random corpora of "
        "about 4096 tokens with 12 active attributes per token."
    )
    return save_png(figure, path, caption)


def newton_figures(results_dir: Path, out_dir: Path) -> list[Drawn]:
    trace, solvers, cost = read_newton(results_dir)
    drawn = []
    if trace is not None and solvers is not None:
        drawn.append(convergence_figure(trace, solvers, out_dir / "newton-convergence.png"))
    if cost is not None:
        drawn.append(cost_figure(cost, out_dir / "newton-hv-cost.png"))
    return drawn


def newton_sections(results_dir: Path) -> list[tuple[str, str, pd.DataFrame]]:
    """The Newton study's tables that have results, as (file stem, title, table)."""
    trace, solvers, cost = read_newton(results_dir)
    sections = []
    if trace is not None and solvers is not None:
        first = solvers.iloc[0]
        sections.append(
            (
                "newton-solvers",
                f"Solvers on one feature CRF (CoNLL-2003, {int(first['train_sentences'])} training "
                f"sentences, {int(first['parameters'])} parameters): seconds / passes to each relative "
                "suboptimality, test entity F1 at the end",
                solver_table(trace, solvers),
            )
        )
    if cost is not None:
        sections.append(
            ("newton-hv-cost", "One Hv against one gradient (seconds and ratios)", cost_table(cost))
        )
    return sections
