"""benchmarks/gpu_session.sh rehearsed on the CPU (``GPU_SESSION_DRY_RUN=1``): a lent GPU's few
minutes must not be the first time the script runs on the current code. The rehearsal runs its
timing and asv stages in a scratch clone of this tree and must bring back, in results.tar, a
timing table with eager and compiled rows of the baselines and an asv result file of the commit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from .pipeline import ROOT, environment

MACHINE = "cpu-dry-run"


def _clone(target: Path) -> str:
    """A clone of this repository at HEAD with the working tree's changed and new files on top (the
    script needs a git checkout: asv reads the commit); returns the commit."""
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(target)], check=True)
    # asv benchmarks the branch asv.conf.json names: main, whatever this checkout's branch is
    subprocess.run(["git", "checkout", "-q", "-B", "main"], cwd=target, check=True)
    changed = subprocess.run(
        ["git", "ls-files", "-m", "-o", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    for name in changed:
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=target, capture_output=True, text=True, check=True
    ).stdout.strip()


def _as_on_the_device(repository: Path) -> None:
    """The checkout as the device tool carries it: the files without .git, and the commit's .git
    in .gpu/git as benchmarks/gpu_prepare.sh makes it (a shallow clone with no checkout, whose
    empty index git reads as every file deleted until the session resets it)."""
    clone = repository.parent / "prepared"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", "--no-checkout", f"file://{repository}", str(clone)],
        check=True,
    )
    (repository / ".gpu").mkdir()
    shutil.move(clone / ".git", repository / ".gpu" / "git")
    shutil.rmtree(repository / ".git")


@pytest.mark.slow
def test_the_gpu_session_runs_end_to_end_on_a_cpu(tmp_path: Path) -> None:
    repository, out = tmp_path / "repo", tmp_path / "out"
    commit = _clone(repository)
    uncommitted = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=repository,
        capture_output=True,
        text=True,
    ).stdout.strip()
    _as_on_the_device(repository)
    bin_dir = str(Path(sys.executable).parent)  # python3 and asv of this environment
    env = environment() | {
        "GPU_SESSION_DRY_RUN": "1",
        "OUT": str(out),
        "STAGES": "timing asv",
        "HOME": str(tmp_path / "home"),  # asv writes its machine file there
        "PATH": bin_dir + os.pathsep + os.environ["PATH"],
    }
    done = subprocess.run(
        ["bash", "benchmarks/gpu_session.sh", MACHINE, "600", commit],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with tarfile.open(out / "results.tar") as tar:
        tar.extractall(tmp_path / "back", filter="data")
    back = tmp_path / "back" / "results"

    timing = pd.read_csv(back / "gpu" / MACHINE / "timing" / "synthetic" / "L0" / "timing.csv")
    timed = set(zip(timing["name"], timing["mode"], strict=True))
    assert {("crf", "eager"), ("crf", "compiled"), ("viterbi-scan", "compiled")} <= timed
    assert ("pytorch-crf", "eager") in timed and ("pytorch-crf", "compiled") not in timed  # eager only
    assert (timing["seconds"] > 0).all() and set(timing["device"]) == {"cpu"}
    if not uncommitted:  # the prepared .git makes a clean checkout, as the real session's timing needs
        assert set(timing["revision"]) == {commit}, done.stdout[-3000:]
    warmed = (out / "timing-synthetic.log").read_text()
    assert warmed.count("warm-up: torch compiled train crf:") == 1, warmed  # where the time goes

    results = [path for path in (back / "asv" / MACHINE).glob("*.json") if path.name != "machine.json"]
    assert [path.name[:8] for path in results] == [commit[:8]], done.stdout[-3000:]
    assert re.fullmatch(r"[0-9a-f]{8}-py3\.\d+\.json", results[0].name)  # crfbench.asv_history's name
    measured = json.loads(results[0].read_text())["results"]
    assert {"bench_crossover.Crossover.time_crossover", "bench_inference.Marginals.time_marginals"} <= set(
        measured
    ), sorted(measured)
    assert all(value is not None for value in measured.values())
