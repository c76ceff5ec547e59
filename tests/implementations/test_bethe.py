"""Bethe projections with non-local energies (``bethe``; docs/derivations.md §9), in every backend.

Without an energy the method is the CRF (the contract tests check that against brute force).
Here: the energies' values and gradients against their definitions and automatic
differentiation; with a convex energy every solver reaches the brute-force reference's μ* and
value (``implementations.reference.bethe``) on every length from 1, with ``-inf`` patterns and
padding; every iterate lies in the marginal polytope; RDA's averaged iterate closes its gap at the
O(ln t / t) rate; decoding is Viterbi on θ − ∇L(μ*); the loss's gradient with respect to θ and to
the energy's weights ψ is the surrogate's at fixed μ* (finite differences; the sign the paper's
Eqs. 15–17 drop), and with ``tilt="dual"`` exactly Algorithm 3's even before convergence; the two
backends agree, also under ``jax.jit``; bad options are named.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import implementations
from implementations import energies
from implementations.reference import bethe as reference
from implementations.reference import brute_force

from .backends import Backend
from .instances import Instance, all_lengths_instance, npy

#: Each solver's settings, iterations and the distance to μ* it must reach on the convex instance:
#: MD with large steps (λ = 0.1) converges linearly here, to the reference's own accuracy; RDA
#: (β = 0) at its O(1/t) rate and accelerated RDA at O(1/t²) only come within the looser bounds.
CONVERGING = {
    "md": ({"decay": 0.1}, 300, 1e-7),
    "rda": ({}, 1000, 3e-4),
    "accelerated": ({"smoothness": 0.1}, 1000, 2e-5),
}


def measurements(rng: np.random.Generator, num_tags: int, pairwise: bool) -> dict[str, np.ndarray]:
    """Random parameters of a convex :class:`~implementations.energies.Measurements` energy."""
    parameters = {
        "unary_weights": rng.normal(size=(3, num_tags)),
        "offsets": rng.normal(size=3),
        "weights": rng.uniform(0.5, 2.0, size=3),
    }
    if pairwise:
        parameters["pairwise_weights"] = rng.normal(size=(3, num_tags, num_tags))
    return parameters


def energy_in(backend: Backend | None, cls: type, parameters: dict[str, np.ndarray]):
    """``cls`` with its array parameters in ``backend`` (None: NumPy)."""
    if backend is None:
        return cls(**parameters)
    return cls(**{name: backend.array(value) for name, value in parameters.items()})


def solve(backend: Backend, inst: Instance, energy, **options):
    return backend.module("bethe").solve(**inst.arrays(backend), energy=energy, **options)


def reference_solution(inst: Instance, b: int, cls: type, parameters: dict[str, np.ndarray]):
    return reference.solve(**inst.seq(b), energy=energy_in(None, cls, parameters))


# ------------------------------------------------------------------------------ no energy: the CRF


@pytest.mark.parametrize("solver", ["rda", "md", "accelerated"])
def test_without_an_energy_it_is_the_crf(solver: str, backend: Backend) -> None:
    """Every length 1..5, -inf patterns, padding: the CRF's marginals, log Z, Viterbi path and
    losses, converged after one iteration (nothing changes but rounding)."""
    inst = all_lengths_instance(9, num_tags=3, max_len=5, neg_inf=0.2)
    kw, tags = inst.arrays(backend), inst.gold_array(backend)
    allowed = backend.array(np.ones((inst.batch, inst.length, inst.num_tags), dtype=bool))
    bethe, crf = backend.module("bethe"), backend.module("crf")
    options = {"solver": solver, "iterations": 3, "tolerance": 1e-12}
    out = bethe.solve(**kw, **options)
    np.testing.assert_allclose(npy(out.unary), npy(crf.marginals(**kw)[0]), atol=1e-12)
    np.testing.assert_allclose(npy(out.value), npy(crf.log_partition(**kw)), atol=1e-10)
    assert int(out.iterations) == 1 and npy(out.converged).all()
    np.testing.assert_array_equal(npy(bethe.decode(**kw, **options)), npy(crf.decode(**kw)))
    np.testing.assert_allclose(
        npy(bethe.loss(**kw, tags=tags, **options)), npy(crf.loss(**kw, tags=tags)), atol=1e-10
    )
    np.testing.assert_allclose(npy(bethe.partial_loss(**kw, allowed=allowed, **options)), 0.0, atol=1e-10)


# ------------------------------------------------------------------------------------ energies


def test_smooth_hinge_is_rennies() -> None:
    z = np.array([-2.0, 0.0, 0.25, 0.5, 1.0, 3.0])
    np.testing.assert_allclose(energies.smooth_hinge(np, z), [2.5, 0.5, 0.28125, 0.125, 0.0, 0.0])
    np.testing.assert_allclose(energies.smooth_hinge_slope(np, z), [-1.0, -1.0, -0.75, -0.5, 0.0, 0.0])


def _random_marginals(rng: np.random.Generator, inst: Instance) -> tuple[torch.Tensor, torch.Tensor]:
    """Marginals of random scores on ``inst``'s lengths (a point inside the polytope)."""
    module = implementations.get("crf", "torch")
    scores = inst.torch()
    scores["emissions"] = torch.tensor(rng.normal(size=inst.emissions.shape))
    scores["transitions"] = torch.tensor(rng.normal(size=inst.transitions.shape))
    return module.marginals(**scores)


def _energies_on(rng: np.random.Generator, inst: Instance) -> list:
    """One energy of each kind, torch, for ``inst``'s tag set."""
    num_tags = inst.num_tags
    words = rng.integers(0, num_tags, size=(5, inst.length))
    lengths = np.array([1, 2, inst.length, inst.length, 3])
    one_hot = np.eye(num_tags)[words] * (np.arange(inst.length)[None, :] < lengths[:, None])[..., None]
    return [
        energies.Measurements(**{k: torch.tensor(v) for k, v in measurements(rng, num_tags, True).items()}),
        energies.UnigramTemplates(torch.tensor(rng.integers(0, 3, size=(4, num_tags)) * 1.0), 1.5),
        energies.WordTemplates(
            torch.tensor(one_hot), torch.tensor(lengths), torch.tensor(0.7, dtype=torch.float64)
        ),
        energies.PoissonCounts(torch.tensor(poisson_counts(rng, inst)), 3.0, 0.5),
    ]


def poisson_counts(rng: np.random.Generator, inst: Instance) -> np.ndarray:
    """(B, N, T) random counts, some zero, zero on padding."""
    counts = rng.poisson(1.0, size=(inst.batch, inst.length, inst.num_tags)) * 1.0
    return counts * inst.valid()[..., None]


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
def test_gradients_are_the_values_derivatives(kind: int) -> None:
    """Away from ties (random marginals), each energy's written-out gradient is autograd's."""
    rng = np.random.default_rng(kind)
    inst = all_lengths_instance(kind, num_tags=3, max_len=5)
    unary, pairwise = _random_marginals(rng, inst)
    unary, pairwise = unary.requires_grad_(), pairwise.requires_grad_()
    mask = torch.tensor(inst.valid(), dtype=torch.float64)
    energy = _energies_on(rng, inst)[kind]
    value = energy.value(torch, unary, pairwise, mask)
    want = torch.autograd.grad(value.sum(), (unary, pairwise), allow_unused=True)
    got = energy.gradient(torch, unary.detach(), pairwise.detach(), mask)
    np.testing.assert_allclose(got[0].numpy(), (want[0] * mask[..., None]).numpy(), atol=1e-12)
    if got[1] is None:
        assert want[1] is None or not want[1].any()
    else:
        arcs = (mask[:, 1:] * mask[:, :-1])[..., None, None]  # zero on padding, by definition
        np.testing.assert_allclose(got[1].numpy(), (want[1] * arcs).numpy(), atol=1e-12)


def test_template_energies_measure_l1_distances() -> None:
    """L^u and L^w against their ℓ₁ definitions; a sentence no template matches in length has
    energy 0 and gradient 0."""
    rng = np.random.default_rng(7)
    inst = all_lengths_instance(7, num_tags=3, max_len=5)
    unary, pairwise = _random_marginals(rng, inst)
    mask = torch.tensor(inst.valid(), dtype=torch.float64)
    _, unigram, word, _ = _energies_on(rng, inst)
    counts = unary.sum(1)
    want_u = 1.5 * (unigram.counts[None] - counts[:, None]).abs().sum(-1).amin(-1)
    torch.testing.assert_close(unigram.value(torch, unary, pairwise, mask), want_u)
    sizes = inst.lengths
    for b in range(inst.batch):
        n = int(sizes[b])
        same = [k for k in range(5) if int(word.lengths[k]) == n]
        got = float(word.value(torch, unary, pairwise, mask)[b])
        if not same:
            assert got == 0.0
            assert not word.gradient(torch, unary, pairwise, mask)[0][b].any()
            continue
        distances = [float((word.one_hot[k, :n] - unary[b, :n]).abs().sum()) for k in same]
        assert got == pytest.approx(0.7 * min(distances), abs=1e-12)


# ------------------------------------------------------------------------------- the solution


@pytest.mark.parametrize("solver", CONVERGING)
@pytest.mark.parametrize("pairwise", [False, True])
def test_convex_energy_reaches_the_reference(solver: str, pairwise: bool, backend: Backend) -> None:
    """Every length 1..5, T = 3, -inf in the scores, per-position transitions, start and end, a
    padded batch: μ* within the solver's bound of the brute-force minimiser, and the value −F
    within its square (F is stationary at μ*)."""
    inst = all_lengths_instance(11, num_tags=3, max_len=5, neg_inf=0.2)
    parameters = measurements(np.random.default_rng(3), 3, pairwise)
    options, iterations, bound = CONVERGING[solver]
    energy = energy_in(backend, energies.Measurements, parameters)
    out = solve(backend, inst, energy, solver=solver, iterations=iterations, tolerance=None, **options)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        want = reference_solution(inst, b, energies.Measurements, parameters)
        np.testing.assert_allclose(npy(out.unary)[b, :n], want.unary, atol=bound)
        np.testing.assert_allclose(npy(out.pairwise)[b, : n - 1], want.pairwise, atol=bound)
        assert npy(out.value)[b] == pytest.approx(want.value, abs=max(bound**2, 1e-10) * 100)
        assert not npy(out.unary)[b, n:].any()


def test_poisson_counts_reach_the_reference(backend: Backend) -> None:
    """The CGM's count likelihood (convex; its gradient ψ(λ − y/μ) is unbounded at μ = 0) on every
    length 1..5 with padding: Bethe-RDA reaches μ* of the brute-force reference, its value within
    the bound's square. RDA's guarantee assumes bounded gradients: where ψ y / μ_0 is large the
    β = 0 iterates jump between vertices (each jump makes the next gradient larger), which
    β = 10 damps. A zero-probability cell with a positive count makes F infinite: no -inf scores."""
    inst = all_lengths_instance(13, num_tags=3, max_len=5)
    counts = poisson_counts(np.random.default_rng(13), inst)
    energy = energies.PoissonCounts(backend.array(counts), 2.0, 0.05)
    out = solve(backend, inst, energy, beta=10.0, iterations=3000, tolerance=None)
    undamped = solve(backend, inst, energy, iterations=3000, tolerance=None)
    errors = []
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        want = reference.solve(**inst.seq(b), energy=energies.PoissonCounts(counts[b : b + 1, :n], 2.0, 0.05))
        np.testing.assert_allclose(npy(out.unary)[b, :n], want.unary, atol=2e-4)
        assert npy(out.value)[b] == pytest.approx(want.value, abs=1e-7)
        errors.append(np.abs(npy(undamped.unary)[b, :n] - want.unary).max())
    assert max(errors) > 0.1  # the damping is needed here


@pytest.mark.parametrize("solver", ["rda", "md", "accelerated"])
@pytest.mark.parametrize("output", ["last", "average"])
def test_every_iterate_is_in_the_marginal_polytope(solver: str, output: str, backend: Backend) -> None:
    """Non-convex template energy, few iterations: still non-negative marginals that sum to 1 at
    every position and whose arcs sum to their positions' marginals (local = marginal polytope on
    a chain)."""
    if solver == "accelerated" and output == "average":
        return
    inst = all_lengths_instance(5, num_tags=3, max_len=5)
    rng = np.random.default_rng(5)
    counts = backend.array(rng.integers(0, 3, size=(4, 3)) * 1.0)
    energy = energies.UnigramTemplates(counts, 2.0)
    for iterations in (1, 2, 7):
        out = solve(backend, inst, energy, solver=solver, output=output, iterations=iterations)
        unary, pairwise = npy(out.unary), npy(out.pairwise)
        valid = inst.valid()
        assert (unary >= 0).all() and (pairwise >= 0).all()
        np.testing.assert_allclose(unary.sum(-1), valid * 1.0, atol=1e-12)
        arcs = valid[:, 1:]
        np.testing.assert_allclose(
            pairwise.sum(-1) * arcs[..., None], unary[:, :-1] * arcs[..., None], atol=1e-12
        )
        np.testing.assert_allclose(
            pairwise.sum(-2) * arcs[..., None], unary[:, 1:] * arcs[..., None], atol=1e-12
        )


def test_rda_average_closes_its_gap_at_the_ln_t_over_t_rate(backend: Backend) -> None:
    """Prop. 4: F(average of μ_1..μ_t) − F* ≤ C ln t / t. The gap shrinks, and t·gap/ln t stays
    below its value at t = 10."""
    inst = all_lengths_instance(2, num_tags=3, max_len=4).alone(0)
    parameters = measurements(np.random.default_rng(2), 3, False)
    best = reference_solution(inst, 0, energies.Measurements, parameters).value
    energy = energy_in(backend, energies.Measurements, parameters)
    out = solve(backend, inst, energy, output="average", iterations=1000, tolerance=None)
    gaps = best - npy(out.values)[:, 0]  # value = −F: the gap in F is best − value
    assert (gaps > -1e-9).all()
    scaled = {t: t * gaps[t - 1] / np.log(t) for t in (10, 100, 1000)}
    assert gaps[999] < gaps[99] < gaps[9]
    assert scaled[100] <= scaled[10] and scaled[1000] <= scaled[10]


def test_the_two_references_agree() -> None:
    """The agreement report's loop (RDA with enumerated projections) run long reaches the L-BFGS
    minimiser over distributions: the oracles check each other."""
    inst = all_lengths_instance(12, num_tags=3, max_len=4, neg_inf=0.2)
    parameters = measurements(np.random.default_rng(12), 3, True)
    energy = energy_in(None, energies.Measurements, parameters)
    for b in range(inst.batch):
        loop = reference.mirror_descent(**inst.seq(b), energy=energy, solver="md", decay=0.1, iterations=300)
        best = reference.solve(**inst.seq(b), energy=energy)
        np.testing.assert_allclose(loop.unary, best.unary, atol=1e-7)
        assert loop.value == pytest.approx(best.value, abs=1e-10)


# -------------------------------------------------------------------- prediction and learning


def _tilted(inst: Instance, b: int, unary_gradient: np.ndarray, pairwise_gradient: np.ndarray | None):
    """Sequence ``b``'s scores minus ∇L(μ*): emissions with start/end folded, per-position arcs."""
    seq = inst.seq(b)
    n = int(inst.lengths[b])
    emissions = seq["emissions"].copy()
    if seq["start"] is not None:
        emissions[0] += seq["start"]
    if seq["end"] is not None:
        emissions[n - 1] += seq["end"]
    transitions = np.broadcast_to(seq["transitions"], (max(n - 1, 0), inst.num_tags, inst.num_tags)).copy()
    emissions = emissions - unary_gradient[:n]
    if pairwise_gradient is not None:
        transitions = transitions - pairwise_gradient[: n - 1]
    return emissions, transitions


def test_decode_is_viterbi_on_the_tilted_scores(backend: Backend) -> None:
    inst = all_lengths_instance(4, num_tags=3, max_len=5, neg_inf=0.2)
    parameters = measurements(np.random.default_rng(4), 3, True)
    energy = energy_in(backend, energies.Measurements, parameters)
    module = backend.module("bethe")
    options = {"energy": energy, "iterations": 200, "solver": "md", "decay": 0.1}
    tags = npy(module.decode(**inst.arrays(backend), **options))
    out = module.solve(**inst.arrays(backend), **options)
    numpy_energy = energy_in(None, energies.Measurements, parameters)
    gradient = numpy_energy.gradient(np, npy(out.unary), npy(out.pairwise), inst.valid() * 1.0)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        emissions, transitions = _tilted(inst, b, gradient[0][b], gradient[1][b])
        best = brute_force.best(emissions, transitions)
        assert tags[b, :n].tolist() == list(best[1]) and (tags[b, n:] == -1).all()


def test_learning_gradient_is_the_surrogates_at_fixed_marginals() -> None:
    """The loss's autograd gradient w.r.t. ψ and the emissions equals central differences of
    ``log Z(θ̃) − θ̃ᵀS(y)``, θ̃ = θ − ∇L_ψ(μ*) with μ* held at its value; and w.r.t. ψ_j it is
    ``ℓ̃'(a_jᵀμ*) a_jᵀ(S(y) − μ̃)`` (μ̃ = μ* here: converged), the sign Eqs. 15–17 drop."""
    inst = all_lengths_instance(6, num_tags=3, max_len=4).alone(2)
    parameters = measurements(np.random.default_rng(6), 3, False)
    crf, bethe = implementations.get("crf", "torch"), implementations.get("bethe", "torch")
    scores = inst.torch()
    psi = torch.tensor(parameters["weights"], requires_grad=True)
    emissions = scores["emissions"].clone().requires_grad_()
    fixed = {k: torch.tensor(v) for k, v in parameters.items() if k != "weights"}
    options = {"iterations": 300, "tolerance": None, "solver": "md", "decay": 0.1}
    energy = energies.Measurements(**fixed, weights=psi)
    gold = inst.gold_tensor()
    loss = bethe.loss(**{**scores, "emissions": emissions}, tags=gold, energy=energy, **options)
    got_psi, got_emissions = torch.autograd.grad(loss.sum(), (psi, emissions))

    with torch.no_grad():
        mu = bethe.solve(**scores, energy=energies.Measurements(**fixed, weights=psi.detach()), **options)
    mask = torch.ones(1, inst.length, dtype=torch.float64)

    def surrogate(weights: torch.Tensor, emission_scores: torch.Tensor) -> float:
        shift, _ = energies.Measurements(**fixed, weights=weights).gradient(
            torch, mu.unary, mu.pairwise, mask
        )
        tilted = {**scores, "emissions": emission_scores - shift}
        return float(crf.loss(**tilted, tags=gold))

    step = 1e-6
    for j in range(3):
        up, down = psi.detach().clone(), psi.detach().clone()
        up[j] += step
        down[j] -= step
        numeric = (surrogate(up, emissions.detach()) - surrogate(down, emissions.detach())) / (2 * step)
        assert float(got_psi[j]) == pytest.approx(numeric, abs=1e-6)
    position, tag = 1, 2
    up, down = emissions.detach().clone(), emissions.detach().clone()
    up[0, position, tag] += step
    down[0, position, tag] -= step
    numeric = (surrogate(psi.detach(), up) - surrogate(psi.detach(), down)) / (2 * step)
    assert float(got_emissions[0, position, tag]) == pytest.approx(numeric, abs=1e-6)
    # the closed form, and its sign
    gold_counts = torch.nn.functional.one_hot(gold[0], 3).double().sum(0)
    measured = mu.unary[0].sum(0) @ fixed["unary_weights"].T - fixed["offsets"]
    slopes = energies.smooth_hinge_slope(torch, measured)
    want = slopes * ((gold_counts - mu.unary[0].sum(0)) @ fixed["unary_weights"].T)
    np.testing.assert_allclose(got_psi.numpy(), want.numpy(), atol=1e-7)


@pytest.mark.parametrize(("solver", "options"), [("rda", {}), ("rda", {"beta": 2.0}), ("md", {"decay": 0.5})])
@pytest.mark.parametrize("tilt", ["gradient", "dual"])
def test_losses_and_decoding_match_the_enumerating_loop(
    solver: str, options: dict, tilt: str, backend: Backend
) -> None:
    """``decode``, ``loss`` and ``partial_loss`` after 3 iterations (not converged) equal the
    agreement oracle's, which runs the same solver with every projection a softmax over all
    sequences and decodes by enumeration, for both tilts, a smooth energy plus a non-smooth one
    (every length from 1, ``-inf`` patterns, padding)."""
    from implementations.reference import oracles

    from .instances import random_allowed

    rng = np.random.default_rng(30)
    inst = all_lengths_instance(30, num_tags=3, max_len=4, neg_inf=0.2)
    parameters = measurements(rng, 3, True)
    counts = rng.integers(0, 3, size=(4, 3)) * 1.0

    def energy(backend: Backend | None):
        array = np.asarray if backend is None else backend.array
        return energies.Total(
            (
                energy_in(backend, energies.Measurements, parameters),
                energies.UnigramTemplates(array(counts), array(1.5)),
            )
        )

    allowed = random_allowed(rng, inst)
    settings = {"solver": solver, "iterations": 3, "tolerance": None, "tilt": tilt, **options}
    module = backend.module("bethe")
    scores = {**inst.arrays(backend), "energy": energy(backend), **settings}
    tags = npy(module.decode(**scores))
    loss = npy(module.loss(**scores, tags=backend.array(inst.gold)))
    partial = npy(module.partial_loss(**scores, allowed=backend.array(allowed)))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        want = oracles.bethe(inst.seq(b), inst.gold[b, :n], allowed[b, :n], energy=energy(None), **settings)
        assert loss[b] == pytest.approx(want.loss, abs=1e-9)
        assert partial[b] == pytest.approx(want.partial_loss, abs=1e-9)
        assert tags[b, :n].tolist() == list(want.tags)


def _path_counts(inst: Instance) -> tuple[torch.Tensor, torch.Tensor]:
    """S(y) of the gold paths: (B, N, T) node and (B, N-1, T, T) arc indicators, zero on padding."""
    gold = torch.tensor(inst.gold)
    unary = torch.nn.functional.one_hot(gold.clamp(min=0), inst.num_tags).double() * (gold >= 0)[..., None]
    return unary, unary[:, :-1, :, None] * unary[:, 1:, None, :]


@pytest.mark.parametrize(("solver", "options"), [("rda", {}), ("rda", {"beta": 2.0}), ("md", {"decay": 0.5})])
@pytest.mark.parametrize("kind", [0, 1, 2])
def test_the_dual_tilt_gives_algorithm_3s_gradients(solver: str, options: dict, kind: int) -> None:
    """``tilt="dual"``: the tilted scores' exact marginals are the solver's last iterate even
    after 3 iterations and for the non-smooth template energies (kinds 1, 2), so the loss's gradient
    is Algorithm 3's: ``μ* − S(y)`` in the emissions and ``(∂∇L_ψ(μ*)/∂ψ)ᵀ(S(y) − μ*)`` in ψ
    (every length from 1, ``-inf`` patterns, padding). With ``tilt="gradient"`` the emissions'
    gradient is not ``μ* − S(y)`` before convergence (checked, so that the test can fail), except
    for L^w under RDA with β = 0: its subgradient at interior marginals, sign(μ − w), is the same at
    every iterate, so RDA's shift, their mean, is it."""
    rng = np.random.default_rng(20 + kind)
    inst = all_lengths_instance(20 + kind, num_tags=3, max_len=5, neg_inf=0.2)
    energy = _energies_on(rng, inst)[kind]
    psi = torch.as_tensor(energy.weights, dtype=torch.float64).clone().requires_grad_()
    energy = dataclasses.replace(energy, weights=psi)
    bethe = implementations.get("bethe", "torch")
    scores = inst.torch(grad=True)
    settings = {"energy": energy, "solver": solver, "iterations": 3, "tolerance": None, **options}
    gold = torch.tensor(inst.gold)
    loss = bethe.loss(**scores, tags=gold, tilt="dual", **settings).sum()
    got_emissions, got_psi = torch.autograd.grad(loss, (scores["emissions"], psi))
    with torch.no_grad():
        out = bethe.solve(**scores, **settings)
    unary, pairwise = _path_counts(inst)
    torch.testing.assert_close(got_emissions, out.unary - unary, atol=1e-10, rtol=0)
    mask = torch.tensor(inst.valid(), dtype=torch.float64)
    to_unary, to_pairwise = energy.gradient(torch, out.unary, out.pairwise, mask)
    inner = (to_unary * (unary - out.unary)).sum()
    if to_pairwise is not None:
        inner = inner + (to_pairwise * (pairwise - out.pairwise)).sum()
    (want_psi,) = torch.autograd.grad(inner, psi)
    torch.testing.assert_close(got_psi, want_psi, atol=1e-10, rtol=0)
    literal = bethe.loss(**scores, tags=gold, tilt="gradient", **settings).sum()
    (literal_emissions,) = torch.autograd.grad(literal, scores["emissions"])
    same = kind == 2 and solver == "rda" and not options
    assert ((literal_emissions - (out.unary - unary)).abs().max() > 1e-3) == (not same)


# ------------------------------------------------------------------------------ the backends


@pytest.mark.jax
@pytest.mark.parametrize("solver", ["rda", "md", "accelerated"])
def test_torch_and_jax_agree_and_jit(solver: str) -> None:
    jax = pytest.importorskip("jax")
    from .backends import get

    torch_backend, jax_backend = get("torch"), get("jax")
    inst = all_lengths_instance(8, num_tags=4, max_len=6, neg_inf=0.2)
    rng = np.random.default_rng(8)
    parameters = measurements(rng, 4, True)
    words = rng.integers(0, 4, size=(6, 6))
    lengths = np.arange(1, 7)
    one_hot = np.eye(4)[words] * (np.arange(6)[None, :] < lengths[:, None])[..., None]

    def energy(backend: Backend):
        return energies.Total(
            (
                energy_in(backend, energies.Measurements, parameters),
                energies.WordTemplates(backend.array(one_hot), backend.array(lengths), 0.5),
            )
        )

    options = {"solver": solver, "iterations": 25, "tolerance": 1e-9}
    want = solve(torch_backend, inst, energy(torch_backend), **options)
    got = solve(jax_backend, inst, energy(jax_backend), **options)
    module = jax_backend.module("bethe")
    jitted = jax.jit(lambda kw, e: module.solve(**kw, energy=e, validate=False, **options))(
        inst.arrays(jax_backend), energy(jax_backend)
    )
    for field in ("unary", "pairwise", "value", "errors", "values", "converged"):
        np.testing.assert_allclose(npy(getattr(got, field)), npy(getattr(want, field)), atol=1e-10)
        np.testing.assert_allclose(npy(getattr(jitted, field)), npy(getattr(got, field)), atol=1e-12)
    assert int(got.iterations) == int(want.iterations) == int(jitted.iterations)
    for tilt in ("gradient", "dual"):
        losses, paths = [], []
        for backend in (torch_backend, jax_backend):
            module = backend.module("bethe")
            kwargs = {**inst.arrays(backend), "energy": energy(backend), "tilt": tilt, **options}
            losses.append(npy(module.loss(**kwargs, tags=backend.array(inst.gold))))
            paths.append(npy(module.decode(**kwargs)))
        np.testing.assert_allclose(losses[1], losses[0], atol=1e-10)
        np.testing.assert_array_equal(paths[1], paths[0])


def test_options_are_checked() -> None:
    inst = all_lengths_instance(0, num_tags=2, max_len=3)
    module = implementations.get("bethe", "torch")
    with pytest.raises(ValueError, match="energy must be None or an energy"):
        module.solve(**inst.torch(), energy="hinge")
    with pytest.raises(ValueError, match="beta must be a finite number >= 0"):
        module.solve(**inst.torch(), beta=-1.0)
    with pytest.raises(ValueError, match="output='average' is for rda and md"):
        module.solve(**inst.torch(), solver="accelerated", output="average")
