"""Writes asv results folders with asv's own ``Results`` class, as ``asv run`` would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

results = pytest.importorskip("asv.results")
runner = pytest.importorskip("asv.runner")


def write_asv_results(
    asv_dir: Path, machine: str, commit: str, date_ms: int, benchmarks: dict[str, tuple]
) -> None:
    """``benchmarks`` maps a benchmark name to ``(param_names, param_values, values, unit)``, or
    with a fifth item, the repeated timings of each combination (asv computes their statistics from
    them); ``values`` lists one result per parameter combination (row-major), None or NaN for none.
    The catalogue ``benchmarks.json`` is (re)written with these benchmarks."""
    catalogue_path = asv_dir / "benchmarks.json"
    catalogue = json.loads(catalogue_path.read_text()) if catalogue_path.exists() else {"version": 2}
    machine_dir = asv_dir / machine
    machine_dir.mkdir(parents=True, exist_ok=True)
    (machine_dir / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    run = results.Results({"machine": machine, "python": "3.11"}, {}, commit, date_ms, "3.11", "env", {})
    for name, (names, params, values, unit, *repeats) in benchmarks.items():
        samples = repeats[0] if repeats else [None] * len(values)
        spec = {
            "name": name,
            "version": "1",
            "params": [[repr(value) for value in values_of] for values_of in params],
            "param_names": list(names),
            "unit": unit,
            "type": name.rsplit(".", 1)[-1].split("_", 1)[0],
        }
        catalogue[name] = spec
        outcome = runner.BenchmarkResult(
            result=list(values),
            samples=samples,
            number=[1 if repeats else None] * len(values),  # no repeats: the values as given, no statistics
            errcode=0,
            stderr="",
            profile=None,
        )
        run.add_result(spec, outcome)
    run.save(str(asv_dir))
    catalogue_path.write_text(json.dumps(catalogue))
