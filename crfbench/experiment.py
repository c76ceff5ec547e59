"""What training, evaluation and timing share: the run's data, the scorer's output as contract
arguments, and batched decoding."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import torch

from . import data, environment
from .batching import length_sorted_batches, select
from .config import RunConfig
from .data.types import Dataset, Sentence, TagSet
from .io import check_fields, read_json, write_json
from .models import Scorer
from .objectives import LOSSES, ChainScores, Inference, chain_scores, is_partial


def data_directory(dataset: str, configured: str | Path | None) -> Path | None:
    """The corpus folder a dataset is read from (none for the generated synthetic data)."""
    return None if dataset == "synthetic" else data.resolve_data_dir(configured)


def load_dataset(config: RunConfig, data_dir: str | Path | None = None) -> Dataset:
    """The run's dataset (``data_dir`` overrides the config's), cut to the configured sizes.

    A loss that needs full annotation on a partially annotated training split is refused.
    """
    directory = data_directory(config.dataset, data_dir or config.data_dir)
    dataset = data.load(config.dataset, directory, **config.dataset_options)
    partial = any(sentence.allowed is not None for sentence in dataset.train)
    if partial and not is_partial(config.loss):
        raise ValueError(
            f"loss: {config.loss!r} needs fully annotated training data, but {config.dataset}'s training "
            f"split is partially annotated; use {' or '.join(n for n in LOSSES if is_partial(n))}"
        )
    cut = lambda split, limit: split if limit is None else split[:limit]  # noqa: E731
    dataset = dataclasses.replace(
        dataset,
        train=cut(dataset.train, config.max_train_sentences),
        dev=cut(dataset.dev, config.max_eval_sentences),
        test=cut(dataset.test, config.max_eval_sentences),
    )
    for split in ("train", "dev", "test"):
        if not getattr(dataset, split):
            raise ValueError(
                f"dataset: {config.dataset}'s {split} split has no sentences ({dataset.options})"
            )
    return dataset


CONFIG_FILE = "config.json"
CHECKPOINT_FILE, MODEL_FILE, SUMMARY_FILE = "checkpoint.pt", "model.pt", "train.json"
EVALUATION_FILE, SENTENCES_FILE, SWEEP_FILE = "evaluation.csv", "sentences.csv", "sweep.csv"
TIMING_FILE = "timing.csv"
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
    path = Path(run_dir) / CONFIG_FILE
    if path.exists():
        previous = check_fields(path, read_json(path), ("config",))["config"]
        if previous == config.to_dict():
            return
        if not restart_if_changed:
            raise ValueError(
                f"{path}: this run directory was made with different settings; use a new one "
                "(or --restart-if-changed to discard that run)"
            )
        for name in RUN_FILES:
            (Path(run_dir) / name).unlink(missing_ok=True)
    header = {
        "config": config.to_dict(),
        "dataset": describe_dataset(dataset),
        "environment": environment.describe(device),
    }
    write_json(path, header)


def read_run_config(run_dir: Path) -> RunConfig:
    """The settings recorded in ``run_dir/config.json``."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a run directory (no {CONFIG_FILE})")
    return RunConfig.from_dict(check_fields(path, read_json(path), ("config",))["config"])


def describe_dataset(dataset: Dataset) -> dict[str, object]:
    """The dataset facts recorded with every run (never any text)."""
    return {
        "name": dataset.name,
        "task": dataset.task,
        "protocol": dataset.protocol,
        "tags": len(dataset.tagset),
        "constrained": dataset.tagset.constrained,
        "sentences": {"train": len(dataset.train), "dev": len(dataset.dev), "test": len(dataset.test)},
        "options": dataset.options,
        "sources": dataset.sources,
    }


def score_batch(
    scorer: Scorer, sentences: Sequence[Sentence], tagset: TagSet, device: torch.device
) -> ChainScores:
    """Network forward pass for a batch, as constrained contract arguments on ``device``."""
    features = {name: tensor.to(device) for name, tensor in scorer.featurize(sentences).items()}
    return chain_scores(scorer(features), tagset)


@torch.no_grad()
def predict(
    scorer: Scorer,
    sentences: Sequence[Sentence],
    tagset: TagSet,
    decoder: Inference,
    batch_size: int,
    device: torch.device,
) -> list[list[int]]:
    """Decoded tag ids for every sentence, in the input order."""
    scorer.eval()
    predictions: list[list[int]] = [[] for _ in sentences]
    for indices in length_sorted_batches(sentences, batch_size):
        batch = select(sentences, indices)
        tags = decoder(score_batch(scorer, batch, tagset, device)).cpu()
        for row, index in enumerate(indices):
            predictions[index] = tags[row, : len(batch[row].tokens)].tolist()
    return predictions


@torch.no_grad()
def mean_support(
    scorer: Scorer, sentences: Sequence[Sentence], tagset: TagSet, batch_size: int, device: torch.device
) -> float:
    """Mean number of tag sequences in each sentence's SparseMAP support under the model (its
    default solver): how sparse SparseMAP's predictions are, as the SparseMAP paper tracks over
    training (its Fig. 4)."""
    scorer.eval()
    solve = Inference("sparsemap", "solve", {})
    paths = 0
    for indices in length_sorted_batches(sentences, batch_size):
        result = solve(score_batch(scorer, select(sentences, indices), tagset, device))
        paths += int((result.weights > 0).sum())
    return paths / len(sentences)
