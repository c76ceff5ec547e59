"""One asv history per machine: every result of a machine under one environment name and one set of
parameters, so that ``asv publish`` draws one series per benchmark and machine.

asv keys a series by its results' ``params`` (the machine's description and the Python) and files
a result as ``<commit[:8]>-<env_name>.json``. Runs in the project's own environment
(``asv run --python=same``) are named after the interpreter's path
(``existing-py_work_main_.venv_bin_python3``, and ``..._python3.11`` for the same Python), runs in
asv's own environments ``virtualenv-py3.11``, and only some runs recorded the machine's cpu and
ram: each starts a series of its own. :func:`normalize` rewrites a machine's results to the
environment name ``py<X.Y>`` (:func:`env_name`), the Python ``X.Y`` and the machine's description
from its ``machine.json`` (completed, where it lacks a field, by the first run that recorded one,
so nothing recorded is lost); results of one commit that land under one name are merged, the
later run of a benchmark winning. Measurements are never changed. Run after every ``asv run``
(the nightly workflow and ``benchmarks/gpu_session.sh`` do):
``python -m crfbench.asv_history results/asv --python 3.11 [--machine NAME]``.

Standard library only: the GPU session runs it in an image without the engine's dependencies.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

MACHINE_FILE = "machine.json"
#: The fields of ``machine.json`` that are not a description of the machine.
NOT_DESCRIPTION = ("version",)
PYTHON = re.compile(r"^\d+\.\d+$")


def env_name(python: str) -> str:
    """The one environment name of a machine's results on Python ``python`` (``"3.11"``)."""
    if not PYTHON.match(python):
        raise ValueError(f"python must be a version X.Y such as 3.11, got {python!r}")
    return f"py{python}"


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable asv results file: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a readable asv results file: expected a JSON object")
    return data


def _write(path: Path, data: dict[str, Any], indent: int | None = None) -> None:
    """As asv writes: results on one line, ``machine.json`` indented."""
    path.write_text(json.dumps(data, indent=indent) + ("\n" if indent else ""), encoding="utf-8")


def result_files(machine_dir: Path) -> list[Path]:
    """The machine's result files (every ``*.json`` but ``machine.json``), sorted by name."""
    return sorted(path for path in machine_dir.glob("*.json") if path.name != MACHINE_FILE)


def _description(machine_dir: Path, runs: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """``machine.json``'s fields, each missing or empty one taken from the earliest run that has it."""
    machine = _load(machine_dir / MACHINE_FILE)
    if machine.get("machine") != machine_dir.name:
        raise ValueError(
            f"{machine_dir / MACHINE_FILE}: names machine {machine.get('machine')!r}, "
            f"not its folder's {machine_dir.name!r}"
        )
    for path, run in sorted(runs, key=lambda item: item[1].get("date") or 0):
        params = run.get("params", {})
        if params.get("machine") != machine_dir.name:
            raise ValueError(
                f"{path}: params name machine {params.get('machine')!r}, not {machine_dir.name!r}"
            )
        for key, value in params.items():
            if key != "python" and value not in (None, "") and machine.get(key) in (None, ""):
                machine[key] = value
    return machine


def _started(run: dict[str, Any], key: str) -> float:
    """When ``run`` started benchmark ``key`` (its row's ``started_at`` column; 0 where absent)."""
    columns, row = run.get("result_columns", []), run.get("results", {}).get(key)
    if row is None or "started_at" not in columns or columns.index("started_at") >= len(row):
        return 0
    return row[columns.index("started_at")] or 0


def _first_start(run: dict[str, Any]) -> float:
    return min((_started(run, key) for key in run.get("results", {})), default=0)


def _merge(into: dict[str, Any], run: dict[str, Any]) -> None:
    """Add ``run``'s benchmarks to ``into`` (same commit, same columns); a benchmark in both keeps
    the later run's row."""
    for key, row in run.get("results", {}).items():
        if key not in into["results"] or _started(run, key) >= _started(into, key):
            into["results"][key] = row
    into["durations"] = {**run.get("durations", {}), **into.get("durations", {})}


def normalize(machine_dir: Path, python: str) -> list[Path]:
    """Rewrite ``machine_dir``'s results under one environment name and parameter set (module
    docstring); return the files it holds afterwards. ValueError naming the file when a result or
    ``machine.json`` names another machine, or two results of one commit disagree on their columns."""
    machine_dir = Path(machine_dir)
    name = env_name(python)
    runs = [(path, _load(path)) for path in result_files(machine_dir)]
    machine = _description(machine_dir, runs)
    params = {key: value for key, value in machine.items() if key not in NOT_DESCRIPTION}
    params["python"] = python
    merged: dict[str, dict[str, Any]] = {}
    for path, run in sorted(runs, key=lambda item: _first_start(item[1])):
        run.update(params=dict(params), python=python, env_name=name)
        commit = run["commit_hash"]
        if commit not in merged:
            merged[commit] = run
        elif merged[commit].get("result_columns") != run.get("result_columns"):
            raise ValueError(f"{path}: result columns differ from another result of commit {commit[:8]}")
        else:
            _merge(merged[commit], run)
    _write(machine_dir / MACHINE_FILE, machine, indent=4)
    kept = {machine_dir / f"{commit[:8]}-{name}.json": run for commit, run in merged.items()}
    for path, run in kept.items():
        _write(path, run)
    for path, _ in runs:
        if path not in kept:
            path.unlink()
    return sorted(kept)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crfbench.asv_history", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("results", type=Path, help="asv's results folder (results/asv)")
    parser.add_argument("--python", required=True, help="the Python X.Y the machine's runs used")
    parser.add_argument("--machine", help="one machine's folder name (default: every machine)")
    args = parser.parse_args(argv)
    folders = [args.results / args.machine] if args.machine else sorted(args.results.iterdir())
    try:
        for folder in folders:
            if not (folder / MACHINE_FILE).is_file():
                if args.machine:
                    raise ValueError(f"{folder}: no {MACHINE_FILE}; not an asv machine folder")
                continue
            files = normalize(folder, args.python)
            print(f"{folder}: {len(files)} result files as {env_name(args.python)}")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
