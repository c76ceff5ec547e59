"""BCRF inference by iterative Bregman (KL) projections, cluster by cluster in a Python loop.

This is the docs/derivations.md §3.4 (Algorithm 1, reconstructed), written literally:

- ``L = w / τ`` (log of the Gibbs point ``exp(w/τ)``), every arc group then shifted so that it
  sums to one (a per-group shift never changes an iterate after the first projection; it is what
  makes ``n = 2`` a softmax over tag pairs);
- one *iteration* = one projection onto ``C_odd`` followed by one onto ``C_even`` (paper's
  1-indexed clusters: ``C_odd`` = clusters 3, 5, ..., ``C_even`` = clusters 2, 4, ...), or the
  reverse for ``order="even-odd"``;
- the KL projection onto one cluster ``C_i`` resets every node's throughput to the normalised
  geometric mean of its in-flow and out-flow (closed form of App. F), in log space; a node with
  no in-mass or no out-mass is *dead* and all its arcs get ``-inf``.

The clusters of one parity touch disjoint arc groups, so doing them one after the other here is
the same as the backends' parallel sweep. The result is the iterate ``q_k ≈ ∇B_Y(w/τ)`` of
``B_Y(θ) = max_{q ∈ conv(Y)} <q, θ> + H(q)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import dot_safe, entropy, fold_arc_weights, logsumexp, softmax, unary_scores

ORDERS: tuple[str, ...] = ("odd-even", "even-odd")


def inner_positions(n: int, parity: str) -> list[int]:
    """0-indexed inner positions ``p`` (``1 <= p <= n-2``) of the paper's odd or even clusters.

    Paper cluster ``i = p + 1`` (1-indexed); ``"odd"`` means ``i`` is odd (3, 5, ...), i.e.
    ``p`` even; ``"even"`` means ``i`` even (2, 4, ...), i.e. ``p`` odd.
    """
    if parity == "odd":
        return [p for p in range(1, n - 1) if (p + 1) % 2 == 1]
    if parity == "even":
        return [p for p in range(1, n - 1) if (p + 1) % 2 == 0]
    raise ValueError(f"parity must be 'odd' or 'even', got {parity!r}")


def project_cluster(log_q: np.ndarray, p: int) -> None:
    """KL projection of ``exp(log_q)`` onto ``C_{p+1}`` (in place), ``1 <= p <= n-2``.

    ``C_{p+1}``: the in-arcs of the cluster (arc group ``p - 1``) sum to one and every node of
    the cluster has in-flow equal to out-flow (arc group ``p``).
    """
    num_tags = log_q.shape[1]
    for_in = log_q[p - 1]  # [t', t]: arcs into node t of position p
    for_out = log_q[p]  # [t, t']: arcs out of node t
    lin = np.array([logsumexp(for_in[:, t]) for t in range(num_tags)])
    lout = np.array([logsumexp(for_out[t, :]) for t in range(num_tags)])
    node = (lin + lout) / 2.0  # log sqrt(w- w+); -inf if either is -inf (never NaN: no +inf)
    log_z = logsumexp(node)
    alive = np.isfinite(node)
    for t in range(num_tags):
        if alive[t]:
            sig = (lout[t] - lin[t]) / 2.0
            log_q[p - 1, :, t] = log_q[p - 1, :, t] + sig - log_z
            log_q[p, t, :] = log_q[p, t, :] - sig - log_z
        else:
            log_q[p - 1, :, t] = -np.inf
            log_q[p, t, :] = -np.inf


def initial_log_q(w: np.ndarray, temperature: float, normalise: bool = True) -> np.ndarray:
    """``w / τ``, each arc group shifted to sum to one in probability space if ``normalise``."""
    log_q = np.asarray(w, dtype=np.float64) / temperature
    if normalise:
        for i in range(log_q.shape[0]):
            log_q[i] = log_q[i] - logsumexp(log_q[i])
    return log_q


def ibp(
    w: np.ndarray,
    temperature: float = 1.0,
    iterations: int = 10,
    order: str = "odd-even",
    normalise: bool = True,
) -> np.ndarray:
    """Run ``iterations`` IBP iterations on arc weights ``w (n-1, T, T)``; return ``log q``.

    ``order="odd-even"`` projects onto the paper's odd clusters (3, 5, ...) first, then the even
    ones (2, 4, ...); ``"even-odd"`` the reverse.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    log_q = initial_log_q(w, temperature, normalise)
    n = log_q.shape[0] + 1
    sweeps = ("odd", "even") if order == "odd-even" else ("even", "odd")
    for _ in range(iterations):
        for parity in sweeps:
            for p in inner_positions(n, parity):
                project_cluster(log_q, p)
    return log_q


def violation(q: np.ndarray) -> float:
    """Max constraint violation of ``q (n-1, T, T)`` w.r.t. ``conv(Y)``'s equalities.

    Max over inner nodes of ``|in-flow - out-flow|`` and over arc groups of ``|sum q - 1|``;
    ``0`` when there is no inner node (``n <= 2``).
    """
    n = q.shape[0] + 1
    if n <= 2:
        return 0.0
    worst = 0.0
    for p in range(1, n - 1):
        flow_in = q[p - 1].sum(axis=0)
        flow_out = q[p].sum(axis=1)
        worst = max(worst, float(np.max(np.abs(flow_in - flow_out))))
    for i in range(n - 1):
        worst = max(worst, abs(float(q[i].sum()) - 1.0))
    return worst


def node_marginals(q: np.ndarray) -> np.ndarray:
    """Tag marginals of the contract from arc marginals ``q (n-1, T, T)``.

    Row sums ``sum_b q[i, a, b]`` for positions ``i < n-1``; the last position uses the column
    sums of the last arc group. (Before convergence rows and columns disagree; this is the
    paper's MBR convention.)
    """
    n = q.shape[0] + 1
    num_tags = q.shape[1]
    unary = np.zeros((n, num_tags))
    for i in range(n - 1):
        unary[i] = q[i].sum(axis=1)
    unary[n - 1] = q[n - 2].sum(axis=0)
    return unary


def bregman_value(q: np.ndarray, theta: np.ndarray) -> float:
    """``<q, θ> + H(q)`` (``0 * (-inf) = 0``): ``B_Y(θ)`` evaluated at ``q``."""
    return dot_safe(q, theta) + entropy(q)


@dataclass(frozen=True)
class BCRFResult:
    """One sequence's BCRF outputs as the contract defines them (``n = len``)."""

    unary: np.ndarray  # (n, T)
    pairwise: np.ndarray  # (n-1, T, T)
    log_q: np.ndarray  # (n-1, T, T)
    log_partition: float  # B_Y(w/τ) at the iterate (not multiplied by τ)
    violation: float


def bcrf(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
    *,
    temperature: float = 1.0,
    iterations: int = 10,
    order: str = "odd-even",
) -> BCRFResult:
    """BCRF marginals, ``B_Y(w/τ)`` and violation for one sequence, lengths 1 and 2 included.

    Length 1: softmax over tags of ``(emissions[0] + start + end) / τ``; length 2: softmax over
    ``T²`` of ``w[0] / τ`` (what the normalised initialisation gives, no projection needed).
    """
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    if n == 1:
        theta = unary_scores(emissions, start, end)[0] / temperature
        unary = softmax(theta)[None, :]
        return BCRFResult(
            unary,
            np.zeros((0, num_tags, num_tags)),
            np.zeros((0, num_tags, num_tags)),
            float(logsumexp(theta)),
            0.0,
        )
    w = fold_arc_weights(emissions, transitions, start, end)
    log_q = ibp(w, temperature, iterations, order)
    q = np.exp(log_q)
    return BCRFResult(node_marginals(q), q, log_q, bregman_value(q, w / temperature), violation(q))
