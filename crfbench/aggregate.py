"""Gather the per-run tidy CSVs (evaluation.csv, timing.csv) into one results table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .io import CorruptFileError, numeric_column, read_csv, write_atomic


def _kind(path: Path, table: pd.DataFrame) -> tuple[str, tuple[str, ...]]:
    """Which per-run table ``table`` is, and its numeric columns; CorruptFileError naming the
    columns the report needs that ``path`` lacks."""
    from .report.inputs import METRICS_COLUMNS, NUMERIC_COLUMNS, TIMING_COLUMNS

    kinds = {"evaluation.csv": METRICS_COLUMNS, "timing.csv": TIMING_COLUMNS}
    missing = {
        kind: [name for name in columns if name not in table.columns] for kind, columns in kinds.items()
    }
    kind = min(missing, key=lambda name: len(missing[name]))
    if missing[kind]:
        raise CorruptFileError(
            f"{path}: not an evaluation.csv or timing.csv: lacks column(s) {', '.join(missing[kind])}"
        )
    return kind, tuple(name for name in kinds[kind] if name in NUMERIC_COLUMNS)


def _check_numbers(path: Path, table: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """CorruptFileError naming the first row whose cell in a numeric column is not a number.

    An empty ``value`` is a metric without a value (NaN); ``seconds`` and ``round`` are always set.
    """
    for name in columns:
        numeric_column(path, table, name, required=name in ("seconds", "round"))


def aggregate(files: Sequence[Path], out_file: Path) -> pd.DataFrame:
    """Concatenate tidy CSVs with the same columns into ``out_file``; errors name the odd file.

    Every input must be a whole evaluation.csv or timing.csv (all of the same kind): a truncated,
    empty or damaged file, one without the columns the report reads, or a non-number where a number
    is due is refused before anything is written.
    """
    if not files:
        raise ValueError("aggregate: no input files")
    tables = []
    for path in files:
        table = read_csv(Path(path))
        _, numeric = _kind(Path(path), table)
        _check_numbers(Path(path), table, numeric)
        if tables and list(table.columns) != list(tables[0].columns):
            raise ValueError(f"{path}: columns differ from {files[0]}'s")
        tables.append(table)
    result = pd.concat(tables, ignore_index=True)
    write_atomic(Path(out_file), result.to_csv(index=False))
    return result
