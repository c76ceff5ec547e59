"""What the timing stage calls for each name it times: the losses and decoders
(``crfbench.objectives``) and the speed-ups' baselines (``crfbench.uses``: the parallel scan, and
pytorch-crf's forward algorithm and Viterbi, the implementation most papers compare with).

pytorch-crf holds one shared (T, T) transition matrix where our scorer gives one per position: it
is timed as a model built on it would run, its matrix a trainable parameter that starts at the tag
set's constraints (forbidden transitions at a large finite penalty: pytorch-crf multiplies the
scores of padded positions by 0, and -inf times 0 is NaN). Its loss and Viterbi are a Python loop
over positions, and its Viterbi backtraces on the host; it is timed eager only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from implementations.peers import pytorch_crf_mask, to_pytorch_crf

from .data.types import TagSet
from .objectives import DECODERS, LOSSES, ChainScores, Inference, training_loss
from .uses import PYTORCH_CRF, TIMED_DECODERS, TIMED_LOSSES, Use

#: The score pytorch-crf's constraint matrix gives a forbidden transition (finite: see above).
FORBIDDEN_SCORE = -1.0e4


class PytorchCrf:
    """pytorch-crf's negative log-likelihood (B,) (``function="loss"``) or Viterbi tags (a list of
    lists, its own output) on a batch's emissions, called like an :class:`Inference`."""

    method = PYTORCH_CRF

    def __init__(self, function: str, tagset: TagSet, device: torch.device) -> None:
        if function not in ("loss", "decode"):
            raise ValueError(f"function: pytorch-crf has a loss and a decoder, not {function!r}")
        self.function = function
        self.options: dict[str, Any] = {}
        transitions, start, end = (
            torch.as_tensor(np.maximum(mask, FORBIDDEN_SCORE), dtype=torch.float32, device=device)
            for mask in tagset.score_masks()
        )
        self.crf = to_pytorch_crf(transitions, start, end)

    def __call__(self, chain: ChainScores, *target: Tensor, validate: bool = False) -> Any:
        mask = pytorch_crf_mask(chain.lengths, chain.emissions.shape[1])
        emissions = chain.emissions.to(self.crf.transitions.dtype)
        if self.function == "decode":
            return self.crf.decode(emissions, mask=mask)
        (tags,) = target
        return -self.crf(emissions, tags.clamp(min=0), mask=mask, reduction="none")  # padding: -1


def timed_loss(name: str, iterations: int, tagset: TagSet, device: torch.device) -> Inference | PytorchCrf:
    """The loss or baseline loss ``name`` (``crfbench.uses.TIMED_LOSSES``) as a call, with
    ``iterations`` where it is iterative."""
    if name in LOSSES:
        return training_loss(name, iterations)
    return _baseline(TIMED_LOSSES[name], tagset, device)


def timed_decoder(name: str, tagset: TagSet, device: torch.device) -> Inference | PytorchCrf:
    """The decoder or baseline decoder ``name`` (``crfbench.uses.TIMED_DECODERS``) as a call."""
    return DECODERS[name] if name in DECODERS else _baseline(TIMED_DECODERS[name], tagset, device)


def _baseline(use: Use, tagset: TagSet, device: torch.device) -> Inference | PytorchCrf:
    if use.method == PYTORCH_CRF:
        return PytorchCrf(use.function, tagset, device)
    return Inference(use.method, use.function, dict(use.options))


def is_partial(name: str) -> bool:
    """Whether the timed loss ``name`` trains on partial annotations."""
    return TIMED_LOSSES[name].function == "partial_loss"
