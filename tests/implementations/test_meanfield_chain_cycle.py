"""Why mean field collapsed on segmentation and NER (issue 12, anomalies b and c), on a synthetic
BIES task: scores that favour the gold tags, under the BIES constraints.

With forbidden transitions at a large finite penalty (the former default, -1e4), the expected
penalty from a neighbour's stray mass dwarfs every score, and the parallel updates lock into a
2-cycle. A chain is bipartite: the cells (i, k) with i + k even and those with i + k odd form two
independent block-coordinate runs. Each run is consistent on its own (its snapshot is a valid
sequence), but the iterate shows one run at even and the other at odd positions: invalid arcs,
frozen for every k past a few (the identical MF-5/MF-10 violation cells), and labels that depend
on the parity of k (a model trained through 10 updates, decoded through 5, reads the other run).
With the default penalty 0 mean field ignores the constraints instead: no cycle, k = 5 and k = 10
agree and beat the large penalty, but it breaks constraints and stays well below Viterbi on this
segmentation task, as the paper reports (Table 1c).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import implementations
from crfbench.data import synthetic
from crfbench.metrics import span_scores

LARGE_PENALTY = -1e4

crf, meanfield = implementations.get("crf"), implementations.get("meanfield")


def _task(seed: int = 0) -> tuple[object, list[list[str]], dict[str, torch.Tensor]]:
    """200 synthetic BIES sentences, with scores 2·onehot(gold) + N(0, 1) and -inf constraints."""
    data = synthetic.generate(seed=seed, labels=3, train=1, dev=1, test=200, max_length=20)
    tagset, sentences = data.tagset, data.test
    lengths = torch.tensor([len(s.tags) for s in sentences])
    size, width = len(sentences), int(lengths.max())
    rng = np.random.default_rng(seed)
    emissions = rng.normal(size=(size, width, len(tagset)))
    for row, sentence in enumerate(sentences):
        emissions[row, np.arange(len(sentence.tags)), tagset.encode(sentence.tags)] += 2.0
    transitions, start, end = (torch.as_tensor(mask, dtype=torch.float64) for mask in tagset.score_masks())
    scores = {
        "emissions": torch.as_tensor(emissions),
        "transitions": transitions,
        "lengths": lengths,
        "start": start,
        "end": end,
    }
    return tagset, [s.tags for s in sentences], scores


def _ids(tags: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    return [row[: int(n)].tolist() for row, n in zip(tags, lengths, strict=True)]


def _invalid_share(tagset, ids: list[list[int]]) -> float:
    return float(np.mean([not tagset.is_valid(row) for row in ids]))


def _f1(tagset, gold: list[list[str]], ids: list[list[int]]) -> float:
    return span_scores(gold, [tagset.decode(row) for row in ids])["f1"]


def _decode(scores: dict[str, torch.Tensor], iterations: int, penalty: float) -> list[list[int]]:
    tags = meanfield.decode(**scores, iterations=iterations, penalty=penalty)
    return _ids(tags, scores["lengths"])


def test_large_penalty_locks_parallel_updates_into_two_disagreeing_runs() -> None:
    tagset, _, scores = _task()
    lengths, width = scores["lengths"], scores["emissions"].shape[1]
    for k in (4, 5, 9, 10):
        # The iterate interleaves the two runs: most sequences break a constraint ...
        assert _invalid_share(tagset, _decode(scores, k, LARGE_PENALTY)) > 0.5
        # ... while each run's own snapshot (its cells updated at k and at k - 1) is valid.
        now = meanfield.solve(**scores, iterations=k, penalty=LARGE_PENALTY).unary
        before = meanfield.solve(**scores, iterations=k - 1, penalty=LARGE_PENALTY).unary
        parity = (torch.arange(width) + k) % 2 == 0
        for own in (parity, ~parity):
            snapshot = torch.where(own[None, :, None], now, before)
            ids = _ids(torch.where(torch.arange(width) < lengths[:, None], snapshot.argmax(-1), -1), lengths)
            assert _invalid_share(tagset, ids) < 0.1
    # Frozen: the decode at k is the decode at k + 2, so MF-5 and MF-10 break the same sequences.
    assert _decode(scores, 8, LARGE_PENALTY) == _decode(scores, 10, LARGE_PENALTY)
    assert _decode(scores, 7, LARGE_PENALTY) == _decode(scores, 5, LARGE_PENALTY)


@pytest.mark.parametrize("seed", [0, 1])
def test_default_penalty_ignores_constraints_without_collapse(seed: int) -> None:
    tagset, gold, scores = _task(seed)
    assert inspect.signature(meanfield.decode).parameters["penalty"].default == 0.0
    viterbi = _f1(tagset, gold, _ids(crf.decode(**scores), scores["lengths"]))
    five, ten = (_f1(tagset, gold, _decode(scores, k, penalty=0.0)) for k in (5, 10))
    assert abs(five - ten) < 0.02
    large = max(_f1(tagset, gold, _decode(scores, k, LARGE_PENALTY)) for k in (5, 10))
    assert min(five, ten) > large + 0.03  # the collapse the default avoids
    # What the paper reports of mean field on segmentation: invalid outputs and lost F1.
    assert _invalid_share(tagset, _decode(scores, 10, penalty=0.0)) > 0.5
    assert max(five, ten) < viterbi - 0.1
