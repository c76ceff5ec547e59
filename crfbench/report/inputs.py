"""Read the tidy result tables (``metrics.csv``, ``timing.csv``) with the columns the report needs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..io import numeric_column, read_csv

METRICS_FILE = "metrics.csv"
TIMING_FILE = "timing.csv"

#: Columns the report reads; other columns are kept and ignored.
METRICS_COLUMNS = (
    "dataset",
    "dataset_options",
    "protocol",
    "encoder_name",
    "loss",
    "seed",
    "backend",
    "device",
    "device_name",
    "revision",
    "split",
    "decoder",
    "metric",
    "value",
)
TIMING_COLUMNS = (
    "dataset",
    "dataset_options",
    "protocol",
    "encoder_name",
    "loss",
    "seed",
    "backend",
    "device",
    "device_name",
    "threads",
    "batch_size",
    "revision",
    "kind",
    "name",
    "iterations",
    "round",
    "seconds",
)
NUMERIC_COLUMNS = ("value", "iterations", "round", "seconds")


def read_results(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """The CSV at ``path`` (an empty table when absent): text columns as strings ("" when empty),
    ``value``/``iterations``/``round``/``seconds`` as floats, so that grouping and matching are exact."""
    if not path.exists():
        return pd.DataFrame({name: pd.Series(dtype=_dtype(name)) for name in columns})
    text = [name for name in columns if name not in NUMERIC_COLUMNS]
    table = read_csv(path, dtype=dict.fromkeys(text, str))  # whole, or CorruptFileError naming it
    missing = [name for name in columns if name not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    table[text] = table[text].fillna("")
    for name in sorted(set(NUMERIC_COLUMNS) & set(columns)):
        table[name] = numeric_column(path, table, name).astype(float)
    return table


def _dtype(name: str) -> str:
    return "float" if name in NUMERIC_COLUMNS else "str"
