"""The report's header names the commits behind its results, and warns in red, with a count, of rows
made from a checkout with uncommitted changes (revision ``<commit>+dirty``); the Sources table shows
those rows in red."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from crfbench.report import render_report
from crfbench.report.provenance import commit_line, commits, dirty_warning

from .fixtures import write_paper, write_results

CLEAN, OTHER = "a" * 40, "b" * 40


def _sources(revisions: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame({"revision": list(revisions), "rows": list(revisions.values())})


def test_commits_sum_rows_per_revision_and_mark_the_dirty_ones() -> None:
    sources = _sources({CLEAN: 3, f"{OTHER}+dirty": 2, "": 1})
    table = commits(pd.concat([sources, _sources({CLEAN: 4})], ignore_index=True))
    assert set(zip(table.revision, table.rows, table.dirty, strict=True)) == {
        ("aaaaaaa", 7, False),
        ("bbbbbbb+dirty", 2, True),
        ("unknown", 1, False),
    }
    assert "aaaaaaa (3 rows)" in commit_line(sources) and "bbbbbbb+dirty (2 rows)" in commit_line(sources)
    assert dirty_warning(sources).startswith("2 of 6 result rows come from a checkout with uncommitted")
    assert dirty_warning(_sources({CLEAN: 3})) is None
    assert dirty_warning(sources.iloc[:0]) is None and commit_line(sources.iloc[:0]).startswith("No result")


def _render(root: Path, dirty_rows: int) -> tuple[str, str, int]:
    """The index page, the README and the metrics rows of results whose first ``dirty_rows`` metrics
    rows come from a dirty checkout."""
    results = write_results(root / "results")
    metrics = pd.read_csv(results / "metrics.csv")
    metrics["revision"] = [f"{OTHER}+dirty" if index < dirty_rows else CLEAN for index in range(len(metrics))]
    metrics.to_csv(results / "metrics.csv", index=False)
    out = root / "out"
    render_report(results, write_paper(root / "paper.csv"), out)
    return (out / "index.html").read_text(), (out / "README.md").read_text(), len(metrics)


def test_the_pages_warn_in_red_of_dirty_rows(tmp_path: Path) -> None:
    index, readme, rows = _render(tmp_path, dirty_rows=5)
    warning = next(line for line in index.splitlines() if line.startswith('<p class="dirty">'))
    assert "5 of " in warning and "uncommitted changes" in warning
    assert index.index(warning) < index.index('id="claims"')  # in the header, above the ledger
    assert "bbbbbbb+dirty (5 rows)" in index and f"aaaaaaa ({rows - 5} rows)" in index
    assert ".dirty, tr.dirty td { color: #b00000; }" in index
    assert index.count('<tr class="dirty">') == 1  # the Sources table's row of the dirty revision
    assert "**⚠ Warning:** 5 of " in readme and "Results from commit(s)" in readme


def test_clean_results_carry_no_warning(tmp_path: Path) -> None:
    index, readme, _ = _render(tmp_path, dirty_rows=0)
    assert '<p class="dirty">' not in index and '<tr class="dirty">' not in index
    assert "Warning" not in readme and "Results from commit(s) aaaaaaa" in readme
