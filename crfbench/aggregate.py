"""Gather the per-run tidy CSVs (evaluation.csv, timing.csv) into one results table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .io import write_atomic


def aggregate(files: Sequence[Path], out_file: Path) -> pd.DataFrame:
    """Concatenate tidy CSVs with the same columns into ``out_file``; errors name the odd file."""
    if not files:
        raise ValueError("aggregate: no input files")
    tables = []
    for path in files:
        table = pd.read_csv(path)
        if tables and list(table.columns) != list(tables[0].columns):
            raise ValueError(f"{path}: columns differ from {files[0]}'s")
        tables.append(table)
    result = pd.concat(tables, ignore_index=True)
    write_atomic(Path(out_file), result.to_csv(index=False))
    return result
