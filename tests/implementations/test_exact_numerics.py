"""The exact CRFs (``crf-scan`` and the sequential ``crf``) in float32 at every score scale the
contract accepts (issue 11, "Core numerics"): crf-scan's marginals were exp(leaf + outside − log Z),
1.28 at scores of 1e6 and inf from 1e12 on; crf's last tag marginal was exp(final − log Z), rows
summing to 0.985 at a common offset of 1e6. Both now normalise (a softmax) instead.

The oracle is the sequential ``crf`` in float64 (torch), run on the float32-rounded scores, i.e.
on exactly the numbers the float32 method sees: what remains is its own rounding.

Tolerance. crf-scan works on log-weights (log-sums of partial path scores). Each tree level
rounds values no larger than ``L' = L + n log T``, where ``L`` is the sum over positions of the
largest finite |score| (a bound on every partial path score) and ``n log T`` bounds the log of a
path count; the inside and outside passes each have ``depth = bit_length(N)`` levels. So every
entry's log-weight is off by at most ``Δ = 2 (depth + 2) eps32 L'`` relative to the others (the
worst spread measured over 400 random instances, N up to 200, common offsets up to 1e6, was
2.9 eps32 L', against a bound of 6 to 20 eps32 L'). A marginal ``m = Σ_e exp(x_e) / Σ_f exp(x_f)``
whose log-weights move by at most Δ relative to each other moves by at most
``min(m, 1 − m) · expm1(Δ)`` (both ``m`` and ``1 − m`` change by a factor within ``e^{±Δ}``), plus
the final rounding (:data:`ATOL`). At large scales marginals are 0 or 1 to within ``e^{-gap}``,
so the bound is tight there (that is where the old ``exp(leaf + outside − log Z)`` gave 1.28 or
inf); near-ties at huge scale are ill-conditioned for any float32 algorithm and the bound says
so (``1 − m`` is summed from the other entries, never computed as ``1 − m``, so it stays exact).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

import implementations
from implementations.reference import brute_force

from . import backends
from .backends import Backend
from .instances import Instance, apply, instances, make_instance, npy

SCALES = (1.0, 1e4, 1e6, 1e12, 1e30)
EPS32 = float(np.finfo(np.float32).eps)
#: final rounding of a marginal: a softmax over T² <= 25 entries and a sum of T of them, within
#: about T² eps32 = 3e-6, with a margin of 3.
ATOL = 1e-5


def rounded(inst: Instance) -> Instance:
    """The same instance with every score rounded to float32 (held in float64)."""

    def to32(x: np.ndarray | None) -> np.ndarray | None:
        return None if x is None else x.astype(np.float32).astype(np.float64)

    return replace(
        inst,
        emissions=to32(inst.emissions),
        transitions=to32(inst.transitions),
        start=to32(inst.start),
        end=to32(inst.end),
    )


def _largest_finite(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.where(np.isfinite(x), np.abs(x), 0.0).max(axis=axes, initial=0.0)


def error_budget(inst: Instance) -> np.ndarray:
    """Δ (B,): bound on crf-scan's float32 error in any log-weight, relative to the others."""
    depth = inst.length.bit_length()  # levels of the tree: N + 1 factors padded to 2^depth
    budget = np.zeros(inst.batch)
    for b in range(inst.batch):
        seq, n = inst.seq(b), int(inst.lengths[b])
        per_step = (
            seq["transitions"]
            if inst.per_position
            else np.broadcast_to(seq["transitions"], (n - 1, inst.num_tags, inst.num_tags))
        )
        bound = _largest_finite(seq["emissions"], (1,)).sum() + _largest_finite(per_step, (1, 2)).sum()
        for boundary in (seq["start"], seq["end"]):
            if boundary is not None:
                bound += _largest_finite(boundary, (0,))
        budget[b] = 2 * (depth + 2) * EPS32 * (bound + n * np.log(inst.num_tags))
    return budget


def _others(marginal: np.ndarray) -> np.ndarray:
    """For every entry of unary (B, N, T) or pairwise (B, N-1, T, T) marginals, the sum of the
    other entries of its position (the last one or two axes), summed from those small numbers
    rather than taken as ``1 − m`` (which rounds a tiny complement to 0)."""
    axes = marginal.ndim - 2
    entries = int(np.prod(marginal.shape[-axes:]))
    flat = marginal.reshape(*marginal.shape[:2], entries)
    return (flat @ (1.0 - np.eye(entries))).reshape(marginal.shape)


def assert_marginals_within(
    got: np.ndarray, reference: np.ndarray, budget: np.ndarray, what: str, *, normalised: bool = True
) -> None:
    """``|got − reference| <= ATOL + min(m, 1 − m) · expm1(Δ_b)`` entrywise (see the module doc),
    for unary (B, N, T) or pairwise (B, N-1, T, T) marginals; Δ_b is capped where expm1 would
    overflow (the bound is vacuous long before). Without ``normalised`` (a gradient by autodiff,
    a product of log-sum-exp weights each off by a factor within ``e^{±Δ}``, never renormalised)
    the bound is ``m · expm1(Δ_b)``: exact at saturation still, but not near 1."""
    assert np.isfinite(got).all(), f"{what}: non-finite marginals"
    smaller = np.minimum(reference, _others(reference)) if normalised else reference
    spread = np.expm1(np.minimum(budget, 700.0)).reshape(-1, *([1] * (reference.ndim - 1)))
    excess = np.abs(got - reference) - (ATOL + smaller * spread)
    if excess.size:
        worst = np.unravel_index(np.argmax(excess), excess.shape)
        assert excess[worst] <= 0, (
            f"{what}{worst}: got {got[worst]}, crf float64 {reference[worst]}, budget {budget[worst[0]]:.3g}"
        )


def assert_rows_sum_to_one(unary: np.ndarray, pairwise: np.ndarray, inst: Instance) -> None:
    valid = inst.valid()
    np.testing.assert_allclose(unary.sum(-1)[valid], 1.0, rtol=0, atol=ATOL, err_msg="unary rows")
    arcs = valid[:, 1:]
    np.testing.assert_allclose(pairwise.sum((-1, -2))[arcs], 1.0, rtol=0, atol=ATOL, err_msg="pairwise")


def reference(inst: Instance) -> dict[str, Any]:
    """crf in float64 (torch): marginals, log Z and the best path's score, as NumPy."""
    crf, kw = implementations.get("crf", "torch"), inst.arrays("torch", "float64")
    unary, pairwise = apply(crf, "marginals", kw)
    best = npy(apply(crf, "decode", kw))
    return {
        "unary": npy(unary),
        "pairwise": npy(pairwise),
        "log_partition": npy(apply(crf, "log_partition", kw)),
        "best": np.array([path_score(inst, b, best[b]) for b in range(inst.batch)]),
    }


def path_score(inst: Instance, b: int, path: np.ndarray) -> float:
    return float(brute_force.path_score(path[: int(inst.lengths[b])], **inst.seq(b)))


EXACT = ("crf", "crf-scan")


def check_against_crf(backend: Backend, inst: Instance, method: str = "crf-scan") -> None:
    """Every ``method`` result in float32 on ``inst`` (rounded to float32) against crf in float64:
    marginals and ∂ log Z / ∂ emissions within the bound, rows summing to 1, log Z within Δ, and
    a Viterbi path whose exact score is within Δ of the best."""
    inst = rounded(inst)
    ref, budget = reference(inst), error_budget(inst)
    mod, kw = backend.module(method), inst.arrays(backend, "float32")
    unary, pairwise = (npy(x) for x in apply(mod, "marginals", kw))
    assert_marginals_within(unary, ref["unary"], budget, "unary")
    assert_marginals_within(pairwise, ref["pairwise"], budget, "pairwise")
    assert_rows_sum_to_one(unary, pairwise, inst)

    log_z, grads = backend.value_and_grad(lambda k: apply(mod, "log_partition", k), kw, ("emissions",))
    assert_marginals_within(
        grads["emissions"], ref["unary"], budget, "∂ log Z / ∂ emissions", normalised=False
    )
    assert (np.abs(log_z - ref["log_partition"]) <= budget).all(), (log_z, ref["log_partition"], budget)

    decoded = npy(apply(mod, "decode", kw))
    scores = np.array([path_score(inst, b, decoded[b]) for b in range(inst.batch)])
    assert (scores >= ref["best"] - budget).all(), (scores, ref["best"], budget)


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("scale", SCALES)
@backends.given(data=st.data())
def test_float32_equals_crf_float64_at_every_scale(
    method: str, scale: float, backend: Backend, data: st.DataObject
) -> None:
    """Random B, N, T (lengths from 1, garbage padding, -inf patterns), scores N(0, scale²)."""
    inst = data.draw(instances(max_batch=4, max_len=24, max_tags=4, scale=(scale,)))
    check_against_crf(backend, inst, method)


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("scale", [1e4, 1e30])
def test_long_sequences_at_large_scale(backend: Backend, scale: float, method: str) -> None:
    """N = 200: no overflow and no inf − inf in the outside pass; lengths 200, 1 and 137."""
    rng = np.random.default_rng(11)
    inst = make_instance(
        rng, batch=3, length=200, num_tags=5, lengths=[200, 1, 137], neg_inf=0.2, scale=scale
    )
    check_against_crf(backend, inst, method)


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("offset", [1e3, 1e5, 1e6])
def test_large_common_offset(backend: Backend, offset: float, method: str) -> None:
    """Scores of size ``offset`` with O(1) differences: large log Z, marginals far from 0 and 1
    (the regime where the tolerance is not trivial). Rows must still sum to 1."""
    rng = np.random.default_rng(12)
    inst = make_instance(rng, batch=4, length=40, num_tags=4, neg_inf=0.2)
    shifted = replace(inst, emissions=inst.emissions + offset, transitions=inst.transitions - 2 * offset)
    check_against_crf(backend, shifted, method)


def test_issue_reproducer(backend: Backend) -> None:
    """The issue's instance: crf-scan gave a unary marginal of 1.284 (crf: exactly 1 and 0)."""
    emissions = np.array(
        [[[818940.6875, -438447.09375], [-458203.3125, 358524.90625], [765806.5, -408311.3125]]], np.float32
    )
    transitions = np.array([[-247342.40625, 429344.6875], [584292.0, 227587.796875]], np.float32)
    lengths = np.array([3])
    scores = (backend.array(emissions), backend.array(transitions), backend.array(lengths))
    unary, pairwise = (npy(x) for x in backend.module("crf-scan").marginals(*scores))
    np.testing.assert_array_equal(unary[0], [[1, 0], [0, 1], [1, 0]])
    np.testing.assert_array_equal(pairwise[0], [[[0, 1], [0, 0]], [[0, 0], [1, 0]]])
    torch_adapter = backends.get("torch")
    expected, _ = implementations.get("crf", "torch").marginals(
        torch_adapter.array(emissions, "float64"),
        torch_adapter.array(transitions, "float64"),
        torch_adapter.array(lengths),
    )
    np.testing.assert_array_equal(unary, npy(expected))


def test_unvalidated_infeasible_sequence_gives_zeros_not_nan(backend: Backend) -> None:
    """With ``validate=False`` a sequence with no allowed path gets zero marginals, not NaN (the
    per-factor normalisation guards its all -inf factors), and leaves the other rows alone."""
    inst = make_instance(
        np.random.default_rng(13), batch=2, length=4, num_tags=3, lengths=[4, 3], garbage=False
    )
    scores = inst.scores()
    scores["emissions"][1, 1] = -np.inf
    mod, kw = backend.module("crf-scan"), backend.arrays(scores)
    unary, pairwise = (npy(x) for x in apply(mod, "marginals", kw, validate=False))
    assert (unary[1] == 0).all() and (pairwise[1] == 0).all()
    alone = inst.alone(0)
    np.testing.assert_allclose(unary[:1], npy(apply(mod, "marginals", alone.arrays(backend))[0]), atol=1e-12)
