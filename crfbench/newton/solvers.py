"""The solvers compared on one feature-CRF objective, each traced the same way.

Every solver starts from λ = 0, whose objective and gradient are evaluated before its clock starts,
and reports after each of its iterations a trace row: seconds since its start, the objective, ‖∇f‖
and the cumulative passes over the data by kind (``function``, ``gradient``, ``hvp``; for CRFsuite,
whose evaluations are internal, a gradient pass per line-search trial). Solvers:

- ``tron``: ``tron.tron`` with the dynamic-programming Hv;
- ``tron-autodiff``: the same with forward-over-reverse autodiff Hv;
- ``lbfgs``: SciPy's L-BFGS-B (no bounds; m = 10 corrections);
- ``trust-ncg``: SciPy's Newton-CG trust region with our DP Hv as ``hessp``;
- ``crfsuite``: CRFsuite's L-BFGS on the same attributes (``feature.possible_states`` and
  ``possible_transitions`` on, ``c2 = 1/(2σ²)``: its penalty ``c2‖w‖²`` has no ½); its weights
  are read back and the objective recomputed by our code (the same model when every tag occurs in
  the training data: CRFsuite knows only the labels it has seen);
- ``lbfgs-optax``: optax's L-BFGS (m = 10, zoom line search) jitted on the jax objective (its
  first step's compilation off the clock); it needs the jax backend's ``Objective``;
- ``adam``: full-batch Adam (torch), the first-order reference, for a fixed number of steps.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.optimize
import torch

from . import tron as tron_module
from .features import Vocabulary
from .problem import Layout, Objective

SOLVERS = ("tron", "tron-autodiff", "trust-ncg", "lbfgs", "lbfgs-optax", "crfsuite", "adam")


@dataclass(frozen=True)
class Budget:
    """When a solver stops: ``epsilon`` the relative gradient norm ‖∇f‖ ≤ ε‖∇f(0)‖ (TRON and
    trust-ncg; L-BFGS-B and CRFsuite stop on their own tests, set tight), ``max_iterations`` and
    Adam's ``adam_steps`` and ``adam_learning_rate``."""

    epsilon: float = 1e-7
    max_iterations: int = 1000
    adam_steps: int = 300
    adam_learning_rate: float = 0.05


@dataclass
class Run:
    """A solver's final λ and its trace rows (dicts with iteration, seconds, objective,
    gradient_norm, function, gradient, hvp)."""

    solver: str
    x: np.ndarray
    rows: list[dict[str, float]] = field(default_factory=list)


class _Tracer:
    """Times a solver and turns its per-iteration reports into trace rows."""

    def __init__(
        self, solver: str, objective: Objective, progress: Callable[[dict[str, float]], None] | None
    ):
        self.objective = objective
        self.run = Run(solver, np.zeros(objective.layout.size))
        self.progress = progress
        objective.counts.clear()
        self.start = time.perf_counter()
        self.paused = 0.0

    def record(
        self, x: np.ndarray, objective: float, gradient_norm: float, passes: dict[str, int] | None = None
    ) -> None:
        seconds = time.perf_counter() - self.start - self.paused
        counts = passes if passes is not None else self.objective.counts
        row = {
            "iteration": len(self.run.rows),
            "seconds": seconds,
            "objective": float(objective),
            "gradient_norm": float(gradient_norm),
            **{kind: int(counts.get(kind, 0)) for kind in ("function", "gradient", "hvp")},
        }
        self.run.rows.append(row)
        self.run.x = x
        if self.progress is not None:
            self.progress(row)

    def untimed(self, work: Callable[[], Any]) -> Any:
        """Run ``work`` (a measurement for the trace only) outside the solver's clock and counts."""
        began = time.perf_counter()
        saved = dict(self.objective.counts)
        try:
            return work()
        finally:
            self.objective.counts.clear()
            self.objective.counts.update(saved)
            self.paused += time.perf_counter() - began


def run_solver(
    solver: str,
    objective: Objective,
    budget: Budget = Budget(),
    *,
    crfsuite_data: tuple[Sequence[Any], Sequence[Sequence[str]], Vocabulary, Sequence[str]] | None = None,
    progress: Callable[[dict[str, float]], None] | None = None,
) -> Run:
    """Minimise ``objective`` from 0 with ``solver`` (one of ``SOLVERS``). ``crfsuite`` needs
    ``crfsuite_data = (item sequences, tag sequences, vocabulary, tag names)`` of the same corpus."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {', '.join(SOLVERS)}")
    tracer = _Tracer(solver, objective, progress)
    x0 = np.zeros(objective.layout.size)
    value0, gradient0 = objective.value_and_gradient(x0)
    tracer.start = time.perf_counter()  # the shared start (and jax's compilation) is no solver's time
    tracer.record(x0, value0, float(np.linalg.norm(gradient0)))
    if solver in ("tron", "tron-autodiff"):
        hvp = objective.hvp if solver == "tron" else objective.hvp_autodiff
        settings = tron_module.Settings(epsilon=budget.epsilon, max_iterations=budget.max_iterations)
        tron_module.tron(
            objective.value,
            objective.value_and_gradient,
            hvp,
            x0,
            settings,
            callback=lambda x, it: tracer.record(x, it.objective, it.gradient_norm),
        )
    elif solver in ("lbfgs", "trust-ncg"):
        _scipy(solver, objective, x0, budget, tracer, float(np.linalg.norm(gradient0)))
    elif solver == "lbfgs-optax":
        _optax_lbfgs(objective, x0, budget, tracer, float(np.linalg.norm(gradient0)))
    elif solver == "crfsuite":
        if crfsuite_data is None:
            raise ValueError("solver 'crfsuite' needs crfsuite_data")
        _crfsuite(objective, budget, tracer, *crfsuite_data)
    else:
        _adam(objective, x0, gradient0, budget, tracer)
    return tracer.run


def _scipy(
    solver: str, objective: Objective, x0: np.ndarray, budget: Budget, tracer: _Tracer, g0_norm: float
) -> None:
    last: dict[str, Any] = {}

    def value_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = objective.value_and_gradient(x)
        last.update(x=x.copy(), value=value, gradient=gradient)
        return value, gradient

    def callback(intermediate_result: scipy.optimize.OptimizeResult) -> None:
        x = intermediate_result.x
        # not where it last evaluated: measure off the clock
        if "x" not in last or not np.array_equal(last["x"], x):
            tracer.untimed(lambda: value_and_gradient(x))
        tracer.record(x.copy(), last["value"], float(np.linalg.norm(last["gradient"])))

    if solver == "lbfgs":
        options = {
            "maxiter": budget.max_iterations,
            "maxcor": 10,
            "ftol": 1e-15,
            "gtol": budget.epsilon * g0_norm,
        }
        scipy.optimize.minimize(
            value_and_gradient, x0, jac=True, method="L-BFGS-B", options=options, callback=callback
        )
    else:
        options = {"maxiter": budget.max_iterations, "gtol": budget.epsilon * g0_norm}
        scipy.optimize.minimize(
            value_and_gradient,
            x0,
            jac=True,
            hessp=objective.hvp,
            method="trust-ncg",
            options=options,
            callback=callback,
        )


def _optax_lbfgs(
    objective: Objective, x0: np.ndarray, budget: Budget, tracer: _Tracer, g0_norm: float
) -> None:
    import jax
    import optax

    from .jax_objective import Objective as JaxObjective

    if not isinstance(objective, JaxObjective):
        raise ValueError("solver 'lbfgs-optax' needs the jax backend's objective")
    function = objective.function
    solver = optax.lbfgs(memory_size=10)
    value_and_grad = optax.value_and_grad_from_state(function)

    @jax.jit
    def step(params, state):
        value, grad = value_and_grad(params, state=state)
        updates, state = solver.update(grad, state, params, value=value, grad=grad, value_fn=function)
        params = optax.apply_updates(params, updates)
        return params, state, optax.tree.get(state, "value"), optax.tree.get(state, "grad")

    params = jax.numpy.asarray(x0)
    state = solver.init(params)
    tracer.untimed(lambda: jax.block_until_ready(step(params, state)))  # compile
    passes = {"gradient": 1}
    for _ in range(budget.max_iterations):
        params, state, value, grad = step(params, state)
        passes["gradient"] += int(optax.tree.get(state, "num_linesearch_steps"))
        gradient_norm = float(jax.numpy.linalg.norm(grad))
        tracer.record(np.asarray(params), float(value), gradient_norm, passes)
        if gradient_norm <= budget.epsilon * g0_norm:
            break


def _adam(
    objective: Objective, x0: np.ndarray, gradient0: np.ndarray, budget: Budget, tracer: _Tracer
) -> None:
    weights = torch.tensor(x0, requires_grad=True)
    optimiser = torch.optim.Adam([weights], lr=budget.adam_learning_rate)
    gradient = gradient0
    for _ in range(budget.adam_steps):
        weights.grad = torch.from_numpy(gradient)
        optimiser.step()
        x = weights.detach().numpy().copy()
        value, gradient = objective.value_and_gradient(x)
        tracer.record(x, value, float(np.linalg.norm(gradient)))


def _crfsuite(
    objective: Objective,
    budget: Budget,
    tracer: _Tracer,
    items: Sequence[Any],
    tags: Sequence[Sequence[str]],
    vocabulary: Vocabulary,
    tag_names: Sequence[str],
) -> None:
    import pycrfsuite

    passes = {"gradient": 0}

    class Trainer(pycrfsuite.Trainer):
        def message(self, message: str) -> None:  # CRFsuite's log, parsed quietly
            if self.logparser.feed(message) == "iteration":
                info = self.logparser.last_iteration
                passes["gradient"] += int(info["linesearch_trials"])
                tracer.record(tracer.run.x, float(info["loss"]), float(info["error_norm"]), passes)

    trainer = Trainer()
    for sequence, labels in zip(items, tags, strict=True):
        trainer.append(pycrfsuite.ItemSequence(sequence), list(labels))
    trainer.select("lbfgs")
    trainer.set_params(
        {
            "c1": 0.0,
            "c2": 1.0 / (2.0 * objective.sigma**2),
            "feature.possible_states": True,
            "feature.possible_transitions": True,
            "feature.minfreq": 0,
            "max_iterations": budget.max_iterations,
            "epsilon": 1e-12,
            "delta": 1e-14,
            "period": 10,
        }
    )
    tracer.start = time.perf_counter()  # appending items is data loading, not solving
    with tempfile.TemporaryDirectory() as folder:
        model = str(Path(folder) / "model.crfsuite")
        trainer.train(model)
        tagger = pycrfsuite.Tagger()
        tagger.open(model)
        x = crfsuite_weights(tagger.info(), vocabulary, tag_names)
        tagger.close()
    tracer.run.x = x


def crfsuite_weights(info: Any, vocabulary: Vocabulary, tag_names: Sequence[str]) -> np.ndarray:
    """CRFsuite's trained weights (``Tagger.info()``) as our flat λ (features it dropped are 0)."""
    layout = Layout(len(vocabulary), len(tag_names))
    flat = np.zeros(layout.size)
    emission, transition = layout.split(flat)
    attribute = vocabulary.index()
    tag = {name: i for i, name in enumerate(tag_names)}
    for (name, label), weight in info.state_features.items():
        emission[attribute[name], tag[label]] = weight
    for (previous, following), weight in info.transitions.items():
        transition[tag[previous], tag[following]] = weight
    return flat
