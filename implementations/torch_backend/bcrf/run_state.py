"""The state one BCRF call carries besides its arrays, in one place: what a call in progress has
decided about how it runs (deferred exactness tests, whether the linear state may run), and what
the process has learnt (whether ``torch.compile`` works here). Every such switch of the package
lives here, behind the functions below; no other module keeps mutable module-level state.

Per call (context variables, so that nested or concurrent calls do not see each other's):

- :func:`collecting_minima` / :func:`deferred_minima`: while a public function defers its
  exactness tests (on a GPU, where a read-back drains the queue of launched kernels), the
  smallest product each test would read is collected instead of read back;
- :func:`log_scalings_only` / :func:`linear_state_allowed`: the run again of a call whose linear
  state lost a scaling to underflow (:class:`Underflow`) keeps every iterate in log space;
- :func:`exactness_tests_deferred` / :func:`deferral_forced`: defer the tests on every device, as
  on a GPU (the benchmarks count a GPU step's host synchronisations on the CPU this way).

Per process: :func:`compiler_failed` / :func:`mark_compiler_failed`, set by the first failed
compilation (no C++ compiler, say), from which on the compiled functions run eager.

And what the call is inside of: :func:`capturing`, a trace by ``torch.compile`` or a CUDA graph
capture, where no decision may read a tensor back. There every exactness test is branch-free and
none of the switches above is read (a context variable cannot be traced).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor

#: While a list, the exactness tests append the smallest product each request reads to it instead
#: of reading it back, and the public function reads them all back at once.
_deferred_minima: ContextVar[list[Tensor] | None] = ContextVar("bcrf_deferred_minima", default=None)

#: Whether large vouched kernels may iterate in linear space; off for the run again of a call whose
#: linear state lost a scaling to underflow.
_linear_allowed: ContextVar[bool] = ContextVar("bcrf_linear_allowed", default=True)

#: Whether every device defers its exactness tests, as a GPU does.
_deferral_forced: ContextVar[bool] = ContextVar("bcrf_deferral_forced", default=False)

#: Whether a compilation failed in this process: the compiled functions then run eager.
_compiler_failed = False


class Underflow(ArithmeticError):
    """A scaling of the linear state fell under its floor: the call runs again in log space."""


def deferred_minima() -> list[Tensor] | None:
    """The list the exactness tests of the call in progress append their minima to, or ``None``
    where they read back in place."""
    return _deferred_minima.get()


@contextmanager
def collecting_minima(minima: list[Tensor]) -> Iterator[list[Tensor]]:
    """Within it, the exactness tests append their minima to ``minima`` (deferred)."""
    token = _deferred_minima.set(minima)
    try:
        yield minima
    finally:
        _deferred_minima.reset(token)


def linear_state_allowed() -> bool:
    """Whether the call in progress may iterate a large vouched kernel in linear space."""
    return _linear_allowed.get()


@contextmanager
def log_scalings_only() -> Iterator[None]:
    """Within it, every scaling-form iterate stays in log space (no linear state)."""
    token = _linear_allowed.set(False)
    try:
        yield
    finally:
        _linear_allowed.reset(token)


def deferral_forced() -> bool:
    """Whether the exactness tests defer on every device (:func:`exactness_tests_deferred`)."""
    return _deferral_forced.get()


@contextmanager
def exactness_tests_deferred() -> Iterator[None]:
    """Within it, the public functions defer their exactness tests and read them back together on
    every device, as they do on a GPU; the results are the same either way."""
    token = _deferral_forced.set(True)
    try:
        yield
    finally:
        _deferral_forced.reset(token)


def compiler_failed() -> bool:
    """Whether a compilation failed in this process (the compiled functions then run eager)."""
    return _compiler_failed


def mark_compiler_failed() -> None:
    """Record that a compilation failed: from now on the compiled functions run eager."""
    global _compiler_failed
    _compiler_failed = True


def capturing(tensor: Tensor) -> bool:
    """Whether the call on ``tensor`` is being traced by ``torch.compile`` or captured into a CUDA
    graph (on ``tensor``'s stream): no value may then be read back to the host, so the exactness
    tests are branch-free (computed for every entry and selected with ``where``) and the linear
    state, whose failure runs the call again, is not used."""
    return torch.compiler.is_compiling() or (tensor.is_cuda and torch.cuda.is_current_stream_capturing())
