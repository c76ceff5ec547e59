"""Gather the per-run outputs into the results tables: evaluation.csv -> metrics.csv, timing.csv
-> timing.csv, sentences.csv -> sentences.csv.gz, sweep.csv -> sweep.csv, the dev curves of
train.json -> curves.csv, and the Bethe experiments' per-fold or per-seed tables -> bethe/*.csv
(their per-word and per-citation rows are sentences)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .experiment import SUMMARY_FILE
from .io import CorruptFileError, numeric_column, read_csv, write_csv
from .schema import OPTIONAL_NUMBERS, SENTENCE_COLUMNS, SENTENCE_NUMBERS, SWEEP_COLUMNS, SWEEP_NUMBERS


def _kinds() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each per-run CSV kind: the columns the results tables need, and which must be numbers."""
    from .bethe import citation
    from .bethe.ocr import COLUMNS as OCR_COLUMNS
    from .bethe.ocr import NUMBERS as OCR_NUMBERS
    from .report.inputs import METRICS_COLUMNS, NUMERIC_COLUMNS, TIMING_COLUMNS

    numeric = lambda columns: tuple(name for name in columns if name in NUMERIC_COLUMNS)  # noqa: E731
    return {
        "evaluation.csv": (METRICS_COLUMNS, numeric(METRICS_COLUMNS)),
        "timing.csv": (TIMING_COLUMNS, numeric(TIMING_COLUMNS)),
        "sentences.csv": (SENTENCE_COLUMNS, SENTENCE_NUMBERS),
        "sweep.csv": (SWEEP_COLUMNS, SWEEP_NUMBERS),
        "bethe OCR table.csv": (OCR_COLUMNS, OCR_NUMBERS),
        "bethe citation scores.csv": (
            citation.SCORE_COLUMNS,
            ("seed", "segment_f1", "dev_f1", "best_epoch", "epochs_run"),
        ),
        "bethe citation iteration_cap.csv": (citation.CAP_COLUMNS, citation.CAP_COLUMNS),
        "bethe citation iterations.csv": (
            citation.ITERATION_COLUMNS,
            ("seed", "tolerance", "citation", "iterations"),
        ),
    }


def _kind(path: Path, table: pd.DataFrame) -> tuple[str, tuple[str, ...]]:
    """Which per-run table ``table`` is, and its numeric columns; CorruptFileError naming the
    columns the results need that ``path`` lacks."""
    kinds = _kinds()
    missing = {
        kind: [name for name in columns if name not in table.columns] for kind, (columns, _) in kinds.items()
    }
    kind = min(missing, key=lambda name: len(missing[name]))
    if missing[kind]:
        raise CorruptFileError(
            f"{path}: not a per-run {', '.join(kinds)}: lacks column(s) {', '.join(missing[kind])}"
        )
    return kind, kinds[kind][1]


def _check_numbers(path: Path, table: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """CorruptFileError naming the first row whose cell in a numeric column is not a number.

    Only the ``OPTIONAL_NUMBERS`` may be empty (NaN): a metric without a value, an option that the
    row's method does not have.
    """
    for name in columns:
        numeric_column(path, table, name, required=name not in OPTIONAL_NUMBERS)


def _read(path: Path) -> pd.DataFrame:
    """One per-run output as a table: a train.json as its dev curve, a CSV checked whole."""
    if path.name == SUMMARY_FILE:
        from .train import dev_curve  # torch, only for curves

        return dev_curve(path.parent)
    table = read_csv(path)
    _, numeric = _kind(path, table)
    _check_numbers(path, table, numeric)
    return table


def aggregate(files: Sequence[Path], out_file: Path) -> pd.DataFrame:
    """Concatenate per-run outputs of one kind into ``out_file`` (gzip when it ends in .gz);
    errors name the odd file.

    Every input must be a whole evaluation.csv, timing.csv, sentences.csv or sweep.csv, a Bethe
    experiment's table, or a finished run's train.json (its dev curve), all of the same kind: a
    truncated, empty or damaged file, one without the columns the results need, or a non-number
    where a number is due is refused before anything is written.
    """
    if not files:
        raise ValueError("aggregate: no input files")
    tables = []
    for path in files:
        table = _read(Path(path))
        if tables and list(table.columns) != list(tables[0].columns):
            raise ValueError(f"{path}: columns differ from {files[0]}'s")
        tables.append(table)
    result = pd.concat(tables, ignore_index=True)
    write_csv(Path(out_file), result)
    return result
