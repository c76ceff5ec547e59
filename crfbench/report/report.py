"""``render_report``: every table, figure and front page of ``reports/`` regenerated from ``results/``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..io import write_atomic
from . import provenance
from .aggregate import decode_speedups, score_stats, train_speedups, violation_stats
from .figures import iteration_figures, speedup_figure
from .inputs import METRICS_COLUMNS, METRICS_FILE, TIMING_COLUMNS, TIMING_FILE, read_results
from .layout import TABLES
from .page import Report, index_html, readme, table_file
from .paper import load_paper
from .render import csv_text, latex, markdown
from .scaling import SCALING_FILE, read_scaling, scaling_figures, summary_tables
from .tables import build_table, missing

#: Keys of the ``notes`` argument: a table id, or "all" for notes on every table.
NOTE_KEYS = ("all", *(spec.id for spec in TABLES))


def render_report(
    results_dir: Path,
    paper_csv: Path,
    out_dir: Path,
    notes: Mapping[str, Sequence[str]] | None = None,
) -> list[Path]:
    """Write tables (Markdown, LaTeX, tidy CSV), figures, ``index.html`` and ``README.md`` into
    ``out_dir`` from ``results_dir/metrics.csv``, ``timing.csv`` and the asv suite's ``scaling.csv``
    (any may be absent) and the paper's CSV (required); ``notes`` maps a table id or "all" to the
    protocol differences to print. Every input is read and checked before anything is written, and
    every file is written atomically. Returns the files written."""
    results_dir, paper_csv, out_dir = Path(results_dir), Path(paper_csv), Path(out_dir)
    notes = {key: tuple(value) for key, value in (notes or {}).items()}
    unknown = sorted(set(notes) - set(NOTE_KEYS))
    if unknown:
        raise ValueError(
            f"notes: unknown table id(s) {', '.join(unknown)}; use one of {', '.join(NOTE_KEYS)}"
        )

    files = {
        METRICS_FILE: read_results(results_dir / METRICS_FILE, METRICS_COLUMNS),
        TIMING_FILE: read_results(results_dir / TIMING_FILE, TIMING_COLUMNS),
    }
    absent = [
        f"{name} is absent from the results folder." for name in files if not (results_dir / name).exists()
    ]
    paper = load_paper(paper_csv)  # required: FileNotFoundError naming it when absent
    scaling = read_scaling(results_dir / SCALING_FILE)  # every input is read before anything is written
    if not (results_dir / SCALING_FILE).exists():
        absent.append(f"{SCALING_FILE} is absent from the results folder: no asv scaling figures.")
    metrics, timing = files[METRICS_FILE], files[TIMING_FILE]
    stats = {
        "score": score_stats(metrics),
        "violations": violation_stats(metrics),
        "train": train_speedups(timing),
        "decode": decode_speedups(timing),
    }
    tables = [build_table(spec, stats[spec.kind], paper) for spec in TABLES]
    shown = [table for table in tables if table.has_columns]

    written = []
    for table in shown:
        table_notes = notes.get(table.spec.id, ())
        forms = {"md": markdown(table, table_notes), "tex": latex(table, table_notes), "csv": csv_text(table)}
        for extension, text in forms.items():
            path = out_dir / table_file(table, extension)
            write_atomic(path, text)
            written.append(path)

    figures_dir = out_dir / "figures"
    by_id = {table.spec.id: table for table in shown}
    figures = iteration_figures(stats["score"], paper, figures_dir)
    if "2" in by_id:
        figures += speedup_figure(by_id["2"], figures_dir / "speedup-train.png")
    if "3" in by_id:
        figures += speedup_figure(by_id["3"], figures_dir / "speedup-decode.png")
    figures += scaling_figures(scaling, figures_dir)
    summaries = summary_tables(scaling)
    for stem, (_, frame) in summaries.items():
        for extension, text in {
            "md": frame.to_markdown(index=False) + "\n",
            "csv": frame.to_csv(index=False),
        }.items():
            path = out_dir / "tables" / f"{stem}.{extension}"
            write_atomic(path, text)
            written.append(path)

    report = Report(
        tables=tuple(shown),
        figures=tuple(path.relative_to(out_dir) for path in figures),
        summaries=tuple((stem, title, frame) for stem, (title, frame) in summaries.items()),
        notes=notes,
        missing=tuple(
            absent + [line for table in tables for line in missing(table)] + provenance.warnings(files)
        ),
        sources=provenance.sources(files),
        protocols=provenance.protocols(files),
    )
    pages = [out_dir / "index.html", out_dir / "README.md"]
    for path, text in zip(pages, (index_html(report), readme(report)), strict=True):
        write_atomic(path, text)
    return written + figures + pages
