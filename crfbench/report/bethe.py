"""The Bethe-projection paper's tables (Vilnis et al. 2015) from ``results/bethe/``, each beside the
paper's values read from ``bethe_tables.csv`` (next to the BCRF paper's CSV) and labelled as the
paper's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..io import read_csv
from ..schema import (
    BETHE_SENTENCE_TABLES,
    CGM_COLUMNS,
    CGM_TABLE,
    CITATION_BASELINE,
    CITATION_CAP_COLUMNS,
    CITATION_CAPS_TABLE,
    CITATION_DATASET,
    CITATION_ITERATION_COLUMNS,
    CITATION_ITERATIONS_TABLE,
    CITATION_SCORE_COLUMNS,
    CITATION_SCORES_TABLE,
    OCR_COLUMNS,
    OCR_DATASET,
    OCR_MODELS,
    OCR_TABLE,
    SENTENCE_COLUMNS,
)
from .figures import Drawn, save_png, subplots
from .inputs import read_table

#: The paper's numbers, beside the BCRF paper's CSV.
PAPER_FILE = "bethe_tables.csv"
#: The task whose metric the ledger reads on each of the experiments' datasets.
TASKS = {OCR_DATASET: "pos", CITATION_DATASET: "ner"}
#: The iteration cap of App. B's histogram.
HISTOGRAM_CAP = 40
#: How the pages introduce the section.
BETHE_INTRO = (
    "Bethe projections for non-local inference (Vilnis et al. 2015): our runs of the paper's "
    "experiments, with the paper's values in the columns marked 'paper'."
)
#: Relative difference of the two solvers' objectives F below which they count as equal.
OBJECTIVE_TOLERANCE = 1e-6


def read_cgm(results_dir: Path) -> pd.DataFrame | None:
    """``results/bethe/cgm.csv``, or None when the CGM experiment did not run."""
    return read_table(results_dir, CGM_TABLE, CGM_COLUMNS)


def read_sentences(results_dir: Path) -> pd.DataFrame:
    """The experiments' per-sentence counts that exist, in one table (empty if none)."""
    tables = [read_table(results_dir, relative, SENTENCE_COLUMNS) for relative in BETHE_SENTENCE_TABLES]
    present = [table for table in tables if table is not None]
    return pd.concat(present, ignore_index=True) if present else pd.DataFrame(columns=list(SENTENCE_COLUMNS))


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


def _mean_sd(mean: float, sd: float, style: str = "{:.3g}") -> str:
    """ "mean ± sd" (sd to 2 significant digits), or the mean alone without a spread."""
    return style.format(mean) if np.isnan(sd) else f"{style.format(mean)} ± {sd:.2g}"


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


def ocr_table(table: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 4 as shown: per model, character accuracy (mean ± sd over test folds) beside the
    paper's, and how the runs went (folds whose dev curve flattened, solver iterations, ψ)."""
    values = paper[paper["table"] == "4"].set_index("model")["value"]
    rows = []
    for model in [name for name in OCR_MODELS if name in set(table["model"])]:
        runs = table[table["model"] == model]
        mean = runs["char_accuracy"].mean()
        sd = runs["char_accuracy"].std(ddof=1) if len(runs) > 1 else np.nan
        theirs = values.get(model, np.nan)
        rows.append(
            {
                "model": model,
                "folds": len(runs),
                "char. accuracy %": _mean_sd(mean, sd, "{:.2f}"),
                "paper %": "" if np.isnan(theirs) else f"{theirs:.2f}",
                "ours − paper": "" if np.isnan(theirs) else f"{mean - theirs:+.2f}",
                "dev curve flat": f"{int(runs['flattened'].sum())} / {len(runs)}",
                "solver iterations": ""
                if runs["solver_iterations"].isna().all()
                else f"{runs['solver_iterations'].mean():.1f}",
                "mean ψ": "" if runs["psi"].isna().all() else f"{runs['psi'].mean():.2f}",
            }
        )
    return pd.DataFrame(rows)


def citation_table(scores: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 1 as shown: segment F1 per model (mean ± sd over seeds) beside the paper's, and the
    paper's rows we did not run (Anzaroot et al. 2014's, as the paper reports them)."""
    values = paper[paper["table"] == "1"].set_index("model")["value"]
    rows = []
    for model in dict.fromkeys([*scores["model"], *values.index]):
        runs = scores[scores["model"] == model]["segment_f1"]
        theirs = values.get(model, np.nan)
        sd = runs.std(ddof=1) if len(runs) > 1 else np.nan
        rows.append(
            {
                "model": model,
                "seeds": len(runs),
                "segment F1 %": _mean_sd(runs.mean(), sd, "{:.2f}") if len(runs) else "",
                "paper %": "" if np.isnan(theirs) else f"{theirs:.2f}",
                "ours − paper": "" if runs.empty or np.isnan(theirs) else f"{runs.mean() - theirs:+.2f}",
            }
        )
    return pd.DataFrame(rows)


def convergence_table(iterations: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """App. B as shown: per convergence tolerance, the share of test citations converged within
    :data:`HISTOGRAM_CAP` iterations and the mean iterations (over citations and seeds), beside
    the paper's (whose tolerance is not stated)."""
    values = paper[paper["table"] == "text"].set_index("metric")["value"]
    share = values.get("share_converged_within_40_iterations", np.nan)
    rows = []
    for tolerance, runs in iterations.groupby("tolerance"):
        within = runs["converged"].astype(bool) & (runs["iterations"] <= HISTOGRAM_CAP)
        rows.append(
            {
                "tolerance": f"{tolerance:g}",
                "citations × seeds": len(runs),
                f"converged within {HISTOGRAM_CAP} %": f"{100 * within.mean():.1f}",
                "mean iterations": f"{runs['iterations'].mean():.1f}",
                "median": f"{runs['iterations'].median():g}",
                "max": int(runs["iterations"].max()),
                f"paper: within {HISTOGRAM_CAP} %": f"{share:g}",
                "paper: mean": f"{values.get('mean_iterations', np.nan):g}",
            }
        )
    return pd.DataFrame(rows)


def iteration_cap_figure(scores: pd.DataFrame, caps: pd.DataFrame, path: Path) -> Drawn:
    """The paper's Fig. 1: test F1 against a cap on the solver's iterations (mean ± sd over seeds),
    the chain CRF's F1 beside it."""
    figure, axes = subplots(1, 1, (5.2, 3.6))
    axis = axes[0, 0]
    by_cap = caps.groupby("cap")["segment_f1"]
    axis.errorbar(by_cap.mean().index, by_cap.mean(), yerr=by_cap.std(ddof=1).fillna(0), marker="o",
                  label="non-local energies", capsize=3)  # fmt: skip
    baseline = scores.loc[scores["model"] == CITATION_BASELINE, "segment_f1"].mean()
    axis.axhline(baseline, color="C1", linestyle="--", label="chain CRF (Viterbi)")
    axis.set_xscale("log", base=2)
    axis.set_xlabel("cap on Bethe-RDA iterations")
    axis.set_ylabel("test segment F1 %")
    axis.legend(fontsize="small")
    caption = (
        f"The Bethe paper's Fig. 1, citation field extraction, {scores['seed'].nunique()} seed(s): test "
        "segment F1 of the non-local model against a cap on the solver's iterations (mean ± sd over "
        "seeds); the chain CRF dashed."
    )
    return save_png(figure, path, caption)


def convergence_figure(iterations: pd.DataFrame, path: Path) -> Drawn:
    """App. B's histogram of the test citations' iterations to convergence, one per tolerance."""
    figure, axes = subplots(1, 1, (5.2, 3.6))
    axis = axes[0, 0]
    bins = np.arange(1, HISTOGRAM_CAP + 2) - 0.5
    for k, (tolerance, runs) in enumerate(iterations.groupby("tolerance")):
        axis.hist(runs["iterations"], bins=bins, alpha=0.6, color=f"C{k}", label=f"tolerance {tolerance:g}")
    axis.set_xlabel("iterations to convergence (largest change of a marginal ≤ tolerance)")
    axis.set_ylabel("test citations (all seeds)")
    axis.legend(fontsize="small")
    caption = (
        f"The Bethe paper's App. B, citation field extraction, {iterations['seed'].nunique()} seed(s): "
        f"histogram of the test citations' Bethe-RDA iterations to convergence (capped at {HISTOGRAM_CAP})."
    )
    return save_png(figure, path, caption)


def bethe_figures(results_dir: Path, out_dir: Path) -> list[Drawn]:
    """The Bethe paper's figures that have results."""
    scores = read_table(results_dir, CITATION_SCORES_TABLE, CITATION_SCORE_COLUMNS)
    caps = read_table(results_dir, CITATION_CAPS_TABLE, CITATION_CAP_COLUMNS)
    iterations = read_table(results_dir, CITATION_ITERATIONS_TABLE, CITATION_ITERATION_COLUMNS)
    drawn = []
    if scores is not None and caps is not None:
        drawn.append(iteration_cap_figure(scores, caps, out_dir / "bethe-fig1-iteration-cap.png"))
    if iterations is not None:
        drawn.append(convergence_figure(iterations, out_dir / "bethe-appb-iterations.png"))
    return drawn


def bethe_sections(results_dir: Path, paper_csv: Path) -> list[tuple[str, str, pd.DataFrame]]:
    """The Bethe paper's tables that have results, as (file stem, title, table)."""
    paper = read_paper(paper_csv)
    experiments = (
        (
            "bethe-table1-citation",
            "Table 1: citation field extraction, test segment F1 (%), mean ± sd over seeds",
            (CITATION_SCORES_TABLE, CITATION_SCORE_COLUMNS),
            citation_table,
        ),
        (
            "bethe-appb-iterations",
            "App. B: Bethe-RDA iterations to convergence on the test citations",
            (CITATION_ITERATIONS_TABLE, CITATION_ITERATION_COLUMNS),
            convergence_table,
        ),
        (
            "bethe-table4-ocr",
            "Table 4: OCR character accuracy (%), train on 9 folds and test on 1, mean ± sd over test folds",
            (OCR_TABLE, OCR_COLUMNS),
            ocr_table,
        ),
        (
            "bethe-table5-cgm",
            "Table 5: collective graphical models, Bethe-RDA against interior point "
            "(seconds, one thread; the paper's: its own machine and solvers)",
            (CGM_TABLE, CGM_COLUMNS),
            cgm_table,
        ),
    )
    sections = []
    for stem, title, (relative, columns), build in experiments:
        table = read_table(results_dir, relative, columns)
        if table is not None and not table.empty:
            sections.append((stem, title, build(table, paper)))
    return sections
