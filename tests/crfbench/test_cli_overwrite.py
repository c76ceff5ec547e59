"""Nothing overwrites the committed reference run by accident: a command refuses, in one line naming
the file, to write over a file the git checkout tracks unless given --overwrite (issue 49)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from crfbench import cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def run(capsys, *argv: object) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``crfbench *argv`` run in-process."""
    try:
        code = cli.main([str(arg) for arg in argv])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout whose index holds results/data.json and reports/README.md (staged is tracked)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ("results/data.json", "reports/README.md"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("committed\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "results", "reports"], check=True)
    return tmp_path


def test_a_committed_output_file_is_refused_in_one_line_naming_it(capsys, checkout: Path) -> None:
    target = checkout / "results/data.json"
    code, _, err = run(capsys, "data", "synthetic", "--out", target)
    assert code == 2
    assert err.splitlines() == [
        f"crfbench data: error: {target}: a file of the committed reference run; "
        "pass --overwrite to write over it"
    ]
    assert target.read_text() == "committed\n"


def test_overwrite_writes_over_a_committed_file(capsys, checkout: Path) -> None:
    target = checkout / "results/data.json"
    code, _, err = run(capsys, "data", "synthetic", "--out", target, "--overwrite")
    assert code == 0, err
    assert json.loads(target.read_text())["name"] == "synthetic"


def test_an_untracked_output_in_the_checkout_needs_no_flag(capsys, checkout: Path) -> None:
    target = checkout / "results/other.json"
    code, _, err = run(capsys, "data", "synthetic", "--out", target)
    assert code == 0, err
    assert target.exists()


def test_an_output_folder_holding_committed_files_is_refused(capsys, checkout: Path) -> None:
    paper = checkout / "paper.csv"
    paper.write_text("table\n")
    code, _, err = run(capsys, "report", "--paper", paper, "--out", checkout / "reports")
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "reports/README.md" in err and "--overwrite" in err


def test_outside_any_checkout_nothing_is_refused(capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "data", "synthetic", "--out", tmp_path / "results/data.json")
    assert code == 0, err


@pytest.mark.parametrize(
    ("command", "default"),
    [("agree", "results/agreement/agreement.csv"), ("report", "reports"), ("scaling", "results/scaling.csv")],
)
def test_commands_writing_the_reference_by_default_say_so(capsys, command: str, default: str) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    text = " ".join(out.split())  # argparse wraps the help
    assert f"(default: {default}, committed)" in text
    assert "--overwrite" in text and "committed" in text.split("options:")[0]
