"""The Newton-CRF thesis's complexity claim (Chen 2009, Chapter IV): one Hessian-vector product by
its dynamic program costs the order of one gradient. On random feature corpora of 4096 tokens
(12 attributes per token, ``crfbench.newton.experiment.random_corpus``) over N, T and the number
of attributes F, times a gradient (forward–backward and scatter), a DP Hv on the sweeps a gradient
stored, a DP Hv with its sweep, and a forward-over-reverse autodiff Hv; float64, torch, CPU, one
thread (``common.use_device``). The stored conditionals hold 2·tokens·T² floats: combinations over
the profile's CPU element cap are skipped.
"""

from __future__ import annotations

import numpy as np

from crfbench.newton.experiment import CostGrid, hv_tasks, random_corpus
from crfbench.newton.torch_objective import Objective

from .common import GRID, use_device

TASKS = ("gradient", "hvp_dp", "hvp_dp_with_sweep", "hvp_autodiff")
ATTRIBUTES = (1_000, 100_000)
COST = CostGrid()


class NewtonHessianVector:
    """One call of each task; compare ``hvp_*`` with ``gradient`` at equal (N, T, F)."""

    params = (TASKS, GRID.lengths, GRID.num_tags, ATTRIBUTES)
    param_names = ("task", "N", "T", "F")
    timeout = 300.0
    repeat = GRID.repeat
    rounds = GRID.rounds

    def setup(self, task: str, length: int, num_tags: int, attributes: int) -> None:
        use_device("torch", "cpu")
        if 2 * COST.tokens * num_tags**2 > GRID.element_cap["cpu"]:
            raise NotImplementedError(f"T={num_tags}: 2·{COST.tokens}·T² floats over the CPU cap")
        rng = np.random.default_rng(length * 1000 + num_tags)
        objective = Objective(random_corpus(rng, length, num_tags, attributes, COST), sigma=1.0)
        x, v = 0.1 * rng.normal(size=objective.size), rng.normal(size=objective.size)
        self.call = hv_tasks(objective, x, v)[task]
        objective.value_and_gradient(x)  # the sweeps hvp_dp reuses

    def time_call(self, task: str, length: int, num_tags: int, attributes: int) -> None:
        self.call()
