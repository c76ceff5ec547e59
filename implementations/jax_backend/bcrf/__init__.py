"""Bregman CRF (Corro, Lacroix & Le Roux, 2025) in JAX: entropy of the transition marginals,
solved by iterative Bregman projections (IBP) whose depth does not grow with N, as in the torch
backend (its package's docstring gives the method; docs/derivations.md §3.3, §3.12). The
iterations are a ``lax.scan`` of fixed length.

This module holds the contract's functions; the package's modules hold the forms, which compute
the same iterates: the log form (``form="log"``, written once for both backends in
:mod:`implementations.kernels.bcrf_log_form`) and :mod:`.scaling` (``form="scaling"``, the default
but for ``decode``) on the kernel of :mod:`.transition_kernel`, its flows vouched for
or recomputed in log space (``lax.cond``) by :mod:`.exactness`; on the CPU, large per-position
kernels iterate without a tolerance in torch's C sweep through XLA's FFI (:mod:`.sweep`),
differentiated as XLA's iterations. :mod:`.forms` picks one for a call and :mod:`.gradients`
differentiates the loss. The options reach them as one
:class:`~implementations.kernels.bcrf_options.BcrfOptions`, static under ``jax.jit``.
"""

from __future__ import annotations

from functools import partial, update_wrapper
from typing import Any

import jax

from ...kernels.bcrf_contract import Pieces, bind, bind_decode
from ...kernels.bcrf_numerics import _unary
from ...solver import SolverOutput
from .._fixed_point import iterate_with_errors
from .._scores import arc_terms, gold_score, mask_emissions
from .._tokens import argmax_tags
from .forms import _form, _run
from .gradients import _scaled_value

__all__ = ["decode", "log_partition", "loss", "marginals", "partial_loss", "solve"]

_SOLVER = ("iterations", "temperature", "order", "tolerance", "form")


_FUNCTIONS = bind(
    Pieces(arc_terms, gold_score, mask_emissions, _unary, _form, _run, iterate_with_errors, _scaled_value),
    __name__,
)
_jit = partial(jax.jit, static_argnames=_SOLVER)


@_jit
def _solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form):
    """The fields of ``solve``'s :class:`SolverOutput` (its ``path`` cannot leave ``jax.jit``)."""
    options = {"iterations": iterations, "temperature": temperature, "order": order}
    return _FUNCTIONS["solve"](
        emissions, transitions, lengths, start, end, **options, tolerance=tolerance, form=form
    )[0]


def _solve_output(
    emissions: Any, transitions: Any, lengths: Any, start: Any, end: Any, **options: Any
) -> Any:
    fields: tuple[Any, Any, Any, Any, Any, Any]  # unary, pairwise, value, iterations, converged, errors
    fields = _solve(emissions, transitions, lengths, start, end, **options)
    if options["tolerance"] is None:  # a Python int, as in torch
        fields = (*fields[:3], options["iterations"], *fields[4:])
    return SolverOutput(*fields, path=options["form"])


marginals = _jit(_FUNCTIONS["marginals"])
log_partition = _jit(_FUNCTIONS["log_partition"])
solve = update_wrapper(_solve_output, _FUNCTIONS["solve"])
loss = _FUNCTIONS["loss"]
partial_loss = _FUNCTIONS["partial_loss"]
decode = bind_decode(marginals, argmax_tags, __name__)
