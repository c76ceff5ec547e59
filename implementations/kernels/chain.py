"""Sequential engine, what both backends share: forward filtering / backward smoothing and
Viterbi, one step per position. The steps are each backend's ``_chain`` (a Python loop in torch,
a ``lax.scan`` in jax, with ``log Z``'s backward an ``autograd.Function`` or a ``custom_vjp``);
the mathematics they follow is here.

Works on the scores directly (no (B, N, T, T) factor array is built for shared transitions).
Each step is batched over sequences and tags. Sequences shorter than N stop updating at their
length (their state is carried through padding).

Filtering. Each step from position i-1 to i (``forward_step``) gives the new ``alpha`` (B, T),
the normalised weights ``exp(x − max)`` (B, T, T) of
``x[a, b] = alpha[a] + transitions[a, b] + emissions[b]`` and the inverse of their column sums
(B, T): together they are ``P(y_{i-1} = a | y_i = b, prefix)``. ``emissions[i, b]`` is constant
in the previous tag, so it cancels from those weights and is added to ``alpha`` after the
reduction. A column sum is 0 (unreachable tag, whose weights are all 0) or >= 1 (its largest
weight is 1), so its inverse is taken as 1 for the former; it is stored as 0 past a sequence's
length, which stops smoothing there. The last tag's marginal is a softmax of ``alpha + end``, not
``exp(alpha + end − log Z)``: at large scores ``log Z`` rounds to a multiple of the spacing of
floats near it, and the exp turns that error into rows that do not sum to 1.

Smoothing turns node marginals at position i into pairwise marginals at (i-1, i) and node
marginals at i-1 with products and sums only, so a forward–backward pass costs one ``exp`` per
score entry (differentiating a log-sum-exp forward costs two); it is linear in the last tag's
marginal, so scaling that scales every output (the backward of ``log Z`` passes its incoming
gradient this way). ``log Z`` uses it as its backward. Everything that can be -inf is guarded, so
forbidden tags get exactly zero marginals and no NaN.

Second order. The pass is also written to be differentiated itself (second-order derivatives of
``log Z``, e.g. Hessian-vector products, whose derivative of the marginals is the covariance of
the sufficient statistics): the per-column shift is held constant (any per-column constant gives
the same result, so no derivative of a max is needed) and ``log`` and the division never see a
zero column sum, so every derivative through filtering and smoothing is finite and exact wherever
scores are ``-inf``.

Viterbi. Back-pointers past a sequence's length point to the same tag, so one backtrace over the
whole batch (a gather per position, no per-item loop) carries each last tag through padding.
"""

from __future__ import annotations

from typing import Any

from .. import ops

Array = Any  # a torch.Tensor or a jax.Array


def last_tag(unary: Array, lengths: Array) -> Array:
    """(B, T) marginal of each sequence's last tag, from the unary marginals (B, N, T)."""
    return ops.of(unary).take_along_axis(unary, (lengths - 1)[:, None, None], 1)[:, 0]
