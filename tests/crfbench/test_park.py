"""Parking a pipeline run: what the archive holds and leaves out, modification times kept, and a
checkout at another commit or a file that is not a parked run refused in one line. (The smoke
pipeline's parked run resuming in a fresh checkout: tests/workflow/test_recovery.py.)"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from crfbench import cli
from crfbench.park import MANIFEST, park, read_manifest, unpark

REVISION = "0123456789abcdef0123456789abcdef01234567"
RUN_FILES = {
    # evaluated: its model and checkpoint are left out
    "results/runs/en/L0/bcrf/1/train.json": "{}",
    "results/runs/en/L0/bcrf/1/model.pt": "model",
    "results/runs/en/L0/bcrf/1/checkpoint.pt": "checkpoint",
    "results/runs/en/L0/bcrf/1/evaluation.csv": "a,b\n",
    # trained, not yet evaluated: its model is kept for the evaluation job
    "results/runs/en/L0/bcrf/2/train.json": "{}",
    "results/runs/en/L0/bcrf/2/model.pt": "model",
    # evaluated, but the sweep and timing jobs read it: kept
    "results/runs/en/L0/crf/0/model.pt": "model",
    "results/runs/en/L0/crf/0/evaluation.csv": "a,b\n",
    # cut off mid-training: nothing of it but its settings
    "results/runs/en/L0/crf/1/settings.json": "{}",
    "results/runs/en/L0/crf/1/checkpoint.pt": "checkpoint",
    "results/features/cache/model/split.pt": "features",
    "results/features/en/frozen.json": "{}",
    "results/metrics.csv": "a\n",
    "reports/README.md": "# report\n",
    ".snakemake/metadata/cmVzdWx0cw==": "{}",
    ".snakemake/locks/0.input.lock": "",
}
LEFT_OUT = {
    "results/runs/en/L0/bcrf/1/model.pt",
    "results/runs/en/L0/bcrf/1/checkpoint.pt",
    "results/runs/en/L0/crf/1/checkpoint.pt",
    "results/features/cache/model/split.pt",
    ".snakemake/locks/0.input.lock",
}


def make_run(root: Path) -> Path:
    for index, (name, text) in enumerate(sorted(RUN_FILES.items())):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, ns=(1_700_000_000_000_000_000 + index * 10**9,) * 2)
    return root


def test_a_parked_run_unpacks_with_its_files_and_their_times_and_leaves_the_rest(tmp_path: Path) -> None:
    source = make_run(tmp_path / "source")
    parked = park(source, tmp_path / "run.tar.gz", revision=REVISION)
    packed = set(RUN_FILES) - LEFT_OUT
    assert parked.files == len(packed) and read_manifest(tmp_path / "run.tar.gz")["revision"] == REVISION
    target = tmp_path / "target"
    target.mkdir()
    unparked = unpark(tmp_path / "run.tar.gz", target, revision=REVISION)
    assert unparked == parked
    found = {path.relative_to(target).as_posix() for path in target.rglob("*") if path.is_file()}
    assert found == packed
    for name in packed:
        assert (target / name).read_text() == RUN_FILES[name]
        assert (target / name).stat().st_mtime_ns == (source / name).stat().st_mtime_ns, name


def test_keep_patterns_choose_the_evaluated_models_to_pack(tmp_path: Path) -> None:
    source = make_run(tmp_path / "source")
    archive = tmp_path / "run.tar.gz"
    park(source, archive, keep=["results/runs/*/*/bcrf/*/model.pt"], revision=REVISION)
    with tarfile.open(archive) as tar:
        models = {name for name in tar.getnames() if name.endswith("model.pt")}
    assert models == {"results/runs/en/L0/bcrf/1/model.pt", "results/runs/en/L0/bcrf/2/model.pt"}


def test_unparking_refuses_another_commit_and_what_is_not_a_parked_run(tmp_path: Path) -> None:
    source = make_run(tmp_path / "source")
    archive = tmp_path / "run.tar.gz"
    park(source, archive, revision=REVISION)
    with pytest.raises(ValueError, match=f"parked at {REVISION}, but .* is at other: check out {REVISION}"):
        unpark(archive, tmp_path / "target", revision="other")
    assert not (tmp_path / "target").exists()  # refused before anything is written
    (tmp_path / "plain.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(ValueError, match=r"plain\.tar\.gz: not a parked run"):
        unpark(tmp_path / "plain.tar.gz", tmp_path, revision=REVISION)
    with pytest.raises(ValueError, match=r"missing\.tar\.gz: not a parked run"):
        read_manifest(tmp_path / "missing.tar.gz")


def test_a_member_outside_the_parked_folders_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        manifest = b'{"revision": "%s"}' % REVISION.encode()
        for name, data in ((MANIFEST, manifest), ("config/config.yaml", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match=r"'config/config\.yaml' is not a file of a parked run"):
        unpark(archive, tmp_path, revision=REVISION)
    assert not (tmp_path / "config").exists()


def test_parking_refuses_uncommitted_code_in_one_line(tmp_path: Path, capsys) -> None:
    with pytest.raises(ValueError, match=r"not a clean git checkout \(abc\+dirty\): commit before parking"):
        park(make_run(tmp_path / "source"), tmp_path / "run.tar.gz", revision="abc+dirty")
    assert not (tmp_path / "run.tar.gz").exists()
    assert cli.main(["unpark", str(tmp_path / "missing.tar.gz"), "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("crfbench unpark: error: ")


def test_files_the_commit_holds_unchanged_are_left_out_and_get_back_their_times(tmp_path: Path) -> None:
    """A checkout of the commit has them already, newer than the run's outputs: unpark gives them
    the run's times and deletes the committed files the run deleted; a rewritten one is packed."""
    root = make_run(tmp_path / "source")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    committed = ["results/metrics.csv", "reports/README.md", "results/features/en/frozen.json"]
    subprocess.run([*git, "-C", str(root), "init", "-q"], check=True)
    subprocess.run([*git, "-C", str(root), "add", *committed], check=True)
    subprocess.run([*git, "-C", str(root), "commit", "-qm", "committed run"], check=True)
    (root / "results/metrics.csv").write_text("a\n1\n")  # remade by the run
    (root / "results/features/en/frozen.json").unlink()  # its job was cut off
    archive = tmp_path / "run.tar.gz"
    park(root, archive, revision=REVISION)
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert "results/metrics.csv" in names and "results/runs/en/L0/bcrf/1/train.json" in names
    assert "reports/README.md" not in names
    target = tmp_path / "clone"
    subprocess.run([*git, "clone", "-q", str(root), str(target)], check=True)
    assert (target / "results/features/en/frozen.json").exists()
    unpark(archive, target, revision=REVISION)
    assert not (target / "results/features/en/frozen.json").exists()
    for name in ("reports/README.md", "results/metrics.csv"):  # to the microsecond, as tar keeps it
        assert (target / name).stat().st_mtime_ns // 1000 == (root / name).stat().st_mtime_ns // 1000, name
    assert (target / "results/metrics.csv").read_text() == "a\n1\n"
