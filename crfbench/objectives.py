"""Training losses and decoders of the paper's Table 1, expressed through the inference contract.

A scorer gives raw per-position scores; :func:`chain_scores` adds the tag set's structural
constraints as ``-inf`` (transitions, first tag, last tag). Losses and decoders then call
``implementations.get(method, "torch")`` with the options the paper uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import torch
from torch import Tensor

import implementations

from .data.types import TagSet
from .models import Scores
from .uses import DECODERS as DECODER_USES
from .uses import LOSSES as LOSS_USES
from .uses import Use


@dataclass(frozen=True)
class Inference:
    """One use of an inference method: which method, which contract function, which options."""

    method: str
    function: str
    options: dict[str, Any]

    def __call__(self, chain: ChainScores, *target: Tensor, validate: bool = True) -> Tensor:
        return self.in_backend("torch", chain, *target, validate=validate)

    def in_backend(self, backend: str, chain: Any, *target: Any, validate: bool) -> Any:
        """The contract call in ``backend`` on ``chain``: any scores with the contract's arrays as
        attributes (torch's :class:`ChainScores`, JAX's ``crfbench.jax_timing.Chain``)."""
        function = getattr(implementations.get(self.method, backend=backend), self.function)
        return function(
            chain.emissions,
            chain.transitions,
            chain.lengths,
            *target,
            start=chain.start,
            end=chain.end,
            validate=validate,
            **self.options,
        )


def _inference(use: Use) -> Inference:
    return Inference(use.method, use.function, dict(use.options))


#: Training losses (``loss`` name -> contract call), from ``crfbench.uses``; ``iterations`` is
#: filled in per run.
LOSSES: dict[str, Inference] = {name: _inference(use) for name, use in LOSS_USES.items()}
#: Decoders (``decoder`` name -> contract call), from ``crfbench.uses``.
DECODERS: dict[str, Inference] = {name: _inference(use) for name, use in DECODER_USES.items()}
#: The decoder that matches each loss (default for dev-set model selection).
NATURAL_DECODER = {name: use.natural_decoder for name, use in LOSS_USES.items()}


def training_loss(name: str, iterations: int) -> Inference:
    """The loss ``name`` with ``iterations`` MF/BCRF steps where it has them."""
    loss = LOSSES[name]
    options = {key: iterations if key == "iterations" else value for key, value in loss.options.items()}
    return Inference(loss.method, loss.function, options)


def is_partial(loss: str) -> bool:
    return LOSSES[loss].function == "partial_loss"


class Described(Protocol):
    """What a result row says of a call: an :class:`Inference`, or a timed baseline's."""

    @property
    def method(self) -> str: ...

    @property
    def options(self) -> Mapping[str, Any]: ...


def describe(inference: Described) -> dict[str, Any]:
    """Method and iteration count, for result rows."""
    return {"method": inference.method, "iterations": inference.options.get("iterations")}


@dataclass(frozen=True)
class ChainScores:
    """Contract arguments for a batch: emissions (B,N,T), transitions (B,N-1,T,T) or (T,T),
    lengths (B,), start/end (T,) or None."""

    emissions: Tensor
    transitions: Tensor
    lengths: Tensor
    start: Tensor | None
    end: Tensor | None


@lru_cache(maxsize=64)
def constraint_scores(tagset: TagSet, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, ...]:
    """``tagset.score_masks()`` as tensors on ``device``, made once per (tag set, dtype, device):
    a step then copies nothing from the host, which a CUDA graph could not capture
    (``crfbench.capture``). Shared between calls: read them, never write them."""
    return tuple(torch.as_tensor(mask, dtype=dtype, device=device) for mask in tagset.score_masks())


def chain_scores(scores: Scores, tagset: TagSet) -> ChainScores:
    """Add the tag set's constraints (-inf where forbidden) to a scorer's raw output.

    A scorer without transition scores (the unstructured model) gets the constraint pattern alone
    as shared transitions, so that structured decoders still see the constraints.
    """
    transition_mask, start_mask, end_mask = constraint_scores(
        tagset, scores.emissions.dtype, scores.emissions.device
    )
    transitions = transition_mask if scores.transitions is None else scores.transitions + transition_mask
    constrained = tagset.constrained
    return ChainScores(
        scores.emissions,
        transitions,
        scores.lengths,
        start_mask if constrained else None,
        end_mask if constrained else None,
    )
