"""Parallel-scan engine on jax: ``implementations.kernels.tree`` compiled by ``jax.jit`` (the
levels' shapes are static, so a traced call unrolls into O(log N) stages), each entry point
behind the memory guard ``contract.check_scan_memory`` (see :func:`_guarded`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from jax import Array

from .. import contract
from ..kernels import tree as _shared
from ..kernels.tree import _inside, chain_factors  # noqa: F401 - the engine's pieces, read by tests


def _guarded(engine_function: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.jit(engine_function)`` behind the memory guard (``contract.check_scan_memory``). The
    guard runs at every call, before the compiled program: inside it, it would run only when a
    shape is first traced, and miss a budget lowered since. Under an enclosing ``jax.jit`` it runs
    when that is traced."""
    compiled = jax.jit(engine_function)

    @functools.wraps(engine_function)
    def guarded(emissions: Array, *scores: Array | None) -> Any:
        contract.check_scan_memory(emissions)
        return compiled(emissions, *scores)

    return guarded


log_partition = _guarded(_shared.log_partition)
marginals = _guarded(_shared.marginals)
viterbi = _guarded(_shared.viterbi)
