"""Training's log and its learning-rate grid: a line per epoch on stderr whatever the progress
setting (the pipeline's logs), no bar off a terminal; one run per rate of ``learning_rates``, the
best dev score's made the run's."""

from __future__ import annotations

import json
from pathlib import Path

from crfbench import cli
from crfbench.evaluate import evaluate
from crfbench.schema import CONFIG_FILE, MODEL_FILE, SUMMARY_FILE
from crfbench.train import grid_folder, train

from .test_engine import make_config


def _epoch_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("epoch ")]


def test_every_epoch_writes_one_line_to_stderr_and_no_bar_off_a_terminal(tmp_path: Path, capsys) -> None:
    summary = train(make_config(epochs=2, patience=None), tmp_path / "library")
    captured = capsys.readouterr()
    lines = _epoch_lines(captured.err)
    assert captured.out == "" and "\r" not in captured.err  # stderr is no terminal here: no bar
    assert [line.split(":")[0] for line in lines] == ["epoch 1/2", "epoch 2/2"]
    for line, entry in zip(lines, summary["history"], strict=True):
        assert f"train loss {entry['train_loss']:.4f}" in line
        assert f"dev f1 (viterbi) {entry['dev_f1']:.4f}" in line
        assert "lr 0.01" in line and line.endswith(" s")
    config = tmp_path / "run.json"
    config.write_text(json.dumps(make_config(epochs=1).to_dict()))
    argv = ["train", "--allow-dirty", "--config", config, "--run-dir", tmp_path / "cli", "--no-progress"]
    assert cli.main([str(arg) for arg in argv]) == 0
    assert len(_epoch_lines(capsys.readouterr().err)) == 1  # --no-progress silences the bar only


def test_a_learning_rate_grid_trains_every_rate_and_keeps_the_best_dev_run(tmp_path: Path) -> None:
    """A rate of ~0 learns nothing: 1e-2 wins, at the grid's top edge, so 2e-2 is the next to try.
    An interrupted grid resumes to the same result."""
    config = make_config(epochs=2, patience=None, learning_rate=None, learning_rates=[1e-12, 1e-2])
    summary = train(config, tmp_path / "grid", log=None)
    assert (summary["learning_rate"], summary["next_learning_rate"]) == (1e-2, 2e-2)
    grid = summary["learning_rate_grid"]
    assert set(grid) == {"1e-12", "0.01"} and grid["0.01"] > grid["1e-12"]
    assert summary["best_dev_f1"] == grid["0.01"]
    chosen = grid_folder(tmp_path / "grid", 1e-2)
    assert (tmp_path / "grid" / MODEL_FILE).read_bytes() == (chosen / MODEL_FILE).read_bytes()
    assert summary["history"] == json.loads((chosen / SUMMARY_FILE).read_text())["history"]
    recorded = json.loads((tmp_path / "grid" / CONFIG_FILE).read_text())["config"]
    assert recorded["learning_rates"] == [1e-12, 1e-2] and recorded["learning_rate"] is None
    table = evaluate(tmp_path / "grid", decoders=["viterbi"], splits=["dev"], progress=False)
    assert table.query("metric == 'f1'").value.item() == summary["best_dev_f1"]

    first = train(config, tmp_path / "resumed", stop_after=3, log=None)
    assert not first["finished"] and not (tmp_path / "resumed" / SUMMARY_FILE).exists()
    resumed = train(config, tmp_path / "resumed", log=None)
    drop_time = lambda history: [{k: v for k, v in e.items() if k != "seconds"} for e in history]  # noqa: E731
    assert resumed["learning_rate_grid"] == grid
    assert drop_time(resumed["history"]) == drop_time(summary["history"])
