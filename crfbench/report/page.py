"""The report's front pages: ``index.html`` (every table and figure, self-contained) and ``README.md``."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd

from ..agreement import ORACLE_NAMES
from ..schema import AGREEMENT_TABLE
from .bethe import BETHE_INTRO
from .figures import Drawn
from .newton import NEWTON_INTRO
from .parsing import PARSE_INTRO, PARSE_SKIPPED
from .provenance import DIRTY, commit_line, dirty_warning
from .render import GENERATED, html_fragment
from .tables import Table
from .verdicts import SENSITIVITY_FACTORS, VERDICT_RULE

TITLE = "crfbench: Bregman Conditional Random Fields (Corro et al. 2025), reproduced"
FORMATS = ("md", "tex", "csv")
#: The agreement step's report (``crfbench agree``), which it writes into the report folder.
AGREEMENT = Path("agreement")
AGREEMENT_INTRO = (
    "Numerical agreement of the methods across the torch and JAX backends and with the NumPy oracles "
    f"({', '.join(ORACLE_NAMES)}, each where it applies), from results/{AGREEMENT_TABLE}"
)
NO_AGREEMENT = f"The agreement step has not run: results/{AGREEMENT_TABLE} is absent."
#: The claim ledger's two tables: one row per claim, and the (dataset, encoder) cells behind them.
LEDGER_FILES = (Path("claims.csv"), Path("claims-cells.csv"))
#: The ledger's sensitivity table and the dataset-statistics table (stems under the report folder).
SENSITIVITY = Path("tables") / "verdict-sensitivity"
DATASETS = Path("tables") / "datasets"
LEDGER_INTRO = (
    "Each claim of the paper (the data folder's paper/claims.csv) with our paired difference, A − B in "
    "points (same seeds, same test sentences; mean over seeds), its range over the (dataset, encoder) "
    "cells, the paper's own difference, a verdict, the margin it was judged with and the regime it "
    "ran in beside the paper's. Each cell's 95% intervals (a bootstrap over test sentences and seeds, "
    "and a t interval over seeds), direction, magnitude against the paper's difference and minimum "
    "detectable effect are in claims-cells.csv."
)
SENSITIVITY_INTRO = (
    "Every accuracy cell's verdict with its claim's margin scaled by "
    + ", ".join(f"{factor:g}" for factor in SENSITIVITY_FACTORS)
    + ": which verdicts rest on the margin's choice."
)
DATASETS_INTRO = (
    "The data our runs used, per dataset and split (results/datasets.csv, from the runs' config.json; "
    "cap: the profile's cut of that split), beside the paper's sizes where its text states them "
    "(n/a: not stated; the BCRF paper uses the standard splits)."
)
#: What the page shows of the ledger's summary, under these headers.
LEDGER_SHOWN = {
    "claim": "claim",
    "text": "what the paper claims",
    "paper_difference": "paper's difference",
    "our_range": "ours (range over cells)",
    "n_cells": "cells",
    "verdict": "verdict",
    "margin": "margin",
    "regime": "regime (ours beside the paper's)",
    "reason": "why not testable, or what stands in (proxy)",
}
CONVERGENCE_INTRO = (
    "How every training run stopped: early (its dev curve flat for `patience` epochs after the "
    "learning rate was cut `lr_reductions` times, each cut after such a plateau) or at its epoch "
    "cap; runs at the cap while still improving are flagged, and their values in Tables 1a–1d carry "
    "the mark ⚑. The curves are in the figure dev-curves.png; the iteration and temperature sweep "
    "of BCRF and mean-field decoding is in tables/sweep.csv and the figure sweep.png; SparseMAP's "
    "solvers over iterations and time in tables/sparsemap-solvers.csv and the figure "
    "sparsemap-solvers.png, "
    "its support size over training in sparsemap-support.png."
)
SCALING_INTRO = (
    "From each benchmark's latest asv run on each machine (results/asv/, tidied into "
    "results/scaling.csv; its commit column names the run); "
    "the full history is in the asv HTML (reports/asv/). Random standard normal scores, one CPU thread."
)
_STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 110em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: center; }
tbody th { text-align: left; white-space: nowrap; }
tr.block > * { border-top: 2px solid #555; }
.paper { color: #666; font-size: 0.85em; }
.missing { color: #999; }
td.na { background: #f4f4f4; }
.notes, .files { font-size: 0.85em; color: #333; }
img { max-width: 100%; border: 1px solid #eee; }
.dirty, tr.dirty td { color: #b00000; }
p.dirty { font-weight: bold; }
"""


@dataclass(frozen=True)
class Report:
    """Everything the front pages show; paths are relative to the report folder."""

    ledger: pd.DataFrame  # the claim ledger's summary (ledger.SUMMARY_COLUMNS)
    sensitivity: pd.DataFrame  # every accuracy cell's verdict at scaled margins (verdicts.sensitivity_table)
    datasets: pd.DataFrame  # sentences and tokens used per dataset and split (regime.dataset_statistics)
    convergence: pd.DataFrame  # one row per (dataset, encoder, loss): how training stopped
    tables: tuple[Table, ...]
    figures: tuple[Drawn, ...]
    summaries: tuple[tuple[str, str, pd.DataFrame], ...]  # asv scaling summaries: (file stem, title, table)
    bethe: tuple[tuple[str, str, pd.DataFrame], ...]  # the Bethe paper's tables: (file stem, title, table)
    newton: tuple[tuple[str, str, pd.DataFrame], ...]  # the Newton study's tables, likewise
    parsing: tuple[tuple[str, str, pd.DataFrame], ...]  # the SparseMAP paper's parsing tables, likewise
    notes: Mapping[str, Sequence[str]]
    missing: tuple[str, ...]
    sources: pd.DataFrame
    protocols: pd.DataFrame
    agreement: str | None  # the agreement step's summary (it writes AGREEMENT beside the pages), if run


def table_file(table: Table, extension: str) -> Path:
    return Path("tables") / f"{table.spec.stem}.{extension}"


def _table_link(table: Table, extension: str) -> str:
    return table_file(table, extension).as_posix()


def _html_frame(frame: pd.DataFrame, flagged: Sequence[bool] = ()) -> str:
    """``frame`` as an HTML table; rows whose entry in ``flagged`` is true are in red (class dirty)."""
    head = "".join(f"<th>{html.escape(str(name))}</th>" for name in frame.columns)
    marks = list(flagged) or [False] * len(frame)
    rows = "".join(
        ('<tr class="dirty">' if mark else "<tr>")
        + "".join(f"<td>{html.escape(str(value))}</td>" for value in row)
        + "</tr>"
        for row, mark in zip(frame.itertuples(index=False), marks, strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _links(stem: Path, extensions: Sequence[str], html: bool = False) -> str:
    links = [(extension, f"{stem.as_posix()}.{extension}") for extension in extensions]
    if html:
        return " · ".join(f'<a href="{target}">{extension}</a>' for extension, target in links)
    return " · ".join(f"[{extension}]({target})" for extension, target in links)


def _ledger_shown(summary: pd.DataFrame) -> pd.DataFrame:
    """The ledger's summary columns the pages show, under readable headers."""
    return summary[list(LEDGER_SHOWN)].rename(columns=LEDGER_SHOWN)


def _ledger_links(html: bool = False) -> str:
    """Links to the ledger's two CSV files, named."""
    names = [path.as_posix() for path in LEDGER_FILES]
    if html:
        return " · ".join(f'<a href="{name}">{name}</a>' for name in names)
    return " · ".join(f"[{name}]({name})" for name in names)


def _html_list(items: Sequence[str], empty: str) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in items or [empty]) + "</ul>"


def index_html(report: Report) -> str:
    """A static page with no external assets: contents, notes, missing results, tables, scaling, a link
    to the agreement report, figures with their captions, sources."""
    contents = (
        ['<li><a href="#claims">Claim ledger</a></li>']
        + [
            f'<li><a href="#table-{t.spec.id}">{html.escape(f"Table {t.spec.id}: {t.spec.title}")}</a></li>'
            for t in report.tables
        ]
        + [
            '<li><a href="#parsing">Dependency parsing (SparseMAP)</a></li>',
            '<li><a href="#bethe">Bethe projections</a></li>',
            '<li><a href="#newton">Newton methods for CRFs</a></li>',
            '<li><a href="#scaling">Scaling (asv suite)</a></li>',
            '<li><a href="#agreement">Agreement between implementations</a></li>',
            '<li><a href="#figures">Figures</a></li>',
            '<li><a href="#sources">Sources and protocols</a></li>',
        ]
    )
    tables = [
        html_fragment(
            table,
            report.notes.get(table.spec.id, ()),
            partial(_table_link, table),
        )
        for table in report.tables
    ]
    summaries = _html_sections(report.summaries)
    bethe = _html_sections(report.bethe)
    parsing = _html_sections(report.parsing)
    newton = _html_sections(report.newton)
    figures = [
        f'<figure><img src="{html.escape(drawn.path.as_posix())}" alt="{html.escape(drawn.caption)}">'
        f"<figcaption>{html.escape(drawn.caption)}</figcaption></figure>"
        for drawn in report.figures
    ]
    agreement = (
        f"<p>{html.escape(NO_AGREEMENT)}</p>"
        if report.agreement is None
        else f"<p>{html.escape(AGREEMENT_INTRO)}: {html.escape(report.agreement)} "
        f"Report: {_links(AGREEMENT, ('md',), html=True)}</p>"
    )
    body = [
        f"<h1>{html.escape(TITLE)}</h1>",
        f"<p>{html.escape(GENERATED)} Every number of ours comes from <code>results/</code>; the paper's "
        "values are labelled as the paper's.</p>",
        f'<p class="provenance">{html.escape(commit_line(report.sources))}</p>',
        *_html_warning(dirty_warning(report.sources)),
        '<section id="claims"><h2>Claim ledger</h2>',
        f"<p>{html.escape(LEDGER_INTRO)}</p>",
        _html_frame(_ledger_shown(report.ledger)),
        f'<p class="notes">{html.escape(VERDICT_RULE)}</p>',
        f'<p class="files">{_ledger_links(html=True)}</p>',
        "<h3>Verdicts against the margin</h3>",
        f"<p>{html.escape(SENSITIVITY_INTRO)}</p>",
        _html_frame(report.sensitivity),
        f'<p class="files">{_links(SENSITIVITY, ("md", "csv"), html=True)}</p>',
        "<h3>Datasets used</h3>",
        f"<p>{html.escape(DATASETS_INTRO)}</p>",
        _html_frame(report.datasets),
        f'<p class="files">{_links(DATASETS, ("md", "csv"), html=True)}</p>',
        "</section>",
        "<h2>Contents</h2>",
        "<ul>" + "".join(contents) + "</ul>",
        '<section id="training"><h2>Training convergence</h2>',
        f"<p>{html.escape(CONVERGENCE_INTRO)}</p>",
        _html_frame(report.convergence),
        f'<p class="files">{_links(Path("tables") / "convergence", ("md", "csv"), html=True)} · sweep: '
        f"{_links(Path('tables') / 'sweep', ('md', 'csv'), html=True)} · SparseMAP solvers: "
        f"{_links(Path('tables') / 'sparsemap-solvers', ('md', 'csv'), html=True)}</p>",
        "</section>",
        "<h2>Differences from the paper's protocol (all tables)</h2>",
        _html_list(report.notes.get("all", ()), "None recorded."),
        "<h2>What is missing or left out</h2>",
        _html_list(report.missing, "Nothing: every table cell has a result of ours."),
        *tables,
        '<section id="parsing"><h2>Dependency parsing (SparseMAP)</h2>',
        f"<p>{html.escape(PARSE_INTRO)}</p>",
        *(parsing or [f"<p>{html.escape(PARSE_SKIPPED)}</p>"]),
        "</section>",
        '<section id="bethe"><h2>Bethe projections</h2>',
        f"<p>{html.escape(BETHE_INTRO)}</p>",
        *(bethe or ["<p>No experiment of the Bethe paper ran.</p>"]),
        "</section>",
        '<section id="newton"><h2>Newton methods for CRFs</h2>',
        f"<p>{html.escape(NEWTON_INTRO)}</p>",
        *(newton or ["<p>The Newton-CRF study did not run.</p>"]),
        "</section>",
        '<section id="scaling"><h2>Scaling (asv suite)</h2>',
        f"<p>{html.escape(SCALING_INTRO)}</p>",
        *(summaries or ["<p>No asv scaling results.</p>"]),
        "</section>",
        '<section id="agreement"><h2>Agreement between implementations</h2>',
        agreement,
        "</section>",
        '<section id="figures"><h2>Figures</h2>',
        *(figures or ["<p>No figure: no result to draw.</p>"]),
        "</section>",
        '<section id="sources"><h2>Sources: devices, backends and code revisions</h2>',
        _html_frame(report.sources, report.sources["revision"].astype(str).str.endswith(DIRTY).tolist()),
        "<h2>Dataset protocols</h2>",
        _html_frame(report.protocols),
        "</section>",
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(TITLE)}</title>",
            f"<style>{_STYLE}</style>",
            "</head><body>",
            *body,
            "</body></html>",
            "",
        ]
    )


def _html_warning(warning: str | None) -> list[str]:
    """The dirty-results warning as a red paragraph, or nothing."""
    return [] if warning is None else [f'<p class="dirty">⚠ {html.escape(warning)}</p>']


def _markdown_frame(frame: pd.DataFrame) -> list[str]:
    def line(values: Sequence[object]) -> str:
        return "| " + " | ".join(str(value).replace("|", "\\|") for value in values) + " |"

    return [
        line(frame.columns),
        line(["---"] * len(frame.columns)),
        *(line(row) for row in frame.itertuples(index=False)),
    ]


def _markdown_sections(sections: Sequence[tuple[str, str, pd.DataFrame]], empty: str) -> list[str]:
    """Each (file stem, title, table) as a titled Markdown table with links to its files."""
    lines = []
    for stem, title, frame in sections:
        lines += [
            f"### {title}",
            "",
            *_markdown_frame(frame),
            "",
            _links(Path("tables") / stem, ("md", "csv")),
            "",
        ]
    return lines or [empty, ""]


def _html_sections(sections: Sequence[tuple[str, str, pd.DataFrame]]) -> list[str]:
    """Each (file stem, title, table) as a titled HTML table with links to its files."""
    return [
        f"<h3>{html.escape(title)}</h3>{_html_frame(frame)}"
        f'<p class="files">{_links(Path("tables") / stem, ("md", "csv"), html=True)}</p>'
        for stem, title, frame in sections
    ]


def readme(report: Report) -> str:
    """A Markdown entry point: links to every table form, the agreement report and every figure, notes,
    what is missing, sources."""
    warning = dirty_warning(report.sources)
    lines = [
        f"# {TITLE}",
        "",
        f"_{GENERATED}_ Open `index.html` for everything on one page.",
        "",
        commit_line(report.sources),
        "",
        *([] if warning is None else [f"**⚠ Warning:** {warning}", ""]),
        "## Claim ledger",
        "",
        LEDGER_INTRO,
        "",
        *_markdown_frame(_ledger_shown(report.ledger)),
        "",
        VERDICT_RULE.replace("\n", " "),
        "",
        _ledger_links(),
        "",
        "### Verdicts against the margin",
        "",
        SENSITIVITY_INTRO,
        "",
        *(_markdown_frame(report.sensitivity) if not report.sensitivity.empty else ["No accuracy cell."]),
        "",
        _links(SENSITIVITY, ("md", "csv")),
        "",
        "### Datasets used",
        "",
        DATASETS_INTRO,
        "",
        *(_markdown_frame(report.datasets) if not report.datasets.empty else ["No dataset facts."]),
        "",
        _links(DATASETS, ("md", "csv")),
        "",
        "## Training convergence",
        "",
        CONVERGENCE_INTRO,
        "",
        *(_markdown_frame(report.convergence) if not report.convergence.empty else ["No training curves."]),
        "",
        f"{_links(Path('tables') / 'convergence', ('md', 'csv'))} · "
        f"sweep: {_links(Path('tables') / 'sweep', ('md', 'csv'))} · "
        f"SparseMAP solvers: {_links(Path('tables') / 'sparsemap-solvers', ('md', 'csv'))}",
        "",
        "## Tables",
        "",
    ]
    for table in report.tables:
        links = _links(Path("tables") / table.spec.stem, FORMATS)
        lines.append(f"- Table {table.spec.id}: {table.spec.title} — {links}")
    lines += ["", "## Dependency parsing (SparseMAP)", "", PARSE_INTRO, ""]
    lines += _markdown_sections(report.parsing, PARSE_SKIPPED)
    lines += ["## Bethe projections", "", BETHE_INTRO, ""]
    lines += _markdown_sections(report.bethe, "No experiment of the Bethe paper ran.")
    lines += ["## Newton methods for CRFs", "", NEWTON_INTRO, ""]
    lines += _markdown_sections(report.newton, "The Newton-CRF study did not run.")
    lines += ["## Scaling (asv suite)", "", SCALING_INTRO, ""]
    lines += _markdown_sections(report.summaries, "No asv scaling results.")
    lines += ["## Agreement between implementations", ""]
    if report.agreement is None:
        lines += [NO_AGREEMENT, ""]
    else:
        lines += [f"{AGREEMENT_INTRO}: {report.agreement} Report: {_links(AGREEMENT, ('md',))}", ""]
    lines += ["## Figures", ""]
    lines += [
        f"- [{drawn.path.name}]({drawn.path.as_posix()}): {drawn.caption}" for drawn in report.figures
    ] or ["- None."]
    lines += ["", "## Differences from the paper's protocol (all tables)", ""]
    lines += [f"- {note}" for note in report.notes.get("all", ())] or ["- None recorded."]
    lines += ["", "## What is missing or left out", ""]
    lines += [f"- {item}" for item in report.missing] or ["- Nothing."]
    lines += ["", "## Sources", "", *_markdown_frame(report.sources), "", "## Dataset protocols", ""]
    lines += [*_markdown_frame(report.protocols), ""]
    return "\n".join(lines)
