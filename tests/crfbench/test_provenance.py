"""Results name the commit that made them: a command that writes results refuses a git checkout
with uncommitted changes (naming them) unless ``--allow-dirty``, and then records ``+dirty``. Each
check runs on a scratch git repository, not on the checkout the tests run from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from crfbench import cli, environment
from crfbench.cli_args import ALLOW_DIRTY_VARIABLE


def git(root: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed checkout with code, a tracked results table and a tracked report page."""
    root = tmp_path / "checkout"
    for path in ("crfbench/train.py", "results/metrics.csv", "reports/README.md", "README.md"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("committed\n")
    git(root.parent, "init", "-q", str(root))
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    return root


def test_a_clean_checkout_passes_and_records_its_bare_commit(repo: Path) -> None:
    environment.check_committed(repo)
    assert environment.revision(repo) == git(repo, "rev-parse", "HEAD").strip()


def test_the_pipelines_own_outputs_and_untracked_files_leave_it_clean(repo: Path) -> None:
    (repo / "results/metrics.csv").write_text("rewritten by the pipeline\n")
    (repo / "reports/README.md").write_text("re-rendered\n")
    (repo / "results/runs").mkdir()
    (repo / "results/runs/train.json").write_text("{}\n")
    (repo / "scratch.txt").write_text("untracked\n")
    assert environment.changed_files(repo) == []
    environment.check_committed(repo)
    assert not environment.revision(repo).endswith("+dirty")


def test_changed_code_is_refused_naming_the_first_files(repo: Path) -> None:
    (repo / "crfbench/train.py").write_text("changed\n")
    (repo / "README.md").write_text("changed\n")
    with pytest.raises(ValueError, match=r"uncommitted changes \(README.md, crfbench/train.py\)"):
        environment.check_committed(repo)
    assert environment.revision(repo).endswith("+dirty")
    git(repo, "add", "README.md")  # staged changes count too
    (repo / "crfbench/train.py").write_text("committed\n")
    assert environment.changed_files(repo) == ["README.md"]
    for index in range(environment.NAMED_CHANGES + 2):
        (repo / f"module{index}.py").write_text("new\n")
    git(repo, "add", "-A")
    with pytest.raises(ValueError) as refused:
        environment.check_committed(repo)
    assert str(refused.value).count(".py") == environment.NAMED_CHANGES - 1  # README.md is named first
    assert "and 3 more" in str(refused.value) and "\n" not in str(refused.value)


def test_outside_a_git_checkout_results_are_refused(tmp_path: Path) -> None:
    assert environment.changed_files(tmp_path) is None and environment.revision(tmp_path) is None
    with pytest.raises(ValueError, match="not a git checkout"):
        environment.check_committed(tmp_path)


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as stop:
        code = int(stop.code or 0)
    return code, capsys.readouterr().err


def test_the_command_line_refuses_a_dirty_checkout_unless_allowed(repo, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(environment, "SOURCE_ROOT", repo)
    monkeypatch.delenv(ALLOW_DIRTY_VARIABLE, raising=False)
    (repo / "crfbench/train.py").write_text("changed\n")
    run_dir = tmp_path / "run"
    # A setting the engine refuses: a command that gets past the check fails on it instead.
    train = ["train", "--set", "dataset=synthetic", "--set", "epochz=1", "--run-dir", str(run_dir)]
    code, err = _run(capsys, train)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("crfbench train: error: the checkout") and "crfbench/train.py" in err
    assert "--allow-dirty" in err and not run_dir.exists()
    for allowed in ([*train, "--allow-dirty"], ["--allow-dirty", *train]):
        code, err = _run(capsys, allowed)
        assert code == 2 and "epochz" in err and "uncommitted" not in err, err
    monkeypatch.setenv(ALLOW_DIRTY_VARIABLE, "1")  # as the pipeline's allow_dirty sets it
    code, err = _run(capsys, train)
    assert "epochz" in err and "uncommitted" not in err, err
    monkeypatch.delenv(ALLOW_DIRTY_VARIABLE)
    for argv in (["sweep", "--run-dir", str(tmp_path)], ["bethe", "cgm", "--out", str(tmp_path / "c.csv")]):
        code, err = _run(capsys, argv)
        assert code == 2 and "uncommitted changes" in err, (argv, err)
    # Commands that only gather or render results are never refused.
    code, err = _run(capsys, ["aggregate", str(repo / "README.md"), "--out", str(tmp_path / "a.csv")])
    assert "uncommitted" not in err and "README.md" in err, err
