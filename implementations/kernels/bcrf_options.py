"""BCRF's solver options as one frozen record, shared by both backends, and what follows from them
alone (no arrays): which parity of inner clusters each half-iteration projects first.

The contract functions take the options as keywords (validated by ``implementations.public``);
each backend gathers them into a :class:`BcrfOptions` once per call and hands the record down,
instead of five loose positional values. Frozen and hashable: JAX can hold it static under
``jax.jit`` and in a ``custom_vjp``'s non-differentiable arguments."""

from __future__ import annotations

from dataclasses import dataclass

#: What each form of the iterations is called (``form=...``)
FORMS = ("scaling", "log")


@dataclass(frozen=True)
class BcrfOptions:
    """The IBP run of one call: ``iterations`` pairs of projections (or fewer, to ``tolerance`` on
    the constraint violation) at ``temperature`` τ, each iteration projecting the parities in
    ``order``, on ``log q`` itself (``form="log"``) or on its scalings (``"scaling"``)."""

    temperature: float
    iterations: int
    order: str = "odd-even"
    tolerance: float | None = None
    form: str = "scaling"

    @property
    def first_clusters(self) -> tuple[int, int]:
        """0-indexed position of the first inner cluster of each half-iteration, in order."""
        return first_clusters(self.order)


def first_clusters(order: str) -> tuple[int, int]:
    """0-indexed position of the first inner cluster of each half-iteration, in ``order``.

    Paper cluster k (1-indexed) is position k - 1: C_odd = {3, 5, ...} starts at position 2,
    C_even = {2, 4, ...} at position 1.
    """
    return (2, 1) if order == "odd-even" else (1, 2)
