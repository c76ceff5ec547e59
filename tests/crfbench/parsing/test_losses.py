"""The arc scorer's output and the parser's losses: shapes, masks, the structured SVM's values and
gradient, the CRF through tree-crf, and SparseMAP's wait for its tree method."""

from __future__ import annotations

import math

import pytest
import torch

import implementations
from crfbench.parsing import losses
from crfbench.parsing.model import UNKNOWN, ArcScorer, ParserConfig, Vocabulary, encode
from crfbench.parsing.treebank import Parse

PARSES = [
    Parse(("a", "b", "c"), ("DET", "NOUN", "PUNCT"), (2, 0, 2), (False, False, True)),
    Parse(("b", "d"), ("NOUN", "VERB"), (2, 0), (False, False)),
]
SMALL = ParserConfig(word_dim=6, upos_dim=3, lstm_dim=5, mlp_dim=4)


def test_scores_shape_and_mask():
    torch.manual_seed(0)
    vocabulary = Vocabulary.build(PARSES)
    scorer = ArcScorer(SMALL, vocabulary).eval()
    batch = encode(PARSES, vocabulary, torch.device("cpu"))
    scores = scorer(batch.words, batch.upos, batch.lengths)
    assert scores.shape == (2, 4, 4)
    allowed = torch.ones(2, 4, 4, dtype=torch.bool)
    allowed[:, :, 0] = False  # nothing heads the root
    allowed[:, torch.arange(4), torch.arange(4)] = False  # no self-loops
    allowed[1, 3, :] = allowed[1, :, 3] = False  # the second sentence's padding
    assert torch.isfinite(scores[allowed]).all()
    assert (scores[~allowed] == -math.inf).all()
    assert batch.heads.tolist() == [[-1, 2, 0, 2], [-1, 2, 0, -1]]
    assert batch.punct.tolist() == [[False, False, False, True], [False] * 4]


def test_vocabulary_and_word_dropout():
    vocabulary = Vocabulary.build(PARSES)
    assert vocabulary.forms == ("a", "b", "c", "d") and vocabulary.counts == (1, 2, 1, 1)
    assert vocabulary.ids(["b", "zzz"]) == [3, UNKNOWN]
    probabilities = vocabulary.dropout_probabilities(0.25)
    assert probabilities[:2].tolist() == [0.0, 0.0]
    assert probabilities[3].item() == pytest.approx(0.25 / 2.25)


def tiny_instance(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, 5, 5, generator=generator, dtype=torch.float64)
    lengths = torch.tensor([4, 3])
    heads = torch.tensor([[-1, 2, 0, 2, 3], [-1, 0, 1, 1, -1]])
    return scores, lengths, heads


@pytest.mark.parametrize("seed", range(5))
def test_ssvm_is_non_negative(seed):
    scores, lengths, heads = tiny_instance(seed)
    assert (losses.structured_svm(scores, lengths, heads) >= 0).all()


def test_ssvm_is_zero_when_the_gold_tree_wins_by_the_cost():
    _, lengths, heads = tiny_instance(0)
    gold = torch.zeros(2, 5, 5, dtype=torch.float64)
    for b in range(2):
        for m in range(1, int(lengths[b]) + 1):
            gold[b, heads[b, m], m] = 1.0  # every wrong head costs exactly the margin
    assert losses.structured_svm(gold, lengths, heads).tolist() == [0.0, 0.0]
    assert (losses.structured_svm(0.99 * gold, lengths, heads) > 0).all()


def test_ssvm_gradient_matches_finite_differences():
    scores, lengths, heads = tiny_instance(1)
    scores.requires_grad_(True)
    losses.structured_svm(scores, lengths, heads).sum().backward()
    assert scores.grad is not None
    step = 1e-6
    numeric = torch.zeros_like(scores)
    with torch.no_grad():
        for index in torch.cartesian_prod(*(torch.arange(size) for size in scores.shape)).tolist():
            b, h, m = index
            if m == 0 or h == m or max(h, m) > lengths[b]:
                continue  # not an arc
            plus, minus = scores.clone(), scores.clone()
            plus[b, h, m] += step
            minus[b, h, m] -= step
            difference = losses.structured_svm(plus, lengths, heads) - losses.structured_svm(
                minus, lengths, heads
            )
            numeric[b, h, m] = difference.sum() / (2 * step)
    assert torch.allclose(scores.grad, numeric, atol=1e-6)
    assert scores.grad.abs().sum() > 0  # random scores: the decoded tree is not the gold one


def test_crf_is_tree_crfs_loss():
    scores, lengths, heads = tiny_instance(2)
    expected = implementations.get("tree-crf", "torch").loss(scores, lengths, heads)
    assert torch.equal(losses.parser_loss("crf")(scores, lengths, heads), expected)


def test_decode_is_the_map_tree():
    scores, lengths, _ = tiny_instance(3)
    predicted = losses.decode(scores, lengths)
    assert predicted.tolist() == implementations.get("tree-crf", "torch").decode(scores, lengths).tolist()


@pytest.mark.parametrize(("name", "cost"), [("sparsemap", "none"), ("m-sparsemap", "hamming")])
def test_sparsemap_losses_are_tree_sparsemaps(name, cost):
    scores, lengths, heads = tiny_instance(4)
    value = losses.parser_loss(name)(scores, lengths, heads)
    expected = implementations.get("tree-sparsemap", "torch").loss(scores, lengths, heads, cost=cost)
    torch.testing.assert_close(value, expected)
    assert (value >= -1e-9).all()


def test_unknown_loss():
    with pytest.raises(ValueError, match="loss: 'hinge' is not one of ssvm, crf, sparsemap, m-sparsemap"):
        losses.parser_loss("hinge")
