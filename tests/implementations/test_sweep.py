"""BCRF's C sweep in torch (``implementations/_sweep.c``): IBP iterations on a linear state,
several to a sweep, against their oracle, pairs of eager ``_linear_projected`` (the compiled
projections' own arithmetic, tested against the log form and the reference loop in
test_bcrf.py): every length 1..7 with padding, tag counts on each side of the C kernel's vector
and register-chunk widths, dead tags, both parities first, float32 and float64; and the same
values bit for bit whatever the iterations a sweep or the threads."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from implementations.torch_backend import _sweep  # noqa: E402
from implementations.torch_backend import bcrf as kernel  # noqa: E402
from implementations.torch_backend._scores import arc_terms  # noqa: E402

from .unbuilt import assert_unbuilt_sweep_is_unavailable  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _sweep.available(torch.device("cpu"), torch.float64, _sweep.FROM_TAGS),
    reason="no C compiler for the sweep",
)
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-5}


def _state(seed: int, num_tags: int, dtype: torch.dtype, max_len: int = 7) -> tuple[Any, ...]:
    """A vouched kernel laid out by parity and the linear state of its first iterate, for a batch of
    every length 1..``max_len`` (padded to it) with about a fifth of the emissions -inf (but one
    live tag a node)."""
    rng = np.random.default_rng(seed)
    lengths = torch.arange(1, max_len + 1)
    emissions = rng.normal(size=(max_len, max_len, num_tags))
    dead = rng.random(emissions.shape) < 0.2
    dead[..., rng.integers(num_tags)] = False
    emissions = torch.tensor(np.where(dead, -math.inf, emissions), dtype=dtype)
    transitions = torch.tensor(rng.normal(size=(max_len, max_len - 1, num_tags, num_tags)), dtype=dtype)
    terms = arc_terms(emissions, transitions, lengths, None, None)
    kernel_, scalings = kernel.scaling._scaled_initial(terms, lengths, 1.0)
    state = kernel.linear._linear_start(kernel_, scalings, lengths)
    assert state is not None
    return kernel_, lengths, state


def _eager_iterations(kernel_: Any, lengths: Any, state: Any, first: int, count: int) -> Any:
    """``count`` iterations of two projections by eager ``_linear_projected``, the nodes of parity
    ``first`` first."""
    num_arcs = kernel_.linear.shape[1]
    for _ in range(count):
        for parity in (first, 1 - first):
            state = kernel.linear._linear_projection(kernel_, lengths, num_arcs, parity + 2 * (parity == 0))(
                state
            )
    return state


def _flat(state: Any) -> list[Any]:
    return [*state[0], *state[1], state[2]]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("num_tags", [1, 3, 16, 17, 70, 130])
@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("count", [1, 3])
def test_sweep_is_two_linear_projections_an_iteration(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, num_tags: int, first: int, count: int
) -> None:
    """The sweep's scalings, shifts and smallest live scaling after ``count`` iterations are those of
    as many pairs of eager projections, to rounding; its inputs are left as they were."""
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    monkeypatch.setattr(kernel.compilation, "_run_compiled", lambda function, *args: function(*args))
    kernel_, lengths, state = _state(num_tags, num_tags, dtype)
    before = [x.clone() for x in _flat(state)]
    blocks = (kernel_.parities[0][0], kernel_.parities[1][0])
    swept = _sweep.iterations(blocks, lengths, *state, first, count)
    assert all(torch.equal(x, y) for x, y in zip(before, _flat(state), strict=True))
    expected = _eager_iterations(kernel_, lengths, state, first, count)
    tol = TOLERANCE[dtype]
    for got, want in zip(_flat(swept), _flat(expected), strict=True):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    if num_tags > 1:  # some projection wrote a scaling under its vector's largest
        assert (swept[2] < 1).any()


@pytest.mark.parametrize("depth", [1, 2, 3, 7])
def test_iterations_taken_several_to_a_sweep_are_those_taken_one_at_a_time(
    monkeypatch: pytest.MonkeyPatch, depth: int
) -> None:
    """However many iterations a sweep takes at once (``DEPTH``, here more and fewer than the 6 run
    and than a sequence's 3 or 4 waves), every value is that of one iteration a call, bit for bit."""
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    kernel_, lengths, state = _state(8, 17, torch.float32)
    blocks = (kernel_.parities[0][0], kernel_.parities[1][0])
    one_at_a_time = state
    for _ in range(6):
        one_at_a_time = _sweep.iterations(blocks, lengths, *one_at_a_time, 1)
    monkeypatch.setattr(_sweep, "DEPTH", depth)
    together = _sweep.iterations(blocks, lengths, *state, 1, 6)
    assert all(torch.equal(x, y) for x, y in zip(_flat(one_at_a_time), _flat(together), strict=True))


def test_sweep_shares_the_sequences_among_threads_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With two torch threads the sequences are split between two calls; every value is the one
    thread's, bit for bit."""
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    kernel_, lengths, state = _state(5, 17, torch.float64)
    blocks = (kernel_.parities[0][0], kernel_.parities[1][0])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = _sweep.iterations(blocks, lengths, *state, 0, 2)
        torch.set_num_threads(2)
        shared = _sweep.iterations(blocks, lengths, *state, 0, 2)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(x, y) for x, y in zip(_flat(alone), _flat(shared), strict=True))


def test_sweep_refuses_blocks_that_are_not_contiguous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel.compilation, "FUSED_FROM", 1)
    kernel_, lengths, state = _state(6, 3, torch.float64)
    blocks = (
        kernel.transition_kernel._with_transposes(kernel_).parities[0][1].transpose(-1, -2),
        kernel_.parities[1][0],
    )
    with pytest.raises(ValueError, match="arc blocks must be contiguous"):
        _sweep.iterations(blocks, lengths, *state, 0)


def test_without_a_compiler_the_sweep_warns_once_and_is_not_available(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A C compiler that cannot build the sweep (here, none at ``$CC``) gives one warning naming
    it, leaves nothing in the cache, and the sweep unavailable: IBP's projections run compiled."""
    assert_unbuilt_sweep_is_unavailable(
        monkeypatch,
        tmp_path,
        "CC",
        _sweep._library,
        (
            lambda: _sweep.available(torch.device("cpu"), torch.float64, 128),
            lambda: _sweep.available(torch.device("cpu"), torch.float32, 128),
        ),
    )
