"""Log-space primitives whose gradients stay finite when every input is -inf.

``jax.nn.logsumexp`` returns -inf for an all -inf slice but its gradient there is NaN
(``exp(-inf - -inf)``), which poisons autodiff through forbidden tags. Every method that
differentiates through a log-sum-exp uses :func:`logsumexp` instead.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import Array


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _logsumexp(x: Array, axis: int) -> Array:
    """logsumexp over one axis whose derivative is exactly 0 where the result is -inf."""
    return jax.nn.logsumexp(x, axis=axis)


@_logsumexp.defjvp
def _logsumexp_jvp(axis: int, primals: tuple[Array], tangents: tuple[Array]) -> tuple[Array, Array]:
    (x,), (dx,) = primals, tangents
    result = jax.nn.logsumexp(x, axis=axis, keepdims=True)
    # an all -inf slice has result -inf: shifting by 0 instead gives exp(-inf) = 0 weights, no NaN
    weights = jnp.exp(x - jnp.where(jnp.isneginf(result), 0.0, result))
    return jnp.squeeze(result, axis), jnp.sum(weights * dx, axis=axis)


def logsumexp(x: Array, axis: int) -> Array:
    """``log Σ exp(x)`` along ``axis`` (removed), -inf for an all -inf slice, finite gradients."""
    return _logsumexp(x, axis % x.ndim)


def log_matmul(a: Array, b: Array) -> Array:
    """Log-semiring matrix product ``c[..., i, k] = LSE_j a[..., i, j] + b[..., j, k]``."""
    return logsumexp(a[..., :, :, None] + b[..., None, :, :], axis=-2)


def max_matmul(a: Array, b: Array) -> tuple[Array, Array]:
    """Max-plus matrix product and its argmax: ``c[..., i, k] = max_j a[..., i, j] + b[..., j, k]``."""
    scores = a[..., :, :, None] + b[..., None, :, :]
    return scores.max(axis=-2), scores.argmax(axis=-2)


def log_identity(batch_shape: tuple[int, ...], num_tags: int, like: Array) -> Array:
    """Log-semiring identity matrices: 0 on the diagonal, -inf elsewhere, shape (*batch, T, T)."""
    eye = jnp.where(jnp.eye(num_tags, dtype=bool), 0.0, -jnp.inf).astype(like.dtype)
    return jnp.broadcast_to(eye, (*batch_shape, num_tags, num_tags))
