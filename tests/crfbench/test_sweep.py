"""The decoding sweep: every setting scored, and its points equal to the table decoders they share."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from crfbench.evaluate import evaluate
from crfbench.schema import SWEEP_COLUMNS
from crfbench.sweep import ITERATIONS, settings, sweep
from crfbench.train import train

from .test_engine import SYNTHETIC, make_config


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    run_dir = tmp_path_factory.mktemp("run")
    train(make_config("crf", epochs=2), run_dir, progress=False)
    return run_dir, sweep(run_dir, progress=False)


def test_every_setting_has_every_metric(swept) -> None:
    run_dir, table = swept
    assert list(table.columns) == list(SWEEP_COLUMNS)
    assert set(table.sentences) == {SYNTHETIC["test"]}
    options = ["method", "iterations", "temperature", "penalty", "solver"]
    per_setting = table.groupby(options, dropna=False).metric.agg(set)
    assert len(per_setting) == len(settings())
    common = {"accuracy", "precision", "recall", "f1", "violations", "seconds"}
    own = {"bcrf": {"constraint_error"}, "meanfield": {"last_change"}}
    own["sparsemap"] = {"wolfe_gap", "support_size"}
    for (method, *_), metrics in per_setting.items():
        assert metrics == common | own[method]
    assert pd.read_csv(run_dir / "sweep.csv").shape == table.shape
    seconds = table[table.metric == "seconds"].value
    assert len(seconds) == len(settings()) and (seconds > 0).all() and seconds.map(math.isfinite).all()


def test_the_sweep_agrees_with_the_table_decoders(swept) -> None:
    """BCRF at 10 iterations and τ = 0.1, mean field at 5 and 10 with the default penalty, SparseMAP's
    active set at 50: the same scores as the table decoders bcrf-10, meanfield-5, meanfield-10 and
    sparsemap on the same sentences."""
    run_dir, table = swept
    decoders = {"bcrf-10": ("bcrf", 10, 0.1, None), "meanfield-5": ("meanfield", 5, None, 0.0)}
    decoders |= {"meanfield-10": ("meanfield", 10, None, 0.0), "sparsemap": ("sparsemap", 50, None, None)}
    scored = evaluate(run_dir, decoders=list(decoders), splits=["test"], progress=False)
    for decoder, (method, iterations, temperature, penalty) in decoders.items():
        rows = table[(table.method == method) & (table.iterations == iterations)]
        if method == "bcrf":
            rows = rows[rows.temperature == temperature]
        elif method == "meanfield":
            rows = rows[rows.penalty == penalty]
        else:  # the default solver: at 50 iterations the default solve has converged
            rows = rows[rows.solver == "active-set"]
        for metric in ("f1", "accuracy", "violations"):
            want = scored.query("decoder == @decoder and metric == @metric").value.item()
            assert rows[rows.metric == metric].value.item() == pytest.approx(want), (decoder, metric)


def test_sparsemap_solvers_close_their_gap(swept) -> None:
    """Every solver's gap shrinks with iterations; the active set's is closed (rounding) at 50."""
    _, table = swept
    gaps = table[table.metric == "wolfe_gap"].set_index(["solver", "iterations"]).value
    for solver in gaps.index.unique("solver"):
        assert gaps[solver, ITERATIONS[-1]] <= gaps[solver, ITERATIONS[0]], solver
    assert gaps["active-set", ITERATIONS[-1]] < 1e-9


def test_ibp_gets_closer_to_the_polytope_with_iterations(swept) -> None:
    _, table = swept
    rows = table[(table.metric == "constraint_error") & (table.temperature == 0.1)]
    error = rows.set_index("iterations").value
    assert error[ITERATIONS[-1]] < error[ITERATIONS[0]]
