"""BCRF's exactness policy in torch: the scaling form's flows are products in linear space, each
tested against ``e^{F/2}`` (F the log of the dtype's smallest normal number), above which a
product is exact to rounding; a flow the products cannot vouch for is recomputed in log space from
its arcs (:func:`_flows`). On a GPU the public functions read those tests back once, after the
run, rather than once per projection (each read-back drains the queue of launched kernels): if
one failed, the function runs again with each projection tested in place, so the result is the
same either way (:func:`_tested_once`); on the CPU each projection tests in place. A kernel whose
every entry is at least ``e^{F/2}`` (``vouched``) needs no test."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any

import torch
from torch import Tensor

from ...kernels.bcrf import Request
from ...kernels.bcrf_numerics import _floor, _safe_log
from .._semiring import logsumexp
from . import run_state
from .numerics import _interleaved
from .transition_kernel import _Kernel, _product, _tags_first, _Vectors


def _smallest(minima: list[Tensor]) -> tuple[Tensor, float]:
    """The smallest read products (0-d each), stacked, and ``e^{F/2}``: a product above it is
    exact to rounding in linear space."""
    return torch.stack(minima), math.exp(_floor(minima[0]) / 2)


def _defers(tensor: Tensor) -> bool:
    """Whether calls on ``tensor``'s device defer their exactness tests: on a GPU, where a read-back
    drains the queue of launched kernels; not on the CPU, where it costs nothing while a failed
    deferred test runs the whole call again (a partial-label training step fails one often), unless
    told to (:func:`run_state.exactness_tests_deferred`)."""
    return tensor.is_cuda or run_state.deferral_forced()


def _tested_once(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with the exactness tests of :func:`_flows` deferred and read back together
    where the device calls for it (:func:`_defers`), one host synchronisation instead of one or
    two per projection. Where one fails, ``function`` runs again with every test in place, which
    recomputes just the flows that need it: the result is the one without deferral either way.
    Where the linear state's test fails (:func:`_log_scalings`), ``function`` runs again with every
    iterate in log space."""

    @wraps(function)
    def tested(*args: Any, **kwargs: Any) -> Any:
        if run_state.capturing(args[0]):  # every test branch-free, no linear state (_flows)
            return function(*args, **kwargs)
        try:
            return deferring(*args, **kwargs)
        except run_state.Underflow:  # the linear state lost a scaling: every iterate in log space
            with run_state.log_scalings_only():
                return deferring(*args, **kwargs)

    def deferring(*args: Any, **kwargs: Any) -> Any:
        if not _defers(args[0]):  # the emissions
            return function(*args, **kwargs)
        minima: list[Tensor] = []
        with run_state.collecting_minima(minima):
            result = function(*args, **kwargs)
        if not minima:
            return result
        smallest, half = _smallest(minima)
        # a NaN (flows gone wrong after an unvouched product) also runs the tests in place
        return result if bool((smallest > half).all()) else function(*args, **kwargs)

    return tested


def _flows(kernel: _Kernel, *requests: Request) -> tuple[Tensor, ...]:
    """The log flows (B, P, T) of each request.

    One product in linear space per request, stabilised by each vector's largest entry. Every
    kernel entry and every ``e^{x − max}`` is at most 1 and a term lost to underflow is under
    ``e^F``, so a product above ``e^{F/2}`` is exact to rounding; if some product that is read is
    not, every request's flows are recomputed in log space from the arcs (:func:`_exact_flows`).
    Under :func:`_tested_once` the test is deferred and the linear-space flows returned. A vouched
    kernel's products need no test (:class:`_Kernel`)."""
    # Kᵀ is None (by parity, not made yet) only where _product reads it as ``rows``, which it checks
    products = [
        _product(*kernel.parities[r.parity], r.x.linear, r.into, r.tags_first)  # type: ignore[arg-type]
        for r in requests
    ]
    if not kernel.vouched and products and run_state.capturing(products[0]):
        return tuple(_selected_flows(kernel, p, r) for p, r in zip(products, requests, strict=True))
    minima = (
        []
        if kernel.vouched
        else [(p + r.read()).detach().amin() for p, r in zip(products, requests, strict=True) if p.numel()]
    )
    deferred = run_state.deferred_minima() if minima else None  # (no test, no context: compilable)
    if deferred is not None:
        deferred.extend(minima)
    elif minima:
        smallest, half = _smallest(minima)
        if bool((smallest <= half).any()):
            return tuple(_exact_flows(kernel, r.parity, r.x.log, r.into, r.tags_first) for r in requests)
    return tuple(r.x.shift + _safe_log(p) for p, r in zip(products, requests, strict=True))


def _selected_flows(kernel: _Kernel, product: Tensor, request: Request) -> Tensor:
    """The flows of one request with the test of :func:`_flows` made for every flow and no
    read-back: where the product is exact to rounding (above ``e^{F/2}``; or a flow nobody reads),
    its log; elsewhere (a NaN too) the log-space recomputation, which is made for every flow. The
    same flows as the tests in place wherever those vouch for every product (they then select the
    products' logs alike), else the same to rounding; a ``where`` of two finite-gradient branches."""
    exact = product + request.read() > math.exp(_floor(product) / 2)
    linear = request.x.shift + _safe_log(product)
    log_space = _exact_flows(kernel, request.parity, request.x.log, request.into, request.tags_first)
    return torch.where(exact, linear, log_space)


def _exact_flows(kernel: _Kernel, parity: int, log_x: Tensor, into: bool, tags_first: bool) -> Tensor:
    """The flows of :func:`_flows` as log-sum-exps over the T arcs of each group, in the layout
    of ``log_x`` (:class:`Request`)."""
    log = kernel.log(parity)
    if tags_first:  # arcs (T_from, T_to, P, B)
        log = log[..., None, None]
        return logsumexp(log + log_x.unsqueeze(1), dim=0) if into else logsumexp(log + log_x, dim=1)
    if into:
        return logsumexp(log + log_x.unsqueeze(-1), dim=-2)
    return logsumexp(log + log_x.unsqueeze(-2), dim=-1)


def _group_flows(kernel: _Kernel, x: _Vectors, into: bool, unused: Tensor) -> Tensor:
    """The flows of :func:`_flows` through every arc group (B, N-1, T), given the vectors ``x``
    (B, N-1, T) for each, in the iterate's layout ((T, N-1, B) where :func:`_tags_first`): both
    parities' products, interleaved."""
    if kernel.scaled.ndim == 2:
        return _flows(kernel, Request(0, x, into, unused, _tags_first(kernel)))[0]
    requests = [Request(p, x.rows(slice(p, None, 2)), into, unused[:, p::2]) for p in (0, 1)]
    return _interleaved(*_flows(kernel, *requests))
