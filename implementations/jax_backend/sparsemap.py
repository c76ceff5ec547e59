"""SparseMAP on the chain (Niculae, Martins, Blondel & Cardie, 2018): a sparse convex combination
of a few tag sequences, found with nothing but Viterbi calls.

``max_{y ∈ Δ} θᵀy − ½‖My‖²`` over distributions ``y`` on tag sequences ``s`` (score ``θ_s``, tag
indicators ``m_s``): only the tag marginals ``u = My`` are penalised, the transition marginals
``v = Ny`` enter through ``θ`` (docs/derivations.md §8). Every solver keeps the support in ``K =
max_support`` slots per sequence (paths (B, K, N), weights (B, K)), so shapes are fixed and this
module jit-compiles; each iteration makes one batched oracle call (``oracle``: sequential
Viterbi or the max-semiring parallel scan) on the adjusted scores ``emissions − u``, whose answer
also gives the Wolfe (duality) gap ``max_s (θ_s − m_sᵀu) − Σ y_s (θ_s − m_sᵀu)``, the error.

Solvers (``solver``):

- ``active-set`` (the default; the paper's Algorithm 2): the relaxed QP on the support by its
  bordered KKT system (Eq. 9), whose inverse is updated in O(K²) as an atom enters or leaves
  and refined by one Newton–Schulz step against the exact system per iteration;
  a line search (Eq. 10) drops the atom whose weight would turn negative; an atom enters when the
  oracle breaks the optimality certificate ``θ_s − m_sᵀû ≤ τ̂``. An entering atom whose ``m_s``
  lies in the affine hull of the support (possible: transitions enter ``θ`` but not ``M``) would
  make the system singular; it enters by a pivot along the null direction instead, which keeps
  ``u``, raises the objective and drops one atom (docs/derivations.md §8).
- ``fw``, ``away-fw``, ``pairwise-fw``: vanilla, away-step and pairwise Frank–Wolfe with exact
  line search (Eq. 8), the away atom being the *worst* active one (the digest's correction).

A sequence stops once its gap is within ``tolerance`` (or, with ``None``, within rounding of its
scores, amplified by the condition number of the active set's KKT system); it is then frozen, so
padding and batching change nothing. Fallbacks, never NaN: an oracle answer already in the
support stops the sequence (its gap is then rounding); a sequence whose support would exceed
``max_support``, or that reaches ``iterations``, or whose step comes out non-finite, stops where
it is, a valid distribution over its paths, with ``converged`` False and its gap in ``errors``. The
iterations are a ``lax.while_loop`` (at least one runs), which stops once every sequence is done.

Gradients: ``marginals`` backpropagates by the paper's Prop. 1 on the final support, ``[u; v]``
having Jacobian ``A_I D A_Iᵀ`` with ``D`` the top-left block of the KKT inverse (the active set
carries it; for the Frank–Wolfe supports, which may be affinely dependent, it is the
pseudo-inverse); the value and the losses by Danskin, their gradient being ``(u*, v*)``.

Options are Python values, static under ``jax.jit``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array, lax

from ..solver import SparseMAPOutput
from . import _chain, _tree
from ._scores import boundary, forbidden_pattern, gold_score, mask_emissions

_ORACLES = {"viterbi": _chain.viterbi, "scan": _tree.viterbi}
#: The solvers' precision. The gap is a difference of path scores, tens to hundreds in size: in
#: float32 its rounding error is of the order of the gaps that decide which atom enters, and the
#: active set stops early or cycles. The oracle and the K×K algebra are cheap next to the network
#: that produces the scores, so they run in float64 for every input dtype (where jax has it: under
#: ``jax_enable_x64``, which this library never changes; else in float32, see :func:`_working`).
WORKING = jnp.float64
_OPTIONS = ("solver", "iterations", "tolerance", "max_support", "oracle")  # static under jax.jit


def _working() -> Any:
    """:data:`WORKING` as jax has it: float64 under ``jax_enable_x64``, else float32."""
    return jax.dtypes.canonicalize_dtype(WORKING)


class _State(NamedTuple):
    """The solver's iterate, one row per sequence (K slots)."""

    paths: Array  # (B, K, N) integer: the support's tag sequences, -1 on padding
    active: Array  # (B, K) bool: slot holds an atom of the support
    weights: Array  # (B, K): y, 0 on inactive slots
    theta: Array  # (B, K): θ_s of each slot's path
    gram: Array  # (B, K, K): m_kᵀm_l, the positions where two slots' paths agree (stale off the support)
    inverse: Array  # (B, K+1, K+1): KKT inverse on the support, identity on inactive slots
    settled: Array  # (B,) bool: y solves the relaxed QP on its support (active set)
    candidate: Array  # (B, N) integer: the oracle's answer at y
    candidate_theta: Array  # (B,): its θ
    candidate_slack: Array  # (B,): θ_s − m_sᵀu of the oracle's answer (its adjusted score)
    gap: Array  # (B,): Wolfe gap at y
    done: Array  # (B,) bool: stopped (frozen)
    stalled: Array  # (B,) bool: stopped without convergence (support full)


# ------------------------------------------------------------------------------ support algebra


def _onehot(paths: Array, num_tags: int, dtype: Any) -> Array:
    """(..., N, T) indicators of ``paths`` (..., N), zero rows where a path is -1."""
    return jax.nn.one_hot(jnp.maximum(paths, 0), num_tags, dtype=dtype) * (paths >= 0)[..., None]


def _unary(paths: Array, weights: Array, num_tags: int) -> Array:
    """``Σ_k weights_k m_k`` (B, N, T): each slot's weight added at its tags (a scatter, not a
    (B, K, N, T) one-hot: the solver asks for it every iteration)."""
    batch, _, length = paths.shape
    source = weights[..., None] * (paths >= 0)  # (B, K, N)
    rows, positions = jnp.arange(batch)[:, None, None], jnp.arange(length)[None, None, :]
    unary = jnp.zeros((batch, length, num_tags), weights.dtype)
    return unary.at[rows, positions, jnp.maximum(paths, 0)].add(source)


def _pairwise(paths: Array, weights: Array, num_tags: int) -> Array:
    """``Σ_k weights_k n_k`` (B, N-1, T, T)."""
    onehot = _onehot(paths, num_tags, weights.dtype)
    return jnp.einsum("bk,bkns,bknt->bnst", weights, onehot[:, :, :-1], onehot[:, :, 1:])


def _path_sums(paths: Array, unary: Array, pairwise: Array | None = None) -> Array:
    """``m_kᵀunary (+ n_kᵀpairwise)`` (B, K): each slot's path read off node (and arc) scores."""
    onehot = _onehot(paths, unary.shape[-1], unary.dtype)
    total = jnp.einsum("bknt,bnt->bk", onehot, unary)
    if pairwise is not None:
        total = total + jnp.einsum("bkns,bknt,bnst->bk", onehot[:, :, :-1], onehot[:, :, 1:], pairwise)
    return total


def _agreement(paths: Array, path: Array) -> Array:
    """``m_kᵀm_s`` (B, K): the positions where each slot's path agrees with ``path`` (B, N)."""
    return ((paths == path[:, None]) & (path[:, None] >= 0)).sum(-1)


def _bordered(agreement: Array, active: Array, like: Array) -> Array:
    """The KKT column ``[m_Iᵀm_s; 1]`` (B, K+1) of an atom from its ``agreement`` (B, K) with
    each slot, 0 on inactive slots."""
    column = jnp.where(active, agreement.astype(like.dtype), 0.0)
    return jnp.concatenate([column, jnp.ones((active.shape[0], 1), like.dtype)], axis=1)


def _unit(batch: int, size: int, slot: Array, like: Array) -> Array:
    """(B, size) rows ``e_slot``."""
    return jnp.broadcast_to(jax.nn.one_hot(slot, size, dtype=like.dtype), (batch, size))


def _remove(inverse: Array, slot: Array, apply: Array) -> Array:
    """The KKT inverse without atom ``slot`` (B,), where ``apply``: the Schur update
    ``H − h hᵀ / H_rr``, then row and column ``slot`` reset to the identity's."""
    batch, size, _ = inverse.shape
    index = jnp.broadcast_to(slot[:, None, None], (batch, size, 1))
    column = jnp.take_along_axis(inverse, index, axis=2)[..., 0]  # (B, K+1)
    pivot = jnp.take_along_axis(column, slot[:, None], axis=1)  # (B, 1)
    pivot = jnp.where(apply[:, None], pivot, 1.0)
    unit = _unit(batch, size, slot, inverse)
    updated = inverse - column[:, :, None] * column[:, None, :] / pivot[:, :, None]
    updated = updated + unit[:, :, None] * unit[:, None, :]
    return jnp.where(apply[:, None, None], updated, inverse)


def _add(inverse: Array, slot: Array, solved: Array, schur: Array, apply: Array) -> Array:
    """The KKT inverse with a new atom in the empty ``slot``, where ``apply``: with ``c = H k``
    (``solved``) and the Schur complement ``σ = ‖m_s‖² − kᵀc``, ``H − e eᵀ + (c − e)(c − e)ᵀ / σ``."""
    batch, size, _ = inverse.shape
    unit = _unit(batch, size, slot, inverse)
    direction = solved - unit
    safe = jnp.where(apply, schur, 1.0)[:, None, None]
    updated = inverse - unit[:, :, None] * unit[:, None, :]
    updated = updated + direction[:, :, None] * direction[:, None, :] / safe
    return jnp.where(apply[:, None, None], updated, inverse)


# ------------------------------------------------------------------------------------ solvers


class _Problem(NamedTuple):
    """One batch's scores and the solver's fixed settings."""

    emissions: Array  # (B, N, T)
    transitions: Array  # (T, T) or (B, N-1, T, T)
    lengths: Array  # (B,)
    start: Array | None
    end: Array | None
    oracle: Any  # (emissions, transitions, lengths, start, end) -> (best score, best path)
    sizes: Array  # (B,) ‖m_s‖² = the length, in the scores' dtype
    tolerance: float  # gap at which a sequence stops (0: rounding only)


def _ask(problem: _Problem, state: _State) -> _State:
    """The oracle at the iterate: the best sequence under ``emissions − u`` and the Wolfe gap."""
    num_tags = problem.emissions.shape[-1]
    unary = _unary(state.paths, state.weights, num_tags)
    best, path = problem.oracle(
        problem.emissions - unary, problem.transitions, problem.lengths, problem.start, problem.end
    )
    theta = gold_score(
        problem.emissions, problem.transitions, problem.lengths, path, problem.start, problem.end
    )
    mean_slack = (state.weights * state.theta).sum(-1) - (unary * unary).sum((1, 2))
    return state._replace(candidate=path, candidate_theta=theta, candidate_slack=best, gap=best - mean_slack)


def _threshold(problem: _Problem, state: _State, conditioning: Array | float = 1.0) -> Array:
    """(B,) the gap under which a sequence has converged: ``tolerance``, and never under the
    rounding error of the gap, a difference of numbers of the size of the path scores, computed
    from weights solved in a system of condition number ``conditioning``."""
    scale = jnp.where(state.active, jnp.abs(state.theta), 0.0).max(-1) + jnp.abs(state.candidate_theta)
    rounding = 256 * jnp.finfo(state.weights.dtype).eps * (scale + problem.sizes) * conditioning
    return jnp.maximum(rounding, problem.tolerance)


def _conditioning(state: _State, sizes: Array) -> Array:
    """(B,) ``‖A‖∞ ‖A⁻¹‖∞`` of the support's KKT system: how much the solved weights, hence the
    gap, amplify rounding. Without it the active set would chase gaps below what its own
    weights resolve: on a long sentence with 30 nearly dependent atoms the gap stalls near 1e-10,
    atoms keep entering and leaving, and the system degenerates (seen in training)."""
    norm = jnp.abs(_system(state, sizes)).sum(-1).max(-1)
    return norm * jnp.abs(state.inverse).sum(-1).max(-1)


def _initial(problem: _Problem, max_support: int) -> _State:
    """The MAP sequence alone, its KKT inverse ``[[0, 1], [1, -n]]``, and the oracle's answer."""
    emissions = problem.emissions
    batch, length, _ = emissions.shape
    _, path = problem.oracle(emissions, problem.transitions, problem.lengths, problem.start, problem.end)
    theta = gold_score(emissions, problem.transitions, problem.lengths, path, problem.start, problem.end)
    first = jnp.arange(max_support) == 0  # (K,)
    paths = jnp.where(first[None, :, None], path[:, None], -1)
    size = max_support + 1
    inverse = jnp.broadcast_to(jnp.eye(size, dtype=emissions.dtype), (batch, size, size))
    inverse = inverse.at[:, 0, 0].set(0.0)
    inverse = inverse.at[:, 0, -1].set(1.0).at[:, -1, 0].set(1.0)
    inverse = inverse.at[:, -1, -1].set(-problem.sizes)
    flags = jnp.zeros(batch, dtype=bool)
    state = _State(
        paths=paths,
        active=jnp.broadcast_to(first, (batch, max_support)),
        weights=jnp.broadcast_to(first.astype(emissions.dtype), (batch, max_support)),
        theta=jnp.where(first, theta[:, None], 0.0),
        gram=jnp.where(first & first[:, None], problem.sizes[:, None, None], 0.0),
        inverse=inverse,
        settled=~flags,
        candidate=path,
        candidate_theta=theta,
        candidate_slack=theta,
        gap=theta,
        done=flags,
        stalled=flags,
    )
    state = _ask(problem, state)
    return state._replace(done=state.gap <= _threshold(problem, state))


def _first(mask: Array) -> Array:
    """(B,) index of the first True of each row (0 if none)."""
    return mask.astype(jnp.uint8).argmax(-1)


def _place(state: _State, slot: Array, apply: Array, weight: Array) -> _State:
    """The oracle's answer into ``slot`` with ``weight``, where ``apply``."""
    here = apply[:, None] & (jnp.arange(state.active.shape[1]) == slot[:, None])
    paths = jnp.where(here[..., None], state.candidate[:, None], state.paths)
    row = _agreement(paths, state.candidate).astype(state.gram.dtype)  # (B, K), the length at slot
    gram = jnp.where(here[:, :, None], row[:, None, :], state.gram)
    return state._replace(
        paths=paths,
        active=state.active | here,
        weights=jnp.where(here, weight[:, None], state.weights),
        theta=jnp.where(here, state.candidate_theta[:, None], state.theta),
        gram=jnp.where(here[:, None, :], row[:, :, None], gram),
    )


def _distribution(weights: Array, active: Array) -> Array:
    """``weights`` put back on the simplex (rounding moves their sum by a few ulps per step): the
    reported gap is then the Wolfe gap of a valid distribution, so ``converged`` never lies."""
    weights = jnp.where(active, jnp.maximum(weights, 0), 0.0)
    return weights / weights.sum(-1, keepdims=True)


def _active_set_step(problem: _Problem, state: _State) -> _State:
    """One step of the active-set method: the oracle's atom enters where the certificate fails
    at a settled iterate; then the relaxed QP on the support, and a line search toward it."""
    max_support = state.active.shape[1]
    dtype, sizes = state.weights.dtype, problem.sizes
    eps = jnp.finfo(dtype).eps
    running = ~state.done
    agreement = _agreement(state.paths, state.candidate)
    duplicate = (state.active & (agreement == problem.lengths[:, None])).any(-1)
    # an atom in the support's affine hull: pivot along the null direction (−c, 1) first; it
    # takes the slot of the atom it pushes out, so only a non-singular entry needs a free slot
    column = _bordered(agreement, state.active, state.weights)
    solved = (state.inverse @ column[..., None])[..., 0]
    schur = sizes - (column * solved).sum(-1)
    dependent = schur <= eps**0.5 * sizes  # nearly dependent: 1/σ would swamp the inverse
    full = state.active.all(-1) & ~dependent
    enter = running & state.settled
    stop = enter & (duplicate | full)
    enter = enter & ~stop
    singular = enter & dependent
    coefficients = solved[:, :max_support]
    blocking = state.active & (coefficients > 1e3 * eps)
    ratios = jnp.where(blocking, state.weights / jnp.where(blocking, coefficients, 1.0), jnp.inf)
    step, leaving = ratios.min(-1), ratios.argmin(-1)
    step = jnp.where(singular, step, 0.0)
    pivoted = jnp.maximum(state.weights - step[:, None] * jnp.where(state.active, coefficients, 0.0), 0)
    gone = singular[:, None] & (jnp.arange(max_support) == leaving[:, None])
    state = state._replace(
        weights=jnp.where(gone, 0.0, jnp.where(singular[:, None], pivoted, state.weights)),
        active=state.active & ~gone,
        inverse=_remove(state.inverse, leaving, singular),
    )
    slot = jnp.where(singular, leaving, _first(~state.active))
    column = _bordered(_agreement(state.paths, state.candidate), state.active, state.weights)
    solved = (state.inverse @ column[..., None])[..., 0]
    schur = sizes - (column * solved).sum(-1)
    state = _place(state, slot, enter, step)._replace(inverse=_add(state.inverse, slot, solved, schur, enter))
    # the relaxed QP on the support (Eq. 9), then the line search toward its solution (Eq. 10)
    system = _system(state, sizes)  # exact, with the entering atom
    state = state._replace(inverse=_refined(state.inverse, system))
    move = running & ~stop
    relaxed = _relaxed(state, system)
    negative = state.active & (relaxed < -1e3 * eps)
    feasible = ~negative.any(-1)
    shrink = state.weights - relaxed
    ratios = jnp.where(negative, state.weights / jnp.where(negative, shrink, 1.0), jnp.inf)
    step, leaving = ratios.min(-1), ratios.argmin(-1)
    step = jnp.where(feasible, 1.0, jnp.minimum(step, 1.0))
    moved = jnp.maximum(state.weights + step[:, None] * (relaxed - state.weights), 0)
    drop = move & ~feasible
    gone = drop[:, None] & (jnp.arange(max_support) == leaving[:, None])
    state = state._replace(
        weights=jnp.where(gone | ~state.active, 0.0, jnp.where(move[:, None], moved, state.weights)),
        active=state.active & ~gone,
        inverse=_remove(state.inverse, leaving, drop),
        settled=jnp.where(move, feasible, state.settled),
    )
    state = state._replace(weights=_distribution(state.weights, state.active))
    state = _ask(problem, state)
    converged = state.settled & (state.gap <= _threshold(problem, state, _conditioning(state, sizes)))
    return state._replace(done=state.done | stop | converged, stalled=state.stalled | (stop & ~duplicate))


def _frank_wolfe_step(problem: _Problem, state: _State, variant: str) -> _State:
    """One Frank–Wolfe step (``fw``, ``away-fw`` or ``pairwise-fw``) with exact line search."""
    batch, max_support = state.active.shape
    num_tags, sizes = problem.emissions.shape[-1], problem.sizes
    slots = jnp.arange(max_support)
    running = ~state.done
    unary = _unary(state.paths, state.weights, num_tags)
    slack = state.theta - _path_sums(state.paths, unary)  # (B, K) θ_k − m_kᵀu
    masked = jnp.where(state.active, slack, jnp.inf)
    worst_slack, worst = masked.min(-1), masked.argmin(-1)
    worst_weight = jnp.take_along_axis(state.weights, worst[:, None], axis=1)[:, 0]
    mean_slack = (state.weights * slack).sum(-1)
    forward_gap, away_gap = state.candidate_slack - mean_slack, mean_slack - worst_slack
    square = (unary * unary).sum((1, 2))
    agreement = _agreement(state.paths, state.candidate)
    same = state.active & (agreement == problem.lengths[:, None])
    existing = same.any(-1)
    slot = jnp.where(existing, _first(same), _first(~state.active))
    if variant == "pairwise-fw":
        worst_agreement = jnp.take_along_axis(agreement, worst[:, None], axis=1)[:, 0].astype(sizes.dtype)
        numerator, denominator = forward_gap + away_gap, 2 * (sizes - worst_agreement)
        cap, forward = worst_weight, jnp.ones_like(running)
    else:
        forward = (forward_gap >= away_gap) if variant == "away-fw" else jnp.ones_like(running)
        candidate_dot = state.candidate_theta - state.candidate_slack  # m_sᵀu
        worst_dot = jnp.take_along_axis(state.theta, worst[:, None], axis=1)[:, 0] - worst_slack  # m_wᵀu
        numerator = jnp.where(forward, forward_gap, away_gap)
        denominator = sizes + square - 2 * jnp.where(forward, candidate_dot, worst_dot)
        away_cap = worst_weight / jnp.maximum(1 - worst_weight, jnp.finfo(sizes.dtype).tiny)
        cap = jnp.where(forward, 1.0, away_cap)
    positive = denominator > 0
    step = jnp.where(positive, numerator / jnp.where(positive, denominator, 1.0), jnp.inf)
    step = jnp.minimum(jnp.maximum(step, 0), cap)
    step = jnp.where(numerator > 0, step, 0.0)
    enters = running & (forward | (variant == "pairwise-fw")) & (step > 0)
    stop = enters & ~existing & state.active.all(-1)
    move = running & ~stop
    into = slots == slot[:, None]
    out_of = slots == worst[:, None]
    gain = step[:, None]
    if variant == "pairwise-fw":
        weights = state.weights + gain * (into.astype(gain.dtype) - out_of.astype(gain.dtype))
        emptied = out_of & (step >= cap)[:, None]
    else:
        toward = (1 - gain) * state.weights + gain * into.astype(gain.dtype)
        away = (1 + gain) * state.weights - gain * out_of.astype(gain.dtype)
        weights = jnp.where(forward[:, None], toward, away)
        emptied = ~forward[:, None] & out_of & (step >= cap)[:, None]
    weights = jnp.maximum(jnp.where(emptied, 0.0, weights), 0)
    state = _place(state, slot, move & enters & ~existing, step)
    weights = jnp.where(move[:, None], jnp.where(state.active, weights, 0.0), state.weights)
    state = state._replace(weights=weights, active=state.active & (weights > 0))
    state = _ask(problem, state)
    converged = state.gap <= _threshold(problem, state)
    return state._replace(done=state.done | stop | converged, stalled=state.stalled | stop)


def _system(state: _State, sizes: Array) -> Array:
    """The bordered KKT matrix ``[[G_I, 1], [1ᵀ, 0]]`` of the support (B, K+1, K+1), exact (the
    Gram entries count agreeing positions), identity on inactive slots."""
    batch, max_support = state.active.shape
    gram = state.gram
    both = state.active[:, :, None] & state.active[:, None, :]
    eye = jnp.eye(max_support, dtype=sizes.dtype)
    gram = jnp.where(both, gram, eye)
    border = state.active.astype(sizes.dtype)[..., None]
    return jnp.concatenate(
        [
            jnp.concatenate([gram, border], 2),
            jnp.concatenate([jnp.swapaxes(border, 1, 2), jnp.zeros((batch, 1, 1), sizes.dtype)], 2),
        ],
        1,
    )


def _refined(inverse: Array, system: Array) -> Array:
    """The KKT inverse after one Newton–Schulz step ``H + H (I − A H)`` against the exact system
    ``A``: the O(K²) updates lose digits on the ill-conditioned systems of long sentences (paths
    that differ in a few positions), and the step squares the residual ``I − A H``."""
    residual = jnp.eye(inverse.shape[-1], dtype=inverse.dtype) - system @ inverse
    return inverse + inverse @ residual


def _relaxed(state: _State, system: Array) -> Array:
    """(B, K) the weights solving the relaxed QP on the support (Eq. 9), ``[w; τ] = A⁻¹ [θ; 1]``,
    0 on inactive slots: the inverse applied, then one step of iterative refinement against the
    exact system. The inverse's own rounding leaves a residual of order κ·eps·‖θ‖ (5e-10 on a
    64-token sentence with 44 atoms, κ ≈ 3e4), which the two backends round differently; the step
    leaves one of order eps·‖θ‖, so u* is the support's to rounding, in either backend."""
    max_support = state.active.shape[1]
    right = jnp.concatenate([jnp.where(state.active, state.theta, 0.0), jnp.ones_like(state.theta[:, :1])], 1)
    solution = state.inverse @ right[..., None]
    solution = solution + state.inverse @ (right[..., None] - system @ solution)
    return jnp.where(state.active, solution[:, :max_support, 0], 0.0)


def _gram_inverse(state: _State, sizes: Array) -> Array:
    """The KKT inverse on a Frank–Wolfe support, recomputed (a pseudo-inverse: such a support may
    be affinely dependent), identity on inactive slots."""
    return jnp.linalg.pinv(_system(state, sizes), hermitian=True)


class _Solution(NamedTuple):
    """A finished solve, held constant (``stop_gradient``): the support and what it gives."""

    paths: Array  # (B, K, N)
    weights: Array  # (B, K)
    active: Array  # (B, K)
    inverse: Array  # (B, K+1, K+1) KKT inverse on the support (the backward pass's), float64
    unary: Array  # (B, N, T) u*
    pairwise: Array  # (B, N-1, T, T) v*
    value: Array  # (B,) θᵀy* − ½‖u*‖²
    iterations: Array  # 0-d integer array
    converged: Array  # (B,)
    errors: Array  # (iterations, B)


@partial(jax.jit, static_argnames=_OPTIONS)
def _solve(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    start: Array | None,
    end: Array | None,
    *,
    solver: str,
    iterations: int,
    tolerance: float | None,
    max_support: int,
    oracle: str,
) -> _Solution:
    """Run ``solver`` to convergence (or its limits) on scores held constant, in float64 whatever the
    scores' dtype (:data:`WORKING`); the marginals, value and gaps come back in the scores' dtype."""
    dtype, working = emissions.dtype, _working()
    with jax.default_matmul_precision("highest"):  # torch's: no TF32 on a GPU, even in float32
        emissions = lax.stop_gradient(emissions).astype(working)
        transitions = lax.stop_gradient(transitions).astype(working)
        start = None if start is None else lax.stop_gradient(start).astype(working)
        end = None if end is None else lax.stop_gradient(end).astype(working)
        sizes = lengths.astype(working)
        problem = _Problem(
            emissions, transitions, lengths, start, end, _ORACLES[oracle], sizes, tolerance or 0.0
        )
        state = _initial(problem, max_support)
        errors = jnp.full((iterations, emissions.shape[0]), jnp.nan, emissions.dtype)

        def unfinished(carry: tuple[Array, _State, Array]) -> Array:
            k, state, _ = carry  # the first iteration always runs, as the torch loop's
            return (k < iterations) & ((k == 0) | ~state.done.all())

        def body(carry: tuple[Array, _State, Array]) -> tuple[Array, _State, Array]:
            k, state, errors = carry
            if solver == "active-set":
                new = _active_set_step(problem, state)
            else:
                new = _frank_wolfe_step(problem, state, solver)
            state = _advance(state, new)
            return k + 1, state, errors.at[k].set(jnp.maximum(state.gap, 0))

        run, state, errors = lax.while_loop(unfinished, body, (jnp.asarray(0, dtype=int), state, errors))
        num_tags = emissions.shape[-1]
        unary = _unary(state.paths, state.weights, num_tags)
        pairwise = _pairwise(state.paths, state.weights, num_tags)
        value = (state.weights * state.theta).sum(-1) - 0.5 * (unary * unary).sum((1, 2))
        inverse = state.inverse if solver == "active-set" else _gram_inverse(state, sizes)
        converged = state.done & ~state.stalled
        return _Solution(
            state.paths,
            state.weights.astype(dtype),
            state.active,
            inverse,
            unary.astype(dtype),
            pairwise.astype(dtype),
            value.astype(dtype),
            run,
            converged,
            errors.astype(dtype),
        )


def _advance(state: _State, new: _State) -> _State:
    """``new`` on the running rows; a running row whose step went non-finite keeps its iterate (a
    valid distribution) and stops unconverged: a safeguard, the contract promises no NaN. Rows
    already stopped stay as they are, whatever the step computed for them."""
    finite = jnp.isfinite(new.gap) & jnp.isfinite(new.weights).all(-1)
    broken = ~state.done & ~(finite & jnp.isfinite(new.inverse).all(axis=(1, 2)))
    keep = state.done | broken
    state = _State(*(jnp.where(_rows(keep, a), a, b) for a, b in zip(state, new, strict=True)))
    return state._replace(done=state.done | broken, stalled=state.stalled | broken)


def _rows(done: Array, like: Array) -> Array:
    """``done`` (B,) shaped to broadcast against ``like`` (B, ...)."""
    return done.reshape((-1,) + (1,) * (like.ndim - 1))


# ------------------------------------------------------------------------------ differentiation


def _last(unary: Array, lengths: Array) -> Array:
    """(B, T) each sequence's last row."""
    index = jnp.broadcast_to((lengths - 1)[:, None, None], (unary.shape[0], 1, unary.shape[-1]))
    return jnp.take_along_axis(unary, index, axis=1)[:, 0]


def _score_gradients(unary: Array, pairwise: Array, lengths: Array, shared: bool) -> tuple[Array, ...]:
    """Gradients w.r.t. (emissions, transitions, start, end) of ``Σ_b <[unary; pairwise], a_b>``
    where every sequence's scores ``a`` are read through the tag and arc indicators."""
    transitions = pairwise.sum((0, 1)) if shared else pairwise
    return unary, transitions, unary[:, 0].sum(0), _last(unary, lengths).sum(0)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _marginals(
    emissions: Array,
    transitions: Array,
    start: Array,
    end: Array,
    lengths: Array,
    options: tuple[tuple[str, Any], ...],
    shared: bool,
) -> tuple[Array, Array]:
    """``(u*, v*)`` with the backward pass of Prop. 1: for an upstream ``(g_u, g_v)``,
    ``h_k = m_kᵀg_u + n_kᵀg_v`` on the support, ``r = D h`` with ``D`` the top-left block of the
    KKT inverse, and the gradient w.r.t. the scores is ``Σ_k r_k a_k``. The backward is linear in
    ``(g_u, g_v)`` with the support held fixed, so it differentiates again (to 0 in the scores,
    the Jacobian being piecewise constant). ``shared`` (static): ``transitions`` is (T, T)."""
    solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
    return solution.unary, solution.pairwise


def _marginals_forward(
    emissions: Array,
    transitions: Array,
    start: Array,
    end: Array,
    lengths: Array,
    options: tuple[tuple[str, Any], ...],
    shared: bool,
) -> tuple[tuple[Array, Array], tuple[Array, ...]]:
    solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
    return (solution.unary, solution.pairwise), (solution.paths, solution.active, solution.inverse, lengths)


def _marginals_backward(
    options: tuple[tuple[str, Any], ...], shared: bool, saved: tuple[Array, ...], grads: tuple[Array, Array]
) -> tuple[Array | None, ...]:
    paths, active, inverse, lengths = saved
    grad_unary, grad_pairwise = grads
    max_support, num_tags = active.shape[1], grad_unary.shape[-1]
    with jax.default_matmul_precision("highest"):
        along = jnp.where(active, _path_sums(paths, grad_unary, grad_pairwise), 0.0).astype(inverse.dtype)
        direction = jnp.where(
            active, (inverse[:, :max_support, :max_support] @ along[..., None])[..., 0], 0.0
        ).astype(grad_unary.dtype)
        unary, pairwise = _unary(paths, direction, num_tags), _pairwise(paths, direction, num_tags)
    return *_score_gradients(unary, pairwise, lengths, shared), None


_marginals.defvjp(_marginals_forward, _marginals_backward)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _danskin_value(
    emissions: Array,
    transitions: Array,
    start: Array,
    end: Array,
    lengths: Array,
    options: tuple[tuple[str, Any], ...],
    shared: bool,
) -> Array:
    """The SparseMAP value ``θᵀy* − ½‖u*‖²`` (B,) with Danskin's gradient ``(u*, v*)``; the
    forward rule takes ``(u*, v*)`` from :func:`_marginals` (and the value from this function),
    so a derivative of the gradient (reverse over reverse) is Prop. 1's Jacobian: jax
    differentiates a ``custom_vjp``'s forward and backward rules like any other code."""
    return _solve(emissions, transitions, lengths, start, end, **dict(options)).value


def _danskin_forward(
    emissions: Array,
    transitions: Array,
    start: Array,
    end: Array,
    lengths: Array,
    options: tuple[tuple[str, Any], ...],
    shared: bool,
) -> tuple[Array, tuple[Array, Array, Array]]:
    # two calls, one solve: XLA merges the identical solves (common-subexpression elimination)
    value = _danskin_value(emissions, transitions, start, end, lengths, options, shared)
    unary, pairwise = _marginals(emissions, transitions, start, end, lengths, options, shared)
    return value, (lengths, unary, pairwise)


def _danskin_backward(
    options: tuple[tuple[str, Any], ...], shared: bool, saved: tuple[Array, Array, Array], grad: Array
) -> tuple[Array | None, ...]:
    lengths, unary, pairwise = saved
    unary = grad[:, None, None] * unary
    pairwise = grad[:, None, None, None] * pairwise
    return *_score_gradients(unary, pairwise, lengths, shared), None


_danskin_value.defvjp(_danskin_forward, _danskin_backward)


def _options(**options: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items()))


def _value(emissions, transitions, lengths, start, end, **options) -> Array:
    start, end = boundary(start, emissions), boundary(end, emissions)
    shared = transitions.ndim == 2
    return _danskin_value(emissions, transitions, start, end, lengths, _options(**options), shared)


# ------------------------------------------------------------------------------ the contract


def solve(emissions, transitions, lengths, start, end, **options):
    """The SparseMAP solution with its support and Wolfe gap after each iteration
    (``implementations.solver.SparseMAPOutput``); not differentiable (use ``marginals``).
    ``iterations`` is a Python int when called eagerly, a 0-d integer array under ``jax.jit``."""
    output = _solve_output(emissions, transitions, lengths, start, end, **options)
    if isinstance(output.iterations, jax.core.Tracer):
        return output
    return output._replace(iterations=int(output.iterations))


@partial(jax.jit, static_argnames=_OPTIONS)
def _solve_output(emissions, transitions, lengths, start, end, **options) -> SparseMAPOutput:
    s = _solve(emissions, transitions, lengths, start, end, **options)
    weights = jnp.where(s.active, s.weights, 0.0)
    paths = jnp.where(s.active[..., None], s.paths, -1)
    return SparseMAPOutput(s.unary, s.pairwise, s.value, s.iterations, s.converged, s.errors, paths, weights)


@partial(jax.jit, static_argnames=_OPTIONS)
def marginals(emissions, transitions, lengths, start, end, **options):
    """``u*`` (B, N, T) and ``v*`` (B, N-1, T, T): the support's tag and transition marginals,
    differentiable by Prop. 1 (``v*`` is that of the support found, ``y*`` need not be unique)."""
    start, end = boundary(start, emissions), boundary(end, emissions)
    return _marginals(emissions, transitions, start, end, lengths, _options(**options), transitions.ndim == 2)


@partial(jax.jit, static_argnames=_OPTIONS)
def decode(emissions, transitions, lengths, start, end, **options):
    """The valid sequence with the largest sum of tag marginals ``u*`` (B, N), -1 on padding: the
    Hamming-loss MBR decoding under the constraints (Viterbi on ``u*`` with only the ``-inf``
    pattern of the transitions, start and end). It is the heaviest sequence of the support
    whenever that one carries more than half the mass (its tags are then the per-position argmax),
    and it depends on ``u*`` alone, which is unique, whereas the support's weights are not: atoms
    ``[m_s; n_s]`` can be linearly dependent (two changes at distant positions), so the heaviest
    atom would depend on the solver."""
    unary = _solve(emissions, transitions, lengths, start, end, **options).unary
    return _chain.viterbi(
        unary, forbidden_pattern(transitions), lengths, forbidden_pattern(start), forbidden_pattern(end)
    )[1]


@partial(jax.jit, static_argnames=_OPTIONS)
def log_partition(emissions, transitions, lengths, start, end, **options):
    """The SparseMAP value ``max_y θᵀy − ½‖My‖²`` (B,); its gradient is ``(u*, v*)``."""
    return _value(emissions, transitions, lengths, start, end, **options)


@partial(jax.jit, static_argnames=("cost", *_OPTIONS))
def loss(emissions, transitions, lengths, tags, start, end, *, cost, **options):
    """The SparseMAP Fenchel–Young loss (B,) ``value(η) + ½‖m_ȳ‖² − θ_ȳ``, gradient
    ``[u* − m_ȳ; v* − n_ȳ]``; with ``cost="hamming"`` m-SparseMAP, the value taken at the
    cost-augmented scores ``η_U + 1 − m_ȳ`` (the Hamming distance to the gold is linear in u)."""
    if cost == "hamming":
        gold = jax.nn.one_hot(jnp.maximum(tags, 0), emissions.shape[-1], dtype=emissions.dtype)
        emissions = emissions + (1 - gold)
    value = _value(emissions, transitions, lengths, start, end, **options)
    sizes = lengths.astype(value.dtype)
    return value + 0.5 * sizes - gold_score(emissions, transitions, lengths, tags, start, end)


@partial(jax.jit, static_argnames=_OPTIONS)
def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label loss (B,): ``value(η) − value(η restricted to allowed)``, the SparseMAP
    value over every sequence minus that over the sequences the annotation allows."""
    full = _value(emissions, transitions, lengths, start, end, **options)
    return full - _value(mask_emissions(emissions, allowed), transitions, lengths, start, end, **options)
