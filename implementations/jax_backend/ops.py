"""The jax side of the ops namespace (``implementations.ops``): the operations shared kernels
need whose jax spelling differs from torch's. ``torch_backend/ops.py`` has the same names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache as _cache
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array
from jax.scipy.special import xlogy as _xlogy

from ._semiring import logsumexp as _finite_logsumexp

name = "jax"
inf = float("inf")
float64 = jnp.float64
bool_ = jnp.bool_
where = jnp.where
einsum = jnp.einsum
exp = jnp.exp
log = jnp.log
abs = jnp.abs
maximum = jnp.maximum
minimum = jnp.minimum
finfo = jnp.finfo
stop_gradient = jax.lax.stop_gradient


def amax(x: Array, axis: int) -> Array:
    return x.max(axis)


def logsumexp(x: Array, axis: int) -> Array:
    """log-sum-exp over ``axis`` whose gradient is 0, not NaN, where every entry is -inf."""
    return _finite_logsumexp(x, axis)


def astype(x: Array, dtype: Any) -> Array:
    return x.astype(dtype)


def zeros(shape: Sequence[int], like: Array, dtype: Any = None) -> Array:
    """Zeros of (unless given) ``like``'s dtype."""
    return jnp.zeros(tuple(shape), dtype or like.dtype)


def ones(shape: Sequence[int], like: Array, dtype: Any = None) -> Array:
    return jnp.ones(tuple(shape), dtype or like.dtype)


def full(shape: Sequence[int], value: float, like: Array, dtype: Any = None) -> Array:
    return jnp.full(tuple(shape), value, dtype or like.dtype)


def arange(n: int, like: Array) -> Array:
    """``0 .. n-1`` in the default integer dtype."""
    return jnp.arange(n)


def eye(n: int, like: Array) -> Array:
    return jnp.eye(n, dtype=like.dtype)


def one_hot(index: Array, n: int, dtype: Any) -> Array:
    """(..., n) indicators of ``index`` (..., ), all in [0, n)."""
    return jax.nn.one_hot(index, n, dtype=dtype)


def take_along_axis(x: Array, index: Array, axis: int) -> Array:
    return jnp.take_along_axis(x, index, axis=axis)


def broadcast_to(x: Array, shape: Sequence[int]) -> Array:
    return jnp.broadcast_to(x, tuple(shape))


def concatenate(arrays: Sequence[Array], axis: int) -> Array:
    return jnp.concatenate(list(arrays), axis=axis)


def nan_to_num(x: Array, nan: float, posinf: float, neginf: float) -> Array:
    """``x`` with NaN, +inf and -inf replaced by the numbers given."""
    return jnp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def recorded(*arrays: Array) -> bool:
    """Whether the operations on ``arrays`` may be differentiated: always, since a trace does not
    tell (torch's answers from autograd's state)."""
    return True


def stack(arrays: Sequence[Array], axis: int) -> Array:
    return jnp.stack(list(arrays), axis=axis)


# -- for the SparseMAP kernels (kernels/sparsemap*.py)

uint8 = jnp.uint8
isfinite = jnp.isfinite


def min_and_argmin(x: Array, axis: int) -> tuple[Array, Array]:
    """The minimum over ``axis`` and the index of its first occurrence."""
    return x.min(axis), x.argmin(axis)


def add_at(x: Array, index: Array, values: Array) -> Array:
    """``x`` with ``values[..., j]`` added at ``x[..., index[..., j]]`` along the last axis (a
    scatter-add; repeated indices accumulate); ``index`` and ``values`` share ``x``'s leading axes."""
    leading = index.shape[:-1]
    grid = [jnp.arange(n).reshape((n,) + (1,) * (len(leading) - axis)) for axis, n in enumerate(leading)]
    return x.at[(*grid, index)].add(values)


def pinv(x: Array, hermitian: bool = False) -> Array:
    """The Moore–Penrose pseudo-inverse of the last two axes."""
    return jnp.linalg.pinv(x, hermitian=hermitian)


# -- for the scores, tree, token and mean-field kernels
isneginf = jnp.isneginf
swapaxes = jnp.swapaxes


def softmax(x: Array, axis: int) -> Array:
    return jax.nn.softmax(x, axis=axis)


def log_softmax(x: Array, axis: int) -> Array:
    return jax.nn.log_softmax(x, axis=axis)


def max_argmax(x: Array, axis: int) -> tuple[Array, Array]:
    """The largest entry along ``axis`` and its index (the first, on ties)."""
    return x.max(axis), x.argmax(axis)


# -- for BCRF's log form (kernels/bcrf_log_form.py)
expand_dims = jnp.expand_dims


def put_rows(x: Array, index: Array, values: Array) -> Array:
    """``x`` with ``values[:, j]`` written at ``x[:, index[j]]`` (distinct indices along axis 1)."""
    return x.at[:, index].set(values)


def inner(x: Array, y: Array) -> Array:
    """``Σ x ⊙ y`` (B,) over all but the first axis."""
    return (x * y).sum(tuple(range(1, x.ndim)))


# -- for the exact and Bethe kernels
#: the framework's NumPy-like namespace, for code written against one (``implementations.energies``)
array_namespace = jnp
xlogy = _xlogy


def without_gradient(function: Callable[..., Any], *arguments: Any) -> Any:
    """``function(*arguments)`` with nothing differentiated through it (``stop_gradient`` on the result)."""
    return jax.lax.stop_gradient(function(*arguments))


# -- for the dependency-tree kernels (kernels/dependency.py)


def gradient(function: Callable[[Array], Array], x: Array) -> Array:
    """The gradient of ``function(x).sum()`` with respect to ``x``, by ``jax.grad``."""
    return jax.grad(lambda y: function(y).sum())(x)


def from_host(values: Any, like: Array) -> Array:
    """A host (NumPy) array as a jax array (its integer width as jax's x64 mode allows)."""
    return jnp.asarray(values)


def traced(*arrays: Any) -> bool:
    """Whether any of ``arrays`` is a tracer (under ``jax.jit``, ``jax.grad``, ...): its value is unknown."""
    return any(isinstance(a, jax.core.Tracer) for a in arrays)


@_cache
def compiled(function: Callable[..., Array]) -> Callable[..., Array]:
    """``jax.jit(function)``, one per function (compiled once per shape and dtype): a kernel of
    many small operations run eagerly would compile each of them at each new shape."""
    return jax.jit(function)


def scan(step: Callable[[Any, Array], tuple[Any, Any]], carry: Any, xs: Array) -> tuple[Any, Any]:
    """``jax.lax.scan``: one compiled step however long ``xs`` is (a Python loop would unroll)."""
    return jax.lax.scan(step, carry, xs)
