"""Read the tidy result tables (``metrics.csv``, ``timing.csv``, the agreement step's table) with the
columns the report needs; their names and columns are ``crfbench.schema``'s."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..io import numeric_column, read_csv
from ..schema import NUMERIC_COLUMNS


def read_results(
    path: Path, columns: tuple[str, ...], numbers: tuple[str, ...] = NUMERIC_COLUMNS
) -> pd.DataFrame:
    """The CSV at ``path`` (an empty table when absent): text columns as strings ("" when empty),
    the ``numbers`` columns (by default ``value``/``iterations``/``round``/``seconds``) as floats, so
    that grouping and matching are exact."""
    if not path.exists():
        return pd.DataFrame(
            {name: pd.Series(dtype="float" if name in numbers else "str") for name in columns}
        )
    text = [name for name in columns if name not in numbers]
    table = read_csv(path, dtype=dict.fromkeys(text, str))  # whole, or CorruptFileError naming it
    missing = [name for name in columns if name not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    table[text] = table[text].fillna("")
    for name in sorted(set(numbers) & set(columns)):
        table[name] = numeric_column(path, table, name).astype(float)
    return table


def read_table(results_dir: Path, relative: str | Path, columns: tuple[str, ...]) -> pd.DataFrame | None:
    """An experiment's table ``results_dir / relative`` checked for ``columns`` (ValueError naming
    the file and the missing ones), or None when the experiment did not run."""
    path = Path(results_dir) / relative
    if not path.exists():
        return None
    table = read_csv(path)  # whole, or CorruptFileError naming it
    absent = [name for name in columns if name not in table.columns]
    if absent:
        raise ValueError(f"{path}: missing column(s) {', '.join(absent)}")
    return table


def agreement_summary(path: Path) -> str | None:
    """The agreement table at ``path`` in one sentence ("N comparisons (methods: …), K outside
    tolerance.", naming the methods it covers), or None when it is absent (the agreement step has
    not run)."""
    if not path.exists():
        return None
    table = read_csv(path)  # whole, or CorruptFileError naming it
    if "ok" not in table.columns:
        raise ValueError(f"{path}: missing column ok (write it with `crfbench agree`)")
    failed = int((table["ok"].astype(str).str.lower() != "true").sum())
    methods = ", ".join(dict.fromkeys(table["method"].astype(str))) if "method" in table.columns else ""
    covered = f" (methods: {methods})" if methods else ""
    return f"{len(table)} comparisons{covered}, {failed} outside tolerance."
