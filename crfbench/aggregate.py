"""Gather the per-run outputs into the results tables: evaluation.csv -> metrics.csv, timing.csv
-> timing.csv, sentences.csv -> sentences.csv.gz, sweep.csv -> sweep.csv, the dev curves of
train.json -> curves.csv (a tagger's or a parser's run), the dataset facts of config.json ->
datasets.csv (each fact once), and the Bethe experiments' per-fold or per-seed tables -> bethe/*.csv
(their per-word and per-citation rows are sentences)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .io import CorruptFileError, numeric_column, read_csv, write_csv
from .schema import CONFIG_FILE, OPTIONAL_NUMBERS, PER_RUN_TABLES, SUMMARY_FILE


def _kind(path: Path, table: pd.DataFrame) -> tuple[str, tuple[str, ...]]:
    """Which per-run table ``table`` is, and its numeric columns; CorruptFileError naming the
    columns the results need that ``path`` lacks."""
    missing = {
        kind: [name for name in columns if name not in table.columns]
        for kind, (columns, _) in PER_RUN_TABLES.items()
    }
    kind = min(missing, key=lambda name: len(missing[name]))
    if missing[kind]:
        raise CorruptFileError(
            f"{path}: not a per-run {', '.join(PER_RUN_TABLES)}: lacks column(s) {', '.join(missing[kind])}"
        )
    return kind, PER_RUN_TABLES[kind][1]


def _check_numbers(path: Path, table: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """CorruptFileError naming the first row whose cell in a numeric column is not a number.

    Only the ``OPTIONAL_NUMBERS`` may be empty (NaN): a metric without a value, an option that the
    row's method does not have.
    """
    for name in columns:
        numeric_column(path, table, name, required=name not in OPTIONAL_NUMBERS)


def _read(path: Path) -> pd.DataFrame:
    """One per-run output as a table: a train.json as its dev curve (a tagger's or a parser's), a
    config.json as its dataset facts, a CSV checked whole."""
    if path.name == SUMMARY_FILE:  # torch, only for curves
        from .parsing.run import dev_curve as parser_curve
        from .parsing.run import is_parser_run
        from .run_folder import dev_curve

        return (parser_curve if is_parser_run(path.parent) else dev_curve)(path.parent)
    if path.name == CONFIG_FILE:
        from .run_folder import dataset_rows

        return dataset_rows(path)
    table = read_csv(path)
    _, numeric = _kind(path, table)
    _check_numbers(path, table, numeric)
    return table


def aggregate(files: Sequence[Path], out_file: Path) -> pd.DataFrame:
    """Concatenate per-run outputs of one kind into ``out_file`` (gzip when it ends in .gz);
    errors name the odd file.

    Every input must be a whole evaluation.csv, timing.csv, sentences.csv or sweep.csv, a Bethe
    experiment's table, a finished run's train.json (its dev curve) or config.json (its dataset
    facts, each distinct row once), all of the same kind: a
    truncated, empty or damaged file, one without the columns the results need, or a non-number
    where a number is due is refused before anything is written.
    """
    if not files:
        raise ValueError("aggregate: no input files")
    tables: list[pd.DataFrame] = []
    for path in files:
        table = _read(Path(path))
        if tables and list(table.columns) != list(tables[0].columns):
            raise ValueError(f"{path}: columns differ from {files[0]}'s")
        tables.append(table)
    result = pd.concat(tables, ignore_index=True)
    if all(Path(path).name == CONFIG_FILE for path in files):  # every run of a dataset shares its facts
        result = result.drop_duplicates(ignore_index=True)
    write_csv(Path(out_file), result)
    return result
