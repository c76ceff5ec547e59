"""The feature CRF's objective, gradient and Hessian-vector products in torch (float64).

Forward–backward runs in log space with α and β normalised at every position (the thesis's unscaled
products overflow, digest §3.4; docs/derivations.md §10 says why the normalising matters) and keeps,
at the point λ it was run at, the conditionals ``q_t(i | j) = P(y_{t-1} = i | y_t = j, x_{≤t})``
(forward) and ``r_t(j | i) = P(y_{t+1} = j | y_t = i, x)`` (backward). The thesis's Hv dynamic
program (Chapter IV, Algorithms 4–7: the expectation-semiring recursions ᾱ, β̄) is run on the
ratios ``a_t = ᾱ_t / α_t`` and ``b_t = β̄_t / β_t``, which are conditional expectations of the
tangent score ``f̄ = fᵀv`` and cannot overflow:

    a_0(j) = ė_0(j),     a_t(j) = Σ_i q_t(i|j) (a_{t-1}(i) + Ȧ(i, j)) + ė_t(j)
    b_{n-1}(i) = 0,      b_t(i) = Σ_j r_t(j|i) (Ȧ(i, j) + ė_{t+1}(j) + b_{t+1}(j))
    w = E[f̄] = Σ_j μ_0(j) (a_0(j) + b_0(j))
    μ̇_t(j) = μ_t(j) (a_t(j) + b_t(j) − w)
    μ̇_t(i, j) = μ_t(i, j) (a_{t-1}(i) + Ȧ(i, j) + ė_t(j) + b_t(j) − w)

where ė = X·V_W and Ȧ = V_A are the tangent's scores. Then ``Hv = v/σ² + Fᵀ μ̇``: the thesis's
``Σ_i (dⁱ − wⁱ pⁱ)`` with the covariance formed arc by arc. One Hv costs two sweeps over the
stored conditionals plus the feature scatter, the same order as a gradient and cheaper than one
(no exp), which is the thesis's claim; ``hvp_autodiff`` (forward-over-reverse autodiff of the
forward pass, no tangent recursion) is the independent check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from . import problem
from .features import FeatureCorpus
from .problem import Bucket

DTYPE = torch.float64


@dataclass(frozen=True)
class _Data:
    """A bucket as tensors: rows/cols (nnz,) and the mask (B, N) of positions within each length."""

    rows: Tensor
    cols: Tensor
    mask: Tensor

    @classmethod
    def of(cls, bucket: Bucket) -> _Data:
        return cls(
            torch.from_numpy(bucket.rows), torch.from_numpy(bucket.cols), torch.from_numpy(bucket.mask())
        )

    def emissions(self, weights: Tensor) -> Tensor:
        """X·W: the emission scores (B, N, T) of attribute weights (F, T)."""
        batch, length = self.mask.shape
        flat = weights.new_zeros(batch * length, weights.shape[1]).index_add(0, self.rows, weights[self.cols])
        return flat.view(batch, length, -1)

    def scatter(self, node: Tensor, num_attributes: int) -> Tensor:
        """Xᵀ·node: per-position tag vectors (B, N, T) summed into attribute rows (F, T)."""
        flat = node.reshape(-1, node.shape[-1])
        return flat.new_zeros(num_attributes, flat.shape[1]).index_add(0, self.cols, flat[self.rows])


@dataclass
class _Sweep:
    """Forward–backward at one λ for one bucket: log Z (B,), node marginals μ (B, N, T) and the
    conditionals q, r (B, N, T, T) (``q[:, t, i, j] = q_t(i|j)``, ``r[:, t, i, j] = r_t(j|i)``)."""

    log_z: Tensor
    node: Tensor
    q: Tensor
    r: Tensor

    def pair(self) -> Tensor:
        """Pair marginals μ_t(i, j) = q_t(i|j) μ_t(j) (B, N, T, T), zero at t = 0 and on padding."""
        return self.q * self.node[:, :, None, :]


def _forward(
    emissions: Tensor, transitions: Tensor, data: _Data, keep: bool
) -> tuple[Tensor, Tensor | None, Tensor]:
    """Normalised log α (B, N, T) (each position's log-sum-exp is 0; carried unchanged past each
    length), q if ``keep``, and log Z (B,), the sum of the normalisers.

    Normalising keeps the softmax inputs of size O(|scores|) rather than O(t·|scores|): unnormalised
    log α grows with t, its rounding (ε·|log α|) becomes a relative error of q that the tangent
    recursion multiplies by |a_t| = O(t), and Hv lost 7 digits at N = 500 (scores of size 30).
    """
    batch, length, num_tags = emissions.shape
    log_z = torch.logsumexp(emissions[:, 0], -1)
    alpha = [emissions[:, 0] - log_z[:, None]]
    q = emissions.new_zeros(batch, length, num_tags, num_tags) if keep else None
    for t in range(1, length):
        scores = alpha[-1][:, :, None] + transitions  # (B, i, j)
        active = data.mask[:, t, None]
        step = torch.logsumexp(scores, 1) + emissions[:, t]
        normaliser = torch.logsumexp(step, -1)
        log_z = log_z + torch.where(active[:, 0], normaliser, 0.0)
        alpha.append(torch.where(active, step - normaliser[:, None], alpha[-1]))
        if q is not None:  # keep
            q[:, t] = torch.softmax(scores, 1) * active[:, :, None]
    return torch.stack(alpha, 1), q, log_z


def _sweep(emissions: Tensor, transitions: Tensor, data: _Data) -> _Sweep:
    log_alpha, q, log_z = _forward(emissions, transitions, data, keep=True)
    if q is None:  # keep=True
        raise RuntimeError("_forward kept no q")
    batch, length, num_tags = emissions.shape
    beta = [emissions.new_zeros(batch, num_tags)]  # normalised log β, as log α
    r = emissions.new_zeros(batch, length, num_tags, num_tags)
    for t in range(length - 2, -1, -1):
        scores = transitions + (emissions[:, t + 1] + beta[-1])[:, None, :]  # (B, i, j)
        active = data.mask[:, t + 1, None]
        step = torch.logsumexp(scores, 2)
        beta.append(torch.where(active, step - torch.logsumexp(step, -1, keepdim=True), 0.0))
        r[:, t] = torch.softmax(scores, 2) * active[:, :, None]
    log_beta = torch.stack(beta[::-1], 1)
    node = torch.softmax(log_alpha + log_beta, -1) * data.mask[:, :, None]
    return _Sweep(log_z, node, q, r)


def _tangent(
    sweep: _Sweep, mask: Tensor, tangent_emissions: Tensor, tangent_transitions: Tensor
) -> tuple[Tensor, Tensor]:
    """The tangent marginals (μ̇ node (B, N, T), μ̇ pair summed over B and N (T, T)) of the module
    docstring's recursions; ``mask`` (B, N) marks the positions within each length."""
    e, a_dot, q, r = tangent_emissions, tangent_transitions, sweep.q, sweep.r
    length = e.shape[1]
    forward = [e[:, 0]]
    for t in range(1, length):
        step = torch.einsum("bij,bi->bj", q[:, t], forward[-1]) + (q[:, t] * a_dot).sum(1) + e[:, t]
        forward.append(torch.where(mask[:, t, None], step, forward[-1]))
    backward = [torch.zeros_like(e[:, 0])]
    for t in range(length - 2, -1, -1):
        backward.append((r[:, t] * (a_dot + (e[:, t + 1] + backward[-1])[:, None, :])).sum(2))
    a = torch.stack(forward, 1)
    b = torch.stack(backward[::-1], 1)
    mean = (sweep.node[:, 0] * (a[:, 0] + b[:, 0])).sum(-1)  # w = E[f̄] (B,)
    node_dot = sweep.node * (a + b - mean[:, None, None])
    if length == 1:
        return node_dot, a_dot.new_zeros(a_dot.shape)
    pair = sweep.pair()[:, 1:]
    centred = a[:, :-1, :, None] + a_dot + (e[:, 1:] + b[:, 1:] - mean[:, None, None])[:, :, None, :]
    return node_dot, (pair * centred).sum((0, 1))


class Objective(problem.Objective):
    """Eq. 3.1 on a corpus in torch (``problem.Objective`` says what each method counts and keeps)."""

    def __init__(self, corpus: FeatureCorpus, sigma: float, max_tokens: int = 8192):
        super().__init__(corpus, sigma)
        self.data = [_Data.of(bucket) for bucket in problem.buckets(corpus, max_tokens)]
        self.gold = torch.from_numpy(problem.gold_counts(corpus))

    def _penalty(self, flat: Tensor) -> Tensor:
        return flat.dot(flat) / (2 * self.sigma**2)

    def function(self, flat: Tensor) -> Tensor:
        """L(λ) as plain differentiable torch operations (the log-space forward pass)."""
        weights, transitions = self.layout.split(flat)
        log_z = sum(_forward(d.emissions(weights), transitions, d, keep=False)[2].sum() for d in self.data)
        return self._penalty(flat) + log_z - flat.dot(self.gold)

    def _value(self, x: np.ndarray) -> float:
        return float(self.function(torch.tensor(x, dtype=DTYPE)))

    def _value_gradient_sweeps(self, x: np.ndarray) -> tuple[float, np.ndarray, list[_Sweep]]:
        flat = torch.tensor(x, dtype=DTYPE)
        weights, transitions = self.layout.split(flat)
        sweeps, log_z = [], flat.new_zeros(())
        expected = torch.zeros_like(flat)
        expected_w, expected_a = self.layout.split(expected)
        for d in self.data:
            sweep = _sweep(d.emissions(weights), transitions, d)
            sweeps.append(sweep)
            log_z = log_z + sweep.log_z.sum()
            expected_w += d.scatter(sweep.node, self.layout.num_attributes)
            expected_a += sweep.pair().sum((0, 1))
        value = self._penalty(flat) + log_z - flat.dot(self.gold)
        return float(value), (flat / self.sigma**2 + expected - self.gold).numpy(), sweeps

    def _hvp_at(self, sweeps: list[_Sweep], v: np.ndarray) -> np.ndarray:
        tangent = torch.tensor(v, dtype=DTYPE)
        tangent_w, tangent_a = self.layout.split(tangent)
        result = tangent / self.sigma**2
        result_w, result_a = self.layout.split(result)
        for d, sweep in zip(self.data, sweeps, strict=True):
            node_dot, pair_dot = _tangent(sweep, d.mask, d.emissions(tangent_w), tangent_a)
            result_w += d.scatter(node_dot, self.layout.num_attributes)
            result_a += pair_dot
        return result.numpy()

    def _hvp_autodiff(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``torch.func.jvp`` of ``torch.func.grad`` (the suite's CRF kernels are
        ``autograd.Function``s, which ``torch.func`` does not enter: hence this module's forward)."""
        flat, tangent = torch.tensor(x, dtype=DTYPE), torch.tensor(v, dtype=DTYPE)
        return torch.func.jvp(torch.func.grad(self.function), (flat,), (tangent,))[1].numpy()
