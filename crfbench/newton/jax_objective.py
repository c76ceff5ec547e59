"""The feature CRF's objective, gradient and Hessian-vector products in jax (float64): the twin
of ``torch_objective`` (read its docstring for the recursions), with positions scanned by
``lax.scan`` and each of value, value-and-gradient and Hv compiled once for all buckets.

jax must run in 64-bit mode (``jax.config.update("jax_enable_x64", True)``), which this module
checks and never switches on itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import problem
from .features import FeatureCorpus
from .problem import Bucket


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class _Data:
    """A bucket as arrays: rows/cols (nnz,) and the mask (B, N) of positions within each length."""

    rows: jax.Array
    cols: jax.Array
    mask: jax.Array

    @classmethod
    def of(cls, bucket: Bucket) -> _Data:
        return cls(jnp.asarray(bucket.rows), jnp.asarray(bucket.cols), jnp.asarray(bucket.mask()))

    def emissions(self, weights: jax.Array) -> jax.Array:
        """X·W: the emission scores (B, N, T) of attribute weights (F, T)."""
        batch, length = self.mask.shape
        flat = (
            jnp.zeros((batch * length, weights.shape[1]), weights.dtype).at[self.rows].add(weights[self.cols])
        )
        return flat.reshape(batch, length, -1)

    def scatter(self, node: jax.Array, num_attributes: int) -> jax.Array:
        """Xᵀ·node: per-position tag vectors (B, N, T) summed into attribute rows (F, T)."""
        flat = node.reshape(-1, node.shape[-1])
        return jnp.zeros((num_attributes, flat.shape[1]), flat.dtype).at[self.cols].add(flat[self.rows])


def _time_major(x: jax.Array) -> jax.Array:
    return jnp.moveaxis(x, 1, 0)


def _forward(
    emissions: jax.Array, transitions: jax.Array, data: _Data
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Normalised log α (B, N, T), q (B, N, T, T) and log Z (B,), as ``torch_objective._forward``."""
    log_z0 = jax.nn.logsumexp(emissions[:, 0], -1)

    def step(carry, inputs):
        alpha, log_z = carry
        emission, active = inputs
        scores = alpha[:, :, None] + transitions
        new = jax.nn.logsumexp(scores, 1) + emission
        normaliser = jax.nn.logsumexp(new, -1)
        alpha = jnp.where(active[:, None], new - normaliser[:, None], alpha)
        q = jax.nn.softmax(scores, 1) * active[:, None, None]
        return (alpha, log_z + jnp.where(active, normaliser, 0.0)), (alpha, q)

    start = emissions[:, 0] - log_z0[:, None]
    (_, log_z), (alphas, qs) = lax.scan(
        step, (start, log_z0), (_time_major(emissions)[1:], _time_major(data.mask)[1:])
    )
    log_alpha = jnp.concatenate([start[:, None], _time_major(alphas)], 1)
    q = jnp.concatenate([jnp.zeros_like(qs[:1]), qs], 0)
    return log_alpha, _time_major(q), log_z


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class _Sweep:
    """As ``torch_objective._Sweep``: log Z (B,), μ (B, N, T), q and r (B, N, T, T)."""

    log_z: jax.Array
    node: jax.Array
    q: jax.Array
    r: jax.Array

    def pair(self) -> jax.Array:
        return self.q * self.node[:, :, None, :]


def _sweep(emissions: jax.Array, transitions: jax.Array, data: _Data) -> _Sweep:
    log_alpha, q, log_z = _forward(emissions, transitions, data)

    def step(beta, inputs):
        emission, active = inputs  # of position t + 1
        scores = transitions + (emission + beta)[:, None, :]
        new = jax.nn.logsumexp(scores, 2)
        beta = jnp.where(active[:, None], new - jax.nn.logsumexp(new, -1, keepdims=True), 0.0)
        return beta, (beta, jax.nn.softmax(scores, 2) * active[:, None, None])

    last = jnp.zeros_like(emissions[:, 0])
    _, (betas, rs) = lax.scan(
        step, last, (_time_major(emissions)[1:], _time_major(data.mask)[1:]), reverse=True
    )
    log_beta = jnp.concatenate([_time_major(betas), last[:, None]], 1)
    r = jnp.concatenate([_time_major(rs), jnp.zeros_like(_time_major(rs)[:, :1])], 1)
    node = jax.nn.softmax(log_alpha + log_beta, -1) * data.mask[:, :, None]
    return _Sweep(log_z, node, q, r)


def _tangent(sweep: _Sweep, mask: jax.Array, e: jax.Array, a_dot: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The tangent marginals (μ̇ node (B, N, T), μ̇ pair summed (T, T)), as ``torch_objective._tangent``."""
    q, r = _time_major(sweep.q), _time_major(sweep.r)

    def forward(a, inputs):
        q_t, e_t, active = inputs
        new = jnp.einsum("bij,bi->bj", q_t, a) + (q_t * a_dot).sum(1) + e_t
        a = jnp.where(active[:, None], new, a)
        return a, a

    def backward(b, inputs):
        r_t, e_next = inputs
        b = (r_t * (a_dot + (e_next + b)[:, None, :])).sum(2)
        return b, b

    _, a_rest = lax.scan(forward, e[:, 0], (q[1:], _time_major(e)[1:], _time_major(mask)[1:]))
    a = jnp.concatenate([e[:, None, 0], _time_major(a_rest)], 1)
    last = jnp.zeros_like(e[:, 0])
    _, b_rest = lax.scan(backward, last, (r[:-1], _time_major(e)[1:]), reverse=True)
    b = jnp.concatenate([_time_major(b_rest), last[:, None]], 1)
    mean = (sweep.node[:, 0] * (a[:, 0] + b[:, 0])).sum(-1)
    node_dot = sweep.node * (a + b - mean[:, None, None])
    centred = a[:, :-1, :, None] + a_dot + (e[:, 1:] + b[:, 1:] - mean[:, None, None])[:, :, None, :]
    return node_dot, (sweep.pair()[:, 1:] * centred).sum((0, 1))


class Objective(problem.Objective):
    """Eq. 3.1 on a corpus in jax, as ``torch_objective.Objective`` (same methods, counts and results)."""

    def __init__(self, corpus: FeatureCorpus, sigma: float, max_tokens: int = 8192):
        # the flag is an attribute of jax.config at run time, absent from its stubs
        if not jax.config.jax_enable_x64:  # type: ignore[attr-defined]
            raise ValueError(
                "the jax objective is float64: call jax.config.update('jax_enable_x64', True) first"
            )
        super().__init__(corpus, sigma)
        self.data = [_Data.of(bucket) for bucket in problem.buckets(corpus, max_tokens)]
        self.gold = jnp.asarray(problem.gold_counts(corpus))
        self._jit_value = jax.jit(self.function)
        self._jit_sweeps = jax.jit(self._sweeps)
        self._jit_hvp = jax.jit(self._tangents)
        self._jit_hvp_autodiff = jax.jit(lambda x, v: jax.jvp(jax.grad(self.function), (x,), (v,))[1])

    def function(self, flat: jax.Array) -> jax.Array:
        """L(λ) as a jax function of the flat parameters (jit-able and differentiable: what
        autodiff Hv and optax's L-BFGS differentiate)."""
        weights, transitions = self.layout.split(flat)
        log_z = sum(_forward(d.emissions(weights), transitions, d)[2].sum() for d in self.data)
        return flat @ flat / (2 * self.sigma**2) + log_z - flat @ self.gold

    def _sweeps(self, flat: jax.Array) -> tuple[jax.Array, jax.Array, list[_Sweep]]:
        weights, transitions = self.layout.split(flat)
        sweeps = [_sweep(d.emissions(weights), transitions, d) for d in self.data]
        # sums of arrays over a nonempty corpus: arrays, never the start 0
        expected_w = cast(
            jax.Array,
            sum(
                d.scatter(s.node, self.layout.num_attributes) for d, s in zip(self.data, sweeps, strict=True)
            ),
        )
        expected_a = cast(jax.Array, sum(s.pair().sum((0, 1)) for s in sweeps))
        expected = jnp.concatenate([expected_w.ravel(), expected_a.ravel()])
        log_z = sum(s.log_z.sum() for s in sweeps)
        value = flat @ flat / (2 * self.sigma**2) + log_z - flat @ self.gold
        return value, flat / self.sigma**2 + expected - self.gold, sweeps

    def _tangents(self, sweeps: list[_Sweep], tangent: jax.Array) -> jax.Array:
        tangent_w, tangent_a = self.layout.split(tangent)
        parts = [
            _tangent(s, d.mask, d.emissions(tangent_w), tangent_a)
            for d, s in zip(self.data, sweeps, strict=True)
        ]
        # sums of arrays over a nonempty corpus: arrays, never the start 0
        node = cast(
            jax.Array,
            sum(d.scatter(n, self.layout.num_attributes) for d, (n, _) in zip(self.data, parts, strict=True)),
        )
        pair = cast(jax.Array, sum(p for _, p in parts))
        return tangent / self.sigma**2 + jnp.concatenate([node.ravel(), pair.ravel()])

    def _value(self, x: np.ndarray) -> float:
        return float(self._jit_value(jnp.asarray(x)))

    def _value_gradient_sweeps(self, x: np.ndarray) -> tuple[float, np.ndarray, list[_Sweep]]:
        value, gradient, sweeps = self._jit_sweeps(jnp.asarray(x))
        return float(value), np.asarray(gradient), sweeps

    def _hvp_at(self, sweeps: list[_Sweep], v: np.ndarray) -> np.ndarray:
        return np.asarray(self._jit_hvp(sweeps, jnp.asarray(v)))

    def _hvp_autodiff(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``jax.jvp`` of ``jax.grad``."""
        return np.asarray(self._jit_hvp_autodiff(jnp.asarray(x), jnp.asarray(v)))
