"""The parser's training losses (``crfbench.uses.PARSER_LOSSES``) and its decoder, on arc scores
``(B, N+1, N+1)`` with ``lengths (B,)`` and gold ``heads (B, N+1)``; each loss is per sentence (B,).

- ``ssvm``: the structured SVM (margin-rescaled hinge) with the Hamming cost on heads,
  ``max_y [s(y) + Δ(y, ȳ)] − s(ȳ)``. Cost-augmented decoding: every arc into a word other than
  that word's gold arc gets +1, so a tree's augmented score is its score plus the number of words
  it attaches wrongly; ``tree-crf``'s Chu-Liu-Edmonds finds the maximiser ``ŷ``. The loss is then
  ``s(ŷ) + Δ(ŷ, ȳ) − s(ȳ)`` with ``ŷ`` held fixed, so its gradient is the subgradient
  ``1[ŷ] − 1[ȳ]`` on the arc scores (Danskin). It is ``≥ 0`` (``ȳ`` itself is a candidate) and
  ``0`` once the gold tree beats every other by at least its Hamming distance.
- ``crf``: ``tree-crf``'s negative log-likelihood (matrix-tree theorem).
- ``sparsemap``, ``m-sparsemap``: the dependency-tree SparseMAP method's ``loss`` (``tree-sparsemap``),
  m-SparseMAP with ``cost="hamming"``, as the chain's versions are wired in ``crfbench.uses``. Until
  ``implementations`` has that method, asking for them is a ``ValueError`` that says so.

Every parser decodes with the MAP tree (``PARSER_DECODER``), whatever its loss; the SparseMAP-trained
ones with SparseMAP's heaviest support tree too (``crfbench.uses.parser_decoders``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from torch import Tensor

import implementations
from implementations.kernels.dependency import gold_score
from implementations.public import DependencyBound

from ..uses import PARSER_DECODER, PARSER_LOSSES, Use, check_names

ParserLoss = Callable[[Tensor, Tensor, Tensor], Tensor]


def tree_method(use: Use) -> DependencyBound:
    """The dependency-tree method a use calls, in torch."""
    return cast(DependencyBound, implementations.get(use.method, "torch"))


def parser_loss(name: str) -> ParserLoss:
    """The training loss ``name`` (one of ``PARSER_LOSSES``): a function of ``(scores, lengths,
    heads)`` returning the loss per sentence (B,). ValueError on an unknown name (checked here, before
    any training)."""
    check_names("loss", [name], PARSER_LOSSES)
    use = PARSER_LOSSES[name]
    method = tree_method(use)
    if name == "ssvm":
        return structured_svm
    options = dict(use.options)

    def loss(scores: Tensor, lengths: Tensor, heads: Tensor) -> Tensor:
        return cast(Tensor, method.loss(scores, lengths, heads, **options))

    return loss


def hamming_cost(scores: Tensor, heads: Tensor) -> Tensor:
    """(B, N+1, N+1) the cost of each arc: 1 for ``h -> m`` unless ``h`` is ``m``'s gold head
    (``heads`` (B, N+1)), in the scores' dtype. Off the arcs it does not matter (their scores are
    ``-inf`` or masked by the tree methods)."""
    index = heads.new_tensor(range(scores.shape[-1]))
    return (index[None, :, None] != heads[:, None, :]).to(scores.dtype)


def hamming_distance(predicted: Tensor, heads: Tensor, lengths: Tensor) -> Tensor:
    """(B,) the number of words ``1..lengths[b]`` whose predicted head differs from the gold one."""
    index = heads.new_tensor(range(heads.shape[-1]))
    words = (index[None, :] >= 1) & (index[None, :] <= lengths[:, None])
    return ((predicted != heads) & words).sum(1)


def structured_svm(scores: Tensor, lengths: Tensor, heads: Tensor) -> Tensor:
    """The margin-rescaled structured hinge loss with the Hamming cost (module docstring), (B,)."""
    augmented = (scores + hamming_cost(scores, heads)).detach()
    predicted = decode(augmented, lengths).to(heads.device)
    cost = hamming_distance(predicted, heads, lengths).to(scores.dtype)
    return gold_score(scores, lengths, predicted) + cost - gold_score(scores, lengths, heads)


def decode(scores: Tensor, lengths: Tensor, decoder: Use = PARSER_DECODER) -> Tensor:
    """The trees (B, N+1) that ``decoder`` (one of ``PARSER_DECODERS``) predicts: by default the MAP
    trees (``tree-crf``'s Chu-Liu-Edmonds, one root child); ``-1`` at index 0 and on padding; no
    gradient flows through it."""
    return cast(Tensor, tree_method(decoder).decode(scores.detach(), lengths, **decoder.options))


def support_sizes(scores: Tensor, lengths: Tensor) -> Tensor:
    """(B,) how many trees hold weight in each sentence's SparseMAP solution (``tree-sparsemap``
    with the options of the SparseMAP losses): how sparse SparseMAP's predictions are, which the
    SparseMAP paper tracks over training."""
    use = PARSER_LOSSES["sparsemap"]
    solution = tree_method(use).solve(scores.detach(), lengths, **use.options)
    return (solution.weights > 0).sum(1)
