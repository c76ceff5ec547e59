"""Training and evaluating a tiny parser end to end, the learning-rate choice, and the command
line's one-line errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crfbench import cli
from crfbench.parsing.evaluate import evaluate
from crfbench.parsing.run import ParseConfig, load_settings
from crfbench.parsing.train import choose_run, chosen_learning_rate, train
from crfbench.schema import (
    CONFIG_FILE,
    EVALUATION_FILE,
    METRICS_COLUMNS,
    MODEL_FILE,
    SENTENCES_FILE,
    SUMMARY_FILE,
)
from tests.crfbench.parsing.tiny import SMALL


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


def test_same_seed_same_run(ewt_dev, tmp_path):
    config = ParseConfig("en", "ssvm", epochs=1, batch_size=10, max_train_sentences=10, parser=SMALL)
    first = train(config, tmp_path / "a", data=ewt_dev, log=None)["history"]
    second = train(config, tmp_path / "b", data=ewt_dev, log=None)["history"]
    assert [(e["train_loss"], e["dev_uas"]) for e in first] == [
        (e["train_loss"], e["dev_uas"]) for e in second
    ]


def test_every_epoch_logs_one_line_to_stderr_and_no_bar_off_a_terminal(ewt_dev, tmp_path, capsys):
    config = ParseConfig("en", "ssvm", epochs=2, batch_size=10, max_train_sentences=10, parser=SMALL)
    summary = train(config, tmp_path, data=ewt_dev)  # the default log: stderr, the pipeline's log
    captured = capsys.readouterr()
    assert captured.out == "" and "\r" not in captured.err
    lines = captured.err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 0", "epoch 1", "epoch 2"]
    assert all("lr 0.002" in line and line.endswith(" s") for line in lines), lines
    assert [entry["learning_rate"] for entry in summary["history"]] == [2e-3] * 3


def fake_finished_runs(root, loss: str, dev_uas: dict[float, float]) -> list:
    """Run folders with the settings and summary of finished runs that differ in learning rate."""
    runs = []
    for rate, uas in dev_uas.items():
        run_dir = root / f"lr{rate!r}"
        run_dir.mkdir()
        config = ParseConfig("en", loss, learning_rate=rate)
        (run_dir / CONFIG_FILE).write_text(json.dumps({"config": config.to_dict()}))
        (run_dir / SUMMARY_FILE).write_text(json.dumps({"best_dev_uas": uas, "learning_rate": rate}))
        runs.append(run_dir)
    return runs


def test_choose_run_reads_finished_runs(tmp_path):
    runs = fake_finished_runs(tmp_path, "crf", {1e-3: 0.4, 2e-3: 0.6, 4e-3: 0.5})
    assert choose_run(runs) == (runs[1], None)
    other = tmp_path / "other"
    other.mkdir()
    (other / CONFIG_FILE).write_text(json.dumps({"config": ParseConfig("en", "ssvm").to_dict()}))
    with pytest.raises(ValueError, match=r"differ .* in more than the learning rate"):
        choose_run([*runs, other])


def run(capsys, *argv: object) -> tuple[int, str]:
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


def test_choose_lr_writes_the_choice_that_train_reads(capsys, tmp_path):
    runs = fake_finished_runs(tmp_path, "crf", {1e-3: 0.4, 2e-3: 0.6, 4e-3: 0.5})
    code, err = run(capsys, "parse", "choose-lr", "--run-dirs", *runs, "--out", tmp_path / "chosen.json")
    assert code == 0, err
    choice = json.loads((tmp_path / "chosen.json").read_text())
    assert choice["learning_rate"] == 2e-3 and choice["next_learning_rate"] is None
    assert choice["dev_uas"] == {"0.001": 0.4, "0.002": 0.6, "0.004": 0.5}
    assert chosen_learning_rate(tmp_path / "chosen.json") == 2e-3

    edge = tmp_path / "edge"
    edge.mkdir()
    runs = fake_finished_runs(edge, "crf", {1e-3: 0.7, 2e-3: 0.6})
    assert (
        cli.main(["parse", "choose-lr", "--run-dirs", *map(str, runs), "--out", str(edge / "chosen.json")])
        == 0
    )
    assert "would try 0.0005 next" in capsys.readouterr().out
    assert json.loads((edge / "chosen.json").read_text())["next_learning_rate"] == 5e-4


def test_a_choice_without_a_rate_is_refused_naming_the_file(capsys, tmp_path):
    (tmp_path / "chosen.json").write_text(json.dumps({"learning_rate": "fast"}))
    code, err = run(
        capsys, "parse", "train", "--dataset", "en", "--loss", "crf", "--run-dir", tmp_path / "run",
        "--learning-rate-from", tmp_path / "chosen.json",
    )  # fmt: skip
    assert code == 2 and "chosen.json" in err and "learning_rate" in err and len(err.splitlines()) == 1


def test_settings_file_with_flags_over_it(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"dataset": "vi", "loss": "ssvm", "epochs": 3, "parser": {"lstm_dim": 7}}))
    config = load_settings(path, {"seed": 4, "learning_rate": 1e-3})
    assert (config.dataset, config.loss, config.seed, config.epochs) == ("vi", "ssvm", 4, 3)
    assert config.learning_rate == 1e-3 and config.parser.lstm_dim == 7
    path.write_text(json.dumps({"dataset": "vi", "loss": "ssvm", "epochs": 0}))
    with pytest.raises(ValueError, match=r"settings\.json: epochs: must be a positive integer"):
        load_settings(path, {})
    with pytest.raises(ValueError, match="--loss: required"):
        load_settings(None, {"dataset": "vi"})


def test_a_changed_run_is_refused_or_restarted(ewt_dev, tmp_path):
    config = ParseConfig("en", "crf", epochs=1, batch_size=10, max_train_sentences=10, parser=SMALL)
    train(config, tmp_path, data=ewt_dev, log=None)
    (tmp_path / EVALUATION_FILE).write_text("left by the old run\n")
    changed = ParseConfig("en", "crf", epochs=1, batch_size=5, max_train_sentences=10, parser=SMALL)
    with pytest.raises(ValueError, match="--restart-if-changed"):
        train(changed, tmp_path, data=ewt_dev, log=None)
    train(changed, tmp_path, data=ewt_dev, log=None, restart_if_changed=True)
    assert json.loads((tmp_path / CONFIG_FILE).read_text())["config"]["batch_size"] == 5
    assert not (tmp_path / EVALUATION_FILE).exists()  # the old run's files went with it
