"""The support algebra of SparseMAP (``kernels/sparsemap.py``), written once for both frameworks
through the ops namespace: a support is ``K`` slots of tag sequences (paths (B, K, N), -1 on
padding) with weights (B, K); this module turns them into marginals, reads paths off scores, and
keeps the bordered KKT system ``[[G_I, 1], [1ᵀ, 0]]`` of the support and its inverse up to date as
atoms enter and leave (docs/derivations.md §8)."""

from __future__ import annotations

from typing import Any

from .. import ops

# ------------------------------------------------------------------------------ paths and marginals


def onehot(paths: Any, num_tags: int, dtype: Any) -> Any:
    """(..., N, T) indicators of ``paths`` (..., N), zero rows where a path is -1."""
    o = ops.of(paths)
    return o.one_hot(o.maximum(paths, 0), num_tags, dtype) * (paths >= 0)[..., None]


def unary(paths: Any, weights: Any, num_tags: int) -> Any:
    """``Σ_k weights_k m_k`` (B, N, T): each slot's weight added at its tags (a scatter, not a
    (B, K, N, T) one-hot: the solver asks for it every iteration)."""
    o = ops.of(weights)
    batch, _, length = paths.shape
    source = weights[..., None] * (paths >= 0)  # (B, K, N)
    index = o.maximum(paths, 0).swapaxes(1, 2)  # (B, N, K)
    return o.add_at(o.zeros((batch, length, num_tags), weights), index, source.swapaxes(1, 2))


def pairwise(paths: Any, weights: Any, num_tags: int) -> Any:
    """``Σ_k weights_k n_k`` (B, N-1, T, T)."""
    o = ops.of(weights)
    tags = onehot(paths, num_tags, weights.dtype)
    return o.einsum("bk,bkns,bknt->bnst", weights, tags[:, :, :-1], tags[:, :, 1:])


def path_sums(paths: Any, unary: Any, pairwise: Any | None = None) -> Any:
    """``m_kᵀunary (+ n_kᵀpairwise)`` (B, K): each slot's path read off node (and arc) scores."""
    o = ops.of(unary)
    tags = onehot(paths, unary.shape[-1], unary.dtype)
    total = o.einsum("bknt,bnt->bk", tags, unary)
    if pairwise is not None:
        total = total + o.einsum("bkns,bknt,bnst->bk", tags[:, :, :-1], tags[:, :, 1:], pairwise)
    return total


def agreement(paths: Any, path: Any) -> Any:
    """``m_kᵀm_s`` (B, K): the positions where each slot's path agrees with ``path`` (B, N)."""
    return ((paths == path[:, None]) & (path[:, None] >= 0)).sum(-1)


def first(mask: Any) -> Any:
    """(B,) index of the first True of each row (0 if none)."""
    o = ops.of(mask)
    return o.astype(mask, o.uint8).argmax(-1)


# ------------------------------------------------------------------------------ the KKT system


def bordered(agreement: Any, active: Any, like: Any) -> Any:
    """The KKT column ``[m_Iᵀm_s; 1]`` (B, K+1) of an atom from its ``agreement`` (B, K) with
    each slot, 0 on inactive slots."""
    o = ops.of(like)
    column = o.where(active, o.astype(agreement, like.dtype), 0.0)
    return o.concatenate([column, o.ones((active.shape[0], 1), like)], 1)


def system(active: Any, gram: Any, sizes: Any) -> Any:
    """The bordered KKT matrix ``[[G_I, 1], [1ᵀ, 0]]`` of the support (B, K+1, K+1), exact (the
    Gram entries count agreeing positions), identity on inactive slots."""
    o = ops.of(gram)
    batch, max_support = active.shape
    both = active[:, :, None] & active[:, None, :]
    gram = o.where(both, gram, o.eye(max_support, sizes))
    border = o.astype(active, sizes.dtype)[..., None]
    corner = o.zeros((batch, 1, 1), sizes)
    return o.concatenate(
        [o.concatenate([gram, border], 2), o.concatenate([border.swapaxes(1, 2), corner], 2)], 1
    )


def initial_inverse(sizes: Any, max_support: int) -> Any:
    """(B, K+1, K+1) the KKT inverse of a support of one atom in slot 0, ``[[0, 1], [1, -n]]`` on
    slot 0 and the border, identity on the other slots."""
    o = ops.of(sizes)
    index = o.arange(max_support + 1, like=sizes)
    row, column = index[:, None], index[None, :]
    edge = (index == 0) | (index == max_support)
    corner = edge[:, None] & edge[None, :]  # slot 0 and the border
    block = o.where((row == max_support) & (column == max_support), -sizes[:, None, None], 1.0)
    block = o.where((row == 0) & (column == 0), 0.0, block)
    return o.where(corner, block, o.eye(max_support + 1, sizes))


def _unit(batch: int, size: int, slot: Any, like: Any) -> Any:
    """(B, size) rows ``e_slot``."""
    o = ops.of(like)
    return o.broadcast_to(o.one_hot(slot, size, like.dtype), (batch, size))


def remove(inverse: Any, slot: Any, apply: Any) -> Any:
    """The KKT inverse without atom ``slot`` (B,), where ``apply``: the Schur update
    ``H − h hᵀ / H_rr``, then row and column ``slot`` reset to the identity's."""
    o = ops.of(inverse)
    batch, size, _ = inverse.shape
    index = o.broadcast_to(slot[:, None, None], (batch, size, 1))
    column = o.take_along_axis(inverse, index, 2)[..., 0]  # (B, K+1)
    pivot = o.take_along_axis(column, slot[:, None], 1)  # (B, 1)
    pivot = o.where(apply[:, None], pivot, 1.0)
    unit = _unit(batch, size, slot, inverse)
    updated = inverse - column[:, :, None] * column[:, None, :] / pivot[:, :, None]
    updated = updated + unit[:, :, None] * unit[:, None, :]
    return o.where(apply[:, None, None], updated, inverse)


def add(inverse: Any, slot: Any, solved: Any, schur: Any, apply: Any) -> Any:
    """The KKT inverse with a new atom in the empty ``slot``, where ``apply``: with ``c = H k``
    (``solved``) and the Schur complement ``σ = ‖m_s‖² − kᵀc``, ``H − e eᵀ + (c − e)(c − e)ᵀ / σ``."""
    o = ops.of(inverse)
    batch, size, _ = inverse.shape
    unit = _unit(batch, size, slot, inverse)
    direction = solved - unit
    safe = o.where(apply, schur, 1.0)[:, None, None]
    updated = inverse - unit[:, :, None] * unit[:, None, :]
    updated = updated + direction[:, :, None] * direction[:, None, :] / safe
    return o.where(apply[:, None, None], updated, inverse)


def refined(inverse: Any, system: Any) -> Any:
    """The KKT inverse after one Newton–Schulz step ``H + H (I − A H)`` against the exact system
    ``A``: the O(K²) updates lose digits on the ill-conditioned systems of long sentences (paths
    that differ in a few positions), and the step squares the residual ``I − A H``."""
    o = ops.of(inverse)
    residual = o.eye(inverse.shape[-1], inverse) - system @ inverse
    return inverse + inverse @ residual


def relaxed(active: Any, theta: Any, inverse: Any, system: Any) -> Any:
    """(B, K) the weights solving the relaxed QP on the support (Eq. 9), ``[w; τ] = A⁻¹ [θ; 1]``,
    0 on inactive slots: the inverse applied, then one step of iterative refinement against the
    exact system. The inverse's own rounding leaves a residual of order κ·eps·‖θ‖, which the two
    backends round differently; the step leaves one of order eps·‖θ‖, so u* is the support's to
    rounding, in either backend."""
    o = ops.of(theta)
    max_support = active.shape[1]
    right = o.concatenate([o.where(active, theta, 0.0), o.ones((theta.shape[0], 1), theta)], 1)
    solution = inverse @ right[..., None]
    solution = solution + inverse @ (right[..., None] - system @ solution)
    return o.where(active, solution[:, :max_support, 0], 0.0)


def conditioning(system: Any, inverse: Any) -> Any:
    """(B,) ``‖A‖∞ ‖A⁻¹‖∞`` of the support's KKT system: how much the solved weights, hence the
    gap, amplify rounding. Without it the active set would chase gaps below what its own
    weights resolve: on a long sentence with 30 nearly dependent atoms the gap stalls near 1e-10,
    atoms keep entering and leaving, and the system degenerates."""
    o = ops.of(system)
    return o.amax(o.abs(system).sum(-1), -1) * o.amax(o.abs(inverse).sum(-1), -1)
