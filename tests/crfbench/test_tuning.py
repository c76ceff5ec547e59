"""The learning-rate choice every trainer shares: the best dev score's rate, and the grid's widening."""

from __future__ import annotations

import pytest

from crfbench.tuning import choose_learning_rate


def test_choose_learning_rate_widens_at_the_edges():
    assert choose_learning_rate({1e-3: 0.5, 2e-3: 0.7, 4e-3: 0.6}) == (2e-3, None)
    assert choose_learning_rate({1e-3: 0.8, 2e-3: 0.7}) == (1e-3, 0.5e-3)
    assert choose_learning_rate({1e-3: 0.6, 8e-3: 0.7}) == (8e-3, 16e-3)
    assert choose_learning_rate({1e-3: 0.7, 2e-3: 0.7, 4e-3: 0.1}) == (1e-3, 0.5e-3)  # ties: the smaller
    assert choose_learning_rate({2e-3: 0.7}) == (2e-3, None)
    with pytest.raises(ValueError, match="no run with a dev score"):
        choose_learning_rate({})
