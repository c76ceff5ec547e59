"""Bethe projections (Vilnis et al. 2015; digest §4) for both backends: the marginals μ* of a chain
CRF with a non-local energy ``L`` (``implementations.energies``),

    μ* = argmin_{μ ∈ M}  F(μ) = −H_B(μ) − ⟨θ, μ⟩ + L(μ),

by mirror descent whose Bregman projection is one forward–backward call on shifted scores: every
iterate is the exact CRF marginals of ``θ − s`` for a shift s built from the energy's gradients
(or an average of such marginals), so every iterate lies in the marginal polytope. On a chain
the Bethe entropy H_B is the entropy of the chain distribution with marginals μ, so F is exactly
the variational free energy and, for L = 0, μ* is the CRF's marginals and ``−F(μ*) = log Z``.

Solvers (``derivations.md`` §9 derives each step in shift form):

- ``rda``, Bethe-RDA (Algorithm 1): ``ḡ_t = mean_{k<t} ∇L(μ_k)``, ``μ_t = ORACLE(θ − t/(t+β) ḡ_t)``
  (the printed ``∇L(μ_t)`` is an index slip; β = 0: no step size);
- ``md``, Bethe-MD (Algorithm 4, composite mirror descent) with ``η_t = 1/(λ t)``:
  ``s_t = (s_{t−1} + η_t ∇L(μ_{t−1})) / (1 + η_t)``, ``μ_t = ORACLE(θ − s_t)``;
- ``accelerated``, accelerated Bethe-RDA (Algorithm 5) for an ``smoothness``-smooth energy:
  ``u_t = (1−c_t) μ_{t−1} + c_t ν_{t−1}``, ``ḡ_t = (1−c_t) ḡ_{t−1} + c_t ∇L(u_t)``,
  ``ν_t = ORACLE(θ − κ_t ḡ_t)`` with ``κ_t = t(t+1)/(4L + t(t+1))``, ``μ_t = (1−c_t) μ_{t−1} + c_t ν_t``,
  ``c_t = 2/(t+1)`` (the printed ``κ_t (θ − ḡ_t)`` centres the prox term at the uniform
  distribution rather than at μ_0, where the method starts; see §9.5).

``output="average"`` returns the mean of the iterates μ_1..μ_t (RDA's and MD's O(ln t / t)
guarantee is the average's), ``"last"`` the last. The error after an iteration is the largest
change of a marginal between successive iterates; ``converged`` means it reached ``tolerance``
(the paper leaves its test unspecified). MAP prediction is Viterbi on ``θ̃ = θ − ∇L(μ*)`` (the
paper's Prop. 1: μ* are the marginals of θ̃), never a per-position argmax; the losses are the
CRF's on θ̃ with μ* held fixed (Algorithm 3: no differentiation through the solver), so the
energy's weights ψ get their gradient through ``∇L_ψ(μ*)``. Prop. 1 needs a differentiable L:
for a non-smooth one (the ℓ₁ template energies) ``∇L(μ*)`` is a subgradient of full size ψ even
where μ* already sits at the kink, and tilting by it overshoots; ``tilt="dual"`` tilts instead
by the shift of the solver's last projection, whose exact marginals are the last iterate
(derivations.md §9.9).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from .. import ops
from ..energies import Energy, Total, ones_where
from ..solver import BetheOutput
from .exact import exact_kernels

Array = Any  # a torch.Tensor or a jax.Array


def bethe_kernels(
    engine: ModuleType, scores: ModuleType, fixed_point: ModuleType
) -> tuple[Callable[..., Any], ...]:
    """``(solve, marginals, decode, log_partition, loss, partial_loss)`` for the backend whose
    exact chain is ``engine``, with its ``scores`` helpers and its iteration loop ``fixed_point``
    (over tuples of arrays); the arrays' operations come from their ops namespace
    (``implementations.ops``), the energies get its ``array_namespace``."""

    _, crf_decode, _, crf_loss, crf_partial_loss = exact_kernels(engine, scores)

    def folded(emissions: Array, lengths: Array, start: Array | None, end: Array | None) -> Array:
        """Emissions (B, N, T) with ``start`` added at the first and ``end`` at the last position."""
        o = ops.of(emissions)
        length = emissions.shape[1]
        inside = scores.position_mask(lengths, length)
        first = scores.position_mask(0 * lengths + 1, length)
        last = inside & ~scores.position_mask(lengths - 1, length)
        zeros = o.zeros(emissions.shape, emissions)  # (0 · emissions is NaN at -inf)
        if start is not None:
            emissions = emissions + o.where(first[..., None], start + zeros, zeros)
        if end is not None:
            emissions = emissions + o.where(last[..., None], end + zeros, zeros)
        return emissions

    def free_energy_terms(theta: tuple[Array, Array], mu: tuple[Array, Array], mask: Array) -> Array:
        """(B,) ``⟨θ, μ⟩ + H_B(μ)``: H_B sums the arcs' entropies and subtracts each position's
        entropy once per arc beyond the first it touches (a position alone counts once)."""
        (emissions, transitions), (unary, pairwise) = theta, mu
        o = ops.of(unary)
        score = o.where(unary > 0, emissions * unary, 0 * unary).sum((1, 2))
        score = score + o.where(pairwise > 0, transitions * pairwise, 0 * pairwise).sum((1, 2, 3))
        arcs = mask[:, 1:] * mask[:, :-1]  # (B, N-1)
        edge = 0 * mask[:, :1]
        degree = o.concatenate([edge, arcs], 1) + o.concatenate([arcs, edge], 1)
        node_entropy = -o.xlogy(unary, unary).sum(-1)  # (B, N)
        arc_entropy = -o.xlogy(pairwise, pairwise).sum((2, 3))  # (B, N-1)
        entropy = arc_entropy.sum(1) - ((degree - 1) * mask * node_entropy).sum(1)
        return score + entropy

    def setup(emissions, transitions, lengths, start, end, energy):
        batch, length, _ = emissions.shape
        xp = ops.of(emissions).array_namespace
        mask = ones_where(xp, scores.position_mask(lengths, length), emissions[..., 0])  # (B, N)
        theta = (folded(emissions, lengths, start, end), scores.per_position(transitions, batch, length))
        return theta, mask, Total(()) if energy is None else energy

    def oracle(theta, lengths, shift):
        """Exact marginals of ``θ − shift``: the Bethe projection."""
        return engine.marginals(theta[0] - shift[0], theta[1] - shift[1], lengths, None, None)

    def energy_gradient(energy: Energy, mu, mask):
        to_unary, to_pairwise = energy.gradient(ops.of(mask).array_namespace, mu[0], mu[1], mask)
        return to_unary, 0 * mu[1] if to_pairwise is None else to_pairwise

    def value(theta, mu, mask, energy: Energy) -> Array:
        """(B,) ``−F(μ) = ⟨θ, μ⟩ + H_B(μ) − L(μ)`` (``log Z`` when L = 0 at the CRF's marginals)."""
        energy_value = energy.value(ops.of(mask).array_namespace, mu[0], mu[1], mask)
        return free_energy_terms(theta, mu, mask) - energy_value

    def expand(values: Array, like: Array) -> Array:
        """(B,) ``values`` shaped to broadcast against ``like`` (B, ...)."""
        return values[(...,) + (None,) * (like.ndim - 1)]

    def run(emissions, transitions, lengths, start, end, options, history):
        """The solver's loop: ``(theta, mask, energy, μ*, s, iterations run, records)``, s the shift
        of the last projection ``ORACLE(θ − s)`` (zero if none ran), the records
        (iterations, B) changes, or with ``history`` (iterations, B, 2) changes and values −F (the
        value costs about one more forward–backward per iteration, so only ``solve`` records it)."""
        solver, output = options["solver"], options["output"]
        if solver == "accelerated" and output == "average":
            raise ValueError("output='average' is for rda and md: accelerated RDA's iterate is an average")
        theta, mask, energy = setup(emissions, transitions, lengths, start, end, options["energy"])
        o = ops.of(emissions)
        zeros = (o.zeros(theta[0].shape, theta[0]), o.zeros(theta[1].shape, theta[1]))
        first = oracle(theta, lengths, zeros)
        count = 0 * mask[:, 0]  # (B,) iterations run, as floats
        # state: (t, dual (ḡ or s), μ_t, running sum of the iterates or accelerated RDA's ν)
        state = (count, zeros, first, first if solver == "accelerated" else zeros)

        def averaged(state):
            t, _, last, extra = state
            return last if output == "last" else tuple(part / expand(t, part) for part in extra)

        def shift_of(t, dual):
            """The shift s of iteration ``t``'s projection ``ORACLE(θ − s)``, from its dual."""
            if solver == "md":
                return dual
            if solver == "rda":
                weight = t / (t + options["beta"])
            else:  # accelerated
                weight = t * (t + 1) / (4 * options["smoothness"] + t * (t + 1))
            return tuple(expand(weight, d) * d for d in dual)

        def advance(state):
            t, dual, mu, extra = state
            t = t + 1
            if solver == "accelerated":
                c = 2 / (t + 1)
                mix = tuple(expand(1 - c, m) * m + expand(c, n) * n for m, n in zip(mu, extra, strict=True))
                gradient = energy_gradient(energy, mix, mask)
                dual = tuple(
                    expand(1 - c, d) * d + expand(c, g) * g for d, g in zip(dual, gradient, strict=True)
                )
                nu = oracle(theta, lengths, shift_of(t, dual))
                new = tuple(expand(1 - c, m) * m + expand(c, n) * n for m, n in zip(mu, nu, strict=True))
                return t, dual, new, nu
            gradient = energy_gradient(energy, mu, mask)
            if solver == "rda":
                dual = tuple(d + (g - d) / expand(t, g) for d, g in zip(dual, gradient, strict=True))
            else:  # md
                eta = 1 / (options["decay"] * t)
                dual = tuple(
                    (d + expand(eta, g) * g) / expand(1 + eta, g) for d, g in zip(dual, gradient, strict=True)
                )
            new = oracle(theta, lengths, shift_of(t, dual))
            return t, dual, new, tuple(e + n for e, n in zip(extra, new, strict=True))

        def record(new, old):
            """(B,) the largest change of a marginal; with ``history``, (B, 2) beside the value −F
            of the output iterate."""
            change = o.amax(o.abs(new[2][0] - old[2][0]), (1, 2))
            if theta[1].shape[1]:  # a batch of single positions has no arcs
                change = o.maximum(change, o.amax(o.abs(new[2][1] - old[2][1]), (1, 2, 3)))
            if not history:
                return change
            return o.stack([change, value(theta, averaged(new), mask, energy)], -1)

        tolerance = options["tolerance"]
        state, ran, records = fixed_point.iterate_with_errors(
            advance, state, options["iterations"], tolerance, record
        )
        return theta, mask, energy, averaged(state), shift_of(state[0], state[1]), ran, records

    def solve(emissions, transitions, lengths, start, end, **options) -> BetheOutput:
        """The iterate after ``iterations`` (or until every sentence's change is within ``tolerance``),
        with the change and the value ``−F`` after each iteration."""
        *_, (unary, pairwise), _, ran, records = run(
            emissions, transitions, lengths, start, end, options, True
        )
        last = records[ran - 1]
        tolerance = options["tolerance"]
        converged = last[:, 0] <= (0.0 if tolerance is None else tolerance)
        return BetheOutput(unary, pairwise, last[:, 1], ran, converged, records[..., 0], records[..., 1])

    def marginals(emissions, transitions, lengths, start, end, **options):
        """μ* (B, N, T) and (B, N-1, T, T), zero on padding."""
        return run(emissions, transitions, lengths, start, end, options, False)[3]

    def log_partition(emissions, transitions, lengths, start, end, **options):
        """(B,) ``−F(μ*)``: ``log Z`` when there is no energy."""
        theta, mask, energy, mu, *_ = run(emissions, transitions, lengths, start, end, options, False)
        return value(theta, mu, mask, energy)

    def tilted(emissions, transitions, lengths, start, end, options):
        """``θ̃ = θ − g`` as emissions (B, N, T) and transitions (B, N-1, T, T) with start and end
        folded in, μ* held fixed (the solver runs ``without_gradient``). ``tilt="gradient"``:
        g = ∇L(μ*) (the paper's Prop. 1). ``tilt="dual"``: g has the value of the shift s of the
        solver's last projection (whose exact marginals are its last iterate) and the derivative of
        ∇L(μ*) in the energy's weights ψ, so that the loss's gradients are Algorithm 3's:
        μ* − S(y) in θ for RDA and MD's last iterate, (∂∇L/∂ψ)ᵀ(S(y) − μ*) in ψ."""
        o = ops.of(emissions)
        mu, last_shift = o.without_gradient(
            lambda *scores: run(*scores, options, False)[3:5], emissions, transitions, lengths, start, end
        )
        theta, mask, energy = setup(emissions, transitions, lengths, start, end, options["energy"])
        shift = energy_gradient(energy, mu, mask)
        if options["tilt"] == "dual":
            pairs = zip(shift, last_shift, strict=True)
            shift = tuple(g + o.without_gradient(lambda a, b: a - b, s, g) for g, s in pairs)
        return theta[0] - shift[0], theta[1] - shift[1]

    def decode(emissions, transitions, lengths, start, end, **options):
        """Viterbi on θ̃ (B, N), -1 on padding."""
        return crf_decode(*tilted(emissions, transitions, lengths, start, end, options), lengths, None, None)

    def loss(emissions, transitions, lengths, tags, start, end, **options):
        """``−log Q(tags)`` (B,): the CRF's loss with scores θ̃ (the paper's surrogate, Eq. 11)."""
        tilted_scores = tilted(emissions, transitions, lengths, start, end, options)
        return crf_loss(*tilted_scores, lengths, tags, None, None)

    def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
        """``log Z(θ̃) − log Z_allowed(θ̃)`` (B,): the CRF's partial-label loss with scores θ̃."""
        tilted_scores = tilted(emissions, transitions, lengths, start, end, options)
        return crf_partial_loss(*tilted_scores, lengths, allowed, None, None)

    return solve, marginals, decode, log_partition, loss, partial_loss
