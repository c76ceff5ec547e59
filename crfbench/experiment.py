"""What training, evaluation, sweep and timing compute alike: the run's data, the columns naming the
run in their tables, the scorer's output as contract arguments, and batched decoding. Reading and
writing a run's folder is ``crfbench.run_folder``'s."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from . import data
from .batching import length_sorted_batches, select
from .config import RunConfig
from .data.types import Dataset, Sentence, TagSet
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


def run_description(config: RunConfig, protocol: str) -> dict[str, object]:
    """The columns that say which run a result row comes from (evaluation and timing rows)."""
    return {
        "dataset": config.dataset,
        "dataset_options": json.dumps(config.dataset_options, sort_keys=True),
        "protocol": protocol,
        "encoder_name": config.encoder_name,
        "encoder": config.scorer.encoder,
        "layers": config.scorer.layers,
        "loss": config.loss,
        "seed": config.seed,
        "backend": "torch",
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
        # solve returns SparseMAP's result (its .weights), not the Tensor Inference declares
        result: Any = solve(score_batch(scorer, select(sentences, indices), tagset, device))
        paths += int((result.weights > 0).sum())
    return paths / len(sentences)
