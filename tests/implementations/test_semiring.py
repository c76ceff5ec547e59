"""The torch backend's shared reductions: :func:`largest` (``amax`` by a faster path where torch's
float32 kernel is slow) and :func:`logsumexp` (its own forward since :func:`largest`), against
torch's own ``amax`` and ``logsumexp`` on both sides of the slow range, with -inf, +inf and NaN."""

from __future__ import annotations

import math

import pytest
import torch

from implementations.torch_backend._semiring import SLOW_LAST_DIMS, largest, logsumexp

# last dims below, in and above the range that takes the float64 path in float32
LAST_DIMS = [SLOW_LAST_DIMS.start - 1, SLOW_LAST_DIMS.start, 17, SLOW_LAST_DIMS.stop - 1, SLOW_LAST_DIMS.stop]


def _scores(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Random scores with an all -inf slice, a lone -inf, a +inf and a NaN along the last dim."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)), dtype=torch.float64)
    x[0, 0] = -math.inf
    x[0, 1, 0] = -math.inf
    x[1, 0, 1] = math.inf
    x[1, 1, 2] = math.nan
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("last", LAST_DIMS)
@pytest.mark.parametrize("dim", [1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_largest_is_amax(dtype: torch.dtype, last: int, dim: int, keepdim: bool) -> None:
    x = _scores((3, 5, last), dtype)
    expected = x.amax(dim, keepdim)
    result = largest(x, dim, keepdim)
    assert result.dtype == dtype and result.shape == expected.shape
    torch.testing.assert_close(result, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("last", LAST_DIMS)
def test_largest_has_amax_gradient(last: int) -> None:
    """Ties share the gradient as in ``amax``; a float64 detour must not change that."""
    x = torch.randn(4, 6, last, generator=torch.Generator().manual_seed(last))
    x[0, 0, :3] = 5.0  # a three-way tie
    x = x.requires_grad_()
    weights = torch.randn(4, last)
    (expected,) = torch.autograd.grad((x.amax(1) * weights).sum(), x)
    (result,) = torch.autograd.grad((largest(x, 1) * weights).sum(), x)
    torch.testing.assert_close(result, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("last", LAST_DIMS)
def test_logsumexp_matches_torch(dtype: torch.dtype, last: int) -> None:
    x = _scores((3, 5, last), dtype) * 30  # large scores: a forward without the shift overflows
    tolerance = 1e-6 if dtype == torch.float32 else 1e-14
    torch.testing.assert_close(
        logsumexp(x, -1), torch.logsumexp(x, -1), rtol=tolerance, atol=0, equal_nan=True
    )
    assert logsumexp(x, -1)[0, 0] == -math.inf and logsumexp(x, -1)[1, 0] == math.inf
