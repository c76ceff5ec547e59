"""Training and evaluating a tiny parser end to end, the learning-rate choice, and the command
line's one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from crfbench import cli
from crfbench.data import ud
from crfbench.data.location import DataDir
from crfbench.parsing import treebank
from crfbench.parsing.evaluate import evaluate
from crfbench.parsing.model import ParserConfig
from crfbench.parsing.run import ParseConfig
from crfbench.parsing.train import choose_run, train
from crfbench.schema import (
    CONFIG_FILE,
    EVALUATION_FILE,
    METRICS_COLUMNS,
    MODEL_FILE,
    SENTENCES_FILE,
    SUMMARY_FILE,
)

SMALL = ParserConfig(word_dim=32, upos_dim=8, lstm_dim=32, mlp_dim=32)


@pytest.fixture(scope="module")
def ewt_dev() -> treebank.ParseData:
    """30 training, 20 dev and 20 test sentences, all from English-EWT's dev file."""
    root = os.environ.get("CRFBENCH_DATA", "")
    source = DataDir(Path(root)).read(ud.TREEBANKS["en"].file("dev")) if root else None
    if source is None:
        pytest.skip("English-EWT's dev file is not in $CRFBENCH_DATA")
    parses = tuple(treebank.read_parses(source)[:70])
    return treebank.ParseData("en", parses[:30], parses[30:50], parses[50:], "standard", {})


def test_tiny_crf_run_trains_and_evaluates(ewt_dev, tmp_path):
    config = ParseConfig("en", "crf", epochs=2, batch_size=10, learning_rate=8e-3, parser=SMALL)
    lines: list[str] = []
    summary = train(config, tmp_path, data=ewt_dev, log=lines.append)
    assert [entry["epoch"] for entry in summary["history"]] == [0, 1, 2]
    assert [line.split(":")[0] for line in lines] == ["epoch 0", "epoch 1", "epoch 2"]
    assert "dev UAS" in lines[1] and lines[1].endswith(" s")
    curve = [entry["dev_uas"] for entry in summary["history"]]
    assert summary["best_dev_uas"] == max(curve) > curve[0]  # learning helps, even this little
    for name in (CONFIG_FILE, MODEL_FILE, SUMMARY_FILE):
        assert (tmp_path / name).exists()
    recorded = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert recorded["config"]["loss"] == "crf" and recorded["dataset"]["proxy"] is False

    table = evaluate(tmp_path, data=ewt_dev)
    assert set(METRICS_COLUMNS) <= set(table.columns)
    assert set(zip(table.split, table.metric, strict=True)) == {
        (split, metric) for split in ("dev", "test") for metric in ("uas", "uas_no_punct")
    }
    assert table.value.between(0, 1).all() and (table.decoder == "chu-liu-edmonds").all()
    dev = table[(table.split == "dev") & (table.metric == "uas")].value.item()
    assert dev == pytest.approx(summary["best_dev_uas"])  # the saved model is the selected one
    sentences = pd.read_csv(tmp_path / SENTENCES_FILE)
    test_uas = table[(table.split == "test") & (table.metric == "uas")].value.item()
    assert len(sentences) == 20 and sentences.correct.sum() / sentences.tokens.sum() == pytest.approx(
        test_uas
    )
    assert (tmp_path / EVALUATION_FILE).exists()

    with pytest.raises(ValueError, match="made with different settings"):
        train(ParseConfig("en", "ssvm", epochs=1, parser=SMALL), tmp_path, data=ewt_dev)


def test_every_epoch_logs_one_line_to_stderr_and_no_bar_off_a_terminal(ewt_dev, tmp_path, capsys):
    config = ParseConfig("en", "ssvm", epochs=2, batch_size=10, max_train_sentences=10, parser=SMALL)
    summary = train(config, tmp_path, data=ewt_dev)  # the default log: stderr, the pipeline's log
    captured = capsys.readouterr()
    assert captured.out == "" and "\r" not in captured.err
    lines = captured.err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 0", "epoch 1", "epoch 2"]
    assert all("lr 0.002" in line and line.endswith(" s") for line in lines), lines
    assert [entry["learning_rate"] for entry in summary["history"]] == [2e-3] * 3


def test_same_seed_same_run(ewt_dev, tmp_path):
    config = ParseConfig("en", "ssvm", epochs=1, batch_size=10, max_train_sentences=10, parser=SMALL)
    first = train(config, tmp_path / "a", data=ewt_dev, log=None)["history"]
    second = train(config, tmp_path / "b", data=ewt_dev, log=None)["history"]
    assert [(e["train_loss"], e["dev_uas"]) for e in first] == [
        (e["train_loss"], e["dev_uas"]) for e in second
    ]


def test_choose_run_reads_finished_runs(tmp_path):
    runs = []
    for rate, uas in ((1e-3, 0.4), (2e-3, 0.6), (4e-3, 0.5)):
        run_dir = tmp_path / str(rate)
        run_dir.mkdir()
        config = ParseConfig("en", "crf", learning_rate=rate)
        (run_dir / CONFIG_FILE).write_text(json.dumps({"config": config.to_dict()}))
        (run_dir / SUMMARY_FILE).write_text(json.dumps({"best_dev_uas": uas, "learning_rate": rate}))
        runs.append(run_dir)
    assert choose_run(runs) == (tmp_path / "0.002", None)
    other = tmp_path / "other"
    other.mkdir()
    (other / CONFIG_FILE).write_text(json.dumps({"config": ParseConfig("en", "ssvm").to_dict()}))
    with pytest.raises(ValueError, match=r"differ .* in more than the learning rate"):
        choose_run([*runs, other])


def run(capsys, *argv: object) -> tuple[int, str]:
    """Exit status and stderr of ``crfbench *argv``, with ``--allow-dirty`` (the tests may run from
    a checkout with uncommitted changes)."""
    try:
        code = cli.main(["--allow-dirty", *(str(arg) for arg in argv)])
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--dataset", "ro", "--loss", "crf"], ["--dataset", "'ro'"]),
        (["--dataset", "en", "--loss", "hinge"], ["--loss", "'hinge'"]),
        (
            ["--dataset", "en", "--loss", "crf", "--learning-rate", "-1"],
            ["--learning-rate", "positive number"],
        ),
        (["--dataset", "en", "--loss", "crf", "--epochs", "0"], ["--epochs", "positive integer"]),
    ],
)
def test_train_argument_errors_are_one_line(capsys, tmp_path, argv, named):
    code, err = run(capsys, "parse", "train", "--run-dir", tmp_path / "run", *argv)
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("crfbench parse train: error: ")
    assert all(text in err for text in named), err
    assert not (tmp_path / "run").exists()


def test_evaluate_without_a_run(capsys, tmp_path):
    code, err = run(capsys, "parse", "evaluate", "--run-dir", tmp_path)
    assert code == 2 and err.startswith("crfbench parse: error: ") and CONFIG_FILE in err
