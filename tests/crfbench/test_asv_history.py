"""One asv history per machine: results that differ only in their Python path, their environment
name or a missing cpu/ram land in one series, keeping every measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crfbench import asv_history

COLUMNS = ["result", "params", "version", "started_at", "duration"]


def _write_run(folder: Path, commit: str, env: str, params: dict, rows: dict[str, tuple[float, int]]) -> Path:
    """An asv results file as asv 0.6 writes it; ``rows`` maps a benchmark to (value, started_at)."""
    run = {
        "commit_hash": commit,
        "env_name": env,
        "date": 1_700_000_000_000,
        "params": params,
        "python": params["python"],
        "requirements": {},
        "env_vars": {},
        "result_columns": COLUMNS,
        "results": {key: [[value], [], "v1", started, 1.0] for key, (value, started) in rows.items()},
        "durations": {"<build>": 0.1},
        "version": 2,
    }
    path = folder / f"{commit[:8]}-{env}.json"
    path.write_text(json.dumps(run))
    return path


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    folder = tmp_path / "cpu-box"
    folder.mkdir()
    (folder / "machine.json").write_text(json.dumps({"machine": "cpu-box", "version": 1}))
    a, b = "a" * 40, "b" * 40
    old = {"machine": "cpu-box", "python": "/venv/bin/python3"}
    _write_run(folder, a, "existing-py_venv_bin_python3", old, {"m.time_x": (1.0, 10), "m.time_y": (2.0, 10)})
    _write_run(folder, b, "existing-py_venv_bin_python3.11",
               {"cpu": "EPYC", "machine": "cpu-box", "ram": "24GB", "python": "/venv/bin/python3.11"},
               {"m.time_x": (3.0, 20)})  # fmt: skip
    # the same commit again, later, from asv's own environment: m.time_y remeasured, m.time_z new
    _write_run(folder, a, "virtualenv-py3.11", {"machine": "cpu-box", "python": "3.11"},
               {"m.time_y": (5.0, 30), "m.time_z": (6.0, 30)})  # fmt: skip
    return folder


def test_one_env_name_and_parameter_set_per_machine(machine: Path):
    files = asv_history.normalize(machine, "3.11")
    assert [path.name for path in files] == [f"{'a' * 8}-py3.11.json", f"{'b' * 8}-py3.11.json"]
    assert sorted(path.name for path in machine.glob("*.json")) == sorted(
        ["machine.json", *(p.name for p in files)]
    )
    runs = [json.loads(path.read_text()) for path in files]
    expected = {"cpu": "EPYC", "machine": "cpu-box", "ram": "24GB", "python": "3.11"}
    assert [run["params"] for run in runs] == [expected, expected]
    assert {run["env_name"] for run in runs} == {"py3.11"}
    assert json.loads((machine / "machine.json").read_text()) == {
        "machine": "cpu-box", "version": 1, "cpu": "EPYC", "ram": "24GB",
    }  # fmt: skip
    # every measurement kept; of one benchmark measured twice at one commit, the later run's
    merged = {key: row[0] for key, row in runs[0]["results"].items()}
    assert merged == {"m.time_x": [1.0], "m.time_y": [5.0], "m.time_z": [6.0]}
    assert runs[1]["results"]["m.time_x"][0] == [3.0]


def test_a_second_pass_changes_nothing(machine: Path):
    files = asv_history.normalize(machine, "3.11")
    before = {path: path.read_text() for path in [*files, machine / "machine.json"]}
    assert asv_history.normalize(machine, "3.11") == files
    assert {path: path.read_text() for path in before} == before


def test_results_load_in_asv_as_one_series(machine: Path):
    results = pytest.importorskip("asv.results")
    files = asv_history.normalize(machine, "3.11")
    loaded = [results.Results.load(str(path)) for path in files]
    assert len({tuple(sorted(run.params.items())) for run in loaded}) == 1
    assert {run.env_name for run in loaded} == {"py3.11"}


def test_a_result_of_another_machine_is_refused(machine: Path):
    stray = _write_run(
        machine, "c" * 40, "env", {"machine": "other", "python": "3.11"}, {"m.time_x": (1.0, 1)}
    )
    with pytest.raises(ValueError, match=f"{stray.name}: params name machine 'other'"):
        asv_history.normalize(machine, "3.11")


def test_the_python_must_be_a_version(machine: Path):
    with pytest.raises(ValueError, match=r"python must be a version X\.Y"):
        asv_history.normalize(machine, "/usr/bin/python3")


def test_command_line(machine: Path, capsys: pytest.CaptureFixture[str]):
    assert asv_history.main([str(machine.parent), "--python", "3.11"]) == 0
    assert "cpu-box: 2 result files as py3.11" in capsys.readouterr().out
    assert asv_history.main([str(machine.parent), "--python", "3.11", "--machine", "absent"]) == 2
    assert "absent: no machine.json" in capsys.readouterr().err
