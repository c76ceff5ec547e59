"""The OCR experiment's data (:mod:`crfbench.bethe.ocr`): words padded into tensors with their
random-feature mean maps, the training words' distinct tag sequences (the templates), the fold's
train/dev/test split, minibatches, and character accuracy."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from ..data.ocr import LETTERS, PIXELS, Word

if TYPE_CHECKING:
    from .ocr import Settings

NUM_TAGS = len(LETTERS)


@dataclass(frozen=True)
class Words:
    """Words padded into tensors: ``pixels`` (B, N, 128), ``lengths`` (B,), ``tags`` (B, N) with -1
    on padding, ``features`` (B, D) the mean maps φ(x)."""

    pixels: Tensor
    lengths: Tensor
    tags: Tensor
    features: Tensor

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def subset(self, index: Tensor) -> Words:
        """The words at ``index``, padded only to their longest."""
        length = int(self.lengths[index].max())
        return Words(
            self.pixels[index, :length], self.lengths[index], self.tags[index, :length], self.features[index]
        )

    def chunks(self, size: int = 256) -> Iterator[Words]:
        """Consecutive subsets of at most ``size`` words (for evaluation)."""
        for first in range(0, len(self), size):
            yield self.subset(torch.arange(first, min(first + size, len(self))))


@dataclass(frozen=True)
class Templates:
    """The distinct training words: ``counts`` (K, 26) letter counts, ``one_hot`` (K, M, 26) tag
    sequences zero past ``lengths`` (K,) (float, as the energies compare them with mask sums)."""

    counts: Tensor
    one_hot: Tensor
    lengths: Tensor


def mean_map(pixels: Tensor, lengths: Tensor, projection: Tensor, phase: Tensor) -> Tensor:
    """φ (B, D): the mean over each word's letters of sqrt(2/D) cos(W x_i + b); ``pixels`` (B, N, 128),
    ``projection`` W (128, D), ``phase`` b (D,)."""
    features = math.sqrt(2 / phase.shape[0]) * torch.cos(pixels @ projection + phase)  # (B, N, D)
    mask = torch.arange(pixels.shape[1])[None, :] < lengths[:, None]
    return (features * mask[..., None]).sum(1) / lengths[:, None]


def pad(words: Sequence[Word], projection: Tensor, phase: Tensor) -> Words:
    """``words`` as padded tensors with their mean maps."""
    length = max(len(word.tags) for word in words)
    pixels = torch.zeros(len(words), length, PIXELS)
    tags = torch.full((len(words), length), -1, dtype=torch.int64)
    for row, word in enumerate(words):
        pixels[row, : len(word.tags)] = torch.from_numpy(word.pixels)
        tags[row, : len(word.tags)] = torch.from_numpy(word.tags)
    lengths = torch.tensor([len(word.tags) for word in words], dtype=torch.int64)
    features = [  # by chunks of words: the (B, N, D) features of all words at once can take a GB
        mean_map(pixels[first : first + 512], lengths[first : first + 512], projection, phase)
        for first in range(0, len(words), 512)
    ]
    return Words(pixels, lengths, tags, torch.cat(features))


def templates(words: Sequence[Word], length: int) -> Templates:
    """The distinct tag sequences of ``words`` (sorted, so the order does not depend on the words'),
    one-hot padded to ``length`` ≥ the longest word to be scored."""
    distinct = sorted({tuple(word.tags.tolist()) for word in words})
    one_hot = torch.zeros(len(distinct), length, NUM_TAGS)
    for row, tags in enumerate(distinct):
        one_hot[row, torch.arange(len(tags)), torch.tensor(tags)] = 1.0
    lengths = torch.tensor([float(len(tags)) for tags in distinct])
    return Templates(one_hot.sum(1), one_hot, lengths)


def split(
    words: Sequence[Word], test_fold: int, settings: Settings, rng: np.random.Generator
) -> tuple[list[Word], list[Word], list[Word]]:
    """(train, dev, test): fold ``test_fold`` is the test set; of the other folds' words (subsampled
    to ``max_train_words``) a random ``dev_fraction`` is dev, the rest train."""
    rest = [word for word in words if word.fold != test_fold]
    test = [word for word in words if word.fold == test_fold]
    if not test or not rest:
        raise ValueError(f"fold {test_fold} leaves an empty training or test set")
    order = rng.permutation(len(rest))
    if settings.max_train_words is not None:
        order = order[: settings.max_train_words]
    dev_size = max(1, round(settings.dev_fraction * len(order)))
    return [rest[i] for i in order[dev_size:]], [rest[i] for i in order[:dev_size]], test


def batches(words: Words, size: int, seed: int) -> Callable[[int], Iterator[Words]]:
    """``fit``'s minibatches: a permutation drawn from (seed, epoch), so that runs repeat."""

    def epoch_batches(epoch: int) -> Iterator[Words]:
        order = torch.from_numpy(np.random.default_rng([seed, epoch]).permutation(len(words)))
        for first in range(0, len(words), size):
            yield words.subset(order[first : first + size])

    return epoch_batches


def char_counts(predicted: Tensor, tags: Tensor) -> tuple[Tensor, Tensor]:
    """(B,) correct letters and letters of each word: ``predicted`` and gold ``tags`` (B, N), -1 on
    the gold's padding."""
    valid = tags >= 0
    return ((predicted == tags) & valid).sum(1), valid.sum(1)


def word_counts(predict: Callable[[Words], Tensor], words: Words) -> tuple[np.ndarray, np.ndarray]:
    """(B,) correct letters and letters of each of ``words`` under ``predict``, by chunks, no
    gradients."""
    correct, total = [], []
    with torch.no_grad():
        for chunk in words.chunks():
            right, count = char_counts(predict(chunk), chunk.tags)
            correct.append(right)
            total.append(count)
    return torch.cat(correct).numpy(), torch.cat(total).numpy()


def accuracy(predict: Callable[[Words], Tensor], words: Words) -> float:
    """Character accuracy in % of ``predict`` (B, N) tags over ``words``."""
    correct, total = word_counts(predict, words)
    return 100.0 * correct.sum() / total.sum()
