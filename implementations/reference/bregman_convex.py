"""Independent solve of the BCRF problem ``B_Y(θ) = max_{q ∈ conv(Y)} <q, θ> + H(q)``.

Used to check where IBP converges to, without sharing any code or idea with it beyond the
problem statement (docs/derivations.md §3.1–3.2):

- ``conv(Y)`` for a chain of ``n >= 2`` positions is ``{q >= 0 : every arc group sums to one,
  in-flow = out-flow at every inner node}`` (Prop. 2; the group sums are redundant for
  ``n >= 3`` but make ``n = 2`` come out right).
- Arcs with ``θ = -inf`` are excluded, and so is every arc that lies on no finite path at all
  (it must carry zero mass in ``conv(Y)``, and keeping it would push the dual to infinity). On
  the remaining arcs the uniform mixture of the finite paths is strictly positive, so Slater's
  condition holds and the dual optimum is attained.
- Lagrangian duality with multipliers ``ν_g`` (group sums) and ``λ_v`` (flows) gives
  ``q = exp(θ - Fᵀλ - ν)``; minimising out ``ν`` in closed form leaves the smooth convex dual
  ``h(λ) = Σ_groups logsumexp(θ - Fᵀλ)`` (``q`` = per-group softmax), minimised with SciPy's
  ``trust-exact`` Newton method and its exact Hessian. This shares nothing with IBP's cyclic
  projections beyond the problem statement.
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
    groups = group_rows(keep)
    flows = flow_rows(keep)
    return np.vstack([groups, flows]), np.concatenate([np.ones(len(groups)), np.zeros(len(flows))])


def _arc_index(keep: np.ndarray) -> np.ndarray:
    index = -np.ones(keep.shape, dtype=np.int64)
    index[keep] = np.arange(int(keep.sum()))
    return index


def group_rows(keep: np.ndarray) -> np.ndarray:
    """One row per arc group: the indicator of its kept arcs."""
    index = _arc_index(keep)
    rows = np.zeros((keep.shape[0], int(keep.sum())))
    for i in range(keep.shape[0]):
        rows[i, index[i][keep[i]]] = 1.0
    return rows


def flow_rows(keep: np.ndarray) -> np.ndarray:
    """One row per inner node with kept arcs: ``+1`` on its in-arcs, ``-1`` on its out-arcs."""
    m, num_tags, _ = keep.shape
    index = _arc_index(keep)
    rows = []
    for p in range(1, m):  # inner position p: in-arcs group p-1, out-arcs group p
        for t in range(num_tags):
            row = np.zeros(int(keep.sum()))
            ins = index[p - 1, :, t][keep[p - 1, :, t]]
            outs = index[p, t, :][keep[p, t, :]]
            row[ins] += 1.0
            row[outs] -= 1.0
            if ins.size or outs.size:
                rows.append(row)
    return np.array(rows).reshape(len(rows), int(keep.sum()))


def solve(theta: np.ndarray, gtol: float = 1e-13, maxiter: int = 2000) -> BregmanSolution:
    """Maximise ``<q, θ> + H(q)`` over ``conv(Y)`` for arc scores ``θ (n-1, T, T)``.

    The group constraints are eliminated in closed form (each group's multiplier is its
    log-normaliser), leaving the smooth convex dual in the flow multipliers ``λ``:
    ``h(λ) = Σ_groups logsumexp_{arcs in group}(θ - Fᵀλ)``, with ``q`` the per-group softmax
    of ``θ - Fᵀλ``. ``h`` has a bounded Hessian (``F (Σ_g diag q_g - q_g q_gᵀ) Fᵀ``), so
    SciPy's ``trust-exact`` Newton method is stable even at low temperature.

    Raises ``ValueError`` if no finite path exists and ``RuntimeError`` if the solve does not
    reach a feasible point (so a test can never compare against an unconverged oracle).
    """
    theta = np.asarray(theta, dtype=np.float64)
    m, num_tags, _ = theta.shape
    keep = useful_arcs(theta)
    if not keep.any():
        raise ValueError("no finite path: conv(Y) restricted to finite arcs is empty")
    th = theta[keep]
    flows = flow_rows(keep)
    group_of = np.concatenate([np.full(int(keep[i].sum()), i) for i in range(m)])

    def arcs(lam: np.ndarray) -> tuple[np.ndarray, float]:
        z = th - flows.T @ lam
        q = np.zeros_like(z)
        total = 0.0
        for i in range(m):
            sel = group_of == i
            lse = float(logsumexp(z[sel]))
            q[sel] = np.exp(z[sel] - lse)
            total += lse
        return q, total

    def fun(lam: np.ndarray) -> float:
        return arcs(lam)[1]

    def jac(lam: np.ndarray) -> np.ndarray:
        return -flows @ arcs(lam)[0]

    def hess(lam: np.ndarray) -> np.ndarray:
        q = arcs(lam)[0]
        cov = np.diag(q)
        for i in range(m):
            sel = np.flatnonzero(group_of == i)
            cov[np.ix_(sel, sel)] -= np.outer(q[sel], q[sel])
        return flows @ cov @ flows.T

    lam = np.zeros(len(flows))
    if len(flows):
        res = minimize(
            fun, lam, jac=jac, hess=hess, method="trust-exact", options={"gtol": gtol, "maxiter": maxiter}
        )
        lam = res.x
        for _ in range(5):  # plain Newton polish (least squares: the Hessian is singular)
            lam = lam - np.linalg.lstsq(hess(lam), jac(lam), rcond=None)[0]
    q = np.zeros_like(theta)
    q[keep] = arcs(lam)[0]
    a_mat, b_vec = constraint_system(keep)
    infeasibility = float(np.max(np.abs(a_mat @ q[keep] - b_vec)))
    if not infeasibility < 1e-9:
        raise RuntimeError(f"dual solve did not converge: max |Aq - b| = {infeasibility:.3g}")
    unary = np.zeros((m + 1, num_tags))
    unary[:m] = q.sum(axis=2)
    unary[m] = q[m - 1].sum(axis=0)
    return BregmanSolution(q, unary, dot_safe(q, theta) + entropy(q), infeasibility)


def solve_unary(theta: np.ndarray) -> BregmanSolution:
    """Length-1 case: ``max_{p ∈ Δ} <p, θ> + H(p)`` is ``logsumexp θ`` at ``p = softmax θ``."""
    theta = np.asarray(theta, dtype=np.float64)
    p = softmax(theta)
    return BregmanSolution(np.zeros((0, theta.size, theta.size)), p[None, :], float(logsumexp(theta)), 0.0)
