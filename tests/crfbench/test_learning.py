"""Algorithm 3's training loop (crfbench.bethe.learning.fit): Adam on minibatch losses, weights
kept non-negative by projection, early stopping on the dev score with the best epoch's parameters
restored, and a curve that says whether the dev score flattened."""

from __future__ import annotations

import pytest
import torch

from crfbench.bethe.learning import fit


def test_a_quadratic_is_minimised_with_the_weight_kept_non_negative() -> None:
    """min (w + 1)² + (v − 2)² with w ≥ 0: w ends at 0 (the projection), v at 2."""
    w = torch.tensor(0.5, requires_grad=True)
    v = torch.tensor(0.0, requires_grad=True)
    seen = []

    def loss(_):
        seen.append(w.item())
        return (w + 1) ** 2 + (v - 2) ** 2

    curve = fit(
        [w, v], loss, lambda epoch: range(20), lambda: -(((w + 1) ** 2 + (v - 2) ** 2).item()),
        epochs=30, learning_rate=0.1, patience=3, non_negative=[w],
    )  # fmt: skip
    assert min(seen) >= 0.0 and w.item() == 0.0
    assert v.item() == pytest.approx(2.0, abs=1e-2)
    assert curve.rows[0]["epoch"] == 0 and curve.rows[-1]["epoch"] == len(curve.rows) - 1


def test_the_best_dev_epoch_is_restored_and_the_flat_curve_is_reported() -> None:
    """A dev score that peaks at epoch 2 and falls after: training stops ``patience`` epochs
    later, the parameters are epoch 2's, and the curve flattened before the cap."""
    w = torch.tensor(0.0, requires_grad=True)
    scores = iter([0.0, 1.0, 2.0, 1.5, 1.0, 0.5, 0.0])
    values = []

    def dev() -> float:
        values.append(w.item())
        return next(scores)

    curve = fit([w], lambda _: -w, lambda epoch: [None], dev, epochs=6, learning_rate=0.1, patience=2)
    assert curve.best_epoch == 2 and curve.flattened
    assert [row["epoch"] for row in curve.rows] == [0, 1, 2, 3, 4]
    assert w.item() == values[2]  # the value the dev score was read at, after epoch 2
    capped = fit([w], lambda _: -w, lambda epoch: [None], iter([0.0, 1.0, 2.0]).__next__, epochs=2,
                 learning_rate=0.1)  # fmt: skip
    assert not capped.flattened and capped.best_epoch == 2


def test_bad_arguments_are_named() -> None:
    w = torch.tensor(0.0, requires_grad=True)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        fit([w], lambda _: w, lambda epoch: [], lambda: 0.0, epochs=0, learning_rate=0.1)
    with pytest.raises(ValueError, match="non_negative must be a subset"):
        fit([w], lambda _: w, lambda epoch: [], lambda: 0.0, epochs=1, learning_rate=0.1,
            non_negative=[torch.tensor(1.0)])  # fmt: skip
    with pytest.raises(FloatingPointError, match="training loss is nan at epoch 1"):
        fit([w], lambda _: w * float("nan"), lambda epoch: [None], lambda: 0.0, epochs=1, learning_rate=0.1)
