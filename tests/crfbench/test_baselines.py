"""The timing stage's baselines compute what they stand for: pytorch-crf's loss is the CRF's
negative log-likelihood and its Viterbi the CRF's best path, under its shared constraint matrix;
the parallel scan's names call ``crf-scan``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import implementations
from crfbench.baselines import FORBIDDEN_SCORE, PytorchCrf, timed_decoder, timed_loss
from crfbench.batching import targets
from crfbench.experiment import load_dataset, score_batch
from crfbench.models import build_scorer
from crfbench.objectives import ChainScores

from .test_engine import make_config

pytest.importorskip("torchcrf")


@pytest.fixture(scope="module")
def batch():
    config = make_config()
    dataset = load_dataset(config, None)
    torch.manual_seed(0)
    scorer = build_scorer(config.scorer, dataset.train, len(dataset.tagset))
    sentences = list(dataset.train[:6])
    with torch.no_grad():
        chain = score_batch(scorer, sentences, dataset.tagset, torch.device("cpu"))
    return dataset.tagset, chain, targets(False, sentences, dataset.tagset)


def shared_constraints(tagset, chain: ChainScores) -> ChainScores:
    """``chain``'s emissions under pytorch-crf's scores: the constraints at a finite penalty."""
    transitions, start, end = (
        torch.as_tensor(np.maximum(mask, FORBIDDEN_SCORE), dtype=chain.emissions.dtype)
        for mask in tagset.score_masks()
    )
    return ChainScores(chain.emissions, transitions, chain.lengths, start, end)


def test_pytorch_crf_is_the_crf_under_its_constraint_matrix(batch) -> None:
    tagset, chain, gold = batch
    same = shared_constraints(tagset, chain)
    crf = implementations.get("crf", backend="torch")
    loss = PytorchCrf("loss", tagset, torch.device("cpu"))(chain, gold)
    want = crf.loss(same.emissions, same.transitions, same.lengths, gold, start=same.start, end=same.end)
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-4)
    paths = PytorchCrf("decode", tagset, torch.device("cpu"))(chain)
    best = crf.decode(same.emissions, same.transitions, same.lengths, start=same.start, end=same.end)
    assert paths == [row[: int(n)].tolist() for row, n in zip(best, same.lengths, strict=True)]


def test_baseline_names_call_their_method(batch) -> None:
    tagset, chain, gold = batch
    cpu = torch.device("cpu")
    scan, sequential = timed_loss("crf-scan", 10, tagset, cpu), timed_loss("crf", 10, tagset, cpu)
    assert (scan.method, sequential.method) == ("crf-scan", "crf")
    torch.testing.assert_close(scan(chain, gold), sequential(chain, gold))
    assert torch.equal(
        timed_decoder("viterbi-scan", tagset, cpu)(chain), timed_decoder("viterbi", tagset, cpu)(chain)
    )
    with pytest.raises(ValueError, match="function: pytorch-crf has a loss and a decoder"):
        PytorchCrf("partial_loss", tagset, cpu)
