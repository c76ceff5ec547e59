"""Half precision is refused (issue 11): every method, backend and function raises a one-line
``ValueError`` naming the argument and its dtype for float16 or bfloat16 scores.

Log-space sums of scores lose every digit in 16 bits (bfloat16 ``crf`` marginal rows summed to
3.2, float16 ``crf-scan`` rows to 0.34-1.93), so the shared validation (``contract``) refuses them
rather than returning wrong numbers; the fix for a caller is a cast to float32 first. That the
refusal stops at 16 bits is the contract's to test: it calls every function of every method in
float32 and in float64 (``TestContract.test_float32_dtypes``, ``test_shapes_dtypes_and_padding``).
"""

from __future__ import annotations

import numpy as np
import pytest

import implementations

from .backends import Backend
from .instances import make_instance, random_allowed
from .test_contract import FUNCTIONS, call

HALF = ("float16", "bfloat16")
SCORES = ("emissions", "transitions", "start", "end")


def _inputs(backend: Backend, dtype: str, half: str | None = None) -> dict:
    """A small valid batch with every score in ``dtype``, or, given ``half``, every score in
    float32 but that one in ``dtype``; plus its gold ``tags`` and an ``allowed`` mask."""
    rng = np.random.default_rng(0)
    inst = make_instance(rng, batch=2, length=4, num_tags=3, lengths=[4, 2], garbage=False)
    kw = inst.arrays(backend, dtype if half is None else "float32")
    if half is not None:
        kw[half] = backend.array(inst.scores()[half], dtype)
    return {**kw, "tags": inst.gold_array(backend), "allowed": backend.array(random_allowed(rng, inst))}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("method", implementations.METHODS)
def test_half_precision_is_refused(method: str, function: str, dtype: str, backend: Backend) -> None:
    mod = backend.module(method)
    for half in SCORES:
        kw = _inputs(backend, dtype, half)
        with pytest.raises(
            ValueError, match=rf"^{half} must be float32 or float64, got half precision .*{dtype}"
        ):
            call(mod, function, kw, kw.pop("tags"), kw.pop("allowed"))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("method", ["bcrf", "meanfield"])
def test_half_precision_is_refused_by_solve(method: str, dtype: str, backend: Backend) -> None:
    kw = _inputs(backend, dtype, "emissions")
    with pytest.raises(ValueError, match="emissions must be float32 or float64"):
        backend.module(method).solve(
            kw["emissions"], kw["transitions"], kw["lengths"], start=kw["start"], end=kw["end"]
        )


@pytest.mark.parametrize("method", implementations.METHODS)
def test_half_precision_is_refused_under_jit(method: str) -> None:
    """The check needs the dtype only, so it runs while jax traces (where value checks are off)."""
    jax = pytest.importorskip("jax")
    from . import backends

    backend = backends.get("jax")
    kw = _inputs(backend, "bfloat16", "transitions")
    mod = backend.module(method)
    with pytest.raises(ValueError, match="transitions must be float32 or float64"):
        jax.jit(lambda e, t: mod.marginals(e, t, kw["lengths"], start=kw["start"], end=kw["end"]))(
            kw["emissions"], kw["transitions"]
        )
