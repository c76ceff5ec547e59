"""Running the pipeline from tests: a scratch copy of the workflow, and Snakemake in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
WORKFLOW_FILES = ("workflow", "config")  # what a clone holds of the pipeline (workflow/Snakefile)


def environment() -> dict[str, str]:
    """The test's environment, with the data directory set as the README's commands set it."""
    return os.environ | {"CRFBENCH_DATA": os.environ.get("CRFBENCH_DATA", str(ROOT.parent / "shared/data"))}


def copy_workflow(target: Path) -> Path:
    """Copy the pipeline into ``target`` so runs there never see (or write) the real results."""
    for name in WORKFLOW_FILES:
        shutil.copytree(ROOT / name, target / name)
    return target


def snakemake(
    *arguments: str, cwd: Path, timeout: int = 300, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run Snakemake in ``cwd`` as a user would (it finds workflow/Snakefile and its profile), in
    ``environment()`` changed by ``env`` (a None value removes the variable)."""
    variables = environment() | (env or {})
    return subprocess.run(
        [str(SNAKEMAKE), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={name: value for name, value in variables.items() if value is not None},
        timeout=timeout,
    )


def stub_pretrained_models(workdir: Path) -> None:
    """Stand-ins for config/paper.yaml's BERT model folders (a folder with a config.json is what
    the dry run's check asks of a local model), so that the paper's plan can be drawn here."""
    for name in ("bert-base-cased", "bert-large-cased"):
        (workdir / "models" / name).mkdir(parents=True, exist_ok=True)
        (workdir / "models" / name / "config.json").write_text("{}\n")
