"""``tree-crf``: a CRF over non-projective dependency trees with exactly one root child (the UD
convention), for both backends, written once through the ops namespace.

Scores ``(B, N+1, N+1)``: ``scores[b, h, m]`` scores the arc ``h -> m``, node 0 is the root;
``lengths (B,)`` counts words. Column 0, the diagonal and every arc touching a padded word
(``> lengths[b]``) are never arcs: they are masked here, whatever they hold.

log Z. By the matrix-tree theorem (Koo, Globerson, Carreras and Collins, 2007, single-root
variant), ``Z = Σ_c A[0, c] · Z_c``, where ``A = exp(scores)`` and ``Z_c``, the weight of every
arborescence of the words rooted at word ``c``, is a principal minor of the words' Laplacian
``L[m, m] = Σ_{h ≥ 1} A[h, m]``, ``L[h, m] = −A[h, m]``. The usual way, ``log det`` of that
Laplacian with its first row replaced by the root's weights, loses every digit on a peaked
distribution: when the best arc into each word (each column's largest weight) does not form a
tree, the determinant is a tiny difference of numbers of order 1 (float64 missed ``log Z`` by 70
at scores of magnitude 50). So the minors are computed instead by eliminating the words one by
one (Gaussian elimination on the Laplacian, the Grassmann-Taksar-Heyman way): eliminating word
``k`` with in-weight ``D_k = Σ_h A[h, k]`` (over the words left) turns the arcs between the others
into ``A[i, j] + A[i, k] A[k, j] / D_k`` (a path through ``k``) and multiplies every remaining
minor by ``D_k``; the eliminated word's minor follows back from ``D_k Z_k = Σ_j A[k, j] Z_j``
(the Laplacian's kernel). The diagonal is never formed (each ``D_k`` is a sum of the arcs into
``k``), so nothing is ever subtracted, and all of it runs in log space (log-sum-exp), where
nothing under- or overflows either: ``log Z`` and its gradient are accurate to a small multiple
of the rounding of the scores, whatever the scale and the conditioning, in float32 as in float64.

The word left last (the reference ``c*``, swapped to the front) is one that reaches every word
along finite arcs (so every ``D_k`` is positive), preferring one that the root may take: found by
a transitive closure of the finite arcs, without gradient. A padded word gets a single arc from
``c*`` of weight 1 and none out: it adds nothing to any tree's weight. Cost: O(N³) work in N
dependent steps (the elimination is sequential), O(N³) memory when differentiated.

Where it loses digits. Each log-sum-exp rounds to about ``eps · max|log-weight|``, and there are
N of them along any path through the elimination: ``log Z`` is good to roughly
``N · eps · max|score|`` in absolute terms, and so are the marginals (its gradient). An arc
whose score is far below the others (by about 87 in float32, 708 in float64) contributes exactly
0, as ``exp`` underflows, which is its value to every digit kept. A sentence that allows no tree
(the checks refuse it) has a word with no finite in-arc: its ``D_k`` is 0 and the result NaN.

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
    matrix-tree theorem through a log-space elimination; differentiable (its gradient is the arc
    marginals)."""
    return ops.of(scores).compiled(_log_partition)(scores, lengths)


def reference_word(words: Array, root: Array, padded: Array) -> Array:
    """(B,) the word to eliminate last (0-based): one that reaches every real word along finite
    arcs of ``words`` (B, N, N), preferring one with a finite root arc ``root`` (B, N)."""
    o = ops.of(words)
    size = words.shape[-1]
    step = o.astype(~o.isneginf(words), words.dtype) + o.eye(size, words)
    for _ in range(max(size - 1, 1).bit_length()):  # paths of length up to 2^k
        step = o.minimum(o.einsum("bij,bjk->bik", step, step), 1.0)
    covers = ((step > 0) | padded[:, None, :]).all(-1)
    preference = o.astype(covers, words.dtype) * 2 + o.astype(~o.isneginf(root), words.dtype)
    return o.max_argmax(o.where(padded, -1.0, preference), 1)[1]


def _log_partition(scores: Array, lengths: Array) -> Array:
    o = ops.of(scores)
    size = scores.shape[-1] - 1
    arcs = o.where(arc_mask(scores, lengths), scores, -o.inf)
    root, words = arcs[:, 0, 1:], arcs[:, 1:, 1:]
    index = o.arange(size, scores)
    padded = index[None, :] >= lengths[:, None]  # (B, N): word index + 1 is padding
    first = reference_word(o.stop_gradient(words), o.stop_gradient(root), padded)[:, None]
    order = o.where(index == 0, first, o.where(index == first, 0, index))  # swap c* and word 0
    root = o.take_along_axis(root, order, 1)
    words = o.take_along_axis(o.take_along_axis(words, order[:, :, None], 1), order[:, None, :], 2)
    words = o.where(padded[:, None, :] & (index == 0)[None, :, None], 0.0, words)
    diagonal = index[:, None] == index[None, :]

    def eliminate(words: Array, k: Array) -> tuple[Array, tuple[Array, Array]]:
        """Eliminate word k from the graph of words 0..k (those past k already are)."""
        left = index < k
        into = o.where(left[None], words[:, :, k], -o.inf)
        out = o.where(left[None], words[:, k, :], -o.inf)
        pivot = o.logsumexp(into, 1)  # (B,) log D_k, finite: word 0 reaches k
        through = into[:, :, None] + out[:, None, :] - pivot[:, None, None]
        words = o.where(diagonal, -o.inf, o.logsumexp(o.stack([words, through], 0), 0))
        return words, (pivot, out)

    def substitute(minors: Array, step: tuple[Array, Array, Array]) -> tuple[Array, tuple[()]]:
        """log Z_k / Z_0 = log Σ_j A[k, j] Z_j / Z_0 − log D_k, from the minors of words 0..k-1."""
        k, pivot, out = step
        value = o.logsumexp(out + minors, 1) - pivot
        return o.where(index[None] == k, value[:, None], minors), ()

    if size == 1:  # one word: nothing to eliminate
        return root[:, 0]
    steps = (size - 1) - index[: size - 1]  # N-1 .. 1
    _, (pivots, rows) = o.scan(eliminate, words, steps)
    back = (size - 2) - index[: size - 1]  # the same steps, 1 .. N-1
    minors = o.where(index[None] == 0, 0.0, o.full((1, size), -o.inf, scores))
    minors = o.broadcast_to(minors, (scores.shape[0], size))
    minors, _ = o.scan(substitute, minors, (steps[back], pivots[back], rows[back]))
    return pivots.sum(0) + o.logsumexp(root + minors, 1)


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
