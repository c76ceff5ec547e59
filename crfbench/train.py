"""Train a scorer with one of the paper's losses; checkpoint every epoch, resume when interrupted.

Adam with a linear schedule (warm-up over ``config.warmup`` of the updates, then linear decay to
zero at the epoch cap), the loss averaged over the sentences of a batch, dev-set model selection
on the task's primary metric with the selection decoder, and early stopping: training ends once
``config.patience`` epochs in a row have not raised the dev score by more than ``config.min_delta``
over the last such step up (a curve creeping up by less is flat enough). A run directory holds:

- ``config.json``: resolved settings, dataset facts (protocol, sources), environment;
- ``checkpoint.pt``: everything needed to resume after the last finished epoch;
- ``model.pt``: the best model so far (by dev score);
- ``train.json``: the per-epoch dev curve, the selected epoch and why training stopped (patience,
  or the epoch cap, and then whether the curve was still rising), written when training ends.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import torch
from tqdm.auto import tqdm

from . import environment
from .batching import select, shuffled_batches, targets
from .config import RunConfig, check_device_available
from .data.types import Dataset
from .experiment import (
    CHECKPOINT_FILE,
    MODEL_FILE,
    SUMMARY_FILE,
    load_dataset,
    mean_support,
    predict,
    read_run_config,
    record_run,
    score_batch,
)
from .io import CorruptFileError, check_fields, load_torch, read_json, save_torch, write_json
from .metrics import PRIMARY_METRIC, score
from .models import Scorer, ScorerConfig, build_scorer
from .objectives import DECODERS, NATURAL_DECODER, is_partial, training_loss
from .schema import CURVE_COLUMNS


def linear_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup: float):
    """Learning-rate factor rising linearly over the warm-up steps, then falling linearly to 0."""
    warmup_steps = math.ceil(warmup * total_steps)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def save_model(path: Path, scorer: Scorer, tags: tuple[str, ...], epoch: int, dev_score: float) -> None:
    payload = {
        "scorer_config": scorer.config.to_dict(),
        "vocab": scorer.vocab_state(),
        "tags": list(tags),
        "state_dict": scorer.state_dict(),
        "epoch": epoch,
        "dev_score": dev_score,
    }
    save_torch(path, payload)


#: What :func:`save_model` puts into ``model.pt``, and :func:`train` into ``checkpoint.pt``.
MODEL_FIELDS = ("scorer_config", "vocab", "tags", "state_dict", "epoch")
CHECKPOINT_FIELDS = ("scorer", "optimizer", "scheduler", "shuffler", "torch_rng", "state")


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


def dev_curve(run_dir: Path) -> pd.DataFrame:
    """The per-epoch dev curve of the finished run in ``run_dir`` (its ``train.json``), a row per
    epoch keyed by the run (dataset, encoder, loss, seed) with how and why training stopped."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    path = run_dir / SUMMARY_FILE
    fields = ("history", "selection_metric", "selection_decoder", "best_epoch", "epoch_cap")
    summary = check_fields(path, read_json(path), fields + ("stopped_by", "still_improving"))
    metric = summary["selection_metric"]
    run = {"dataset": config.dataset, "encoder_name": config.encoder_name, "loss": config.loss}
    rows = [
        run
        | {"seed": config.seed, "epoch": entry["epoch"], "train_loss": entry["train_loss"]}
        | {"dev_metric": metric, "dev_value": entry[f"dev_{metric}"]}
        | {"selection_decoder": summary["selection_decoder"], "learning_rate": entry["learning_rate"]}
        | {"seconds": entry["seconds"], "best_epoch": summary["best_epoch"]}
        | {"dev_support": entry.get("dev_support")}
        | {name: summary[name] for name in ("epoch_cap", "stopped_by", "still_improving")}
        for entry in summary["history"]
    ]
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


def still_improving(state: dict[str, Any], patience: int | None) -> bool:
    """Whether the dev curve had not flattened when training stopped: its last real improvement
    (by more than ``min_delta``) is among the last ``patience`` epochs (the last epoch without
    patience), so more epochs might have helped."""
    if state["stopped_early"] or state["improved_epoch"] is None:
        return False
    return state["epoch"] - state["improved_epoch"] < (patience or 1)


def train(
    config: RunConfig,
    run_dir: Path,
    *,
    data_dir: str | Path | None = None,
    stop_after: int | None = None,
    progress: bool = True,
    restart_if_changed: bool = False,
) -> dict[str, Any]:
    """Train (or resume) the run in ``run_dir``; return the summary (also ``train.json``).

    ``stop_after`` ends the call after that many epochs, as an interruption would (for tests and
    for sharing a time budget); calling again resumes from ``checkpoint.pt``. A ``run_dir`` made
    with other settings is refused, or restarted from scratch with ``restart_if_changed``.
    """
    run_dir = Path(run_dir)
    environment.set_threads(config.threads)
    device = check_device_available(config.device)
    dataset = load_dataset(config, data_dir)
    tagset = dataset.tagset
    loss_function = training_loss(config.loss, config.loss_iterations)
    selection = config.selection_decoder or NATURAL_DECODER[config.loss]
    metric = PRIMARY_METRIC[dataset.task]

    torch.manual_seed(config.seed)
    scorer = build_scorer(config.scorer, dataset.train, len(tagset)).to(device)
    # Only now, when nothing left can fail on the settings, is the run directory written.
    record_run(run_dir, config, dataset, device, restart_if_changed=restart_if_changed)
    optimizer = torch.optim.Adam(scorer.parameters(), lr=config.resolved_learning_rate)
    steps_per_epoch = math.ceil(len(dataset.train) / config.batch_size)
    scheduler = linear_schedule(optimizer, config.epochs * steps_per_epoch, config.warmup)
    shuffler = torch.Generator().manual_seed(config.seed)
    state: dict[str, Any] = {
        "epoch": 0,
        "history": [],
        "best_epoch": None,
        "best_dev": -math.inf,
        "improved_epoch": None,  # the last step up: a dev score > min_delta above the previous step up
        "improved_dev": -math.inf,
        "stopped_early": False,
    }

    checkpoint = run_dir / CHECKPOINT_FILE
    if checkpoint.exists():
        saved = check_fields(checkpoint, load_torch(checkpoint, map_location=device), CHECKPOINT_FIELDS)
        scorer.load_state_dict(saved["scorer"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        shuffler.set_state(saved["shuffler"])
        torch.set_rng_state(saved["torch_rng"])
        state = saved["state"]

    epochs_this_call = 0
    for epoch in range(state["epoch"] + 1, config.epochs + 1):
        if state["stopped_early"] or (stop_after is not None and epochs_this_call >= stop_after):
            break
        started = time.perf_counter()
        scorer.train()
        total_loss = 0.0
        batches = shuffled_batches(len(dataset.train), config.batch_size, shuffler)
        for indices in tqdm(
            batches, desc=f"epoch {epoch}/{config.epochs}", disable=not progress, leave=False
        ):
            sentences = select(dataset.train, indices)
            chain = score_batch(scorer, sentences, tagset, device)
            target = targets(is_partial(config.loss), sentences, tagset)
            loss = loss_function(chain, target.to(device)).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(scorer.parameters(), config.grad_clip)
            optimizer.step()
            scheduler.step()
            total_loss += loss.item() * len(indices)

        predicted = predict(scorer, dataset.dev, tagset, DECODERS[selection], config.batch_size, device)
        dev_score = score(dataset.task, tagset, [s.tags for s in dataset.dev], predicted)[metric]
        entry = {
            "epoch": epoch,
            "train_loss": total_loss / len(dataset.train),
            f"dev_{metric}": dev_score,
            "learning_rate": scheduler.get_last_lr()[0],
            "seconds": time.perf_counter() - started,
        }
        if loss_function.method == "sparsemap":  # how sparse its predictions get over training
            entry["dev_support"] = mean_support(scorer, dataset.dev, tagset, config.batch_size, device)
        state["history"].append(entry)
        if dev_score > state["improved_dev"] + config.min_delta:  # a real step up, not a creep
            state["improved_epoch"], state["improved_dev"] = epoch, dev_score
        if dev_score > state["best_dev"]:
            state["best_epoch"], state["best_dev"] = epoch, dev_score
            save_model(run_dir / MODEL_FILE, scorer, tagset.tags, epoch, dev_score)
        state["epoch"] = epoch
        state["stopped_early"] = (
            config.patience is not None and epoch - state["improved_epoch"] >= config.patience
        )
        epochs_this_call += 1
        saved = {
            "scorer": scorer.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "shuffler": shuffler.get_state(),
            "torch_rng": torch.get_rng_state(),
            "state": state,
        }
        save_torch(checkpoint, saved)
        if progress:
            tqdm.write(
                f"epoch {epoch}: train loss {state['history'][-1]['train_loss']:.4f}, dev {metric} "
                f"({selection}) {dev_score:.4f}"
            )

    summary = {
        "finished": state["stopped_early"] or state["epoch"] == config.epochs,
        "epochs_done": state["epoch"],
        "epoch_cap": config.epochs,
        "stopped_by": "patience" if state["stopped_early"] else "epoch cap",
        "still_improving": still_improving(state, config.patience),
        "selection_decoder": selection,
        "selection_metric": metric,
        "best_epoch": state["best_epoch"],
        f"best_dev_{metric}": state["best_dev"],
        "history": state["history"],
    }
    if summary["finished"]:
        write_json(run_dir / SUMMARY_FILE, summary)
    return summary
