"""A fresh clone of the repository has nothing to do, whatever order git wrote its files in: the
committed reference run is up to date (workflow/rules/common.smk, ``reference``), while a forced
rerun or a changed input still reruns what depends on it (issue 49)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from snakemake.utils import validate

from crfbench.config import profile_digest
from crfbench.io import write_json
from tests.workflow.pipeline import ROOT, SNAKEMAKE, WORKFLOW_FILES, snakemake

pytestmark = pytest.mark.skipif(
    not SNAKEMAKE.exists() or shutil.which("git") is None or not (ROOT / ".git").exists(),
    reason="needs snakemake (extra: pipeline), git and a git checkout",
)

#: The committed inputs that rules read to make committed outputs: written last by the clone below.
SOURCES = ("results/asv/", "results/gpu/")


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of this checkout's commit with its pipeline as in the working tree, every committed
    file's timestamp in the worst order: reports oldest, then results, the files no rule makes
    newest (each output older than each of its inputs)."""
    target = tmp_path_factory.mktemp("clone") / "crfbench"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "checkout", "-q", "HEAD"], check=True)
    for name in WORKFLOW_FILES:  # the code under test, committed or not
        shutil.rmtree(target / name)
        shutil.copytree(ROOT / name, target / name)
    record_as_the_configs_run(target)
    committed = subprocess.run(
        ["git", "-C", str(target), "ls-files", "results", "reports"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    rank = lambda name: (name.startswith(SOURCES), name.startswith("results/"))  # noqa: E731
    for second, name in enumerate(sorted(committed, key=rank)):
        os.utime(target / name, (1_000_000 + second, 1_000_000 + second))
    return target


#: Config sections whose studies joined after the committed run, and the table each one makes.
LATER_STUDIES = {"parsing": "results/parse/metrics.csv", "tree_solvers": "results/sparsemap/tree-solvers.csv"}


def record_as_the_configs_run(clone: Path) -> None:
    """Make ``clone``'s committed results the reference run of its default config, as the report job
    does: the config's digest beside the committed notes. The studies of :data:`LATER_STUDIES`
    whose tables the committed run lacks are left out of that config first, so that its run is the
    one committed."""
    yaml = pytest.importorskip("yaml")
    config_file = clone / "config/config.yaml"
    config = yaml.safe_load(config_file.read_text())
    for section, table in LATER_STUDIES.items():
        if not (clone / table).exists():
            config.pop(section, None)
    config_file.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False))
    validate(config, str(clone / "workflow/schemas/config.schema.yaml"))  # as the Snakefile: defaults in
    notes_file = clone / "results/report-notes.json"
    write_json(notes_file, json.loads(notes_file.read_text()) | {"config_digest": profile_digest(config)})
    git = ["git", "-C", str(clone), "-c", "user.name=test", "-c", "user.email=test@example.org"]
    subprocess.run([*git, "commit", "-q", "-am", "the reference run of this config"], check=True)


def planned_jobs(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The rules a dry run plans (its job table), empty when it has nothing to do."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if "Nothing to be done" in result.stdout:
        return set()
    table = result.stdout.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:]
    return {line.split()[0] for line in table if line.split() and line.split()[0] != "total"}


def test_a_fresh_clone_has_nothing_to_do(clone: Path) -> None:
    assert planned_jobs(snakemake("-n", "--cores", "2", cwd=clone)) == set()


def test_a_clone_under_another_config_plans_the_run(clone: Path) -> None:
    """The committed results are the reference run of their config only: under another setting
    their timestamps count again (here: every output older than its inputs)."""
    planned = planned_jobs(snakemake("-n", "--cores", "2", "--config", "sweep_sentences=50", cwd=clone))
    assert {"report", "all"} <= planned


def test_a_forced_rerun_still_rerenders_the_report(clone: Path) -> None:
    planned = planned_jobs(snakemake("-n", "--cores", "2", "--forcerun", "agreement", cwd=clone))
    assert planned == {"agreement", "report", "all"}


def test_a_changed_asv_result_reruns_the_scaling_table_and_the_report(clone: Path) -> None:
    catalogue = clone / "results/asv/benchmarks.json"
    original = catalogue.read_bytes()
    try:
        catalogue.write_bytes(original + b"\n")
        planned = planned_jobs(snakemake("-n", "--cores", "2", cwd=clone))
    finally:
        catalogue.write_bytes(original)
    assert planned == {"scaling_table", "report", "all"}


def test_the_report_of_the_committed_run_shows_its_tables_and_figures_with_captions(clone: Path) -> None:
    """`snakemake --report` from the committed results and reports (nothing is run for it)."""
    result = snakemake("--report", "report.html", cwd=clone)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = (clone / "report.html").read_text(encoding="utf-8")
    for shown in ("metrics.csv", "timing.csv", "agreement.csv", "dev-curves.png", "index.html"):
        assert shown in page, shown
    assert "Every run's dev curve" in page  # workflow/report/curves.rst
    (clone / "report.html").unlink()
