"""Input validation shared by every backend: shapes, dtypes and values of the contract's scores.

Written against what every array library offers (``.shape``, ``.ndim``, comparison operators,
``.any()``), so the torch and jax backends raise the same ``ValueError`` with the same message.
Small integer/bool arrays (lengths, tags, masks) are inspected on the host with NumPy.
Checks that need inference itself (is any tag sequence allowed? is the gold path's score finite?)
are computed by the backend and reported through :func:`raise_for_rows`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

Array = Any  # a torch.Tensor or a jax.Array


@dataclass(frozen=True)
class ChainShape:
    """Sizes of a validated batch: ``batch`` B, padded ``length`` N, ``num_tags`` T."""

    batch: int
    length: int
    num_tags: int
    per_position: bool  # transitions given per position, (B, N-1, T, T), rather than shared (T, T)


def to_numpy(x: Array) -> np.ndarray:
    """Host copy of a small array of any backend."""
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu()
    return np.asarray(x)


def dtype_kind(x: Array) -> str:
    """NumPy kind letter of an array's dtype: 'f' float, 'i'/'u' integer, 'b' bool."""
    name = str(x.dtype).removeprefix("torch.")
    if name.startswith(("float", "bfloat", "half", "double")):
        return "f"
    return np.dtype(name).kind


def _check_float(name: str, x: Array, expected: tuple[int | str, ...]) -> None:
    """A score array: rank ``len(expected)``, float32 or float64, no NaN, no +inf.

    Half precision (float16, bfloat16, and any float narrower than 32 bits) is refused: log-space
    sums of scores lose every digit there (bfloat16 marginal rows summed to 3.2), and refusing
    here, where every method's validation passes, covers every method and backend at once.
    """
    if x.ndim != len(expected):
        raise ValueError(f"{name} must have shape {_fmt(expected)}, got rank {x.ndim}: {tuple(x.shape)}")
    if dtype_kind(x) != "f":
        raise ValueError(f"{name} must be a floating-point array, got dtype {x.dtype}")
    if x.dtype.itemsize < 4:
        raise ValueError(
            f"{name} must be float32 or float64, got half precision {x.dtype}; convert it first "
            "(torch: .float(), jax: .astype(jnp.float32))"
        )
    if bool((x != x).any()):
        raise ValueError(f"{name} contains NaN")
    if bool((x == math.inf).any()):
        raise ValueError(f"{name} contains +inf (only -inf, meaning 'forbidden', is allowed)")


#: Largest intermediate, in bytes, that ``crf-scan`` may build: the (B, P/2, T, T, T) broadcast sums
#: of its first level of semiring matrix products (see :func:`scan_intermediate_elements`). Peak
#: memory is a small multiple of it (about 3x: the sums, their exponentials, the saved inputs).
#: Read at every call (under ``jax.jit``: when the call is traced), so a caller with more memory
#: may raise it by assignment. Not a per-call option: ``crf`` and ``crf-scan`` share one signature.
SCAN_MEMORY_BUDGET = 2 * 1024**3


def scan_intermediate_elements(batch: int, length: int, num_tags: int) -> int:
    """Elements of ``crf-scan``'s largest intermediate: ``B · P/2 · T³``.

    Its chain has ``N + 1`` factors, padded to ``P``, the next power of two (``P = 2N`` when N is
    a power of two); the first tree level multiplies ``P/2`` pairs of (T, T) matrices, each through
    a (T, T, T) array of sums. The inside pass, the outside pass and Viterbi all build it.
    """
    padded = 1 << max(length, 0).bit_length()  # N + 1 factors, rounded up to a power of two
    return batch * (padded // 2) * num_tags**3


def check_scan_memory(emissions: Array) -> None:
    """Refuse (``ValueError``) a ``crf-scan`` call whose largest intermediate, in bytes of the
    scores' dtype, exceeds :data:`SCAN_MEMORY_BUDGET`. Uses the shape and dtype only, so it also
    works on traced arrays; it runs before anything is allocated."""
    batch, length, num_tags = (int(s) for s in emissions.shape)
    needed = scan_intermediate_elements(batch, length, num_tags) * emissions.dtype.itemsize
    if needed > SCAN_MEMORY_BUDGET:
        raise ValueError(
            f"emissions of shape (B, N, T) = {(batch, length, num_tags)} need a {needed / 2**30:.1f} GiB "
            f"intermediate in crf-scan (B * P/2 * T^3 entries), over its budget of "
            f"{SCAN_MEMORY_BUDGET / 2**30:.1f} GiB (contract.SCAN_MEMORY_BUDGET); use the sequential "
            "'crf' (O(B N T^2) memory), a smaller batch, or raise the budget"
        )


def _fmt(shape: tuple[int | str, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def check_scores(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    start: Array | None = None,
    end: Array | None = None,
) -> ChainShape:
    """Validate the scores every function takes and return their sizes.

    Raises ``ValueError`` naming the argument for a wrong rank or shape, a non-float or
    half-precision score, NaN or +inf anywhere, non-integer lengths, or lengths outside
    ``1 <= lengths[b] <= N``.
    """
    _check_float("emissions", emissions, ("B", "N", "T"))
    batch, length, num_tags = (int(s) for s in emissions.shape)
    if length < 1 or num_tags < 1:
        raise ValueError(f"emissions must have N >= 1 and T >= 1, got shape {tuple(emissions.shape)}")
    per_position = transitions.ndim == 4
    expected = (batch, length - 1, num_tags, num_tags) if per_position else (num_tags, num_tags)
    _check_float("transitions", transitions, expected)
    if tuple(int(s) for s in transitions.shape) != expected:
        raise ValueError(
            f"transitions must have shape (T, T) = {_fmt(expected[-2:])} or (B, N-1, T, T) = "
            f"{_fmt((batch, length - 1, num_tags, num_tags))}, got {tuple(transitions.shape)}"
        )
    for name, boundary in (("start", start), ("end", end)):
        if boundary is not None:
            _check_float(name, boundary, ("T",))
            if int(boundary.shape[0]) != num_tags:
                raise ValueError(f"{name} must have shape (T,) = ({num_tags},), got {tuple(boundary.shape)}")
    check_lengths(lengths, batch, length)
    return ChainShape(batch, length, num_tags, per_position)


def check_lengths(lengths: Array, batch: int, length: int, *, values: bool = True) -> None:
    """``lengths``: an integer ``(B,)`` array and, with ``values`` (not under a jax trace, which
    has no values to read), ``1 <= lengths[b] <= length`` (N: positions of a chain, words of a
    tree)."""
    if lengths.ndim != 1 or int(lengths.shape[0]) != batch:
        raise ValueError(f"lengths must have shape (B,) = ({batch},), got {tuple(lengths.shape)}")
    if dtype_kind(lengths) not in "iu":
        raise ValueError(f"lengths must be an integer array, got dtype {lengths.dtype}")
    if not values:
        return
    host = to_numpy(lengths)
    bad = np.flatnonzero((host < 1) | (host > length))
    if bad.size:
        raise ValueError(
            f"lengths must satisfy 1 <= lengths[b] <= N = {length}; "
            f"lengths[{int(bad[0])}] = {int(host[bad[0]])}"
        )


def valid_positions(lengths: Array, length: int) -> np.ndarray:
    """(B, N) bool host mask, True where ``position < lengths[b]``."""
    return np.arange(length)[None, :] < to_numpy(lengths)[:, None]


def check_tags(tags: Array, shape: ChainShape, lengths: Array) -> None:
    """Gold tags: integer, (B, N), in ``[0, T)`` inside each length; padding may hold anything."""
    expected = (shape.batch, shape.length)
    if tuple(int(s) for s in tags.shape) != expected:
        raise ValueError(f"tags must have shape (B, N) = {_fmt(expected)}, got {tuple(tags.shape)}")
    if dtype_kind(tags) not in "iu":
        raise ValueError(f"tags must be an integer array, got dtype {tags.dtype}")
    host = to_numpy(tags)
    inside = valid_positions(lengths, shape.length)
    bad = np.argwhere(inside & ((host < 0) | (host >= shape.num_tags)))
    if bad.size:
        b, i = (int(v) for v in bad[0])
        raise ValueError(
            f"tags out of range: tags[{b}, {i}] = {int(host[b, i])}, expected 0 <= tag < T = {shape.num_tags}"
        )


def check_allowed(allowed: Array, shape: ChainShape) -> None:
    """Partial-annotation mask: bool, (B, N, T)."""
    expected = (shape.batch, shape.length, shape.num_tags)
    if tuple(int(s) for s in allowed.shape) != expected:
        raise ValueError(f"allowed must have shape (B, N, T) = {_fmt(expected)}, got {tuple(allowed.shape)}")
    if dtype_kind(allowed) != "b":
        raise ValueError(f"allowed must be a bool array, got dtype {allowed.dtype}")


def check_choice(name: str, value: object, choices: tuple[object, ...]) -> None:
    """A keyword option must be one of a fixed set."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def check_positive(name: str, value: float, *, integer: bool = False) -> None:
    """A keyword option that must be > 0 (and an int where ``integer``)."""
    if integer and (isinstance(value, bool) or not isinstance(value, int | np.integer)):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def raise_for_rows(bad_rows: Array, problem: str) -> None:
    """Raise ``ValueError`` listing the batch rows flagged in ``bad_rows`` (B,) bool."""
    rows = np.flatnonzero(to_numpy(bad_rows))
    if rows.size:
        shown = ", ".join(str(int(r)) for r in rows[:10]) + (" ..." if rows.size > 10 else "")
        raise ValueError(f"sequence(s) {shown} {problem}")


#: What each backend takes, for the one-line TypeError of :func:`check_array_types`.
_EXPECTED_TYPE = {
    "torch": "a torch.Tensor (torch.as_tensor(x))",
    "jax": "a jax.Array or NumPy array (jnp.asarray(x))",
}


def _is_backend_array(backend: str, x: Array) -> bool:
    """Whether ``x`` is an array ``backend`` computes on: torch a ``torch.Tensor``; JAX a
    ``jax.Array`` (tracers included) or a NumPy array, never a torch tensor or a Python list."""
    torch = sys.modules.get("torch")
    is_tensor = torch is not None and isinstance(x, torch.Tensor)
    if backend == "torch":
        return is_tensor
    jax = sys.modules.get("jax")
    return not is_tensor and (isinstance(x, np.ndarray) or (jax is not None and isinstance(x, jax.Array)))


def check_array_types(backend: str, arrays: dict[str, Array]) -> None:
    """Refuse (one-line ``TypeError`` naming the argument) an array of another framework or a
    Python list given to ``backend``; ``None`` (an absent ``start``/``end``) passes."""
    for name, x in arrays.items():
        if x is not None and not _is_backend_array(backend, x):
            raise TypeError(
                f"{name} must be {_EXPECTED_TYPE[backend]} for the {backend} backend, "
                f"got {type(x).__module__}.{type(x).__qualname__}"
            )
