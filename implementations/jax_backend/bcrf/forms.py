"""BCRF's iterations in JAX, whichever the form, as in the torch backend: :func:`_form` builds
the log form or the scaling form for one call (the latter iterating by the C sweep on the CPU
where it applies, :mod:`.sweep`), :func:`_run` runs it."""

from __future__ import annotations

from functools import partial
from typing import Any

from jax import Array

from ...kernels.bcrf import Form, run, violation
from ...kernels.bcrf_log_form import log_form
from ...kernels.bcrf_numerics import _arc_marginals
from ...kernels.bcrf_options import BcrfOptions
from .._fixed_point import iterate
from .._scores import ArcTerms
from .scaling import _scaled_initial, _scaled_log_q, _scaled_solution, _scaling_step
from .sweep import _sweep_steps
from .transition_kernel import _tags_first


def _form(terms: ArcTerms, lengths: Array, options: BcrfOptions) -> Form:
    """IBP on the arcs ``terms`` in the form of ``options``."""
    num_arcs, temperature, order = terms.rows.shape[1], options.temperature, options.order
    if options.form == "log":
        return log_form(terms, lengths, options)
    kernel, scalings = _scaled_initial(terms, lengths, temperature)

    def marginals(state: Any) -> Array:
        return _arc_marginals(_scaled_log_q(kernel, num_arcs, state), lengths)

    return Form(
        scalings,
        _scaling_step(kernel, lengths, order, num_arcs),
        lambda state, _: violation(marginals(state), lengths),
        marginals,
        partial(_scaled_solution, kernel=kernel, terms=terms, lengths=lengths, temperature=temperature),
        -1 if _tags_first(kernel) else 0,
        _sweep_steps(kernel, lengths, order),
        "scaling",
    )


def _run(terms: ArcTerms, lengths: Array, options: BcrfOptions) -> tuple[Form, Any]:
    """The form and its state after ``iterations`` pairs of projections (or to ``tolerance``)."""
    ibp = _form(terms, lengths, options)
    return ibp, run(ibp, options, iterate)
