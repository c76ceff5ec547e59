"""Algorithm 3 of Vilnis et al. (2015), doubly stochastic learning: minibatch gradient steps on the
scores' parameters θ and the energy's weights ψ, where each step's loss is the surrogate
``−log Q(y; θ − ∇L_ψ(μ*))`` with μ* from the Bethe solver held fixed (the ``bethe`` method's
``loss``: no differentiation through the solver). Weights that must stay ≥ 0 (ψ of a convex
energy) are projected onto the non-negative orthant after every step.

Training stops when the dev score has not improved by more than ``min_delta`` for ``patience``
epochs (or after ``epochs``), and the parameters of the best dev epoch are restored, so that the
returned curve says whether the run converged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Curve:
    """One row per epoch (epoch 0: before training): ``epoch``, mean training ``loss``, ``dev``
    score, ``seconds``; the epoch whose parameters were kept; and whether the dev curve flattened
    (``patience`` epochs without improvement) before the epoch cap, i.e. the run converged."""

    rows: tuple[dict[str, float], ...]
    best_epoch: int
    flattened: bool


def fit(
    parameters: Sequence[torch.Tensor],
    batch_loss: Callable[[Any], torch.Tensor],
    batches: Callable[[int], Iterable[Any]],
    dev_score: Callable[[], float],
    *,
    epochs: int,
    learning_rate: float,
    patience: int = 2,
    min_delta: float = 0.0,
    non_negative: Sequence[torch.Tensor] = (),
    weight_decay: float = 0.0,
) -> Curve:
    """Train ``parameters`` (leaf tensors with ``requires_grad``) by Adam on ``batch_loss(batch)``
    (a scalar, or per-example losses that are averaged) over ``batches(epoch)`` (the epoch's
    minibatches, shuffled by the caller from the epoch number so that runs repeat), keeping those in
    ``non_negative`` ≥ 0; ``dev_score()`` (higher is better) is read before training (epoch 0) and
    after every epoch. Returns the curve; the parameters hold the best dev epoch's values."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if any(not any(p is q for q in parameters) for p in non_negative):
        raise ValueError("non_negative must be a subset of parameters")
    optimizer = torch.optim.Adam(parameters, lr=learning_rate, weight_decay=weight_decay)
    best_score, best_epoch = dev_score(), 0
    best = [p.detach().clone() for p in parameters]
    flattened = False
    rows = [{"epoch": 0, "loss": float("nan"), "dev": best_score, "seconds": 0.0}]
    for epoch in range(1, epochs + 1):
        start, total, count = time.perf_counter(), 0.0, 0
        for batch in batches(epoch):
            optimizer.zero_grad()
            loss = batch_loss(batch).mean()
            if not torch.isfinite(loss):
                raise FloatingPointError(f"the training loss is {loss.item()} at epoch {epoch}")
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for weight in non_negative:
                    weight.clamp_(min=0.0)
            total, count = total + loss.item(), count + 1
        score = dev_score()
        rows.append(
            {
                "epoch": epoch,
                "loss": total / max(count, 1),
                "dev": score,
                "seconds": time.perf_counter() - start,
            }
        )
        if score > best_score + min_delta:
            best_score, best_epoch = score, epoch
            best = [p.detach().clone() for p in parameters]
        elif epoch - best_epoch >= patience:
            flattened = True
            break
    with torch.no_grad():
        for parameter, value in zip(parameters, best, strict=True):
            parameter.copy_(value)
    return Curve(tuple(rows), best_epoch, flattened)
