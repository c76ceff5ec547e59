"""The asv scaling suite's results (``results/asv/``) as one tidy table, ``results/scaling.csv``.

For each machine folder, each benchmark's latest result (by commit date, then run start) is read
with asv's own ``Results`` loader, so a run of part of the suite (``asv run --bench NAME``) adds its
benchmarks to the machine's table instead of replacing the rest; the ``commit`` and ``date`` columns
say which run each row is from, and ``q25``/``q75`` the interquartile range of its repeats.
Benchmark units and parameter names come from ``benchmarks.json``. One row per benchmark and
parameter combination that produced a number (skipped and failed combinations have none);
parameters a benchmark does not take are left empty. A run from before a benchmark took a parameter
that was added last (:data:`ADDED_LAST`: the timing ``mode``) reads with that parameter at the value
every such run had (:func:`legacy_mode`: torch eager, JAX jitted).
"""

from __future__ import annotations

import ast
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from .io import write_atomic
from .schema import SCALING_COLUMNS, SCALING_PARAMETERS, SCALING_SPREAD

#: The scaling table's parameters and columns (``crfbench.schema``).
PARAMETERS, COLUMNS = SCALING_PARAMETERS, SCALING_COLUMNS
#: Parameters appended to benchmarks' parameter lists after results were kept, with the value that
#: the older results were measured at (a torch result's; :func:`legacy_mode`).
ADDED_LAST = {"mode": "eager"}


def legacy_mode(backend: object) -> str:
    """The timing mode of a result from before the ``mode`` parameter: torch calls were eager, and
    JAX's were jitted, the mode now called ``compiled``."""
    return "compiled" if backend == "jax" else ADDED_LAST["mode"]


def _latest_runs(machine_dir: Path) -> dict:
    """Benchmark name -> the latest of the machine's runs that has a result for it."""
    from asv.results import Results

    runs = [
        Results.load(str(path)) for path in sorted(machine_dir.glob("*.json")) if path.name != "machine.json"
    ]
    latest: dict[Any, Any] = {}
    for run in sorted(runs, key=lambda run: (run.date or 0, max(run.started_at.values(), default=0))):
        latest |= dict.fromkeys(run.get_all_result_keys(), run)
    return latest


def _rows(machine: str, key: str, run, spec: dict) -> list[dict]:
    """One row per parameter combination of benchmark ``key`` that has a number in ``run``."""
    rows = []
    date = datetime.fromtimestamp((run.date or 0) / 1000, tz=UTC).date().isoformat()
    names = list(spec.get("param_names", []))
    params = run.get_result_params(key)
    added = names[len(params) :] if params else []
    if added and all(name in ADDED_LAST for name in added):  # a run from before they were added
        names = names[: len(params)]
    else:
        added = []
    values = run.get_result_value(key, params)
    stats = run.get_result_stats(key, params)
    if not params:
        values, stats = [values], [stats]
    combinations = (
        pd.MultiIndex.from_product([[ast.literal_eval(v) for v in p] for p in params]) if params else [()]
    )
    for combination, value, spread in zip(combinations, values, stats, strict=True):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        row = dict.fromkeys(COLUMNS, None)
        row.update(
            machine=machine,
            commit=run.commit_hash,
            date=date,
            benchmark=key,
            name=key.rsplit(".", 1)[-1],
            unit=spec.get("unit", ""),
            value=float(value),
            **_quartiles(spread),
        )
        for name, parameter in zip(names, combination, strict=True):
            if name not in PARAMETERS:
                raise ValueError(f"{key}: parameter {name!r} is not one of {', '.join(PARAMETERS)}")
            row[name] = parameter
        row.update({name: ADDED_LAST[name] for name in added})
        if "mode" in added:
            row["mode"] = legacy_mode(row["backend"])
        rows.append(row)
    return rows


def _quartiles(stats: dict | None) -> dict[str, float | None]:
    """``q25`` and ``q75`` of a timing's repeats from asv's statistics (None where asv kept none:
    a ``track_`` benchmark, or one repeat)."""
    stats = stats or {}
    return {column: stats.get(key) for column, key in zip(SCALING_SPREAD, ("q_25", "q_75"), strict=True)}


def read_asv_results(asv_dir: Path) -> pd.DataFrame:
    """Tidy table (``COLUMNS``) of each benchmark's latest asv result on every machine under
    ``asv_dir``."""
    asv_dir = Path(asv_dir)
    catalogue = asv_dir / "benchmarks.json"
    if not catalogue.exists():
        raise ValueError(f"{catalogue}: missing; run the asv suite first (docs/benchmarks.md)")
    benchmarks = {key: spec for key, spec in json.loads(catalogue.read_text()).items() if key != "version"}
    rows = []
    for machine_dir in sorted(path for path in asv_dir.iterdir() if (path / "machine.json").exists()):
        for key, run in sorted(_latest_runs(machine_dir).items()):
            if key in benchmarks:  # not a benchmark since removed from the suite
                rows += _rows(machine_dir.name, key, run, benchmarks[key])
    return pd.DataFrame(rows, columns=list(COLUMNS)).convert_dtypes()


def write_scaling_table(asv_dir: Path, out: Path) -> pd.DataFrame:
    """Write ``read_asv_results(asv_dir)`` to ``out`` as CSV, atomically."""
    frame = read_asv_results(asv_dir)
    write_atomic(Path(out), frame.to_csv(index=False, float_format="%.6g"))
    return frame
