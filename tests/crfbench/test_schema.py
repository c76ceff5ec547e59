"""crfbench.schema is the one home of the results files' names and columns: their writers agree with
it, and the stages that read them import no other stage."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from crfbench import schema

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("train", "evaluate", "timing", "sweep")


def test_the_writers_columns_are_the_schemas() -> None:
    from crfbench import agreement, asv_results

    assert tuple(agreement.COLUMNS) == schema.AGREEMENT_COLUMNS
    assert asv_results.COLUMNS == schema.SCALING_COLUMNS


@pytest.mark.parametrize("kind", list(schema.PER_RUN_TABLES))
def test_every_per_run_tables_numbers_are_among_its_columns(kind: str) -> None:
    columns, numbers = schema.PER_RUN_TABLES[kind]
    assert set(numbers) <= set(columns)


def _imported_modules(path: Path) -> set[str]:
    """The crfbench modules a source file imports (relative imports resolved from crfbench/)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
    return found


@pytest.mark.parametrize("stage", STAGES)
def test_no_stage_imports_another(stage: str) -> None:
    imported = _imported_modules(ROOT / "crfbench" / f"{stage}.py")
    assert not imported & (set(STAGES) - {stage})


def test_the_report_and_aggregate_import_no_experiment_code() -> None:
    code = (
        "import sys, crfbench.report, crfbench.aggregate; "
        "print(' '.join(name for name in sys.modules if name.startswith('crfbench.')))"
    )
    command = [sys.executable, "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = result.stdout.split()
    experiment_code = ("bethe", "newton", "experiment", "run_folder", *STAGES)
    assert not [name for name in loaded if name.split(".")[1] in experiment_code]
