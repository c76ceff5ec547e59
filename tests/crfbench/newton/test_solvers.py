"""Every solver on one small convex problem reaches the same optimum (the objective is convex, so
that is a test of each); CRFsuite's model is our model (its weights read back give our objective
the value it reports)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crfbench.data.types import TagSet
from crfbench.newton import jax_objective
from crfbench.newton.features import Vocabulary, crfsuite_items, featurize
from crfbench.newton.solvers import SOLVERS, Budget, run_solver
from crfbench.newton.torch_objective import Objective

from .brute_force import random_sentences

TAGS = TagSet.unconstrained(("O", "B-X", "I-X"))


@pytest.fixture(scope="module")
def problem():
    sentences = random_sentences(np.random.default_rng(0), 60, TAGS.tags)
    vocabulary = Vocabulary.fit(sentences)
    corpus = featurize(sentences, vocabulary, TAGS)
    objective = Objective(corpus, sigma=1.0)
    crfsuite_data = (
        crfsuite_items(sentences, vocabulary),
        [s.tags for s in sentences],
        vocabulary,
        TAGS.tags,
    )
    reference = run_solver("tron", objective, Budget(epsilon=1e-10))
    return objective, crfsuite_data, reference, corpus


@pytest.mark.parametrize("solver", [s for s in SOLVERS if s not in ("adam", "lbfgs-optax")])
def test_every_solver_reaches_the_same_optimum(problem, solver):
    objective, crfsuite_data, reference, _ = problem
    run = run_solver(solver, objective, Budget(epsilon=1e-9), crfsuite_data=crfsuite_data)
    optimum = reference.rows[-1]["objective"]
    assert objective.value(run.x) == pytest.approx(optimum, rel=1e-9)
    assert run.rows[-1]["objective"] == pytest.approx(optimum, rel=1e-6)  # CRFsuite logs 8 digits
    np.testing.assert_allclose(run.x, reference.x, atol=1e-3)


def test_optax_lbfgs_on_the_jax_objective_reaches_the_same_optimum(problem):
    objective, _, reference, corpus = problem
    twin = jax_objective.Objective(corpus, sigma=objective.sigma)
    run = run_solver("lbfgs-optax", twin, Budget(epsilon=1e-9))
    assert objective.value(run.x) == pytest.approx(reference.rows[-1]["objective"], rel=1e-9)
    assert run.rows[-1]["gradient"] > len(run.rows) - 1  # line-search evaluations counted
    with pytest.raises(ValueError, match="needs the jax backend"):
        run_solver("lbfgs-optax", objective)


def test_adam_descends_towards_the_optimum(problem):
    objective, _, reference, _ = problem
    run = run_solver("adam", objective, Budget(adam_steps=100))
    objectives = [row["objective"] for row in run.rows]
    assert len(run.rows) == 101 and objectives[-1] < 0.5 * objectives[0]
    assert objectives[-1] > reference.rows[-1]["objective"]


def test_trace_rows_count_passes_and_time_monotonically(problem):
    objective, _, _, _ = problem
    run = run_solver("tron", objective, Budget(epsilon=1e-6))
    assert run.rows[0]["iteration"] == 0 and run.rows[0]["gradient"] == 1
    for earlier, later in itertools.pairwise(run.rows):
        assert later["seconds"] >= earlier["seconds"]
        assert all(later[k] >= earlier[k] for k in ("function", "gradient", "hvp"))
    assert run.rows[-1]["hvp"] > 0


def test_unknown_solver_and_missing_crfsuite_data_are_errors(problem):
    objective, _, _, _ = problem
    with pytest.raises(ValueError, match="unknown solver 'newton'"):
        run_solver("newton", objective)
    with pytest.raises(ValueError, match="crfsuite_data"):
        run_solver("crfsuite", objective)


def test_the_experiment_refuses_training_data_missing_a_tag_when_crfsuite_runs():
    from crfbench.data.types import Dataset
    from crfbench.newton import experiment

    sentences = tuple(random_sentences(np.random.default_rng(1), 10, ("O", "B-X")))
    dataset = Dataset("toy", "ner", TAGS, sentences, sentences, sentences, "standard", {})
    with pytest.raises(ValueError, match=r"train_sentences=0: tag.*I-X never occur"):
        experiment.train(dataset, experiment.Settings(solvers=("crfsuite",)))
    tables = experiment.train(dataset, experiment.Settings(solvers=("tron",)))
    assert (
        tables["solvers"]["solver"].tolist() == ["tron"] and 0 <= tables["solvers"]["test_f1"].iloc[0] <= 100
    )
