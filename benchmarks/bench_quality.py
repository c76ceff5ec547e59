"""What the approximate methods give for their speed, on the same random scores as the timings
(standard normal emissions, per-position transitions and start/end scores): BCRF's distance to the
marginal polytope after 5 and 10 iterations, and how often each decoder agrees with Viterbi.
"""

from __future__ import annotations

import numpy as np

import implementations
from implementations.contract import to_numpy

from .common import GRID, VARIANTS, random_scores, skip_unless_fits, use_device

BACKENDS = ("torch", "jax")


class BCRFViolation:
    """Largest error in BCRF's polytope constraints (unit in-flow, flow conservation) over the batch,
    at the training temperature τ=1 and the decoding temperature τ=0.1."""

    params = (BACKENDS, (5, 10), (1.0, 0.1), GRID.lengths, GRID.num_tags, GRID.batch)
    param_names = ("backend", "iterations", "temperature", "N", "T", "B")
    unit = "max constraint error"
    timeout = 600.0

    def setup(
        self, backend: str, iterations: int, temperature: float, length: int, num_tags: int, batch: int
    ):
        use_device(backend, "cpu")
        skip_unless_fits(f"bcrf-{iterations}", "cpu", batch, length, num_tags)
        self.scores = random_scores(backend, "cpu", batch, length, num_tags)

    def track_bcrf_violation(self, backend, iterations, temperature, length, num_tags, batch) -> float:
        emissions, transitions, lengths, _, start, end = self.scores
        result = implementations.get("bcrf", backend).solve(
            emissions,
            transitions,
            lengths,
            start=start,
            end=end,
            iterations=iterations,
            temperature=temperature,
        )
        return float(np.max(to_numpy(result.error)))


class DecoderAgreement:
    """Fraction of tokens on which a decoder picks the same tag as Viterbi (``crf-scan``'s must be 1)."""

    params = (tuple(name for name in VARIANTS if name != "crf"), GRID.lengths, GRID.num_tags, GRID.batch)
    param_names = ("method", "N", "T", "B")
    unit = "fraction of tokens"
    timeout = 600.0

    def setup(self, method: str, length: int, num_tags: int, batch: int) -> None:
        use_device("torch", "cpu")
        skip_unless_fits(method, "cpu", batch, length, num_tags)
        self.scores = random_scores("torch", "cpu", batch, length, num_tags)

    def track_decoder_agreement(self, method: str, length: int, num_tags: int, batch: int) -> float:
        emissions, transitions, lengths, _, start, end = self.scores
        name, options = VARIANTS[method]
        viterbi = implementations.get("crf", "torch").decode(
            emissions, transitions, lengths, start=start, end=end
        )
        decoded = implementations.get(name, "torch").decode(
            emissions, transitions, lengths, start=start, end=end, **options
        )
        return float((decoded == viterbi).double().mean())
