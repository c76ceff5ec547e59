"""Random padded batches of chain-CRF scores, shared by the tests, the agreement report and the
benchmarks: one builder, so that every check and every timing draws its instances the same way.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Scale of the garbage written past each sequence's length (large values and -inf).
GARBAGE_SCALE = 40.0


class RandomBatch(NamedTuple):
    """A padded batch in NumPy float64, with a planted gold path of finite score per sequence."""

    emissions: np.ndarray  # (B, N, T)
    transitions: np.ndarray  # (T, T) or (B, N-1, T, T)
    lengths: np.ndarray  # (B,) int64
    start: np.ndarray | None  # (T,)
    end: np.ndarray | None  # (T,)
    gold: np.ndarray  # (B, N) int64, -1 on padding


def random_batch(
    rng: np.random.Generator,
    *,
    batch: int,
    length: int,
    num_tags: int,
    lengths: np.ndarray | list[int] | None = None,
    per_position: bool = True,
    start: bool = True,
    end: bool = True,
    neg_inf: float = 0.0,
    scale: float = 1.0,
    garbage: bool = True,
) -> RandomBatch:
    """A random batch: N(0, scale²) scores, each entry ``-inf`` with probability ``neg_inf``.

    A random gold path is then planted in every sequence (its emissions, transitions and
    boundary scores made finite), so each sequence has at least one finite tag sequence. With
    ``garbage``, values past each length are replaced by large random values and ``-inf``.
    """
    if lengths is None:
        lengths = rng.integers(1, length + 1, size=batch)
        lengths[rng.integers(batch)] = length
    lengths = np.asarray(lengths, dtype=np.int64)
    assert lengths.shape == (batch,) and lengths.min() >= 1 and lengths.max() <= length

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        x = rng.normal(0.0, scale, size=shape)
        if neg_inf > 0:
            x[rng.random(shape) < neg_inf] = -np.inf
        return x

    emissions = draw((batch, length, num_tags))
    trans_shape = (batch, length - 1, num_tags, num_tags) if per_position else (num_tags, num_tags)
    transitions = draw(trans_shape)
    start_v = draw((num_tags,)) if start else None
    end_v = draw((num_tags,)) if end else None
    gold = -np.ones((batch, length), dtype=np.int64)
    for b in range(batch):
        n = int(lengths[b])
        y = rng.integers(num_tags, size=n)
        gold[b, :n] = y
        for i in range(n):
            if not np.isfinite(emissions[b, i, y[i]]):
                emissions[b, i, y[i]] = rng.normal(0.0, scale)
        for i in range(n - 1):
            block = transitions[b, i] if per_position else transitions
            if not np.isfinite(block[y[i], y[i + 1]]):
                block[y[i], y[i + 1]] = rng.normal(0.0, scale)
        if start_v is not None and not np.isfinite(start_v[y[0]]):
            start_v[y[0]] = rng.normal(0.0, scale)
        if end_v is not None and not np.isfinite(end_v[y[-1]]):
            end_v[y[-1]] = rng.normal(0.0, scale)
    if garbage:
        for b in range(batch):
            n = int(lengths[b])
            pad = emissions[b, n:]
            pad[...] = rng.normal(0.0, GARBAGE_SCALE, size=pad.shape)
            pad[rng.random(pad.shape) < 0.3] = -np.inf
            if per_position:
                tpad = transitions[b, max(n - 1, 0) :]
                tpad[...] = rng.normal(0.0, GARBAGE_SCALE, size=tpad.shape)
                tpad[rng.random(tpad.shape) < 0.3] = -np.inf
    return RandomBatch(emissions, transitions, lengths, start_v, end_v, gold)
