"""Parallel-scan engine on torch: ``implementations.kernels.tree`` (differentiated by autograd),
each entry point behind the memory guard ``contract.check_scan_memory``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import contract
from ..kernels import tree as _shared
from ..kernels.tree import _inside, chain_factors  # noqa: F401 - the engine's pieces, read by tests


def _checked(engine_function: Callable[..., Any]) -> Callable[..., Any]:
    """``engine_function`` refusing a batch over ``contract.SCAN_MEMORY_BUDGET`` first."""

    @functools.wraps(engine_function)
    def checked(emissions: Any, *scores: Any) -> Any:
        contract.check_scan_memory(emissions)
        return engine_function(emissions, *scores)

    return checked


log_partition = _checked(_shared.log_partition)
marginals = _checked(_shared.marginals)
viterbi = _checked(_shared.viterbi)
