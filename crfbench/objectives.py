"""Training losses and decoders of the paper's Table 1, expressed through the inference contract.

A scorer gives raw per-position scores; :func:`chain_scores` adds the tag set's structural
constraints as ``-inf`` (transitions, first tag, last tag). Losses and decoders then call
``implementations.get(method, "torch")`` with the options the paper uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

import implementations

from .data.types import TagSet
from .models import Scores


@dataclass(frozen=True)
class Inference:
    """One use of an inference method: which method, which contract function, which options."""

    method: str
    function: str
    options: dict[str, Any]

    def __call__(self, chain: ChainScores, *target: Tensor, validate: bool = True) -> Tensor:
        module = implementations.get(self.method, backend="torch")
        function = getattr(module, self.function)
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


#: Training losses (``loss`` name -> contract call). ``iterations`` is filled in per run.
LOSSES: dict[str, Inference] = {
    "unstructured": Inference("unstructured", "loss", {}),
    "crf": Inference("crf", "loss", {}),
    "meanfield": Inference("meanfield", "loss", {"iterations": None}),
    "bcrf": Inference("bcrf", "loss", {"iterations": None, "temperature": 1.0}),
    "crf-partial": Inference("crf", "partial_loss", {}),
    "bcrf-partial": Inference("bcrf", "partial_loss", {"iterations": None, "temperature": 1.0}),
}

#: Decoders of Table 1 (τ⁻¹ = 10 for BCRF, as in the paper).
DECODERS: dict[str, Inference] = {
    "viterbi": Inference("crf", "decode", {}),
    "mf-5": Inference("meanfield", "decode", {"iterations": 5}),
    "mf-10": Inference("meanfield", "decode", {"iterations": 10}),
    "bcrf-5": Inference("bcrf", "decode", {"iterations": 5, "temperature": 0.1}),
    "bcrf-10": Inference("bcrf", "decode", {"iterations": 10, "temperature": 0.1}),
    "argmax": Inference("unstructured", "decode", {"repair": False}),
    "argmax-repair": Inference("unstructured", "decode", {"repair": True}),
}

#: The decoder that matches each loss (default for dev-set model selection).
NATURAL_DECODER = {
    "unstructured": "argmax",
    "crf": "viterbi",
    "meanfield": "mf-10",
    "bcrf": "bcrf-10",
    "crf-partial": "viterbi",
    "bcrf-partial": "bcrf-10",
}


def training_loss(name: str, iterations: int) -> Inference:
    """The loss ``name`` with ``iterations`` MF/BCRF steps where it has them."""
    loss = LOSSES[name]
    options = {key: iterations if key == "iterations" else value for key, value in loss.options.items()}
    return Inference(loss.method, loss.function, options)


def is_partial(loss: str) -> bool:
    return LOSSES[loss].function == "partial_loss"


def describe(inference: Inference) -> dict[str, Any]:
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


def chain_scores(scores: Scores, tagset: TagSet) -> ChainScores:
    """Add the tag set's constraints (-inf where forbidden) to a scorer's raw output.

    A scorer without transition scores (the unstructured model) gets the constraint pattern alone
    as shared transitions, so that structured decoders still see the constraints.
    """
    like = {"dtype": scores.emissions.dtype, "device": scores.emissions.device}
    transition_mask, start_mask, end_mask = (torch.as_tensor(mask, **like) for mask in tagset.score_masks())
    transitions = transition_mask if scores.transitions is None else scores.transitions + transition_mask
    constrained = tagset.constrained
    return ChainScores(
        scores.emissions,
        transitions,
        scores.lengths,
        start_mask if constrained else None,
        end_mask if constrained else None,
    )
