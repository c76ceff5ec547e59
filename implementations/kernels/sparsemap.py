"""SparseMAP on the chain (Niculae, Martins, Blondel & Cardie, 2018): a sparse convex combination
of a few tag sequences, found with nothing but Viterbi calls. The solvers' steps, written once for
both frameworks through the ops namespace; each backend's ``sparsemap.py`` runs the iterations
(a Python loop in torch, a ``lax.while_loop`` in jax) and attaches the gradients.

``max_{y ∈ Δ} θᵀy − ½‖My‖²`` over distributions ``y`` on tag sequences ``s`` (score ``θ_s``, tag
indicators ``m_s``): only the tag marginals ``u = My`` are penalised, the transition marginals
``v = Ny`` enter through ``θ`` (docs/derivations.md §8). Every solver keeps the support in ``K =
max_support`` slots per sequence (paths (B, K, N), weights (B, K)), so shapes are fixed and the
jax backend jit-compiles; each iteration makes one batched oracle call (``oracle``: sequential
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
pseudo-inverse); the value and the losses by Danskin, their gradient being ``(u*, v*)``
(:func:`marginals_gradients`, :func:`danskin_gradients`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .. import ops
from ..solver import SparseMAPOutput
from . import sparsemap_algebra as algebra


class Problem(NamedTuple):
    """One batch's scores, held constant in the working dtype, and the solver's fixed settings.

    The solvers see a structure only through ``oracle`` and ``score`` and through its atoms as
    ``paths`` (one "tag" per position, -1 where none): any structure whose indicator vector is a
    one-hot per position fits, the penalty ``½‖u‖²`` falling on all of it. The chain passes its
    tags; ``tree-sparsemap`` passes each word's head (``kernels/tree_sparsemap.py``), with
    ``transitions`` None, so there is no ``pairwise``."""

    emissions: Any  # (B, N, T)
    transitions: Any  # (T, T) or (B, N-1, T, T); None for a structure without them (trees)
    lengths: Any  # (B,)
    start: Any | None
    end: Any | None
    oracle: Callable[..., Any]  # (emissions, transitions, lengths, start, end) -> (best score, best path)
    score: Callable[..., Any]  # (emissions, transitions, lengths, path, start, end) -> θ of path
    sizes: Any  # (B,) ‖m_s‖² = the length, in the scores' dtype
    tolerance: float  # gap at which a sequence stops (0: rounding only)


class State(NamedTuple):
    """The solver's iterate, one row per sequence (K slots)."""

    paths: Any  # (B, K, N) integer: the support's tag sequences, -1 on padding
    active: Any  # (B, K) bool: slot holds an atom of the support
    weights: Any  # (B, K): y, 0 on inactive slots
    theta: Any  # (B, K): θ_s of each slot's path
    gram: Any  # (B, K, K): m_kᵀm_l, the positions where two slots' paths agree (stale off the support)
    inverse: Any  # (B, K+1, K+1): KKT inverse on the support, identity on inactive slots
    settled: Any  # (B,) bool: y solves the relaxed QP on its support (active set)
    candidate: Any  # (B, N) integer: the oracle's answer at y
    candidate_theta: Any  # (B,): its θ
    candidate_slack: Any  # (B,): θ_s − m_sᵀu of the oracle's answer (its adjusted score)
    gap: Any  # (B,): Wolfe gap at y
    done: Any  # (B,) bool: stopped (frozen)
    stalled: Any  # (B,) bool: stopped without convergence (support full)


class Solution(NamedTuple):
    """A finished solve, held constant: the support and what it gives."""

    paths: Any  # (B, K, N)
    weights: Any  # (B, K)
    active: Any  # (B, K)
    inverse: Any  # (B, K+1, K+1) KKT inverse on the support (the backward pass's), working dtype
    unary: Any  # (B, N, T) u*
    pairwise: Any  # (B, N-1, T, T) v*; None without transitions
    value: Any  # (B,) θᵀy* − ½‖u*‖²
    iterations: Any  # a Python int (torch) or a 0-d integer array (jax)
    converged: Any  # (B,)
    errors: Any  # (iterations, B)


def problem(
    emissions: Any,
    transitions: Any,
    lengths: Any,
    start: Any | None,
    end: Any | None,
    *,
    oracle: Callable[..., Any],
    score: Callable[..., Any],
    working: Any,
    tolerance: float | None,
) -> Problem:
    """The scores held constant (no gradient flows through the solver) in the ``working`` dtype."""
    o = ops.of(emissions)

    def held(x: Any) -> Any:
        return None if x is None else o.astype(o.stop_gradient(x), working)

    sizes = o.astype(lengths, working)
    return Problem(
        held(emissions),
        held(transitions),
        lengths,
        held(start),
        held(end),
        oracle,
        score,
        sizes,
        tolerance or 0.0,
    )


def _ask(problem: Problem, state: State) -> State:
    """The oracle at the iterate: the best sequence under ``emissions − u`` and the Wolfe gap."""
    num_tags = problem.emissions.shape[-1]
    unary = algebra.unary(state.paths, state.weights, num_tags)
    best, path = problem.oracle(
        problem.emissions - unary, problem.transitions, problem.lengths, problem.start, problem.end
    )
    theta = problem.score(
        problem.emissions, problem.transitions, problem.lengths, path, problem.start, problem.end
    )
    mean_slack = (state.weights * state.theta).sum(-1) - (unary * unary).sum((1, 2))
    return state._replace(candidate=path, candidate_theta=theta, candidate_slack=best, gap=best - mean_slack)


def _threshold(problem: Problem, state: State, conditioning: Any = 1.0) -> Any:
    """(B,) the gap under which a sequence has converged: ``tolerance``, and never under the
    rounding error of the gap, a difference of numbers of the size of the path scores, computed
    from weights solved in a system of condition number ``conditioning``."""
    o = ops.of(state.weights)
    scale = o.amax(o.where(state.active, o.abs(state.theta), 0.0), -1) + o.abs(state.candidate_theta)
    rounding = 256 * o.finfo(state.weights.dtype).eps * (scale + problem.sizes) * conditioning
    return o.maximum(rounding, problem.tolerance)


def initial(problem: Problem, max_support: int) -> State:
    """The MAP sequence alone, its KKT inverse ``[[0, 1], [1, -n]]``, and the oracle's answer."""
    emissions = problem.emissions
    o = ops.of(emissions)
    batch = emissions.shape[0]
    _, path = problem.oracle(emissions, problem.transitions, problem.lengths, problem.start, problem.end)
    theta = problem.score(emissions, problem.transitions, problem.lengths, path, problem.start, problem.end)
    first = o.arange(max_support, emissions) == 0  # (K,)
    flags = o.zeros((batch,), emissions, o.bool_)
    state = State(
        paths=o.where(first[None, :, None], path[:, None], -1),
        active=o.broadcast_to(first, (batch, max_support)),
        weights=o.broadcast_to(o.astype(first, emissions.dtype), (batch, max_support)),
        theta=o.where(first, theta[:, None], 0.0),
        gram=o.where(first & first[:, None], problem.sizes[:, None, None], 0.0),
        inverse=algebra.initial_inverse(problem.sizes, max_support),
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


def _place(state: State, slot: Any, apply: Any, weight: Any) -> State:
    """The oracle's answer into ``slot`` with ``weight``, where ``apply``."""
    o = ops.of(state.weights)
    here = apply[:, None] & (o.arange(state.active.shape[1], slot) == slot[:, None])
    paths = o.where(here[..., None], state.candidate[:, None], state.paths)
    row = o.astype(algebra.agreement(paths, state.candidate), state.gram.dtype)  # (B, K), the length at slot
    gram = o.where(here[:, :, None], row[:, None, :], state.gram)
    return state._replace(
        paths=paths,
        active=state.active | here,
        weights=o.where(here, weight[:, None], state.weights),
        theta=o.where(here, state.candidate_theta[:, None], state.theta),
        gram=o.where(here[:, None, :], row[:, :, None], gram),
    )


def _distribution(weights: Any, active: Any) -> Any:
    """``weights`` put back on the simplex (rounding moves their sum by a few ulps per step): the
    reported gap is then the Wolfe gap of a valid distribution, so ``converged`` never lies."""
    o = ops.of(weights)
    weights = o.where(active, o.maximum(weights, 0), 0.0)
    return weights / weights.sum(-1)[..., None]


def _active_set_step(problem: Problem, state: State) -> State:
    """One step of the active-set method: the oracle's atom enters where the certificate fails
    at a settled iterate; then the relaxed QP on the support, and a line search toward it."""
    o = ops.of(state.weights)
    max_support = state.active.shape[1]
    slots = o.arange(max_support, state.paths)
    sizes = problem.sizes
    eps = o.finfo(state.weights.dtype).eps
    running = ~state.done
    agreement = algebra.agreement(state.paths, state.candidate)
    duplicate = (state.active & (agreement == problem.lengths[:, None])).any(-1)
    # an atom in the support's affine hull: pivot along the null direction (−c, 1) first; it
    # takes the slot of the atom it pushes out, so only a non-singular entry needs a free slot
    column = algebra.bordered(agreement, state.active, state.weights)
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
    ratios = o.where(blocking, state.weights / o.where(blocking, coefficients, 1.0), o.inf)
    step, leaving = o.min_and_argmin(ratios, -1)
    step = o.where(singular, step, 0.0)
    pivoted = o.maximum(state.weights - step[:, None] * o.where(state.active, coefficients, 0.0), 0)
    gone = singular[:, None] & (slots == leaving[:, None])
    state = state._replace(
        weights=o.where(gone, 0.0, o.where(singular[:, None], pivoted, state.weights)),
        active=state.active & ~gone,
        inverse=algebra.remove(state.inverse, leaving, singular),
    )
    slot = o.where(singular, leaving, algebra.first(~state.active))
    column = algebra.bordered(algebra.agreement(state.paths, state.candidate), state.active, state.weights)
    solved = (state.inverse @ column[..., None])[..., 0]
    schur = sizes - (column * solved).sum(-1)
    inverse = algebra.add(state.inverse, slot, solved, schur, enter)
    state = _place(state, slot, enter, step)._replace(inverse=inverse)
    # the relaxed QP on the support (Eq. 9), then the line search toward its solution (Eq. 10)
    system = algebra.system(state.active, state.gram, sizes)  # exact, with the entering atom
    state = state._replace(inverse=algebra.refined(state.inverse, system))
    move = running & ~stop
    relaxed = algebra.relaxed(state.active, state.theta, state.inverse, system)
    negative = state.active & (relaxed < -1e3 * eps)
    feasible = ~negative.any(-1)
    shrink = state.weights - relaxed
    ratios = o.where(negative, state.weights / o.where(negative, shrink, 1.0), o.inf)
    step, leaving = o.min_and_argmin(ratios, -1)
    step = o.where(feasible, 1.0, o.minimum(step, 1.0))
    moved = o.maximum(state.weights + step[:, None] * (relaxed - state.weights), 0)
    drop = move & ~feasible
    gone = drop[:, None] & (slots == leaving[:, None])
    state = state._replace(
        weights=o.where(gone | ~state.active, 0.0, o.where(move[:, None], moved, state.weights)),
        active=state.active & ~gone,
        inverse=algebra.remove(state.inverse, leaving, drop),
        settled=o.where(move, feasible, state.settled),
    )
    state = state._replace(weights=_distribution(state.weights, state.active))
    state = _ask(problem, state)
    system = algebra.system(state.active, state.gram, sizes)
    converged = state.settled & (
        state.gap <= _threshold(problem, state, algebra.conditioning(system, state.inverse))
    )
    return state._replace(done=state.done | stop | converged, stalled=state.stalled | (stop & ~duplicate))


def _frank_wolfe_step(problem: Problem, state: State, variant: str) -> State:
    """One Frank–Wolfe step (``fw``, ``away-fw`` or ``pairwise-fw``) with exact line search."""
    o = ops.of(state.weights)
    max_support = state.active.shape[1]
    num_tags, sizes = problem.emissions.shape[-1], problem.sizes
    slots = o.arange(max_support, state.paths)
    running = ~state.done
    unary = algebra.unary(state.paths, state.weights, num_tags)
    slack = state.theta - algebra.path_sums(state.paths, unary)  # (B, K) θ_k − m_kᵀu
    worst_slack, worst = o.min_and_argmin(o.where(state.active, slack, o.inf), -1)
    worst_weight = o.take_along_axis(state.weights, worst[:, None], 1)[:, 0]
    mean_slack = (state.weights * slack).sum(-1)
    forward_gap, away_gap = state.candidate_slack - mean_slack, mean_slack - worst_slack
    square = (unary * unary).sum((1, 2))
    agreement = algebra.agreement(state.paths, state.candidate)
    same = state.active & (agreement == problem.lengths[:, None])
    existing = same.any(-1)
    slot = o.where(existing, algebra.first(same), algebra.first(~state.active))
    always = o.ones(running.shape, running)
    if variant == "pairwise-fw":
        worst_agreement = o.astype(o.take_along_axis(agreement, worst[:, None], 1)[:, 0], sizes.dtype)
        numerator, denominator = forward_gap + away_gap, 2 * (sizes - worst_agreement)
        cap, forward = worst_weight, always
    else:
        forward = (forward_gap >= away_gap) if variant == "away-fw" else always
        candidate_dot = state.candidate_theta - state.candidate_slack  # m_sᵀu
        worst_dot = o.take_along_axis(state.theta, worst[:, None], 1)[:, 0] - worst_slack  # m_wᵀu
        numerator = o.where(forward, forward_gap, away_gap)
        denominator = sizes + square - 2 * o.where(forward, candidate_dot, worst_dot)
        away_cap = worst_weight / o.maximum(1 - worst_weight, o.finfo(sizes.dtype).tiny)
        cap = o.where(forward, 1.0, away_cap)
    positive = denominator > 0
    step = o.where(positive, numerator / o.where(positive, denominator, 1.0), o.inf)
    step = o.minimum(o.maximum(step, 0), cap)
    step = o.where(numerator > 0, step, 0.0)
    enters = running & (forward | (variant == "pairwise-fw")) & (step > 0)
    stop = enters & ~existing & state.active.all(-1)
    move = running & ~stop
    into = o.astype(slots == slot[:, None], step.dtype)
    out_of = slots == worst[:, None]
    gain = step[:, None]
    if variant == "pairwise-fw":
        weights = state.weights + gain * (into - o.astype(out_of, step.dtype))
        emptied = out_of & (step >= cap)[:, None]
    else:
        toward = (1 - gain) * state.weights + gain * into
        away = (1 + gain) * state.weights - gain * o.astype(out_of, step.dtype)
        weights = o.where(forward[:, None], toward, away)
        emptied = ~forward[:, None] & out_of & (step >= cap)[:, None]
    weights = o.maximum(o.where(emptied, 0.0, weights), 0)
    state = _place(state, slot, move & enters & ~existing, step)
    weights = o.where(move[:, None], o.where(state.active, weights, 0.0), state.weights)
    state = state._replace(weights=weights, active=state.active & (weights > 0))
    state = _ask(problem, state)
    converged = state.gap <= _threshold(problem, state)
    return state._replace(done=state.done | stop | converged, stalled=state.stalled | stop)


def iterate(problem: Problem, state: State, solver: str) -> State:
    """One iteration of ``solver`` on the running rows (:func:`_advance`)."""
    if solver == "active-set":
        return _advance(state, _active_set_step(problem, state))
    return _advance(state, _frank_wolfe_step(problem, state, solver))


def _advance(state: State, new: State) -> State:
    """``new`` on the running rows; a running row whose step went non-finite keeps its iterate (a
    valid distribution) and stops unconverged: a safeguard, the contract promises no NaN. Rows
    already stopped stay as they are, whatever the step computed for them."""
    o = ops.of(state.weights)
    finite = o.isfinite(new.gap) & o.isfinite(new.weights).all(-1)
    broken = ~state.done & ~(finite & o.isfinite(new.inverse).all(-1).all(-1))
    keep = state.done | broken
    state = State(*(o.where(_rows(keep, a), a, b) for a, b in zip(state, new, strict=True)))
    return state._replace(done=state.done | broken, stalled=state.stalled | broken)


def _rows(done: Any, like: Any) -> Any:
    """``done`` (B,) shaped to broadcast against ``like`` (B, ...)."""
    return done.reshape((-1,) + (1,) * (like.ndim - 1))


def objective(state: State, unary: Any) -> Any:
    """(B,) ``θᵀy − ½‖u‖²`` of the iterate ``state``, whose tag marginals are ``unary`` (the
    SparseMAP value once it has converged): what a trace of the solver records per iteration."""
    return (state.weights * state.theta).sum(-1) - 0.5 * (unary * unary).sum((1, 2))


def finish(problem: Problem, state: State, solver: str, iterations: Any, errors: Any, dtype: Any) -> Solution:
    """The solution at the last iterate: u*, v* and the value from the support, the KKT inverse
    the backward pass needs (recomputed, a pseudo-inverse, on a Frank–Wolfe support, which may be
    affinely dependent), and everything but the support and inverse in the scores' ``dtype``."""
    o = ops.of(state.weights)
    num_tags = problem.emissions.shape[-1]
    unary = algebra.unary(state.paths, state.weights, num_tags)
    pairwise = None
    if problem.transitions is not None:
        pairwise = o.astype(algebra.pairwise(state.paths, state.weights, num_tags), dtype)
    value = objective(state, unary)
    if solver == "active-set":
        inverse = state.inverse
    else:
        inverse = o.pinv(algebra.system(state.active, state.gram, problem.sizes), hermitian=True)
    return Solution(
        state.paths,
        o.astype(state.weights, dtype),
        state.active,
        inverse,
        o.astype(unary, dtype),
        pairwise,
        o.astype(value, dtype),
        iterations,
        state.done & ~state.stalled,
        o.astype(errors, dtype),
    )


def output(solution: Solution) -> SparseMAPOutput:
    """The contract's ``solve`` output: the support's paths and weights, -1 and 0 off it."""
    o = ops.of(solution.weights)
    s = solution
    weights = o.where(s.active, s.weights, 0.0)
    paths = o.where(s.active[..., None], s.paths, -1)
    return SparseMAPOutput(s.unary, s.pairwise, s.value, s.iterations, s.converged, s.errors, paths, weights)


# ------------------------------------------------------------------------------ differentiation


def _last(unary: Any, lengths: Any) -> Any:
    """(B, T) each sequence's last row."""
    o = ops.of(unary)
    index = o.broadcast_to((lengths - 1)[:, None, None], (unary.shape[0], 1, unary.shape[-1]))
    return o.take_along_axis(unary, index, 1)[:, 0]


def _score_gradients(unary: Any, pairwise: Any, lengths: Any, shared: bool) -> tuple[Any, ...]:
    """Gradients w.r.t. (emissions, transitions, start, end) of ``Σ_b <[unary; pairwise], a_b>``
    where every sequence's scores ``a`` are read through the tag and arc indicators."""
    transitions = pairwise.sum((0, 1)) if shared else pairwise
    return unary, transitions, unary[:, 0].sum(0), _last(unary, lengths).sum(0)


def marginals_gradients(
    paths: Any, active: Any, inverse: Any, lengths: Any, grad_unary: Any, grad_pairwise: Any, shared: bool
) -> tuple[Any, ...]:
    """Prop. 1's backward pass of ``(u*, v*)``: for an upstream ``(g_u, g_v)``,
    ``h_k = m_kᵀg_u + n_kᵀg_v`` on the support, ``r = D h`` with ``D`` the top-left block of the
    KKT ``inverse``, and the gradient w.r.t. (emissions, transitions, start, end) is
    ``Σ_k r_k a_k``. Linear in ``(g_u, g_v)`` with the support held fixed, so it differentiates
    again (to 0 in the scores, the Jacobian being piecewise constant); ``shared``: the
    transitions are (T, T)."""
    direction = support_direction(paths, active, inverse, grad_unary, grad_pairwise)
    num_tags = grad_unary.shape[-1]
    unary = algebra.unary(paths, direction, num_tags)
    pairwise = algebra.pairwise(paths, direction, num_tags)
    return _score_gradients(unary, pairwise, lengths, shared)


def support_direction(
    paths: Any, active: Any, inverse: Any, grad_unary: Any, grad_pairwise: Any | None = None
) -> Any:
    """(B, K) Prop. 1's ``r = D h`` on the support, ``h_k = m_kᵀg_u (+ n_kᵀg_v)``, 0 off it: the
    weights by which the atoms' indicators make the backward pass of the marginals."""
    o = ops.of(grad_unary)
    max_support = active.shape[1]
    along = algebra.path_sums(paths, grad_unary, grad_pairwise)
    along = o.astype(o.where(active, along, 0.0), inverse.dtype)
    direction = (inverse[:, :max_support, :max_support] @ along[..., None])[..., 0]
    return o.astype(o.where(active, direction, 0.0), grad_unary.dtype)


def danskin_gradients(grad: Any, unary: Any, pairwise: Any, lengths: Any, shared: bool) -> tuple[Any, ...]:
    """Danskin's gradient of the value w.r.t. (emissions, transitions, start, end): ``(u*, v*)``
    read through the scores' indicators, scaled by the upstream ``grad`` (B,)."""
    unary = grad[:, None, None] * unary
    pairwise = grad[:, None, None, None] * pairwise
    return _score_gradients(unary, pairwise, lengths, shared)


def hamming_augmented(emissions: Any, tags: Any) -> Any:
    """m-SparseMAP's cost-augmented scores ``η_U + 1 − m_ȳ`` (the Hamming distance to the gold
    ``tags`` is linear in u)."""
    o = ops.of(emissions)
    gold = o.one_hot(o.maximum(tags, 0), emissions.shape[-1], emissions.dtype)
    return emissions + (1 - gold)
