"""Reading and writing a run's folder, the one place the engine's stages (train, evaluate, sweep,
timing) and ``crfbench aggregate`` meet, so that no stage imports another.

A run's folder (file names: ``crfbench.schema``) holds:

- ``config.json``: resolved settings, dataset facts (protocol, sizes used, sources), environment;
- ``checkpoint.pt``: everything needed to resume training after the last finished epoch;
- ``model.pt``: the best model so far (by dev score);
- ``train.json``: the per-epoch dev curve, the selected epoch and why training stopped (patience,
  or the epoch cap, and then whether the curve was still rising), written when training ends;
- the tables of the later stages: ``evaluation.csv``, ``sentences.csv``, ``sweep.csv``, ``timing.csv``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import torch

from . import environment
from .config import RunConfig, check_device_available
from .data.types import Dataset
from .experiment import load_dataset
from .io import CorruptFileError, check_fields, load_torch, read_json, save_torch, write_csv, write_json
from .models import Scorer, ScorerConfig
from .schema import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    CURVE_COLUMNS,
    DATASET_COLUMNS,
    EVALUATION_FILE,
    MODEL_FILE,
    SENTENCES_FILE,
    SUMMARY_FILE,
    SWEEP_FILE,
    TIMING_FILE,
)

#: Everything the engine writes into a run directory; the settings record goes last when a run is
#: discarded, so an interrupted discard is finished by the next call instead of mixing two runs.
RUN_FILES = (
    CHECKPOINT_FILE,
    MODEL_FILE,
    SUMMARY_FILE,
    EVALUATION_FILE,
    SENTENCES_FILE,
    SWEEP_FILE,
    TIMING_FILE,
    CONFIG_FILE,
)
#: A dataset's splits, in the order its facts list them.
SPLITS = ("train", "dev", "test")
#: What :func:`save_model` puts into ``model.pt``, and training into ``checkpoint.pt``.
MODEL_FIELDS = ("scorer_config", "vocab", "tags", "state_dict", "epoch")
CHECKPOINT_FIELDS = ("scorer", "optimizer", "scheduler", "shuffler", "torch_rng", "state")


# -- config.json -----------------------------------------------------------------------------------


def describe_dataset(dataset: Dataset) -> dict[str, object]:
    """The dataset facts recorded with every run (never any text)."""
    return {
        "name": dataset.name,
        "task": dataset.task,
        "protocol": dataset.protocol,
        "tags": len(dataset.tagset),
        "constrained": dataset.tagset.constrained,
        "sentences": {split: len(getattr(dataset, split)) for split in SPLITS},
        "tokens": {split: sum(len(s.tokens) for s in getattr(dataset, split)) for split in SPLITS},
        "options": dataset.options,
        "sources": dataset.sources,
    }


def dataset_rows(path: Path) -> pd.DataFrame:
    """The dataset facts of a run's ``config.json`` as ``DATASET_COLUMNS`` rows, one per split:
    its encoder's name and width, the sentences and tokens the run used (tokens are absent, NaN,
    from runs recorded before they were counted) and the cap its settings put on the split (NaN:
    none)."""
    header = check_fields(path, read_json(path), ("config", "dataset"))
    facts, config = header["dataset"], header["config"]
    tokens = facts.get("tokens", {})
    caps = {"train": config.get("max_train_sentences")} | dict.fromkeys(
        ("dev", "test"), config.get("max_eval_sentences")
    )
    return pd.DataFrame(
        {
            "dataset": facts["name"],
            "dataset_options": json.dumps(config.get("dataset_options", {}), sort_keys=True),
            "protocol": facts["protocol"],
            "encoder_name": config.get("encoder_name", ""),
            "encoder_dim": config.get("scorer", {}).get("dim", float("nan")),
            "split": list(SPLITS),
            "sentences": [facts["sentences"][split] for split in SPLITS],
            "tokens": pd.array([tokens.get(split) for split in SPLITS], dtype="Int64"),
            "cap": pd.array([caps[split] for split in SPLITS], dtype="Int64"),  # empty: no cap
        },
        columns=list(DATASET_COLUMNS),
    )


def record_run(
    run_dir: Path,
    config: RunConfig,
    dataset: Dataset,
    device: torch.device,
    *,
    restart_if_changed: bool = False,
) -> None:
    """Write ``run_dir/config.json`` (settings, dataset facts, environment), or check that an
    existing one (a run being resumed, or timed after training) has the same settings.

    A directory made with other settings is refused, or with ``restart_if_changed`` emptied of the
    engine's files (``RUN_FILES``) so the run starts afresh: what a pipeline wants when a setting
    of the config changed, or when a run failed on settings that have since been fixed.
    """
    if recorded_settings_kept(run_dir, config.to_dict(), RUN_FILES, restart_if_changed):
        return
    path = Path(run_dir) / CONFIG_FILE
    header = {
        "config": config.to_dict(),
        "dataset": describe_dataset(dataset),
        "environment": environment.describe(device),
    }
    write_json(path, header)


def recorded_settings_kept(
    run_dir: Path, settings: dict[str, Any], run_files: Iterable[str], restart_if_changed: bool
) -> bool:
    """Whether ``run_dir/config.json`` records ``settings`` (a run being resumed: keep it). A folder
    made with other settings is refused (ValueError naming the file), or with ``restart_if_changed``
    emptied of ``run_files`` (False, as for a new folder): what a pipeline wants when a setting of
    its config changed, or when a run failed on settings that have since been fixed."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return False
    if check_fields(path, read_json(path), ("config",))["config"] == settings:
        return True
    if not restart_if_changed:
        raise ValueError(
            f"{path}: this run directory was made with different settings; use a new one "
            "(or --restart-if-changed to discard that run)"
        )
    for name in run_files:
        (Path(run_dir) / name).unlink(missing_ok=True)
    return False


def read_run_config(run_dir: Path) -> RunConfig:
    """The settings recorded in ``run_dir/config.json``."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a run directory (no {CONFIG_FILE})")
    return RunConfig.from_dict(check_fields(path, read_json(path), ("config",))["config"])


# -- model.pt and checkpoint.pt --------------------------------------------------------------------


def save_model(path: Path, scorer: Scorer, tags: tuple[str, ...], epoch: int, dev_score: float) -> None:
    """The scorer with what rebuilds it (settings, vocabulary, tags) and the epoch that made it."""
    payload = {
        "scorer_config": scorer.config.to_dict(),
        "vocab": scorer.vocab_state(),
        "tags": list(tags),
        "state_dict": scorer.state_dict(),
        "epoch": epoch,
        "dev_score": dev_score,
    }
    save_torch(path, payload)


def load_model(path: Path, device: torch.device) -> tuple[Scorer, dict[str, Any]]:
    """The scorer saved by :func:`save_model` (on ``device``) and the payload's other fields;
    CorruptFileError naming the file when it is truncated, damaged or not such a model."""
    saved = check_fields(path, load_torch(path, map_location=device), MODEL_FIELDS)
    try:
        config = ScorerConfig.from_dict(saved["scorer_config"])
        scorer = Scorer.from_state(config, saved["vocab"], len(saved["tags"]))
    except ValueError as error:
        raise CorruptFileError(f"{path}: not a model of this code's scorer ({error})") from None
    try:
        scorer.load_state_dict(saved["state_dict"])
    except RuntimeError as error:  # missing, unexpected or mis-shaped weights
        reason = str(error).strip().splitlines()[0]
        raise CorruptFileError(f"{path}: the weights do not fit the recorded scorer ({reason})") from None
    return scorer.to(device), saved


def load_checkpoint(run_dir: Path, device: torch.device) -> dict[str, Any] | None:
    """The training state saved after the run's last finished epoch (``CHECKPOINT_FIELDS``), or
    None when training has not finished an epoch yet."""
    path = Path(run_dir) / CHECKPOINT_FILE
    if not path.exists():
        return None
    return check_fields(path, load_torch(path, map_location=device), CHECKPOINT_FIELDS)


def save_checkpoint(run_dir: Path, state: dict[str, Any]) -> None:
    """Save the training state (``CHECKPOINT_FIELDS``) that resumes the run after this epoch."""
    save_torch(Path(run_dir) / CHECKPOINT_FILE, state)


class TrainedRun(NamedTuple):
    """A finished run's selected model with what decoding it needs."""

    config: RunConfig
    dataset: Dataset  # cut to the run's sizes
    scorer: Scorer  # on ``device``
    saved: dict[str, Any]  # model.pt's other fields (epoch, dev score, tags)
    device: torch.device


def load_trained_run(run_dir: Path, data_dir: str | Path | None = None) -> TrainedRun:
    """The selected model of ``run_dir`` with its settings and data, on the run's device and thread
    count (what ``evaluate`` and ``sweep`` decode); FileNotFoundError when nothing was trained
    there, ValueError when the model's tag set is not the dataset's."""
    run_dir = Path(run_dir)
    if not (run_dir / MODEL_FILE).exists():
        raise FileNotFoundError(f"{run_dir / MODEL_FILE}: no trained model; run `crfbench train` first")
    config = read_run_config(run_dir)
    device = check_device_available(config.device)
    environment.set_threads(config.threads)
    dataset = load_dataset(config, data_dir)
    scorer, saved = load_model(run_dir / MODEL_FILE, device)
    if tuple(saved["tags"]) != dataset.tagset.tags:
        raise ValueError(f"{run_dir / MODEL_FILE}: the model's tag set differs from {config.dataset}'s")
    return TrainedRun(config, dataset, scorer, saved, device)


# -- train.json and the stages' tables -------------------------------------------------------------


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """Write ``train.json``: the sign of a finished training run."""
    write_json(Path(run_dir) / SUMMARY_FILE, summary)


def dev_curve(run_dir: Path) -> pd.DataFrame:
    """The per-epoch dev curve of the finished run in ``run_dir`` (its ``train.json``), a row per
    epoch keyed by the run (dataset, encoder, loss, seed) with how and why training stopped."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    run = {"dataset": config.dataset, "encoder_name": config.encoder_name, "loss": config.loss}
    return summary_curve(run_dir / SUMMARY_FILE, run | {"seed": config.seed})


def summary_curve(path: Path, run: dict[str, object]) -> pd.DataFrame:
    """The per-epoch dev curve of the finished run's ``train.json`` at ``path`` (its history's
    entries: epoch, training loss, dev score, learning rate, seconds, and ``dev_support`` where
    recorded), keyed by ``run`` (the ``RUN_KEY`` values), in ``CURVE_COLUMNS``: the one reading of
    a summary, whichever engine (tagger or parser) wrote it."""
    fields = ("history", "selection_metric", "selection_decoder", "best_epoch", "epoch_cap")
    summary = check_fields(path, read_json(path), fields + ("stopped_by", "still_improving"))
    metric = summary["selection_metric"]
    rows = [
        run
        | {"epoch": entry["epoch"], "train_loss": entry["train_loss"]}
        | {"dev_metric": metric, "dev_value": entry[f"dev_{metric}"]}
        | {"selection_decoder": summary["selection_decoder"], "learning_rate": entry["learning_rate"]}
        | {"seconds": entry["seconds"], "best_epoch": summary["best_epoch"]}
        | {"dev_support": entry.get("dev_support")}
        | {name: summary[name] for name in ("epoch_cap", "stopped_by", "still_improving")}
        for entry in summary["history"]
    ]
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


def write_run_table(run_dir: Path, name: str, table: pd.DataFrame) -> None:
    """Write a stage's table ``name`` (``evaluation.csv``, ``sweep.csv``, ...) into the run's folder,
    atomically and without the index."""
    write_csv(Path(run_dir) / name, table)
