"""Independent solve of the BCRF problem ``B_Y(θ) = max_{q ∈ conv(Y)} <q, θ> + H(q)``.

Used to check where IBP converges to, without sharing any code or idea with it beyond the
problem statement (digest §1.2–1.3):

- ``conv(Y)`` for a chain of ``n >= 2`` positions is ``{q >= 0 : every arc group sums to one,
  in-flow = out-flow at every inner node}`` (Prop. 2; the group sums are redundant for
  ``n >= 3`` but make ``n = 2`` come out right).
- Arcs with ``θ = -inf`` are excluded, and so is every arc that lies on no finite path at all
  (it must carry zero mass in ``conv(Y)``, and keeping it would push the dual to infinity). On
  the remaining arcs the uniform mixture of the finite paths is strictly positive, so Slater's
  condition holds and the dual optimum is attained.
- With the constraints ``A q = b`` the smooth dual is
  ``g(μ) = Σ_arcs exp(θ - Aᵀμ) + bᵀμ`` (generalised entropy ``H(q) + Σ q``; ``Σ q = n - 1`` is
  constant on ``conv(Y)`` so the maximiser is the same); it is minimised with SciPy's
  ``trust-exact`` Newton method using the exact Hessian ``A diag(q) Aᵀ``, and
  ``q = exp(θ - Aᵀμ*)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from .common import dot_safe, entropy, logsumexp, softmax


@dataclass(frozen=True)
class BregmanSolution:
    """The maximiser ``q (n-1, T, T)``, its node marginals ``(n, T)``, the optimal value
    ``B_Y(θ)`` and the final primal infeasibility ``max |A q - b|``."""

    q: np.ndarray
    unary: np.ndarray
    value: float
    infeasibility: float


def useful_arcs(theta: np.ndarray) -> np.ndarray:
    """``(n-1, T, T)`` bool: arcs with finite ``θ`` that lie on at least one finite path."""
    finite = np.isfinite(theta)
    m, num_tags, _ = theta.shape
    n = m + 1
    reach = np.zeros((n, num_tags), dtype=bool)  # node reachable from position 0
    reach[0] = True
    for i in range(m):
        reach[i + 1] = (reach[i][:, None] & finite[i]).any(axis=0)
    coreach = np.zeros((n, num_tags), dtype=bool)  # position n-1 reachable from the node
    coreach[n - 1] = True
    for i in range(m - 1, -1, -1):
        coreach[i] = (finite[i] & coreach[i + 1][None, :]).any(axis=1)
    return finite & reach[:-1, :, None] & coreach[1:, None, :]


def constraint_system(keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(A, b)`` over the kept arcs (flattened in C order): group sums = 1, inner flows = 0.

    Rows that involve no kept arc (a node with no arcs left) are trivially satisfied and dropped.
    """
    m, num_tags, _ = keep.shape
    index = -np.ones(keep.shape, dtype=np.int64)
    index[keep] = np.arange(int(keep.sum()))
    rows: list[np.ndarray] = []
    rhs: list[float] = []
    size = int(keep.sum())
    for i in range(m):
        row = np.zeros(size)
        row[index[i][keep[i]]] = 1.0
        rows.append(row)
        rhs.append(1.0)
    for p in range(1, m):  # inner position p: in-arcs group p-1, out-arcs group p
        for t in range(num_tags):
            row = np.zeros(size)
            ins = index[p - 1, :, t][keep[p - 1, :, t]]
            outs = index[p, t, :][keep[p, t, :]]
            row[ins] += 1.0
            row[outs] -= 1.0
            if ins.size or outs.size:
                rows.append(row)
                rhs.append(0.0)
    return np.array(rows), np.array(rhs)


def solve(theta: np.ndarray, gtol: float = 1e-13, maxiter: int = 1000) -> BregmanSolution:
    """Maximise ``<q, θ> + H(q)`` over ``conv(Y)`` for arc scores ``θ (n-1, T, T)``.

    Raises ``ValueError`` if no finite path exists.
    """
    theta = np.asarray(theta, dtype=np.float64)
    m, num_tags, _ = theta.shape
    keep = useful_arcs(theta)
    if not keep.any():
        raise ValueError("no finite path: conv(Y) restricted to finite arcs is empty")
    # Per-group shifts do not change the maximiser (each group's total is fixed to one).
    shifted = theta.copy()
    for i in range(m):
        shifted[i] = shifted[i] - np.max(shifted[i][keep[i]])
    th = shifted[keep]
    a_mat, b_vec = constraint_system(keep)

    def arcs(mu: np.ndarray) -> np.ndarray:
        return np.exp(th - a_mat.T @ mu)

    def fun(mu: np.ndarray) -> float:
        return float(arcs(mu).sum() + b_vec @ mu)

    def jac(mu: np.ndarray) -> np.ndarray:
        return b_vec - a_mat @ arcs(mu)

    def hess(mu: np.ndarray) -> np.ndarray:
        return (a_mat * arcs(mu)[None, :]) @ a_mat.T

    res = minimize(
        fun,
        np.zeros(len(b_vec)),
        jac=jac,
        hess=hess,
        method="trust-exact",
        options={"gtol": gtol, "maxiter": maxiter},
    )
    mu = res.x
    # A few plain Newton polishing steps (least-squares, the Hessian may be singular).
    for _ in range(5):
        step = np.linalg.lstsq(hess(mu), jac(mu), rcond=None)[0]
        mu = mu - step
    q = np.zeros_like(theta)
    q[keep] = arcs(mu)
    infeasibility = float(np.max(np.abs(a_mat @ q[keep] - b_vec)))
    unary = np.zeros((m + 1, num_tags))
    unary[:m] = q.sum(axis=2)
    unary[m] = q[m - 1].sum(axis=0)
    return BregmanSolution(q, unary, dot_safe(q, theta) + entropy(q), infeasibility)


def solve_unary(theta: np.ndarray) -> BregmanSolution:
    """Length-1 case: ``max_{p ∈ Δ} <p, θ> + H(p)`` is ``logsumexp θ`` at ``p = softmax θ``."""
    theta = np.asarray(theta, dtype=np.float64)
    p = softmax(theta)
    return BregmanSolution(np.zeros((0, theta.size, theta.size)), p[None, :], float(logsumexp(theta)), 0.0)
