"""The Snakemake pipeline: lint, and dry runs of every config and the SLURM profile.

The smoke config is run end to end by `.ci/run` (minutes), not here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake not installed (extra: pipeline)")


def snakemake(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    environment = os.environ | {
        "CRFBENCH_DATA": os.environ.get("CRFBENCH_DATA", str(ROOT.parent / "shared/data"))
    }
    return subprocess.run(
        [str(SNAKEMAKE), *arguments], cwd=cwd, capture_output=True, text=True, env=environment, timeout=300
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the workflow in a scratch folder, so dry runs never see real results."""
    target = tmp_path_factory.mktemp("workflow")
    for name in ("Snakefile", "workflow", "config"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target / name)
    return target


def test_lint_finds_nothing_but_the_missing_conda_directives(workdir: Path) -> None:
    """One Python environment by design, so the conda/container lint is the only one allowed."""
    result = snakemake("--lint", cwd=workdir)
    output = result.stdout + result.stderr
    lints = [line.strip() for line in output.splitlines() if line.strip().startswith("* ")]
    assert lints, output  # the linter ran and reported its one known lint
    assert all(lint.startswith("* Specify a conda environment") for lint in lints), "\n".join(lints)


@pytest.mark.parametrize("configfile", [None, "config/smoke.yaml", "config/paper.yaml"])
def test_every_config_validates_and_plans_every_rule(workdir: Path, configfile: str | None) -> None:
    arguments = ["-n", "--cores", "2"] + (["--configfile", configfile] if configfile else [])
    result = snakemake(*arguments, cwd=workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for rule in ("prepare_data", "train", "evaluate", "time", "aggregate_metrics", "report"):
        assert f"\n{rule} " in result.stdout, rule


def test_a_given_config_replaces_the_default_instead_of_merging(workdir: Path) -> None:
    result = snakemake(
        "-n", "--cores", "2", "--configfile", "config/smoke.yaml", "--printshellcmds", cwd=workdir
    )
    assert "results/smoke/runs" in result.stdout
    assert "results/runs/" not in result.stdout and "ud-pos-nl" not in result.stdout


def test_slurm_profile_plans_the_paper_run(workdir: Path) -> None:
    pytest.importorskip("snakemake_executor_plugin_slurm")
    result = snakemake(
        "-n", "--profile", "workflow/profiles/slurm", "--configfile", "config/paper.yaml", cwd=workdir
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "\ntrain " in result.stdout


def test_a_config_error_names_the_setting(workdir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((workdir / "config/smoke.yaml").read_text().replace("seeds: [0]", "seeds: [zero]"))
    result = snakemake("-n", "--cores", "1", "--configfile", str(bad), cwd=workdir)
    assert result.returncode != 0
    assert "zero" in result.stdout + result.stderr


def test_asv_results_are_tidied_and_published_unless_scaling_is_off(tmp_path: Path) -> None:
    from tests.crfbench.asv_fixture import write_asv_results

    for name in ("Snakefile", "workflow", "config"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    marginals = (("backend", "method", "N"), (("torch",), ("crf",), (16,)), [1.0], "seconds")
    write_asv_results(tmp_path / "results/asv", "box", "a" * 40, 1_000, {"m.C.time_marginals": marginals})
    planned = snakemake("-n", "--cores", "2", "--configfile", "config/smoke.yaml", cwd=tmp_path)
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    assert "\nscaling_table " in planned.stdout and "\nasv_html " in planned.stdout
    off = snakemake(
        "-n", "--cores", "2", "--configfile", "config/smoke.yaml", "--config", "scaling=False", cwd=tmp_path
    )
    assert off.returncode == 0, off.stdout[-3000:] + off.stderr[-3000:]
    assert "scaling_table" not in off.stdout and "asv_html" not in off.stdout
