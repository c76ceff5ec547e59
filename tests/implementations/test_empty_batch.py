"""An empty batch (B = 0) is valid input (issue 11): every function of every method, in every
backend, returns empty results of the contract's shapes and dtypes, eagerly (every check runs on
the empty arrays) and under ``jax.jit``; the loss has an empty gradient.
"""

from __future__ import annotations

import numpy as np
import pytest

import implementations

from . import backends
from .backends import Backend
from .test_contract import FUNCTIONS, call

DTYPE = "float32"


def empty_inputs(backend: Backend, length: int, num_tags: int, per_position: bool) -> dict:
    """B = 0 scores of padded length ``length`` (transitions shared or per position), start/end
    scores (which have no batch axis), and the empty ``tags`` and ``allowed``."""
    transitions = (0, length - 1, num_tags, num_tags) if per_position else (num_tags, num_tags)
    rng = np.random.default_rng(0)
    return {
        "emissions": backend.array(np.zeros((0, length, num_tags)), DTYPE),
        "transitions": backend.array(rng.normal(size=transitions), DTYPE),
        "lengths": backend.array(np.zeros(0, np.int64)),
        "start": backend.array(rng.normal(size=num_tags), DTYPE),
        "end": backend.array(rng.normal(size=num_tags), DTYPE),
        "tags": backend.array(np.zeros((0, length), np.int64)),
        "allowed": backend.array(np.zeros((0, length, num_tags), bool)),
    }


def check_empty(backend: Backend, function: str, result: object, length: int, num_tags: int) -> None:
    """``result`` of ``function`` has the contract's shapes for B = 0 and the right dtypes."""
    if function == "marginals":
        unary, pairwise = result
        assert tuple(unary.shape) == (0, length, num_tags)
        assert tuple(pairwise.shape) == (0, length - 1, num_tags, num_tags)
        assert backend.dtype_name(unary) == DTYPE and backend.dtype_name(pairwise) == DTYPE
    elif function == "decode":
        assert tuple(result.shape) == (0, length)
        assert backend.dtype_name(result) in backend.decode_dtypes
    else:
        assert tuple(result.shape) == (0,)
        assert backend.dtype_name(result) == DTYPE


SHAPES = [(1, 3, False), (5, 3, False), (5, 3, True), (4, 1, True)]  # (N, T, per_position)


@pytest.mark.parametrize(("length", "num_tags", "per_position"), SHAPES)
@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("method", implementations.METHODS)
def test_empty_batch(
    method: str, function: str, backend: Backend, length: int, num_tags: int, per_position: bool
) -> None:
    kw = empty_inputs(backend, length, num_tags, per_position)
    with backend.no_grad():
        result = call(backend.module(method), function, kw, kw["tags"], kw["allowed"])
    check_empty(backend, function, result, length, num_tags)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("method", implementations.METHODS)
def test_empty_batch_under_jit(method: str, function: str) -> None:
    pytest.importorskip("jax")
    backend = backends.get("jax")
    kw = empty_inputs(backend, 5, 3, True)
    extra = {"loss": (kw["tags"],), "partial_loss": (kw["allowed"],)}.get(function, ())
    (result,) = backend.calls(method, kw, (function, extra, {}))
    check_empty(backend, function, result, 5, 3)


@pytest.mark.parametrize("function", ["loss", "partial_loss"])
@pytest.mark.parametrize("method", implementations.METHODS)
def test_empty_batch_gradient(method: str, function: str, backend: Backend) -> None:
    kw = empty_inputs(backend, 5, 3, True)
    mod = backend.module(method)
    value, grads = backend.value_and_grad(
        lambda k: call(mod, function, k, kw["tags"], kw["allowed"]),
        kw,
        ("emissions", "transitions"),
        connected=False,  # torch: a graph over no sequence may leave an input out of it
    )
    assert value.shape == (0,)
    assert grads["emissions"].shape == (0, 5, 3) and grads["transitions"].shape == (0, 4, 3, 3)
