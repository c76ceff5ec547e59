"""BCRF's pure array arithmetic, the same mathematics in both backends, written once through the
backend's ops namespace (:mod:`implementations.ops`): the flush floor of a dtype, -inf handling (a
dead tag or node is -inf, never NaN), the masks of padding, and what is read off arc marginals
(the arc marginals themselves, zero on padding, and the node marginals).

Each backend's ``bcrf/numerics.py`` keeps what its framework does differently: the projection's
shifts (torch updates in place and lays the flows out differently), interleaving rows, and
torch's test of whether autograd records."""

from __future__ import annotations

import math
from typing import Any

from .. import ops
from .scores import position_mask

Array = Any  # a torch.Tensor or a jax.Array


def _floor(like: Array) -> float:
    """``F``: the log of the smallest normal number of ``like``'s dtype; kernel entries under
    ``e^F`` are flushed."""
    return math.log(float(ops.of(like).finfo(like.dtype).tiny))


def _finite_or_zero(x: Array) -> Array:
    """``x`` with -inf replaced by 0 (and a zero gradient there); NaN and +inf are kept."""
    return ops.of(x).nan_to_num(x, math.nan, math.inf, 0.0)


def _safe_log(x: Array) -> Array:
    """``log x`` with ``log 0 = -inf`` and a finite gradient everywhere (0 where ``x = 0``); a
    plain ``log`` where nothing is differentiated (torch outside autograd)."""
    o = ops.of(x)
    if not o.recorded(x):
        return o.log(x)
    positive = x > 0
    return o.where(positive, o.log(o.where(positive, x, 1.0)), -o.inf)


def _group_mask(lengths: Array, num_arcs: int) -> Array:
    """(B, N-1, 1): the arc groups inside each sequence."""
    return position_mask(lengths - 1, num_arcs)[..., None]


def _padding(lengths: Array, num_arcs: int, dtype: Any) -> Array:
    """(B, N-1, 1): 0 for the arc groups inside each sequence, +inf past its length."""
    o = ops.of(lengths)
    return o.astype(o.where(_group_mask(lengths, num_arcs), 0.0, o.inf), dtype)


def _arc_mask(lengths: Array, num_arcs: int) -> Array:
    """(B, N-1, 1, 1): the arcs inside each sequence."""
    return position_mask(lengths - 1, num_arcs)[:, :, None, None]


def _arc_marginals(log_q: Array, lengths: Array) -> Array:
    """q (B, N-1, T, T), zero on padding: a product with the mask, not a ``where`` (a ``where``
    with a broadcast condition is slower in torch; log q is never +inf or NaN, so the product is
    exact)."""
    return ops.of(log_q).exp(log_q) * _arc_mask(lengths, log_q.shape[1])


def _unary(pairwise: Array, singles: Array, lengths: Array, temperature: float) -> Array:
    """Node marginals (B, N, T) read off the arc marginals; a softmax for length-1 sequences."""
    o = ops.of(pairwise)
    batch, num_arcs = pairwise.shape[:2]
    single = lengths == 1
    # tag i < len - 1 from the arcs leaving it; the last tag from the arcs entering it
    no_arc = o.zeros((batch, 1, singles.shape[-1]), pairwise)
    leaving = o.concatenate([pairwise.sum(-1), no_arc], 1)
    entering = leaving[:, 0]  # any (B, T) placeholder: only read where a sequence has arcs
    if num_arcs:
        last_arc = o.maximum(lengths - 2, 0)[:, None, None]
        entering = o.take_along_axis(pairwise.sum(-2), last_arc, 1)[:, 0]
    single_probs = o.exp(o.log_softmax(singles / temperature, -1))
    last_tag = o.where(single[:, None], single_probs, entering)
    is_last = o.arange(num_arcs + 1, lengths) == (lengths - 1)[:, None]
    return o.where(is_last[..., None], last_tag[:, None], leaving)
