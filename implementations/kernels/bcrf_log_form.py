"""BCRF's log form (``form="log"``), written once for both backends through the backend's ops
namespace (:mod:`implementations.ops`): the iterate is ``log q`` itself (B, N-1, T, T), and every
projection reads and writes every arc, with an ``exp`` per arc. The reference form: the scaling
form (each backend's ``bcrf/scaling.py``) computes the same iterates.

Also here, because both forms use it: the projection's shifts given each node's flows
(docs/derivations.md §3.3), :func:`_cluster_shifts`, and ``w/τ`` (:func:`_scaled`)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from .. import ops
from .bcrf import Form, Solution, iteration, violation
from .bcrf_numerics import _arc_marginals, _finite_or_zero
from .bcrf_options import BcrfOptions, first_clusters

Array = Any  # a torch.Tensor or a jax.Array


def _cluster_shifts(flows: Array, inside: Array, axis: int = -1) -> Array:
    """The projection of §3.3 given each node's log in- and out-flow, stacked (B, 2, P, T) (in
    first), or (T, 2, P, B) with the tags first (``axis`` 0 of the flows of one side): the shifts
    of the log of its in-arcs and of its out-arcs, stacked alike; -inf for a dead tag, 0 outside
    the clusters (``inside``, broadcast: 1 for a cluster, 0 elsewhere).

    Each flow moves to the node's new throughput, the normalised geometric mean of its two flows,
    ``log sqrt(in · out) − log Σ_tags sqrt(in · out)``. A dead tag's (a -inf flow) is -inf, and so
    is its shift (its -inf flow taken as 0); a dead node's normaliser is taken as 0. Written
    without boolean masks (a ``where`` with a broadcast condition is several times slower than a
    multiply in torch): the shifts outside the clusters are multiplied by 0, and a -inf there
    (NaN after the product) is set to 0."""
    o = ops.of(flows)
    log_node = (flows[:, 0] + flows[:, 1]) * 0.5  # log sqrt(in · out), unnormalised
    throughput = log_node - o.expand_dims(_finite_or_zero(o.logsumexp(log_node, axis)), axis)
    shifts = (throughput[:, None] - _finite_or_zero(flows)) * inside
    return o.nan_to_num(shifts, 0.0, math.inf, -math.inf)


def _scaled(weights: Array, temperature: float) -> Array:
    """``w/τ``: ``weights`` themselves at τ = 1 (no copy of the arcs)."""
    return weights if temperature == 1 else weights / temperature


def _project(log_q: Array, lengths: Array, first: int) -> Array:
    """KL projection onto the clusters at positions ``first, first + 2, ...`` (one parity).

    Cluster p reads arc group p - 1 (into it) and p (out of it); clusters of one parity touch
    disjoint groups, so they are projected all at once. The projection rescales the columns of
    group p - 1 and the rows of group p, so it is one broadcast add of a column shift and a row
    shift per group (-inf for a dead node). Clusters with ``p > len - 2`` are skipped.
    """
    o = ops.of(log_q)
    batch, num_arcs, num_tags, _ = log_q.shape
    count = len(range(first, num_arcs, 2))
    if count == 0:
        return log_q
    positions = first + 2 * o.arange(count, log_q)
    into = slice(first - 1, first - 1 + 2 * count, 2)  # groups p - 1
    out_of = slice(first, first + 2 * count, 2)  # groups p
    log_in = o.logsumexp(log_q[:, into], -2)  # (B, P, T) in-flow of each node
    log_out = o.logsumexp(log_q[:, out_of], -1)  # (B, P, T) out-flow of each node
    active = (positions < (lengths - 1)[:, None])[:, None, :, None]  # (B, 1, P, 1)
    shifts = _cluster_shifts(o.stack([log_in, log_out], 1), o.astype(active, log_q.dtype))
    zeros = o.zeros((batch, num_arcs, num_tags), log_q)
    columns = o.put_rows(zeros, positions - 1, shifts[:, 0])
    rows = o.put_rows(zeros, positions, shifts[:, 1])
    return log_q + (rows[..., :, None] + columns[..., None, :])


def _initial(weights: Array, temperature: float) -> Array:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = _scaled(weights, temperature)
    batch, num_arcs, num_tags, _ = log_q.shape
    flat = log_q.reshape(batch, num_arcs, num_tags * num_tags)
    return log_q - ops.of(log_q).logsumexp(flat, -1)[:, :, None, None]


def _value(
    log_q: Array, pairwise: Array, weights: Array, singles: Array, lengths: Array, temperature: float
) -> Array:
    """``B_Y(w/τ) = Σ q (w/τ − log q)`` (B,) at the iterate; arcs with q = 0 contribute 0 (a -inf
    log counts as 0 before the product); a length-1 sequence's is the log-sum-exp of its tag scores."""
    o = ops.of(log_q)
    expected = o.inner(pairwise, _finite_or_zero(_scaled(weights, temperature)))  # <q, w/τ>
    value = expected - o.inner(pairwise, _finite_or_zero(log_q))  # + H(q)
    return o.where(lengths == 1, o.logsumexp(singles / temperature, -1), value)


def _log_solution(
    log_q: Array, weights: Array, singles: Array, lengths: Array, temperature: float
) -> Solution:
    """The :class:`Solution` of a log-form iterate (``weights``: the arcs w)."""
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    return Solution(value, pairwise.sum(-1), pairwise.sum(-2), pairwise)


def log_form(terms: Any, lengths: Array, options: BcrfOptions) -> Form:
    """IBP on the arcs ``terms`` (the backend's ``ArcTerms``) in the log form: one iteration is a
    :func:`_project` onto each parity of inner clusters, in ``options.order``."""
    weights, temperature = terms.weights(), options.temperature
    log_marginals = partial(_arc_marginals, lengths=lengths)
    firsts = first_clusters(options.order)
    return Form(
        _initial(weights, temperature),
        iteration([partial(_project, lengths=lengths, first=first) for first in firsts]),
        lambda log_q, _: violation(log_marginals(log_q), lengths),
        log_marginals,
        partial(
            _log_solution, weights=weights, singles=terms.singles, lengths=lengths, temperature=temperature
        ),
    )
