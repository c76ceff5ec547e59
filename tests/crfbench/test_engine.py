"""The experiment engine end to end on the synthetic HMM: train per loss, resume, evaluate, time."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch

from crfbench import cli, data
from crfbench.config import RunConfig, load_config
from crfbench.evaluate import evaluate
from crfbench.experiment import load_dataset
from crfbench.objectives import DECODERS, LOSSES, NATURAL_DECODER
from crfbench.run_folder import dev_curve
from crfbench.schema import (
    CHECKPOINT_FILE,
    CURVE_COLUMNS,
    EVALUATION_FILE,
    MODEL_FILE,
    SENTENCE_COLUMNS,
    SENTENCES_FILE,
)
from crfbench.timing import time_run
from crfbench.train import train
from crfbench.uses import TIMED_DECODERS, TIMED_LOSSES

SMALL_SCORER = {"dim": 32, "heads": 4, "feedforward": 64, "mlp_hidden": 32, "dropout": 0.1}
SYNTHETIC = {"labels": 3, "scheme": "bies", "train": 240, "dev": 60, "test": 60, "max_length": 10, "seed": 1}


def make_config(loss: str = "crf", **overrides) -> RunConfig:
    values = {
        "dataset": "synthetic",
        "dataset_options": SYNTHETIC,
        "scorer": SMALL_SCORER,
        "loss": loss,
        "epochs": 4,
        "batch_size": 16,
        "learning_rate": 1e-2,
        "loss_iterations": 5,
    }
    return RunConfig.from_dict(values | overrides)


def majority_accuracy(config: RunConfig) -> float:
    """Accuracy of always predicting the most frequent training tag: what "chance" means here."""
    dataset = load_dataset(config)
    tag, _ = Counter(tag for s in dataset.train for tag in s.tags).most_common(1)[0]
    test_tags = [t for s in dataset.test for t in s.tags]
    return sum(t == tag for t in test_tags) / len(test_tags)


@pytest.mark.parametrize("loss", list(LOSSES))
def test_every_loss_learns_the_synthetic_task(loss: str, tmp_path: Path) -> None:
    config = make_config(loss)
    summary = train(config, tmp_path, progress=False)
    assert summary["finished"] and summary["best_epoch"] is not None
    table = evaluate(tmp_path, decoders=[NATURAL_DECODER[loss]], splits=["test"], progress=False)
    accuracy = table.query("metric == 'accuracy'").value.item()
    chance = majority_accuracy(config)
    assert accuracy > chance + 0.3, (accuracy, chance)


def test_resuming_after_an_interruption_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    config = make_config("bcrf", epochs=3)
    whole = train(config, tmp_path / "whole", progress=False)
    first = train(config, tmp_path / "resumed", stop_after=1, progress=False)
    assert not first["finished"] and first["epochs_done"] == 1
    assert not (tmp_path / "resumed" / "train.json").exists()  # only a finished run has a summary
    resumed = train(config, tmp_path / "resumed", progress=False)
    drop_time = lambda history: [{k: v for k, v in e.items() if k != "seconds"} for e in history]  # noqa: E731
    assert drop_time(resumed["history"]) == drop_time(whole["history"])
    left = torch.load(tmp_path / "whole" / CHECKPOINT_FILE, weights_only=False)["scorer"]
    right = torch.load(tmp_path / "resumed" / CHECKPOINT_FILE, weights_only=False)["scorer"]
    assert left.keys() == right.keys()
    for name in left:
        assert torch.equal(left[name], right[name]), name


def test_a_run_directory_refuses_different_settings(tmp_path: Path) -> None:
    train(make_config(epochs=1), tmp_path, progress=False)
    with pytest.raises(ValueError, match="different settings"):
        train(make_config(epochs=1, seed=5), tmp_path, progress=False)


def test_a_changed_run_restarts_from_scratch_when_asked(tmp_path: Path) -> None:
    """What the pipeline does after a setting changed: the old run's files go, none is reused."""
    train(make_config(epochs=1), tmp_path / "changed", progress=False)
    evaluate(tmp_path / "changed", decoders=["viterbi"], splits=["dev"], progress=False)
    assert (tmp_path / "changed" / EVALUATION_FILE).exists()
    restarted = train(make_config(epochs=2), tmp_path / "changed", progress=False, restart_if_changed=True)
    fresh = train(make_config(epochs=2), tmp_path / "fresh", progress=False)
    drop_time = lambda history: [{k: v for k, v in e.items() if k != "seconds"} for e in history]  # noqa: E731
    assert drop_time(restarted["history"]) == drop_time(fresh["history"])  # not resumed from epoch 1
    assert not (tmp_path / "changed" / EVALUATION_FILE).exists()  # the old run's evaluation is gone
    recorded = json.loads((tmp_path / "changed" / "config.json").read_text())["config"]
    assert recorded == make_config(epochs=2).to_dict()


def test_evaluation_rows_are_complete_and_self_describing(tmp_path: Path) -> None:
    train(make_config("crf", epochs=1), tmp_path, progress=False)
    table = evaluate(tmp_path, progress=False)
    on_disk = pd.read_csv(tmp_path / "evaluation.csv")
    assert len(on_disk) == len(table)
    assert set(on_disk.decoder) == set(DECODERS) and set(on_disk.split) == {"dev", "test"}
    for column in (
        "dataset",
        "protocol",
        "encoder",
        "layers",
        "loss",
        "seed",
        "iterations",
        "device",
        "revision",
    ):
        assert column in on_disk.columns
    assert set(on_disk.metric) == {"accuracy", "precision", "recall", "f1", "violations"}  # BIES: words
    exact = on_disk.query("decoder == 'viterbi' and metric == 'violations'").value
    assert (exact == 0).all()  # Viterbi under -inf constraints never breaks one
    header = json.loads((tmp_path / "config.json").read_text())
    assert header["dataset"]["protocol"] == "standard"
    assert header["environment"]["versions"]["torch"] == torch.__version__
    assert header["config"] == make_config("crf", epochs=1).to_dict()


def test_timing_measures_every_loss_and_decoder(tmp_path: Path) -> None:
    table = time_run(make_config(), tmp_path, batches=1, rounds=2, warmup=1, progress=False)
    assert (tmp_path / "timing.csv").exists() and (tmp_path / "config.json").exists()
    full_losses = [name for name in TIMED_LOSSES if "partial" not in name]  # the baselines too
    expected = [("train", name) for name in full_losses] + [("decode", name) for name in TIMED_DECODERS]
    assert Counter(zip(table.kind, table.name, strict=True)) == Counter({key: 2 for key in expected})
    assert (table.seconds > 0).all()
    assert set(table.kind) == {"train", "decode"}
    assert (table.threads == 1).all()
    assert (table.network == "untrained").all()


def test_a_timing_run_cut_off_keeps_the_rounds_it_finished(tmp_path: Path, monkeypatch) -> None:
    """A time limit (the GPU session's) that stops the run in its third round leaves the first two
    timed rounds' rows on disk, each item once per round, the warm-up round not among them."""
    import random
    from types import SimpleNamespace

    from crfbench import timing

    class CutOffInTheThirdTimedRound(random.Random):
        """The timing loop's shuffler, called once a round: warm-up, two timed rounds, then cut off."""

        calls = 0

        def sample(self, population, k, **kwargs):
            type(self).calls += 1
            if self.calls == 4:
                raise KeyboardInterrupt
            return super().sample(population, k, **kwargs)

    monkeypatch.setattr(timing, "random", SimpleNamespace(Random=CutOffInTheThirdTimedRound))
    with pytest.raises(KeyboardInterrupt):
        time_run(
            make_config(),
            tmp_path,
            losses=("crf",),
            decoders=("viterbi",),
            batches=1,
            rounds=5,
            warmup=1,
            progress=False,
        )
    kept = pd.read_csv(tmp_path / "timing.csv")
    assert sorted(set(kept["round"])) == [0, 1]
    assert (kept.groupby("round").size() == kept.groupby("round").size().iloc[0]).all()


def test_timing_on_a_trained_model_uses_its_weights(tmp_path: Path) -> None:
    """With ``weights`` the timed network is the trained run's model: SparseMAP decoding it meets
    the small supports of a trained model, not a fresh network's."""
    trained = tmp_path / "trained"
    summary = train(make_config("crf", epochs=2), trained, progress=False)
    fresh = time_run(make_config(), tmp_path / "fresh", batches=1, rounds=1, warmup=0, progress=False)
    table = time_run(
        make_config(), tmp_path / "timed", batches=1, rounds=1, warmup=0, weights=trained, progress=False
    )
    assert set(table.network) == {f"trained: crf, seed 0, epoch {summary['best_epoch']}"}
    assert len(table) == len(fresh)
    with pytest.raises(ValueError, match=r"weights: .*model.pt: the model's network differs"):
        other = make_config(scorer=SMALL_SCORER | {"mlp_hidden": 16})
        time_run(other, tmp_path / "other", batches=1, rounds=1, warmup=0, weights=trained, progress=False)
    with pytest.raises(FileNotFoundError, match=r"weights: .*no trained model"):
        time_run(
            make_config(), tmp_path / "none", batches=1, rounds=1, warmup=0, weights=tmp_path, progress=False
        )


def test_a_full_annotation_loss_is_refused_on_partial_training_data(monkeypatch) -> None:
    original = data.load

    def partially_annotated(name, data_dir=None, **options):
        dataset = original(name, data_dir, **options)
        first = dataset.train[0]
        partial = dataclasses.replace(first, allowed=tuple(frozenset([tag]) for tag in first.tags))
        return dataclasses.replace(dataset, train=(partial, *dataset.train[1:]))

    monkeypatch.setattr(data, "load", partially_annotated)
    with pytest.raises(ValueError, match="crf-partial or bcrf-partial"):
        load_dataset(make_config("crf"))
    assert load_dataset(make_config("crf-partial")).train[0].allowed is not None


def test_config_errors_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown run setting"):
        RunConfig.from_dict({"dataset": "synthetic", "epoch": 3})
    with pytest.raises(ValueError, match="loss: 'nll'"):
        make_config("nll")
    with pytest.raises(ValueError, match="batch_size"):
        make_config(batch_size=0)
    for bad_setting, named in (
        ({"lr_factor": 1.0}, "lr_factor: must be in (0, 1)"),
        ({"lr_reductions": -1}, "lr_reductions: must be an integer >= 0"),
        ({"min_learning_rate": -1e-3}, "min_learning_rate: must be >= 0"),
        ({"learning_rates": [1e-3, 1e-3], "learning_rate": None}, "learning_rates: must be distinct"),
        ({"learning_rates": [], "learning_rate": None}, "learning_rates: must be distinct"),
        ({"learning_rates": [1e-3, 2e-3], "learning_rate": 1e-3}, "learning_rates: give a grid or one"),
    ):
        with pytest.raises(ValueError) as refused:
            make_config(**bad_setting)
        assert str(refused.value).startswith(named), refused.value
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: synthetic\nloss: [unclosed\n")
    with pytest.raises(ValueError, match=r"bad.yaml"):
        load_config(bad)


def test_the_unstructured_loss_trains_a_scorer_without_transitions() -> None:
    assert make_config("unstructured").scorer.transitions is False
    assert make_config("crf").scorer.transitions is True


def test_cli_trains_evaluates_and_reports_bad_settings(tmp_path: Path, capsys) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps(make_config("crf", epochs=1).to_dict()))
    run = tmp_path / "run"
    # --allow-dirty: the tests run from a checkout that may have uncommitted changes
    train_argv = ["train", "--allow-dirty", "--config", str(config), "--run-dir", str(run)]
    assert cli.main([*train_argv, "--no-progress"]) == 0
    assert (run / MODEL_FILE).exists()
    evaluate_argv = ["evaluate", "--allow-dirty", "--run-dir", str(run), "--decoders", "viterbi"]
    assert cli.main([*evaluate_argv, "--no-progress"]) == 0
    assert "viterbi" in capsys.readouterr().out
    timing = [
        "time",
        "--allow-dirty",
        "--run-dir",
        str(run),
        "--batches",
        "1",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--no-progress",
    ]
    assert cli.main([*timing, "--decoders", "viterbi", "--losses", "crf"]) == 0  # the run's own settings
    assert set(pd.read_csv(run / "timing.csv").name) == {"viterbi", "crf"}
    code = cli.main([*train_argv, "--set", "epochz=2"])
    assert code == 2
    assert "unknown run setting" in capsys.readouterr().err


def test_plateaus_cut_the_learning_rate_then_stop_a_flat_run_which_stays_stopped(tmp_path: Path) -> None:
    """A learning rate of ~0 keeps the dev score flat: with patience 1 each epoch after the first is
    a plateau; the first 2 (lr_reductions) halve the rate, the third ends training at epoch 4 of a
    cap of 8; calling train again adds no epoch; the summary says why training stopped."""
    config = make_config("crf", epochs=8, patience=1, lr_reductions=2, lr_factor=0.5, learning_rate=1e-12)
    summary = train(config, tmp_path, progress=False)
    assert summary["finished"] and summary["epochs_done"] == 4 and summary["best_epoch"] == 1
    assert (summary["stopped_by"], summary["still_improving"], summary["epoch_cap"]) == ("patience", False, 8)
    rates = [entry["learning_rate"] for entry in summary["history"]]
    assert rates == pytest.approx([1e-12, 1e-12, 5e-13, 2.5e-13], rel=1e-9)
    assert summary["learning_rate_cuts"] == 2 and dev_curve(tmp_path).learning_rate.tolist() == rates
    again = train(config, tmp_path, progress=False)
    assert again["epochs_done"] == 4 and again["history"] == summary["history"]
    floored = make_config("crf", epochs=8, patience=1, learning_rate=1e-12, min_learning_rate=1e-12)
    summary = train(floored, tmp_path / "floor", progress=False)  # a plateau at the floor ends it
    assert summary["epochs_done"] == 2 and summary["learning_rate_cuts"] == 0


def test_a_run_at_its_epoch_cap_with_a_rising_curve_is_flagged(tmp_path: Path) -> None:
    summary = train(make_config("crf", epochs=2, patience=3), tmp_path, progress=False)
    assert summary["stopped_by"] == "epoch cap" and summary["best_epoch"] == 2
    assert summary["still_improving"]
    curve = dev_curve(tmp_path)
    assert list(curve.columns) == list(CURVE_COLUMNS) and list(curve.epoch) == [1, 2]
    assert set(curve.stopped_by) == {"epoch cap"} and curve.still_improving.all()
    assert curve.dev_value.tolist() == [entry["dev_f1"] for entry in summary["history"]]


def test_a_sparsemap_loss_records_its_support_size_per_epoch(tmp_path: Path) -> None:
    """``dev_support``: the mean number of sequences in SparseMAP's support on dev, per epoch, for a
    SparseMAP loss only (empty in the curve of any other loss)."""
    summary = train(make_config("sparsemap", epochs=2, patience=3), tmp_path / "sparsemap", progress=False)
    curve = dev_curve(tmp_path / "sparsemap")
    assert curve.dev_support.tolist() == [entry["dev_support"] for entry in summary["history"]]
    assert (curve.dev_support >= 1).all() and summary["selection_decoder"] == "sparsemap"
    train(make_config("crf", epochs=1), tmp_path / "crf", progress=False)
    assert dev_curve(tmp_path / "crf").dev_support.isna().all()


def test_evaluation_writes_the_test_sentences_counts_behind_its_metrics(tmp_path: Path) -> None:
    config = make_config("crf", epochs=1)
    train(config, tmp_path, progress=False)
    table = evaluate(tmp_path, decoders=["viterbi", "meanfield-5"], progress=False)
    counts = pd.read_csv(tmp_path / SENTENCES_FILE)
    assert list(counts.columns) == list(SENTENCE_COLUMNS)
    assert set(counts.split) == {"test"} and len(counts) == 2 * SYNTHETIC["test"]
    test = table[table.split == "test"].set_index(["decoder", "metric"]).value
    for decoder, rows in counts.groupby("decoder"):
        f1 = 2 * rows.matched_spans.sum() / (rows.gold_spans.sum() + rows.predicted_spans.sum())
        assert f1 == pytest.approx(test[decoder, "f1"])
        assert rows.invalid.mean() == pytest.approx(test[decoder, "violations"])


def test_min_delta_stops_a_creeping_curve(tmp_path: Path) -> None:
    """With min_delta above the whole curve's rise, only epoch 1 counts as a step up: patience 2
    (and no learning-rate cut) stops after epoch 3, although the dev score may still creep; the
    best epoch is still selected."""
    config = make_config("crf", epochs=8, patience=2, min_delta=1.0, lr_reductions=0)
    summary = train(config, tmp_path, progress=False)
    assert summary["epochs_done"] == 3 and summary["stopped_by"] == "patience"
    scores = [entry["dev_f1"] for entry in summary["history"]]
    assert summary["best_epoch"] == 1 + scores.index(max(scores))
