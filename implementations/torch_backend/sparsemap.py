"""SparseMAP on the chain (Niculae, Martins, Blondel & Cardie, 2018): a sparse convex combination
of a few tag sequences, found with nothing but Viterbi calls.

``max_{y ∈ Δ} θᵀy − ½‖My‖²`` over distributions ``y`` on tag sequences ``s`` (score ``θ_s``, tag
indicators ``m_s``): only the tag marginals ``u = My`` are penalised, the transition marginals
``v = Ny`` enter through ``θ`` (docs/derivations.md §8). Every solver keeps the support in ``K =
max_support`` slots per sequence (paths (B, K, N), weights (B, K)), so shapes are fixed and the
jax twin jit-compiles; each iteration makes one batched oracle call (``oracle``: sequential
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
it is, a valid distribution over its paths, with ``converged`` False and its gap in ``errors``.

Gradients: ``marginals`` backpropagates by the paper's Prop. 1 on the final support, ``[u; v]``
having Jacobian ``A_I D A_Iᵀ`` with ``D`` the top-left block of the KKT inverse (the active set
carries it; for the Frank–Wolfe supports, which may be affinely dependent, it is the
pseudo-inverse); the value and the losses by Danskin, their gradient being ``(u*, v*)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..solver import SparseMAPOutput
from . import _chain, _tree
from ._scores import boundary, forbidden_pattern, gold_score, mask_emissions

_ORACLES = {"viterbi": _chain.viterbi, "scan": _tree.viterbi}
#: The solvers' precision. The gap is a difference of path scores, tens to hundreds in size: in
#: float32 its rounding error is of the order of the gaps that decide which atom enters, and the
#: active set stops early or cycles. The oracle and the K×K algebra are cheap next to the network
#: that produces the scores, so they run in float64 for every input dtype.
WORKING = torch.float64


class _State(NamedTuple):
    """The solver's iterate, one row per sequence (K slots)."""

    paths: Tensor  # (B, K, N) long: the support's tag sequences, -1 on padding
    active: Tensor  # (B, K) bool: slot holds an atom of the support
    weights: Tensor  # (B, K): y, 0 on inactive slots
    theta: Tensor  # (B, K): θ_s of each slot's path
    gram: Tensor  # (B, K, K): m_kᵀm_l, the positions where two slots' paths agree (stale off the support)
    inverse: Tensor  # (B, K+1, K+1): KKT inverse on the support, identity on inactive slots
    settled: Tensor  # (B,) bool: y solves the relaxed QP on its support (active set)
    candidate: Tensor  # (B, N) long: the oracle's answer at y
    candidate_theta: Tensor  # (B,): its θ
    candidate_slack: Tensor  # (B,): θ_s − m_sᵀu of the oracle's answer (its adjusted score)
    gap: Tensor  # (B,): Wolfe gap at y
    done: Tensor  # (B,) bool: stopped (frozen)
    stalled: Tensor  # (B,) bool: stopped without convergence (support full)


# ------------------------------------------------------------------------------ support algebra


def _onehot(paths: Tensor, num_tags: int, dtype: torch.dtype) -> Tensor:
    """(..., N, T) indicators of ``paths`` (..., N), zero rows where a path is -1."""
    return torch.nn.functional.one_hot(paths.clamp(min=0), num_tags).to(dtype) * (paths >= 0).unsqueeze(-1)


def _unary(paths: Tensor, weights: Tensor, num_tags: int) -> Tensor:
    """``Σ_k weights_k m_k`` (B, N, T): each slot's weight added at its tags (a scatter, not a
    (B, K, N, T) one-hot: the solver asks for it every iteration)."""
    batch, _, length = paths.shape
    source = weights.unsqueeze(-1) * (paths >= 0)  # (B, K, N)
    index = paths.clamp(min=0).transpose(1, 2)  # (B, N, K)
    return weights.new_zeros(batch, length, num_tags).scatter_add(2, index, source.transpose(1, 2))


def _pairwise(paths: Tensor, weights: Tensor, num_tags: int) -> Tensor:
    """``Σ_k weights_k n_k`` (B, N-1, T, T)."""
    onehot = _onehot(paths, num_tags, weights.dtype)
    return torch.einsum("bk,bkns,bknt->bnst", weights, onehot[:, :, :-1], onehot[:, :, 1:])


def _path_sums(paths: Tensor, unary: Tensor, pairwise: Tensor | None = None) -> Tensor:
    """``m_kᵀunary (+ n_kᵀpairwise)`` (B, K): each slot's path read off node (and arc) scores."""
    onehot = _onehot(paths, unary.shape[-1], unary.dtype)
    total = torch.einsum("bknt,bnt->bk", onehot, unary)
    if pairwise is not None:
        total = total + torch.einsum("bkns,bknt,bnst->bk", onehot[:, :, :-1], onehot[:, :, 1:], pairwise)
    return total


def _agreement(paths: Tensor, path: Tensor) -> Tensor:
    """``m_kᵀm_s`` (B, K): the positions where each slot's path agrees with ``path`` (B, N)."""
    return ((paths == path.unsqueeze(1)) & (path.unsqueeze(1) >= 0)).sum(-1)


def _bordered(agreement: Tensor, active: Tensor, like: Tensor) -> Tensor:
    """The KKT column ``[m_Iᵀm_s; 1]`` (B, K+1) of an atom from its ``agreement`` (B, K) with
    each slot, 0 on inactive slots."""
    column = torch.where(active, agreement.to(like.dtype), 0.0)
    return torch.cat([column, like.new_ones(active.shape[0], 1)], dim=1)


def _unit(batch: int, size: int, slot: Tensor, like: Tensor) -> Tensor:
    """(B, size) rows ``e_slot``."""
    return torch.nn.functional.one_hot(slot, size).to(like.dtype).expand(batch, size)


def _remove(inverse: Tensor, slot: Tensor, apply: Tensor) -> Tensor:
    """The KKT inverse without atom ``slot`` (B,), where ``apply``: the Schur update
    ``H − h hᵀ / H_rr``, then row and column ``slot`` reset to the identity's."""
    batch, size, _ = inverse.shape
    column = inverse.gather(2, slot.view(batch, 1, 1).expand(batch, size, 1)).squeeze(-1)  # (B, K+1)
    pivot = column.gather(1, slot.view(batch, 1))  # (B, 1)
    pivot = torch.where(apply.unsqueeze(-1), pivot, 1.0)
    unit = _unit(batch, size, slot, inverse)
    updated = inverse - column.unsqueeze(-1) * column.unsqueeze(-2) / pivot.unsqueeze(-1)
    updated = updated + unit.unsqueeze(-1) * unit.unsqueeze(-2)
    return torch.where(apply.view(batch, 1, 1), updated, inverse)


def _add(inverse: Tensor, slot: Tensor, solved: Tensor, schur: Tensor, apply: Tensor) -> Tensor:
    """The KKT inverse with a new atom in the empty ``slot``, where ``apply``: with ``c = H k``
    (``solved``) and the Schur complement ``σ = ‖m_s‖² − kᵀc``, ``H − e eᵀ + (c − e)(c − e)ᵀ / σ``."""
    batch, size, _ = inverse.shape
    unit = _unit(batch, size, slot, inverse)
    direction = solved - unit
    safe = torch.where(apply, schur, 1.0).view(batch, 1, 1)
    updated = inverse - unit.unsqueeze(-1) * unit.unsqueeze(-2)
    updated = updated + direction.unsqueeze(-1) * direction.unsqueeze(-2) / safe
    return torch.where(apply.view(batch, 1, 1), updated, inverse)


# ------------------------------------------------------------------------------------ solvers


class _Problem(NamedTuple):
    """One batch's scores and the solver's fixed settings."""

    emissions: Tensor  # (B, N, T)
    transitions: Tensor  # (T, T) or (B, N-1, T, T)
    lengths: Tensor  # (B,)
    start: Tensor | None
    end: Tensor | None
    oracle: Any  # (emissions, transitions, lengths, start, end) -> (best score, best path)
    sizes: Tensor  # (B,) ‖m_s‖² = the length, in the scores' dtype
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
    mean_slack = (state.weights * state.theta).sum(-1) - (unary * unary).flatten(1).sum(-1)
    return state._replace(candidate=path, candidate_theta=theta, candidate_slack=best, gap=best - mean_slack)


def _threshold(problem: _Problem, state: _State, conditioning: Tensor | float = 1.0) -> Tensor:
    """(B,) the gap under which a sequence has converged: ``tolerance``, and never under the
    rounding error of the gap, a difference of numbers of the size of the path scores, computed
    from weights solved in a system of condition number ``conditioning``."""
    scale = torch.where(state.active, state.theta.abs(), 0.0).amax(-1) + state.candidate_theta.abs()
    rounding = 256 * torch.finfo(state.weights.dtype).eps * (scale + problem.sizes) * conditioning
    return rounding.clamp(min=problem.tolerance)


def _conditioning(state: _State, sizes: Tensor) -> Tensor:
    """(B,) ``‖A‖∞ ‖A⁻¹‖∞`` of the support's KKT system: how much the solved weights, hence the
    gap, amplify rounding. Without it the active set would chase gaps below what its own
    weights resolve: on a long sentence with 30 nearly dependent atoms the gap stalls near 1e-10,
    atoms keep entering and leaving, and the system degenerates (seen in training)."""
    norm = _system(state, sizes).abs().sum(-1).amax(-1)
    return norm * state.inverse.abs().sum(-1).amax(-1)


def _initial(problem: _Problem, max_support: int) -> _State:
    """The MAP sequence alone, its KKT inverse ``[[0, 1], [1, -n]]``, and the oracle's answer."""
    emissions = problem.emissions
    batch, length, _ = emissions.shape
    _, path = problem.oracle(emissions, problem.transitions, problem.lengths, problem.start, problem.end)
    theta = gold_score(emissions, problem.transitions, problem.lengths, path, problem.start, problem.end)
    first = torch.arange(max_support, device=emissions.device) == 0  # (K,)
    paths = torch.where(first[None, :, None], path.unsqueeze(1), -1)
    inverse = torch.eye(max_support + 1, dtype=emissions.dtype, device=emissions.device).repeat(batch, 1, 1)
    inverse[:, 0, 0] = 0.0
    inverse[:, 0, -1] = inverse[:, -1, 0] = 1.0
    inverse[:, -1, -1] = -problem.sizes
    flags = torch.zeros(batch, dtype=torch.bool, device=emissions.device)
    state = _State(
        paths=paths,
        active=first.expand(batch, -1).clone(),
        weights=first.to(emissions.dtype).expand(batch, -1).clone(),
        theta=torch.where(first, theta.unsqueeze(-1), 0.0),
        gram=torch.where(first & first.unsqueeze(-1), problem.sizes.view(batch, 1, 1), 0.0),
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


def _first(mask: Tensor) -> Tensor:
    """(B,) index of the first True of each row (0 if none)."""
    return mask.to(torch.uint8).argmax(-1)


def _place(state: _State, slot: Tensor, apply: Tensor, weight: Tensor) -> _State:
    """The oracle's answer into ``slot`` with ``weight``, where ``apply``."""
    here = apply.unsqueeze(-1) & (
        torch.arange(state.active.shape[1], device=slot.device) == slot.unsqueeze(-1)
    )
    paths = torch.where(here.unsqueeze(-1), state.candidate.unsqueeze(1), state.paths)
    row = _agreement(paths, state.candidate).to(state.gram.dtype)  # (B, K), the length at slot
    gram = torch.where(here.unsqueeze(-1), row.unsqueeze(1), state.gram)
    return state._replace(
        paths=paths,
        active=state.active | here,
        weights=torch.where(here, weight.unsqueeze(-1), state.weights),
        theta=torch.where(here, state.candidate_theta.unsqueeze(-1), state.theta),
        gram=torch.where(here.unsqueeze(-2), row.unsqueeze(-1), gram),
    )


def _distribution(weights: Tensor, active: Tensor) -> Tensor:
    """``weights`` put back on the simplex (rounding moves their sum by a few ulps per step): the
    reported gap is then the Wolfe gap of a valid distribution, so ``converged`` never lies."""
    weights = torch.where(active, weights.clamp(min=0), 0.0)
    return weights / weights.sum(-1, keepdim=True)


def _active_set_step(problem: _Problem, state: _State) -> _State:
    """One step of the active-set method: the oracle's atom enters where the certificate fails
    at a settled iterate; then the relaxed QP on the support, and a line search toward it."""
    max_support = state.active.shape[1]
    dtype, sizes = state.weights.dtype, problem.sizes
    eps = torch.finfo(dtype).eps
    running = ~state.done
    agreement = _agreement(state.paths, state.candidate)
    duplicate = (state.active & (agreement == problem.lengths.unsqueeze(-1))).any(-1)
    # an atom in the support's affine hull: pivot along the null direction (−c, 1) first; it
    # takes the slot of the atom it pushes out, so only a non-singular entry needs a free slot
    column = _bordered(agreement, state.active, state.weights)
    solved = (state.inverse @ column.unsqueeze(-1)).squeeze(-1)
    schur = sizes - (column * solved).sum(-1)
    dependent = schur <= eps**0.5 * sizes  # nearly dependent: 1/σ would swamp the inverse
    full = state.active.all(-1) & ~dependent
    enter = running & state.settled
    stop = enter & (duplicate | full)
    enter = enter & ~stop
    singular = enter & dependent
    coefficients = solved[:, :max_support]
    blocking = state.active & (coefficients > 1e3 * eps)
    ratios = torch.where(blocking, state.weights / torch.where(blocking, coefficients, 1.0), torch.inf)
    step, leaving = ratios.min(-1)
    step = torch.where(singular, step, 0.0)
    pivoted = (state.weights - step.unsqueeze(-1) * torch.where(state.active, coefficients, 0.0)).clamp(min=0)
    gone = singular.unsqueeze(-1) & (
        torch.arange(max_support, device=leaving.device) == leaving.unsqueeze(-1)
    )
    state = state._replace(
        weights=torch.where(gone, 0.0, torch.where(singular.unsqueeze(-1), pivoted, state.weights)),
        active=state.active & ~gone,
        inverse=_remove(state.inverse, leaving, singular),
    )
    slot = torch.where(singular, leaving, _first(~state.active))
    column = _bordered(_agreement(state.paths, state.candidate), state.active, state.weights)
    solved = (state.inverse @ column.unsqueeze(-1)).squeeze(-1)
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
    ratios = torch.where(negative, state.weights / torch.where(negative, shrink, 1.0), torch.inf)
    step, leaving = ratios.min(-1)
    step = torch.where(feasible, 1.0, step.clamp(max=1.0))
    moved = (state.weights + step.unsqueeze(-1) * (relaxed - state.weights)).clamp(min=0)
    drop = move & ~feasible
    gone = drop.unsqueeze(-1) & (torch.arange(max_support, device=leaving.device) == leaving.unsqueeze(-1))
    state = state._replace(
        weights=torch.where(gone | ~state.active, 0.0, torch.where(move.unsqueeze(-1), moved, state.weights)),
        active=state.active & ~gone,
        inverse=_remove(state.inverse, leaving, drop),
        settled=torch.where(move, feasible, state.settled),
    )
    state = state._replace(weights=_distribution(state.weights, state.active))
    state = _ask(problem, state)
    converged = state.settled & (state.gap <= _threshold(problem, state, _conditioning(state, sizes)))
    return state._replace(done=state.done | stop | converged, stalled=state.stalled | (stop & ~duplicate))


def _frank_wolfe_step(problem: _Problem, state: _State, variant: str) -> _State:
    """One Frank–Wolfe step (``fw``, ``away-fw`` or ``pairwise-fw``) with exact line search."""
    batch, max_support = state.active.shape
    num_tags, sizes = problem.emissions.shape[-1], problem.sizes
    slots = torch.arange(max_support, device=state.active.device)
    running = ~state.done
    unary = _unary(state.paths, state.weights, num_tags)
    slack = state.theta - _path_sums(state.paths, unary)  # (B, K) θ_k − m_kᵀu
    worst_slack, worst = torch.where(state.active, slack, torch.inf).min(-1)
    worst_weight = state.weights.gather(1, worst.unsqueeze(-1)).squeeze(-1)
    mean_slack = (state.weights * slack).sum(-1)
    forward_gap, away_gap = state.candidate_slack - mean_slack, mean_slack - worst_slack
    square = (unary * unary).flatten(1).sum(-1)
    agreement = _agreement(state.paths, state.candidate)
    same = state.active & (agreement == problem.lengths.unsqueeze(-1))
    existing = same.any(-1)
    slot = torch.where(existing, _first(same), _first(~state.active))
    if variant == "pairwise-fw":
        worst_agreement = agreement.gather(1, worst.unsqueeze(-1)).squeeze(-1).to(sizes.dtype)
        numerator, denominator = forward_gap + away_gap, 2 * (sizes - worst_agreement)
        cap, forward = worst_weight, torch.ones_like(running)
    else:
        forward = (forward_gap >= away_gap) if variant == "away-fw" else torch.ones_like(running)
        candidate_dot = state.candidate_theta - state.candidate_slack  # m_sᵀu
        worst_dot = state.theta.gather(1, worst.unsqueeze(-1)).squeeze(-1) - worst_slack  # m_wᵀu
        numerator = torch.where(forward, forward_gap, away_gap)
        denominator = sizes + square - 2 * torch.where(forward, candidate_dot, worst_dot)
        away_cap = worst_weight / (1 - worst_weight).clamp(min=torch.finfo(sizes.dtype).tiny)
        cap = torch.where(forward, 1.0, away_cap)
    positive = denominator > 0
    step = torch.where(positive, numerator / torch.where(positive, denominator, 1.0), torch.inf)
    step = torch.minimum(step.clamp(min=0), cap)
    step = torch.where(numerator > 0, step, 0.0)
    enters = running & (forward | (variant == "pairwise-fw")) & (step > 0)
    stop = enters & ~existing & state.active.all(-1)
    move = running & ~stop
    into = slots == slot.unsqueeze(-1)
    out_of = slots == worst.unsqueeze(-1)
    gain = step.unsqueeze(-1)
    if variant == "pairwise-fw":
        weights = state.weights + gain * (into.to(gain.dtype) - out_of.to(gain.dtype))
        emptied = out_of & (step >= cap).unsqueeze(-1)
    else:
        toward = (1 - gain) * state.weights + gain * into.to(gain.dtype)
        away = (1 + gain) * state.weights - gain * out_of.to(gain.dtype)
        weights = torch.where(forward.unsqueeze(-1), toward, away)
        emptied = ~forward.unsqueeze(-1) & out_of & (step >= cap).unsqueeze(-1)
    weights = torch.where(emptied, 0.0, weights).clamp(min=0)
    state = _place(state, slot, move & enters & ~existing, step)
    weights = torch.where(move.unsqueeze(-1), torch.where(state.active, weights, 0.0), state.weights)
    state = state._replace(weights=weights, active=state.active & (weights > 0))
    state = _ask(problem, state)
    converged = state.gap <= _threshold(problem, state)
    return state._replace(done=state.done | stop | converged, stalled=state.stalled | stop)


def _system(state: _State, sizes: Tensor) -> Tensor:
    """The bordered KKT matrix ``[[G_I, 1], [1ᵀ, 0]]`` of the support (B, K+1, K+1), exact (the
    Gram entries count agreeing positions), identity on inactive slots."""
    batch, max_support = state.active.shape
    gram = state.gram
    both = state.active.unsqueeze(-1) & state.active.unsqueeze(-2)
    eye = torch.eye(max_support, dtype=sizes.dtype, device=sizes.device)
    gram = torch.where(both, gram, eye)
    border = state.active.to(sizes.dtype).unsqueeze(-1)
    return torch.cat(
        [torch.cat([gram, border], 2), torch.cat([border.transpose(1, 2), sizes.new_zeros(batch, 1, 1)], 2)],
        1,
    )


def _refined(inverse: Tensor, system: Tensor) -> Tensor:
    """The KKT inverse after one Newton–Schulz step ``H + H (I − A H)`` against the exact system
    ``A``: the O(K²) updates lose digits on the ill-conditioned systems of long sentences (paths
    that differ in a few positions), and the step squares the residual ``I − A H``."""
    residual = -(system @ inverse)
    residual.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return inverse + inverse @ residual


def _relaxed(state: _State, system: Tensor) -> Tensor:
    """(B, K) the weights solving the relaxed QP on the support (Eq. 9), ``[w; τ] = A⁻¹ [θ; 1]``,
    0 on inactive slots: the inverse applied, then one step of iterative refinement against the
    exact system. The inverse's own rounding leaves a residual of order κ·eps·‖θ‖ (5e-10 on a
    64-token sentence with 44 atoms, κ ≈ 3e4), which the two backends round differently; the step
    leaves one of order eps·‖θ‖, so u* is the support's to rounding, in either backend."""
    max_support = state.active.shape[1]
    right = torch.cat([torch.where(state.active, state.theta, 0.0), torch.ones_like(state.theta[:, :1])], 1)
    solution = state.inverse @ right.unsqueeze(-1)
    solution = solution + state.inverse @ (right.unsqueeze(-1) - system @ solution)
    return torch.where(state.active, solution[:, :max_support, 0], 0.0)


def _gram_inverse(state: _State, sizes: Tensor) -> Tensor:
    """The KKT inverse on a Frank–Wolfe support, recomputed (a pseudo-inverse: such a support may
    be affinely dependent), identity on inactive slots."""
    return torch.linalg.pinv(_system(state, sizes), hermitian=True)


class _Solution(NamedTuple):
    """A finished solve, detached: the support and what it gives."""

    paths: Tensor  # (B, K, N)
    weights: Tensor  # (B, K)
    active: Tensor  # (B, K)
    inverse: Tensor  # (B, K+1, K+1) KKT inverse on the support (the backward pass's), float64
    unary: Tensor  # (B, N, T) u*
    pairwise: Tensor  # (B, N-1, T, T) v*
    value: Tensor  # (B,) θᵀy* − ½‖u*‖²
    iterations: int
    converged: Tensor  # (B,)
    errors: Tensor  # (iterations, B)


def _solve(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    start: Tensor | None,
    end: Tensor | None,
    *,
    solver: str,
    iterations: int,
    tolerance: float | None,
    max_support: int,
    oracle: str,
) -> _Solution:
    """Run ``solver`` to convergence (or its limits) on detached scores, in float64 whatever the
    scores' dtype (:data:`WORKING`); the marginals, value and gaps come back in the scores' dtype."""
    dtype = emissions.dtype
    with torch.no_grad():
        emissions, transitions = emissions.detach().to(WORKING), transitions.detach().to(WORKING)
        start = None if start is None else start.detach().to(WORKING)
        end = None if end is None else end.detach().to(WORKING)
        sizes = lengths.to(WORKING)
        problem = _Problem(
            emissions, transitions, lengths, start, end, _ORACLES[oracle], sizes, tolerance or 0.0
        )
        state = _initial(problem, max_support)
        errors = emissions.new_full((iterations, emissions.shape[0]), torch.nan)
        run = 0
        for k in range(iterations):
            if solver == "active-set":
                new = _active_set_step(problem, state)
            else:
                new = _frank_wolfe_step(problem, state, solver)
            state = _advance(state, new)
            errors[k] = state.gap.clamp(min=0)
            run = k + 1
            if bool(state.done.all()):
                break
        num_tags = emissions.shape[-1]
        unary = _unary(state.paths, state.weights, num_tags)
        pairwise = _pairwise(state.paths, state.weights, num_tags)
        value = (state.weights * state.theta).sum(-1) - 0.5 * (unary * unary).flatten(1).sum(-1)
        inverse = state.inverse if solver == "active-set" else _gram_inverse(state, sizes)
        converged = state.done & ~state.stalled
        return _Solution(
            state.paths,
            state.weights.to(dtype),
            state.active,
            inverse,
            unary.to(dtype),
            pairwise.to(dtype),
            value.to(dtype),
            run,
            converged,
            errors.to(dtype),
        )


def _advance(state: _State, new: _State) -> _State:
    """``new`` on the running rows; a running row whose step went non-finite keeps its iterate (a
    valid distribution) and stops unconverged: a safeguard, the contract promises no NaN. Rows
    already stopped stay as they are, whatever the step computed for them."""
    finite = torch.isfinite(new.gap) & torch.isfinite(new.weights).all(-1)
    broken = ~state.done & ~(finite & torch.isfinite(new.inverse).flatten(1).all(-1))
    keep = state.done | broken
    state = _State(*(torch.where(_rows(keep, a), a, b) for a, b in zip(state, new, strict=True)))
    return state._replace(done=state.done | broken, stalled=state.stalled | broken)


def _rows(done: Tensor, like: Tensor) -> Tensor:
    """``done`` (B,) shaped to broadcast against ``like`` (B, ...)."""
    return done.view((-1,) + (1,) * (like.ndim - 1))


# ------------------------------------------------------------------------------ differentiation


def _last(unary: Tensor, lengths: Tensor) -> Tensor:
    """(B, T) each sequence's last row."""
    return unary.gather(1, (lengths - 1)[:, None, None].expand(-1, 1, unary.shape[-1])).squeeze(1)


def _score_gradients(unary: Tensor, pairwise: Tensor, lengths: Tensor, shared: bool) -> tuple[Tensor, ...]:
    """Gradients w.r.t. (emissions, transitions, start, end) of ``Σ_b <[unary; pairwise], a_b>``
    where every sequence's scores ``a`` are read through the tag and arc indicators."""
    transitions = pairwise.sum((0, 1)) if shared else pairwise
    return unary, transitions, unary[:, 0].sum(0), _last(unary, lengths).sum(0)


class _Marginals(torch.autograd.Function):
    """``(u*, v*)`` with the backward pass of Prop. 1: for an upstream ``(g_u, g_v)``,
    ``h_k = m_kᵀg_u + n_kᵀg_v`` on the support, ``r = D h`` with ``D`` the top-left block of the
    KKT inverse, and the gradient w.r.t. the scores is ``Σ_k r_k a_k``. The backward is linear in
    ``(g_u, g_v)`` with the support held fixed, so it differentiates again (to 0 in the scores,
    the Jacobian being piecewise constant)."""

    @staticmethod
    def forward(ctx, emissions, transitions, start, end, lengths, options):  # type: ignore[override]
        solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
        ctx.save_for_backward(solution.paths, solution.active, solution.inverse, lengths)
        ctx.shared = transitions.ndim == 2
        return solution.unary, solution.pairwise

    @staticmethod
    def backward(ctx, grad_unary, grad_pairwise):  # type: ignore[override]
        paths, active, inverse, lengths = ctx.saved_tensors
        max_support, num_tags = active.shape[1], grad_unary.shape[-1]
        along = torch.where(active, _path_sums(paths, grad_unary, grad_pairwise), 0.0).to(inverse.dtype)
        direction = torch.where(
            active, (inverse[:, :max_support, :max_support] @ along.unsqueeze(-1))[..., 0], 0.0
        ).to(grad_unary.dtype)
        unary, pairwise = _unary(paths, direction, num_tags), _pairwise(paths, direction, num_tags)
        return *_score_gradients(unary, pairwise, lengths, ctx.shared), None, None


class _Value(torch.autograd.Function):
    """The SparseMAP value ``θᵀy* − ½‖u*‖²`` (B,) with Danskin's gradient ``(u*, v*)``; a backward
    that must itself be differentiable (``create_graph=True``) takes ``(u*, v*)`` from
    :class:`_Marginals`, so the second derivative is Prop. 1's Jacobian."""

    @staticmethod
    def forward(ctx, emissions, transitions, start, end, lengths, options):  # type: ignore[override]
        solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
        ctx.save_for_backward(emissions, transitions, start, end, lengths, solution.unary, solution.pairwise)
        ctx.options = options
        return solution.value

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        emissions, transitions, start, end, lengths, unary, pairwise = ctx.saved_tensors
        if torch.is_grad_enabled():
            unary, pairwise = _Marginals.apply(emissions, transitions, start, end, lengths, ctx.options)
        unary = grad[:, None, None] * unary
        pairwise = grad[:, None, None, None] * pairwise
        return *_score_gradients(unary, pairwise, lengths, transitions.ndim == 2), None, None


def _options(**options: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items()))


def _value(emissions, transitions, lengths, start, end, **options) -> Tensor:
    start, end = boundary(start, emissions), boundary(end, emissions)
    return _Value.apply(emissions, transitions, start, end, lengths, _options(**options))


# ------------------------------------------------------------------------------ the contract


def solve(emissions, transitions, lengths, start, end, **options):
    """The SparseMAP solution with its support and Wolfe gap after each iteration
    (``implementations.solver.SparseMAPOutput``); not differentiable (use ``marginals``)."""
    s = _solve(emissions, transitions, lengths, start, end, **options)
    weights = torch.where(s.active, s.weights, 0.0)
    paths = torch.where(s.active.unsqueeze(-1), s.paths, -1)
    return SparseMAPOutput(s.unary, s.pairwise, s.value, s.iterations, s.converged, s.errors, paths, weights)


def marginals(emissions, transitions, lengths, start, end, **options):
    """``u*`` (B, N, T) and ``v*`` (B, N-1, T, T): the support's tag and transition marginals,
    differentiable by Prop. 1 (``v*`` is that of the support found, ``y*`` need not be unique)."""
    start, end = boundary(start, emissions), boundary(end, emissions)
    return _Marginals.apply(emissions, transitions, start, end, lengths, _options(**options))


def decode(emissions, transitions, lengths, start, end, **options):
    """The valid sequence with the largest sum of tag marginals ``u*`` (B, N), -1 on padding: the
    Hamming-loss MBR decoding under the constraints (Viterbi on ``u*`` with only the ``-inf``
    pattern of the transitions, start and end). It is the heaviest sequence of the support
    whenever that one carries more than half the mass (its tags are then the per-position argmax),
    and it depends on ``u*`` alone, which is unique, whereas the support's weights are not: atoms
    ``[m_s; n_s]`` can be linearly dependent (two changes at distant positions), so the heaviest
    atom would depend on the solver."""
    with torch.no_grad():
        unary = _solve(emissions, transitions, lengths, start, end, **options).unary
    return _chain.viterbi(
        unary, forbidden_pattern(transitions), lengths, forbidden_pattern(start), forbidden_pattern(end)
    )[1]


def log_partition(emissions, transitions, lengths, start, end, **options):
    """The SparseMAP value ``max_y θᵀy − ½‖My‖²`` (B,); its gradient is ``(u*, v*)``."""
    return _value(emissions, transitions, lengths, start, end, **options)


def loss(emissions, transitions, lengths, tags, start, end, *, cost, **options):
    """The SparseMAP Fenchel–Young loss (B,) ``value(η) + ½‖m_ȳ‖² − θ_ȳ``, gradient
    ``[u* − m_ȳ; v* − n_ȳ]``; with ``cost="hamming"`` m-SparseMAP, the value taken at the
    cost-augmented scores ``η_U + 1 − m_ȳ`` (the Hamming distance to the gold is linear in u)."""
    if cost == "hamming":
        gold = torch.nn.functional.one_hot(tags.clamp(min=0), emissions.shape[-1]).to(emissions.dtype)
        emissions = emissions + (1 - gold)
    value = _value(emissions, transitions, lengths, start, end, **options)
    sizes = lengths.to(value.dtype)
    return value + 0.5 * sizes - gold_score(emissions, transitions, lengths, tags, start, end)


def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label loss (B,): ``value(η) − value(η restricted to allowed)``, the SparseMAP
    value over every sequence minus that over the sequences the annotation allows."""
    full = _value(emissions, transitions, lengths, start, end, **options)
    return full - _value(mask_emissions(emissions, allowed), transitions, lengths, start, end, **options)
