"""Train the parser with one loss; keep the model of the best dev UAS; choose the learning rate.

Adam at a constant learning rate (the paper tunes it on ``run.LEARNING_RATES``; no schedule is
mentioned), batches of ``batch_size`` sentences in a seeded random order, the loss averaged over a
batch's sentences. After every epoch the dev set is parsed with the MAP tree and scored with UAS
(punctuation included, ``metrics``); the best epoch's model is saved to ``model.pt``, and training
stops once ``patience`` epochs in a row have not raised the dev UAS (or at the epoch cap). The
untrained model's dev UAS is recorded as epoch 0: near 1/n, and 0 on a few short sentences, as the
untrained MLP's tanh is near-linear on its small inputs, so an arc's score is a head term plus a
modifier term, every word takes the same best head and the MAP tree is a star. The SparseMAP losses'
curves also record the mean size of SparseMAP's support on dev (``dev_support``, trees per
sentence), which the paper sees shrink as training goes on. Each epoch prints one line (training
loss, dev UAS, learning rate, seconds) through ``log``, by default to stderr (the pipeline's log); a
progress bar over the batches shows on a terminal only (``crfbench.console``). A run is not resumed:
calling again retrains it from the start.

Learning rate (``choose_run``): the run with the best dev UAS among those trained at different
rates wins, by the rule every trainer shares (``crfbench.tuning.choose_learning_rate``), which also
names the next rate to try when the best sits at an edge of the grid.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from .. import console
from ..batching import length_pooled_batches
from ..io import CorruptFileError, check_fields, read_json, write_json
from ..schema import MODEL_FILE, SUMMARY_FILE
from ..tuning import choose_learning_rate
from ..uses import PARSER_LOSSES
from .losses import parser_loss
from .metrics import attachment
from .model import ArcScorer, Vocabulary, encode
from .run import (
    ParseConfig,
    load_data,
    mean_support,
    predict,
    read_config,
    record_run,
    save_model,
    start,
)
from .treebank import ParseData


def dev_uas(scorer: ArcScorer, data: ParseData, batch_size: int, device: torch.device) -> float:
    """The UAS (punctuation included) of the MAP trees on the dev set."""
    predicted = predict(scorer, data.dev, batch_size, device)
    return attachment([p.heads for p in data.dev], predicted, [p.punct for p in data.dev]).uas


def tracks_support(loss: str) -> bool:
    """Whether a run's dev curve records SparseMAP's mean support size (``dev_support``): for the
    losses of the SparseMAP method, whose predictions the paper sees grow sparser over training."""
    return PARSER_LOSSES[loss].method == "tree-sparsemap"


def dev_entry(
    scorer: ArcScorer,
    config: ParseConfig,
    data: ParseData,
    device: torch.device,
    epoch: int,
    train_loss: float | None,
    started: float,
) -> dict[str, Any]:
    """One point of the dev curve: the epoch's training loss, the dev UAS, the (constant) learning
    rate, the seconds since ``started`` (dev parsing included) and, for the SparseMAP losses, the
    dev support size."""
    entry: dict[str, Any] = {
        "epoch": epoch,
        "train_loss": train_loss,
        "dev_uas": dev_uas(scorer, data, config.batch_size, device),
        "learning_rate": config.learning_rate,
    }
    if tracks_support(config.loss):
        entry["dev_support"] = mean_support(scorer, data.dev, config.batch_size, device)
    return entry | {"seconds": time.perf_counter() - started}


def train(
    config: ParseConfig,
    run_dir: Path,
    *,
    data: ParseData | None = None,
    data_dir: str | Path | None = None,
    log: Callable[[str], object] | None = console.log,
    restart_if_changed: bool = False,
) -> dict[str, Any]:
    """Train the run in ``run_dir``; return the summary (also written to ``train.json``).

    ``data`` replaces the dataset that ``config.dataset`` names (tests train on a few sentences of
    a dev file); it is still cut to the config's sizes. A folder made with other settings is
    refused, or emptied first with ``restart_if_changed`` (``run.record_run``).
    """
    run_dir = Path(run_dir)
    device = start(config)
    loss_function = parser_loss(config.loss)
    data = (
        load_data(config, data_dir)
        if data is None
        else data.cut(config.max_train_sentences, config.max_eval_sentences)
    )
    if not data.train or not data.dev:
        raise ValueError(f"{data.name}: training needs train and dev sentences")
    torch.manual_seed(config.seed)
    scorer = ArcScorer(config.parser, Vocabulary.build(data.train)).to(device)
    record_run(run_dir, config, data, device, restart_if_changed=restart_if_changed)
    optimizer = torch.optim.Adam(scorer.parameters(), lr=config.learning_rate)
    shuffler = torch.Generator().manual_seed(config.seed)

    history = [dev_entry(scorer, config, data, device, 0, None, time.perf_counter())]
    best = history[0]["dev_uas"]
    best_epoch, stopped_by = 0, "epoch cap"
    save_model(run_dir / MODEL_FILE, scorer, 0, best)
    _log(log, history[-1])
    lengths = [len(parse.words) for parse in data.train]
    for epoch in range(1, config.epochs + 1):
        started = time.perf_counter()
        scorer.train()
        total = 0.0
        batches = length_pooled_batches(lengths, config.batch_size, config.length_pool, shuffler)
        for indices in console.progress_bar(batches, f"epoch {epoch}/{config.epochs}"):
            batch = encode([data.train[i] for i in indices], scorer.vocabulary, device)
            scores = scorer(batch.words, batch.upos, batch.lengths)
            loss = loss_function(scores, batch.lengths, batch.heads).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(indices)
        history.append(dev_entry(scorer, config, data, device, epoch, total / len(data.train), started))
        uas = history[-1]["dev_uas"]
        _log(log, history[-1])
        if uas > best:
            best, best_epoch = uas, epoch
            save_model(run_dir / MODEL_FILE, scorer, epoch, uas)
        if epoch - best_epoch >= config.patience:
            stopped_by = "patience"
            break

    summary = {
        "finished": True,
        "epochs_done": history[-1]["epoch"],
        "epoch_cap": config.epochs,
        "stopped_by": stopped_by,
        # at the cap, the last better dev UAS is among the last `patience` epochs: more might help
        "still_improving": stopped_by == "epoch cap",
        "selection_metric": "uas",
        "selection_decoder": "chu-liu-edmonds",
        "learning_rate": config.learning_rate,
        "best_epoch": best_epoch,
        "best_dev_uas": best,
        "history": history,
    }
    write_json(run_dir / SUMMARY_FILE, summary)
    return summary


def _log(log: Callable[[str], object] | None, entry: Mapping[str, Any]) -> None:
    if log is None:
        return
    loss = "-" if entry["train_loss"] is None else f"{entry['train_loss']:.4f}"
    support = f", dev support {entry['dev_support']:.2f}" if "dev_support" in entry else ""
    log(
        f"epoch {entry['epoch']}: train loss {loss}, dev UAS {100 * entry['dev_uas']:.2f}{support}, "
        f"lr {entry['learning_rate']:.3g}, {entry['seconds']:.1f} s"
    )


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A finished run's ``train.json``; FileNotFoundError when training has not finished there."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no finished training; run `crfbench parse train` first")
    summary: dict[str, Any] = check_fields(path, read_json(path), ("best_dev_uas", "learning_rate"))
    return summary


def choose_run(run_dirs: list[Path]) -> tuple[Path, float | None]:
    """Of finished runs that differ only in learning rate, the one with the best dev UAS and the
    learning rate to try next (``choose_learning_rate``); ValueError when their other settings
    differ."""
    if not run_dirs:
        raise ValueError("choose_run: no run directories")
    configs = {Path(d): read_config(d) for d in run_dirs}
    reference = next(iter(configs.values())).to_dict() | {"learning_rate": None}
    for run_dir, config in configs.items():
        if config.to_dict() | {"learning_rate": None} != reference:
            raise ValueError(
                f"{run_dir}: its settings differ from {run_dirs[0]}'s in more than the learning rate"
            )
    by_rate = {config.learning_rate: Path(d) for d, config in configs.items()}
    if len(by_rate) != len(configs):
        raise ValueError("choose_run: two runs share a learning rate")
    best, following = choose_learning_rate(
        {rate: read_summary(d)["best_dev_uas"] for rate, d in by_rate.items()}
    )
    return by_rate[best], following


def record_choice(run_dirs: list[Path], out: Path) -> dict[str, Any]:
    """Choose among finished runs that differ only in learning rate (``choose_run``) and write the
    choice to ``out`` (JSON): the chosen ``learning_rate``, the ``next_learning_rate`` to try (None
    unless the best is at an edge of the rates tried), and each rate's ``dev_uas`` and run folder,
    rates written as ``repr`` of the float. The pipeline trains every seed at the chosen rate."""
    chosen, following = choose_run(run_dirs)
    runs = sorted(((read_config(d).learning_rate, Path(d)) for d in run_dirs), key=lambda item: item[0])
    choice = {
        "learning_rate": read_config(chosen).learning_rate,
        "next_learning_rate": following,
        "dev_uas": {repr(rate): read_summary(d)["best_dev_uas"] for rate, d in runs},
        "runs": {repr(rate): str(d) for rate, d in runs},
    }
    write_json(Path(out), choice)
    return choice


def chosen_learning_rate(path: Path) -> float:
    """The learning rate of a choice written by ``record_choice``; CorruptFileError naming the file
    when it holds none."""
    rate = check_fields(Path(path), read_json(Path(path)), ("learning_rate",))["learning_rate"]
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
        raise CorruptFileError(f"{path}: learning_rate must be a positive number, got {rate!r}")
    return float(rate)
