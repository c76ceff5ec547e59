"""The torch side of the ops namespace (``implementations.ops``): the operations shared kernels
need whose torch spelling differs from jax's. ``jax_backend/ops.py`` has the same names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ._semiring import logsumexp as _finite_logsumexp

name = "torch"
inf = float("inf")
float64 = torch.float64
bool_ = torch.bool
where = torch.where
einsum = torch.einsum
exp = torch.exp
log = torch.log


def abs(x: Tensor) -> Tensor:
    return x.abs()


def maximum(x: Tensor, y: Tensor | float) -> Tensor:
    """Elementwise max; ``y`` may be a Python number."""
    return x.clamp(min=y) if isinstance(y, int | float) else torch.maximum(x, y)


def minimum(x: Tensor, y: Tensor | float) -> Tensor:
    """Elementwise min; ``y`` may be a Python number."""
    return x.clamp(max=y) if isinstance(y, int | float) else torch.minimum(x, y)


def amax(x: Tensor, axis: int) -> Tensor:
    return x.amax(axis)


def logsumexp(x: Tensor, axis: int) -> Tensor:
    """log-sum-exp over ``axis`` whose gradient is 0, not NaN, where every entry is -inf."""
    return _finite_logsumexp(x, axis)


def astype(x: Tensor, dtype: Any) -> Tensor:
    return x.to(dtype)


def zeros(shape: Sequence[int], like: Tensor, dtype: Any = None) -> Tensor:
    """Zeros of ``like``'s device and (unless given) dtype."""
    return torch.zeros(tuple(shape), dtype=dtype or like.dtype, device=like.device)


def ones(shape: Sequence[int], like: Tensor, dtype: Any = None) -> Tensor:
    return torch.ones(tuple(shape), dtype=dtype or like.dtype, device=like.device)


def full(shape: Sequence[int], value: float, like: Tensor, dtype: Any = None) -> Tensor:
    return torch.full(tuple(shape), value, dtype=dtype or like.dtype, device=like.device)


def arange(n: int, like: Tensor) -> Tensor:
    """``0 .. n-1`` in the default integer dtype, on ``like``'s device."""
    return torch.arange(n, device=like.device)


def eye(n: int, like: Tensor) -> Tensor:
    return torch.eye(n, dtype=like.dtype, device=like.device)


def one_hot(index: Tensor, n: int, dtype: Any) -> Tensor:
    """(..., n) indicators of ``index`` (..., ), all in [0, n)."""
    return torch.nn.functional.one_hot(index, n).to(dtype)


def take_along_axis(x: Tensor, index: Tensor, axis: int) -> Tensor:
    return torch.take_along_dim(x, index, axis)


def broadcast_to(x: Tensor, shape: Sequence[int]) -> Tensor:
    return x.expand(*shape)


def concatenate(arrays: Sequence[Tensor], axis: int) -> Tensor:
    return torch.cat(list(arrays), dim=axis)


def stack(arrays: Sequence[Tensor], axis: int) -> Tensor:
    return torch.stack(list(arrays), dim=axis)


def finfo(dtype: Any) -> Any:
    return torch.finfo(dtype)


def stop_gradient(x: Tensor) -> Tensor:
    return x.detach()


def nan_to_num(x: Tensor, nan: float, posinf: float, neginf: float) -> Tensor:
    """``x`` with NaN, +inf and -inf replaced by the numbers given (a zero gradient there)."""
    return torch.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def recorded(*arrays: Tensor) -> bool:
    """Whether autograd records the operations on ``arrays``: an in-place update must then spare
    what a backward reads, and a -inf must not meet a derivative."""
    return torch.is_grad_enabled() and any(a.requires_grad for a in arrays)


# -- for the SparseMAP kernels (kernels/sparsemap*.py)

uint8 = torch.uint8
isfinite = torch.isfinite


def min_and_argmin(x: Tensor, axis: int) -> tuple[Tensor, Tensor]:
    """The minimum over ``axis`` and the index of its first occurrence, in one reduction."""
    values, indices = x.min(axis)
    return values, indices


def add_at(x: Tensor, index: Tensor, values: Tensor) -> Tensor:
    """``x`` with ``values[..., j]`` added at ``x[..., index[..., j]]`` along the last axis (a
    scatter-add; repeated indices accumulate); ``index`` and ``values`` share ``x``'s leading axes."""
    return x.scatter_add(-1, index, values)


def pinv(x: Tensor, hermitian: bool = False) -> Tensor:
    """The Moore–Penrose pseudo-inverse of the last two axes."""
    return torch.linalg.pinv(x, hermitian=hermitian)


# -- for the scores, tree, token and mean-field kernels
isneginf = torch.isneginf


def softmax(x: Tensor, axis: int) -> Tensor:
    return torch.softmax(x, dim=axis)


def log_softmax(x: Tensor, axis: int) -> Tensor:
    return torch.log_softmax(x, dim=axis)


def max_argmax(x: Tensor, axis: int) -> tuple[Tensor, Tensor]:
    """The largest entry along ``axis`` and its index (the first, on ties), in one reduction."""
    return x.max(axis)


def swapaxes(x: Tensor, axis1: int, axis2: int) -> Tensor:
    return x.transpose(axis1, axis2)


# -- for BCRF's log form (kernels/bcrf_log_form.py)


def expand_dims(x: Tensor, axis: int) -> Tensor:
    return x.unsqueeze(axis)


def put_rows(x: Tensor, index: Tensor, values: Tensor) -> Tensor:
    """``x`` with ``values[:, j]`` written at ``x[:, index[j]]`` (distinct indices along axis 1)."""
    return x.index_copy(1, index, values)


def inner(x: Tensor, y: Tensor) -> Tensor:
    """``Σ x ⊙ y`` (B,) over all but the first axis, as a batched dot (no temporary as big as ``x``)."""
    return torch.bmm(x.flatten(1).unsqueeze(1), y.flatten(1).unsqueeze(2)).view(-1)


# -- for the exact and Bethe kernels
#: the framework's NumPy-like namespace, for code written against one (``implementations.energies``)
array_namespace = torch
xlogy = torch.xlogy


def without_gradient(function: Callable[..., Any], *arguments: Any) -> Any:
    """``function(*arguments)`` with nothing differentiated through it (run under ``no_grad``)."""
    with torch.no_grad():
        return function(*arguments)


# -- for the dependency-tree kernels (kernels/dependency.py)


def gradient(function: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """The gradient of ``function(x).sum()`` with respect to ``x``, by autograd: itself
    differentiable when ``x`` is recorded (``recorded``), detached otherwise."""
    keep = recorded(x)
    with torch.enable_grad():
        leaf = x if x.requires_grad else x.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(function(leaf).sum(), leaf, create_graph=keep)
    return grad


def from_host(values: Any, like: Tensor) -> Tensor:
    """A host (NumPy) array as a tensor on ``like``'s device, keeping its dtype."""
    return torch.as_tensor(values, device=like.device)


def traced(*arrays: object) -> bool:
    """Whether any of ``arrays`` is abstract (a value unknown until run): never, in eager torch."""
    return False


def compiled(function: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``function`` itself: torch runs it eagerly (jax compiles it once per shape)."""
    return function


def scan(
    step: Callable[[Any, Any], tuple[Any, Any]], carry: Any, xs: Tensor | tuple[Tensor, ...]
) -> tuple[Any, Any]:
    """``lax.scan`` in torch: ``carry, y = step(carry, x)`` for each ``x`` of ``xs`` (first axis;
    a tuple of arrays gives tuples), a Python loop; returns the last carry and the outputs ``y``
    (tuples of arrays) stacked on axis 0."""
    outputs = []
    for x in zip(*xs, strict=True) if isinstance(xs, tuple) else xs:
        carry, y = step(carry, x)
        outputs.append(y)
    return carry, tuple(torch.stack(parts) for parts in zip(*outputs, strict=True))
