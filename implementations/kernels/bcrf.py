"""What BCRF's two backends share, written once: the records that pass between a form of the
iterations and the code that runs and reads it, how one iteration composes its projections, how
the iterations run for a call, and the convergence error (the constraint violation), through the
backend's ops namespace (:mod:`implementations.ops`). Each backend's ``bcrf`` package holds the
projections, products and gradients, which differ between frameworks (in-place updates, compiled
regions, ``lax.cond``, custom gradients)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .. import ops
from .bcrf_options import BcrfOptions

Array = Any  # a torch.Tensor or a jax.Array


class Solution(NamedTuple):
    """What the losses read off an iterate: ``B_Y(w/τ)`` (B,), the flows out of each tag's rows and
    into each tag's columns of every arc group (B, N-1, T), zero past a sequence's length, and the
    arcs for the backend's ``_arc_gradient``: the arc marginals q (B, N-1, T, T) or, in scaling
    form, the kernel with the vectors of the rows' and columns' log scalings (B, N-1, T) (-inf
    past the length; in the iterate's layout), which the flows have already read."""

    value: Array
    out_flows: Array
    in_flows: Array
    arcs: Any


class Request(NamedTuple):
    """Flows through every arc group of one ``parity``: into each tag (``into``, ``K_gᵀ x_g``) or
    out of it (``K_g x_g``), given the vectors ``x`` (B, P, T) for each group, or (T, P, B) if
    ``tags_first`` (a shared kernel's only), and ``unused`` (broadcast to their shape): 0 for a
    flow that is read, +inf for one nobody reads (a dead tag's, or a node's outside the clusters);
    ``None`` where no exactness test reads it."""

    parity: int
    x: Any
    into: bool
    unused: Array | None
    tags_first: bool = False

    def read(self) -> Array:
        """``unused``, of a request whose flows an exactness test reads (so never ``None``)."""
        if self.unused is None:
            raise ValueError("a request whose flows are tested carries its unused mask")
        return self.unused


class Form(NamedTuple):
    """IBP in one form: the initial state, one iteration, the convergence error of a state, and
    what is read off a state: its arc marginals q (B, N-1, T, T), zero on padding, and its
    :class:`Solution`; ``path`` names how the iterations run (the log form, the scaling form, its
    linear state...)."""

    initial: Any
    step: Callable[[Any], Any]
    error: Callable[[Any, Any], Array]
    marginals: Callable[[Any], Array]
    solution: Callable[[Any], Solution]
    batch_dim: int = 0  # of the state's arrays
    #: a number of iterations at once (state, count) -> state, where that is faster than steps
    steps: Callable[[Any, int], Any] | None = None
    path: str = "log"


def iteration(projections: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """One iteration: each of ``projections`` (one per parity of inner clusters) in turn."""

    def step(state: Any) -> Any:
        for project in projections:
            state = project(state)
        return state

    return step


def run(form: Form, options: BcrfOptions, iterate: Callable[..., Any]) -> Any:
    """The state of ``form`` after ``options.iterations`` iterations (or to its tolerance), run by
    the backend's ``iterate``: all at once where the form can (``steps``) and no tolerance is
    checked between them."""
    if options.tolerance is None and form.steps is not None:
        return form.steps(form.initial, options.iterations)
    return iterate(form.step, form.initial, options.iterations, options.tolerance, form.error, form.batch_dim)


def violation(pairwise: Array, lengths: Array) -> Array:
    """(B,) distance to the paper's polytope description (Prop. 2): the largest error in (7) unit
    in-flow into each inner cluster and (8) flow conservation at each inner node. Lengths 1 and 2
    have no inner cluster, hence 0."""
    o = ops.of(pairwise)
    inflow = pairwise[:, :-1].sum(-2)  # (B, N-2, T) into inner position p = 1 .. N-2
    outflow = pairwise[:, 1:].sum(-1)  # (B, N-2, T) out of the same positions
    errors = o.maximum(o.abs(inflow.sum(-1) - 1), o.amax(o.abs(inflow - outflow), -1))
    inner = o.arange(errors.shape[1], lengths) < (lengths - 2)[:, None]
    errors = o.where(inner, errors, 0.0)
    return o.amax(o.concatenate([errors, o.zeros((errors.shape[0], 1), errors)], 1), -1)
