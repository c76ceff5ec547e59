"""Exact linear-chain CRF (``crf`` sequential, ``crf-scan`` parallel tree): docs/derivations.md §6, P1–P7.

Oracle: enumeration of all ``T**n`` tag sequences (``implementations.reference.brute_force``),
for every length 1..6 and every T in 1..4; autograd (``torch.autograd`` / ``jax.grad``) and central
finite differences for the gradient identities; closed-form bounds for the zero-temperature
limit. Every test runs against every backend (``backend`` fixture) except the pytorch-crf peer.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

from implementations.reference import brute_force

from . import backends
from .backends import TORCH_ONLY, Backend
from .instances import (
    Instance,
    all_lengths_instance,
    apply,
    instances,
    make_instance,
    npy,
    path_is_valid,
    random_allowed,
    scale_instance,
)

EXACT = ("crf", "crf-scan")
CASES = [
    pytest.param(
        T,
        per_position,
        boundary,
        neg_inf,
        id=f"T{T}-{'pp' if per_position else 'shared'}-{'se' if boundary else 'nose'}-inf{neg_inf}",
        # jax: per-position + start/end + -inf, and shared without boundaries, for every T
        marks=()
        if (per_position, boundary, neg_inf) in ((True, True, 0.3), (False, False, 0.0))
        else TORCH_ONLY,
    )
    for T in (1, 2, 3, 4)
    for per_position, boundary, neg_inf in (
        (True, True, 0.0),
        (False, False, 0.0),
        (True, True, 0.3),
        (False, True, 0.3),
    )
]


TORCH = backends.get("torch")


def crf(method: str, backend: Backend = TORCH) -> Any:
    return backend.module(method)


def args(inst: Instance, backend: Backend = TORCH, **kw: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    t = inst.arrays(backend, **kw)
    return (t["emissions"], t["transitions"], t["lengths"]), {"start": t["start"], "end": t["end"]}


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize(("num_tags", "per_position", "boundary", "neg_inf"), CASES)
def test_against_brute_force(
    method: str, backend: Backend, num_tags: int, per_position: bool, boundary: bool, neg_inf: float
) -> None:
    """Props 1, 2, 6: log Z, marginals, Viterbi, NLL and partial NLL == enumeration, n = 1..6."""
    seed = 1000 * num_tags + 10 * per_position + 5 * boundary + int(10 * neg_inf)
    inst = all_lengths_instance(seed, num_tags, per_position=per_position, boundary=boundary, neg_inf=neg_inf)
    allowed = random_allowed(np.random.default_rng(seed), inst)
    log_z, (unary, pairwise), decoded, nll, partial = backend.calls(
        method,
        inst.arrays(backend),
        ("log_partition", (), {}),
        ("marginals", (), {}),
        ("decode", (), {}),
        ("loss", (inst.gold_array(backend),), {}),
        ("partial_loss", (backend.array(allowed),), {}),
    )
    log_z, unary, pairwise, decoded, nll, partial = map(npy, (log_z, unary, pairwise, decoded, nll, partial))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        seq = inst.seq(b)
        ref_z = brute_force.log_partition(**seq)
        assert log_z[b] == pytest.approx(ref_z, rel=1e-12, abs=1e-12)
        ref_u, ref_p = brute_force.marginals(**seq)
        np.testing.assert_allclose(unary[b, :n], ref_u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pairwise[b, : n - 1], ref_p, rtol=0, atol=1e-12)
        # -inf: exactly zero marginal wherever the enumeration puts exactly zero mass
        assert (unary[b, :n][ref_u == 0] == 0).all()
        assert (pairwise[b, : n - 1][ref_p == 0] == 0).all()
        best, best_path, gap = brute_force.best(**seq)
        path = decoded[b, :n]
        assert path_is_valid(inst, b, path)
        assert brute_force.path_score(path, **seq) == pytest.approx(best, rel=1e-12, abs=1e-12)
        if gap > 1e-9:
            np.testing.assert_array_equal(path, best_path)
        gold = brute_force.path_score(inst.gold[b, :n], **seq)
        assert nll[b] == pytest.approx(ref_z - gold, rel=1e-12, abs=1e-11)
        restricted = brute_force.log_partition(**seq, allowed=allowed[b, :n])
        assert partial[b] == pytest.approx(ref_z - restricted, rel=1e-12, abs=1e-11)


@pytest.mark.parametrize("method", EXACT)
@backends.given(inst=instances(max_len=6, max_tags=4))
def test_against_brute_force_random(method: str, backend: Backend, inst: Instance) -> None:
    """Props 1, 2: random sizes/patterns (hypothesis) -- log Z, marginals, Viterbi score."""
    log_z, (unary, pairwise), decoded = backend.calls(
        method, inst.arrays(backend), ("log_partition", (), {}), ("marginals", (), {}), ("decode", (), {})
    )
    log_z, unary, pairwise, decoded = map(npy, (log_z, unary, pairwise, decoded))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        seq = inst.seq(b)
        assert log_z[b] == pytest.approx(brute_force.log_partition(**seq), rel=1e-12, abs=1e-12)
        ref_u, ref_p = brute_force.marginals(**seq)
        np.testing.assert_allclose(unary[b, :n], ref_u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pairwise[b, : n - 1], ref_p, rtol=0, atol=1e-12)
        best, _, _ = brute_force.best(**seq)
        assert brute_force.path_score(decoded[b, :n], **seq) == pytest.approx(best, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("neg_inf", [0.0, 0.3])
def test_marginals_are_gradient_of_log_partition(method: str, backend: Backend, neg_inf: float) -> None:
    """Prop 3: marginals == autograd ∇ log Z (emissions, per-position transitions, start, end),
    with no NaN and no gradient on padding even when padding holds -inf."""
    mod = crf(method, backend)
    inst = all_lengths_instance(11 + int(10 * neg_inf), 3, neg_inf=neg_inf)
    t = inst.arrays(backend)
    a = (t["emissions"], t["transitions"], t["lengths"])
    unary, pairwise = (npy(x) for x in mod.marginals(*a, start=t["start"], end=t["end"]))
    _, grad = backend.value_and_grad(
        lambda k: apply(mod, "log_partition", k), t, ("emissions", "transitions", "start", "end")
    )
    np.testing.assert_allclose(grad["emissions"], unary, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad["transitions"], pairwise, rtol=0, atol=1e-12)
    first = sum(unary[b, 0] for b in range(inst.batch))
    last = sum(unary[b, int(inst.lengths[b]) - 1] for b in range(inst.batch))
    np.testing.assert_allclose(grad["start"], first, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad["end"], last, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", EXACT)
def test_marginals_equal_finite_differences(method: str, backend: Backend) -> None:
    """Prop 3: marginals == central finite differences of log Z (1e-8)."""
    mod = crf(method, backend)
    rng = np.random.default_rng(12)
    inst = make_instance(rng, batch=2, length=5, num_tags=3, lengths=[5, 3], neg_inf=0.2)
    unary, pairwise = (npy(x) for x in mod.marginals(*args(inst, backend)[0], **args(inst, backend)[1]))
    eps = 1e-5

    def log_z(x: Instance) -> np.ndarray:
        a, kw = args(x, backend)
        return npy(mod.log_partition(*a, **kw))

    for field, grad in (("emissions", unary), ("transitions", pairwise)):
        base = getattr(inst, field)
        finite = np.argwhere(np.isfinite(base))
        for idx in finite[rng.choice(len(finite), size=12, replace=False)]:
            idx = tuple(int(i) for i in idx)
            b = idx[0]
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            fd = (log_z(_with(inst, field, plus))[b] - log_z(_with(inst, field, minus))[b]) / (2 * eps)
            assert fd == pytest.approx(grad[idx], abs=1e-8), (field, idx)


def _with(inst: Instance, field: str, value: np.ndarray) -> Instance:
    return replace(inst, **{field: value})


@pytest.mark.parametrize("method", EXACT)
@backends.given(inst=instances(max_batch=3, max_len=8, max_tags=5))
def test_marginal_polytope(method: str, backend: Backend, inst: Instance) -> None:
    """Prop 4: every arc group sums to 1, flow is conserved at inner nodes, node marginals sum
    to 1 and agree with the arc marginals (1e-12)."""
    a, kw = args(inst, backend)
    unary, pairwise = (npy(x) for x in crf(method, backend).marginals(*a, **kw))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        np.testing.assert_allclose(unary[b, :n].sum(-1), 1.0, rtol=0, atol=1e-12)
        if n >= 2:
            q = pairwise[b, : n - 1]
            np.testing.assert_allclose(q.sum((-1, -2)), 1.0, rtol=0, atol=1e-12)
            np.testing.assert_allclose(q.sum(-1), unary[b, : n - 1], rtol=0, atol=1e-12)
            np.testing.assert_allclose(q.sum(-2), unary[b, 1:n], rtol=0, atol=1e-12)
            np.testing.assert_allclose(q[1:].sum(-1), q[:-1].sum(-2), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", EXACT)
def test_zero_temperature_limit(method: str, backend: Backend) -> None:
    """Prop 5: max <= τ A(w/τ) <= max + τ n log T, and τ A(w/τ) is monotone in τ."""
    mod = crf(method, backend)
    inst = all_lengths_instance(13, 4, neg_inf=0.2)
    taus = (1.0, 0.1, 0.01)
    values = []
    for tau in taus:
        a, kw = args(scale_instance(inst, 1.0 / tau), backend)
        values.append(tau * npy(mod.log_partition(*a, **kw)))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        best, _, _ = brute_force.best(**inst.seq(b))
        count = np.isfinite(brute_force.enumerate_scores(**inst.seq(b)).scores).sum()
        for tau, v in zip(taus, values, strict=True):
            assert best - 1e-9 <= v[b] <= best + tau * math.log(count) + 1e-9
            assert v[b] <= best + tau * n * math.log(4) + 1e-9
        assert values[0][b] >= values[1][b] - 1e-12 >= values[2][b] - 2e-12


@pytest.mark.parametrize("method", EXACT)
def test_neg_inf_arcs(method: str, backend: Backend) -> None:
    """Prop 6: forbidden arcs get exactly 0 marginal; Viterbi and marginals never use them; no NaN."""
    mod = crf(method, backend)
    rng = np.random.default_rng(14)
    inst = make_instance(rng, batch=5, length=8, num_tags=4, neg_inf=0.5)
    a, kw = args(inst, backend)
    unary, pairwise = (npy(x) for x in mod.marginals(*a, **kw))
    decoded = npy(mod.decode(*a, **kw))
    assert np.isfinite(unary).all() and np.isfinite(pairwise).all()
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        if n >= 2:
            w = inst.arc_weights(b)
            assert (pairwise[b, : n - 1][np.isneginf(w)] == 0).all()
        assert (unary[b, :n][np.isneginf(inst.emissions[b, :n])] == 0).all()
        assert path_is_valid(inst, b, decoded[b, :n])


@pytest.mark.parametrize("method", EXACT)
def test_single_valid_path(method: str, backend: Backend) -> None:
    """With exactly one finite sequence: log Z = its score, marginals are its indicator, decode
    returns it and its NLL is 0."""
    mod = crf(method, backend)
    rng = np.random.default_rng(15)
    inst = make_instance(rng, batch=3, length=5, num_tags=3, lengths=[5, 2, 1])
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        y = inst.gold[b, :n]
        mask = np.full((n, 3), -np.inf)
        mask[np.arange(n), y] = 0.0
        inst.emissions[b, :n] += mask
    a, kw = args(inst, backend)
    unary, _pairwise = (npy(x) for x in mod.marginals(*a, **kw))
    log_z = npy(mod.log_partition(*a, **kw))
    nll = npy(mod.loss(*a, inst.gold_array(backend), **kw))
    decoded = npy(mod.decode(*a, **kw))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        y = inst.gold[b, :n]
        assert log_z[b] == pytest.approx(brute_force.path_score(y, **inst.seq(b)), abs=1e-12)
        np.testing.assert_array_equal(decoded[b, :n], y)
        assert unary[b, :n][np.arange(n), y] == pytest.approx(1.0, abs=1e-12)
        assert nll[b] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("method", EXACT)
def test_partial_loss_properties(method: str, backend: Backend) -> None:
    """Partial NLL: allowed = one-hot gold gives the NLL; allowed = everything gives 0;
    it is >= 0 and grows when the allowed set shrinks."""
    mod = crf(method, backend)
    rng = np.random.default_rng(16)
    inst = make_instance(rng, batch=4, length=6, num_tags=4, neg_inf=0.2)
    a, kw = args(inst, backend)
    onehot = np.zeros((inst.batch, inst.length, inst.num_tags), dtype=bool)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        onehot[b, np.arange(n), inst.gold[b, :n]] = True
    nll = npy(mod.loss(*a, inst.gold_array(backend), **kw))
    np.testing.assert_allclose(
        npy(mod.partial_loss(*a, backend.array(onehot), **kw)), nll, rtol=1e-12, atol=1e-12
    )
    everything = np.ones_like(onehot)
    np.testing.assert_allclose(npy(mod.partial_loss(*a, backend.array(everything), **kw)), 0.0, atol=1e-12)
    big = random_allowed(rng, inst, 0.8)
    small = big & random_allowed(rng, inst, 0.5)
    l_big = npy(mod.partial_loss(*a, backend.array(big), **kw))
    l_small = npy(mod.partial_loss(*a, backend.array(small), **kw))
    assert (l_big >= -1e-12).all()
    assert (l_small >= l_big - 1e-12).all()
    assert (nll >= l_small - 1e-12).all()


@pytest.mark.parametrize("method", EXACT)
def test_loss_gradient_is_marginals_minus_gold(method: str, backend: Backend) -> None:
    """∇_emissions NLL = unary marginals − one-hot(gold); ∇_transitions = pairwise − gold arcs."""
    mod = crf(method, backend)
    inst = all_lengths_instance(17, 3, neg_inf=0.2)
    t = inst.arrays(backend)
    a = (t["emissions"], t["transitions"], t["lengths"])
    unary, pairwise = (npy(x) for x in mod.marginals(*a, start=t["start"], end=t["end"]))
    tags = inst.gold_array(backend)
    _, grad = backend.value_and_grad(lambda k: apply(mod, "loss", k, tags), t, ("emissions", "transitions"))
    y_node, y_arc = gold_indicators(inst)
    np.testing.assert_allclose(grad["emissions"], unary - y_node, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad["transitions"], pairwise - y_arc, rtol=0, atol=1e-12)


def gold_indicators(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """One-hot node ``(B, N, T)`` and arc ``(B, N-1, T, T)`` indicators of the gold paths."""
    y_node = np.zeros(inst.emissions.shape)
    y_arc = np.zeros((inst.batch, inst.length - 1, inst.num_tags, inst.num_tags))
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        y = inst.gold[b, :n]
        y_node[b, np.arange(n), y] = 1.0
        for i in range(n - 1):
            y_arc[b, i, y[i], y[i + 1]] = 1.0
    return y_node, y_arc


@backends.given(
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(1, 40),
    num_tags=st.integers(1, 6),
    per_position=st.booleans(),
    neg_inf=st.sampled_from([0.0, 0.3]),
)
def test_scan_equals_sequential(
    backend: Backend, seed: int, length: int, num_tags: int, per_position: bool, neg_inf: float
) -> None:
    """crf-scan == crf on larger random batches, for all five functions (float64, 1e-10)."""
    rng = np.random.default_rng(seed)
    inst = make_instance(
        rng, batch=8, length=length, num_tags=num_tags, per_position=per_position, neg_inf=neg_inf, scale=2.0
    )
    allowed = random_allowed(rng, inst)
    kw = inst.arrays(backend)
    specs = (
        ("log_partition", (), {}),
        ("loss", (inst.gold_array(backend),), {}),
        ("partial_loss", (backend.array(allowed),), {}),
        ("marginals", (), {}),
        ("decode", (), {}),
    )
    seq, par = backend.calls("crf", kw, *specs), backend.calls("crf-scan", kw, *specs)
    for (fn, _, _), x, y in zip(specs[:3], seq[:3], par[:3], strict=True):
        np.testing.assert_allclose(npy(y), npy(x), rtol=1e-10, atol=1e-10, err_msg=fn)
    for x, y in zip(seq[3], par[3], strict=True):
        np.testing.assert_allclose(npy(y), npy(x), rtol=0, atol=1e-10)
    d_seq, d_par = npy(seq[4]), npy(par[4])
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        s1 = brute_force.path_score(d_seq[b, :n], **inst.seq(b))
        s2 = brute_force.path_score(d_par[b, :n], **inst.seq(b))
        assert np.isfinite(s1) and s2 == pytest.approx(s1, rel=1e-10, abs=1e-10)
    np.testing.assert_array_equal(d_seq[~inst.valid()], -1)
    np.testing.assert_array_equal(d_par[~inst.valid()], -1)


@pytest.mark.parametrize("method", EXACT)
def test_against_pytorch_crf_long_sequences(method: str) -> None:
    """An independent peer (pytorch-crf) for long shared-transition sequences: NLL and Viterbi
    (torch only: the peer is a torch module)."""
    torchcrf = pytest.importorskip("torchcrf")
    rng = np.random.default_rng(18)
    inst = make_instance(rng, batch=6, length=40, num_tags=5, per_position=False, scale=1.5)
    peer = torchcrf.CRF(5, batch_first=True).double()
    with torch.no_grad():
        peer.transitions.copy_(torch.tensor(inst.transitions))
        peer.start_transitions.copy_(torch.tensor(inst.start))
        peer.end_transitions.copy_(torch.tensor(inst.end))
    mask = torch.tensor(inst.valid())
    tags = inst.gold_tensor().clamp(min=0)
    em = torch.tensor(inst.emissions)
    em = torch.where(mask[..., None], em, torch.zeros(()))  # the peer reads padding: give it zeros
    with torch.no_grad():
        peer_nll = -peer(em, tags, mask=mask, reduction="none")
        peer_paths = peer.decode(em, mask=mask)
    a, kw = args(inst)
    mod = crf(method)
    np.testing.assert_allclose(npy(mod.loss(*a, inst.gold_tensor(), **kw)), npy(peer_nll), rtol=1e-10)
    decoded = npy(mod.decode(*a, **kw))
    for b, path in enumerate(peer_paths):
        n = int(inst.lengths[b])
        assert brute_force.path_score(decoded[b, :n], **inst.seq(b)) == pytest.approx(
            brute_force.path_score(np.array(path), **inst.seq(b)), rel=1e-12
        )
