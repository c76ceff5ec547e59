"""The Bethe-projection paper's tables (Vilnis et al. 2015) from ``results/bethe/``, each beside the
paper's values read from ``bethe_tables.csv`` (next to the BCRF paper's CSV) and labelled as the
paper's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..bethe.cgm import COLUMNS as CGM_COLUMNS
from ..io import read_csv

#: The paper's numbers, beside the BCRF paper's CSV.
PAPER_FILE = "bethe_tables.csv"
#: The CGM experiment's table in the results folder.
CGM_TABLE = Path("bethe") / "cgm.csv"
#: How the pages introduce the section.
BETHE_INTRO = (
    "Bethe projections for non-local inference (Vilnis et al. 2015): our runs of the paper's "
    "experiments, with the paper's values in the columns marked 'paper'."
)
#: Relative difference of the two solvers' objectives F below which they count as equal.
OBJECTIVE_TOLERANCE = 1e-6


def read_cgm(results_dir: Path) -> pd.DataFrame | None:
    """``results_dir/bethe/cgm.csv`` checked for its columns, or None when the experiment did not run."""
    path = Path(results_dir) / CGM_TABLE
    if not path.exists():
        return None
    table = read_csv(path)
    absent = [name for name in CGM_COLUMNS if name not in table.columns]
    if absent:
        raise ValueError(f"{path}: missing column(s) {', '.join(absent)}")
    return table


def read_paper(paper_csv: Path) -> pd.DataFrame:
    """The Bethe paper's values (table, dataset, model, metric, value), beside ``paper_csv``; empty
    when the file is absent."""
    path = Path(paper_csv).parent / PAPER_FILE
    if not path.exists():
        return pd.DataFrame(columns=["table", "dataset", "model", "metric", "value"])
    return read_csv(path, dtype={"table": str})


def relative_gaps(cgm: pd.DataFrame) -> pd.Series:
    """Each row's objective gap to the better solver, relative to max(1, |F|)."""
    return cgm["objective_gap"] / np.maximum(1.0, cgm["objective"].abs())


def cgm_speedups(cgm: pd.DataFrame) -> pd.DataFrame:
    """Per size (dataset, edge_entries): trials, each solver's mean and standard deviation of seconds,
    Bethe-RDA's mean iterations, the speed-up (interior point's mean seconds / Bethe-RDA's), the
    largest relative objective gap of either solver, and the trials each solver converged in."""
    rows = []
    for (dataset, entries), group in cgm.groupby(["dataset", "edge_entries"], sort=False):
        solvers = {model: part for model, part in group.groupby("model")}
        rda, conic = solvers.get("bethe-rda"), solvers.get("interior-point")
        if rda is None or conic is None:
            continue
        rows.append(
            {
                "dataset": dataset,
                "edge_entries": int(entries),
                "trials": group["trial"].nunique(),
                "rda_seconds": rda["seconds"].mean(),
                "rda_sd": rda["seconds"].std(ddof=1) if len(rda) > 1 else np.nan,
                "rda_iterations": rda["iterations"].mean(),
                "ip_seconds": conic["seconds"].mean(),
                "ip_sd": conic["seconds"].std(ddof=1) if len(conic) > 1 else np.nan,
                "speedup": conic["seconds"].mean() / rda["seconds"].mean(),
                "objective_gap": relative_gaps(group).max(),
                "rda_converged": int(rda["converged"].sum()),
                "ip_converged": int(conic["converged"].sum()),
            }
        )
    return pd.DataFrame(rows)


def _mean_sd(mean: float, sd: float) -> str:
    return f"{mean:.3g}" if np.isnan(sd) else f"{mean:.3g} ± {sd:.2g}"


def cgm_table(cgm: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 5 as shown: per edge cardinality s, our seconds (mean ± sd over trials) and speed-up
    beside the paper's, and the checks that make the comparison fair (equal objective, converged)."""
    ours = cgm_speedups(cgm)
    values = paper[paper["table"] == "5"].set_index(["dataset", "model"])["value"]
    rows = []
    for row in ours.itertuples(index=False):
        rda, conic = (values.get((row.dataset, model), np.nan) for model in ("bethe-rda", "interior-point"))
        rows.append(
            {
                "s (edge entries)": row.edge_entries,
                "trials": row.trials,
                "Bethe-RDA s": _mean_sd(row.rda_seconds, row.rda_sd),
                "Bethe-RDA iterations": f"{row.rda_iterations:.1f}",
                "interior point s": _mean_sd(row.ip_seconds, row.ip_sd),
                "speed-up": f"x{row.speedup:.0f}",
                "largest relative objective gap": f"{row.objective_gap:.1e}",
                "converged (RDA / IP)": f"{row.rda_converged} / {row.ip_converged}",
                "paper Bethe-RDA s": "" if np.isnan(rda) else f"{rda:g}",
                "paper interior point s": "" if np.isnan(conic) else f"{conic:g}",
                "paper speed-up": "" if np.isnan(conic / rda) else f"x{conic / rda:.0f}",
            }
        )
    return pd.DataFrame(rows)


def bethe_sections(results_dir: Path, paper_csv: Path) -> list[tuple[str, str, pd.DataFrame]]:
    """The Bethe paper's tables that have results, as (file stem, title, table)."""
    paper = read_paper(paper_csv)
    sections = []
    cgm = read_cgm(results_dir)
    if cgm is not None and not cgm.empty:
        sections.append(
            (
                "bethe-table5-cgm",
                "Table 5: collective graphical models, Bethe-RDA against interior point "
                "(seconds, one thread; the paper's: its own machine and solvers)",
                cgm_table(cgm, paper),
            )
        )
    return sections
