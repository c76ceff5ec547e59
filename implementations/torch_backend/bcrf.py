"""Bregman CRF (Corro, Lacroix & Le Roux, 2025): entropy of the transition marginals, solved by
iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (docs/derivations.md §3.3). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``). A node with
no in- or out-mass is killed (``alive``) so -inf never becomes NaN, and clusters past a sequence's
length are skipped, so padding never changes a result.

Two forms compute the same iterates (docs/derivations.md §3.12). ``form="log"`` updates ``log q``
itself: every projection reads and writes every arc, with an ``exp`` per arc. ``form="scaling"``
(the default but for ``decode``) keeps ``log q = log K + log v ⊕ log u`` with a fixed kernel ``K``
and one log scaling vector per node side, as Sinkhorn keeps ``diag(u) K diag(v)``. The unaries
start in the scalings, so ``K = exp(transitions/τ)`` holds the transitions alone: one (T, T)
matrix where they are shared. A projection is then two matrix products (one GEMM over the whole
batch for a shared kernel) and an O(N T) update of the scalings; the loss's value and gradient are
read off the scalings and the flows, so with shared transitions no (B, N-1, T, T) array is ever
written. A flow the linear products cannot vouch for (a product under ``e^{F/2}``) is recomputed
in log space from its arcs, so every flow the projection sees is exact to rounding. On a GPU the
public functions read those tests back once, after the run, rather than once per projection (each
read-back drains the queue of launched kernels): if one failed, the function runs again with each
projection tested in place, so the result is the same either way. On the CPU each projection
tests in place. A large per-position kernel that needs no such test (``vouched``) iterates in
linear space where autograd does not record: each scaling held as ``e^{log s − shift}`` beside
its vector's shift, a projection takes a square root and a division per tag where the log
scalings cost three transcendentals; should a projection write a live scaling under ``e^{F/2}``
of its vector's largest, the call runs again in log space (:data:`LinearScalings`). On the CPU
that state iterates in a C sweep along each sequence, both projections of several iterations in
one pass that reads each arc block from memory once (:mod:`._sweep`).

Lengths 1 and 2 have no inner cluster: length 1 is a softmax over tags, length 2 a softmax over
tag pairs (every arc group is normalised before the first projection, which leaves the iterates
of longer sequences unchanged because they are invariant to per-group shifts).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from functools import cache, partial, wraps
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..solver import SolverOutput
from . import _sweep
from ._fixed_point import iterate, iterate_with_errors
from ._scores import ArcTerms, arc_terms, gold_score, mask_emissions, position_mask
from ._semiring import largest, logsumexp
from ._tokens import argmax_tags


def _first_clusters(order: str) -> tuple[int, int]:
    """0-indexed position of the first inner cluster of each half-iteration, in order.

    Paper cluster k (1-indexed) is position k - 1: C_odd = {3, 5, ...} starts at position 2,
    C_even = {2, 4, ...} at position 1.
    """
    return (2, 1) if order == "odd-even" else (1, 2)


def _cluster_shifts(flows: Tensor, inside: Tensor, dim: int = -1) -> Tensor:
    """The projection of §3.3 given each node's log in- and out-flow, stacked (B, 2, P, T) (in
    first), or (T, 2, P, B) with the tags first (``dim`` 0 of the flows of one side): the shifts
    of the log of its in-arcs and of its out-arcs, stacked alike; -inf for a dead tag, 0 outside
    the clusters (``inside``, broadcast: 1 for a cluster, 0 elsewhere).

    Each flow moves to the node's new throughput, the normalised geometric mean of its two flows,
    ``log sqrt(in · out) − log Σ_tags sqrt(in · out)``. A dead tag's (a -inf flow) is -inf, and so
    is its shift (its -inf flow taken as 0); a dead node's normaliser is taken as 0. Written
    without boolean masks (``where`` with a broadcast condition costs 46 µs at (64, 25, 17) on one
    thread, a multiply 5): the shifts outside the clusters are multiplied by 0
    (:func:`_inside_only`)."""
    log_node = (flows[:, 0] + flows[:, 1]).mul_(0.5)  # log sqrt(in · out), unnormalised
    throughput = log_node - _finite_or_zero(logsumexp(log_node, dim=dim)).unsqueeze(dim)
    return _inside_only(throughput.unsqueeze(1) - _finite_or_zero(flows), inside)


def _inside_only(shifts: Tensor, inside: Tensor) -> Tensor:
    """``shifts`` inside the clusters, 0 outside (a -inf there times 0 is NaN, set to 0)."""
    return torch.nan_to_num(shifts * inside, nan=0.0, posinf=math.inf, neginf=-math.inf)


def _project(log_q: Tensor, lengths: Tensor, first: int) -> Tensor:
    """KL projection onto the clusters at positions ``first, first + 2, ...`` (one parity).

    Cluster p reads arc group p - 1 (into it) and p (out of it); clusters of one parity touch
    disjoint groups, so they are projected all at once. The projection rescales the columns of
    group p - 1 and the rows of group p, so it is one broadcast add of a column shift and a row
    shift per group (-inf for a dead node). Clusters with ``p > len - 2`` are skipped.
    """
    batch, num_arcs, num_tags, _ = log_q.shape
    count = len(range(first, num_arcs, 2))
    if count == 0:
        return log_q
    positions = torch.arange(first, first + 2 * count, 2, device=log_q.device)
    into = slice(first - 1, first - 1 + 2 * count, 2)  # groups p - 1
    out_of = slice(first, first + 2 * count, 2)  # groups p
    log_in = logsumexp(log_q[:, into], dim=-2)  # (B, P, T) in-flow of each node
    log_out = logsumexp(log_q[:, out_of], dim=-1)  # (B, P, T) out-flow of each node
    active = (positions < (lengths - 1).unsqueeze(-1))[:, None, :, None]  # (B, 1, P, 1)
    flows = torch.stack([log_in, log_out], dim=1)
    column_shift, row_shift = _cluster_shifts(flows, active.to(log_q.dtype)).unbind(1)
    columns = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions - 1, column_shift)
    rows = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions, row_shift)
    return log_q + (rows.unsqueeze(-1) + columns.unsqueeze(-2))


def _scaled(weights: Tensor, temperature: float) -> Tensor:
    """``w/τ``: ``weights`` themselves at τ = 1 (no copy of the arcs)."""
    return weights if temperature == 1 else weights / temperature


def _initial(weights: Tensor, temperature: float) -> Tensor:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = _scaled(weights, temperature)
    return log_q - logsumexp(log_q.flatten(2), dim=-1)[:, :, None, None]


def _step(lengths: Tensor, order: str, num_arcs: int, kernel: _Kernel | None = None, linear: bool = False):
    """One iteration: a projection onto each parity of inner clusters, in ``order``, on ``log q``
    (the log form, no ``kernel``) or on the scalings of the scaling form with ``kernel``, held in
    linear space if ``linear`` (:data:`LinearScalings`)."""
    if kernel is None:
        projections = [partial(_project, lengths=lengths, first=first) for first in _first_clusters(order)]
    else:
        projection = _linear_projection if linear else _scaling_projection
        projections = [projection(kernel, lengths, num_arcs, first) for first in _first_clusters(order)]

    def step(state: Any) -> Any:
        for project in projections:
            state = project(state)
        return state

    return step


def _error(marginals: Callable[[Any], Tensor], lengths: Tensor):
    """The convergence error of an iterate whose arc marginals are ``marginals(state)``: their
    constraint violation (B,)."""
    return lambda state, _: _violation(marginals(state), lengths)


class _Kernel(NamedTuple):
    """``K = exp(transitions/τ − shift)``: the arcs' weights without their unaries, shared (T, T) or
    per arc group (B, N-1, T, T), with largest entry 1 (``shift``, the largest finite
    ``transitions/τ``, per group where they are per group). Entries under the dtype's smallest
    normal number are flushed to 0 (subnormals are slow). ``parities`` holds ``(K, Kᵀ)``, each
    contiguous, for the even and the odd groups, so that either product reads contiguous memory in
    the layout its fastest routine wants (:func:`_product`); shared, the same pair for both; laid
    out by parity, Kᵀ is made where a call first reads it (:func:`_with_transposes`).
    ``vouched``: every entry is at least ``e^{F/2}``, so that every product with a vector whose
    largest entry is 1 is too, and :func:`_flows` need not test them. ``by_parity``: ``linear``
    holds the groups parity by parity (0, 2, ..., then 1, 3, ...), and each parity's K is a block
    of it (contiguous within each sequence), not a copy: the layout of every per-position kernel
    whose even parity holds ``FUSED_FROM`` entries or more, whose blocks the compiled products read
    in place. One array as large as half the arcs is spared, and its fresh pages (at (8, 256,
    128), one thread, the marginals 0.42 s against 0.47, the loss 0.55–0.56 against 0.61).
    Smaller ones keep the groups in order: matmul wants one batch dim, and the gather and the
    read-off by parity cost more than they spare (+7% at (64, 50, 17))."""

    scaled: Tensor  # transitions/τ, (T, T) or (B, N-1, T, T)
    shift: Tensor  # () or (B, N-1)
    linear: Tensor  # exp(log), flushed
    #: (K, Kᵀ) of groups 0, 2, ... and 1, 3, ...; Kᵀ None by parity until needed (_with_transposes)
    parities: tuple[tuple[Tensor, Tensor | None], tuple[Tensor, Tensor | None]]
    vouched: bool
    by_parity: bool = False

    def log(self, parity: int | None = None) -> Tensor:
        """``log K = transitions/τ − shift`` (of the groups of one ``parity`` if given and the
        kernel is per group), made where it is read: only the log-space recomputations read it,
        and per arc group it is as large as the arcs."""
        if self.scaled.ndim == 2:
            return self.scaled - self.shift
        groups = slice(None) if parity is None else slice(parity, None, 2)
        return self.scaled[:, groups] - self.shift[:, groups, None, None]


def _floor(dtype: torch.dtype) -> float:
    """``F``: the log of the dtype's smallest normal number; kernel entries under ``e^F`` are flushed."""
    return math.log(torch.finfo(dtype).tiny)


def _finite_or_zero(x: Tensor) -> Tensor:
    """``x`` with -inf replaced by 0 (and a zero gradient there); NaN and +inf are kept."""
    return torch.nan_to_num(x, nan=math.nan, posinf=math.inf, neginf=0.0)


def _recorded(*tensors: Tensor) -> bool:
    """Autograd records the operations on ``tensors``: an in-place update must then spare what
    a backward reads, and a -inf must not meet a derivative."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _safe_log(x: Tensor) -> Tensor:
    """``log x`` with ``log 0 = -inf`` and a finite gradient everywhere (0 where ``x = 0``)."""
    if not _recorded(x):
        return torch.log(x)
    positive = x > 0
    return torch.where(positive, torch.log(torch.where(positive, x, 1.0)), -torch.inf)


def _kernel(transitions: Tensor, temperature: float) -> _Kernel:
    """The kernel of ``transitions`` (T, T) or (B, N-1, T, T) at ``temperature``. Its shift is
    detached: the iterates do not depend on it."""
    scaled = _scaled(transitions, temperature)
    shared = scaled.ndim == 2
    shift = _finite_or_zero(scaled.detach().amax() if shared else scaled.detach().amax((-2, -1)))
    even = len(range(0, scaled.shape[1], 2)) if not shared else 0  # groups of the even parity
    by_parity = not shared and len(scaled) * even * scaled.shape[-1] ** 2 >= FUSED_FROM
    if by_parity:  # gathered into one fresh array, shifted in place
        order = torch.tensor(
            [*range(0, scaled.shape[1], 2), *range(1, scaled.shape[1], 2)], device=scaled.device
        )
        log, shifts = scaled.index_select(1, order), shift[:, order, None, None]
        log = log - shifts if _recorded(log) else log.sub_(shifts)
    else:
        log = scaled - (shift if shared else shift[..., None, None])
    tiny = torch.finfo(log.dtype).tiny
    if _recorded(log):
        linear = torch.threshold(torch.exp(log), tiny, 0.0)
    else:  # in place on one fresh array: a per-arc kernel is as large as the arcs
        linear = torch.nn.functional.threshold_(log.exp_(), tiny, 0.0)
    # one read-back a call (where a GPU defers the tests, a failed one would run the call again)
    vouched = bool(linear.numel()) and bool(linear.detach().amin() > math.exp(_floor(linear.dtype) / 2))
    if shared:
        pair = (linear, linear.T.contiguous())
        return _Kernel(scaled, shift, linear, (pair, pair), vouched)
    halves = (
        (linear[:, :even], linear[:, even:])
        if by_parity
        else (linear[:, 0::2].contiguous(), linear[:, 1::2].contiguous())
    )
    # by parity, Kᵀ waits for a call that reads it (_with_transposes)
    parities = tuple((part, None if by_parity else part.transpose(-1, -2).contiguous()) for part in halves)
    return _Kernel(scaled, shift, linear, parities, vouched, by_parity)


def _with_transposes(kernel: _Kernel) -> _Kernel:
    """``kernel`` with each parity's Kᵀ (contiguous), which the products into the tags read, made
    where a call first needs them: :func:`_kernel` leaves them out of a kernel laid out by parity,
    as the sweep and the marginals' read-off never read them and each is as large as its parity's
    arcs (at (8, 256, 128) the marginals then write one 134 MB array less). ``kernel`` itself
    where they are there."""
    if all(transposed is not None for _, transposed in kernel.parities):
        return kernel
    return kernel._replace(parities=tuple((k, k.transpose(-1, -2).contiguous()) for k, _ in kernel.parities))


#: From this many tags on, a batch of matrix–vector products ``M x`` is faster as row vector
#: times ``Mᵀ`` (one thread, MKL: 23–57 GB/s against 7–8 for ``bmm`` at T = 32–128; ``bmm`` wins
#: below, 11–16 GB/s against 6 at T = 8–17).
ROW_VECTOR_FROM = 32


#: Products over a parity's per-position kernel of at least this many entries run compiled
#: (:func:`_fused_row_products`): 40 GB/s against 22 for the best batched matmul at (8, 128, 128,
#: 128) on one CPU thread (on CUDA inductor emits a Triton kernel instead: not yet measured, no
#: GPU having been lent). Where such a kernel is vouched for, each projection runs compiled whole
#: (:func:`_scaling_projection`). Smaller ones, and every shared kernel, stay eager, sparing the
#: compilation (about a second per dtype).
FUSED_FROM = 2**20


def _row_products(matrices: Tensor, vectors: Tensor) -> Tensor:
    """(…, T): ``M x`` for every matrix ``M`` (…, T, T) and vector ``x`` (…, T), as the sums of
    the rows of ``M`` times ``x``."""
    return (matrices * vectors.unsqueeze(-2)).sum(-1)


@cache
def _compiled(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` compiled, made on first use (``torch._dynamo`` takes a second to import); its
    shapes static until they change, dynamic from then on (torch's default)."""
    return torch.compile(function)


_compiler_failed = False


def _run_compiled(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` compiled (:func:`_compiled`): its operators fused into few passes over
    memory. Eager inside a region being compiled (the enclosing compilation fuses it), and, with a
    warning, from the first failed compilation on (no C++ compiler, say)."""
    global _compiler_failed
    if not _compiler_failed and not torch.compiler.is_compiling():
        try:
            return _compiled(function)(*args)
        except torch._dynamo.exc.BackendCompilerFailed as error:
            _compiler_failed = True
            warnings.warn(
                f"bcrf: torch.compile failed, IBP runs eager ({error})", RuntimeWarning, stacklevel=2
            )
    return function(*args)


def _fused_row_products(matrices: Tensor, vectors: Tensor) -> Tensor:
    """:func:`_row_products` compiled, the multiply and the sum fused into one pass over ``M``
    (the vectors made contiguous, so that views do not recompile it)."""
    return _run_compiled(_row_products, matrices, vectors.contiguous())


def _product(
    kernel: Tensor, transposed: Tensor, vectors: Tensor, into: bool, tags_first: bool = False
) -> Tensor:
    """(B, P, T): ``K_gᵀ x_g`` (``into``: what flows into each tag) or ``K_g x_g`` (out of it) for
    every group g, given ``transposed``, the same matrices transposed and contiguous;
    ``vectors`` (B, P, T), or (T, P, B) if ``tags_first`` (a shared kernel only: the result is then
    (T, P, B) too). A shared (T, T) kernel is one matrix product for all groups; a large
    per-position one (``FUSED_FROM``) a compiled multiply–sum over the rows of ``M``; a smaller one
    a batched matmul in the layout that is faster at its size (``ROW_VECTOR_FROM``)."""
    if tags_first:  # one (T, T) × (T, P·B) product
        return ((transposed if into else kernel) @ vectors.flatten(1)).view(vectors.shape)
    if kernel.ndim == 2:
        return vectors @ (kernel if into else transposed)
    matrices, rows = (transposed, kernel) if into else (kernel, transposed)  # M and Mᵀ
    if matrices.numel() >= FUSED_FROM:
        return _fused_row_products(matrices, vectors)
    # (Mᵀ not made yet: the odd groups of a kernel laid out by parity at FUSED_FROM, one group fewer)
    if kernel.shape[-1] >= ROW_VECTOR_FROM and rows is not None:
        return torch.matmul(vectors.unsqueeze(-2), rows).squeeze(-2)
    return torch.matmul(matrices, vectors.unsqueeze(-1)).squeeze(-1)


def _shift(log_x: Tensor, dim: int = -1) -> Tensor:
    """``max log x`` over the tags (``dim``), kept (0 for an all -inf vector: a dead position)."""
    return _finite_or_zero(largest(log_x, dim, keepdim=True))


class _Vectors(NamedTuple):
    """Vectors ``x`` (…, T) that a product will multiply: ``log x``, its largest entry per vector
    (kept dim, 0 for an all -inf one) and ``e^{log x − shift}``, each entry at most 1."""

    log: Tensor
    shift: Tensor
    linear: Tensor

    def rows(self, rows: slice, side: int | None = None) -> _Vectors:
        """The vectors of ``rows`` (dim 1), or of one ``side`` (dim 1) and ``rows`` (dim 2) if
        stacked."""
        pick = (slice(None), rows) if side is None else (slice(None), side, rows)
        return _Vectors(self.log[pick], self.shift[pick], self.linear[pick])


def _vectors(log_x: Tensor, dim: int = -1) -> _Vectors:
    """The :class:`_Vectors` of ``log_x``, vectors along ``dim`` ((…, T) by default)."""
    shift = _shift(log_x, dim)
    return _Vectors(log_x, shift, torch.exp(log_x - shift))


def _unused(log_x: Tensor) -> Tensor:
    """0 where ``log_x`` is finite, +inf where it is -inf: added to a product, it sets aside the
    flows of dead tags (:func:`_flows`)."""
    return _finite_or_zero(log_x) - log_x


class _Request(NamedTuple):
    """Flows through every arc group of one ``parity``: into each tag (``into``, ``K_gᵀ x_g``) or
    out of it (``K_g x_g``), given the vectors ``x`` (B, P, T) for each group, or (T, P, B) if
    ``tags_first`` (a shared kernel's only: :func:`_tags_first`), and ``unused`` (broadcast to
    their shape): 0 for a flow that is read, +inf for one nobody reads (a dead tag's, or a node's
    outside the clusters); ``None`` where the kernel is vouched for (no test reads it)."""

    parity: int
    x: _Vectors
    into: bool
    unused: Tensor | None
    tags_first: bool = False


#: While a list, :func:`_flows` defers its exactness test: it appends the smallest product each
#: request reads instead of reading it back (a host synchronisation, which on a GPU drains the
#: queue of launched kernels), and :func:`_tested_once` reads them all back at once.
_deferred_minima: ContextVar[list[Tensor] | None] = ContextVar("bcrf_deferred_minima", default=None)


def _smallest(minima: list[Tensor]) -> tuple[Tensor, float]:
    """The smallest read products (0-d each), stacked, and ``e^{F/2}``: a product above it is
    exact to rounding in linear space."""
    return torch.stack(minima), math.exp(_floor(minima[0].dtype) / 2)


def _defers(tensor: Tensor) -> bool:
    """Whether calls on ``tensor``'s device defer their exactness tests: on a GPU, where a read-back
    drains the queue of launched kernels; not on the CPU, where it costs nothing while a failed
    deferred test runs the whole call again (a partial-label training step on CoNLL-2003 failed one
    every time: 0.27–0.29 s deferred against 0.205 in place, one thread)."""
    return tensor.is_cuda


def _tested_once(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with the exactness tests of :func:`_flows` deferred and read back together
    where the device calls for it (:func:`_defers`), one host synchronisation instead of one or
    two per projection. Where one fails, ``function`` runs again with every test in place, which
    recomputes just the flows that need it: the result is the one without deferral either way.
    Where the linear state's test fails (:func:`_log_scalings`), ``function`` runs again with every
    iterate in log space."""

    @wraps(function)
    def tested(*args: Any, **kwargs: Any) -> Any:
        try:
            return deferring(*args, **kwargs)
        except _Underflow:  # the linear state lost a scaling: every iterate in log space
            token = _linear_allowed.set(False)
            try:
                return deferring(*args, **kwargs)
            finally:
                _linear_allowed.reset(token)

    def deferring(*args: Any, **kwargs: Any) -> Any:
        if not _defers(args[0]):  # the emissions
            return function(*args, **kwargs)
        minima: list[Tensor] = []
        token = _deferred_minima.set(minima)
        try:
            result = function(*args, **kwargs)
        finally:
            _deferred_minima.reset(token)
        if not minima:
            return result
        smallest, half = _smallest(minima)
        # a NaN (flows gone wrong after an unvouched product) also runs the tests in place
        return result if bool((smallest > half).all()) else function(*args, **kwargs)

    return tested


def _flows(kernel: _Kernel, *requests: _Request) -> tuple[Tensor, ...]:
    """The log flows (B, P, T) of each request.

    One product in linear space per request, stabilised by each vector's largest entry. Every
    kernel entry and every ``e^{x − max}`` is at most 1 and a term lost to underflow is under
    ``e^F``, so a product above ``e^{F/2}`` is exact to rounding; if some product that is read is
    not, every request's flows are recomputed in log space from the arcs (:func:`_exact_flows`).
    Under :func:`_tested_once` the test is deferred and the linear-space flows returned. A vouched
    kernel's products need no test (:class:`_Kernel`)."""
    products = [_product(*kernel.parities[r.parity], r.x.linear, r.into, r.tags_first) for r in requests]
    minima = (
        []
        if kernel.vouched
        else [(p + r.unused).detach().amin() for p, r in zip(products, requests, strict=True) if p.numel()]
    )
    deferred = _deferred_minima.get() if minima else None  # (no test, no context: compilable)
    if deferred is not None:
        deferred.extend(minima)
    elif minima:
        smallest, half = _smallest(minima)
        if bool((smallest <= half).any()):
            return tuple(_exact_flows(kernel, r.parity, r.x.log, r.into, r.tags_first) for r in requests)
    return tuple(r.x.shift + _safe_log(p) for p, r in zip(products, requests, strict=True))


def _exact_flows(kernel: _Kernel, parity: int, log_x: Tensor, into: bool, tags_first: bool) -> Tensor:
    """The flows of :func:`_flows` as log-sum-exps over the T arcs of each group, in the layout
    of ``log_x`` (:class:`_Request`)."""
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
        return _flows(kernel, _Request(0, x, into, unused, _tags_first(kernel)))[0]
    requests = [_Request(p, x.rows(slice(p, None, 2)), into, unused[:, p::2]) for p in (0, 1)]
    return _interleaved(*_flows(kernel, *requests))


def _interleaved(even: Tensor, odd: Tensor) -> Tensor:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = even.new_empty(even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:])
    whole[:, 0::2], whole[:, 1::2] = even, odd
    return whole


#: A scaling-form iterate, ``log q[i, a, b] = log K[i, a, b] + log_v[i, a] + log_u[i+1, b]``: the log
#: in-scalings ``log_u`` and out-scalings ``log_v`` of every node, stacked (``[:, 0, k] = log_u``,
#: ``[:, 1, k] = log_v`` of node ``2k + parity``) as the even nodes' (B, 2, ⌈N/2⌉, T) and the odd
#: nodes' (B, 2, ⌊N/2⌋, T), so that a projection reads and writes whole contiguous arrays; -inf
#: marks a dead node or tag. With a shared kernel the batch and the tags swap places, (T, 2,
#: ⌈N/2⌉, B) and (T, 2, ⌊N/2⌋, B) (:func:`_tags_first`): the kernel's products are then one
#: (T, T) × (T, P·B) matrix product of a view, and the reductions over the tags run along
#: contiguous rows of sequences, where over a last dim of 16–31 tags torch reduces float32 slowly
#: (``largest``: 2.5 µs at (17, 25, 64) over dim 0 against 9.5 at (64, 25, 17) over the last
#: through float64, one thread; derivations §3.12). The kernel is fixed, so the iterations carry
#: the scalings alone.
Scalings = tuple[Tensor, Tensor]


def _tags_first(kernel: _Kernel) -> bool:
    """Whether a scaling-form iterate on ``kernel`` holds its tags first (:data:`Scalings`): a
    shared kernel's does."""
    return kernel.scaled.ndim == 2


def _tag_dim(kernel: _Kernel) -> int:
    """The dim of the tags in an iterate's (…, P, …) arrays on ``kernel``."""
    return 0 if _tags_first(kernel) else -1


def _in_layout(kernel: _Kernel, x: Tensor, contiguous: bool = True) -> Tensor:
    """``x`` (B, …, T) in the layout of an iterate on ``kernel``: itself, or (T, …, B) where
    :func:`_tags_first`, contiguous (a transposing copy) unless told not to be (a view); applied
    to such an array, the way back."""
    if not _tags_first(kernel):
        return x
    swapped = x.transpose(0, -1)
    return swapped.contiguous() if contiguous else swapped


def _scaled_initial(terms: ArcTerms, lengths: Tensor, temperature: float) -> tuple[_Kernel, Scalings]:
    """``log q = w/τ`` with every arc group normalised, in scaling form: the unaries in the
    scalings (the rows' less the group's log-sum-exp, ``log_v[i] = rows[i]/τ − log Z_i`` and
    ``log_u[i+1] = columns[i]/τ``), the transitions alone in the kernel; in the iterate's layout
    from the start (:data:`Scalings`)."""
    kernel = _kernel(terms.transitions, temperature)
    dim = _tag_dim(kernel)
    rows, columns = (_in_layout(kernel, _scaled(x, temperature)) for x in (terms.rows, terms.columns))
    edge = rows.new_zeros(rows.shape[0], 1, rows.shape[-1])
    unused = _unused(rows) + _in_layout(kernel, _padding(lengths, rows.shape[1], rows.dtype))
    log_norm = logsumexp(rows + _group_flows(kernel, _vectors(columns, dim), False, unused), dim=dim)
    log_u = torch.cat([edge, columns], dim=1)
    log_v = torch.cat([rows - log_norm.unsqueeze(dim), edge], dim=1)
    scalings = torch.stack([log_u, log_v], dim=1)  # (B, 2, N, T) or (T, 2, N, B)
    return kernel, (scalings[:, :, 0::2].contiguous(), scalings[:, :, 1::2].contiguous())


def _padding(lengths: Tensor, num_arcs: int, dtype: torch.dtype) -> Tensor:
    """(B, N-1, 1): 0 for the arc groups inside each sequence, +inf past its length."""
    return torch.where(_group_mask(lengths, num_arcs), 0.0, math.inf).to(dtype)


def _group_mask(lengths: Tensor, num_arcs: int) -> Tensor:
    """(B, N-1, 1): the arc groups inside each sequence."""
    return position_mask(lengths - 1, num_arcs).unsqueeze(-1)


def _scaled_rows_and_columns(
    kernel: _Kernel, scalings: Scalings, lengths: Tensor
) -> tuple[_Vectors, _Vectors]:
    """The :class:`_Vectors` of the rows ``log v`` and columns ``log u`` of every arc group
    (B, N-1, T) of a scaling-form iterate on ``kernel``, in its layout ((T, N-1, B) where
    :func:`_tags_first`), -inf past each sequence's length."""
    log_u, log_v = _interleaved(*(x.transpose(1, 2) for x in scalings)).unbind(2)  # (B, N, T) or (T, N, B)
    padding = _in_layout(kernel, _padding(lengths, log_u.shape[1] - 1, log_u.dtype))
    dim = _tag_dim(kernel)
    return _vectors(log_v[:, :-1] - padding, dim), _vectors(log_u[:, 1:] - padding, dim)


def _scaled_marginals(kernel: _Kernel, lengths: Tensor, scalings: Scalings) -> Tensor:
    """q (B, N-1, T, T), zero on padding, of a scaling-form iterate: ``K ⊙ e^{s} ṽ ũᵀ``
    (:func:`_arc_gradient` with unit weights), two multiplications per arc in linear space where
    ``log q`` cost two additions, an ``exp`` and a mask, each writing a new (B, N-1, T, T) array."""
    rows, columns = _scaled_rows_and_columns(kernel, scalings, lengths)
    return _arc_gradient((kernel, rows, columns), rows.log.new_ones(len(lengths)), shared=False)


def _groups(scalings: Scalings, parity: int) -> int:
    """The number of arc groups of ``parity`` in a chain whose scalings are ``scalings``: one per
    odd node for the even groups, one less than the even nodes for the odd ones."""
    return scalings[1].shape[2] if parity == 0 else scalings[0].shape[2] - 1


def _in_clusters(lengths: Tensor, num_arcs: int, parity: int) -> Tensor:
    """(B, P): which nodes of ``parity`` (node ``2k + parity`` in column k) a cluster holds in each
    sequence: the inner nodes, ``1 ≤ p < len − 1``."""
    nodes = torch.arange(parity, num_arcs + 1, 2, device=lengths.device)
    return (nodes >= 1) & (nodes < (lengths - 1).unsqueeze(-1))


def _scaling_projection(kernel: _Kernel, lengths: Tensor, num_arcs: int, first: int):
    """The projection of :func:`_project` on a scaling-form iterate (a function of its log
    scalings): :func:`_projected` on the parity's nodes, compiled whole (:func:`_run_compiled`)
    where the kernel is per position with at least ``FUSED_FROM`` entries a parity (laid out
    ``by_parity``) and vouched for, and autograd does not record (the Danskin loss,
    ``marginals``), but the linear state does not apply (:func:`_linear_start`) or its call runs
    again: the products and the ~25 operators over the (B, 2, P, T) scalings then take one kernel
    of a few loops. One thread, alternated with the
    eager projection in one process: 8.4–8.9 against 9.1–10.2 ms an iteration at (8, 256, 128)
    (a projection 3.9 ms, its two products alone 3.2), 3.7 against 4.5 at (8, 1024, 32)."""
    parity, kernel = first % 2, _with_transposes(kernel)
    tags_first = _tags_first(kernel)
    active = _in_clusters(lengths, num_arcs, parity)  # (B, P)
    count, clusters = active.shape[1], len(range(first, num_arcs, 2))
    active = active.T.unsqueeze(0) if tags_first else active.unsqueeze(-1)  # (1, P, B) or (B, P, 1)
    active = active.unsqueeze(1)  # the side: (1, 1, P, B) or (B, 1, P, 1)
    dtype, num_tags = kernel.linear.dtype, kernel.linear.shape[-1]
    # 1 inside the clusters, in the shape of the scalings (a broadcast multiply is 3× slower)
    shape = (num_tags, 2, count, len(lengths)) if tags_first else (len(lengths), 2, count, num_tags)
    inside = active.to(dtype).expand(shape).contiguous()
    # +inf outside them (read by the exactness tests alone)
    outside = None if kernel.vouched else torch.where(active[:, 0], 0.0, math.inf).to(dtype)
    fused = kernel.vouched and kernel.by_parity  # a large per-position kernel, vouched for

    def project(scalings: Scalings) -> Scalings:
        if clusters == 0:
            return scalings
        if fused and not _recorded(kernel.linear, *scalings):
            new = _run_compiled(_projected, scalings, kernel, inside, outside, parity)
        else:
            new = _projected(scalings, kernel, inside, outside, parity)
        return (new, scalings[1]) if parity == 0 else (scalings[0], new)

    return project


def _projected(
    scalings: Scalings, kernel: _Kernel, inside: Tensor, outside: Tensor | None, parity: int
) -> Tensor:
    """The scalings of the nodes of ``parity`` (:data:`Scalings`) after their projection, given
    ``inside`` (1 for a node of a cluster, 0 elsewhere, in their shape) and ``outside`` (+inf for a
    node outside the clusters, 0 inside; ``None`` where the kernel is vouched for). Every size is
    read off the arrays, not a closure, so that once shapes vary a compilation serves them all.

    Node p's in-flow is ``u_p ⊙ (K_{p-1}ᵀ v_{p-1})`` and its out-flow ``v_p ⊙ (K_p u_{p+1})``: two
    batched matrix–vector products (:func:`_flows`, exact to rounding) over every group of a
    parity, then the shifts of §3.3 (:func:`_cluster_shifts`) move the log scalings of every node
    of the parity (0 outside the clusters), not the arcs: a node's log in-flow is its log
    in-scaling plus its product's, added in place into the node's rows (a node with no such arc
    group is outside the clusters). Node ``2k + parity`` is row k of its parity's scalings; its
    in-group ``p − 1`` is row ``k − 1 + parity`` of the other parity's groups and its out-group p
    row k of its own; its neighbours are rows ``k − 1 + parity`` and ``k + parity`` of the other
    parity's nodes."""
    other = 1 - parity
    tags_first, dim = _tags_first(kernel), _tag_dim(kernel)
    in_groups, out_groups = _groups(scalings, other), _groups(scalings, parity)
    first_in = 1 - parity  # the row of the node the other parity's first group flows into
    mine, theirs = scalings[parity], _vectors(scalings[other], dim)
    # +inf for the flows of dead tags and of nodes outside the clusters: nobody reads them
    unused = None if outside is None else _unused(mine[:, 0] + mine[:, 1]) + outside
    products = _flows(
        kernel,
        _Request(
            other,
            theirs.rows(slice(0, in_groups), 1),
            True,
            None if unused is None else unused[:, first_in : first_in + in_groups],
            tags_first,
        ),
        _Request(
            parity,
            theirs.rows(slice(parity, parity + out_groups), 0),
            False,
            None if unused is None else unused[:, :out_groups],
            tags_first,
        ),
    )
    flows = mine.clone()  # the nodes' log flows: their log scalings plus the products'
    flows[:, 0, first_in : first_in + in_groups].add_(products[0])
    flows[:, 1, :out_groups].add_(products[1])
    return mine + _cluster_shifts(flows, inside, dim)


def _linear_floor(dtype: torch.dtype) -> float:
    """``e^{F/2}``: the least a live scaling of the linear state may be over its vector's largest
    (:data:`LinearScalings`). While every one is at least that, no intermediate of
    :func:`_linear_projected` leaves the dtype's normal range, so every value is exact to rounding."""
    return math.exp(_floor(dtype) / 2)


#: Whether large vouched kernels may iterate in linear space (:func:`_linear_start`); set off for
#: the run again of a call whose linear state lost a scaling to underflow (:func:`_tested_once`).
_linear_allowed: ContextVar[bool] = ContextVar("bcrf_linear_allowed", default=True)


class _Underflow(ArithmeticError):
    """A scaling of the linear state fell under its floor: the call runs again in log space."""


#: A scaling-form iterate in linear space, for the large vouched kernels whose projections run
#: compiled: ``((even, odd), (even_shift, odd_shift), smallest)``. Each parity's scalings (B, 2, P, T)
#: are held as ``e^{log s − shift}`` (largest entry 1 a vector, 0 for a dead tag) beside their log
#: shifts (B, 2, P, 1); ``smallest`` (B,) is the smallest live scaling any projection wrote, over
#: its vector's largest. A projection then takes a square root and a division per tag where the
#: log scalings cost a ``log``, an ``exp`` and the vectors' ``exp``: 0.65 M transcendentals a
#: projection at (8, 256, 128), a fifth of its time (one thread: 5.6 against 6.2 ms a projection,
#: docs/derivations.md §3.12).
LinearScalings = tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor], Tensor]


def _node_rows(scalings: Tensor, parity: int, lengths: Tensor) -> Tensor:
    """(B, 1, P, 1): the rows of one parity's ``scalings`` whose node lies inside its sequence."""
    nodes = torch.arange(parity, parity + 2 * scalings.shape[2], 2, device=lengths.device)
    return (nodes < lengths.unsqueeze(-1))[:, None, :, None]


def _linear_start(kernel: _Kernel, scalings: Scalings, lengths: Tensor) -> LinearScalings | None:
    """The linear state of the log ``scalings``, or ``None`` where it does not apply: a kernel
    that is not large, per position and vouched for (``fused`` in :func:`_scaling_projection`),
    autograd recording, a sequence with a node without a live tag (a live tag has both scalings
    finite), or a live scaling under the floor (:func:`_linear_floor`). One read-back."""
    applies = kernel.vouched and kernel.by_parity and _linear_allowed.get()
    if not applies or _recorded(kernel.linear, *scalings):
        return None
    linear, shifts, failed = [], [], []
    for parity, log_s in enumerate(scalings):
        shift = _shift(log_s)
        x = torch.exp(log_s - shift)
        real = _node_rows(log_s, parity, lengths)
        live = ((x[:, 0] > 0) & (x[:, 1] > 0)).any(-1, keepdim=True).unsqueeze(1)  # (B, 1, P, 1)
        below = (x > 0) & (x < _linear_floor(x.dtype))
        failed += [(real & ~live).any(), (real & below).any()]
        linear.append(x)
        shifts.append(shift)
    if bool(torch.stack(failed).any()):
        return None
    smallest = scalings[0].new_ones(len(lengths))
    return (linear[0], linear[1]), (shifts[0], shifts[1]), smallest


def _log_scalings(state: LinearScalings) -> Scalings:
    """The log scalings of a linear state (:data:`Scalings`); :class:`_Underflow` if a projection
    wrote a live scaling under the floor (one read-back, where the state is read off)."""
    linear, shifts, smallest = state
    if not bool((smallest >= _linear_floor(smallest.dtype)).all()):
        raise _Underflow
    return tuple(torch.log(x) + shift for x, shift in zip(linear, shifts, strict=True))


def _linear_projection(kernel: _Kernel, lengths: Tensor, num_arcs: int, first: int):
    """The projection of :func:`_scaling_projection` on a linear state (:data:`LinearScalings`),
    compiled whole (:func:`_linear_projected`)."""
    parity, kernel = first % 2, _with_transposes(kernel)
    active = _in_clusters(lengths, num_arcs, parity)[:, None, :, None]  # (B, 1, P, 1)
    clusters = len(range(first, num_arcs, 2))
    into, out_of = kernel.parities[1 - parity][1], kernel.parities[parity][0]  # Kᵀ and K

    def project(state: LinearScalings) -> LinearScalings:
        if clusters == 0:
            return state
        linear, shifts, smallest = state
        new, shift, least = _run_compiled(_linear_projected, linear, shifts, into, out_of, active, parity)
        if parity == 0:
            return (new, linear[1]), (shift, shifts[1]), torch.minimum(smallest, least)
        return (linear[0], new), (shifts[0], shift), torch.minimum(smallest, least)

    return project


def _sweep_steps(
    kernel: _Kernel, lengths: Tensor, order: str
) -> Callable[[LinearScalings, int], LinearScalings] | None:
    """Where the C sweep runs the linear state of ``kernel`` (:func:`_sweep.available`: the CPU),
    a function of a state and a number of iterations that runs them in sweeps along each
    sequence: the arithmetic of :func:`_linear_projected`, each arc block read from memory once
    for several iterations (docs/derivations.md §3.12, *The sweep*)."""
    if not _sweep.available(kernel.linear.device, kernel.linear.dtype, kernel.linear.shape[-1]):
        return None
    blocks = (kernel.parities[0][0], kernel.parities[1][0])
    first = _first_clusters(order)[0] % 2

    def steps(state: LinearScalings, count: int) -> LinearScalings:
        linear, shifts, smallest = state
        return _sweep.iterations(blocks, lengths, linear, shifts, smallest, first, count)

    return steps


def _linear_projected(
    linear: tuple[Tensor, Tensor],
    shifts: tuple[Tensor, Tensor],
    into: Tensor,
    out_of: Tensor,
    active: Tensor,
    parity: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """The linear scalings (B, 2, P, T) and shifts (B, 2, P, 1) of the nodes of ``parity`` after
    their projection (those outside the clusters, ``active`` false, unchanged), and the smallest
    live scaling written (B,), over its vector's largest (+inf where none is).

    With ``ũ, ṽ`` a node's scalings and ``a = K_{p-1}ᵀ ṽ_{p-1}``, ``b = K_p ũ_{p+1}`` its products
    (rows as in :func:`_projected`, each at least ``e^{F/2}``: the kernel is vouched for and every
    vector's largest entry is 1), the node's throughput is ``ν √(a b) / Σ ν √(a b)`` with
    ``ν = √ũ √ṽ`` over its largest (every shift cancels), and its new scalings are the throughput
    over each product: ``ũ ∝ ν √b / √a``, ``ṽ ∝ ν √a / √b``, normalised to a largest entry of 1,
    with log shifts ``log max − log Σ ν √(a b) −`` the shift of the vector the product read. With
    every live scaling at least ``e^{F/2}`` no intermediate leaves the normal range, and a term
    of the sum that does is under ``e^{F/2}`` of its largest (ν = 1 there)."""
    mine, theirs = linear[parity], linear[1 - parity]
    mine_shift, their_shift = shifts[parity], shifts[1 - parity]
    # the rows [lo, hi) of the nodes with both an in- and an out-group, those a cluster may hold
    first_in = 1 - parity  # the row of the node the other parity's first group flows into
    lo, hi = first_in, min(mine.shape[2], first_in + into.shape[1], out_of.shape[1])
    rows = slice(lo, hi)
    ins, outs = slice(0, hi - lo), slice(parity + lo, parity + hi)  # their rows the products read
    a = _row_products(into[:, ins], theirs[:, 1, ins])
    b = _row_products(out_of[:, rows], theirs[:, 0, outs])
    node = mine[:, 0, rows].sqrt() * mine[:, 1, rows].sqrt()
    node = node / node.amax(-1, keepdim=True)
    ratio = torch.sqrt(b / a)
    u, v = node * ratio, node / ratio
    log_norm = torch.log((u * a).sum(-1, keepdim=True))
    largest_u, largest_v = u.amax(-1, keepdim=True), v.amax(-1, keepdim=True)
    new = torch.stack([u / largest_u, v / largest_v], dim=1)
    shift = torch.stack(
        [
            largest_u.log() - log_norm - their_shift[:, 1, ins],
            largest_v.log() - log_norm - their_shift[:, 0, outs],
        ],
        dim=1,
    )
    active = active[:, :, rows]
    live = (node > 0).unsqueeze(1)
    least = torch.where(active & live, new, math.inf).amin((1, 2, 3))
    new = torch.where(active, new, mine[:, :, rows])
    shift = torch.where(active, shift, mine_shift[:, :, rows])
    return (
        torch.cat([mine[:, :, :lo], new, mine[:, :, hi:]], dim=2),
        torch.cat([mine_shift[:, :, :lo], shift, mine_shift[:, :, hi:]], dim=2),
        least,
    )


class _Solution(NamedTuple):
    """What the losses read off an iterate: ``B_Y(w/τ)`` (B,), the flows out of each tag's rows and
    into each tag's columns of every arc group (B, N-1, T), zero past a sequence's length, and the
    arcs, for :func:`_arc_gradient`: the arc marginals q (B, N-1, T, T) or, in scaling form, the
    kernel with the :class:`_Vectors` of the rows' and columns' log scalings (B, N-1, T) (-inf past
    the length; in the iterate's layout, (T, N-1, B) where :func:`_tags_first`), which the flows
    have already read."""

    value: Tensor
    out_flows: Tensor
    in_flows: Tensor
    arcs: Tensor | tuple[_Kernel, _Vectors, _Vectors]


def _scaled_solution(
    scalings: Scalings, kernel: _Kernel, terms: ArcTerms, lengths: Tensor, temperature: float
) -> _Solution:
    """The :class:`_Solution` of a scaling-form iterate, with no (B, N-1, T, T) array: with
    ``log q = log K + log v ⊕ log u`` and ``w/τ = transitions/τ + rows/τ ⊕ columns/τ``,
    ``Σ q (w/τ − log q) = Σ_g shift_g Σ q_g + <out flows, rows/τ − log v>``
    ``+ <in flows, columns/τ − log u>``."""
    rows, columns = _scaled_rows_and_columns(kernel, scalings, lengths)
    log_rows, log_columns = rows.log, columns.log
    out_flows = torch.exp(log_rows + _group_flows(kernel, columns, False, _unused(log_rows)))
    in_flows = torch.exp(log_columns + _group_flows(kernel, rows, True, _unused(log_columns)))
    row_gaps = _gaps(_in_layout(kernel, _scaled(terms.rows, temperature), contiguous=False), log_rows)
    column_gaps = _gaps(
        _in_layout(kernel, _scaled(terms.columns, temperature), contiguous=False), log_columns
    )
    tags, positions = _tag_dim(kernel), 0 if _tags_first(kernel) else -1
    value = (
        (kernel.shift * out_flows.sum(tags)).sum(positions)
        + _inner(out_flows, row_gaps, _tags_first(kernel))
        + _inner(in_flows, column_gaps, _tags_first(kernel))
    )
    value = torch.where(lengths == 1, logsumexp(terms.singles / temperature, dim=-1), value)
    out_flows, in_flows = (_in_layout(kernel, x, contiguous=False) for x in (out_flows, in_flows))
    return _Solution(value, out_flows, in_flows, (kernel, rows, columns))


def _gaps(scores: Tensor, log_scalings: Tensor) -> Tensor:
    """``scores − log_scalings``, 0 where the scaling is -inf: a dead tag has no mass, and its gap
    is ``+inf`` or ``-inf − -inf``."""
    return torch.nan_to_num(scores - log_scalings, nan=0.0, posinf=0.0, neginf=0.0)


def _log_solution(
    log_q: Tensor, weights: Tensor, singles: Tensor, lengths: Tensor, temperature: float
) -> _Solution:
    """The :class:`_Solution` of a log-form iterate (``weights``: the arcs w)."""
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    return _Solution(value, pairwise.sum(-1), pairwise.sum(-2), pairwise)


def _arc_gradient(arcs: Tensor | tuple[_Kernel, _Vectors, _Vectors], weights: Tensor, shared: bool) -> Tensor:
    """``Σ_b weights_b q_b`` over the batch (and over the arc groups if ``shared``): (T, T) or
    (B, N-1, T, T), given the ``arcs`` of a :class:`_Solution`.

    In scaling form ``q = K ⊙ e^{s} ṽ ũᵀ`` with ṽ, ũ the rows' and columns' scalings over their
    largest and ``s`` the sum of those: a shared kernel's sum is one matrix product over the batch
    and the groups. Linear space loses only terms under ``e^{F/2}`` while ``s ≤ −F/2``; past that
    (a large scaling facing small kernel entries) q is summed in log space."""
    if isinstance(arcs, Tensor):
        weighted = weights[:, None, None, None] * arcs
        return weighted.sum((0, 1)) if shared else weighted
    kernel, rows, columns = arcs
    tags_first = _tags_first(kernel)
    log_scale = rows.shift + columns.shift  # (B, N-1, 1), or (1, N-1, B) tags first
    in_log_space = log_scale.numel() and float(log_scale.detach().amax()) > -_floor(log_scale.dtype) / 2
    if tags_first and (in_log_space or not shared):  # the per-arc formulas read (B, N-1, T) vectors
        rows, columns = (
            _Vectors(*(_in_layout(kernel, x, contiguous=False) for x in v)) for v in (rows, columns)
        )
        log_scale, tags_first = rows.shift + columns.shift, False
    if in_log_space:
        log_q = (kernel.log() + rows.log.unsqueeze(-1)).add_(columns.log.unsqueeze(-2))
        return _arc_gradient(torch.exp(log_q), weights, shared)
    rows = rows.linear * ((weights if tags_first else weights[:, None, None]) * torch.exp(log_scale))
    columns = columns.linear
    if tags_first:  # shared: (T, (N-1)·B) × ((N-1)·B, T)
        return (rows.flatten(1) @ columns.flatten(1).T) * kernel.linear
    if shared:
        return (rows.flatten(0, 1).T @ columns.flatten(0, 1)) * kernel.linear
    if not kernel.by_parity:
        arcs = kernel.linear * rows.unsqueeze(-1)
    elif _recorded(kernel.linear, rows):
        arcs = _interleaved(*(k * rows[:, p::2].unsqueeze(-1) for p, (k, _) in enumerate(kernel.parities)))
    else:  # each parity's block written into its groups of one fresh array
        arcs = kernel.linear.new_empty(kernel.linear.shape)
        for p, (k, _) in enumerate(kernel.parities):
            torch.mul(k, rows[:, p::2].unsqueeze(-1), out=arcs[:, p::2])
    if _recorded(arcs, columns):
        return arcs * columns.unsqueeze(-2)  # the product's backward reads ``arcs``
    return arcs.mul_(columns.unsqueeze(-2))  # in place: one (B, N-1, T, T) array, not two


class _Form(NamedTuple):
    """IBP in one form: the initial state, one iteration, the convergence error of a state, and
    what is read off a state: its arc marginals q (B, N-1, T, T), zero on padding, and its
    :class:`_Solution`."""

    initial: Any
    step: Callable[[Any], Any]
    error: Callable[[Any, Any], Tensor]
    marginals: Callable[[Any], Tensor]
    solution: Callable[[Any], _Solution]
    batch_dim: int = 0  # of the state's arrays
    #: a number of iterations at once (state, count) -> state, where that is faster than steps
    steps: Callable[[Any, int], Any] | None = None


def _form(terms: ArcTerms, lengths: Tensor, temperature: float, order: str, form: str) -> _Form:
    """IBP on the arcs ``terms`` in ``form``."""
    num_arcs = terms.rows.shape[1]
    if form == "log":
        weights = terms.weights()
        marginals = partial(_arc_marginals, lengths=lengths)
        return _Form(
            _initial(weights, temperature),
            _step(lengths, order, num_arcs),
            _error(marginals, lengths),
            marginals,
            partial(
                _log_solution,
                weights=weights,
                singles=terms.singles,
                lengths=lengths,
                temperature=temperature,
            ),
        )
    kernel, scalings = _scaled_initial(terms, lengths, temperature)
    linear = _linear_start(kernel, scalings, lengths)
    read = _log_scalings if linear is not None else _as_is
    steps = None if linear is None else _sweep_steps(kernel, lengths, order)
    if steps is None:  # the projections read Kᵀ: made once for both and the read-off
        kernel = _with_transposes(kernel)
        step = _step(lengths, order, num_arcs, kernel, linear is not None)
    else:
        step = partial(steps, count=1)

    def marginals(state: Any) -> Tensor:
        return _scaled_marginals(kernel, lengths, read(state))

    def solution(state: Any) -> _Solution:  # after the sweep, the in-flows' Kᵀ is made here
        return _scaled_solution(read(state), _with_transposes(kernel), terms, lengths, temperature)

    return _Form(
        scalings if linear is None else linear,
        step,
        _error(marginals, lengths),
        marginals,
        solution,
        -1 if _tags_first(kernel) else 0,
        steps,
    )


def _as_is(state: Any) -> Any:
    """``state`` itself: the log scalings of an iterate that holds them."""
    return state


def _run(
    terms: ArcTerms,
    lengths: Tensor,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> tuple[_Form, Any]:
    """The form and its state after ``iterations`` pairs of projections (or to ``tolerance``):
    all at once where the form can (``steps``) and no tolerance is checked between them."""
    ibp = _form(terms, lengths, temperature, order, form)
    if tolerance is None and ibp.steps is not None:
        return ibp, ibp.steps(ibp.initial, iterations)
    return ibp, iterate(ibp.step, ibp.initial, iterations, tolerance, ibp.error, ibp.batch_dim)


def _arc_mask(lengths: Tensor, num_arcs: int) -> Tensor:
    return position_mask(lengths - 1, num_arcs)[:, :, None, None]


def _arc_marginals(log_q: Tensor, lengths: Tensor) -> Tensor:
    """q (B, N-1, T, T), zero on padding."""
    return torch.exp(log_q) * _arc_mask(lengths, log_q.shape[1])  # log q is never +inf or NaN


def _unary(pairwise: Tensor, singles: Tensor, lengths: Tensor, temperature: float) -> Tensor:
    """Node marginals (B, N, T) read off the arc marginals; a softmax for length-1 sequences."""
    batch, num_arcs = pairwise.shape[:2]
    single = lengths == 1
    # tag i < len - 1 from the arcs leaving it; the last tag from the arcs entering it
    leaving = torch.cat([pairwise.sum(-1), pairwise.new_zeros(batch, 1, singles.shape[-1])], dim=1)
    entering = leaving[:, 0]  # any (B, T) placeholder: only read where a sequence has arcs
    if num_arcs:
        last_arc = (lengths - 2).clamp(min=0)[:, None, None].expand(-1, 1, singles.shape[-1])
        entering = pairwise.sum(-2).gather(1, last_arc).squeeze(1)
    last_tag = torch.where(
        single.unsqueeze(-1), torch.exp(torch.log_softmax(singles / temperature, dim=-1)), entering
    )
    is_last = torch.arange(num_arcs + 1, device=lengths.device) == (lengths - 1).unsqueeze(-1)
    return torch.where(is_last.unsqueeze(-1), last_tag.unsqueeze(1), leaving)


def _value(
    log_q: Tensor, pairwise: Tensor, weights: Tensor, singles: Tensor, lengths: Tensor, temperature: float
) -> Tensor:
    """``B_Y(w/τ) = Σ q (w/τ − log q)`` (B,) at the iterate; arcs with q = 0 contribute 0 (a -inf
    log counts as 0 before the product); a length-1 sequence's is the log-sum-exp of its tag scores."""
    expected = _inner(pairwise, _finite_or_zero(_scaled(weights, temperature)))  # <q, w/τ>
    value = expected - _inner(pairwise, _finite_or_zero(log_q))  # + H(q)
    return torch.where(lengths == 1, logsumexp(singles / temperature, dim=-1), value)


def _inner(x: Tensor, y: Tensor, batch_last: bool = False) -> Tensor:
    """``Σ x ⊙ y`` (B,) over all but the batch dim, of arrays (B, …) or ``batch_last`` (…, B);
    batch first as a batched dot, with no temporary as big as ``x``."""
    if batch_last:
        return (x * y).flatten(0, -2).sum(0)
    return torch.bmm(x.flatten(1).unsqueeze(1), y.flatten(1).unsqueeze(2)).view(-1)


def _violation(pairwise: Tensor, lengths: Tensor) -> Tensor:
    """(B,) distance to the paper's polytope description (Prop. 2): the largest error in (7) unit
    in-flow into each inner cluster and (8) flow conservation at each inner node. Lengths 1 and 2
    have no inner cluster, hence 0."""
    inflow = pairwise[:, :-1].sum(-2)  # (B, N-2, T) into inner position p = 1 .. N-2
    outflow = pairwise[:, 1:].sum(-1)  # (B, N-2, T) out of the same positions
    errors = torch.maximum((inflow.sum(-1) - 1).abs(), (inflow - outflow).abs().amax(-1))
    errors = torch.where(position_mask(lengths - 2, errors.shape[1]), errors, 0.0)
    return torch.cat([errors, errors.new_zeros(errors.shape[0], 1)], dim=1).amax(-1)


def _danskin_pieces(
    terms: ArcTerms, lengths: Tensor, temperature: float, *solver: Any
) -> tuple[Tensor, _Solution, Tensor]:
    """``τ B_Y(w/τ)`` (B,) at the iterate, the :class:`_Solution` its Danskin gradient is read from,
    and the tag probabilities of length-1 sequences (B, T), zero for longer ones. ``solver`` is
    ``(iterations, order, tolerance, form)``."""
    ibp, state = _run(terms, lengths, temperature, *solver)
    solution = ibp.solution(state)
    single_probs = torch.softmax(terms.singles / temperature, dim=-1) * (lengths == 1).unsqueeze(-1)
    return temperature * solution.value, solution, single_probs


class _DanskinValue(torch.autograd.Function):
    """``τ B_Y(w/τ)`` of the arcs' terms (transitions, rows, columns, singles) whose gradient is the
    iterate ``q`` itself (Danskin), not a backward pass through the iterations: exact at
    convergence, the paper's "use the inference algorithm". The terms' gradients are q's sums:
    ``Σ_b q`` (shared transitions) or q, the flows out of the rows and into the columns.

    A plain backward reads the solution kept by the forward pass. A backward that must itself be
    differentiable (``create_graph=True``: gradient penalties, Hessian-vector products) runs the
    iterations again from the saved terms with autograd recording, so the derivative of the
    gradient ``q − y`` is the exact ``dq/dw`` through the iterations (what finite differences of
    the Danskin gradient measure), never a detached constant.
    """

    @staticmethod
    def forward(
        ctx, transitions, rows, columns, singles, lengths, temperature, iterations, order, tolerance, form
    ):  # type: ignore[override]
        options = (temperature, iterations, order, tolerance, form)
        value, ctx.solution, ctx.single_probs = _danskin_pieces(
            ArcTerms(transitions, rows, columns, singles), lengths, *options
        )
        ctx.save_for_backward(transitions, rows, columns, singles, lengths)
        ctx.options = options
        return value

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        transitions, rows, columns, singles, lengths = ctx.saved_tensors
        solution, single_probs = ctx.solution, ctx.single_probs
        if torch.is_grad_enabled():  # create_graph: record the iterations the gradient comes from
            terms = ArcTerms(transitions, rows, columns, singles)
            _, solution, single_probs = _danskin_pieces(terms, lengths, *ctx.options)
        return (
            _arc_gradient(solution.arcs, grad, transitions.ndim == 2),
            grad[:, None, None] * solution.out_flows,
            grad[:, None, None] * solution.in_flows,
            grad[:, None] * single_probs,
            *(None,) * 6,
        )


def _scaled_value(
    terms: ArcTerms,
    lengths: Tensor,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
    gradient: str,
) -> Tensor:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    solver = (temperature, iterations, order, tolerance, form)
    if gradient == "danskin":
        return _DanskinValue.apply(*terms, lengths, *solver)
    ibp, state = _run(terms, lengths, *solver)
    return temperature * ibp.solution(state).value


@_tested_once
def marginals(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp, state = _run(terms, lengths, temperature, iterations, order, tolerance, form)
    pairwise = ibp.marginals(state)
    return _unary(pairwise, terms.singles, lengths, temperature), pairwise


def decode(emissions, transitions, lengths, start, end, **options):
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
    -1 on padding. Like the paper's, the output can contain a forbidden bigram before convergence."""
    return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)


@_tested_once
def log_partition(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autograd."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp, state = _run(terms, lengths, temperature, iterations, order, tolerance, form)
    return ibp.solution(state).value


@_tested_once
def solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form):
    """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
    iteration (``implementations.solver.SolverOutput``)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp = _form(terms, lengths, temperature, order, form)
    state, run, errors = iterate_with_errors(
        ibp.step, ibp.initial, iterations, tolerance, ibp.error, ibp.batch_dim
    )
    pairwise = ibp.marginals(state)
    converged = errors[run - 1] <= (tolerance or 0.0)
    return SolverOutput(
        _unary(pairwise, terms.singles, lengths, temperature),
        pairwise,
        ibp.solution(state).value,
        run,
        converged,
        errors,
    )


@_tested_once
def loss(emissions, transitions, lengths, tags, start, end, **options):
    """Fenchel–Young loss (B,): ``τ B_Y(w/τ) − <w, y>``, gradient ``q − y`` with ``"danskin"``.

    ``gradient="unrolled"`` backpropagates through the iterations instead; both agree at
    convergence. At τ = 1 this is the paper's ``B_Y(w) − <w, y>``.

    Second-order derivatives (gradient penalties, Hessian-vector products) are exact in both
    modes: with ``"danskin"`` they differentiate the gradient it returns, ``q − y``, with ``q``
    differentiated through the iterations (before convergence its Jacobian is not symmetric).
    """
    value = _scaled_value(arc_terms(emissions, transitions, lengths, start, end), lengths, **options)
    return value - gold_score(emissions, transitions, lengths, tags, start, end)


@_tested_once
def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label Fenchel–Young loss (B,): ``τ B_Y(w/τ) − τ B_Ỹ(w/τ)``, two IBP runs, the second
    with every tag that ``allowed`` (B, N, T) forbids set to -inf."""
    full = _scaled_value(arc_terms(emissions, transitions, lengths, start, end), lengths, **options)
    masked = arc_terms(mask_emissions(emissions, allowed), transitions, lengths, start, end)
    return full - _scaled_value(masked, lengths, **options)
