"""jax == torch: every function of every method, in float64, on random instances.

The torch backend is the reference semantics (it is checked against the NumPy oracles by the
rest of the suite); here the jax backend must reproduce it to 1e-10 -- marginals, decode (exactly),
loss, partial loss, log partition and every field of ``solve`` -- and the gradients of the losses
and the log partition w.r.t. emissions, transitions, start and end to 1e-9 (mean field with -inf
transitions: both scaled by |penalty|/100, the rounding growth ``test_meanfield.py`` documents).
Instances are drawn by hypothesis: B <= 5, N <= 8, T <= 4, lengths from 1 to N, shared and
per-position transitions, with and without start/end, -inf patterns, and garbage (large values
and -inf) in the padding; a fixed example with lengths 1, 2, 3, 5, 8 always runs too.

All jax outputs and gradients of one method and option setting come from one ``jax.jit``
program: one XLA compilation per input shape, where eager calls would compile one or more programs
per function and gradient (several times the time). ``test_jit.py`` checks jit == eager.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from crfbench.environment import gpu_present
from implementations import registry

from . import backends
from .instances import Instance, apply, instances, make_instance, random_allowed

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.jax

TORCH = backends.get("torch")
JAX = backends.get("jax")

FUNCTIONS = ("marginals", "decode", "loss", "partial_loss", "log_partition")
DIFFERENTIABLE = ("loss", "partial_loss", "log_partition")
SCORES = ("emissions", "transitions", "start", "end")
RTOL = ATOL = 1e-10
GRAD_RTOL = GRAD_ATOL = 1e-9

#: (method, options): each method's defaults, and every option value of the contract at least
#: once -- bcrf: iterations 1/3/10, τ 1 and 0.1 (decode's default τ is 0.1), both orders, both
#: gradients; mean field: both inits, iterations 1/5/10, the default and a moderate penalty;
#: unstructured: decode with and without repair; sparsemap: the active set with both oracles, a
#: full support, an iteration cap and a tolerance. Its Frank–Wolfe variants are held to the
#: reference QP in each backend instead (test_sparsemap.py): their trajectories follow ties in
#: the oracle and the away atom, which the frameworks' last-bit differences break differently.
SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("crf", {}),
    ("crf-scan", {}),
    ("unstructured", {}),
    ("unstructured", {"repair": True}),
    ("bcrf", {}),  # iterations 10, τ 1 (decode 0.1), odd-even, danskin
    ("bcrf", {"iterations": 1, "temperature": 1.0, "order": "even-odd", "gradient": "unrolled"}),
    ("bcrf", {"iterations": 3, "temperature": 0.1, "order": "odd-even", "gradient": "danskin"}),
    ("bcrf", {"iterations": 10, "temperature": 0.1, "order": "even-odd", "gradient": "unrolled"}),
    ("meanfield", {}),  # init unary, iterations 10, penalty -1e4
    ("meanfield", {"init": "uniform", "iterations": 1}),
    ("meanfield", {"init": "unary", "iterations": 1, "penalty": -30.0}),
    ("meanfield", {"init": "uniform", "iterations": 5}),
    ("meanfield", {"init": "unary", "iterations": 5}),
    ("sparsemap", {}),  # active set, Viterbi oracle, to convergence
    ("sparsemap", {"oracle": "scan", "max_support": 4}),  # stops at a full support
    ("sparsemap", {"iterations": 3, "tolerance": 1e-3}),
]


#: Share of the hypothesis profile's ``max_examples`` per setting (every example is a new shape:
#: a jax compilation of the whole program, ~1-3 s for BCRF); the hand-written ``@example`` below
#: (every length, -inf everywhere, -inf padding) always runs in addition.
EXAMPLES = max(2, round(settings.default.max_examples * 0.1))


def options(method: str, fn: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The options that ``fn`` takes (``implementations.registry``)."""
    takes = {option.name for option in registry.REGISTRY[method].options_for(fn)}
    return {k: v for k, v in opts.items() if k in takes}


def outputs(mod: Any, method: str, opts: dict[str, Any], kw: dict[str, Any], tags: Any, allowed: Any) -> dict:
    """Every contract output of one method (backend arrays): function values and solve fields."""
    extra = {"loss": (tags,), "partial_loss": (allowed,)}
    out: dict[str, Any] = {}
    for fn in FUNCTIONS:
        value = apply(mod, fn, kw, *extra.get(fn, ()), **options(method, fn, opts))
        if fn == "marginals":
            out["unary"], out["pairwise"] = value
        else:
            out[fn] = value
    if registry.REGISTRY[method].iterative:
        res = apply(mod, "solve", kw, **options(method, "solve", opts))
        out.update({f"solve.{field}": getattr(res, field) for field in res._fields})
    return out


def torch_results(
    method: str, opts: dict[str, Any], inst: Instance, allowed: np.ndarray, torch_: Any = TORCH
) -> dict[str, Any]:
    """Every output and gradient of ``method`` in torch (on ``torch_``'s device), as NumPy."""
    mod = torch_.module(method)
    kw, tags, allow = inst.arrays(torch_), inst.gold_array(torch_), torch_.array(allowed)
    with torch_.no_grad():
        out = {
            k: v if isinstance(v, int) else torch_.numpy(v)
            for k, v in outputs(mod, method, opts, kw, tags, allow).items()
        }
    wrt = tuple(k for k in SCORES if kw[k] is not None)
    extra = {"loss": (tags,), "partial_loss": (allow,)}
    for fn in DIFFERENTIABLE:
        fn_opts = options(method, fn, opts)
        _, grads = torch_.value_and_grad(
            lambda k, fn=fn, fn_opts=fn_opts: apply(mod, fn, k, *extra.get(fn, ()), **fn_opts),
            kw,
            wrt,
            connected=False,  # unstructured ignores transitions, start and end: zero gradients
        )
        out.update({f"grad {fn} / {k}": g for k, g in grads.items()})
    return out


@functools.cache
def jax_program(method: str, frozen_opts: tuple[tuple[str, Any], ...]) -> Any:
    """One jitted program computing every output and every gradient (options static)."""
    mod = JAX.module(method)
    opts = dict(frozen_opts)

    def program(kw: dict[str, Any], tags: Any, allowed: Any) -> dict[str, Any]:
        out = outputs(mod, method, opts, kw, tags, allowed)  # solve.iterations: a 0-d array under jit
        wrt = {k: kw[k] for k in SCORES if kw[k] is not None}
        extra = {"loss": (tags,), "partial_loss": (allowed,)}
        for fn in DIFFERENTIABLE:
            fn_opts = options(method, fn, opts)

            def total(leaves: dict[str, Any], fn: str = fn, fn_opts: dict[str, Any] = fn_opts) -> Any:
                return apply(mod, fn, {**kw, **leaves}, *extra.get(fn, ()), **fn_opts).sum()

            grads = jax.grad(total)(wrt)
            out.update({f"grad {fn} / {k}": g for k, g in grads.items()})
        return out

    return jax.jit(program)


def jax_results(
    method: str, opts: dict[str, Any], inst: Instance, allowed: np.ndarray, jax_: Any = JAX
) -> dict[str, Any]:
    """As :func:`torch_results` in one jitted jax program (run where ``jax_`` puts the arrays)."""
    kw, tags, allow = inst.arrays(jax_), inst.gold_array(jax_), jax_.array(allowed)
    program = jax_program(method, tuple(sorted(opts.items())))
    return {k: jax_.numpy(v) for k, v in program(kw, tags, allow).items()}


def rounding_scale(method: str, opts: dict[str, Any], inst: Instance) -> float:
    """Mean field replaces -inf transitions by ``penalty`` (default -1e4), and its fields carry
    ``|penalty| * r``: rounding grows with the penalty's magnitude (as in ``test_meanfield.py``).
    E.g. on ``_every_length()`` a loss gradient that is 0.543982151122885 (60-digit arithmetic on
    the same float64 inputs) comes out 0.5439821505 in torch and 0.5439821521 in jax."""
    if method != "meanfield" or not np.isneginf(inst.transitions).any():
        return 1.0
    return max(1.0, abs(opts.get("penalty", -1e4)) / 100)


def assert_same(torch_out: dict[str, Any], jax_out: dict[str, Any], scale: float = 1.0) -> None:
    assert sorted(torch_out) == sorted(jax_out)
    for key, want in torch_out.items():
        got = jax_out[key]
        if key == "solve.iterations":  # a Python int (eager: see test_jit.py), a 0-d array from jit
            assert np.ndim(want) == np.ndim(got) == 0 and int(got) == int(want), (key, got, want)
        elif key == "decode":
            assert np.issubdtype(got.dtype, np.integer), got.dtype
            np.testing.assert_array_equal(got, want, err_msg=key)
        elif key.startswith("grad"):
            assert got.dtype == want.dtype == np.float64, (key, got.dtype, want.dtype)
            np.testing.assert_allclose(got, want, rtol=scale * GRAD_RTOL, atol=scale * GRAD_ATOL, err_msg=key)
        else:
            assert got.dtype == want.dtype, (key, got.dtype, want.dtype)
            np.testing.assert_allclose(got, want, rtol=scale * RTOL, atol=scale * ATOL, err_msg=key)


def _every_length() -> Instance:
    """Lengths 1, 2, 3, 5, 8 in one batch, -inf in 30% of the scores and in the padding."""
    rng = np.random.default_rng(2024)
    return make_instance(rng, batch=5, length=8, num_tags=3, lengths=[3, 1, 8, 2, 5], neg_inf=0.3, scale=2.0)


#: :data:`SETTINGS` as pytest parameters, named by method and options.
SETTING_PARAMS = [pytest.param(m, o, id=m + "".join(f"-{k}={v}" for k, v in o.items())) for m, o in SETTINGS]


@pytest.mark.parametrize(("method", "opts"), SETTING_PARAMS)
@settings(max_examples=EXAMPLES)
@given(inst=instances(max_batch=5, max_len=8, max_tags=4), seed=st.integers(0, 2**16))
@example(inst=_every_length(), seed=0)
def test_jax_equals_reference(method: str, opts: dict[str, Any], inst: Instance, seed: int) -> None:
    """Every output and gradient of ``method`` with ``opts``: jax == torch (the reference)."""
    allowed = random_allowed(np.random.default_rng(seed), inst)
    assert_same(
        torch_results(method, opts, inst, allowed),
        jax_results(method, opts, inst, allowed),
        rounding_scale(method, opts, inst),
    )


def _larger() -> Instance:
    """Lengths 1..12 over 7 tags (a batch of 12), -inf in 20 % of the scores and in the padding."""
    rng = np.random.default_rng(7)
    return make_instance(
        rng, batch=12, length=12, num_tags=7, lengths=list(range(1, 13)), neg_inf=0.2, scale=2.0
    )


@pytest.mark.parametrize("name", ["torch", "jax"])
@pytest.mark.parametrize(("method", "opts"), SETTING_PARAMS)
def test_gpu_equals_cpu(
    monkeypatch: pytest.MonkeyPatch, name: str, method: str, opts: dict[str, Any]
) -> None:
    """Every output and gradient of ``method`` with ``opts`` on a GPU == on the CPU, in float64 and
    to the cross-backend tolerances (every length, -inf patterns, padding). Torch BCRF runs its
    compiled products on the GPU for every kernel (``FUSED_FROM`` = 1: Triton kernels on CUDA)
    against the eager CPU products. Skipped on a machine without a GPU."""
    if not gpu_present(name):
        pytest.skip(f"no GPU for {name}")
    import implementations.torch_backend.bcrf as kernel

    results = torch_results if name == "torch" else jax_results
    for inst in (_every_length(), _larger()):
        allowed = random_allowed(np.random.default_rng(0), inst)
        on_cpu = results(method, opts, inst, allowed, backends.get(name))
        with monkeypatch.context() as patch:
            patch.setattr(kernel.compilation, "FUSED_FROM", 1)
            on_gpu = results(method, opts, inst, allowed, backends.get(name, "gpu"))
        assert_same(on_cpu, on_gpu, rounding_scale(method, opts, inst))
