"""crf-scan's memory guard (issue 11): a call whose largest intermediate would exceed
``contract.SCAN_MEMORY_BUDGET`` raises a clear ``ValueError`` naming ``crf`` instead of being
killed by the kernel (T = 600 at B = 2, N = 8 needs 13 GiB), from the shapes alone.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from implementations import contract

from .backends import Backend
from .instances import make_instance, random_allowed
from .test_contract import FUNCTIONS, call

REFUSED = "emissions .* crf-scan .* budget .*'crf'"


def _inputs(backend: Backend, batch: int, length: int, num_tags: int) -> dict:
    """Zero scores (shared transitions), full lengths, gold tags 0, everything allowed."""
    return {
        "emissions": backend.array(np.zeros((batch, length, num_tags), np.float32)),
        "transitions": backend.array(np.zeros((num_tags, num_tags), np.float32)),
        "lengths": backend.array(np.full(batch, length)),
        "tags": backend.array(np.zeros((batch, length), np.int64)),
        "allowed": backend.array(np.ones((batch, length, num_tags), bool)),
    }


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("function", FUNCTIONS)
def test_too_large_is_refused_before_allocating(backend: Backend, function: str, validate: bool) -> None:
    """T = 600: a 12.9 GiB intermediate (B · P/2 · T³ · 4 bytes). Refused whatever ``validate``
    says; had anything that size been attempted, the process would have been killed or failed
    with an allocation error instead."""
    kw = _inputs(backend, batch=2, length=8, num_tags=600)
    with pytest.raises(ValueError, match=REFUSED):
        call(backend.module("crf-scan"), function, kw, kw["tags"], kw["allowed"], validate=validate)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_too_large_is_refused_under_jit(function: str) -> None:
    """The guard needs shapes only, so it also refuses while jax traces."""
    jax = pytest.importorskip("jax")
    from . import backends

    backend = backends.get("jax")
    kw = _inputs(backend, batch=2, length=8, num_tags=600)
    mod = backend.module("crf-scan")
    with pytest.raises(ValueError, match=REFUSED):
        jax.jit(
            lambda e, t: call(
                mod, function, {**kw, "emissions": e, "transitions": t}, kw["tags"], kw["allowed"]
            )
        )(kw["emissions"], kw["transitions"])


@pytest.mark.parametrize("length", [1, 2, 3, 7, 8, 9, 16])
def test_intermediate_size_is_the_engines(backend: Backend, length: int) -> None:
    """``scan_intermediate_elements`` counts what the engine builds: its first tree level is
    (B, P/2, T, T), each entry a reduction over a (T,) slice of the (B, P/2, T, T, T) sums."""
    tree = importlib.import_module(f"implementations.{backend.name}_backend._tree")
    inst = make_instance(np.random.default_rng(0), batch=3, length=length, num_tags=4)
    kw = inst.arrays(backend)
    factors = tree.chain_factors(kw["emissions"], kw["transitions"], kw["lengths"], kw["start"], kw["end"])
    first_level = tree._inside(factors)[1]  # N + 1 >= 2 factors: there is always one product
    assert contract.scan_intermediate_elements(3, length, 4) == int(np.prod(first_level.shape)) * 4


def test_budget_is_the_limit_and_can_be_raised(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """One byte under the need is refused, exactly the need is accepted (the budget is read at
    each call; under jax.jit when traced, so the refusal is checked first, before a trace is cached)."""
    rng = np.random.default_rng(1)
    inst = make_instance(rng, batch=2, length=5, num_tags=3)
    kw = inst.arrays(backend, "float32")
    tags, allowed = inst.gold_array(backend), backend.array(random_allowed(rng, inst))
    needed = contract.scan_intermediate_elements(2, 5, 3) * 4
    mod = backend.module("crf-scan")
    for function in FUNCTIONS:
        monkeypatch.setattr(contract, "SCAN_MEMORY_BUDGET", needed - 1)
        with pytest.raises(ValueError, match=REFUSED):
            call(mod, function, kw, tags, allowed)
        monkeypatch.setattr(contract, "SCAN_MEMORY_BUDGET", needed)
        call(mod, function, kw, tags, allowed)


def test_float64_counts_eight_bytes() -> None:
    """The budget is in bytes of the scores' dtype: a shape that fits in float32 by a factor
    below 2 is refused in float64."""
    small = np.zeros((1, 8, 400), np.float32)  # 8 · 400³ · 4 = 1.9 GiB: fits in float32
    contract.check_scan_memory(small)
    with pytest.raises(ValueError, match=REFUSED):
        contract.check_scan_memory(small.astype(np.float64))
