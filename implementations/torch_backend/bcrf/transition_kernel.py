"""BCRF's kernel in torch: ``K = exp(transitions/τ − shift)``, the arcs' weights without their
unaries (the scaling form keeps those in its scalings), in the layouts its products read fastest,
and those products (``K x`` and ``Kᵀ x`` for every arc group); with the vectors they multiply,
held stabilised by their largest entry (:class:`_Vectors`), and the layout of a scaling-form
iterate on a kernel (tags first for a shared one, :func:`_tags_first`)."""

from __future__ import annotations

import math
from typing import NamedTuple, cast

import torch
from torch import Tensor

from ...kernels.bcrf_log_form import _scaled
from ...kernels.bcrf_numerics import _finite_or_zero, _floor
from .._semiring import largest
from ..ops import recorded
from . import compilation, run_state

#: (K, Kᵀ) of the groups of one parity, Kᵀ None until made (:func:`_with_transposes`); both parities
_Parities = tuple[tuple[Tensor, Tensor | None], tuple[Tensor, Tensor | None]]


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
    in place. One array as large as half the arcs is spared, and its fresh pages. Smaller ones keep
    the groups in order: matmul wants one batch dim, and the gather and the read-off by parity
    cost more than they spare."""

    scaled: Tensor  # transitions/τ, (T, T) or (B, N-1, T, T)
    shift: Tensor  # () or (B, N-1)
    linear: Tensor  # exp(log), flushed
    #: (K, Kᵀ) of groups 0, 2, ... and 1, 3, ...; Kᵀ None by parity until needed (_with_transposes)
    parities: _Parities
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


def _kernel(transitions: Tensor, temperature: float) -> _Kernel:
    """The kernel of ``transitions`` (T, T) or (B, N-1, T, T) at ``temperature``. Its shift is
    detached: the iterates do not depend on it."""
    scaled = _scaled(transitions, temperature)
    shared = scaled.ndim == 2
    shift = _finite_or_zero(scaled.detach().amax() if shared else scaled.detach().amax((-2, -1)))
    even = len(range(0, scaled.shape[1], 2)) if not shared else 0  # groups of the even parity
    by_parity = not shared and len(scaled) * even * scaled.shape[-1] ** 2 >= compilation.FUSED_FROM
    if by_parity:  # gathered into one fresh array, shifted in place
        order = torch.tensor(
            [*range(0, scaled.shape[1], 2), *range(1, scaled.shape[1], 2)], device=scaled.device
        )
        log, shifts = scaled.index_select(1, order), shift[:, order, None, None]
        log = log - shifts if recorded(log) else log.sub_(shifts)
    else:
        log = scaled - (shift if shared else shift[..., None, None])
    tiny = torch.finfo(log.dtype).tiny
    if recorded(log):
        linear = torch.threshold(torch.exp(log), tiny, 0.0)
    else:  # in place on one fresh array: a per-arc kernel is as large as the arcs
        # (threshold_ is in torch.nn.functional, not in its stubs)
        linear = torch.nn.functional.threshold_(log.exp_(), tiny, 0.0)  # type: ignore[attr-defined]
    # one read-back a call (where a GPU defers the tests, a failed one would run the call again);
    # none where it is captured or traced: each flow is then tested where it is made
    vouched = (
        bool(linear.numel())
        and not run_state.capturing(linear)
        and bool(linear.detach().amin() > math.exp(_floor(linear) / 2))
    )
    if shared:
        pair = (linear, linear.T.contiguous())
        return _Kernel(scaled, shift, linear, (pair, pair), vouched)
    halves = (
        (linear[:, :even], linear[:, even:])
        if by_parity
        else (linear[:, 0::2].contiguous(), linear[:, 1::2].contiguous())
    )
    # by parity, Kᵀ waits for a call that reads it (_with_transposes)
    parities = cast(
        _Parities,
        tuple((part, None if by_parity else part.transpose(-1, -2).contiguous()) for part in halves),
    )
    return _Kernel(scaled, shift, linear, parities, vouched, by_parity)


def _with_transposes(kernel: _Kernel) -> _Kernel:
    """``kernel`` with each parity's Kᵀ (contiguous), which the products into the tags read, made
    where a call first needs them: :func:`_kernel` leaves them out of a kernel laid out by parity,
    as the sweep and the marginals' read-off never read them and each is as large as its parity's
    arcs. ``kernel`` itself where they are there."""
    if all(transposed is not None for _, transposed in kernel.parities):
        return kernel
    parities = tuple((k, k.transpose(-1, -2).contiguous()) for k, _ in kernel.parities)
    return kernel._replace(parities=cast(_Parities, parities))


#: From this many tags on, a batch of matrix–vector products ``M x`` is faster as row vector
#: times ``Mᵀ`` (MKL on the CPU); ``bmm`` wins below.
ROW_VECTOR_FROM = 32


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
    if matrices.numel() >= compilation.FUSED_FROM:
        return compilation._fused_row_products(matrices, vectors)
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
