"""Every function of every jax method under ``jax.jit`` (options static).

- jit == eager, on an instance with every length, -inf scores and garbage padding;
- a second call with new values of the same shapes (new lengths, tags, masks, scores) does not
  retrace (traces counted by a Python side effect in a wrapper) and equals the torch backend;
- under tracing the value checks (NaN, +inf, lengths out of range, gold tags out of range or
  with score -inf, no allowed sequence) are skipped: no ``ValueError``, no retrace;
- shape, dtype and option errors are still raised, at trace time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from . import backends
from .instances import Instance, apply, invoke, make_instance, random_allowed

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.jax

JAX = backends.get("jax")
TORCH = backends.get("torch")

#: (method, function, static options): every function of every method; the iterative methods
#: with non-default options, so that the options really are static under jit.
BCRF = {"iterations": 3, "temperature": 0.5, "order": "even-odd"}
MEANFIELD = {"iterations": 3, "init": "uniform", "penalty": -50.0}
SPARSEMAP = {"solver": "pairwise-fw", "iterations": 20, "max_support": 8, "oracle": "scan"}
CASES: list[tuple[str, str, dict[str, Any]]] = [
    *[
        (m, fn, {})
        for m in ("crf", "crf-scan")
        for fn in ("marginals", "decode", "loss", "partial_loss", "log_partition")
    ],
    *[("unstructured", fn, {}) for fn in ("marginals", "decode", "loss", "partial_loss", "log_partition")],
    ("unstructured", "decode", {"repair": True}),
    *[("bcrf", fn, BCRF) for fn in ("marginals", "decode", "log_partition", "solve")],
    ("bcrf", "loss", {**BCRF, "gradient": "unrolled"}),
    ("bcrf", "partial_loss", {**BCRF, "gradient": "danskin"}),
    *[
        ("meanfield", fn, MEANFIELD)
        for fn in ("marginals", "decode", "loss", "partial_loss", "log_partition", "solve")
    ],
    *[
        ("sparsemap", fn, SPARSEMAP)
        for fn in ("marginals", "decode", "partial_loss", "log_partition", "solve")
    ],
    ("sparsemap", "loss", {**SPARSEMAP, "cost": "hamming"}),
]
IDS = [f"{m}-{fn}" + "".join(f"-{k}={v}" for k, v in o.items()) for m, fn, o in CASES]

B, N, T = 5, 6, 3


def instance(seed: int, lengths: list[int]) -> tuple[Instance, np.ndarray]:
    """(B, N, T) = (5, 6, 3), per-position transitions, start/end, -inf in 30% of the scores."""
    rng = np.random.default_rng(seed)
    inst = make_instance(rng, batch=B, length=N, num_tags=T, lengths=lengths, neg_inf=0.3, scale=2.0)
    return inst, random_allowed(rng, inst)


FIRST = instance(1, [6, 1, 3, 2, 5])
SECOND = instance(2, [2, 6, 1, 4, 3])  # the same shapes, other values and lengths


def extra(fn: str, inst: Instance, allowed: np.ndarray, backend: backends.Backend) -> tuple[Any, ...]:
    if fn == "loss":
        return (inst.gold_array(backend),)
    if fn == "partial_loss":
        return (backend.array(allowed),)
    return ()


def counted(fn: Callable[..., Any], counter: list[int]) -> Callable[..., Any]:
    """``fn`` with a Python side effect: ``counter[0]`` counts how often jax traces it."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return fn(*args, **kwargs)

    return wrapper


@functools.cache
def jitted(method: str, fn: str, static: tuple[str, ...]) -> tuple[Callable[..., Any], list[int]]:
    """``jax.jit`` of the module function itself, options static by name, and its trace count
    (shared by the tests below, which all call it with the same shapes)."""
    counter = [0]
    return jax.jit(counted(getattr(JAX.module(method), fn), counter), static_argnames=static), counter


def call_jitted(method: str, fn: str, opts: dict[str, Any], kw: dict[str, Any], *args: Any) -> Any:
    function, _ = jitted(method, fn, tuple(sorted(opts)))
    return invoke(function, kw, *args, **opts)


def as_dict(result: Any, fn: str) -> dict[str, Any]:
    if fn == "marginals":
        return dict(zip(("unary", "pairwise"), result, strict=True))
    if fn == "solve":
        return result._asdict()
    return {fn: result}


def assert_close(got: dict[str, Any], want: dict[str, Any], backend: backends.Backend, tol: float) -> None:
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        if key == "iterations":  # a Python int when eager, a 0-d array out of jit
            assert isinstance(value, int) and int(got[key]) == value
            continue
        g, w = JAX.numpy(got[key]), backend.numpy(value)
        assert g.shape == w.shape, key
        if np.issubdtype(w.dtype, np.integer):
            assert np.issubdtype(g.dtype, np.integer), (key, g.dtype)
            np.testing.assert_array_equal(g, w, err_msg=key)
        else:
            assert g.dtype == w.dtype, (key, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=key)


@pytest.mark.parametrize(("method", "fn", "opts"), CASES, ids=IDS)
def test_jit_equals_eager_and_does_not_retrace(method: str, fn: str, opts: dict[str, Any]) -> None:
    inst, allowed = FIRST
    kw = inst.arrays(JAX)
    eager = apply(JAX.module(method), fn, kw, *extra(fn, inst, allowed, JAX), **opts)
    first = call_jitted(method, fn, opts, kw, *extra(fn, inst, allowed, JAX))
    assert_close(as_dict(first, fn), as_dict(eager, fn), JAX, 1e-12)
    # new values, same shapes: the compiled program is reused, and it is right (torch reference)
    inst, allowed = SECOND
    second = call_jitted(method, fn, opts, inst.arrays(JAX), *extra(fn, inst, allowed, JAX))
    assert jitted(method, fn, tuple(sorted(opts)))[1] == [1], "retraced for new values of the same shapes"
    reference = apply(TORCH.module(method), fn, inst.arrays(TORCH), *extra(fn, inst, allowed, TORCH), **opts)
    assert_close(as_dict(second, fn), as_dict(reference, fn), TORCH, 1e-10)


# ---------------------------------------------------------------- value checks skipped under jit


def _set(name: str, index: tuple[int, ...], value: float) -> Callable[[dict[str, np.ndarray]], None]:
    return lambda k: k[name].__setitem__(index, value)


BAD_VALUES: dict[str, tuple[Callable[[dict[str, np.ndarray]], None], tuple[str, ...]]] = {
    "emissions NaN": (_set("emissions", (0, 1, 2), math.nan), ()),
    "transitions +inf": (_set("transitions", (0, 1, 0, 0), math.inf), ()),
    "start NaN": (_set("start", (1,), math.nan), ()),
    "lengths zero": (_set("lengths", (1,), 0), ()),
    "lengths above N": (_set("lengths", (0,), N + 3), ()),
    "no valid sequence": (lambda k: k["emissions"][0, 0].fill(-math.inf), ()),
    "gold tag out of range": (_set("tags", (0, 0), T), ("loss",)),
    "gold tag -1 inside": (_set("tags", (2, 0), -1), ("loss",)),
    "gold sequence with score -inf": (
        lambda k: k["emissions"].__setitem__((1, 0, k["tags"][1, 0]), -math.inf),
        ("loss",),
    ),
    "allowed forbids a whole position": (lambda k: k["allowed"][0, 0].fill(False), ("partial_loss",)),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
@pytest.mark.parametrize("method", sorted({m for m, _, _ in CASES}))
def test_value_checks_are_skipped_under_jit(method: str, case: str) -> None:
    """The eager call raises (as ``test_contract.py`` checks too); under jit the values are
    unknown, so the same input runs without a ``ValueError`` and without a retrace."""
    mutate, only = BAD_VALUES[case]
    inst, allowed = FIRST
    for m, fn, opts in CASES:
        if m != method or (only and fn not in only):
            continue
        values = {**inst.scores(), "tags": inst.gold.copy(), "allowed": allowed.copy()}
        mutate(values)
        kw = JAX.arrays(values)
        args = {"loss": (kw["tags"],), "partial_loss": (kw["allowed"],)}.get(fn, ())
        with pytest.raises(ValueError):
            apply(JAX.module(method), fn, kw, *args, **opts)
        out = call_jitted(method, fn, opts, kw, *args)
        jax.block_until_ready(out)
        assert jitted(method, fn, tuple(sorted(opts)))[1] == [1], (fn, "retraced")


# ------------------------------------------------------------- shape errors raised at trace time

BAD_SHAPES: dict[str, tuple[Callable[[dict[str, np.ndarray]], None], str, tuple[str, ...]]] = {
    "emissions rank 2": (lambda k: k.update(emissions=k["emissions"][0]), "emissions", ()),
    "emissions integer": (
        lambda k: k.update(emissions=np.zeros(k["emissions"].shape, dtype=np.int64)),
        "emissions",
        (),
    ),
    "transitions wrong T": (lambda k: k.update(transitions=np.zeros((T + 1, T + 1))), "transitions", ()),
    "transitions wrong N": (lambda k: k.update(transitions=k["transitions"][:, :2]), "transitions", ()),
    "start wrong T": (lambda k: k.update(start=np.zeros(T + 1)), "start", ()),
    "end rank 2": (lambda k: k.update(end=np.zeros((1, T))), "end", ()),
    "lengths wrong B": (lambda k: k.update(lengths=k["lengths"][:2]), "lengths", ()),
    "lengths float": (lambda k: k.update(lengths=k["lengths"].astype(np.float64)), "lengths", ()),
    "tags wrong shape": (lambda k: k.update(tags=k["tags"][:, :3]), "tags", ("loss",)),
    "tags float": (lambda k: k.update(tags=k["tags"].astype(np.float64)), "tags", ("loss",)),
    "allowed wrong shape": (lambda k: k.update(allowed=k["allowed"][:, :, :2]), "allowed", ("partial_loss",)),
    "allowed integer": (
        lambda k: k.update(allowed=k["allowed"].astype(np.int64)),
        "allowed",
        ("partial_loss",),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
@pytest.mark.parametrize("method", sorted({m for m, _, _ in CASES}))
def test_shape_errors_are_raised_at_trace_time(method: str, case: str) -> None:
    mutate, match, only = BAD_SHAPES[case]
    inst, allowed = FIRST
    for m, fn, opts in CASES:
        if m != method or (only and fn not in only):
            continue
        values = {**inst.scores(), "tags": inst.gold.copy(), "allowed": allowed.copy()}
        mutate(values)
        kw = JAX.arrays(values)
        args = {"loss": (kw["tags"],), "partial_loss": (kw["allowed"],)}.get(fn, ())
        function = jax.jit(lambda *a, fn=fn, opts=opts, **k: getattr(JAX.module(method), fn)(*a, **k, **opts))
        with pytest.raises(ValueError, match=match):
            invoke(function, kw, *args)


BAD_OPTIONS = [
    ("bcrf", "marginals", {"iterations": 0}, "iterations"),
    ("bcrf", "log_partition", {"temperature": -1.0}, "temperature"),
    ("bcrf", "decode", {"order": "odd-odd"}, "order"),
    ("bcrf", "loss", {"gradient": "backprop"}, "gradient"),
    ("meanfield", "solve", {"init": "random"}, "init"),
    ("meanfield", "partial_loss", {"iterations": 1.5}, "iterations"),
    ("meanfield", "log_partition", {"penalty": -math.inf}, "penalty"),
]


@pytest.mark.parametrize(("method", "fn", "opts", "match"), BAD_OPTIONS)
def test_bad_static_options_are_raised_at_trace_time(
    method: str, fn: str, opts: dict[str, Any], match: str
) -> None:
    inst, allowed = FIRST
    function = jax.jit(getattr(JAX.module(method), fn), static_argnames=tuple(opts))
    with pytest.raises(ValueError, match=match):
        invoke(function, inst.arrays(JAX), *extra(fn, inst, allowed, JAX), **opts)
