"""``render_report``: every table, figure and front page of ``reports/`` regenerated from ``results/``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..io import read_csv, write_atomic
from ..schema import (
    AGREEMENT_TABLE,
    CURVE_COLUMNS,
    CURVE_NUMBERS,
    CURVES_TABLE,
    DATASET_COLUMNS,
    DATASET_NUMBERS,
    DATASETS_TABLE,
    METRICS_COLUMNS,
    METRICS_TABLE,
    SCALING_TABLE,
    SENTENCE_COLUMNS,
    SENTENCE_NUMBERS,
    SENTENCES_TABLE,
    SWEEP_COLUMNS,
    SWEEP_NUMBERS,
    SWEEP_TABLE,
    TIMING_COLUMNS,
    TIMING_TABLE,
)
from . import provenance
from .bethe import TASKS as BETHE_TASKS
from .bethe import bethe_figures, bethe_sections, read_cgm, read_sentences
from .claims import CLAIMS_COLUMNS, CLAIMS_FILE
from .crossover import crossover_missing
from .figures import iteration_figures, speedup_figures
from .inputs import agreement_summary, read_results
from .layout import TABLES, TASKS
from .ledger import claim_ledger, ledger_csv
from .newton import newton_figures, newton_sections, read_newton
from .page import LEDGER_FILES, NO_AGREEMENT, Report, index_html, readme, table_file
from .paper import load_paper
from .parse_inputs import read_parse_results
from .parsing import PARSE_SKIPPED, parse_sections, write_sections
from .regime import dataset_statistics, regimes
from .render import csv_text, latex, markdown
from .scaling import read_scaling, scaling_figures
from .scaling_tables import summary_tables
from .stats import decode_speedups, score_stats, train_speedups, violation_stats
from .tables import build_table, missing
from .training import (
    convergence_table,
    curve_figure,
    flagged_runs,
    solver_figure,
    solver_table,
    support_figure,
    sweep_figure,
    sweep_table,
)
from .tree_solvers import read_tree_solvers, tree_solver_figures, tree_solver_table
from .verdicts import sensitivity_table

#: Keys of the ``notes`` argument: a table id, or "all" for notes on every table.
NOTE_KEYS = ("all", *(spec.id for spec in TABLES))


def _write_frame(stem: Path, frame: pd.DataFrame) -> list[Path]:
    """``frame`` as ``stem.md`` and ``stem.csv`` (the plain tables beside the paper's); the paths."""
    forms = {"md": frame.to_markdown(index=False) + "\n", "csv": frame.to_csv(index=False)}
    paths = [stem.with_name(f"{stem.name}.{extension}") for extension in forms]
    for path, text in zip(paths, forms.values(), strict=True):
        write_atomic(path, text)
    return paths


def render_report(
    results_dir: Path,
    paper_csv: Path,
    out_dir: Path,
    notes: Mapping[str, Sequence[str]] | None = None,
) -> list[Path]:
    """Write the claim ledger (CSV), tables (Markdown, LaTeX, tidy CSV), figures, ``index.html`` and
    ``README.md`` into ``out_dir`` from ``results_dir/metrics.csv``, ``sentences.csv.gz``,
    ``timing.csv``, the asv suite's ``scaling.csv`` and the agreement step's table (any may be absent;
    the pages link the agreement step's report, which it writes into the report folder), the paper's
    CSV (required) and the claims list ``claims.csv`` beside it; ``notes`` maps a table id
    or "all" to the protocol differences to print. Every input is read and checked before anything is
    written, and every file is written atomically. Returns the files written."""
    results_dir, paper_csv, out_dir = Path(results_dir), Path(paper_csv), Path(out_dir)
    notes = {key: tuple(value) for key, value in (notes or {}).items()}
    unknown = sorted(set(notes) - set(NOTE_KEYS))
    if unknown:
        raise ValueError(
            f"notes: unknown table id(s) {', '.join(unknown)}; use one of {', '.join(NOTE_KEYS)}"
        )

    files = {
        METRICS_TABLE: read_results(results_dir / METRICS_TABLE, METRICS_COLUMNS),
        TIMING_TABLE: read_results(results_dir / TIMING_TABLE, TIMING_COLUMNS),
    }
    absent = [
        f"{name} is absent from the results folder." for name in files if not (results_dir / name).exists()
    ]
    paper = load_paper(paper_csv)  # required: FileNotFoundError naming it when absent
    claims_csv = paper_csv.parent / CLAIMS_FILE
    claims = read_csv(claims_csv) if claims_csv.exists() else pd.DataFrame(columns=list(CLAIMS_COLUMNS))
    if not claims_csv.exists():
        absent.append(f"{claims_csv} is absent: no claim ledger.")
    sentences = read_results(results_dir / SENTENCES_TABLE, SENTENCE_COLUMNS, SENTENCE_NUMBERS)
    curves = read_results(results_dir / CURVES_TABLE, CURVE_COLUMNS, CURVE_NUMBERS)
    sweep = read_results(results_dir / SWEEP_TABLE, SWEEP_COLUMNS, SWEEP_NUMBERS)
    datasets = read_results(results_dir / DATASETS_TABLE, DATASET_COLUMNS, DATASET_NUMBERS)
    for name in (CURVES_TABLE, SWEEP_TABLE, DATASETS_TABLE):
        if not (results_dir / name).exists():
            absent.append(f"{name} is absent from the results folder.")
    if not (results_dir / SENTENCES_TABLE).exists():
        absent.append(
            f"{SENTENCES_TABLE} is absent from the results folder: no paired differences for the claims."
        )
    agreement = agreement_summary(results_dir / AGREEMENT_TABLE)
    if agreement is None:
        absent.append(NO_AGREEMENT)
    scaling = read_scaling(results_dir / SCALING_TABLE)  # every input is read before anything is written
    if not (results_dir / SCALING_TABLE).exists():
        absent.append(f"{SCALING_TABLE} is absent from the results folder: no asv scaling figures.")
    else:
        absent += crossover_missing(scaling)
    bethe = bethe_sections(results_dir, paper_csv)
    if not bethe:
        absent.append("results/bethe/ holds no experiment of the Bethe paper: no Bethe tables.")
    newton = newton_sections(results_dir)
    trees = read_tree_solvers(results_dir)  # the SparseMAP solvers on random trees; None: not run
    if not newton:
        absent.append("results/newton/ holds no Newton-CRF study: no Newton tables.")
    metrics, timing = files[METRICS_TABLE], files[TIMING_TABLE]
    parse = read_parse_results(results_dir)
    stats = {
        "score": score_stats(metrics),
        "violations": violation_stats(metrics),
        "train": train_speedups(timing),
        "decode": decode_speedups(timing),
    }
    flagged = flagged_runs(curves)
    keys = zip(stats["score"]["dataset"], stats["score"]["encoder"], stats["score"]["train"], strict=True)
    stats["score"] = stats["score"].assign(flagged=[key in flagged for key in keys])
    ledger = claim_ledger(
        claims,
        pd.concat([sentences, read_sentences(results_dir)], ignore_index=True),
        timing,
        TASKS | BETHE_TASKS,
        curves=curves,
        sweep=sweep,
        cgm=read_cgm(results_dir),
        newton=read_newton(results_dir),
        parse=parse,
        trees=trees,
        regimes=regimes(metrics, datasets, paper),
    )
    parsing = parse_sections(parse, paper_csv, ledger[1])
    if not parsing:
        absent.append(PARSE_SKIPPED)
    tables = [build_table(spec, stats[spec.kind], paper) for spec in TABLES]
    shown = [table for table in tables if table.has_columns]

    written = []
    for path, frame in zip(LEDGER_FILES, ledger, strict=True):
        write_atomic(out_dir / path, ledger_csv(frame))
        written.append(out_dir / path)
    for table in shown:
        table_notes = notes.get(table.spec.id, ())
        forms = {"md": markdown(table, table_notes), "tex": latex(table, table_notes), "csv": csv_text(table)}
        for extension, text in forms.items():
            path = out_dir / table_file(table, extension)
            write_atomic(path, text)
            written.append(path)

    figures_dir = out_dir / "figures"
    by_id = {table.spec.id: table for table in shown}
    figures = curve_figure(curves, figures_dir / "dev-curves.png")
    figures += sweep_figure(sweep, figures_dir / "sweep.png")
    figures += support_figure(curves, figures_dir / "sparsemap-support.png")
    figures += solver_figure(sweep, figures_dir / "sparsemap-solvers.png")
    figures += tree_solver_figures(trees, figures_dir)
    figures += iteration_figures(stats["score"], paper, figures_dir)
    for table_id, stem in (("2", "speedup-train"), ("3", "speedup-decode")):
        if table_id in by_id:
            figures += speedup_figures(by_id[table_id], figures_dir, stem)
    figures += scaling_figures(scaling, figures_dir)
    figures += bethe_figures(results_dir, figures_dir)
    figures += newton_figures(results_dir, figures_dir)
    training = {
        "convergence": convergence_table(curves),
        "sweep": sweep_table(sweep),
        "sparsemap-solvers": solver_table(sweep),
        "verdict-sensitivity": sensitivity_table(ledger[1]),
        "datasets": dataset_statistics(datasets, sentences),
    }
    summaries = summary_tables(scaling)
    frames = training | {stem: frame for stem, (_, frame) in summaries.items()}
    if trees is not None:
        frames["sparsemap-tree-solvers"] = tree_solver_table(trees)
    frames |= {stem: frame for stem, _, frame in bethe + newton}
    for stem, frame in frames.items():
        written += _write_frame(out_dir / "tables" / stem, frame)
    written += write_sections(parsing, out_dir / "tables")

    report = Report(
        ledger=ledger[0],
        sensitivity=training["verdict-sensitivity"],
        datasets=training["datasets"],
        convergence=training["convergence"],
        tables=tuple(shown),
        figures=tuple(replace(drawn, path=drawn.path.relative_to(out_dir)) for drawn in figures),
        summaries=tuple((stem, title, frame) for stem, (title, frame) in summaries.items()),
        bethe=tuple(bethe),
        newton=tuple(newton),
        parsing=tuple((section.stem, section.title, section.shown) for section in parsing),
        notes=notes,
        missing=tuple(
            absent + [line for table in tables for line in missing(table)] + provenance.warnings(files)
        ),
        sources=provenance.sources(files),
        protocols=provenance.protocols(files),
        agreement=agreement,
    )
    pages = [out_dir / "index.html", out_dir / "README.md"]
    for path, text in zip(pages, (index_html(report), readme(report)), strict=True):
        write_atomic(path, text)
    return written + [drawn.path for drawn in figures] + pages
