"""The smoke pipeline recovers by itself: killed mid-run, or re-configured, a plain rerun of the
README's command finishes with the results an undisturbed run gives.

These run the smoke profile end to end once; the killed run starts from a copy of it less one
training run and all that depends on it, so that only those run again (a few minutes on 2 cores
in all, ~4 fewer than a second run from scratch). The undisturbed run is CI's end-to-end run of
the pipeline; the killed and re-configured runs are in the nightly tier (tests/tiers.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from crfbench.park import park, unpark
from tests.workflow.pipeline import SNAKEMAKE, copy_workflow, environment, snakemake

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake not installed (extra: pipeline)")

SMOKE = ("--cores", "2", "--configfile", "config/smoke.yaml")  # the smoke command (docs/pipeline.md)
RESULTS = Path("results/smoke")
PIPELINE_TIMEOUT = 1200


def run_smoke(workdir: Path) -> None:
    result = snakemake(*SMOKE, cwd=workdir, timeout=PIPELINE_TIMEOUT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def kill_mid_training(workdir: Path) -> None:
    """Start the smoke run in its own process group and SIGKILL the whole group while a training
    job is between epochs: some runs finished, one with a checkpoint and no ``train.json``."""
    process = subprocess.Popen(
        [str(SNAKEMAKE), *SMOKE],
        cwd=workdir,
        env=environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + PIPELINE_TIMEOUT
    try:
        while time.monotonic() < deadline and process.poll() is None:
            runs = workdir / RESULTS / "runs"
            finished = list(runs.glob("**/train.json"))
            in_progress = [p for p in runs.glob("**/checkpoint.pt") if not p.with_name("train.json").exists()]
            if finished and in_progress:
                break
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the smoke run ended before it could be interrupted"
    assert list((workdir / ".snakemake/locks").glob("*.lock")), "the kill left no lock: nothing was tested"


def without_seconds(history: list[dict]) -> list[dict]:
    return [{key: value for key, value in epoch.items() if key != "seconds"} for epoch in history]


def canonical(value: object) -> object:
    """A checkpoint's content in a form ``==`` compares exactly (tensors by dtype, shape, bytes)."""
    if isinstance(value, torch.Tensor):
        return (str(value.dtype), tuple(value.shape), value.numpy().tobytes())
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    return value


def comparable_results(workdir: Path) -> dict[str, object]:
    """Every result file, less what measures wall-clock time (timing tables, the per-epoch
    ``seconds`` that ``train.json``, ``checkpoint.pt``, ``curves.csv``, the Bethe experiments' and
    the Newton study's tables record, the sweep's ``seconds`` rows, the Newton cost sweep) and the logs;
    reports/ is drawn from these and the timings. Files compare byte for byte, checkpoints by
    their content."""
    results: dict[str, object] = {}
    for path in sorted((workdir / RESULTS).rglob("*")):
        relative = path.relative_to(workdir / RESULTS)
        if (
            not path.is_file()
            or relative.parts[0] in {"logs", "timing"}
            or path.name in {"timing.csv", "cost.csv"}
        ):
            continue
        if path.name == "train.json":
            summary = json.loads(path.read_bytes())
            results[str(relative)] = summary | {"history": without_seconds(summary["history"])}
        elif path.name == "curves.csv" or relative.parts[0] in {"bethe", "newton"}:
            results[str(relative)] = (
                pd.read_csv(path).drop(columns="seconds", errors="ignore").to_csv(index=False)
            )
        elif path.name == "sweep.csv":
            sweep = pd.read_csv(path)
            results[str(relative)] = sweep[sweep["metric"] != "seconds"].to_csv(index=False)
        elif path.name == "checkpoint.pt":
            saved = torch.load(path, weights_only=False)
            state = saved["state"] | {"history": without_seconds(saved["state"]["history"])}
            results[str(relative)] = canonical(saved | {"state": state})
        else:
            results[str(relative)] = path.read_bytes()
    return results


#: The training run the killed run starts from (2 epochs: a kill between them leaves a
#: checkpoint and no ``train.json``).
RETRAINED = RESULTS / "runs/synthetic/L0/crf/0"


@pytest.fixture(scope="module")
def undisturbed_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("undisturbed"))
    run_smoke(workdir)
    return workdir


@pytest.fixture(scope="module")
def undisturbed(undisturbed_workdir: Path) -> dict[str, object]:
    return comparable_results(undisturbed_workdir)


def downstream_outputs(workdir: Path, output: Path) -> list[Path]:
    """``output`` and every output that depends on it: what a forced rerun of its job writes
    (the ``output:`` lines of Snakemake's dry run)."""
    dry = snakemake("--dry-run", *SMOKE, "--forcerun", str(output), cwd=workdir)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    prefix = "    output: "
    lines = (dry.stdout + dry.stderr).splitlines()
    outputs = [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]
    return [workdir / name for line in outputs for name in line.split(", ")]


@pytest.fixture(scope="module")
def recovered(tmp_path_factory: pytest.TempPathFactory, undisturbed_workdir: Path) -> Path:
    """A smoke run killed mid-training, then run again with the same command. It starts from a
    copy of the undisturbed run (Snakemake's records and times included) without ``RETRAINED``'s
    checkpoint and every output that depends on its training: what a run killed there leaves,
    in less time than a second run from scratch."""
    workdir = tmp_path_factory.mktemp("killed") / "work"
    shutil.copytree(undisturbed_workdir, workdir, symlinks=True)
    removed = downstream_outputs(workdir, RETRAINED / "train.json")
    assert workdir / RETRAINED / "train.json" in removed and workdir / RESULTS / "metrics.csv" in removed
    for path in [*removed, workdir / RETRAINED / "checkpoint.pt"]:
        shutil.rmtree(path) if path.is_dir() else path.unlink()  # the report's figures/ and tables/
    kill_mid_training(workdir)
    run_smoke(workdir)
    return workdir


def test_the_smoke_run_makes_every_report_and_leaves_nothing_to_do(undisturbed_workdir: Path) -> None:
    """The CI tier's end-to-end run of the pipeline (the recovery tests below are nightly)."""
    report = undisturbed_workdir / "reports/smoke"
    assert (report / "README.md").stat().st_size > 0 and (report / "claims.csv").stat().st_size > 0
    assert (undisturbed_workdir / RESULTS / "metrics.csv").stat().st_size > 0
    again = snakemake("--dry-run", *SMOKE, cwd=undisturbed_workdir)
    assert "Nothing to be done" in again.stdout, again.stdout[-3000:]


def test_a_parked_run_has_nothing_left_to_do_in_a_fresh_checkout(
    undisturbed_workdir: Path, tmp_path: Path
) -> None:
    """``crfbench park`` on one machine, ``unpark`` in a fresh checkout on another (its files all
    newer than the run's, as a clone's are): Snakemake finds every parked job up to date."""
    archive = tmp_path / "run.tar.gz"
    revision = "parked-revision"  # the workflow copies are no git checkouts: both sides name it
    park(undisturbed_workdir, archive, revision=revision)
    fresh = copy_workflow(tmp_path / "fresh")
    for path in fresh.rglob("*"):
        os.utime(path)  # a clone's files are as new as the clone
    unpark(archive, fresh, revision=revision)
    assert not list((fresh / RESULTS).rglob("checkpoint.pt"))
    again = snakemake("--dry-run", *SMOKE, cwd=fresh)
    assert "Nothing to be done" in again.stdout, again.stdout[-3000:]


def test_a_killed_run_resumes_with_a_plain_rerun_to_the_undisturbed_results(
    recovered: Path, undisturbed: dict[str, object]
) -> None:
    results = comparable_results(recovered)
    assert results.keys() == undisturbed.keys()
    assert any(name.endswith("model.pt") for name in results)
    for name, content in undisturbed.items():
        assert results[name] == content, name
    again = snakemake("--dry-run", *SMOKE, cwd=recovered)
    assert "Nothing to be done" in again.stdout, again.stdout[-3000:]


def test_a_changed_setting_retrains_exactly_the_runs_it_affects(recovered: Path) -> None:
    config_file = recovered / "config/smoke.yaml"
    config = yaml.safe_load(config_file.read_text())
    (synthetic,) = [e for e in config["experiments"] if e["name"] == "synthetic"]
    synthetic["settings"]["epochs"] += 1
    config_file.write_text(yaml.safe_dump(config))
    results = recovered / RESULTS
    runs = results / "runs"
    before = {path: path.stat().st_mtime_ns for path in results.rglob("*") if path.is_file()}

    run_smoke(recovered)

    written = {
        path.relative_to(results)
        for path, mtime in before.items()
        if not path.exists() or path.stat().st_mtime_ns != mtime
    }
    retrained = {path.relative_to("runs") for path in written if path.name == "model.pt"}
    assert retrained == {Path(f"synthetic/L0/{loss}/0/model.pt") for loss in synthetic["losses"]}
    # Nothing else of the other experiments ran again: only the synthetic runs, their timing, the
    # aggregates and the logs were written (the config file is re-dumped with its keys sorted).
    others = {
        path
        for path in written
        if path.parts[0] != "logs" and path.parts[:2] not in {("runs", "synthetic"), ("timing", "synthetic")}
    }
    assert all(len(path.parts) == 1 for path in others), sorted(others)
    for loss in synthetic["losses"]:
        summary = json.loads((runs / "synthetic/L0" / loss / "0/train.json").read_text())
        assert summary["epochs_done"] == synthetic["settings"]["epochs"], loss
    assert "Nothing to be done" in snakemake("--dry-run", *SMOKE, cwd=recovered).stdout
