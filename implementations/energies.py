"""Non-local energies ``L(μ)`` on a chain's marginals, for Bethe projections (Vilnis et al. 2015;
digest §4): each a small object with the energy's ``value`` and its ``gradient`` with respect to
the node marginals μ_u (B, N, T) and the arc marginals μ_p (B, N-1, T, T).

One definition serves every backend: the methods take the array namespace ``xp`` (``torch``,
``jax.numpy`` or ``numpy``) and use only what the three share, with the energy's parameters given
as arrays of that backend (their dtype is the marginals'). ``mask`` (B, N) is 1.0 at a sentence's
positions and 0.0 on padding; marginals are zero on padding, and so is every gradient.

The gradients are written out rather than left to automatic differentiation: the solvers call
them at every iteration in both backends and the NumPy reference, and learning differentiates
through them with respect to the weights ψ (the energy enters the model as θ − ∇L_ψ(μ)). Where an
energy is not differentiable (a minimum over templates), ``gradient`` is the nearest template's
gradient, as the paper uses it, averaged over tied templates (still a subgradient in Clarke's
sense, and the same in every backend whatever its tie-breaking). Weights ψ are arrays (0-d or
batched) or Python numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

import numpy as np

Array = Any  # an array of the namespace ``xp``


class Energy(Protocol):
    """What the Bethe solvers need of an energy."""

    def value(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> Array:
        """(B,) ``L(μ)`` of each sentence."""

    def gradient(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> tuple[Array, Array | None]:
        """``∇L(μ)``: (B, N, T) with respect to μ_u and (B, N-1, T, T) or ``None`` (no arc term)
        with respect to μ_p; zero on padding."""


def smooth_hinge(xp: Any, z: Array) -> Array:
    """Rennie's smooth hinge: ``½ − z`` for z ≤ 0, ``½(1 − z)²`` for 0 < z < 1, 0 for z ≥ 1; a
    continuously differentiable ``max(0, 1 − z)`` (the paper's smoothed hinge, unspecified there)."""
    return xp.where(z <= 0, 0.5 - z, xp.where(z < 1, 0.5 * (1 - z) ** 2, 0 * z))


def smooth_hinge_slope(xp: Any, z: Array) -> Array:
    """The derivative of :func:`smooth_hinge`: −1, then ``z − 1``, then 0."""
    return xp.where(z <= 0, 0 * z - 1, xp.where(z < 1, z - 1, 0 * z))


def ones_where(xp: Any, condition: Array, like: Array) -> Array:
    """``condition`` as 1.0 / 0.0 in ``like``'s dtype (the namespaces cast booleans differently)."""
    ones = xp.ones_like(like)
    return xp.where(condition, ones, 0 * ones)


def _nearest(xp: Any, distances: Array) -> Array:
    """(B, K) weights of each row's nearest templates: 1/m on its m tied minimisers, else 0."""
    nearest = ones_where(xp, distances == xp.amin(distances, axis=-1)[:, None], distances)
    return nearest / xp.sum(nearest, axis=-1)[:, None]


def _scaled(xp: Any, weights: Array | float, values: Array) -> Array:
    """``values`` (B, ...) times ψ, a number, a 0-d array or one weight per sentence (B,)."""
    if isinstance(weights, int | float):
        return weights * values
    return xp.reshape(weights, (-1,) + (1,) * (values.ndim - 1)) * values


@dataclass(frozen=True)
class Measurements:
    """``Σ_j ψ_j ℓ̃(a_jᵀμ − b_j)`` with ``ℓ̃`` the :func:`smooth_hinge`: soft constraints on linear
    measurements of the marginals (the citation model's count constraints, Anzaroot et al. 2014).

    A measurement weighs the expected tag counts ``Σ_i μ_i`` by ``unary_weights`` (J, T) and, if
    given, the expected transition counts ``Σ_i μ_{i,i+1}`` by ``pairwise_weights`` (J, T, T);
    ``offsets`` b (J,); ``weights`` ψ (J,) or (B, J), ≥ 0 for a convex energy. With ℓ̃ a smoothed
    ``max(0, 1 − z)``, a measurement is penalised until ``a_jᵀμ ≥ b_j + 1``.
    """

    unary_weights: Array
    offsets: Array
    weights: Array
    pairwise_weights: Array | None = None

    def _measured(self, xp: Any, unary: Array, pairwise: Array) -> Array:
        """(B, J) ``a_jᵀμ − b_j``."""
        measured = xp.einsum("bnt,jt->bj", unary, self.unary_weights)
        if self.pairwise_weights is not None:
            measured = measured + xp.einsum("bnst,jst->bj", pairwise, self.pairwise_weights)
        return measured - self.offsets

    def value(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> Array:
        return xp.sum(self.weights * smooth_hinge(xp, self._measured(xp, unary, pairwise)), axis=-1)

    def gradient(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> tuple[Array, Array | None]:
        slopes = self.weights * smooth_hinge_slope(xp, self._measured(xp, unary, pairwise))  # (B, J)
        to_unary = xp.einsum("bj,jt->bt", slopes, self.unary_weights)[:, None, :] * mask[..., None]
        if self.pairwise_weights is None:
            return to_unary, None
        arcs = (mask[:, 1:] * mask[:, :-1])[..., None, None]
        return to_unary, xp.einsum("bj,jst->bst", slopes, self.pairwise_weights)[:, None] * arcs


@dataclass(frozen=True)
class UnigramTemplates:
    """``L^u = ψ min_k ‖u_k − Σ_i μ_i‖₁`` (the paper's Eq. 21): the ℓ₁ distance of the expected tag
    counts to the nearest template count vector. ``counts`` (K, T) (the training words' letter
    counts in OCR); ``weights`` ψ scalar or (B,). Non-convex (a minimum of convex functions)."""

    counts: Array
    weights: Array

    def _distances(self, xp: Any, unary: Array) -> tuple[Array, Array]:
        expected = xp.sum(unary, axis=1)  # (B, T)
        return expected, xp.sum(xp.abs(self.counts[None] - expected[:, None]), axis=-1)  # (B, K)

    def value(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> Array:
        return _scaled(xp, self.weights, xp.amin(self._distances(xp, unary)[1], axis=-1))

    def gradient(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> tuple[Array, None]:
        expected, distances = self._distances(xp, unary)
        signs = xp.sign(expected[:, None] - self.counts[None])  # (B, K, T)
        slope = _scaled(xp, self.weights, xp.einsum("bk,bkt->bt", _nearest(xp, distances), signs))
        return slope[:, None, :] * mask[..., None], None


@dataclass(frozen=True)
class WordTemplates:
    """``L^w = ψ min_k ‖w_k − μ_u‖₁`` over the templates of the sentence's length (the paper's
    Eq. 22; comparing only same-length words is our reading): ``one_hot`` (K, M, T) the templates'
    tag sequences as one-hot rows, zero past ``lengths`` (K,), M ≥ N. Since each μ_i sums to 1,
    ``‖w_k − μ_u‖₁ = 2 Σ_i (1 − μ_i(w_{k,i}))``. A sentence no template matches in length has
    energy 0; ``weights`` ψ scalar or (B,)."""

    one_hot: Array
    lengths: Array
    weights: Array

    def _distances(self, xp: Any, unary: Array, mask: Array) -> tuple[Array, Array]:
        """(B, K) distances (a large finite value for other lengths) and (B,) whether any matches."""
        length = unary.shape[1]
        agreement = xp.einsum("bnt,knt->bk", unary, self.one_hot[:, :length])
        sizes = xp.sum(mask, axis=-1)  # (B,) sentence lengths, as floats
        same = self.lengths[None, :] == sizes[:, None]
        distances = 2 * (sizes[:, None] - agreement)
        far = 2 * length + 1  # beyond any same-length distance
        return xp.where(same, distances, 0 * distances + far), xp.any(same, axis=-1)

    def value(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> Array:
        distances, matched = self._distances(xp, unary, mask)
        nearest = xp.where(matched, xp.amin(distances, axis=-1), 0 * distances[:, 0])
        return _scaled(xp, self.weights, nearest)

    def gradient(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> tuple[Array, None]:
        distances, matched = self._distances(xp, unary, mask)
        chosen = _nearest(xp, distances) * ones_where(xp, matched, distances[:, 0])[:, None]
        nearest = xp.einsum("bk,knt->bnt", chosen, self.one_hot[:, : unary.shape[1]])
        return -2 * _scaled(xp, self.weights, nearest), None


@dataclass(frozen=True)
class PoissonCounts:
    """``L = ψ Σ_i Σ_t [λ μ_i(t) − y_i(t) log(λ μ_i(t))]``: the negative Poisson log-likelihood (less
    ``log y!``) of counts y observed with means λ μ: a collective graphical model's noisy counts of
    a population of M individuals (Sheldon et al. 2013), with λ = detection rate × M and ψ = 1/M.
    ``counts`` y (B, N, T), zero on padding; ``scale`` λ and ``weights`` ψ numbers or 0-d arrays.

    Convex. Its gradient ``ψ (λ − y/μ)`` is unbounded as a counted cell's marginal goes to 0; the
    solvers' iterates are marginals of finite scores, hence positive, but may underflow, so the
    gradient and the value read μ at least the square root of the dtype's smallest normal number
    (1.5e-154 in float64): a large finite gradient, never −inf or NaN.
    """

    counts: Array
    scale: Array | float
    weights: Array | float

    @staticmethod
    def _floored(xp: Any, unary: Array) -> Array:
        return xp.maximum(unary, 0 * unary + xp.finfo(unary.dtype).tiny ** 0.5)

    def _logs(self, xp: Any, unary: Array) -> Array:
        """(B, N, T) ``y log(λ μ)``, 0 where y = 0."""
        logs = xp.log(self.scale * self._floored(xp, unary))
        return xp.where(self.counts > 0, self.counts * logs, 0 * unary)

    def value(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> Array:
        terms = self.scale * unary * mask[..., None] - self._logs(xp, unary)
        return _scaled(xp, self.weights, xp.sum(terms, axis=(1, 2)))

    def gradient(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> tuple[Array, None]:
        slope = (self.scale - self.counts / self._floored(xp, unary)) * mask[..., None]
        return _scaled(xp, self.weights, slope), None


@dataclass(frozen=True)
class Total:
    """The sum of several energies."""

    terms: tuple[Energy, ...]

    def value(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> Array:
        total = 0 * xp.sum(unary, axis=(1, 2))  # (B,) zeros: no term is no energy
        for term in self.terms:
            total = total + term.value(xp, unary, pairwise, mask)
        return total

    def gradient(self, xp: Any, unary: Array, pairwise: Array, mask: Array) -> tuple[Array, Array | None]:
        to_unary, to_pairwise = 0 * unary, None
        for term in self.terms:
            unary_part, pairwise_part = term.gradient(xp, unary, pairwise, mask)
            to_unary = to_unary + unary_part
            if pairwise_part is not None:
                to_pairwise = pairwise_part if to_pairwise is None else to_pairwise + pairwise_part
        return to_unary, to_pairwise


def with_arrays(energy: Energy, convert: Callable[[np.ndarray], Array]) -> Energy:
    """``energy`` with each NumPy parameter passed through ``convert`` (e.g. into a backend's
    arrays), through the terms of a :class:`Total`."""
    if isinstance(energy, Total):
        return Total(tuple(with_arrays(term, convert) for term in energy.terms))
    terms: Any = energy  # every energy but Total is a dataclass of its parameters
    converted = {
        field.name: convert(getattr(terms, field.name))
        for field in fields(terms)
        if isinstance(getattr(terms, field.name), np.ndarray)
    }
    return replace(terms, **converted)
