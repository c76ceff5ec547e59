"""Bethe projections (torch): the kernels of ``implementations.kernels.bethe`` on this backend's
exact chain, differentiated by autograd with the solver run under ``no_grad``
(``ops.without_gradient``)."""

from __future__ import annotations

from ..kernels.bethe import bethe_kernels
from . import _chain, _fixed_point, _scores

solve, marginals, decode, log_partition, loss, partial_loss = bethe_kernels(_chain, _scores, _fixed_point)
