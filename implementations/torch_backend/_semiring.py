"""Log-space primitives whose gradients stay finite when every input is -inf.

``torch.logsumexp`` returns -inf for an all -inf slice but its gradient there is NaN
(``exp(-inf - -inf)``), which poisons autograd through forbidden tags. Every method that
differentiates through a log-sum-exp uses :func:`logsumexp` instead, whose derivatives of every
order are finite and exact (``tests/implementations/test_second_order.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

#: Last dims (of float32 CPU tensors) over whose length torch's max reductions are slow (:func:`largest`).
SLOW_LAST_DIMS = range(16, 32)


def largest(x: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """``x.amax(dim, keepdim)``: the same values and gradient, faster where torch's kernel is slow.

    On the CPU, torch 2.13 (AVX-512) reduces float32 slowly where the tensor's last dim holds 16
    to 31 entries, whichever dim is reduced, and several times faster through float64, conversions
    included (the float64 kernel is vectorised there; docs/derivations.md, "Measurements behind
    the kernels"). The largest of float32 numbers is exact in float64, so that path changes nothing
    but the time.
    """
    slow = x.ndim and SLOW_LAST_DIMS.start <= x.shape[-1] < SLOW_LAST_DIMS.stop  # (traceable)
    if x.dtype == torch.float32 and x.device.type == "cpu" and slow:
        return x.double().amax(dim, keepdim).float()
    return x.amax(dim, keepdim)


class _LogSumExp(torch.autograd.Function):
    """logsumexp over one dim whose backward is exactly 0 where the result is -inf, at every order.

    The backward is made of differentiable operations on the saved input and the saved *output*
    (which, unlike an intermediate, keeps its graph), so a double backward (a gradient penalty, a
    Hessian-vector product) differentiates the softmax weights fully. The shift is 0 where the
    result is -inf, so no ``-inf - -inf`` arises there, not even in a derivative.
    """

    @staticmethod
    def forward(ctx, x: Tensor, dim: int) -> Tensor:
        result = _logsumexp_values(x, dim)
        ctx.save_for_backward(x, result)
        ctx.dim = dim
        return result

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        x, result = ctx.saved_tensors
        result = result.unsqueeze(ctx.dim)
        shift = torch.where(torch.isneginf(result), 0.0, result)  # all -inf slice: weights exp(-inf) = 0
        return grad.unsqueeze(ctx.dim) * torch.exp(x - shift), None


def _logsumexp_values(x: Tensor, dim: int) -> Tensor:
    """``log Σ exp(x)`` along ``dim`` (removed), -inf for an all -inf slice."""
    top = largest(x, dim, keepdim=True)
    # 0 for an infinite top (an all -inf slice: exp(-inf) = 0; a +inf entry: no inf - inf); one
    # operator, where ``isfinite`` and ``where`` launch five
    shift = torch.nan_to_num(top, nan=torch.nan, posinf=0.0, neginf=0.0)
    return torch.log(torch.exp(x - shift).sum(dim)).add_(shift.squeeze(dim))


def logsumexp(x: Tensor, dim: int) -> Tensor:
    """``log Σ exp(x)`` along ``dim`` (removed), -inf for an all -inf slice, finite gradients
    (the values alone, without an autograd node, where autograd does not record ``x``)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _LogSumExp.apply(x, dim)
    return _logsumexp_values(x, dim)


def log_matmul(a: Tensor, b: Tensor) -> Tensor:
    """Log-semiring matrix product ``c[..., i, k] = LSE_j a[..., i, j] + b[..., j, k]``."""
    return logsumexp(a.unsqueeze(-1) + b.unsqueeze(-3), dim=-2)


def max_matmul(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Max-plus matrix product and its argmax: ``c[..., i, k] = max_j a[..., i, j] + b[..., j, k]``."""
    return (a.unsqueeze(-1) + b.unsqueeze(-3)).max(dim=-2)


def log_identity(batch_shape: tuple[int, ...], num_tags: int, like: Tensor) -> Tensor:
    """Log-semiring identity matrices: 0 on the diagonal, -inf elsewhere, shape (*batch, T, T)."""
    eye = torch.full((num_tags, num_tags), -torch.inf, dtype=like.dtype, device=like.device)
    eye.fill_diagonal_(0.0)
    return eye.expand(*batch_shape, num_tags, num_tags)
