"""Bethe projections (torch): the kernels of ``implementations._bethe`` on this backend's exact
chain, differentiated by autograd with the solver run under ``no_grad``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .._bethe import bethe_kernels
from . import _chain, _fixed_point, _scores


def _without_gradient(function: Callable[..., Any], *arguments: Any) -> Any:
    with torch.no_grad():
        return function(*arguments)


solve, marginals, decode, log_partition, loss, partial_loss = bethe_kernels(
    torch, _chain, _scores, _fixed_point, torch.xlogy, _without_gradient
)
