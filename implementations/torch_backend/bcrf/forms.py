"""BCRF's iterations in torch, whichever the form: one iteration is a KL projection onto each
parity of inner clusters in turn (C_odd then C_even for ``order="odd-even"``); :func:`_form`
picks how they run for one call (the log form, the scaling form on log scalings, or on the linear
state, by compiled projections or by the C sweep) and names that choice (``Form.path``, which
``solve`` reports); :func:`_run` runs them."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from torch import Tensor

from ...kernels.bcrf import Form, Solution, iteration, run, violation
from ...kernels.bcrf_log_form import log_form
from ...kernels.bcrf_options import BcrfOptions, first_clusters
from .._fixed_point import iterate
from .._scores import ArcTerms
from .linear import _linear_projection, _linear_start, _log_scalings
from .scaling import _scaled_initial, _scaled_marginals, _scaled_solution, _scaling_projection
from .sweep import _sweep_steps
from .transition_kernel import _Kernel, _tags_first, _with_transposes

#: What ``Form.path`` names: the log form; the scaling form on log scalings (eager, or each
#: projection compiled); on the linear state, each projection compiled; or by the C sweep.
PATHS = ("log", "scaling", "linear", "linear-sweep")


def _step(lengths: Tensor, order: str, num_arcs: int, kernel: _Kernel, linear: bool = False):
    """One iteration of the scaling form with ``kernel``: a projection onto each parity of inner
    clusters, in ``order``, on the scalings, held in linear space if ``linear``
    (:data:`LinearScalings`). The log form's is :func:`~implementations.kernels.bcrf_log_form.log_form`'s."""
    projection = _linear_projection if linear else _scaling_projection
    return iteration([projection(kernel, lengths, num_arcs, first) for first in first_clusters(order)])


def _error(marginals: Callable[[Any], Tensor], lengths: Tensor):
    """The convergence error of an iterate whose arc marginals are ``marginals(state)``: their
    constraint violation (B,)."""
    return lambda state, _: violation(marginals(state), lengths)


def _form(terms: ArcTerms, lengths: Tensor, options: BcrfOptions) -> Form:
    """IBP on the arcs ``terms`` in the form of ``options``."""
    num_arcs, temperature, order = terms.rows.shape[1], options.temperature, options.order
    if options.form == "log":
        return log_form(terms, lengths, options)
    kernel, scalings = _scaled_initial(terms, lengths, temperature)
    linear = _linear_start(kernel, scalings, lengths)
    read = _log_scalings if linear is not None else _as_is
    steps = None if linear is None else _sweep_steps(kernel, lengths, order)
    if steps is None:  # the projections read Kᵀ: made once for both and the read-off
        kernel = _with_transposes(kernel)
        step = _step(lengths, order, num_arcs, kernel, linear is not None)
    else:
        step = partial(steps, count=1)

    def marginals(state: Any) -> Tensor:
        return _scaled_marginals(kernel, lengths, read(state))

    def solution(state: Any) -> Solution:  # after the sweep, the in-flows' Kᵀ is made here
        return _scaled_solution(read(state), _with_transposes(kernel), terms, lengths, temperature)

    return Form(
        scalings if linear is None else linear,
        step,
        _error(marginals, lengths),
        marginals,
        solution,
        -1 if _tags_first(kernel) else 0,
        steps,
        "scaling" if linear is None else "linear" if steps is None else "linear-sweep",
    )


def _as_is(state: Any) -> Any:
    """``state`` itself: the log scalings of an iterate that holds them."""
    return state


def _run(terms: ArcTerms, lengths: Tensor, options: BcrfOptions) -> tuple[Form, Any]:
    """The form and its state after ``iterations`` pairs of projections (or to ``tolerance``):
    all at once where the form can (``steps``) and no tolerance is checked between them."""
    ibp = _form(terms, lengths, options)
    return ibp, run(ibp, options, iterate)
