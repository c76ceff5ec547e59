"""Naive mean field with parallel (Jacobi) updates: docs/derivations.md §6, P23–P25 and the contract.

Oracles: ``reference/meanfield.py`` (loop version of the updates); brute-force enumeration for
the factorised model (exact) and the lower bound; closed forms for the penalty and length 1;
central finite differences for the unrolled gradient. Every test runs against every backend
(``backend`` fixture).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

from implementations.reference import brute_force
from implementations.reference import meanfield as mf_ref
from implementations.reference.common import logsumexp, softmax, unary_scores

from . import backends
from .backends import Backend
from .instances import Instance, all_lengths_instance, apply, instances, make_instance, npy, random_allowed


def mf(backend: Backend) -> Any:
    return backend.module("meanfield")


def args(inst: Instance, backend: Backend) -> tuple[tuple[Any, ...], dict[str, Any]]:
    t = inst.arrays(backend)
    return (t["emissions"], t["transitions"], t["lengths"]), {"start": t["start"], "end": t["end"]}


def run(backend: Backend, inst: Instance, allowed: np.ndarray, **opts: Any) -> dict[str, np.ndarray]:
    """Every function and ``solve`` on ``inst`` with the same options (jax: one program)."""
    specs = [
        ("marginals", (), opts),
        ("solve", (), opts),
        ("decode", (), opts),
        ("loss", (inst.gold_array(backend),), opts),
        ("partial_loss", (backend.array(allowed),), opts),
        ("log_partition", (), opts),
    ]
    (unary, pairwise), res, decoded, loss, partial, log_part = backend.calls(
        "meanfield", inst.arrays(backend), *specs
    )
    return {
        "unary": npy(unary),
        "pairwise": npy(pairwise),
        "decode": npy(decoded),
        "loss": npy(loss),
        "partial_loss": npy(partial),
        "log_partition": npy(log_part),
        "solve_unary": npy(res.unary),
        "change": npy(res.error),
        "iterations": res.iterations,
    }


def check_against_reference(backend: Backend, inst: Instance, allowed: np.ndarray, **opts: Any) -> None:
    out = run(backend, inst, allowed, **opts)
    # Messages carry |penalty| * r: rounding in the fields grows with the penalty's magnitude.
    penalty = abs(opts.get("penalty", 0.0)) if np.isneginf(inst.transitions).any() else 0.0
    tol = 1e-12 * max(1.0, penalty / 100)
    assert out["iterations"] == opts.get("iterations", 10)
    np.testing.assert_array_equal(out["solve_unary"], out["unary"])
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        ref = mf_ref.meanfield(**inst.seq(b), **opts)
        np.testing.assert_allclose(out["unary"][b, :n], ref.unary, rtol=0, atol=tol)
        np.testing.assert_allclose(out["pairwise"][b, : n - 1], ref.pairwise, rtol=0, atol=tol)
        assert out["change"][b] == pytest.approx(ref.change, abs=tol)
        best = ref.unary.max(1)
        np.testing.assert_allclose(ref.unary[np.arange(n), out["decode"][b, :n]], best, atol=1e-9)
        y = inst.gold[b, :n]
        # log r from the log-softmax of the field: exact even where r underflows to 0
        assert out["loss"][b] == pytest.approx(
            -ref.log_unary[np.arange(n), y].sum(), rel=1e-11, abs=100 * tol
        )
        kept = np.array([logsumexp(ref.log_unary[i][allowed[b, i]]) for i in range(n)])
        assert out["partial_loss"][b] == pytest.approx(-kept.sum(), rel=1e-11, abs=100 * tol)
        assert out["log_partition"][b] == pytest.approx(ref.lower_bound, rel=1e-11, abs=1e-9)


@pytest.mark.parametrize("init", ["unary", "uniform"])
@pytest.mark.parametrize("iterations", backends.jax_subset([1, 2, 5, 10], keep=[1, 5]))
@pytest.mark.parametrize("neg_inf", [0.0, 0.3])
@pytest.mark.parametrize("per_position", [True, False])
def test_matches_reference_loop(
    backend: Backend, init: str, iterations: int, neg_inf: float, per_position: bool
) -> None:
    """Loop reference == batched implementation for all functions (1e-12), all lengths 1..6,
    both initialisations, shared and per-position transitions; -inf transitions go through the
    default penalty."""
    seed = 7 * iterations + (init == "uniform") + int(10 * neg_inf) + 100 * per_position
    inst = all_lengths_instance(seed, 3, neg_inf=neg_inf, per_position=per_position)
    allowed = random_allowed(np.random.default_rng(seed), inst)
    check_against_reference(backend, inst, allowed, iterations=iterations, init=init)


@backends.given(
    inst=instances(max_len=7, max_tags=4),
    iterations=st.integers(1, 8),
    init=st.sampled_from(["unary", "uniform"]),
    penalty=st.sampled_from([-1e4, -30.0, -3.0, 0.0]),
)
def test_matches_reference_loop_random(
    backend: Backend, inst: Instance, iterations: int, init: str, penalty: float
) -> None:
    allowed = random_allowed(np.random.default_rng(0), inst)
    check_against_reference(backend, inst, allowed, iterations=iterations, init=init, penalty=penalty)


def test_documented_defaults(backend: Backend) -> None:
    """iterations=10, init="unary", penalty=0 (forbidden transitions neutral: no constraints)."""
    inst = all_lengths_instance(60, 3, neg_inf=0.3)
    allowed = random_allowed(np.random.default_rng(60), inst)
    default = run(backend, inst, allowed)
    explicit = run(backend, inst, allowed, iterations=10, init="unary", penalty=0.0)
    for key in ("unary", "pairwise", "decode", "loss", "partial_loss", "log_partition", "change"):
        np.testing.assert_array_equal(default[key], explicit[key], err_msg=key)
    assert default["iterations"] == 10


@pytest.mark.parametrize("init", ["unary", "uniform"])
@pytest.mark.parametrize("iterations", [1, 3])
def test_factorised_model_is_exact(backend: Backend, init: str, iterations: int) -> None:
    """Prop 23: with w[i,a,b] = f_i(a) + g_i(b) the chain is a product of independent tokens and
    mean field is exact after one update: marginals == brute force, log_partition == log Z."""
    rng = np.random.default_rng(61 + iterations)
    inst = all_lengths_instance(61 + iterations, 4, neg_inf=0.2)
    f = rng.normal(size=(inst.batch, inst.length - 1, inst.num_tags))
    g = rng.normal(size=(inst.batch, inst.length - 1, inst.num_tags))
    inst = replace(inst, transitions=f[..., :, None] + g[..., None, :])
    a, kw = args(inst, backend)
    unary, pairwise = (npy(x) for x in mf(backend).marginals(*a, **kw, iterations=iterations, init=init))
    log_part = npy(mf(backend).log_partition(*a, **kw, iterations=iterations, init=init))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        ref_u, ref_p = brute_force.marginals(**inst.seq(b))
        np.testing.assert_allclose(unary[b, :n], ref_u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pairwise[b, : n - 1], ref_p, rtol=0, atol=1e-12)
        assert log_part[b] == pytest.approx(brute_force.log_partition(**inst.seq(b)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("init", ["unary", "uniform"])
def test_lower_bound(backend: Backend, init: str) -> None:
    """log_partition is the Gibbs bound of the returned r: E_r[score] + H(r), computed here by
    enumerating every sequence under the product distribution r(y) = Π_i r_i(y_i); it is
    <= log Z (finite scores) at every iterate, with equality for a single token."""
    inst = all_lengths_instance(62, 4, neg_inf=0.0, scale=1.5)
    a, kw = args(inst, backend)
    for k in (1, 2, 5, 20):
        lb = npy(mf(backend).log_partition(*a, **kw, iterations=k, init=init))
        unary = npy(mf(backend).marginals(*a, **kw, iterations=k, init=init)[0])
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            enum = brute_force.enumerate_scores(**inst.seq(b))
            r_y = np.prod([unary[b, i, enum.paths[:, i]] for i in range(n)], axis=0)
            pos = r_y > 0
            gibbs = float(np.sum(r_y * enum.scores) - np.sum(r_y[pos] * np.log(r_y[pos])))
            assert lb[b] == pytest.approx(gibbs, rel=1e-10, abs=1e-10)
            log_z = brute_force.log_partition(**inst.seq(b))
            assert lb[b] <= log_z + 1e-12
            if n == 1:
                assert lb[b] == pytest.approx(log_z, abs=1e-12)


def test_penalty_equals_replacing_neg_inf(backend: Backend) -> None:
    """Prop 25: ``penalty=p`` means exactly "-inf transitions replaced by p" (emissions,
    start and end keep their -inf)."""
    inst = all_lengths_instance(63, 3, neg_inf=0.3)
    allowed = random_allowed(np.random.default_rng(63), inst)
    for penalty in (-1e4, -7.5):
        got = run(backend, inst, allowed, penalty=penalty, iterations=4)
        finite = replace(inst, transitions=np.where(np.isneginf(inst.transitions), penalty, inst.transitions))
        want = run(backend, finite, allowed, penalty=penalty, iterations=4)
        for key in ("unary", "pairwise", "decode", "loss", "partial_loss", "log_partition"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-13, atol=1e-13, err_msg=key)
    # and the penalty value matters
    a = run(backend, inst, allowed, penalty=-1.0, iterations=4)["unary"]
    b = run(backend, inst, allowed, penalty=-1e4, iterations=4)["unary"]
    assert np.abs(a - b).max() > 1e-3


def test_neg_inf_keeps_nan_away(backend: Backend) -> None:
    """Prop 25: heavy -inf patterns: every output and every loss gradient is finite; -inf
    emissions get exactly zero mass."""
    rng = np.random.default_rng(64)
    inst = make_instance(rng, batch=6, length=12, num_tags=5, neg_inf=0.5, scale=2.0)
    allowed = random_allowed(rng, inst)
    out = run(backend, inst, allowed)
    for key in ("unary", "pairwise", "loss", "partial_loss", "log_partition", "change"):
        assert np.isfinite(out[key]).all(), key
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        assert (out["unary"][b, :n][np.isneginf(inst.emissions[b, :n])] == 0).all()
    tags = inst.gold_array(backend)
    _, grads = backend.value_and_grad(
        lambda kw: apply(mf(backend), "loss", kw, tags),
        inst.arrays(backend),
        ("emissions", "transitions", "start", "end"),
    )
    for name in ("emissions", "transitions", "start", "end"):
        assert np.isfinite(grads[name]).all(), name


@pytest.mark.parametrize("init", ["unary", "uniform"])
def test_loss_gradient_flows_through_iterations(backend: Backend, init: str) -> None:
    """The MF loss is trained by backpropagating through the unrolled updates: the autograd
    gradient is finite, nonzero (transitions too, which only act through the updates) and
    equals central finite differences."""
    rng = np.random.default_rng(65)
    inst = make_instance(rng, batch=3, length=5, num_tags=3, lengths=[5, 3, 2], neg_inf=0.2)
    opts = {"iterations": 3, "init": init, "penalty": -20.0}  # moderate: keeps FD rounding small
    tags = inst.gold_array(backend)
    _, grads = backend.value_and_grad(
        lambda kw: apply(mf(backend), "loss", kw, tags, **opts),
        inst.arrays(backend),
        ("emissions", "transitions", "start"),
    )
    for name, g in grads.items():
        assert np.isfinite(g).all() and np.abs(g).max() > 1e-6, name

    def value(x: Instance) -> float:
        a, kw = args(x, backend)
        return float(npy(mf(backend).loss(*a, x.gold_array(backend), **kw, **opts)).sum())

    eps = 1e-6
    for field in ("emissions", "transitions"):
        base = getattr(inst, field)
        valid = inst.valid()[..., None] if field == "emissions" else inst.valid()[:, 1:, None, None]
        cand = np.argwhere(np.isfinite(base) & valid)
        for idx in cand[rng.choice(len(cand), size=8, replace=False)]:
            idx = tuple(int(i) for i in idx)
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            fd = (value(replace(inst, **{field: plus})) - value(replace(inst, **{field: minus}))) / (2 * eps)
            assert fd == pytest.approx(grads[field][idx], abs=1e-7), (field, idx)


def test_length_one_is_softmax(backend: Backend) -> None:
    """A single token has no neighbour: r = softmax(emissions + start + end) for any options."""
    rng = np.random.default_rng(66)
    inst = make_instance(rng, batch=3, length=1, num_tags=4, neg_inf=0.3)
    for init in ("unary", "uniform"):
        for k in (1, 4):
            a, kw = args(inst, backend)
            unary = npy(mf(backend).marginals(*a, **kw, iterations=k, init=init)[0])
            for b in range(inst.batch):
                seq = inst.seq(b)
                expected = softmax(unary_scores(seq["emissions"], seq["start"], seq["end"])[0])
                np.testing.assert_allclose(unary[b, 0], expected, rtol=0, atol=1e-14)


def test_parallel_updates_can_oscillate(backend: Backend) -> None:
    """Prop 24 regression: strong anti-ferromagnetic coupling makes Jacobi updates flip both
    tokens together forever (a 2-cycle; sequential updates would settle). Checks that the updates
    are parallel, not Gauss–Seidel."""
    em = np.array([[[1.0, 0.0], [1.0, 0.0]]])
    trans = np.array([[-10.0, 0.0], [0.0, -10.0]])  # same tag on both tokens is penalised
    inst = Instance(em, trans, np.array([2]), None, None, np.array([[0, 1]]))
    a, kw = args(inst, backend)
    r20 = mf(backend).solve(*a, **kw, iterations=20)
    r21 = mf(backend).solve(*a, **kw, iterations=21)
    r22 = mf(backend).solve(*a, **kw, iterations=22)
    np.testing.assert_allclose(npy(r20.unary), npy(r22.unary), atol=1e-9)
    assert np.abs(npy(r21.unary) - npy(r20.unary)).max() > 0.5
    assert float(npy(r21.error)[0]) > 0.5
    # both tokens agree with each other at every step (symmetric parallel updates)
    np.testing.assert_allclose(npy(r21.unary)[0, 0], npy(r21.unary)[0, 1], atol=1e-12)
    ref = mf_ref.meanfield(em[0], trans, iterations=21)
    np.testing.assert_allclose(npy(r21.unary)[0], ref.unary, atol=1e-12)
