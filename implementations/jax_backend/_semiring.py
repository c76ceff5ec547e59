"""Log-space primitives whose gradients stay finite when every input is -inf.

``jax.nn.logsumexp`` returns -inf for an all -inf slice but its gradient there is NaN
(``exp(-inf - -inf)``), which poisons autodiff through forbidden tags. Every method that
differentiates through a log-sum-exp uses :func:`logsumexp` instead, whose derivatives of every
order are finite and exact (``tests/implementations/test_second_order.py``).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array, lax


def logsumexp(x: Array, axis: int) -> Array:
    """``log Σ exp(x)`` along ``axis`` (removed), -inf for an all -inf slice, finite derivatives.

    Plain code rather than a ``custom_jvp``, so JAX's derivatives of every order are exact and
    finite (inside ``lax.scan`` too, where partial evaluation would drop a custom rule): the shift
    is a constant (``stop_gradient``; log-sum-exp does not depend on it), 0 for an all -inf slice,
    whose sum 0 is replaced by 1 under the ``where`` so that no ``log 0`` reaches a derivative.
    """
    top = lax.stop_gradient(x.max(axis=axis, keepdims=True))
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    total = jnp.exp(x - top).sum(axis=axis, keepdims=True)
    some = total > 0
    result = jnp.where(some, jnp.log(jnp.where(some, total, 1.0)) + top, -jnp.inf)
    return jnp.squeeze(result, axis)


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
