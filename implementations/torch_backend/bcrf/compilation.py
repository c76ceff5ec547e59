"""BCRF's compiled functions in torch: the products over large per-position kernels and the whole
projections of the scaling form, each run through :func:`_run_compiled` (``torch.compile``, its
operators fused into few passes over memory). Where compilation fails (no C++ compiler, say), one
warning, and every compiled function runs eager from then on (:mod:`.run_state`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache
from typing import Any

import torch
from torch import Tensor

from . import run_state

#: Products over a parity's per-position kernel of at least this many entries run compiled
#: (:func:`_fused_row_products`), faster than any batched matmul on the CPU; on CUDA inductor emits
#: a Triton kernel instead. Such a kernel is laid out parity by parity (``_Kernel.by_parity``),
#: and where it is vouched for each projection runs compiled whole. Smaller ones, and every shared
#: kernel, stay eager, sparing the compilation (about a second per dtype).
FUSED_FROM = 2**20


def _row_products(matrices: Tensor, vectors: Tensor) -> Tensor:
    """(…, T): ``M x`` for every matrix ``M`` (…, T, T) and vector ``x`` (…, T), as the sums of
    the rows of ``M`` times ``x``."""
    return (matrices * vectors.unsqueeze(-2)).sum(-1)


@cache
def _compiled(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` compiled, made on first use (``torch._dynamo`` takes a second to import); its
    shapes static until they change, dynamic from then on (torch's default)."""
    return torch.compile(function)


def _run_compiled(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` compiled (:func:`_compiled`): its operators fused into few passes over
    memory. Eager inside a region being compiled (the enclosing compilation fuses it), and, with a
    warning, from the first failed compilation on (no C++ compiler, say)."""
    if not run_state.compiler_failed() and not torch.compiler.is_compiling():
        try:
            return _compiled(function)(*args)
        except torch._dynamo.exc.BackendCompilerFailed as error:
            run_state.mark_compiler_failed()
            warnings.warn(
                f"bcrf: torch.compile failed, IBP runs eager ({error})", RuntimeWarning, stacklevel=2
            )
    return function(*args)


def _fused_row_products(matrices: Tensor, vectors: Tensor) -> Tensor:
    """:func:`_row_products` compiled, the multiply and the sum fused into one pass over ``M``
    (the vectors made contiguous, so that views do not recompile it)."""
    return _run_compiled(_row_products, matrices, vectors.contiguous())
