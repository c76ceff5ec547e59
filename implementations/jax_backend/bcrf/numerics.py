"""BCRF's arithmetic that JAX does its own way (as the torch backend's ``bcrf/numerics.py`` does
torch's): the rows of two parities interleaved. The projection's shifts given the flows
(docs/derivations.md §3.3) are written once, in :mod:`implementations.kernels.bcrf_log_form`; the
arithmetic both frameworks spell alike (-inf handling, the masks of padding, node marginals) is in
:mod:`implementations.kernels.bcrf_numerics`; the convergence error and the records the forms pass
on are in :mod:`implementations.kernels.bcrf`."""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array


def _interleaved(even: Array, odd: Array) -> Array:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = jnp.empty((even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:]), even.dtype)
    return whole.at[:, 0::2].set(even).at[:, 1::2].set(odd)
