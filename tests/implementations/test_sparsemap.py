"""SparseMAP (``implementations/<backend>/sparsemap.py``) against independent oracles, in every
backend and with every solver (docs/derivations.md §8).

- **The reference QP** (``implementations.reference.sparsemap``: the dual over every enumerated
  sequence, then the KKT system on the tight set) on batches holding every length from 1,
  T ∈ {2, 3, 4}, shared and per-position transitions, ``-inf`` patterns and garbage padding: u*
  to 1e-6 in float64 for the active set and the away-step and pairwise Frank–Wolfe variants,
  with v*, the value, the losses and the decoded sequence. Vanilla Frank–Wolfe converges only
  sublinearly; it is held to the bound strong convexity gives, ``‖u − u*‖ ≤ √(2 gap)``, with its
  own reported gap.
- **Its own certificate**: the reported gap is ``max_s (θ_s − m_sᵀu) − Σ y_s (θ_s − m_sᵀu)``
  recomputed by enumeration from the returned support.
- **The backward pass** (Prop. 1) against central finite differences of u* and v*, and against
  the Jacobian ``A_I D A_Iᵀ`` built in NumPy from the reference's support; the losses' gradient
  ``[u* − m_ȳ; v* − n_ȳ]`` against finite differences of the loss.
- **Prop. 2** (non-negative, zero at a well-separated gold, convex, ``ℓ_{tΩ}(η) = t ℓ_Ω(η/t)``),
  m-SparseMAP against the reference at cost-augmented scores, and the fallbacks the module
  documents: a full support, ties everywhere (zero scores), batches equal to each sequence alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from implementations.reference import brute_force
from implementations.reference.sparsemap import sparsemap as reference

from .backends import TORCH_ONLY, Backend, get
from .instances import Instance, all_lengths_instance, apply, make_instance, npy, random_allowed

SOLVERS = ("active-set", "pairwise-fw", "away-fw", "fw")
EXACT_SOLVERS = ("active-set", "pairwise-fw", "away-fw")  # u* to 1e-6 within their iterations
#: iterations that bring the linearly convergent Frank–Wolfe variants to rounding on these sizes
ITERATIONS = {"active-set": 100, "pairwise-fw": 6000, "away-fw": 6000, "fw": 3000}
MAX_SUPPORT = 32
DATA = Path(__file__).parent / "data"


def options(solver: str, **extra: Any) -> dict[str, Any]:
    return {"solver": solver, "iterations": ITERATIONS[solver], "max_support": MAX_SUPPORT, **extra}


def indicators(paths: np.ndarray, num_tags: int) -> np.ndarray:
    """(k, n·T): row s is the flattened one-hot tags of sequence s."""
    return np.eye(num_tags)[paths].reshape(len(paths), -1)


CASES = [
    pytest.param(dict(seed=0, num_tags=2), id="T2"),
    pytest.param(dict(seed=1, num_tags=3, neg_inf=0.3), id="T3-neginf"),
    pytest.param(dict(seed=2, num_tags=4, per_position=False, boundary=False), id="T4-shared"),
    pytest.param(dict(seed=3, num_tags=3, scale=3.0, neg_inf=0.4), id="T3-scale3-neginf", marks=TORCH_ONLY),
]


def case(spec: dict[str, Any]) -> Instance:
    return all_lengths_instance(max_len=5, **spec)


@pytest.mark.parametrize("spec", CASES)
@pytest.mark.parametrize("solver", SOLVERS)
def test_agrees_with_the_reference_qp(spec: dict[str, Any], solver: str, backend: Backend) -> None:
    inst = case(spec)
    kw = inst.arrays(backend)
    allowed = random_allowed(np.random.default_rng(7), inst)
    module = backend.module("sparsemap")
    out = apply(module, "solve", kw, **options(solver))
    unary, pairwise, value, gap = npy(out.unary), npy(out.pairwise), npy(out.value), npy(out.error)
    loss = npy(apply(module, "loss", kw, backend.array(inst.gold), **options(solver)))
    partial = npy(apply(module, "partial_loss", kw, backend.array(allowed), **options(solver)))
    decoded = npy(apply(module, "decode", kw, **options(solver)))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        expected = reference(**inst.seq(b))
        if solver not in EXACT_SOLVERS:  # strong convexity in u: ½‖u − u*‖² ≤ primal gap ≤ Wolfe gap
            assert np.linalg.norm(unary[b, :n] - expected.unary) <= np.sqrt(2 * gap[b]) + 1e-9
            continue
        assert npy(out.converged)[b]
        np.testing.assert_allclose(unary[b, :n], expected.unary, atol=1e-6)
        np.testing.assert_allclose(pairwise[b, : n - 1], expected.pairwise, atol=1e-6)
        assert value[b] == pytest.approx(expected.value, abs=1e-8)
        gold = brute_force.path_score(inst.gold[b, :n], **inst.seq(b))
        assert loss[b] == pytest.approx(expected.value + n / 2 - gold, abs=1e-8)
        masked = {**inst.seq(b), "emissions": np.where(allowed[b, :n], inst.emissions[b, :n], -np.inf)}
        assert partial[b] == pytest.approx(expected.value - reference(**masked).value, abs=1e-8)
        pattern = {
            k: None if v is None else np.where(np.isneginf(v), -np.inf, 0.0) for k, v in inst.seq(b).items()
        }
        _best, path, margin = brute_force.best(
            expected.unary, pattern["transitions"], pattern["start"], pattern["end"]
        )
        if margin > 1e-6:  # a unique best sequence under u*
            np.testing.assert_array_equal(decoded[b, :n], path)
        if expected.weights.max() > 0.5 + 1e-6:  # then it is the heaviest sequence of the support
            np.testing.assert_array_equal(decoded[b, :n], expected.paths[np.argmax(expected.weights)])
        assert (decoded[b, n:] == -1).all()
        assert (unary[b, n:] == 0).all() and (pairwise[b, n - 1 :] == 0).all()


@pytest.mark.parametrize("solver", SOLVERS)
def test_support_and_gap_are_what_they_claim(solver: str, backend: Backend) -> None:
    """The support gives u* and v*; the weights form a distribution over finite-score sequences;
    the reported gap is the Wolfe gap recomputed by enumeration; NaN after the last iteration."""
    inst = case(dict(seed=5, num_tags=3, neg_inf=0.3))
    out = apply(backend.module("sparsemap"), "solve", inst.arrays(backend), **options(solver, iterations=40))
    paths, weights, unary = npy(out.paths), npy(out.weights), npy(out.unary)
    errors = npy(out.errors)
    run = int(out.iterations)
    assert errors.shape == (40, inst.batch) and not np.isnan(errors[:run]).any()
    assert np.isnan(errors[run:]).all()
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        live = weights[b] > 0
        support = paths[b, live, :n]
        assert (paths[b, ~live] == -1).all() and (weights[b] >= 0).all()
        assert weights[b].sum() == pytest.approx(1.0, abs=1e-12)
        rows = indicators(support, inst.num_tags)
        np.testing.assert_allclose(weights[b, live] @ rows, unary[b, :n].ravel(), atol=1e-12)
        theta = np.array([brute_force.path_score(path, **inst.seq(b)) for path in support])
        assert np.isfinite(theta).all()
        enumeration = brute_force.enumerate_scores(**inst.seq(b))
        finite = np.isfinite(enumeration.scores)
        every = enumeration.scores[finite] - indicators(enumeration.paths[finite], 3) @ unary[b, :n].ravel()
        mean = weights[b, live] @ (theta - rows @ unary[b, :n].ravel())
        assert errors[run - 1, b] == pytest.approx(max(every.max() - mean, 0.0), abs=1e-9)


def test_every_solver_reaches_the_same_solution(backend: Backend) -> None:
    """Larger random instances than the reference can enumerate (N = 12, T = 5)."""
    rng = np.random.default_rng(11)
    inst = make_instance(rng, batch=3, length=12, num_tags=5, lengths=[12, 9, 4], neg_inf=0.2)
    kw = inst.arrays(backend)
    module = backend.module("sparsemap")
    results = {s: apply(module, "solve", kw, **options(s, max_support=64)) for s in EXACT_SOLVERS}
    base = results["active-set"]
    assert npy(base.converged).all()
    for solver, out in results.items():
        assert npy(out.converged).all(), solver
        np.testing.assert_allclose(npy(out.unary), npy(base.unary), atol=1e-6, err_msg=solver)
        np.testing.assert_allclose(npy(out.value), npy(base.value), atol=1e-9, err_msg=solver)
    scan = apply(module, "solve", kw, **options("active-set", oracle="scan"))
    np.testing.assert_allclose(npy(scan.unary), npy(base.unary), atol=1e-9)


# ------------------------------------------------------------------------------ gradients


def _jacobian_reference(inst: Instance, b: int) -> np.ndarray:
    """``∂[u*; v*]/∂[η_U; η_F]`` of sequence ``b`` = ``A_I D A_Iᵀ`` on the reference's support
    (Prop. 1), ``D`` the top-left block of the inverse KKT matrix; per-position scores."""
    n, num_tags = int(inst.lengths[b]), inst.num_tags
    solution = reference(**inst.seq(b))
    paths = solution.paths
    unary_rows = indicators(paths, num_tags)
    arcs = np.zeros((len(paths), max(n - 1, 0), num_tags, num_tags))
    for k, path in enumerate(paths):
        arcs[k, np.arange(n - 1), path[:-1], path[1:]] = 1.0
    atoms = np.hstack([unary_rows, arcs.reshape(len(paths), -1)])  # rows a_s
    size = len(paths)
    system = np.block([[unary_rows @ unary_rows.T, np.ones((size, 1))], [np.ones((1, size)), 0.0]])
    block = np.linalg.inv(system)[:size, :size]
    return atoms.T @ block @ atoms


@pytest.mark.parametrize("seed", range(3))
def test_backward_is_prop_1(seed: int, backend: Backend) -> None:
    """The VJP of ``marginals`` against the NumPy Jacobian on the reference's support and against
    central differences (the support is stable: the step is far below the certificate's slack)."""
    rng = np.random.default_rng(seed)
    inst = make_instance(
        rng, batch=2, length=4, num_tags=3, lengths=[4, 3], per_position=True, start=False, end=False
    )
    cotangent_u = rng.normal(size=(inst.batch, inst.length, inst.num_tags))
    cotangent_v = rng.normal(size=(inst.batch, inst.length - 1, inst.num_tags, inst.num_tags))
    module = backend.module("sparsemap")

    def objective(kw: dict[str, Any]) -> Any:
        unary, pairwise = apply(module, "marginals", kw)
        weighted = (unary * backend.array(cotangent_u)).sum((1, 2))
        return weighted + (pairwise * backend.array(cotangent_v)).sum((1, 2, 3))

    _, grads = backend.value_and_grad(objective, inst.arrays(backend), ["emissions", "transitions"])
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        jacobian = _jacobian_reference(inst, b)
        upstream = np.concatenate([cotangent_u[b, :n].ravel(), cotangent_v[b, : n - 1].ravel()])
        expected = jacobian.T @ upstream
        split = n * inst.num_tags
        np.testing.assert_allclose(grads["emissions"][b, :n].ravel(), expected[:split], atol=1e-9)
        np.testing.assert_allclose(grads["transitions"][b, : n - 1].ravel(), expected[split:], atol=1e-9)
    # central differences of <g, [u*; v*]> along a random direction
    direction = {k: rng.normal(size=v.shape) for k, v in grads.items()}
    eps = 1e-6

    def shifted(sign: float) -> float:
        scores = inst.scores()
        for key, step in direction.items():
            scores[key] = scores[key] + sign * eps * step
        kw = backend.arrays(scores)
        with backend.no_grad():
            return float(npy(objective(kw)).sum())

    numeric = (shifted(1.0) - shifted(-1.0)) / (2 * eps)
    analytic = sum(float((grads[k] * direction[k]).sum()) for k in direction)
    assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("cost", ["none", "hamming"])
def test_loss_gradient_is_u_minus_gold(cost: str, backend: Backend) -> None:
    """Danskin: ``∂ℓ/∂η_U = u*(augmented) − m_ȳ``, ``∂ℓ/∂η_F = v* − n_ȳ``, and the same
    against central differences of the loss, start and end included."""
    inst = case(dict(seed=9, num_tags=3, neg_inf=0.2))
    module = backend.module("sparsemap")
    tags = backend.array(inst.gold)
    wrt = ["emissions", "transitions", "start", "end"]
    _, grads = backend.value_and_grad(
        lambda kw: apply(module, "loss", kw, tags, cost=cost), inst.arrays(backend), wrt
    )
    scores = inst.scores()
    if cost == "hamming":
        gold_hot = np.eye(inst.num_tags)[np.maximum(inst.gold, 0)]
        scores["emissions"] = scores["emissions"] + 1 - gold_hot
    unary, pairwise = (npy(x) for x in apply(module, "marginals", backend.arrays(scores)))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        gold = np.eye(inst.num_tags)[inst.gold[b, :n]]
        np.testing.assert_allclose(grads["emissions"][b, :n], unary[b, :n] - gold, atol=1e-9)
        arcs = np.zeros((n - 1, inst.num_tags, inst.num_tags))
        arcs[np.arange(n - 1), inst.gold[b, : n - 1], inst.gold[b, 1:n]] = 1.0
        np.testing.assert_allclose(grads["transitions"][b, : n - 1], pairwise[b, : n - 1] - arcs, atol=1e-9)
    rng = np.random.default_rng(3)
    direction = {
        k: np.where(np.isfinite(v), rng.normal(size=v.shape), 0.0)
        for k, v in inst.scores().items()
        if k in wrt
    }
    eps = 1e-6

    def total(sign: float) -> float:
        moved = inst.scores()
        for key, step in direction.items():
            moved[key] = moved[key] + sign * eps * step
        with backend.no_grad():
            return float(npy(apply(module, "loss", backend.arrays(moved), tags, cost=cost)).sum())

    numeric = (total(1.0) - total(-1.0)) / (2 * eps)
    analytic = sum(float((grads[k] * direction[k]).sum()) for k in wrt)
    assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-7)


# ------------------------------------------------------------------------------ the losses


def test_loss_properties(backend: Backend) -> None:
    """Prop. 2: ℓ ≥ 0; ℓ = 0 when the gold sequence wins by a wide margin; convex along a line;
    ``ℓ_{tΩ}(η) = t ℓ_Ω(η/t)`` with the left side from the reference at penalty ``t·½‖u‖²``
    (scores divided by t, value multiplied by t); m-SparseMAP ≥ SparseMAP ≥ 0 and equal to the
    reference at the cost-augmented scores."""
    inst = case(dict(seed=4, num_tags=3, neg_inf=0.2))
    module = backend.module("sparsemap")
    tags = backend.array(inst.gold)

    def loss(scores: dict[str, Any], **extra: Any) -> np.ndarray:
        with backend.no_grad():
            return npy(apply(module, "loss", backend.arrays(scores), tags, **extra))

    scores = inst.scores()
    plain, margin = loss(scores), loss(scores, cost="hamming")
    assert (plain >= -1e-10).all() and (margin >= plain - 1e-10).all()
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        augmented = {**inst.seq(b), "emissions": inst.emissions[b, :n] + 1 - np.eye(3)[inst.gold[b, :n]]}
        gold = brute_force.path_score(inst.gold[b, :n], **inst.seq(b))
        assert margin[b] == pytest.approx(reference(**augmented).value + n / 2 - gold, abs=1e-8)
    planted = inst.scores()
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        planted["emissions"][b, np.arange(n), inst.gold[b, :n]] += 50.0
    np.testing.assert_allclose(loss(planted), 0.0, atol=1e-9)
    other = {
        k: (v + np.random.default_rng(1).normal(size=v.shape) if k != "lengths" and v is not None else v)
        for k, v in scores.items()
    }
    middle = {k: (0.5 * (v + other[k]) if k != "lengths" and v is not None else v) for k, v in scores.items()}
    assert (loss(middle) <= 0.5 * (loss(scores) + loss(other)) + 1e-9).all()


def test_partial_loss_is_non_negative_and_zero_when_everything_is_allowed(backend: Backend) -> None:
    inst = case(dict(seed=6, num_tags=3, neg_inf=0.3))
    module = backend.module("sparsemap")
    kw = inst.arrays(backend)
    some = backend.array(random_allowed(np.random.default_rng(2), inst))
    every = backend.array(np.ones(inst.emissions.shape, dtype=bool))
    with backend.no_grad():
        assert (npy(apply(module, "partial_loss", kw, some)) >= -1e-10).all()
        np.testing.assert_allclose(npy(apply(module, "partial_loss", kw, every)), 0.0, atol=1e-12)


# ------------------------------------------------------------------------------ fallbacks


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_full_support_stops_with_a_valid_distribution(solver: str, backend: Backend) -> None:
    """``max_support=2`` on zero scores (u* uniform needs ≥ T atoms): stopped, not converged, a
    distribution over two valid sequences, its gap reported, never NaN."""
    inst = case(dict(seed=0, num_tags=3))
    scores = inst.scores()
    scores["emissions"] = np.zeros_like(scores["emissions"])
    scores["transitions"] = np.zeros_like(scores["transitions"])
    scores["start"] = scores["end"] = None
    out = apply(backend.module("sparsemap"), "solve", backend.arrays(scores), solver=solver, max_support=2)
    weights, converged, gap = npy(out.weights), npy(out.converged), npy(out.error)
    lengths = inst.lengths
    assert np.isfinite(npy(out.unary)).all() and np.isfinite(gap).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-12)
    assert ((weights > 0).sum(-1) <= 2).all()
    assert (~converged[lengths > 1]).all() and (gap[lengths > 1] > 1e-3).all()


@pytest.mark.parametrize("solver", EXACT_SOLVERS)
def test_ties_everywhere(solver: str, backend: Backend) -> None:
    """Zero scores: every sequence ties in the oracle and the KKT systems meet dependent atoms;
    u* is uniform, 1/T at every position (the point of the polytope closest to the origin)."""
    inst = case(dict(seed=0, num_tags=3))
    scores = {
        k: (np.zeros_like(v) if k not in ("lengths",) and v is not None else v)
        for k, v in inst.scores().items()
    }
    out = apply(backend.module("sparsemap"), "solve", backend.arrays(scores), **options(solver))
    unary = npy(out.unary)
    assert npy(out.converged).all()
    np.testing.assert_allclose(unary[inst.valid()], 1 / 3, atol=1e-6)


def test_a_support_at_the_rounding_floor_stops(backend: Backend) -> None:
    """A sentence met in training (Dutch POS, 27 tokens, 17 tags, per-position transitions; saved
    in ``data/``): its gap falls to about 1e-11 at iteration 29 with 30 nearly dependent atoms.
    Held to the rounding floor of well-conditioned systems, the active set went on to 63
    iterations, atoms entering and leaving; in its training batch the system degenerated and
    the loss went NaN. The floor scales with the KKT system's condition number, so it stops."""
    stored = np.load(DATA / "sparsemap_training_stall.npz")
    scores = {key: stored[key] for key in ("emissions", "transitions", "lengths")}
    scores["start"] = scores["end"] = None
    module = backend.module("sparsemap")
    out = apply(module, "solve", backend.arrays(scores, "float32"), **options("active-set"))
    assert npy(out.converged).all() and np.isfinite(npy(out.unary)).all()
    assert int(out.iterations) <= 35 and float(npy(out.error)[0]) < 1e-9
    np.testing.assert_allclose(npy(out.unary).sum(-1), 1.0, atol=1e-5)


@TORCH_ONLY
def test_a_step_that_goes_non_finite_keeps_the_last_iterate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safeguard behind "never NaN": a sequence whose step returns non-finite weights keeps
    its previous iterate, a valid distribution, and stops unconverged; the others go on."""
    import torch

    from implementations.kernels import sparsemap as module

    step = module._active_set_step

    def poisoned(problem: Any, state: Any) -> Any:
        new = step(problem, state)
        return new._replace(weights=new.weights.index_fill(0, torch.tensor([0]), float("nan")))

    monkeypatch.setattr(module, "_active_set_step", poisoned)
    inst = case(dict(seed=0, num_tags=3))
    adapter = get("torch")
    out = apply(adapter.module("sparsemap"), "solve", inst.arrays(adapter), **options("active-set"))
    unary, converged = npy(out.unary), npy(out.converged)
    assert np.isfinite(unary).all() and np.isfinite(npy(out.value)).all()
    np.testing.assert_allclose(npy(out.weights)[0].sum(), 1.0)
    assert not converged[0] and converged[1:].all()


def test_padding_changes_nothing(backend: Backend) -> None:
    inst = case(dict(seed=8, num_tags=4, neg_inf=0.2))
    module = backend.module("sparsemap")
    batched = apply(module, "solve", inst.arrays(backend))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        alone = apply(module, "solve", inst.alone(b).arrays(backend))
        np.testing.assert_allclose(npy(batched.unary)[b, :n], npy(alone.unary)[0], atol=1e-12)
        assert npy(batched.value)[b] == pytest.approx(float(npy(alone.value)[0]), abs=1e-12)


def test_options_are_checked(backend: Backend) -> None:
    inst = case(dict(seed=0, num_tags=2))
    module = backend.module("sparsemap")
    with pytest.raises(ValueError, match="solver"):
        apply(module, "solve", inst.arrays(backend), solver="newton")
    with pytest.raises(ValueError, match="max_support"):
        apply(module, "marginals", inst.arrays(backend), max_support=0)
    with pytest.raises(TypeError, match="cost"):
        apply(module, "marginals", inst.arrays(backend), cost="hamming")


@pytest.mark.parametrize("function", ["loss", "log_partition"])
def test_second_order_is_prop_1(function: str, backend: Backend) -> None:
    """The derivative of the Danskin gradient ``u*`` (reverse over reverse: a gradient penalty) is
    Prop. 1's Jacobian: ``uᵀ J v`` against central differences of the first gradient along ``v``."""
    rng = np.random.default_rng(4)
    inst = make_instance(rng, batch=2, length=4, num_tags=3, lengths=[4, 2], start=False, end=False)
    module = backend.module("sparsemap")
    extra = (backend.array(inst.gold),) if function == "loss" else ()
    u, v = rng.normal(size=inst.emissions.shape), rng.normal(size=inst.emissions.shape)

    def gradient(emissions: np.ndarray) -> np.ndarray:
        scores = {**inst.scores(), "emissions": emissions}
        fn = lambda kw: apply(module, function, kw, *extra)  # noqa: E731
        return backend.value_and_grad(fn, backend.arrays(scores), ["emissions"])[1]["emissions"]

    eps = 1e-6
    numeric = float((u * (gradient(inst.emissions + eps * v) - gradient(inst.emissions - eps * v))).sum())
    numeric /= 2 * eps
    kw = inst.arrays(backend)
    if backend.name == "torch":
        import torch

        emissions = kw["emissions"].clone().requires_grad_(True)
        value = apply(module, function, {**kw, "emissions": emissions}, *extra).sum()
        (first,) = torch.autograd.grad(value, emissions, create_graph=True)
        (second,) = torch.autograd.grad((first * torch.tensor(u)).sum(), emissions)
        reverse = float((second.numpy() * v).sum())
    else:
        import jax

        def first(emissions: Any) -> Any:
            return apply(module, function, {**kw, "emissions": emissions}, *extra).sum()

        second = jax.grad(lambda e: (jax.grad(first)(e) * u).sum())(kw["emissions"])
        reverse = float((np.asarray(second) * v).sum())
    assert reverse == pytest.approx(numeric, rel=1e-6, abs=1e-8)
