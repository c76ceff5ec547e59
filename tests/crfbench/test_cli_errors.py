"""User errors on the command line (issue 11): one line on stderr naming the argument or the file
(and line), exit status 2, no traceback, and nothing written. Every file here is made up."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pandas as pd
import pytest
import torch

from crfbench import cli
from crfbench.config import RunConfig, load_config
from crfbench.data import registry
from crfbench.evaluate import evaluate
from crfbench.io import CorruptFileError, write_json
from crfbench.models import ScorerConfig
from crfbench.schema import CHECKPOINT_FILE, EVALUATION_FILE, MODEL_FILE
from crfbench.train import train

from .data.corpora import CONLL03, EWT, DataDirFixture, conllu, sentence, ud_sentences
from .report.fixtures import write_paper

TINY_DATA = {"labels": 2, "train": 8, "dev": 4, "test": 4, "max_length": 4, "vocab": 10}
TINY = {
    "dataset": "synthetic",
    "dataset_options": TINY_DATA,
    "scorer": {"dim": 8, "heads": 2, "feedforward": 8, "mlp_hidden": 8},
    "epochs": 2,
    "batch_size": 4,
}


def run(capsys, *argv: object) -> tuple[int, str]:
    """Exit status and stderr of ``crfbench *argv`` run in-process (argparse errors exit); with
    ``--allow-dirty``, as the tests run from a checkout that may have uncommitted changes (the
    refusal of one: tests/crfbench/test_provenance.py)."""
    try:
        code = cli.main(["--allow-dirty", *(str(arg) for arg in argv)])
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


def assert_user_error(capsys, argv: list[object], *named: str, unwritten: tuple[Path, ...] = ()) -> str:
    """The command fails with exit 2 and one stderr line containing ``named``; ``unwritten`` stay absent."""
    code, err = run(capsys, *argv)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"crfbench {argv[0]}: error: "), lines[0]
    for text in named:
        assert str(text) in lines[0], (text, lines[0])
    for path in unwritten:
        assert not path.exists(), path
    return lines[0]


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A tiny finished run (2 epochs on 8 sentences), made once; tests copy it before damaging it."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    train(RunConfig.from_dict(TINY), run_dir, progress=False)
    return run_dir


def copy_run(trained: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "run"))


def truncate(path: Path, keep: float) -> None:
    content = path.read_bytes()
    path.write_bytes(content[: int(len(content) * keep)])


def test_the_parser_answers_without_importing_torch_or_the_studies() -> None:
    """``crfbench --help`` and a mistyped argument answer in a fraction of a second: building the
    parser imports no torch, pandas or SciPy (a job's own imports follow its arguments)."""
    probe = (
        "import sys, crfbench.cli; crfbench.cli.parser(); "
        "print(sorted({'torch', 'pandas', 'scipy'} & set(sys.modules)))"
    )
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout


# -- run settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "named"),
    [
        ("device=nope", "device: 'nope'"),
        ("seed=1.5", "seed: must be an integer, got 1.5"),
        ("seed=abc", "seed: must be an integer, got 'abc'"),
        ("learning_rate=.inf", "learning_rate: must be a finite number"),
        ("learning_rate=.nan", "learning_rate: must be a finite number"),
        ("learning_rate=fast", "learning_rate: must be a finite number or null, got 'fast'"),
        ("epochs=true", "epochs: must be an integer, got True"),
        ("batch_size=0", "batch_size: must be a positive integer"),
        ("threads=2.0", "threads: must be an integer or null"),
        ("scorer.dropout=high", "ScorerConfig.dropout must be a finite number"),
        ("scorer.char_cnn=1", "ScorerConfig.char_cnn must be true or false"),
        ("scorer=3", "scorer: must be a mapping"),
        ("dataset_options=[1]", "dataset_options: must be a mapping"),
    ],
)
def test_a_bad_setting_is_refused_before_the_run_directory_exists(
    capsys, tmp_path, settings, assignment, named
):
    run_dir = tmp_path / "run"
    argv = ["train", "--config", settings, "--set", assignment, "--run-dir", run_dir, "--no-progress"]
    line = assert_user_error(capsys, argv, named, unwritten=(run_dir,))
    assert line.startswith(
        "crfbench train: error: --set: "
    )  # the file alone is fine: the override is at fault


def test_a_bad_setting_in_the_file_names_the_file(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset: synthetic\nlr_factor: lots\n")
    run_dir = tmp_path / "run"
    argv = ["train", "--config", path, "--run-dir", run_dir]
    assert_user_error(capsys, argv, f"{path}: lr_factor: must be a finite number", unwritten=(run_dir,))


def test_cuda_on_a_machine_without_it_is_refused_before_anything_is_written(
    capsys, tmp_path, settings, monkeypatch
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run_dir = tmp_path / "run"
    argv = ["train", "--config", settings, "--set", "device=cuda", "--run-dir", run_dir]
    assert_user_error(capsys, argv, "device: 'cuda' is not available", unwritten=(run_dir,))
    argv = ["time", "--config", settings, "--set", "device=cuda:0", "--run-dir", run_dir]
    assert_user_error(capsys, argv, "device: 'cuda:0' is not available", unwritten=(run_dir,))


def test_settings_for_a_gpu_can_still_be_checked_without_one(monkeypatch) -> None:
    """The pipeline checks every run's settings at parse time, on any machine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert RunConfig.from_dict(TINY | {"device": "cuda:1"}).device == "cuda:1"


def test_a_yaml_number_without_a_dot_is_the_number_the_user_meant(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("dataset: synthetic\nlearning_rate: 1e-3\nscorer: {dropout: 2e-1}\n")  # YAML 1.1: strings
    config = load_config(path, ["grad_clip=1e+1"])
    assert (config.learning_rate, config.scorer.dropout, config.grad_clip) == (1e-3, 0.2, 10.0)
    assert all(isinstance(value, float) for value in (config.learning_rate, config.scorer.dropout))
    assert RunConfig.from_dict(config.to_dict()) == config


def _fields(cls) -> list[tuple[str, object]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]


def _build(cls, name: str, value: object):
    if cls is ScorerConfig:
        return ScorerConfig.from_dict({name: value})
    return RunConfig.from_dict({"dataset": "synthetic", name: value})


@pytest.mark.parametrize("cls", [RunConfig, ScorerConfig])
def test_every_field_is_type_checked(cls) -> None:
    """Generic over the fields: a float field takes a numeric string, anything else of the wrong
    type is refused naming the field (a bool is no number, a number no bool, a string no integer)."""
    wrong = {
        int: ["2", 1.5, True],
        float: ["soon", True, float("inf")],
        bool: [1, "yes"],
        str: [3, None] if cls is ScorerConfig else [3],
    }
    for name, hint in _fields(cls):
        base = (
            typing.get_args(hint)[0] if typing.get_origin(hint) in (typing.Union, type(int | None)) else hint
        )
        if base is float:
            assert getattr(_build(cls, name, "1e-1"), name) == 0.1, name
        for value in wrong.get(base, []):
            if value is None and base is not hint:  # an optional field (feature_cache) takes None
                continue
            with pytest.raises(ValueError, match=rf"\b{name}\b"):
                _build(cls, name, value)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["bethe", "ocr", "--fold", "0", "--set", "max_train_words=many"], "max_train_words"),
        (["bethe", "citation", "--set", "epochs=3"], "['epochs']"),
        (["bethe", "citation", "--set", "caps"], "expected key=value"),
        (["newton", "train", "--set", "train_sentences=many"], "train_sentences"),
        (["newton", "train", "--set", "solvers=[tron, newton]"], "solvers: unknown ['newton']"),
        (["newton", "train", "--set", "backend=numpy"], "backend: expected torch or jax"),
    ],
)
def test_a_bad_experiment_setting_is_refused_before_anything_is_read(capsys, tmp_path, argv, named):
    """``--set`` overrides of an experiment's Settings are checked first: one line naming the
    setting, no output folder's content (the data dir does not even exist)."""
    out = tmp_path / "out"
    line = assert_user_error(capsys, [*argv, "--data-dir", tmp_path / "none", "--out-dir", out], named)
    assert "--set" in line and not any(out.glob("*"))


# -- paths given as arguments ------------------------------------------------------------------------------


def test_a_directory_as_config_is_refused(capsys, tmp_path):
    run_dir = tmp_path / "run"
    argv = ["train", "--config", tmp_path, "--run-dir", run_dir]
    assert_user_error(capsys, argv, "--config", str(tmp_path), "is a directory", unwritten=(run_dir,))


def test_a_missing_config_is_refused(capsys, tmp_path):
    argv = ["train", "--config", tmp_path / "nope.yaml", "--run-dir", tmp_path / "run"]
    assert_user_error(capsys, argv, "--config", "nope.yaml", unwritten=(tmp_path / "run",))


@pytest.mark.parametrize("command", ["train", "time"])
def test_a_file_as_run_directory_is_refused(capsys, tmp_path, settings, command):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    argv = [command, "--config", settings, "--run-dir", not_a_dir]
    assert_user_error(capsys, argv, "--run-dir", str(not_a_dir), "not a directory")
    assert not_a_dir.read_text() == "x"
    below = not_a_dir / "run"
    assert_user_error(
        capsys, [command, "--config", settings, "--run-dir", below], "--run-dir", str(not_a_dir)
    )


def test_an_output_under_a_file_is_refused(capsys, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    out = not_a_dir / "x.json"
    assert_user_error(capsys, ["data", "synthetic", "--out", out], "--out", str(not_a_dir), "not a directory")
    assert_user_error(capsys, ["data", "synthetic", "--out", tmp_path], "--out", "is a directory")


def test_the_atomic_writers_name_a_path_they_cannot_write(tmp_path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(NotADirectoryError, match=f"{not_a_dir} is not a directory"):
        write_json(not_a_dir / "deeper" / "x.json", {})
    with pytest.raises(IsADirectoryError, match="is a directory"):
        write_json(tmp_path, {})
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file"]  # no temporary file left


def test_a_file_as_data_dir_is_named(capsys, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    out = tmp_path / "facts.json"
    argv = ["data", "ud-pos-en", "--data-dir", not_a_dir, "--out", out]
    assert_user_error(capsys, argv, f"{not_a_dir}: the data dir is a file", unwritten=(out,))


def test_an_evaluate_run_directory_must_exist(capsys, tmp_path):
    assert_user_error(capsys, ["evaluate", "--run-dir", tmp_path / "nope"], "--run-dir", "nope")


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "--batch-size", "0"],
        ["evaluate", "--batch-size", "-2"],
        ["train", "--stop-after", "0"],
        ["time", "--batches", "0"],
        ["time", "--rounds", "-1"],
        ["time", "--warmup", "-1"],
        ["time", "--batches", "two"],
    ],
)
def test_a_non_positive_size_option_is_refused(capsys, tmp_path, settings, argv):
    run_dir = tmp_path / "run"
    if argv[0] == "evaluate":
        run_dir.mkdir()
        rest = ["--run-dir", run_dir]
    else:
        rest = ["--config", settings, "--run-dir", run_dir]
    line = assert_user_error(capsys, [*argv, *rest], argv[1], repr(argv[2]))
    assert "must be" in line
    assert not (run_dir / EVALUATION_FILE).exists() and not (run_dir / "config.json").exists()


def test_evaluate_refuses_a_non_positive_batch_size_as_a_function_too(trained) -> None:
    with pytest.raises(ValueError, match="batch_size: must be a positive integer"):
        evaluate(trained, batch_size=0, progress=False)


def test_argparse_errors_are_one_line_too(capsys, tmp_path, settings):
    assert_user_error(capsys, ["evaluate", "--run-dir", tmp_path, "--decoders", "nope"], "--decoders", "nope")
    assert_user_error(capsys, ["train", "--config", settings], "--run-dir")


# -- damaged files -------------------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [0.0, 0.01, 0.5, 0.99])
def test_evaluate_names_a_truncated_model(capsys, tmp_path, trained, keep):
    run_dir = copy_run(trained, tmp_path)
    truncate(run_dir / MODEL_FILE, keep)
    argv = ["evaluate", "--run-dir", run_dir, "--no-progress"]
    assert_user_error(
        capsys, argv, f"{run_dir / MODEL_FILE}: truncated or corrupt", unwritten=(run_dir / EVALUATION_FILE,)
    )


def test_evaluate_names_a_model_file_that_is_no_model(capsys, tmp_path, trained):
    run_dir = copy_run(trained, tmp_path)
    torch.save({"epoch": 1}, run_dir / MODEL_FILE)
    argv = ["evaluate", "--run-dir", run_dir, "--no-progress"]
    assert_user_error(
        capsys, argv, str(run_dir / MODEL_FILE), "missing field(s)", unwritten=(run_dir / EVALUATION_FILE,)
    )


def test_evaluate_still_works_on_the_intact_run(capsys, tmp_path, trained):
    run_dir = copy_run(trained, tmp_path)
    code, err = run(
        capsys,
        "evaluate",
        "--run-dir",
        run_dir,
        "--decoders",
        "viterbi",
        "--batch-size",
        "2",
        "--no-progress",
    )
    assert code == 0, err
    assert (run_dir / EVALUATION_FILE).exists()


def test_resuming_names_a_truncated_checkpoint(capsys, tmp_path, settings):
    run_dir = tmp_path / "run"
    assert (
        run(
            capsys, "train", "--config", settings, "--run-dir", run_dir, "--stop-after", "1", "--no-progress"
        )[0]
        == 0
    )
    truncate(run_dir / CHECKPOINT_FILE, 0.5)
    argv = ["train", "--config", settings, "--run-dir", run_dir, "--no-progress"]
    assert_user_error(capsys, argv, f"{run_dir / CHECKPOINT_FILE}: truncated or corrupt")


# -- aggregate ---------------------------------------------------------------------------------------------


@pytest.fixture
def evaluation_csv(trained, tmp_path) -> Path:
    """A whole evaluation.csv of the tiny run (evaluated once per test: a second or so)."""
    run_dir = copy_run(trained, tmp_path)
    evaluate(run_dir, decoders=["viterbi", "meanfield-5"], splits=["dev"], progress=False)
    return run_dir / EVALUATION_FILE


def test_aggregate_accepts_whole_files(capsys, tmp_path, evaluation_csv):
    out = tmp_path / "metrics.csv"
    code, err = run(capsys, "aggregate", evaluation_csv, evaluation_csv, "--out", out)
    assert code == 0, err
    assert len(pd.read_csv(out)) == 2 * len(pd.read_csv(evaluation_csv))


def test_aggregate_gathers_dev_curves_and_compressed_sentence_counts(capsys, tmp_path, evaluation_csv):
    run_dir = evaluation_csv.parent
    evaluate(run_dir, decoders=["viterbi"], splits=["test"], progress=False)  # counts are of the test set
    code, err = run(capsys, "aggregate", run_dir / "train.json", "--out", tmp_path / "curves.csv")
    assert code == 0, err
    curves = pd.read_csv(tmp_path / "curves.csv")
    assert len(curves) == json.loads((run_dir / "train.json").read_text())["epochs_done"]
    code, err = run(capsys, "aggregate", run_dir / "sentences.csv", "--out", tmp_path / "s.csv.gz")
    assert code == 0, err
    assert pd.read_csv(tmp_path / "s.csv.gz").equals(pd.read_csv(run_dir / "sentences.csv"))


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda text: text[: len(text) // 2].rstrip("\n"), "the last line has no line end"),  # cut mid-line
        (lambda text: text[:-3], "the last line has no line end"),  # cut inside the last value
        (lambda text: text.split("\n")[0] + "\n", "no data rows"),  # only the header left
        (lambda text: "", "empty file"),
        (lambda text: "\n".join(text.split("\n")[:3]) + "\nsynthetic,1,2\n", ":4: expected"),  # a short row
        (lambda text: text.replace(",value\n", ",worth\n", 1), "lacks column(s) value"),
        (lambda text: text.rstrip("\n").rsplit(",", 1)[0] + ",oops\n", "column value must be a number"),
        (lambda text: text.split('"')[0] + '"{never closed\n', "not valid CSV"),  # an open quote
    ],
)
def test_aggregate_names_a_damaged_file_and_writes_nothing(capsys, tmp_path, evaluation_csv, damage, named):
    damaged = tmp_path / "damaged.csv"
    damaged.write_text(damage(evaluation_csv.read_text()))
    out = tmp_path / "metrics.csv"
    assert_user_error(
        capsys, ["aggregate", evaluation_csv, damaged, "--out", out], str(damaged), named, unwritten=(out,)
    )


def test_aggregate_refuses_a_missing_input(capsys, tmp_path, evaluation_csv):
    out = tmp_path / "metrics.csv"
    argv = ["aggregate", evaluation_csv, tmp_path / "nope.csv", "--out", out]
    assert_user_error(capsys, argv, "nope.csv", "no such file", unwritten=(out,))


# -- report ----------------------------------------------------------------------------------------------


def test_report_refuses_a_missing_paper(capsys, tmp_path):
    out = tmp_path / "reports"
    argv = ["report", "--results", tmp_path, "--paper", tmp_path / "bcrf_tables.csv", "--out", out]
    assert_user_error(capsys, argv, "--paper", "bcrf_tables.csv", unwritten=(out,))


def test_report_names_notes_that_are_not_json(capsys, tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text('{"notes": {"all": ["x"]}\n')
    out = tmp_path / "reports"
    argv = ["report", "--results", tmp_path, "--paper", write_paper(tmp_path / "paper.csv"), "--notes", notes]
    assert_user_error(capsys, [*argv, "--out", out], f"{notes}:", "not valid JSON", unwritten=(out,))
    write_json(notes, {"notes": ["not", "a", "mapping"]})
    assert_user_error(capsys, [*argv, "--out", out], str(notes), unwritten=(out,))


def test_report_names_a_truncated_results_table_and_writes_nothing(capsys, tmp_path, evaluation_csv):
    results = tmp_path / "results"
    results.mkdir()
    truncate_to = evaluation_csv.read_text()
    (results / "metrics.csv").write_text(truncate_to[: len(truncate_to) * 2 // 3])
    out = tmp_path / "reports"
    argv = ["report", "--results", results, "--paper", write_paper(tmp_path / "paper.csv"), "--out", out]
    assert_user_error(capsys, argv, str(results / "metrics.csv"), unwritten=(out,))


# -- corpus files --------------------------------------------------------------------------------------------


@pytest.fixture
def manifest(monkeypatch, tmp_path) -> DataDirFixture:
    """A made-up data dir whose checksum manifest the command line uses."""
    fixture = DataDirFixture(tmp_path)
    monkeypatch.setitem(registry.load.__kwdefaults__, "checksums_path", fixture.manifest)
    return fixture


def test_an_empty_dev_file_is_named(capsys, tmp_path, manifest):
    manifest.add(EWT.format("train"), ud_sentences(3))
    dev = manifest.add(EWT.format("dev"), "")
    manifest.add(EWT.format("test"), ud_sentences(2))
    out = tmp_path / "facts.json"
    argv = ["data", "ud-pos-en", "--data-dir", manifest.root, "--out", out]
    assert_user_error(capsys, argv, f"{dev}: no sentences", unwritten=(out,))


def test_an_empty_conll03_file_is_named(capsys, tmp_path, manifest):
    manifest.add(CONLL03["train"], "Zorp NNP B-NP I-PER\n")
    manifest.add(CONLL03["dev"], "Zorp NNP B-NP I-PER\n")
    test = manifest.add(CONLL03["test"], "-DOCSTART- -X- -X- O\n\n")
    out = tmp_path / "facts.json"
    argv = ["data", "conll03-ner", "--data-dir", manifest.root, "--out", out]
    assert_user_error(capsys, argv, f"{test}: no sentences", unwritten=(out,))


def test_an_empty_synthetic_training_split_is_refused(capsys, tmp_path, settings):
    run_dir = tmp_path / "run"
    argv = ["train", "--config", settings, "--set", "dataset_options.train=0", "--run-dir", run_dir]
    assert_user_error(capsys, [*argv, "--no-progress"], "train", unwritten=(run_dir,))


def test_a_byte_order_mark_is_accepted(capsys, tmp_path, manifest):
    bom = "\ufeff"
    manifest.add(EWT.format("train"), bom + ud_sentences(3))
    manifest.add(EWT.format("dev"), bom + conllu(sentence(("zib", "NOUN"))))
    manifest.add(EWT.format("test"), ud_sentences(2))
    out = tmp_path / "facts.json"
    code, err = run(capsys, "data", "ud-pos-en", "--data-dir", manifest.root, "--out", out)
    assert code == 0, err
    assert json.loads(out.read_text())["sentences"] == {"train": 3, "dev": 1, "test": 2}
    for split in ("train", "dev", "test"):
        manifest.add(CONLL03[split], bom + "-DOCSTART- -X- -X- O\n\nZorp NNP B-NP I-PER\n")
    dataset = manifest.load("conll03-ner")
    assert [s.tokens for s in dataset.train] == [("Zorp",)]


# -- the mechanism -------------------------------------------------------------------------------------------


def test_a_bug_keeps_its_traceback(monkeypatch, tmp_path, settings):
    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr("crfbench.train.train", broken)
    with pytest.raises(KeyError, match="a bug"):
        cli.main(["train", "--allow-dirty", "--config", str(settings), "--run-dir", str(tmp_path / "run")])


def test_a_multi_line_user_error_is_printed_on_one_line(monkeypatch, capsys, tmp_path, settings):
    def refused(*args, **kwargs):
        raise CorruptFileError("first\nsecond")

    monkeypatch.setattr("crfbench.train.train", refused)
    line = assert_user_error(
        capsys, ["train", "--config", settings, "--run-dir", tmp_path / "run"], "first; second"
    )
    assert line.endswith("first; second")
