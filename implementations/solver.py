"""What every iterative method's ``solve`` returns, in every backend (in the style of ott-jax's
solver outputs): the iterate, how many iterations ran, whether it converged, and the error after
each iteration.

The *error* is the method's own distance from its fixed point: for BCRF the largest violation of
the marginal polytope's constraints, for mean field the largest change of a marginal in the last
update (``docs/derivations.md``). ``tolerance`` (an option of every iterative method, default
``None``) stops the iterations once every sequence's error is at most ``tolerance``; a sequence
that gets there first is frozen, so a batch gives each sequence the result it gets alone. Without
a tolerance exactly ``iterations`` run, and ``converged`` marks the sequences whose error is 0.
"""

from __future__ import annotations

from typing import Any, NamedTuple

Array = Any  # a torch.Tensor or a jax.Array


class _SolverFields(NamedTuple):
    """The arrays of :class:`SolverOutput`; shapes for a batch of B sequences padded to N
    positions, T tags."""

    unary: Array  # (B, N, T) node marginals at the iterate, zero on padding
    pairwise: Array  # (B, N-1, T, T) arc marginals at the iterate, zero on padding
    value: Array  # (B,) the method's objective at the iterate (what ``log_partition`` returns)
    iterations: Any  # iterations run: a Python int without a tolerance, else a 0-d integer array
    converged: Array  # (B,) bool: error <= tolerance (<= 0 without a tolerance)
    errors: Array  # (iterations, B) error after each iteration; NaN for iterations not run

    @property
    def error(self) -> Array:
        """(B,) the error after the last iteration run."""
        return self.errors[self.iterations - 1]


class SolverOutput(_SolverFields):
    """The result of ``solve``: :class:`_SolverFields`, and ``path``, which of the method's
    strategies computed it where it has several (BCRF in torch: ``"log"``, ``"scaling"``,
    ``"linear"`` or ``"linear-sweep"``), ``None`` where unreported.

    ``path`` is an attribute, not a field: the fields are the arrays, alike in every backend and
    each a leaf of a pytree (a string could not leave ``jax.jit``); a copy made from the fields
    (``_replace``, a pytree's rebuild) reports ``None``."""

    path: str | None = None

    def __new__(
        cls,
        unary: Array,
        pairwise: Array,
        value: Array,
        iterations: Any,
        converged: Array,
        errors: Array,
        path: str | None = None,
    ) -> SolverOutput:
        output = super().__new__(cls, unary, pairwise, value, iterations, converged, errors)
        if path is not None:
            output.path = path
        return output


class SparseMAPOutput(NamedTuple):
    """``solve`` of SparseMAP: :class:`SolverOutput`'s fields, the error being the Wolfe (duality)
    gap, and the support in fixed-size slots (``max_support`` = K)."""

    unary: Array  # (B, N, T) u*
    pairwise: Array  # (B, N-1, T, T) v* of the support found
    value: Array  # (B,) θᵀy* − ½‖u*‖² (what ``log_partition`` returns)
    iterations: Any  # iterations run: a Python int in torch, a 0-d integer array out of jax.jit
    converged: Array  # (B,) bool: the gap reached the tolerance (not stopped by a full support)
    errors: Array  # (iterations, B) Wolfe gap after each iteration; NaN for iterations not run
    paths: Array  # (B, K, N) the support's tag sequences; -1 on padding and on empty slots
    weights: Array  # (B, K) their weights y*, summing to 1; 0 on empty slots

    @property
    def error(self) -> Array:
        """(B,) the gap after the last iteration run."""
        return self.errors[self.iterations - 1]


class BetheOutput(NamedTuple):
    """``solve`` of Bethe projections: :class:`SolverOutput`'s fields, the error being the largest
    change of a marginal between successive iterates, and the value after each iteration."""

    unary: Array  # (B, N, T) node marginals μ* (the last iterate or the average of the iterates)
    pairwise: Array  # (B, N-1, T, T) arc marginals μ*
    value: Array  # (B,) −F(μ*) = ⟨θ, μ*⟩ + H_B(μ*) − L(μ*) (what ``log_partition`` returns)
    iterations: Any  # iterations run: a Python int without a tolerance, else a 0-d integer array
    converged: Array  # (B,) bool: error <= tolerance (<= 0 without a tolerance)
    errors: Array  # (iterations, B) change after each iteration; NaN for iterations not run
    values: Array  # (iterations, B) −F of the returned iterate after each iteration; NaN if not run

    @property
    def error(self) -> Array:
        """(B,) the change in the last iteration run."""
        return self.errors[self.iterations - 1]


class TreeSparseMAPOutput(NamedTuple):
    """``solve`` of ``tree-sparsemap``: SparseMAP over dependency trees, its support in fixed-size
    slots (``max_support`` = K); shapes for B sentences padded to N words."""

    marginals: Array  # (B, N+1, N+1) μ*[b, h, m]: the support's weight on the arc h -> m
    value: Array  # (B,) θᵀy* − ½‖μ*‖² (what ``log_partition`` returns)
    iterations: Any  # iterations run: a Python int when called eagerly, a 0-d array under jax.jit
    converged: Array  # (B,) bool: the gap reached the tolerance (not stopped by a full support)
    errors: Array  # (iterations, B) Wolfe gap after each iteration; NaN for iterations not run
    trees: Array  # (B, K, N+1) the support's heads; -1 at index 0, on padding and on empty slots
    weights: Array  # (B, K) their weights y*, summing to 1; 0 on empty slots

    @property
    def error(self) -> Array:
        """(B,) the gap after the last iteration run."""
        return self.errors[self.iterations - 1]
