"""Small helpers shared by the reference oracles (one sequence, float64, NumPy only).

All functions here are warning-free on ``-inf`` inputs: the test suite turns every
``RuntimeWarning`` into an error, and ``-inf`` is a first-class score in the contract
(``(-inf) - (-inf)`` and ``0 * (-inf)`` must never be evaluated).
"""

from __future__ import annotations

import numpy as np

NEG_INF = -np.inf


def logsumexp(x: np.ndarray, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
    """``log(sum(exp(x)))`` along ``axis``; ``-inf`` where every entry is ``-inf``."""
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):  # log(0) = -inf for an all -inf slice is intended
        out = np.log(np.sum(np.exp(x - m_safe), axis=axis, keepdims=True)) + m_safe
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(x - logsumexp(x))``; exact zeros where ``x = -inf``. Needs one finite entry."""
    x = np.asarray(x, dtype=np.float64)
    lse = logsumexp(x, axis=axis)
    return np.exp(x - np.expand_dims(lse, axis))


def dot_safe(q: np.ndarray, theta: np.ndarray) -> float:
    """``<q, theta>`` with the convention ``0 * (-inf) = 0`` (forbidden arcs carry no mass)."""
    q = np.asarray(q, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    pos = q > 0
    return float(np.sum(q[pos] * theta[pos]))


def entropy(q: np.ndarray) -> float:
    """Shannon entropy ``-sum q log q`` of a non-negative array (``0 log 0 = 0``)."""
    q = np.asarray(q, dtype=np.float64)
    pos = q > 0
    return float(-np.sum(q[pos] * np.log(q[pos])))


def transition_block(transitions: np.ndarray, i: int) -> np.ndarray:
    """The ``(T, T)`` transition scores between positions ``i`` and ``i + 1``."""
    transitions = np.asarray(transitions, dtype=np.float64)
    return transitions if transitions.ndim == 2 else transitions[i]


def boundary(vec: np.ndarray | None, num_tags: int) -> np.ndarray:
    """``start``/``end`` as an array, zeros when absent."""
    if vec is None:
        return np.zeros(num_tags)
    return np.asarray(vec, dtype=np.float64)


def unary_scores(
    emissions: np.ndarray, start: np.ndarray | None = None, end: np.ndarray | None = None
) -> np.ndarray:
    """Per-node scores ``(n, T)``: emissions, plus ``start`` on node 0 and ``end`` on node n-1."""
    u = np.array(emissions, dtype=np.float64, copy=True)
    num_tags = u.shape[1]
    u[0] = u[0] + boundary(start, num_tags)
    u[-1] = u[-1] + boundary(end, num_tags)
    return u


def fold_arc_weights(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> np.ndarray:
    """Arc weights ``w (n-1, T, T)`` of the contract, for ``n >= 2``.

    ``w[i, a, b] = transitions[i, a, b] + emissions[i + 1, b]``, plus
    ``emissions[0, a] + start[a]`` on the first arc group and ``end[b]`` on the last. Every node
    score is thereby counted exactly once.
    """
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    if n < 2:
        raise ValueError("fold_arc_weights needs n >= 2 (a length-1 sequence has no arcs)")
    w = np.empty((n - 1, num_tags, num_tags))
    for i in range(n - 1):
        w[i] = transition_block(transitions, i) + emissions[i + 1][None, :]
    w[0] = w[0] + (emissions[0] + boundary(start, num_tags))[:, None]
    w[-1] = w[-1] + boundary(end, num_tags)[None, :]
    return w
