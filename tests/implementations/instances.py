"""Random chain instances for the tests, and small helpers to call the backends and references.

An :class:`Instance` is a padded batch in NumPy float64: emissions ``(B, N, T)``, transitions
shared ``(T, T)`` or per position ``(B, N-1, T, T)``, lengths ``(B,)``, optional start/end, and a
*planted* gold path per sequence whose score is finite (so every sequence has at least one valid
tag sequence, whatever the random ``-inf`` pattern). Everything past a sequence's length is
garbage (large values and ``-inf``) that the backends must ignore. ``Instance.arrays(backend)``
hands the same instance to any backend (see ``backends.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from implementations.reference import brute_force
from implementations.reference.common import fold_arc_weights
from implementations.reference.instances import random_batch

from . import backends
from .backends import Backend


@dataclass(frozen=True)
class Instance:
    """A padded batch of chain-CRF scores (NumPy, float64) with a planted valid gold path."""

    emissions: np.ndarray  # (B, N, T)
    transitions: np.ndarray  # (T, T) or (B, N-1, T, T)
    lengths: np.ndarray  # (B,) int64
    start: np.ndarray | None  # (T,)
    end: np.ndarray | None  # (T,)
    gold: np.ndarray  # (B, N) int64, -1 on padding

    @property
    def batch(self) -> int:
        return int(self.emissions.shape[0])

    @property
    def length(self) -> int:
        return int(self.emissions.shape[1])

    @property
    def num_tags(self) -> int:
        return int(self.emissions.shape[2])

    @property
    def per_position(self) -> bool:
        return self.transitions.ndim == 4

    def seq(self, b: int) -> dict[str, Any]:
        """Sequence ``b`` cut to its length, as keyword arguments for the reference oracles."""
        n = int(self.lengths[b])
        trans = self.transitions[b, : n - 1] if self.per_position else self.transitions
        return {
            "emissions": self.emissions[b, :n],
            "transitions": trans,
            "start": self.start,
            "end": self.end,
        }

    def arc_weights(self, b: int) -> np.ndarray:
        """Folded arc weights ``w (n-1, T, T)`` of sequence ``b`` (contract convention)."""
        return fold_arc_weights(**self.seq(b))

    def alone(self, b: int) -> Instance:
        """Sequence ``b`` as a batch of one, with ``N = lengths[b]`` (no padding at all)."""
        n = int(self.lengths[b])
        trans = self.transitions[b : b + 1, : n - 1] if self.per_position else self.transitions
        return Instance(
            self.emissions[b : b + 1, :n].copy(),
            trans.copy(),
            np.array([n], dtype=np.int64),
            self.start,
            self.end,
            self.gold[b : b + 1, :n].copy(),
        )

    def with_per_position(self) -> Instance:
        """The same scores with shared transitions expanded to ``(B, N-1, T, T)``."""
        if self.per_position:
            return self
        trans = np.broadcast_to(
            self.transitions, (self.batch, self.length - 1, self.num_tags, self.num_tags)
        ).copy()
        return replace(self, transitions=trans)

    def valid(self) -> np.ndarray:
        """``(B, N)`` bool: position inside the sequence."""
        return np.arange(self.length)[None, :] < self.lengths[:, None]

    def scores(self) -> dict[str, np.ndarray | None]:
        """Fresh NumPy copies of ``emissions, transitions, lengths, start, end`` (safe to mutate)."""
        return {
            "emissions": self.emissions.copy(),
            "transitions": self.transitions.copy(),
            "lengths": self.lengths.copy(),
            "start": None if self.start is None else self.start.copy(),
            "end": None if self.end is None else self.end.copy(),
        }

    def arrays(self, backend: Backend | str, dtype: str = "float64") -> dict[str, Any]:
        """Keyword arguments ``emissions, transitions, lengths, start, end`` as arrays of
        ``backend`` (an adapter or its name), scores in ``dtype`` and lengths int64."""
        return _adapter(backend).arrays(self.scores(), dtype)

    def gold_array(self, backend: Backend | str) -> Any:
        """The planted gold tags ``(B, N)`` as an int64 array of ``backend`` (-1 on padding)."""
        return _adapter(backend).array(self.gold)

    def torch(self, dtype: torch.dtype = torch.float64, grad: bool = False) -> dict[str, Any]:
        """Keyword arguments ``emissions, transitions, lengths, start, end`` as torch tensors.

        With ``grad`` the float tensors require gradients (leaves).
        """

        def conv(x: np.ndarray | None) -> torch.Tensor | None:
            if x is None:
                return None
            return torch.tensor(x, dtype=dtype, requires_grad=grad)

        return {
            "emissions": conv(self.emissions),
            "transitions": conv(self.transitions),
            "lengths": torch.tensor(self.lengths, dtype=torch.int64),
            "start": conv(self.start),
            "end": conv(self.end),
        }

    def gold_tensor(self) -> torch.Tensor:
        return torch.tensor(self.gold, dtype=torch.int64)


def _adapter(backend: Backend | str) -> Backend:
    return backends.get(backend) if isinstance(backend, str) else backend


def make_instance(rng: np.random.Generator, **options: Any) -> Instance:
    """An :class:`Instance` of ``implementations.reference.instances.random_batch`` (same options)."""
    return Instance(*random_batch(rng, **options))


def all_lengths_instance(
    seed: int,
    num_tags: int,
    *,
    max_len: int = 6,
    per_position: bool = True,
    boundary: bool = True,
    neg_inf: float = 0.0,
    scale: float = 1.0,
) -> Instance:
    """A batch holding one sequence of every length ``1..max_len`` (shuffled), ``N = max_len``."""
    rng = np.random.default_rng(seed)
    lengths = rng.permutation(np.arange(1, max_len + 1))
    return make_instance(
        rng,
        batch=max_len,
        length=max_len,
        num_tags=num_tags,
        lengths=lengths,
        per_position=per_position,
        start=boundary,
        end=boundary,
        neg_inf=neg_inf,
        scale=scale,
    )


@st.composite
def instances(
    draw: st.DrawFn,
    *,
    max_batch: int = 4,
    max_len: int = 6,
    max_tags: int = 4,
    min_tags: int = 1,
    neg_inf: tuple[float, ...] = (0.0, 0.2, 0.4),
    scale: tuple[float, ...] = (1.0, 3.0),
) -> Instance:
    """Hypothesis strategy for :class:`Instance`: sizes, options and a seed for NumPy."""
    batch = draw(st.integers(1, max_batch))
    length = draw(st.integers(1, max_len))
    num_tags = draw(st.integers(min_tags, max_tags))
    per_position = draw(st.booleans())
    start = draw(st.booleans())
    end = draw(st.booleans())
    p_inf = draw(st.sampled_from(neg_inf))
    sc = draw(st.sampled_from(scale))
    seed = draw(st.integers(0, 2**32 - 1))
    return make_instance(
        np.random.default_rng(seed),
        batch=batch,
        length=length,
        num_tags=num_tags,
        per_position=per_position,
        start=start,
        end=end,
        neg_inf=p_inf,
        scale=sc,
    )


def random_allowed(rng: np.random.Generator, inst: Instance, density: float = 0.6) -> np.ndarray:
    """``(B, N, T)`` bool mask that always permits the planted gold path (garbage on padding)."""
    allowed = rng.random((inst.batch, inst.length, inst.num_tags)) < density
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        allowed[b, np.arange(n), inst.gold[b, :n]] = True
    return allowed


def path_is_valid(inst: Instance, b: int, path: np.ndarray) -> bool:
    """The tag sequence has a finite score under sequence ``b``'s scores."""
    return bool(np.isfinite(brute_force.path_score(path, **inst.seq(b))))


def invoke(function: Callable[..., Any], kw: dict[str, Any], *extra: Any, **opts: Any) -> Any:
    """``function(emissions, transitions, lengths, *extra, start=..., end=..., **opts)`` with the
    scores taken from the dict ``kw`` (as :meth:`Instance.arrays` builds it); ``extra`` is the
    gold ``tags`` of ``loss`` or the ``allowed`` mask of ``partial_loss``."""
    scores = (kw["emissions"], kw["transitions"], kw["lengths"])
    return function(*scores, *extra, start=kw.get("start"), end=kw.get("end"), **opts)


def apply(mod: Any, fn: str, kw: dict[str, Any], *extra: Any, **opts: Any) -> Any:
    """:func:`invoke` of the contract function ``fn`` of module ``mod``."""
    return invoke(getattr(mod, fn), kw, *extra, **opts)


def npy(x: Any) -> np.ndarray:
    """A NumPy copy of a torch tensor or a jax array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.array(x)


def scale_instance(inst: Instance, factor: float) -> Instance:
    """All scores multiplied by ``factor > 0`` (``-inf`` stays ``-inf``)."""

    def mul(x: np.ndarray | None) -> np.ndarray | None:
        return None if x is None else x * factor

    return replace(
        inst,
        emissions=inst.emissions * factor,
        transitions=inst.transitions * factor,
        start=mul(inst.start),
        end=mul(inst.end),
    )
