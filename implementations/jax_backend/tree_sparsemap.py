"""``tree-sparsemap`` in jax: the trees' problem (``implementations/kernels/tree_sparsemap.py``,
where the method is described) iterated by the chain's ``lax.while_loop`` (``sparsemap.run``)
under ``jax.jit`` with the options static, the Chu-Liu-Edmonds oracle reached from the compiled
loop through ``jax.pure_callback`` (it runs on the host), and the gradients as ``jax.custom_vjp``
rules: Prop. 1 for the marginals, Danskin for the value and the losses. Only the solve is
compiled (once per shape, dtype and options); the rules around it run eagerly.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from ..kernels import sparsemap as kernel
from ..kernels import tree_sparsemap as shared
from . import sparsemap as chain


def _callback_trees(adjusted: Array, lengths: Array) -> Array:
    """The oracle's best trees: :func:`shared.best_trees_host` called back on the host."""
    integer = jax.dtypes.canonicalize_dtype(jnp.int64)

    def on_host(values: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        return shared.best_trees_host(values, sizes).astype(integer)

    result = jax.ShapeDtypeStruct(adjusted.shape[:2], integer)
    return jax.pure_callback(on_host, result, adjusted, lengths, vmap_method="sequential")


@partial(jax.jit, static_argnames=("solver", "iterations", "tolerance", "max_support"))
def _solution(
    scores: Array, lengths: Array, *, solver: str, iterations: int, tolerance: float | None, max_support: int
) -> kernel.Solution:
    with jax.default_matmul_precision("highest"):
        problem, state = shared.begin(
            scores, lengths, tolerance, max_support, best_trees=_callback_trees, working=chain._working()
        )
        return chain.run(problem, state, solver, iterations, scores.dtype)


def solution(scores: Array, lengths: Array, **options: Any) -> kernel.Solution:
    """The compiled solve, in jax's working dtype (float64 under ``jax_enable_x64``);
    ``iterations`` a Python int when called eagerly, as in torch."""
    found = _solution(scores, lengths, **options)
    if isinstance(found.iterations, jax.core.Tracer):
        return found
    return found._replace(iterations=int(found.iterations))


Settings = tuple[tuple[str, Any], ...]


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def _marginals(scores: Array, lengths: Array, settings: Settings) -> Array:
    return shared.arcs(_solution(scores, lengths, **dict(settings)).unary)


def _marginals_forward(scores: Array, lengths: Array, settings: Settings) -> tuple[Array, tuple[Array, ...]]:
    found = _solution(scores, lengths, **dict(settings))
    return shared.arcs(found.unary), (found.paths, found.active, found.inverse)


def _marginals_backward(settings: Settings, saved: tuple[Array, ...], grad: Array) -> tuple[Any, None]:
    paths, active, inverse = saved
    with jax.default_matmul_precision("highest"):
        return shared.marginals_gradient(paths, active, inverse, grad), None


_marginals.defvjp(_marginals_forward, _marginals_backward)


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def _value(scores: Array, lengths: Array, settings: Settings) -> Array:
    """The value with Danskin's gradient μ*, taken from :func:`_marginals` so that a derivative
    of the gradient is Prop. 1's Jacobian."""
    return _solution(scores, lengths, **dict(settings)).value


def _value_forward(scores: Array, lengths: Array, settings: Settings) -> tuple[Array, Array]:
    return _value(scores, lengths, settings), _marginals(scores, lengths, settings)


def _value_backward(settings: Settings, arcs: Array, grad: Array) -> tuple[Array, None]:
    return grad[:, None, None] * arcs, None


_value.defvjp(_value_forward, _value_backward)


def marginals(scores: Array, lengths: Array, **options: Any) -> Array:
    """μ* (B, N+1, N+1) under :func:`jax.custom_vjp` (Prop. 1's backward pass)."""
    return _marginals(scores, lengths, tuple(sorted(options.items())))


def value(scores: Array, lengths: Array, **options: Any) -> Array:
    """The SparseMAP value (B,) under :func:`jax.custom_vjp` (Danskin: the gradient is μ*)."""
    return _value(scores, lengths, tuple(sorted(options.items())))
