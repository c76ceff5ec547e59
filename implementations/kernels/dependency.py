"""``tree-crf``: a CRF over non-projective dependency trees with exactly one root child (the UD
convention), for both backends, written once through the ops namespace.

Scores ``(B, N+1, N+1)``: ``scores[b, h, m]`` scores the arc ``h -> m``, node 0 is the root;
``lengths (B,)`` counts words. Column 0, the diagonal and every arc touching a padded word
(``> lengths[b]``) are never arcs: they are masked here, whatever they hold.

log Z. The single-root matrix-tree theorem (Koo, Globerson, Carreras and Collins, 2007): with
arc weights ``A[h, m] = exp(scores[h, m])``, the word Laplacian ``L[m, m] = Σ_{h ≥ 1} A[h, m]``,
``L[h, m] = −A[h, m]``, and its first row replaced by the root's weights ``A[0, m]``, ``Z`` is
the determinant. Padded words get identity rows and columns (a block ``I`` leaves the
determinant alone). Every entry of column ``m`` is a weight of an arc into ``m``, and every tree
has exactly one such arc, so column ``m`` is computed as ``exp(scores[:, m] − c_m)`` with ``c_m``
the column's largest allowed score and ``Σ c_m`` added back: the largest weight of a column is 1,
and nothing overflows. The shift is held out of differentiation (the identity holds for any
shift). ``log |det|`` comes from an LU factorisation with partial pivoting (``slogdet``).

Where it loses digits. (1) An arc whose score is far below its column's maximum (by more than
about 87 in float32, 708 in float64) underflows to weight 0: exact in the limit, but a very
peaked distribution then loses the contribution of trees that use such arcs, and their marginals
read 0. (2) The Laplacian's condition number: when the tree distribution is peaked, the diagonal
``Σ_h A[h, m]`` is 1 plus small weights and cancels against the off-diagonal ``−1`` of the
best arcs, so the determinant (a number near the small mass of the other trees) is computed with
a relative error of roughly ``cond(L) · eps``; ``log Z`` itself stays accurate to about
``n · eps`` times the score scale, since ``Σ c_m`` carries its size, but the marginals (the inverse
of ``L``) lose about ``log10 cond(L)`` digits. float64 is the safe choice for scores of very
large magnitude.

In jax each function is compiled (``ops.compiled``: ``jax.jit``, once per shape and dtype); in
torch it runs eagerly. Marginals are the gradient of ``log Z`` (autograd / ``jax.grad``);
``decode`` is Chu-Liu-Edmonds on the host (``implementations.arborescence``); ``loss`` is
``log Z − score(gold tree)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import arborescence, ops
from ..contract import to_numpy

Array = Any  # a torch.Tensor or a jax.Array


def arc_mask(scores: Array, lengths: Array) -> Array:
    """(B, N+1, N+1) bool: the arcs ``h -> m`` of each sentence (``m`` a word, ``h`` the root or
    another word, neither past the sentence's length)."""
    o = ops.of(scores)
    index = o.arange(scores.shape[-1], scores)
    inside = index[None, :] <= lengths[:, None]  # (B, N+1): the root and the words
    word = inside & (index[None, :] >= 1)
    return inside[:, :, None] & word[:, None, :] & (index[:, None] != index[None, :])[None]


def log_partition(scores: Array, lengths: Array) -> Array:
    """``log Z`` (B,): log-sum-exp of the scores of every single-root dependency tree, by the
    matrix-tree theorem; differentiable (its gradient is the arc marginals)."""
    return ops.of(scores).compiled(_log_partition)(scores, lengths)


def _log_partition(scores: Array, lengths: Array) -> Array:
    o = ops.of(scores)
    size = scores.shape[-1]
    arcs = o.where(arc_mask(scores, lengths), scores, -o.inf)
    top = o.stop_gradient(o.amax(arcs, 1))  # (B, N+1): the column shifts c_m
    shift = o.where(o.isneginf(top), 0.0, top)  # column 0 and padded words: no arc at all
    weights = o.exp(arcs - shift[:, None, :])  # 0 off the arcs
    words = weights[:, 1:, 1:]
    eye = o.eye(size - 1, scores)
    laplacian = eye * words.sum(1)[:, None, :] - words
    laplacian = o.concatenate([weights[:, :1, 1:], laplacian[:, 1:]], 1)
    padded = o.arange(size - 1, scores)[None, :] >= lengths[:, None]  # word m + 1 is padding
    laplacian = o.where(padded[:, :, None] | padded[:, None, :], eye, laplacian)
    return o.slogabsdet(laplacian) + shift.sum(1)


def marginals(scores: Array, lengths: Array) -> Array:
    """Arc marginals (B, N+1, N+1), ``P(h -> m)``: the gradient of ``log Z``; zero on column 0,
    the diagonal, forbidden arcs and padding. Each word's column sums to 1, and so does row 0."""
    return ops.of(scores).compiled(_marginals)(scores, lengths)


def _marginals(scores: Array, lengths: Array) -> Array:
    return ops.of(scores).gradient(lambda s: _log_partition(s, lengths), scores)


def gold_score(scores: Array, lengths: Array, heads: Array) -> Array:
    """(B,) the score of the trees ``heads`` (B, N+1): ``Σ_m scores[heads[m], m]`` over the words."""
    o = ops.of(scores)
    index = o.arange(scores.shape[-1], scores)
    word = (index[None, :] >= 1) & (index[None, :] <= lengths[:, None])
    at = o.astype(o.where(word, heads, 0), index.dtype)
    picked = o.take_along_axis(scores, at[:, None, :], 1)[:, 0]
    return o.where(word, picked, 0.0).sum(1)


def loss(scores: Array, lengths: Array, heads: Array) -> Array:
    """Negative log-likelihood of the gold trees ``heads`` (B,): ``log Z − score(heads)``."""
    return ops.of(scores).compiled(_loss)(scores, lengths, heads)


def _loss(scores: Array, lengths: Array, heads: Array) -> Array:
    return _log_partition(scores, lengths) - gold_score(scores, lengths, heads)


def decode(scores: Array, lengths: Array) -> Array:
    """The highest-scoring single-root tree of each sentence: heads (B, N+1), ``-1`` at index 0
    and on padding, in the backend's default integer dtype. Chu-Liu-Edmonds on a host copy of
    the scores (``implementations.arborescence``): it synchronises with the device, and in jax it
    cannot be traced (call it outside ``jax.jit``)."""
    host, sizes = to_numpy(scores), to_numpy(lengths)
    heads = np.full(host.shape[:2], -1, dtype=np.int64)
    for b, length in enumerate(sizes.tolist()):
        heads[b, : length + 1] = arborescence.best_tree(host[b], length)
    return ops.of(scores).from_host(heads, scores)
