"""BCRF's kernel in JAX: ``K = exp(transitions/τ − shift)``, the arcs' weights without their
unaries, its products with the vectors of the scaling form (stabilised by their largest entry,
:class:`_Vectors`), and the layout of a scaling-form iterate on it (tags first for a shared
kernel, :func:`_tags_first`)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import Array, lax

from ...kernels.bcrf_numerics import _finite_or_zero, _floor


class _Kernel(NamedTuple):
    """``K = exp(transitions/τ − shift)``: the arcs' weights without their unaries, shared (T, T) or
    per arc group (B, N-1, T, T), with largest entry 1 (``shift``, per group where they are per
    group), entries under the dtype's smallest normal number flushed to 0, as in the torch backend;
    ``parities`` holds K's even and odd groups (shared: K for both)."""

    log: Array  # (T, T) or (B, N-1, T, T)
    shift: Array  # () or (B, N-1)
    linear: Array  # exp(log), flushed
    parities: tuple[Array, Array]  # groups 0, 2, ... and 1, 3, ...


def _kernel(transitions: Array, temperature: float) -> _Kernel:
    """The kernel of ``transitions`` (T, T) or (B, N-1, T, T) at ``temperature``; its shift is not
    differentiated (the iterates do not depend on it)."""
    scaled = transitions / temperature
    shared = scaled.ndim == 2
    shift = _finite_or_zero(lax.stop_gradient(scaled.max() if shared else scaled.max((-2, -1))))
    log = scaled - (shift if shared else shift[..., None, None])
    linear = jnp.where(log > _floor(log), jnp.exp(log), 0.0)
    parities = (linear, linear) if shared else (linear[:, 0::2], linear[:, 1::2])
    return _Kernel(log, shift, linear, parities)


def _shift(log_x: Array, axis: int = -1) -> Array:
    """``max log x`` over the tags (``axis``), kept (0 for an all -inf vector: a dead position)."""
    return _finite_or_zero(log_x.max(axis, keepdims=True))


class _Vectors(NamedTuple):
    """Vectors ``x`` (…, T) that a product will multiply, as in the torch backend: ``log x``, its
    largest entry per vector (kept dim, 0 for an all -inf one) and ``e^{log x − shift}``."""

    log: Array
    shift: Array
    linear: Array

    def rows(self, rows: slice, side: int | None = None) -> _Vectors:
        """The vectors of ``rows`` (dim 1), of one ``side`` (dim 2) if stacked."""
        pick = (slice(None), rows) if side is None else (slice(None), rows, side)
        return _Vectors(self.log[pick], self.shift[pick], self.linear[pick])


def _vectors(log_x: Array, axis: int = -1) -> _Vectors:
    """The :class:`_Vectors` of ``log_x``, vectors along ``axis`` ((…, T) by default)."""
    shift = _shift(log_x, axis)
    return _Vectors(log_x, shift, jnp.exp(log_x - shift))


def _unused(log_x: Array) -> Array:
    """0 where ``log_x`` is finite, +inf where it is -inf (see :func:`_flows`)."""
    return _finite_or_zero(log_x) - log_x


def _product(matrices: Array, x: Array, into: bool, tags_first: bool) -> Array:
    """``K_gᵀ x_g`` (``into``) or ``K_g x_g`` for every group g, of a shared (T, T) kernel (one
    matrix product for the whole batch) or of ``matrices`` (B, P, T, T), in the layout of ``x``
    (:class:`Request`)."""
    if tags_first:  # one (T, T) × (T, P·B) product
        return jnp.tensordot(matrices, x, axes=(0 if into else 1, 0))
    if matrices.ndim == 2:
        return x @ (matrices if into else matrices.T)
    return jnp.einsum("bpij,bpi->bpj" if into else "bpij,bpj->bpi", matrices, x)


def _tags_first(kernel: _Kernel) -> bool:
    """Whether a scaling-form iterate on ``kernel`` holds its tags first (:data:`Scalings`): a
    shared kernel's does."""
    return kernel.log.ndim == 2
