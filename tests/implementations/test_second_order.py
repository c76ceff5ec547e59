"""Second-order derivatives (issue 11): the derivative of every method's first gradient, as a
gradient penalty or a Newton step (Hessian-vector product) needs it, is correct, in every
backend, for every differentiable function (``loss``, ``partial_loss``, ``log_partition``).

Oracle: float64 central finite differences of the backend's own first gradient ``g`` (itself
checked against finite differences of the value in test_crf, test_bcrf, test_meanfield),
``J v ≈ (g(θ + εv) − g(θ − εv)) / 2ε``, with ``θ`` every score (emissions, transitions, start,
end) and ``v`` a random direction, 0 on the ``-inf`` scores (they cannot move; every derivative
with respect to them is 0, and must come out as exactly that, not NaN). For the exact CRF a
second oracle needs no differences: the Hessian of ``log Z`` is the covariance of the sufficient
statistics, computed by enumerating every tag sequence.

Autodiff side: reverse over reverse, ``Jᵀu = ∂<g, u>/∂θ`` (what a gradient penalty runs:
``torch.autograd.grad(..., create_graph=True)`` then grad again, ``jax.grad`` of ``jax.grad``),
and in jax forward over reverse, ``J v`` by ``jax.jvp(jax.grad(...))`` (what ``jax.hessian`` runs).
``J`` is the Hessian of the value, hence symmetric, for every function but BCRF's Danskin
gradient ``q − y``: the iterate ``q`` is not the gradient of the truncated value, so there the
reverse product is checked through the bilinear form ``uᵀ J v`` (and jax's forward one in full).

Instances are tiny (B ≤ 3, N ≤ 4, T = 3) with lengths 1 and 2, padding, shared and per-position
transitions, with and without start/end, and ``-inf`` scores that leave tags unreachable:
``-inf − -inf`` is where NaN appears in second order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from implementations.reference import brute_force

from .backends import TORCH_ONLY, Backend, jax_subset
from .instances import Instance, invoke, make_instance, random_allowed

Scores = dict[str, np.ndarray]  # score name -> array shaped like that argument

SCORES = ("emissions", "transitions", "start", "end")
EPS = 1e-5  # central differences in float64: truncation ~EPS², rounding ~1e-16/EPS
TOLERANCE = {"rtol": 1e-6, "atol": 1e-7}

#: name -> seed and keyword arguments of ``make_instance`` (T = 3 throughout); the ``-inf``
#: seeds are chosen so that every score argument holds a ``-inf`` (checked by :func:`instance`)
CASES: dict[str, dict[str, Any]] = {
    "per-position": {"seed": 1, "length": 4, "lengths": [4, 2, 1]},
    "shared-neginf": {"seed": 5, "length": 4, "lengths": [4, 2, 1], "per_position": False, "neg_inf": 0.3},
    "per-position-neginf": {"seed": 2, "length": 4, "lengths": [3, 4, 1], "neg_inf": 0.4},
    "no-boundary-neginf": {
        "seed": 4,
        "length": 4,
        "lengths": [1, 4, 2],
        "neg_inf": 0.4,
        "start": False,
        "end": False,
    },
    "lengths-1-2": {"seed": 4, "length": 2, "lengths": [2, 1], "per_position": False, "neg_inf": 0.3},
}
#: the cases the jax half runs (each compiles every second-order program anew, seconds apiece):
#: per-position and shared transitions for the exact CRFs, whose Hessian-vector products Newton's
#: method needs; for the other methods one case, -inf everywhere, lengths 1, 3, 4 and padding
JAX_CASES = ("per-position-neginf", "lengths-1-2")
EXACT = ("crf", "crf-scan")
#: calls the jax half leaves to torch: BCRF's partial loss is the loss's IBP program run twice,
#: once on masked (-inf) emissions, which the loss's case holds too; 20-35 s a gradient mode here
JAX_SKIPS = (("bcrf", "partial_loss"),)

BCRF_OPTIONS = {"iterations": 3, "temperature": 0.7}
MEANFIELD_OPTIONS = {"iterations": 3, "penalty": -20.0}  # a moderate penalty keeps FD rounding small
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    *((method, fn, {}) for method in EXACT for fn in ("loss", "partial_loss", "log_partition")),
    *(
        ("bcrf", fn, {**BCRF_OPTIONS, "gradient": gradient})
        for fn in ("loss", "partial_loss")
        for gradient in ("danskin", "unrolled")
    ),
    ("bcrf", "log_partition", BCRF_OPTIONS),
    *(("meanfield", fn, MEANFIELD_OPTIONS) for fn in ("loss", "partial_loss", "log_partition")),
    *(("unstructured", fn, {}) for fn in ("loss", "partial_loss", "log_partition")),
]


def instance(case: str) -> Instance:
    """The tiny instance of ``case``; a ``-inf`` case is checked to forbid something in every
    score argument it passes (so it exercises what its name says)."""
    options = dict(CASES[case])
    rng = np.random.default_rng(options.pop("seed"))
    inst = make_instance(rng, batch=len(options["lengths"]), num_tags=3, **options)
    if options.get("neg_inf"):
        valid = inst.valid()
        transitions = inst.transitions[valid[:, 1:]] if inst.per_position else inst.transitions
        scores = (inst.emissions[valid], transitions, inst.start, inst.end)
        assert all(np.isneginf(x).any() for x in scores if x is not None), case
    return inst


def direction(rng: np.random.Generator, inst: Instance) -> Scores:
    """A random direction over the score arguments ``inst`` passes, 0 on its ``-inf`` entries."""
    scores = inst.scores()
    return {
        k: np.where(np.isfinite(scores[k]), rng.normal(size=scores[k].shape), 0.0)
        for k in SCORES
        if scores[k] is not None
    }


def objective(backend: Backend, method: str, fn: str, inst: Instance, opts: dict[str, Any]) -> Callable:
    """``fn`` of ``method`` as a function of the score arrays (a dict as ``Instance.arrays``
    builds it), with the gold tags or a random partial annotation bound; returns (B,)."""
    extra = {
        "loss": (inst.gold_array(backend),),
        "partial_loss": (backend.array(random_allowed(np.random.default_rng(7), inst)),),
        "log_partition": (),
    }[fn]
    module = backend.module(method)
    return lambda kw: invoke(getattr(module, fn), kw, *extra, **opts)


def finite_differences(backend: Backend, function: Callable, inst: Instance, v: Scores) -> Scores:
    """``J v``: central differences, step ``EPS`` along ``v``, of the first gradient of
    ``function(...).sum()`` with respect to every score in ``v``."""

    def gradient(step: float) -> Scores:
        scores = inst.scores()
        scores.update({k: scores[k] + step * v[k] for k in v})
        return backend.value_and_grad(function, backend.arrays(scores), tuple(v), connected=False)[1]

    plus, minus = gradient(EPS), gradient(-EPS)
    return {k: (plus[k] - minus[k]) / (2 * EPS) for k in v}


def reverse_product(backend: Backend, function: Callable, inst: Instance, u: Scores) -> Scores:
    """``Jᵀu = ∂<g(θ), u>/∂θ`` by reverse over reverse, ``g`` the first gradient of
    ``function(...).sum()``: the backward pass a gradient penalty runs."""
    inputs = inst.arrays(backend)
    if backend.name == "torch":
        import torch

        names = list(u)
        leaves = [inputs[k].detach().clone().requires_grad_(True) for k in names]
        value = function({**inputs, **dict(zip(names, leaves, strict=True))}).sum()
        grads = torch.autograd.grad(value, leaves, create_graph=True, allow_unused=True)
        # a gradient that does not require grad is a constant, or detached: the bug this catches
        terms = [
            (g * torch.as_tensor(u[k])).sum()
            for k, g in zip(names, grads, strict=True)
            if g is not None and g.requires_grad
        ]
        second = torch.autograd.grad(sum(terms), leaves, allow_unused=True) if terms else [None] * len(names)
        return {
            k: np.zeros_like(u[k]) if s is None else backend.numpy(s)
            for k, s in zip(names, second, strict=True)
        }
    import jax

    def product(x: dict[str, Any], cotangent: dict[str, Any]) -> dict[str, Any]:
        gradient = jax.grad(lambda y: function({**inputs, **y}).sum())
        return jax.grad(lambda y: sum((gradient(y)[k] * cotangent[k]).sum() for k in y))(x)

    # one jit program: a single compilation instead of one per traced piece
    second = jax.jit(product)({k: inputs[k] for k in u}, {k: backend.array(u[k]) for k in u})
    return {k: backend.numpy(s) for k, s in second.items()}


def forward_product(backend: Backend, function: Callable, inst: Instance, v: Scores) -> Scores:
    """``J v`` by forward over reverse, ``jax.jvp(jax.grad(...))`` (jax only; one jit program)."""
    import jax

    inputs = inst.arrays(backend)

    def product(x: dict[str, Any], tangent: dict[str, Any]) -> dict[str, Any]:
        gradient = jax.grad(lambda y: function({**inputs, **y}).sum())
        return jax.jvp(gradient, (x,), (tangent,))[1]

    second = jax.jit(product)({k: inputs[k] for k in v}, {k: backend.array(v[k]) for k in v})
    return {k: backend.numpy(s) for k, s in second.items()}


def assert_products_equal(actual: Scores, expected: Scores, **tolerance: float) -> None:
    """Every product finite and equal to the expected one, score by score."""
    for k in expected:
        assert np.isfinite(actual[k]).all(), f"{k}: not finite"
        np.testing.assert_allclose(actual[k], expected[k], err_msg=k, **(tolerance or TOLERANCE))


def bilinear(u: Scores, v: Scores) -> float:
    """``<u, v>`` summed over every score."""
    return float(sum((u[k] * v[k]).sum() for k in u))


@pytest.mark.parametrize(
    ("method", "fn", "opts", "case"),
    [
        pytest.param(
            method,
            fn,
            opts,
            case,
            id="-".join(filter(None, (method, fn, opts.get("gradient"), case))),
            marks=()
            if case in (JAX_CASES if method in EXACT else JAX_CASES[:1]) and (method, fn) not in JAX_SKIPS
            else TORCH_ONLY,
        )
        for method, fn, opts in CALLS
        for case in CASES
    ],
)
def test_second_order_equals_finite_differences(
    backend: Backend, method: str, fn: str, opts: dict[str, Any], case: str
) -> None:
    """The derivative of the first gradient is right (never detached, never NaN): reverse over
    reverse, and jax's forward over reverse for the exact CRFs and the Danskin gradient, against
    central differences of the first gradient."""
    inst = instance(case)
    function = objective(backend, method, fn, inst, opts)
    rng = np.random.default_rng(11)
    v = direction(rng, inst)
    expected = finite_differences(backend, function, inst, v)
    danskin = opts.get("gradient") == "danskin"
    if danskin:  # J not symmetric: (Jᵀu)ᵀv = uᵀ(Jv)
        u = direction(rng, inst)
        reverse = reverse_product(backend, function, inst, u)
        assert all(np.isfinite(reverse[k]).all() for k in reverse)
        assert bilinear(reverse, v) == pytest.approx(bilinear(u, expected), rel=1e-6, abs=1e-7)
    else:
        assert_products_equal(reverse_product(backend, function, inst, v), expected)
    if backend.name == "jax" and (method in EXACT or danskin):
        assert_products_equal(forward_product(backend, function, inst, v), expected)


def covariance_product(inst: Instance, v: Scores) -> Scores:
    """Exact ``∇² log Z · v`` summed over the batch, shaped like the scores: ``Cov(φ, φ·v)`` by
    enumeration, ``φ(y)`` the sufficient statistics of a tag sequence (indicators of its
    emissions, transitions, start and end), per-position transitions per sequence, shared ones
    summed, 0 on padding."""
    out = {k: np.zeros_like(x) for k, x in v.items()}
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        probs = brute_force.probabilities(**inst.seq(b))
        along = {  # v restricted to sequence b, as scores: φ(y)·v is the path score under them
            "emissions": v["emissions"][b, :n],
            "transitions": v["transitions"][b, : n - 1] if inst.per_position else v["transitions"],
            "start": v.get("start"),
            "end": v.get("end"),
        }
        projection = brute_force.enumerate_scores(**along).scores
        weights = probs.scores * (projection - probs.scores @ projection)  # Cov(φ, φ·v) = Σ_y weights φ(y)
        paths = probs.paths
        for i in range(n):
            np.add.at(out["emissions"][b, i], paths[:, i], weights)
        for i in range(n - 1):
            block = out["transitions"][b, i] if inst.per_position else out["transitions"]
            np.add.at(block, (paths[:, i], paths[:, i + 1]), weights)
        if "start" in out:
            np.add.at(out["start"], paths[:, 0], weights)
        if "end" in out:
            np.add.at(out["end"], paths[:, -1], weights)
    return out


@pytest.mark.parametrize(
    "case", jax_subset(["per-position-neginf", "shared-neginf", "lengths-1-2"], keep=JAX_CASES[:1])
)
@pytest.mark.parametrize("method", EXACT)
def test_log_partition_hessian_is_covariance(backend: Backend, method: str, case: str) -> None:
    """Newton's Hessian-vector product through ``log Z``: ``∇² log Z · v = Cov(φ, φ·v)`` exactly
    (every tag sequence enumerated), 0 on the ``-inf`` scores, by reverse over reverse and (jax)
    forward over reverse."""
    inst = instance(case)
    function = objective(backend, method, "log_partition", inst, {})
    v = direction(np.random.default_rng(3), inst)
    expected = covariance_product(inst, v)
    exact = {"rtol": 1e-10, "atol": 1e-12}
    assert_products_equal(reverse_product(backend, function, inst, v), expected, **exact)
    if backend.name == "jax":
        assert_products_equal(forward_product(backend, function, inst, v), expected, **exact)
