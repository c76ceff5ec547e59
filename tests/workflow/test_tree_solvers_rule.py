"""The tree-solver study in the pipeline (workflow/rules/tree_solvers.smk): planned with the
config's `tree_solvers` options, its table an input of the report, and left out without them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.workflow.pipeline import SNAKEMAKE, copy_workflow, snakemake

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake not installed (extra: pipeline)")


def test_the_study_runs_with_the_configs_options_before_the_report(tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path / "workflow")
    result = snakemake(
        "-n", "--cores", "2", "--configfile", "config/smoke.yaml", "--printshellcmds", cwd=workdir
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    commands = [line for line in result.stdout.splitlines() if " sparsemap trees " in line]
    assert len(commands) == 1, result.stdout[-3000:]
    assert (
        "--instances 2 --iterations 10 --words 4 --out results/smoke/sparsemap/tree-solvers.csv"
        in commands[0]
    )
    report_input = result.stdout.split("\nrule report:\n")[1].splitlines()[0]
    assert (
        report_input.strip().startswith("input:")
        and "results/smoke/sparsemap/tree-solvers.csv" in report_input
    )


def test_the_study_is_left_out_without_its_section(tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path / "workflow")
    smoke = (workdir / "config/smoke.yaml").read_text()
    config = workdir / "config/no-trees.yaml"
    config.write_text(re.sub(r"(?m)^tree_solvers:.*\n", "", smoke))
    result = snakemake("-n", "--cores", "2", "--configfile", str(config), cwd=workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "tree_solvers" not in result.stdout and "\nreport " in result.stdout
