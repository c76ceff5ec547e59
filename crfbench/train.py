"""Train a scorer with one of the paper's losses; checkpoint every epoch, resume when interrupted.

Adam at a constant learning rate, cut on plateaus of the dev score (torch's ``ReduceLROnPlateau``,
the same rule for every loss): when ``config.patience`` epochs in a row have not raised the dev
score by more than ``config.min_delta`` over its last step up (a curve creeping up by less is flat
enough), the rate is multiplied by ``config.lr_factor``, down to ``config.min_learning_rate``. The
next plateau after ``config.lr_reductions`` cuts, or one at the floor, ends training (early
stopping); the epoch cap ``config.epochs`` is a safety net set high enough not to end a run that
still improves (``train.json`` records when it did). The loss is averaged over the sentences of a
batch; the model kept is the best dev epoch's, on the task's primary metric with the selection
decoder. Every epoch writes one line (loss, dev score, learning rate, seconds) to stderr, the
pipeline's log (``crfbench.console``). With a ``config.learning_rates`` grid, one run per rate is
trained in a sub-folder and the best dev score's is the run's (``crfbench.tuning``). What the run's
folder holds, and how it is read and written: ``crfbench.run_folder``.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import console, environment
from .batching import length_pooled_batches, select, targets
from .config import RunConfig, check_device_available
from .data.types import Dataset
from .experiment import load_dataset, mean_support, predict, score_batch
from .io import save_atomic
from .metrics import PRIMARY_METRIC, score
from .models import build_scorer
from .objectives import DECODERS, NATURAL_DECODER, is_partial, training_loss
from .run_folder import load_checkpoint, record_run, save_checkpoint, save_model, write_summary
from .schema import MODEL_FILE
from .tuning import choose_learning_rate

Log = Callable[[str], object]


@dataclass(frozen=True)
class _Call:
    """How one call of :func:`train` runs, the same for every rate of a grid (see ``train``)."""

    stop_after: int | None
    progress: bool
    restart_if_changed: bool
    log: Log | None


def plateau_schedule(
    optimizer: torch.optim.Optimizer, config: RunConfig
) -> torch.optim.lr_scheduler.ReduceLROnPlateau:
    """The learning-rate cuts of ``config`` on the dev score (torch counts the epochs without a
    step up before a cut beyond its ``patience``, so it gets one less than ours)."""
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer,
        mode="max",
        factor=config.lr_factor,
        patience=(config.patience or 1) - 1,
        threshold=config.min_delta,
        threshold_mode="abs",
        min_lr=config.min_learning_rate,
        eps=0.0,  # cut any rate, however small (torch ignores cuts under 1e-8 by default)
    )


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
    log: Log | None = console.log,
) -> dict[str, Any]:
    """Train (or resume) the run in ``run_dir``; return the summary (also ``train.json``).

    ``stop_after`` ends the call after that many epochs, as an interruption would (for tests and
    for sharing a time budget); calling again resumes from ``checkpoint.pt``. A ``run_dir`` made
    with other settings is refused, or restarted from scratch with ``restart_if_changed``.
    ``progress`` shows a bar over each epoch's batches on a terminal; ``log`` gets a line per epoch
    (None: silent).
    """
    environment.set_threads(config.threads)
    device = check_device_available(config.device)
    dataset = load_dataset(config, data_dir)
    trainer = _train_grid if config.learning_rates is not None else _train_run
    call = _Call(stop_after, progress, restart_if_changed, log)
    summary, _ = trainer(config, Path(run_dir), dataset, device, call)
    return summary


def grid_folder(run_dir: Path, rate: float) -> Path:
    """The sub-folder of ``run_dir`` that holds its grid's run at learning rate ``rate``."""
    return Path(run_dir) / f"lr-{rate:g}"


def _train_grid(
    config: RunConfig, run_dir: Path, dataset: Dataset, device: torch.device, call: _Call
) -> tuple[dict[str, Any], int]:
    """Train one run per rate of ``config.learning_rates`` (each in its ``grid_folder``, resumed
    like any run), then make the best dev score's the run's: its model and curve, with every
    rate's best dev score and the rate to try next (``choose_learning_rate``); the summary and the
    epochs this call trained."""
    assert config.learning_rates is not None
    record_run(run_dir, config, dataset, device, restart_if_changed=call.restart_if_changed)
    log = call.log
    summaries = {}
    left, trained_here = call.stop_after, 0
    for rate in config.learning_rates:
        if left is not None and left < 1:
            break
        if log is not None:
            log(f"learning rate {rate:g} ({grid_folder(run_dir, rate)})")
        summary, trained = _train_run(
            config.at_learning_rate(rate),
            grid_folder(run_dir, rate),
            dataset,
            device,
            dataclasses.replace(call, stop_after=left),
        )
        summaries[rate] = summary
        trained_here += trained
        left = None if left is None else left - trained
    metric = PRIMARY_METRIC[dataset.task]
    finished = len(summaries) == len(config.learning_rates)
    finished = finished and all(summary["finished"] for summary in summaries.values())
    if not finished:  # interrupted (stop_after): the last rate's run says how far it got
        return list(summaries.values())[-1] | {"finished": False}, trained_here
    scores = {rate: summary[f"best_dev_{metric}"] for rate, summary in summaries.items()}
    best, following = choose_learning_rate(scores)
    chosen = summaries[best] | {
        "learning_rate": best,
        "learning_rate_grid": {f"{rate:g}": value for rate, value in scores.items()},
        "next_learning_rate": following,
    }
    source = grid_folder(run_dir, best) / MODEL_FILE
    save_atomic(run_dir / MODEL_FILE, lambda temporary: shutil.copyfile(source, temporary))
    if log is not None:
        widen = "" if following is None else f"; at the grid's edge: try {following:g} next"
        log(f"chosen learning rate {best:g} (dev {metric} {scores[best]:.4f}){widen}")
    write_summary(run_dir, chosen)
    return chosen, trained_here


def _train_run(
    config: RunConfig, run_dir: Path, dataset: Dataset, device: torch.device, call: _Call
) -> tuple[dict[str, Any], int]:
    """Train (or resume) one run at one learning rate; the summary and the epochs this call trained."""
    stop_after, progress, log = call.stop_after, call.progress, call.log
    tagset = dataset.tagset
    loss_function = training_loss(config.loss, config.loss_iterations)
    selection = config.selection_decoder or NATURAL_DECODER[config.loss]
    if selection is None:  # every loss of LOSS_USES names its natural decoder
        raise ValueError(f"loss {config.loss!r} has no natural decoder: give selection_decoder")
    metric = PRIMARY_METRIC[dataset.task]

    torch.manual_seed(config.seed)
    scorer = build_scorer(config.scorer, dataset.train, len(tagset)).to(device)
    scorer.prepare(dataset.train, dataset.dev)  # frozen features: cached once per split, reused
    # Only now, when nothing left can fail on the settings, is the run directory written.
    record_run(run_dir, config, dataset, device, restart_if_changed=call.restart_if_changed)
    optimizer = torch.optim.Adam(scorer.parameters(), lr=config.resolved_learning_rate)
    scheduler = plateau_schedule(optimizer, config)
    shuffler = torch.Generator().manual_seed(config.seed)
    state: dict[str, Any] = {
        "epoch": 0,
        "history": [],
        "best_epoch": None,
        "best_dev": -math.inf,
        "improved_epoch": None,  # the last step up: a dev score > min_delta above the previous step up
        "improved_dev": -math.inf,
        "plateaus": 0,  # plateaus met: each cut the learning rate, but the last, which ends training
        "stopped_early": False,
    }

    saved = load_checkpoint(run_dir, device)
    if saved is not None:
        scorer.load_state_dict(saved["scorer"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        shuffler.set_state(saved["shuffler"])
        torch.set_rng_state(saved["torch_rng"])
        state = saved["state"]

    lengths = [len(sentence.tokens) for sentence in dataset.train]
    trained = 0
    for epoch in range(state["epoch"] + 1, config.epochs + 1):
        if state["stopped_early"] or (stop_after is not None and trained >= stop_after):
            break
        started = time.perf_counter()
        learning_rate = optimizer.param_groups[0]["lr"]
        scorer.train()
        total_loss = 0.0
        batches = length_pooled_batches(lengths, config.batch_size, config.length_pool, shuffler)
        for indices in console.progress_bar(batches, f"epoch {epoch}/{config.epochs}", progress=progress):
            sentences = select(dataset.train, indices)
            chain = score_batch(scorer, sentences, tagset, device)
            target = targets(is_partial(config.loss), sentences, tagset)
            loss = loss_function(chain, target.to(device)).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(scorer.parameters(), config.grad_clip)
            optimizer.step()
            total_loss += loss.item() * len(indices)

        predicted = predict(scorer, dataset.dev, tagset, DECODERS[selection], config.batch_size, device)
        dev_score = score(dataset.task, tagset, [s.tags for s in dataset.dev], predicted)[metric]
        entry = {
            "epoch": epoch,
            "train_loss": total_loss / len(dataset.train),
            f"dev_{metric}": dev_score,
            "learning_rate": learning_rate,  # the rate this epoch trained at
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
        if config.patience is not None:
            state["stopped_early"] = _plateau_ends_training(scheduler, dev_score, state, config)
        save_checkpoint(
            run_dir,
            {
                "scorer": scorer.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "shuffler": shuffler.get_state(),
                "torch_rng": torch.get_rng_state(),
                "state": state,
            },
        )
        trained += 1
        if log is not None:
            log(
                f"epoch {epoch}/{config.epochs}: train loss {entry['train_loss']:.4f}, dev {metric} "
                f"({selection}) {dev_score:.4f}, lr {learning_rate:.3g}, {entry['seconds']:.1f} s"
                + (" (stopping: the dev score is flat)" if state["stopped_early"] else "")
            )

    summary = {
        "finished": state["stopped_early"] or state["epoch"] == config.epochs,
        "epochs_done": state["epoch"],
        "epoch_cap": config.epochs,
        "stopped_by": "patience" if state["stopped_early"] else "epoch cap",
        "still_improving": still_improving(state, config.patience),
        "selection_decoder": selection,
        "selection_metric": metric,
        "learning_rate": config.resolved_learning_rate,
        "learning_rate_cuts": state["plateaus"] - state["stopped_early"],
        "best_epoch": state["best_epoch"],
        f"best_dev_{metric}": state["best_dev"],
        "history": state["history"],
    }
    if summary["finished"]:
        write_summary(run_dir, summary)
    return summary, trained


def _plateau_ends_training(
    scheduler: torch.optim.lr_scheduler.ReduceLROnPlateau,
    dev_score: float,
    state: dict[str, Any],
    config: RunConfig,
) -> bool:
    """Step the schedule on this epoch's dev score; whether a plateau ends training: one met after
    ``config.lr_reductions`` cuts, or one that could not cut the rate (at its floor)."""
    before = scheduler.get_last_lr()[0]
    scheduler.step(dev_score)
    if scheduler.num_bad_epochs or state["improved_epoch"] == state["epoch"]:
        return False  # no plateau: torch resets its count of epochs without a step up at each
    state["plateaus"] += 1
    return bool(state["plateaus"] > config.lr_reductions or scheduler.get_last_lr()[0] >= before)
