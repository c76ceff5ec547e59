"""Bregman CRF (IBP): docs/derivations.md §6, P8–P22, against independent oracles.

Oracles: ``reference/ibp.py`` (Algorithm 1 as reconstructed in docs/derivations.md §3.4,
cluster by cluster in a Python loop) for truncated iterates; ``reference/bregman_convex.py``
(Newton on the smooth dual of ``max_{q ∈ conv(Y)} <q, θ> + H(q)``) for the limit; brute-force
enumeration / the exact CRF for bounds; autograd and finite differences for gradients; closed
forms for lengths 1 and 2. Every test that calls a backend runs against each of them
(``backend`` fixture).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

from implementations.kernels.bcrf import Request
from implementations.kernels.bcrf_numerics import _floor
from implementations.reference import bregman_convex, brute_force, ibp
from implementations.reference.common import logsumexp, softmax, unary_scores

from . import backends
from .backends import Backend
from .instances import (
    Instance,
    all_lengths_instance,
    apply,
    instances,
    make_instance,
    npy,
    random_allowed,
    scale_instance,
)
from .test_crf import gold_indicators

ORDERS = ("odd-even", "even-odd")
CONVERGED = 400  # iterations: violation < 1e-13 at τ = 1 for n <= 12 (docs/derivations.md §3.11 table)


def bcrf(backend: Backend) -> Any:
    return backend.module("bcrf")


def args(inst: Instance, backend: Backend) -> tuple[tuple[Any, ...], dict[str, Any]]:
    t = inst.arrays(backend)
    return (t["emissions"], t["transitions"], t["lengths"]), {"start": t["start"], "end": t["end"]}


def marginals(backend: Backend, inst: Instance, **opts: Any) -> tuple[np.ndarray, np.ndarray]:
    a, kw = args(inst, backend)
    u, p = bcrf(backend).marginals(*a, **kw, **opts)
    return npy(u), npy(p)


def log_partition(backend: Backend, inst: Instance, **opts: Any) -> np.ndarray:
    a, kw = args(inst, backend)
    return npy(bcrf(backend).log_partition(*a, **kw, **opts))


def run(backend: Backend, inst: Instance, *functions: str, **opts: Any) -> list[Any]:
    """Several argument-free functions (``solve``, ``marginals``, ``log_partition``, ``decode``)
    on ``inst`` with the same options; for jax in one compiled program."""
    return backend.calls("bcrf", inst.arrays(backend), *[(fn, (), opts) for fn in functions])


def marginals_and_value(backend: Backend, inst: Instance, **opts: Any) -> tuple[np.ndarray, ...]:
    """``marginals`` (unary, pairwise) and ``log_partition`` with the same options, as NumPy."""
    (unary, pairwise), value = run(backend, inst, "marginals", "log_partition", **opts)
    return npy(unary), npy(pairwise), npy(value)


def masked(inst: Instance, allowed: np.ndarray) -> Instance:
    """Ỹ: emissions set to -inf outside ``allowed`` (inside the lengths only)."""
    em = inst.emissions.copy()
    em[inst.valid()[..., None] & ~allowed] = -np.inf
    return replace(inst, emissions=em)


def onehot_allowed(inst: Instance) -> np.ndarray:
    allowed = np.zeros(inst.emissions.shape, dtype=bool)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        allowed[b, np.arange(n), inst.gold[b, :n]] = True
    return allowed


def gold_scores(inst: Instance) -> np.ndarray:
    return np.array(
        [
            brute_force.path_score(inst.gold[b, : int(inst.lengths[b])], **inst.seq(b))
            for b in range(inst.batch)
        ]
    )


def node_scores(inst: Instance, b: int) -> np.ndarray:
    seq = inst.seq(b)
    return unary_scores(seq["emissions"], seq["start"], seq["end"])


def convex_optimum(inst: Instance, b: int, tau: float) -> bregman_convex.BregmanSolution:
    n = int(inst.lengths[b])
    if n == 1:
        return bregman_convex.solve_unary(node_scores(inst, b)[0] / tau)
    return bregman_convex.solve(inst.arc_weights(b) / tau)


# ------------------------------------------------------------------ truncated iterates vs loop


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("iterations", backends.jax_subset([1, 2, 3, 4, 5], keep=[1, 2, 5]))
@pytest.mark.parametrize("tau", [1.0, 0.1])
def test_matches_reference_loop(backend: Backend, order: str, iterations: int, tau: float) -> None:
    """Prop 19: the batched implementation == the cluster-by-cluster loop (1e-12), all lengths
    1..7, -inf patterns included, shared transitions for odd iteration counts; marginals, B at the
    iterate, violation, MBR decode."""
    seed = 100 * iterations + int(10 * tau) + (order == "even-odd")
    per_position = iterations % 2 == 0
    inst = all_lengths_instance(seed, 3, max_len=7, neg_inf=0.3, scale=2.0, per_position=per_position)
    opts = {"iterations": iterations, "temperature": tau, "order": order}
    res, (unary, pairwise), b_val, decoded = run(
        backend, inst, "solve", "marginals", "log_partition", "decode", **opts
    )
    unary, pairwise, b_val, decoded = npy(unary), npy(pairwise), npy(b_val), npy(decoded)
    assert res.iterations == iterations and isinstance(res.iterations, int)
    np.testing.assert_array_equal(npy(res.unary), unary)
    np.testing.assert_array_equal(npy(res.pairwise), pairwise)
    np.testing.assert_allclose(npy(res.value), b_val, rtol=1e-13, atol=0)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        ref = ibp.bcrf(**inst.seq(b), temperature=tau, iterations=iterations, order=order)
        np.testing.assert_allclose(unary[b, :n], ref.unary, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pairwise[b, : n - 1], ref.pairwise, rtol=0, atol=1e-12)
        assert b_val[b] == pytest.approx(ref.log_partition, rel=1e-12, abs=1e-10)
        assert float(npy(res.error)[b]) == pytest.approx(ref.violation, abs=1e-12)
        _assert_argmax(decoded[b, :n], ref.unary)


def _assert_argmax(decoded: np.ndarray, scores: np.ndarray, tol: float = 1e-9) -> None:
    """Each decoded tag attains its row's maximum (robust to exact ties)."""
    best = scores.max(axis=-1)
    got = scores[np.arange(len(decoded)), decoded]
    np.testing.assert_allclose(got, best, rtol=0, atol=tol)


@backends.given(
    inst=instances(max_len=7, max_tags=4),
    iterations=st.integers(1, 6),
    tau=st.sampled_from([1.0, 0.5, 0.1]),
    order=st.sampled_from(ORDERS),
)
def test_matches_reference_loop_random(
    backend: Backend, inst: Instance, iterations: int, tau: float, order: str
) -> None:
    """Prop 19, random sizes and options (hypothesis)."""
    opts = {"iterations": iterations, "temperature": tau, "order": order}
    unary, pairwise, b_val = marginals_and_value(backend, inst, **opts)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        ref = ibp.bcrf(**inst.seq(b), temperature=tau, iterations=iterations, order=order)
        np.testing.assert_allclose(unary[b, :n], ref.unary, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pairwise[b, : n - 1], ref.pairwise, rtol=0, atol=1e-12)
        assert b_val[b] == pytest.approx(ref.log_partition, rel=1e-12, abs=1e-10)


def test_documented_defaults(backend: Backend) -> None:
    """iterations=10, order="odd-even", τ=1 for marginals/log_partition/loss, τ=0.1 for decode."""
    inst = all_lengths_instance(21, 4, max_len=8, neg_inf=0.2)
    a, kw = args(inst, backend)
    explicit = {"iterations": 10, "order": "odd-even"}
    for x, y in zip(
        marginals(backend, inst), marginals(backend, inst, temperature=1.0, **explicit), strict=True
    ):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(
        log_partition(backend, inst), log_partition(backend, inst, temperature=1.0, **explicit)
    )
    tags = inst.gold_array(backend)
    np.testing.assert_array_equal(
        npy(bcrf(backend).loss(*a, tags, **kw)),
        npy(bcrf(backend).loss(*a, tags, **kw, temperature=1.0, gradient="danskin", **explicit)),
    )
    decoded = npy(bcrf(backend).decode(*a, **kw))
    np.testing.assert_array_equal(decoded, npy(bcrf(backend).decode(*a, **kw, temperature=0.1, **explicit)))
    unary, _ = marginals(backend, inst, temperature=0.1)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        _assert_argmax(decoded[b, :n], unary[b, :n])
        ref = ibp.bcrf(**inst.seq(b), temperature=0.1, iterations=10)
        _assert_argmax(decoded[b, :n], ref.unary)
    # the temperature is not ignored
    assert not np.allclose(marginals(backend, inst, temperature=0.1)[0], marginals(backend, inst)[0])


def test_orders_differ_before_convergence(backend: Backend) -> None:
    """The ``order`` option is honoured: truncated iterates of the two orders differ (n >= 4)."""
    rng = np.random.default_rng(22)
    inst = make_instance(rng, batch=2, length=6, num_tags=3, lengths=[6, 4])
    q1 = marginals(backend, inst, iterations=1, order="odd-even")[1]
    q2 = marginals(backend, inst, iterations=1, order="even-odd")[1]
    assert np.abs(q1 - q2).max() > 1e-4


# ------------------------------------------------------------------------- the limit point


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_length_three_exact_after_one_iteration(backend: Backend, order: str, tau: float) -> None:
    """Prop 9: for n = 3 one iteration already gives the optimum (one cluster, C_odd empty)."""
    rng = np.random.default_rng(23)
    inst = make_instance(rng, batch=6, length=3, num_tags=4, lengths=[3, 3, 3, 3, 2, 1], neg_inf=0.25)
    unary, pairwise, b_val = marginals_and_value(backend, inst, iterations=1, temperature=tau, order=order)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        opt = convex_optimum(inst, b, tau)
        np.testing.assert_allclose(pairwise[b, : n - 1], opt.q, rtol=0, atol=1e-10)
        np.testing.assert_allclose(unary[b, :n], opt.unary, rtol=0, atol=1e-10)
        assert b_val[b] == pytest.approx(opt.value, rel=1e-10, abs=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("num_tags", [2, 3, 4])
@pytest.mark.parametrize("neg_inf", [0.0, 0.3])
def test_converges_to_convex_optimum(backend: Backend, num_tags: int, neg_inf: float) -> None:
    """Props 11, 12, 17: after many iterations (τ = 1) both orders reach the convex optimum,
    -inf patterns included (1e-6 required; in practice ~1e-12), and the violation is ~0."""
    inst = all_lengths_instance(24 + num_tags, num_tags, neg_inf=neg_inf, scale=1.5)
    a, kw = args(inst, backend)
    results = {}
    for order in ORDERS:
        res = bcrf(backend).solve(*a, **kw, iterations=CONVERGED, order=order)
        results[order] = res
        assert (npy(res.error) < 1e-10).all()
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            opt = convex_optimum(inst, b, 1.0)
            assert opt.infeasibility < 1e-12
            np.testing.assert_allclose(npy(res.pairwise)[b, : n - 1], opt.q, rtol=0, atol=1e-6)
            np.testing.assert_allclose(npy(res.unary)[b, :n], opt.unary, rtol=0, atol=1e-6)
            assert float(npy(res.value)[b]) == pytest.approx(opt.value, rel=1e-6, abs=1e-6)
    np.testing.assert_allclose(
        npy(results["odd-even"].pairwise), npy(results["even-odd"].pairwise), rtol=0, atol=1e-10
    )


@pytest.mark.parametrize("tau", [0.5, 0.25, 0.1])
def test_converges_to_convex_optimum_low_temperature(backend: Backend, tau: float) -> None:
    """As above at lower temperature (more iterations needed; still the same limit)."""
    inst = all_lengths_instance(31, 3, neg_inf=0.2)
    _unary, pairwise, b_val = marginals_and_value(
        backend, inst, iterations=int(CONVERGED / tau), temperature=tau
    )
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        opt = convex_optimum(inst, b, tau)
        np.testing.assert_allclose(pairwise[b, : n - 1], opt.q, rtol=0, atol=1e-6)
        assert b_val[b] == pytest.approx(opt.value, rel=1e-6, abs=1e-6)


def test_convex_oracle_self_check() -> None:
    """Oracle check: the dual solution is feasible, beats every vertex (a path, H = 0) and every
    random mixture of paths, and the closed-form cluster projection solves its KL problem."""
    rng = np.random.default_rng(32)
    inst = make_instance(rng, batch=3, length=5, num_tags=3, lengths=[5, 4, 3], neg_inf=0.3)
    for b in range(inst.batch):
        w = inst.arc_weights(b)
        opt = bregman_convex.solve(w)
        assert opt.infeasibility < 1e-12 and ibp.violation(opt.q) < 1e-12
        enum = brute_force.enumerate_scores(**inst.seq(b))
        finite = np.isfinite(enum.scores)
        assert opt.value >= enum.scores.max() - 1e-12
        paths = enum.paths[finite]
        for _ in range(20):
            mix = rng.dirichlet(np.ones(len(paths)))
            q = np.zeros_like(w)
            for p, path in zip(mix, paths, strict=True):
                q[np.arange(len(path) - 1), path[:-1], path[1:]] += p
            assert ibp.bregman_value(q, w) <= opt.value + 1e-12
    # closed-form projection onto one cluster vs a numerical KL projection (prop 8)
    from scipy.optimize import minimize

    w = rng.normal(size=(2, 3, 3))
    k = np.exp(w)
    log_q = np.log(k)
    ibp.project_cluster(log_q, 1)
    q_closed = np.exp(log_q)

    def kl(x: np.ndarray) -> float:
        x = x.reshape(2, 3, 3)
        return float(np.sum(x * np.log(x / k) - x))

    cons = [{"type": "eq", "fun": lambda x: x.reshape(2, 3, 3)[0].sum() - 1.0}] + [
        {
            "type": "eq",
            "fun": (lambda x, t=t: x.reshape(2, 3, 3)[0][:, t].sum() - x.reshape(2, 3, 3)[1][t].sum()),
        }
        for t in range(3)
    ]
    res = minimize(
        kl,
        np.full(18, 1 / 9),
        constraints=cons,
        bounds=[(1e-12, None)] * 18,
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 500},
    )
    np.testing.assert_allclose(res.x.reshape(2, 3, 3), q_closed, atol=1e-6)
    assert ibp.violation(q_closed) < 1e-12


@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_stationarity_at_every_iterate(backend: Backend, tau: float) -> None:
    """Prop 10: w/τ − log q_k lies in the row space of the constraint matrix for every k
    (least-squares residual ~1e-12); only feasibility improves with k."""
    inst = all_lengths_instance(33, 3, max_len=7, neg_inf=0.2)
    for k in (1, 2, 3, 5):
        _, pairwise = marginals(backend, inst, iterations=k, temperature=tau)
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            if n < 3:
                continue
            q = pairwise[b, : n - 1]
            keep = q > 0
            a_mat, _ = bregman_convex.constraint_system(keep)
            target = inst.arc_weights(b)[keep] / tau - np.log(q[keep])
            coef = np.linalg.lstsq(a_mat.T, target, rcond=None)[0]
            residual = np.abs(a_mat.T @ coef - target).max()
            assert residual < 1e-9 * max(1.0, np.abs(target).max()), (k, b, residual)
            # sanity: a generic perturbation of log q is *not* in the row space
            bumped = target.copy()
            bumped[0] += 0.1
            coef = np.linalg.lstsq(a_mat.T, bumped, rcond=None)[0]
            assert np.abs(a_mat.T @ coef - bumped).max() > 1e-3


def test_violation_decreases(backend: Backend) -> None:
    """Prop 11: the max constraint violation shrinks with iterations (geometrically, τ = 1), is
    0 for lengths <= 2, and equals the violation recomputed from the returned iterate."""
    rng = np.random.default_rng(34)
    inst = make_instance(rng, batch=4, length=12, num_tags=4, lengths=[12, 7, 2, 1], neg_inf=0.1)
    a, kw = args(inst, backend)
    history = []
    for k in (1, 5, 20, 100, 400):
        res = bcrf(backend).solve(*a, **kw, iterations=k)
        v = npy(res.error)
        q = npy(res.pairwise)
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            assert v[b] == pytest.approx(ibp.violation(q[b, : n - 1]), abs=1e-14)
        history.append(v)
    history = np.array(history)
    for b in (0, 1):
        assert history[0, b] > 1e-3
        assert history[1, b] < history[0, b] and history[2, b] < history[1, b]
        assert history[3, b] < 1e-8 and history[4, b] < 1e-13


def test_violation_is_zero_for_short_sequences(backend: Backend) -> None:
    """``violation`` is defined as 0 for lengths <= 2 (no inner node; n = 2 is a softmax)."""
    rng = np.random.default_rng(341)
    inst = make_instance(
        rng, batch=6, length=3, num_tags=4, lengths=[1, 2, 1, 2, 2, 3], neg_inf=0.2, scale=3.0
    )
    a, kw = args(inst, backend)
    for k in (1, 7):
        v = npy(bcrf(backend).solve(*a, **kw, iterations=k).error)
        assert (v[:5] == 0).all(), v


# ----------------------------------------------------------------------------- bounds, gradient


def test_bounds_against_crf(backend: Backend) -> None:
    """Prop 13: A_Y(w) <= B_Y(w) <= A_Y(w) + (n−2) log T at convergence (τ = 1), A from ``crf``."""
    for seed, neg_inf in ((35, 0.0), (36, 0.3)):
        inst = all_lengths_instance(seed, 4, neg_inf=neg_inf)
        a, kw = args(inst, backend)
        log_z = npy(backend.module("crf").log_partition(*a, **kw))
        b_val = log_partition(backend, inst, iterations=CONVERGED)
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            assert log_z[b] - 1e-10 <= b_val[b] <= log_z[b] + max(n - 2, 0) * math.log(4) + 1e-10
            if n <= 2:
                assert b_val[b] == pytest.approx(log_z[b], abs=1e-10)
            elif neg_inf == 0.0:
                assert b_val[b] > log_z[b] + 1e-6  # node entropies are strictly positive


@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_gradient_of_b_is_q(backend: Backend, tau: float) -> None:
    """Prop 14: ∂B_Y(w/τ)/∂w = q*/τ by central finite differences at convergence."""
    rng = np.random.default_rng(37)
    inst = make_instance(rng, batch=2, length=5, num_tags=3, lengths=[5, 4], neg_inf=0.2)
    _, pairwise = marginals(backend, inst, iterations=CONVERGED, temperature=tau)
    eps = 1e-5
    finite = np.argwhere(np.isfinite(inst.transitions) & inst.valid()[:, 1:, None, None])
    for idx in finite[rng.choice(len(finite), size=6, replace=False)]:
        idx = tuple(int(i) for i in idx)
        vals = []
        for sign in (1, -1):
            trans = inst.transitions.copy()
            trans[idx] += sign * eps
            vals.append(
                log_partition(
                    backend, replace(inst, transitions=trans), iterations=CONVERGED, temperature=tau
                )[idx[0]]
            )
        fd = (vals[0] - vals[1]) / (2 * eps)
        assert fd == pytest.approx(pairwise[idx] / tau, abs=1e-7), idx


# ----------------------------------------------------------------------------------- losses


@pytest.mark.parametrize("iterations", [1, 3, 10])
@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_fenchel_young_loss_value(backend: Backend, iterations: int, tau: float) -> None:
    """Prop 15: loss = τ B_Y(w/τ) − <w, y> (the iterate's B), at any number of iterations."""
    inst = all_lengths_instance(38 + iterations, 3, neg_inf=0.2)
    opts = {"iterations": iterations, "temperature": tau}
    loss, b_val = map(
        npy,
        backend.calls(
            "bcrf",
            inst.arrays(backend),
            ("loss", (inst.gold_array(backend),), opts),
            ("log_partition", (), opts),
        ),
    )
    np.testing.assert_allclose(loss, tau * b_val - gold_scores(inst), rtol=1e-12, atol=1e-12)


def planted_margin_instance(seed: int, bonus: float, *, batch: int = 8, length: int = 10) -> Instance:
    """Small N(0, 0.3²) scores plus ``bonus`` on the planted gold tags: a large MAP margin."""
    rng = np.random.default_rng(seed)
    inst = make_instance(rng, batch=batch, length=length, num_tags=5, neg_inf=0.0, scale=0.3)
    extra = np.zeros_like(inst.emissions)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        extra[b, np.arange(n), inst.gold[b, :n]] = bonus
    return replace(inst, emissions=inst.emissions + extra)


def test_fenchel_young_loss_positive_and_vanishes_with_margin(backend: Backend) -> None:
    """Prop 15: ℓ > 0 (interior optimum); when y is the MAP, ℓ(s·w) is non-increasing in s
    (each <q − y, w> <= 0) and → 0 as s → ∞ given a margin."""
    inst = planted_margin_instance(39, 4.0)
    a, kw = args(inst, backend)
    viterbi = npy(backend.module("crf").decode(*a, **kw))
    np.testing.assert_array_equal(viterbi, np.where(inst.valid(), inst.gold, -1))
    losses = []
    for s in (0.3, 1.0, 3.0, 10.0):
        scaled = scale_instance(inst, s)
        a, kw = args(scaled, backend)
        losses.append(npy(bcrf(backend).loss(*a, scaled.gold_array(backend), **kw, iterations=CONVERGED)))
    losses = np.array(losses)
    assert (losses[:3] > 0).all()
    assert (np.diff(losses, axis=0) <= 1e-12).all()
    assert (losses[0] > 1.0).all() and (losses[-1] < 1e-3).all()


@pytest.mark.parametrize("iterations", [1, 3])
@pytest.mark.parametrize("tau", backends.jax_subset([1.0, 0.5], keep=[0.5]))
def test_danskin_gradient(backend: Backend, iterations: int, tau: float) -> None:
    """Prop 14/22: with ``gradient="danskin"`` ∇_w ℓ = q_K − y, whatever K (no backprop through
    the iterations): per-position transitions get q − y, start/emissions/end what the folding
    (emissions[0] + start on the first arc group's rows, emissions[i] on group i−1's columns,
    end on the last group's columns) routes to them."""
    inst = all_lengths_instance(40 + iterations, 3, neg_inf=0.2)
    opts = {"iterations": iterations, "temperature": tau}
    tags = inst.gold_array(backend)
    _, grad = backend.value_and_grad(
        lambda k: apply(bcrf(backend), "loss", k, tags, gradient="danskin", **opts),
        inst.arrays(backend),
        ("emissions", "transitions", "start", "end"),
    )
    unary, q = marginals(backend, inst, **opts)
    y_node, y_arc = gold_indicators(inst)
    np.testing.assert_allclose(grad["transitions"], q - y_arc, rtol=0, atol=1e-12)
    g_em = np.zeros_like(inst.emissions)
    g_start = np.zeros(inst.num_tags)
    g_end = np.zeros(inst.num_tags)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        if n == 1:
            p = unary[b, 0]
            g_em[b, 0], g_start, g_end = p, g_start + p, g_end + p
            continue
        qb = q[b, : n - 1]
        g_em[b, 0] = qb[0].sum(1)
        g_em[b, 1:n] = qb.sum(1)
        g_start += qb[0].sum(1)
        g_end += qb[-1].sum(0)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        g_start -= y_node[b, 0]
        g_end -= y_node[b, n - 1]
    np.testing.assert_allclose(grad["emissions"], g_em - y_node, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad["start"], g_start, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad["end"], g_end, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fn", ["loss", "partial_loss"])
@pytest.mark.parametrize("tau", backends.jax_subset([1.0, 0.7], keep=[0.7]))
def test_unrolled_gradient_equals_finite_differences(backend: Backend, fn: str, tau: float) -> None:
    """Prop 22: ``gradient="unrolled"`` is the true gradient of the truncated loss (central FD),
    and the loss value does not depend on the gradient mode."""
    rng = np.random.default_rng(43)
    inst = make_instance(rng, batch=3, length=6, num_tags=3, lengths=[6, 4, 2], neg_inf=0.2)
    target = inst.gold_array(backend) if fn == "loss" else backend.array(random_allowed(rng, inst))
    opts = {"iterations": 3, "temperature": tau}

    def call(kw: dict[str, Any], gradient: str = "unrolled") -> Any:
        return apply(bcrf(backend), fn, kw, target, gradient=gradient, **opts)

    loss, grads = backend.value_and_grad(call, inst.arrays(backend), ("emissions", "transitions", "start"))
    np.testing.assert_allclose(
        loss, npy(call(inst.arrays(backend), gradient="danskin")), rtol=1e-13, atol=1e-13
    )

    def value(x: Instance) -> float:
        return float(npy(call(x.arrays(backend))).sum())

    eps = 1e-6
    for field in ("emissions", "transitions", "start"):
        base = getattr(inst, field)
        grad = grads[field]
        valid = (
            inst.valid()[..., None]
            if field == "emissions"
            else (inst.valid()[:, 1:, None, None] if field == "transitions" else np.ones(1, dtype=bool))
        )
        cand = np.argwhere(np.isfinite(base) & valid)
        for idx in cand[rng.choice(len(cand), size=min(8, len(cand)), replace=False)]:
            idx = tuple(int(i) for i in idx)
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            fd = (value(replace(inst, **{field: plus})) - value(replace(inst, **{field: minus}))) / (2 * eps)
            assert fd == pytest.approx(grad[idx], abs=1e-7), (field, idx)


def test_unrolled_gradient_approaches_danskin(backend: Backend) -> None:
    """Prop 22: the two gradients differ for few iterations and coincide at convergence."""
    rng = np.random.default_rng(44)
    inst = make_instance(rng, batch=3, length=7, num_tags=3, lengths=[7, 5, 3], neg_inf=0.1)

    def grads(mode: str, k: int) -> np.ndarray:
        tags = inst.gold_array(backend)
        _, g = backend.value_and_grad(
            lambda kw: apply(bcrf(backend), "loss", kw, tags, gradient=mode, iterations=k),
            inst.arrays(backend),
            ("emissions", "transitions"),
        )
        return np.concatenate([g["emissions"].ravel(), g["transitions"].ravel()])

    gaps = [np.abs(grads("unrolled", k) - grads("danskin", k)).max() for k in (1, 5, 300)]
    assert gaps[0] > 1e-3
    assert gaps[1] < gaps[0]
    assert gaps[2] < 1e-8


@pytest.mark.parametrize("iterations", [1, 4])
def test_partial_loss_properties(backend: Backend, iterations: int) -> None:
    """Prop 16 (at any K): partial = τ(B_Y − B_Ỹ) with Ỹ = emissions masked; one-hot gold gives
    the FY loss; allowing everything gives 0; the Danskin gradient is q − q̃."""
    tau = 0.5
    inst = all_lengths_instance(45 + iterations, 3, neg_inf=0.2)
    rng = np.random.default_rng(46)
    allowed = random_allowed(rng, inst)
    opts = {"iterations": iterations, "temperature": tau}
    a, kw = args(inst, backend)
    partial = npy(bcrf(backend).partial_loss(*a, backend.array(allowed), **kw, **opts))
    expected = tau * (
        log_partition(backend, inst, **opts) - log_partition(backend, masked(inst, allowed), **opts)
    )
    np.testing.assert_allclose(partial, expected, rtol=1e-12, atol=1e-12)
    for b in range(inst.batch):
        full = ibp.bcrf(**inst.seq(b), temperature=tau, iterations=iterations)
        sub = ibp.bcrf(**masked(inst, allowed).seq(b), temperature=tau, iterations=iterations)
        assert partial[b] == pytest.approx(
            tau * (full.log_partition - sub.log_partition), rel=1e-11, abs=1e-11
        )
    loss = npy(bcrf(backend).loss(*a, inst.gold_array(backend), **kw, **opts))
    onehot = npy(bcrf(backend).partial_loss(*a, backend.array(onehot_allowed(inst)), **kw, **opts))
    np.testing.assert_allclose(onehot, loss, rtol=1e-11, atol=1e-11)
    everything = npy(
        bcrf(backend).partial_loss(*a, backend.array(np.ones(inst.emissions.shape, dtype=bool)), **kw, **opts)
    )
    np.testing.assert_allclose(everything, 0.0, atol=1e-12)
    # Danskin gradient
    allow = backend.array(allowed)
    _, grad = backend.value_and_grad(
        lambda kw: apply(bcrf(backend), "partial_loss", kw, allow, **opts),
        inst.arrays(backend),
        ("transitions",),
    )
    q = marginals(backend, inst, **opts)[1]
    q_sub = marginals(backend, masked(inst, allowed), **opts)[1]
    np.testing.assert_allclose(grad["transitions"], q - q_sub, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_partial_loss_at_convergence(backend: Backend) -> None:
    """Prop 16 (at the limit): ℓ̃ >= 0, monotone under shrinking Ỹ, masked IBP == the convex
    optimum over conv(Ỹ)."""
    inst = all_lengths_instance(47, 3, neg_inf=0.1)
    rng = np.random.default_rng(48)
    a, kw = args(inst, backend)
    big = random_allowed(rng, inst, 0.8)
    small = big & random_allowed(rng, inst, 0.5)
    l_big = npy(bcrf(backend).partial_loss(*a, backend.array(big), **kw, iterations=CONVERGED))
    l_small = npy(bcrf(backend).partial_loss(*a, backend.array(small), **kw, iterations=CONVERGED))
    loss = npy(bcrf(backend).loss(*a, inst.gold_array(backend), **kw, iterations=CONVERGED))
    assert (l_big >= -1e-10).all()
    assert (l_small >= l_big - 1e-10).all()
    assert (loss >= l_small - 1e-10).all()
    sub = masked(inst, small)
    b_sub = log_partition(backend, sub, iterations=CONVERGED)
    for b in range(inst.batch):
        assert b_sub[b] == pytest.approx(convex_optimum(sub, b, 1.0).value, rel=1e-8, abs=1e-8)


# --------------------------------------------------------------------------- invariances, edges


@pytest.mark.parametrize("iterations", [1, 2, 5])
@pytest.mark.parametrize("tau", [1.0, 0.1])
def test_arc_group_shift_invariance(backend: Backend, iterations: int, tau: float) -> None:
    """Prop 18: adding c_i to a whole arc group leaves q_k unchanged for every k >= 1, and shifts
    B_Y(w/τ) by Σ_i c_i / τ (each group of the iterate sums to one)."""
    inst = all_lengths_instance(49, 3, neg_inf=0.2)
    rng = np.random.default_rng(50)
    shifts = rng.normal(0.0, 3.0, size=(inst.batch, inst.length - 1))
    shifted = replace(inst, transitions=inst.transitions + shifts[..., None, None])
    opts = {"iterations": iterations, "temperature": tau}
    u0, p0, b0 = marginals_and_value(backend, inst, **opts)
    u1, p1, b1 = marginals_and_value(backend, shifted, **opts)
    np.testing.assert_allclose(p1, p0, rtol=0, atol=1e-11)
    np.testing.assert_allclose(u1, u0, rtol=0, atol=1e-11)
    expected = b0 + np.array([shifts[b, : int(inst.lengths[b]) - 1].sum() for b in range(inst.batch)]) / tau
    np.testing.assert_allclose(b1, expected, rtol=1e-11, atol=1e-10)


@pytest.mark.parametrize("tau", [1.0, 0.1])
def test_lengths_one_and_two_closed_forms(backend: Backend, tau: float) -> None:
    """Prop 21: length 1 = softmax over tags of (emissions + start + end)/τ; length 2 = softmax
    over T² of w/τ (normalised!), B = logsumexp; the loss is τ·logsumexp − gold score."""
    rng = np.random.default_rng(51)
    inst = make_instance(rng, batch=4, length=2, num_tags=4, lengths=[1, 2, 1, 2], neg_inf=0.3, scale=2.0)
    opts = {"iterations": 3, "temperature": tau}
    unary, pairwise, b_val = marginals_and_value(backend, inst, **opts)
    a, kw = args(inst, backend)
    loss = npy(bcrf(backend).loss(*a, inst.gold_array(backend), **kw, **opts))
    decoded = npy(bcrf(backend).decode(*a, **kw, temperature=tau))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        if n == 1:
            theta = node_scores(inst, b)[0] / tau
            np.testing.assert_allclose(unary[b, 0], softmax(theta), rtol=0, atol=1e-14)
            assert b_val[b] == pytest.approx(float(logsumexp(theta)), rel=1e-14)
        else:
            theta = inst.arc_weights(b)[0] / tau
            expected = softmax(theta.ravel()).reshape(theta.shape)
            np.testing.assert_allclose(pairwise[b, 0], expected, rtol=0, atol=1e-14)
            assert pairwise[b, 0].sum() == pytest.approx(1.0, abs=1e-14)
            np.testing.assert_allclose(unary[b, 0], expected.sum(1), rtol=0, atol=1e-14)
            np.testing.assert_allclose(unary[b, 1], expected.sum(0), rtol=0, atol=1e-14)
            assert b_val[b] == pytest.approx(float(logsumexp(theta)), rel=1e-14)
        _assert_argmax(decoded[b, :n], unary[b, :n])
    np.testing.assert_allclose(loss, tau * b_val - gold_scores(inst), rtol=1e-13, atol=1e-13)


def test_neg_inf_gives_exact_zeros_and_no_nan(backend: Backend) -> None:
    """Prop 17: heavy -inf patterns (BIES-like density), τ = 0.1: no NaN anywhere, exactly zero
    mass on forbidden arcs, dead nodes get zero mass, every arc group still sums to one."""
    rng = np.random.default_rng(52)
    inst = make_instance(rng, batch=6, length=12, num_tags=5, neg_inf=0.5, scale=2.0)
    a, kw = args(inst, backend)
    for k in (1, 10, 50):
        res = bcrf(backend).solve(*a, **kw, iterations=k, temperature=0.1)
        unary, q = npy(res.unary), npy(res.pairwise)
        assert np.isfinite(unary).all() and np.isfinite(q).all()
        assert np.isfinite(npy(res.value)).all() and np.isfinite(npy(res.error)).all()
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            w = inst.arc_weights(b)
            qb = q[b, : n - 1]
            assert (qb[np.isneginf(w)] == 0).all()
            assert (qb[~bregman_convex.useful_arcs(w)] == 0).all() or k == 1
            np.testing.assert_allclose(qb.sum((1, 2)), 1.0, atol=1e-12)
            assert (unary[b, :n][np.isneginf(inst.emissions[b, :n])] == 0).all()
    tags = inst.gold_array(backend)
    _, grad = backend.value_and_grad(
        lambda kw: apply(bcrf(backend), "loss", kw, tags, gradient="unrolled", iterations=5),
        inst.arrays(backend),
        ("emissions", "transitions"),
    )
    assert np.isfinite(grad["emissions"]).all() and np.isfinite(grad["transitions"]).all()


@pytest.mark.parametrize("iterations", [10, CONVERGED])
def test_mbr_equals_viterbi_with_a_planted_margin(backend: Backend, iterations: int) -> None:
    """Prop 20: MBR decoding (τ = 0.1) == Viterbi when the best path has a large margin."""
    inst = planted_margin_instance(53, 4.0)
    a, kw = args(inst, backend)
    viterbi = npy(backend.module("crf").decode(*a, **kw))
    np.testing.assert_array_equal(viterbi, np.where(inst.valid(), inst.gold, -1))
    mbr = npy(bcrf(backend).decode(*a, **kw, iterations=iterations))
    np.testing.assert_array_equal(mbr, viterbi)


@pytest.mark.parametrize("gradient", ["danskin", "unrolled"])
@pytest.mark.parametrize("fn", ["loss", "partial_loss"])
def test_gradients_are_finite_when_no_single_tag_may_start_and_end(
    backend: Backend, fn: str, gradient: str
) -> None:
    """BIES-like boundaries (only tag 0 may start, only tag 1 may end) make every length-1 tag
    score -inf; sequences of length >= 2 must still get finite gradients (a one-hot ``allowed``,
    the fully annotated case of the partial loss, was a NaN regression)."""
    rng = np.random.default_rng(7)
    lengths = np.array([2, 3, 4])
    tags = np.array([[0, 1, -1, -1], [0, 2, 1, -1], [0, 2, 2, 1]])
    scores = {
        "emissions": rng.normal(size=(3, 4, 3)),
        "transitions": rng.normal(size=(3, 3, 3, 3)),
        "lengths": lengths,
        "start": np.array([0.0, -np.inf, -np.inf]),
        "end": np.array([-np.inf, 0.0, -np.inf]),
    }
    target = tags if fn == "loss" else np.eye(3, dtype=bool)[tags] & (tags >= 0)[..., None]
    inputs = backend.arrays(scores, "float64")
    target_array = backend.array(target)
    value, grads = backend.value_and_grad(
        lambda k: getattr(bcrf(backend), fn)(
            k["emissions"],
            k["transitions"],
            k["lengths"],
            target_array,
            start=k["start"],
            end=k["end"],
            iterations=3,
            gradient=gradient,
        ),
        inputs,
        ("emissions", "transitions"),
    )
    assert np.isfinite(value).all()
    for name, grad in grads.items():
        assert np.isfinite(grad).all(), name


# ------------------------------------------------------------------ scaling form == log form

#: float64 to rounding; float32 a fifth of the agreement report's float32 tolerance (crfbench.agreement):
#: the scaling form's log q is a sum of a kernel's and two scalings' logs, each rounded.
FORM_TOLERANCE = {"float64": 1e-12, "float32": 2e-5}


#: (τ, dtype) of the jax half (each compiles twelve programs, 15-20 s a case here): the linear
#: products to float64 rounding, and the log-space fallbacks where float32's floor sends the most
JAX_FORM_CASES = ((0.1, "float64"), (0.01, "float32"))


@pytest.mark.parametrize(
    ("tau", "dtype"),
    [
        pytest.param(tau, dtype, marks=() if (tau, dtype) in JAX_FORM_CASES else backends.TORCH_ONLY)
        for tau in (1.0, 0.1, 0.01)
        for dtype in ("float64", "float32")
    ],
)
def test_scaling_form_equals_log_form(backend: Backend, dtype: str, tau: float) -> None:
    """The scaling form (default) and the log form compute the same iterates: every length 1..9,
    -inf patterns, both orders, τ down to 0.01 (where the scaling form's log-space fallbacks are
    exercised), in float64 and float32; marginals, value, error history and both
    gradients of the loss."""
    inst = all_lengths_instance(71, 5, max_len=9, neg_inf=0.3, scale=3.0)
    kw = inst.arrays(backend, dtype)
    tags = inst.gold_array(backend)
    tol = FORM_TOLERANCE[dtype]
    # the forms round differently: a log of size ~|w|/τ carries ~ε|w|/τ, hence a looser bound at
    # τ = 0.01 (the scalings grow that large)
    marginal_tol = tol * max(1.0, 0.1 / tau)
    for order in ORDERS:
        opts = {"iterations": 7, "temperature": tau, "order": order}
        log_res, scaled_res = (
            apply(bcrf(backend), "solve", kw, **opts, form=form) for form in ("log", "scaling")
        )
        for field in ("unary", "pairwise", "errors"):
            np.testing.assert_allclose(
                npy(getattr(scaled_res, field)), npy(getattr(log_res, field)), rtol=0, atol=marginal_tol
            )
        np.testing.assert_allclose(npy(scaled_res.value), npy(log_res.value), rtol=tol, atol=tol / tau)
        for b in np.flatnonzero(inst.lengths > 1):  # forbidden arcs carry exactly no mass
            n = int(inst.lengths[b])
            assert (npy(scaled_res.pairwise)[b, : n - 1][np.isneginf(inst.arc_weights(b))] == 0).all()
        for gradient in ("danskin", "unrolled"):
            grads = [
                backend.value_and_grad(
                    lambda kw, options={**opts, "gradient": gradient, "form": form}: apply(
                        bcrf(backend), "loss", kw, tags, **options
                    ),
                    kw,
                    ("emissions", "transitions"),
                )
                for form in ("log", "scaling")
            ]
            (log_value, log_grad), (value, grad) = grads
            np.testing.assert_allclose(value, log_value, rtol=tol, atol=tol / tau)
            for name in ("emissions", "transitions"):
                assert np.isfinite(grad[name]).all()
                np.testing.assert_allclose(grad[name], log_grad[name], rtol=0, atol=10 * tol / tau)


def _torch_solve_and_loss(inst: Any, dtype: str, **options: Any) -> list[np.ndarray]:
    """Marginals, value and both gradients of the loss (Danskin and unrolled) of torch BCRF."""
    backend = backends.get("torch")
    kw, tags = inst.arrays("torch", dtype), inst.gold_array(backend)
    res = apply(bcrf(backend), "solve", kw, **options)
    out = [npy(res.unary), npy(res.pairwise), npy(res.value)]
    for gradient in ("danskin", "unrolled"):
        value, grad = backend.value_and_grad(
            lambda kw, o={**options, "gradient": gradient}: apply(bcrf(backend), "loss", kw, tags, **o),
            kw,
            ("emissions", "transitions"),
        )
        out += [np.asarray(value), grad["emissions"], grad["transitions"]]
    return out


def _record_runs(monkeypatch: pytest.MonkeyPatch, kernel: Any, sweep: bool = True) -> list[str]:
    """The names of what runs torch's large kernels, as they run: each compiled function
    (``_run_compiled``) and ``"sweep"`` for each call of the C sweep (:mod:`_sweep`), which
    is kept off unless ``sweep``: the linear state then iterates by compiled projections, as on
    a GPU."""
    from implementations.torch_backend import _sweep

    runs: list[str] = []
    run_compiled, iterations = kernel.compilation._run_compiled, _sweep.iterations
    monkeypatch.setattr(
        kernel.compilation,
        "_run_compiled",
        lambda f, *args: runs.append(f.__name__) or run_compiled(f, *args),
    )
    monkeypatch.setattr(_sweep, "iterations", lambda *args: runs.append("sweep") or iterations(*args))
    if not sweep:
        monkeypatch.setattr(_sweep, "available", lambda device, dtype, num_tags: False)
    else:
        monkeypatch.setattr(_sweep, "FROM_TAGS", 1)
    return runs


#: What iterates the linear state: the C sweep (on the CPU) or compiled projections (elsewhere)
LINEAR_RUNS = {True: "sweep", False: "_linear_projected"}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("tau", "finite_transitions", "sweep"),
    [(1.0, True, True), (1.0, True, False), (1.0, False, True), (0.01, False, True)],
    ids=["vouched-sweep", "vouched-compiled", "unvouched", "log-fallback"],
)
def test_fused_products_equal_eager_ones(
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
    tau: float,
    finite_transitions: bool,
    sweep: bool,
) -> None:
    """Torch's compiled products and projections (large per-position kernels; here every kernel,
    ``FUSED_FROM`` = 1, each then laid out parity by parity and read off by parity) give the eager
    ones' marginals, values and gradients: every length 1..6, -inf emissions, padding, both
    gradients. A vouched kernel (finite transitions, τ = 1) iterates in linear space where
    autograd does not record (the Danskin loss, ``solve``): by the C sweep, or each projection
    compiled whole; an unvouched one compiles its products alone, and at τ = 0.01 falls back to
    log space."""
    torch = pytest.importorskip("torch")
    import implementations.torch_backend.bcrf as kernel

    inst = all_lengths_instance(72, 4, max_len=6, neg_inf=0.3, scale=3.0)
    if finite_transitions:  # -inf emissions (dead tags) with a vouched kernel
        inst = replace(inst, transitions=np.where(np.isneginf(inst.transitions), -2.0, inst.transitions))
    compiled = _record_runs(monkeypatch, kernel, sweep)
    tol = FORM_TOLERANCE[dtype]
    options = {"iterations": 5, "temperature": tau}
    eager = _torch_solve_and_loss(inst, dtype, **options)
    assert compiled == []
    per_position = torch.zeros(2, 3, 4, 4, dtype=getattr(torch, dtype))
    assert not kernel.transition_kernel._kernel(per_position, 1.0).by_parity
    with monkeypatch.context() as patch:
        patch.setattr(kernel.compilation, "FUSED_FROM", 1)
        fused = _torch_solve_and_loss(inst, dtype, **options)
        assert kernel.transition_kernel._kernel(per_position, 1.0).by_parity
    linear = {LINEAR_RUNS[sweep]} if finite_transitions else set()
    assert {"_projected", *LINEAR_RUNS.values()} & set(compiled) == linear
    assert "_row_products" in compiled  # the start's and the read-off's products, at least
    for got, expected in zip(fused, eager, strict=True):
        assert np.isfinite(got).all() == np.isfinite(expected).all()
        np.testing.assert_allclose(got, expected, rtol=tol, atol=10 * tol / tau)


@pytest.mark.parametrize("sweep", [True, False], ids=["sweep", "compiled"])
def test_a_kernel_laid_out_by_parity_makes_its_transposes_where_a_call_reads_them(
    monkeypatch: pytest.MonkeyPatch, sweep: bool
) -> None:
    """Laid out by parity, a kernel leaves out each parity's Kᵀ (as large as its arcs) until a call
    reads it: the sweep's marginals never do; the loss's read-off (its in-flows) or the compiled
    projections make it, once a call, as K's transpose. Made, it is not made again."""
    torch = pytest.importorskip("torch")
    import implementations.torch_backend.bcrf as kernel

    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    runs = _record_runs(monkeypatch, kernel, sweep)
    made = []
    with_transposes = kernel.transition_kernel._with_transposes
    monkeypatch.setattr(
        kernel.forms,
        "_with_transposes",
        lambda k: made.append(k.parities[0][1] is None) or with_transposes(k),
    )
    inst = all_lengths_instance(75, 4, max_len=6)
    inst = replace(inst, transitions=np.where(np.isneginf(inst.transitions), -2.0, inst.transitions))
    backend = backends.get("torch")
    kw, tags = inst.arrays("torch", "float64"), inst.gold_array(backend)
    apply(bcrf(backend), "marginals", kw, iterations=3)
    assert made.count(True) == (0 if sweep else 1) and LINEAR_RUNS[sweep] in runs
    made.clear()
    apply(bcrf(backend), "loss", kw, tags, iterations=3, gradient="danskin")
    assert made.count(True) == 1  # the read-off's, or the projections' (which the read-off reuses)
    per_position = kernel.transition_kernel._kernel(torch.rand(2, 3, 4, 4, dtype=torch.float64), 1.0)
    assert per_position.by_parity and all(transposed is None for _, transposed in per_position.parities)
    full = with_transposes(per_position)
    for k, transposed in full.parities:
        assert torch.equal(transposed, k.transpose(-1, -2)) and transposed.is_contiguous()
    assert with_transposes(full) is full


def test_the_odd_groups_under_fused_from_give_the_eager_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel whose even groups just reach ``FUSED_FROM`` is laid out by parity while its odd
    groups, one fewer, stay under it: their products take a batched matmul, without the Kᵀ the
    sweep's calls never make (T = 32, from ``ROW_VECTOR_FROM``). Marginals, value and gradients
    are the eager ones."""
    pytest.importorskip("torch")
    import implementations.torch_backend.bcrf as kernel

    inst = all_lengths_instance(76, 32, max_len=6)  # 5 arc groups: 3 even, 2 odd
    inst = replace(inst, transitions=np.where(np.isneginf(inst.transitions), -2.0, inst.transitions))
    eager = _torch_solve_and_loss(inst, "float64", iterations=3)
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", len(inst.transitions) * 3 * 32**2)
    runs = _record_runs(monkeypatch, kernel)
    for got, expected in zip(_torch_solve_and_loss(inst, "float64", iterations=3), eager, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    assert "sweep" in runs


def _steep_chain(torch: Any, dtype: str, spread: float) -> tuple[Any, ...]:
    """Scores of a batch of two (lengths 3 and 4, N = 4, T = 2, per-position transitions) whose
    first sequence drives node 1's new in-scalings apart by about ``1.5 spread``: its own
    in-scalings ``(1, e^{-spread})``, its out-products ``(1, e^{-spread})`` and in-products
    ``(e^{-spread}, 1)`` (docs/derivations.md §3.12: ``ũ ∝ √(ũ ṽ) √(b/a)``)."""
    emissions = torch.zeros(2, 4, 2, dtype=getattr(torch, dtype))
    transitions = torch.zeros(2, 3, 2, 2, dtype=emissions.dtype)
    emissions[0, 1, 1] = -spread
    transitions[0, 0, :, 0] = -spread  # into tag 0 of node 1: small in-products
    transitions[0, 1, 1, :] = -spread  # out of tag 1 of node 1: small out-products
    emissions[1] = torch.linspace(-1.0, 1.0, 8, dtype=emissions.dtype).view(4, 2)
    lengths, boundary = torch.tensor([3, 4]), torch.zeros(2, dtype=emissions.dtype)
    return emissions, transitions, lengths, boundary, boundary


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("underflows", [True, False])
@pytest.mark.parametrize("sweep", [True, False], ids=["sweep", "compiled"])
def test_linear_scalings_run_again_in_log_space_when_one_underflows(
    monkeypatch: pytest.MonkeyPatch, dtype: str, underflows: bool, sweep: bool
) -> None:
    """A large vouched kernel iterates in linear space (the sweep or ``_linear_projected``). Where
    a projection writes a live scaling under ``e^{F/2}`` of its vector's largest (a spread of
    1.5 · 0.95 · (−F/2) from scores that each spread 0.95 · (−F/2), so the start is accepted), the
    call runs again with the scalings in log space (``_projected``), and its marginals, value and
    Danskin gradient are the log form's; with half the spread the linear run stands."""
    torch = pytest.importorskip("torch")
    import implementations.torch_backend.bcrf as kernel

    spread = -0.95 * _floor(torch.empty(0, dtype=getattr(torch, dtype))) / 2 * (1.0 if underflows else 0.5)
    scores = _steep_chain(torch, dtype, spread)
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    compiled = _record_runs(monkeypatch, kernel, sweep)
    options = {"iterations": 3, "temperature": 1.0, "order": "odd-even", "tolerance": None}
    results = {}
    for form in ("scaling", "log"):
        compiled.clear()
        emissions = scores[0].clone().requires_grad_()
        value = kernel.loss(
            emissions,
            *scores[1:3],
            torch.zeros(2, 4, dtype=torch.long),
            *scores[3:],
            form=form,
            gradient="danskin",
            **options,
        )
        (grad,) = torch.autograd.grad(value.sum(), emissions)
        marginals = kernel.marginals(*scores, form=form, **options)
        results[form] = [x.detach().numpy() for x in (*marginals, value, grad)]
        if form == "scaling":
            projections = [name for name in compiled if name.endswith("_projected") or name == "sweep"]
            expected = [LINEAR_RUNS[sweep], "_projected"] if underflows else [LINEAR_RUNS[sweep]]
            assert list(dict.fromkeys(projections)) == expected
    tol = FORM_TOLERANCE[dtype] * spread  # the forms' rounding grows with the scores
    for got, expected in zip(results["scaling"], results["log"], strict=True):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, expected, rtol=0, atol=tol)


@pytest.mark.parametrize("sweep", [True, False], ids=["sweep", "compiled"])
def test_linear_scalings_stop_at_a_tolerance_as_the_log_scalings_do(
    monkeypatch: pytest.MonkeyPatch, sweep: bool
) -> None:
    """With a tolerance, the linear state (a nested tuple, each sequence frozen once within it)
    stops at the iteration the log scalings stop at, with their errors and marginals: every
    length 1..6, padding, float64, by the sweep or by compiled projections."""
    torch = pytest.importorskip("torch")
    import implementations.torch_backend.bcrf as kernel

    inst = all_lengths_instance(74, 4, max_len=6)
    inst = replace(inst, transitions=np.where(np.isneginf(inst.transitions), -2.0, inst.transitions))
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    compiled = _record_runs(monkeypatch, kernel, sweep)
    kw = inst.arrays("torch", "float64")
    options = {"iterations": 100, "tolerance": 1e-8}
    linear = apply(bcrf(backends.get("torch")), "solve", kw, **options)
    assert LINEAR_RUNS[sweep] in compiled and "_projected" not in compiled
    token = kernel.run_state._linear_allowed.set(False)
    try:
        logged = apply(bcrf(backends.get("torch")), "solve", kw, **options)
    finally:
        kernel.run_state._linear_allowed.reset(token)
    assert "_projected" in compiled
    assert linear.iterations == logged.iterations < 100
    for field in ("unary", "pairwise", "value", "errors"):
        np.testing.assert_allclose(
            npy(getattr(linear, field)), npy(getattr(logged, field)), rtol=1e-9, atol=1e-12
        )
    torch.testing.assert_close(linear.converged, logged.converged)


def test_linear_scalings_start_only_where_they_are_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """The linear state starts from a large per-position vouched kernel whose every sequence has a
    live tag at each node and every live scaling at least ``e^{F/2}`` of its vector's largest,
    autograd not recording; not from a sequence with a dead node, a scaling under that, a shared
    or small kernel, a recorded run, or where the call runs again in log space."""
    torch = pytest.importorskip("torch")
    import implementations.torch_backend.bcrf as kernel
    from implementations.torch_backend._scores import arc_terms

    def start(emissions: Any, transitions: Any, lengths: Any, requires_grad: bool = False) -> Any:
        transitions = transitions.clone().requires_grad_(requires_grad)
        terms = arc_terms(emissions, transitions, lengths, None, None)
        kernel_, scalings = kernel.scaling._scaled_initial(terms, lengths, 1.0)
        return kernel.linear._linear_start(kernel_, scalings, lengths)

    emissions, transitions, lengths, *_ = _steep_chain(torch, "float32", 10.0)
    assert start(emissions, transitions, lengths) is None  # small: not laid out by parity
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    linear, shifts, smallest = start(emissions, transitions, lengths)
    assert torch.equal(smallest, torch.ones(2))
    for x, shift in zip(linear, shifts, strict=True):
        assert x.amax(-1).le(1).all() and shift.isfinite().all()
    with torch.enable_grad():
        assert start(emissions, transitions, lengths, requires_grad=True) is None
    assert start(emissions, transitions[0, 0], lengths) is None  # shared
    steep = emissions.clone()
    steep[1, 2, 0] = _floor(torch.empty(0, dtype=torch.float32)) / 2 - 1.0  # a live in-scaling under e^{F/2}
    assert start(steep, transitions, lengths) is None
    steep[1, 2, 0] = -math.inf  # dead: no longer read
    assert start(steep, transitions, lengths) is not None
    steep[1, 2, 1] = -math.inf  # node 2 of sequence 1 has no live tag
    assert start(steep, transitions, lengths) is None
    past = emissions.clone()
    past[0, 3] = -math.inf  # position 3 is past sequence 0's length 3: padding, not read
    assert start(past, transitions, lengths) is not None
    token = kernel.run_state._linear_allowed.set(False)
    try:
        assert start(emissions, transitions, lengths) is None
    finally:
        kernel.run_state._linear_allowed.reset(token)


def test_fused_products_fall_back_to_eager_without_a_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed compilation (no C++ compiler, say) warns once and leaves every product and every
    projection eager, with the eager results."""
    pytest.importorskip("torch")
    import torch

    import implementations.torch_backend.bcrf as kernel

    def failing(*args: Any) -> Any:
        raise torch._dynamo.exc.BackendCompilerFailed(failing, RuntimeError("no compiler"), None)

    monkeypatch.setattr(kernel.compilation, "_compiled", lambda function: failing)
    monkeypatch.setattr(kernel.run_state, "_compiler_failed", False)
    matrices, vectors = torch.rand(2, 3, 4, 4), torch.rand(2, 3, 4)
    with pytest.warns(RuntimeWarning, match="no compiler"):
        first = kernel.compilation._fused_row_products(matrices, vectors)
    second = kernel.compilation._fused_row_products(
        matrices, vectors
    )  # no second warning: nothing is retried
    expected = torch.matmul(matrices, vectors.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, expected)
    assert kernel.run_state._compiler_failed

    inst = all_lengths_instance(73, 4, max_len=5)
    eager = _torch_solve_and_loss(inst, "float64", iterations=3)
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    for got, expected in zip(_torch_solve_and_loss(inst, "float64", iterations=3), eager, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)  # a multiply–sum, not matmul


@pytest.mark.parametrize(("tau", "neg_inf", "scale"), [(1.0, 0.0, 1.0), (0.01, 0.3, 3.0)])
def test_deferred_exactness_tests_change_nothing_and_read_back_once(
    monkeypatch: pytest.MonkeyPatch, tau: float, neg_inf: float, scale: float
) -> None:
    """Where they defer (on a GPU; forced here), the public functions read the products'
    exactness tests back together, once after the run, not once per projection; the results are
    bitwise those with every test in place, whether none fails (τ = 1, finite scores) or some do
    and the function runs again (τ = 0.01, float32, -inf). On the CPU every test is in place.
    Every kernel is taken as unvouched, as finite scores' would spare every test
    (:func:`test_a_vouched_kernel_spares_the_exactness_tests_and_changes_nothing`)."""
    import implementations.torch_backend.bcrf as kernel

    _unvouched(monkeypatch, kernel)
    read_backs = []
    smallest = kernel.exactness._smallest
    monkeypatch.setattr(
        kernel.exactness, "_smallest", lambda minima: read_backs.append(len(minima)) or smallest(minima)
    )
    inst = all_lengths_instance(72, 4, max_len=6, neg_inf=neg_inf, scale=scale)
    options = {"iterations": 5, "temperature": tau}
    with monkeypatch.context() as patch:
        patch.setattr(kernel.exactness, "_defers", lambda tensor: True)  # as on a GPU
        deferred = _torch_solve_and_loss(inst, "float32", **options)
    deferred_reads, read_backs[:] = list(read_backs), []
    on_cpu = _torch_solve_and_loss(inst, "float32", **options)
    cpu_reads, read_backs[:] = list(read_backs), []

    class NeverDeferred:  # a context variable that is never set: every test in place
        def set(self, value: Any) -> None: ...
        def get(self) -> None: ...
        def reset(self, token: Any) -> None: ...

    with monkeypatch.context() as patch:
        patch.setattr(kernel.run_state, "_deferred_minima", NeverDeferred())
        in_place = _torch_solve_and_loss(inst, "float32", **options)
    for got, cpu, expected in zip(deferred, on_cpu, in_place, strict=True):
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(cpu, expected)
    assert cpu_reads == read_backs  # the CPU's default: each projection's tests read in place
    if tau == 1.0:  # solve and two losses: one read-back each, of every projection's tests
        assert len(deferred_reads) == 3 and len(read_backs) > 3 * 2 * 5
        assert all(count > 2 * 5 for count in deferred_reads)
    else:  # some failed: the functions ran again, testing each projection in place
        assert len(deferred_reads) > 3


def _unvouched(monkeypatch: pytest.MonkeyPatch, kernel: Any) -> None:
    """Every torch kernel made unvouched for: each product's exactness is tested."""
    make = kernel.transition_kernel._kernel
    monkeypatch.setattr(kernel.scaling, "_kernel", lambda *args: make(*args)._replace(vouched=False))


@pytest.mark.parametrize("per_position", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_vouched_kernel_spares_the_exactness_tests_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, dtype: str, per_position: bool
) -> None:
    """A kernel whose every entry is at least e^{F/2} (finite transitions whose range is at most
    −F/2) makes every product with a vector whose largest entry is 1 at least e^{F/2} too: the torch
    scaling form then tests no product (no read-back), and its marginals, values and gradients
    (every length 1..6, padding, both gradients) are bitwise those with every product tested. A
    -inf transition, or a range over −F/2, leaves a kernel unvouched for."""
    import torch

    import implementations.torch_backend.bcrf as kernel

    read_backs = []
    smallest = kernel.exactness._smallest
    monkeypatch.setattr(
        kernel.exactness, "_smallest", lambda minima: read_backs.append(len(minima)) or smallest(minima)
    )
    inst = all_lengths_instance(73, 4, max_len=6, per_position=per_position, scale=2.0)
    options = {"iterations": 5, "temperature": 1.0}
    vouched = _torch_solve_and_loss(inst, dtype, **options)
    assert read_backs == []
    with monkeypatch.context() as patch:
        _unvouched(patch, kernel)
        tested = _torch_solve_and_loss(inst, dtype, **options)
    assert read_backs  # the same calls, each product tested
    for got, expected in zip(vouched, tested, strict=True):
        np.testing.assert_array_equal(got, expected)

    half_floor = _floor(torch.empty(0, dtype=getattr(torch, dtype))) / 2
    for spread, expected in ((0.0, True), (-0.99 * half_floor, True), (-1.01 * half_floor, False)):
        transitions = torch.tensor([[0.0, -spread], [-1.0, -0.5]], dtype=getattr(torch, dtype))
        assert kernel.transition_kernel._kernel(transitions + 1.0, 1.0).vouched is expected
        assert kernel.transition_kernel._kernel(transitions[None, None] / 2, 0.5).vouched is expected
    forbidden = torch.tensor([[0.0, -math.inf], [1.0, 0.5]], dtype=getattr(torch, dtype))
    assert not kernel.transition_kernel._kernel(forbidden, 1.0).vouched
    assert not kernel.transition_kernel._kernel(
        torch.zeros(2, 0, 3, 3, dtype=getattr(torch, dtype)), 1.0
    ).vouched  # N = 1


def test_scaling_form_takes_its_log_space_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The float32 instances above take the torch scaling form's log-space paths: flows recomputed
    from their arcs (a product under e^{F/2}) and the arc gradient summed in log space (a large
    scaling facing small kernel entries); a test that equates the forms there therefore checks
    those paths, not only the linear ones."""
    import torch

    import implementations.torch_backend.bcrf as kernel

    calls = {"flows": 0, "arcs": 0}
    exact_flows, arc_gradient = kernel.exactness._exact_flows, kernel.scaling._arc_gradient

    def counting_exact_flows(*args: Any) -> Any:
        calls["flows"] += 1
        return exact_flows(*args)

    def counting_arc_gradient(arcs: Any, *args: Any) -> Any:
        calls["arcs"] += isinstance(arcs, torch.Tensor)  # the log-space sum calls itself on q
        return arc_gradient(arcs, *args)

    monkeypatch.setattr(kernel.exactness, "_exact_flows", counting_exact_flows)
    monkeypatch.setattr(kernel.scaling, "_arc_gradient", counting_arc_gradient)
    inst = all_lengths_instance(71, 5, max_len=9, neg_inf=0.3, scale=3.0)
    backend = backends.get("torch")
    arrays, tags = inst.arrays("torch", "float32"), inst.gold_array(backend)
    for tau in (0.1, 0.01):
        backend.value_and_grad(
            lambda kw, tau=tau: apply(bcrf(backend), "loss", kw, tags, iterations=7, temperature=tau),
            arrays,
            ("emissions", "transitions"),
        )
    assert calls["flows"] > 0 and calls["arcs"] > 0


@pytest.mark.parametrize("backend_name", ["torch", "jax"])
def test_scaling_form_distrusts_a_product_an_underflowing_factor_could_have_emptied(
    backend_name: str,
) -> None:
    """Row 0's only nonzero entry meets a scaling e^-1000 below its group's largest: the linear
    product ``K x`` is exactly 0 there, but the flow is e^-1000 / 2 (not a dead tag's 0) and must be
    recomputed from the arcs; row 1's is an ordinary product."""
    if backend_name == "jax":
        pytest.importorskip("jax")
        from implementations.jax_backend import bcrf as kernel
    else:
        from implementations.torch_backend import bcrf as kernel
    backend = backends.get(backend_name)
    with np.errstate(divide="ignore"):
        transitions = np.log(np.array([[[[0.0, 0.5], [1.0, 0.5]]]]))  # (B, N-1, T, T): tag i -> tag t
    log_x = backend.array(np.array([[[0.0, -1000.0]]]))  # x_1 underflows once scaled by the largest
    unused = backend.array(np.zeros((1, 1, 2)))  # both flows are read
    kernel_matrix = kernel.transition_kernel._kernel(backend.array(transitions), 1.0)
    (flows,) = kernel.exactness._flows(
        kernel_matrix, Request(0, kernel.transition_kernel._vectors(log_x), False, unused)
    )
    np.testing.assert_allclose(npy(flows), [[[np.log(0.5) - 1000.0, 0.0]]], atol=1e-12)
