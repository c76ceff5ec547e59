"""Train a scorer with one of the paper's losses; checkpoint every epoch, resume when interrupted.

Adam with a linear schedule (warm-up over ``config.warmup`` of the updates, then linear decay to
zero at the epoch cap), the loss averaged over the sentences of a batch, dev-set model selection
on the task's primary metric with the selection decoder, and early stopping: training ends once
``config.patience`` epochs in a row have not raised the dev score by more than ``config.min_delta``
over the last such step up (a curve creeping up by less is flat enough). What the run's folder
holds, and how it is read and written: ``crfbench.run_folder``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from . import environment
from .batching import select, shuffled_batches, targets
from .config import RunConfig, check_device_available
from .experiment import load_dataset, mean_support, predict, score_batch
from .metrics import PRIMARY_METRIC, score
from .models import build_scorer
from .objectives import DECODERS, NATURAL_DECODER, is_partial, training_loss
from .run_folder import load_checkpoint, record_run, save_checkpoint, save_model, write_summary
from .schema import MODEL_FILE


def linear_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup: float):
    """Learning-rate factor rising linearly over the warm-up steps, then falling linearly to 0."""
    warmup_steps = math.ceil(warmup * total_steps)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


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
    if selection is None:  # every loss of LOSS_USES names its natural decoder
        raise ValueError(f"loss {config.loss!r} has no natural decoder: give selection_decoder")
    metric = PRIMARY_METRIC[dataset.task]

    torch.manual_seed(config.seed)
    scorer = build_scorer(config.scorer, dataset.train, len(tagset)).to(device)
    scorer.prepare(dataset.train, dataset.dev)  # frozen features: cached once per split, reused
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

    saved = load_checkpoint(run_dir, device)
    if saved is not None:
        scorer.load_state_dict(saved["scorer"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        shuffler.set_state(saved["shuffler"])
        torch.set_rng_state(saved["torch_rng"])
        state = saved["state"]

    for epochs_this_call, epoch in enumerate(range(state["epoch"] + 1, config.epochs + 1)):
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
        saved = {
            "scorer": scorer.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "shuffler": shuffler.get_state(),
            "torch_rng": torch.get_rng_state(),
            "state": state,
        }
        save_checkpoint(run_dir, saved)
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
        write_summary(run_dir, summary)
    return summary
