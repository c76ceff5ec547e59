"""The SparseMAP solver study on random trees (``crfbench sparsemap trees``): every solver traced
on tiny trees, the optimum against the enumerated projection, the CSV the command writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crfbench.cli import main
from crfbench.schema import TREE_SOLVER_COLUMNS
from crfbench.tree_solvers import Settings, random_scores, run
from implementations import arborescence
from implementations.reference import tree_sparsemap as reference
from implementations.registry import SPARSEMAP_SOLVERS

TINY = Settings(words=4, instances=2, iterations=40, reference_iterations=200)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return run(TINY)


def test_every_solver_is_traced_from_the_map_tree_with_finite_shrinking_gaps(table: pd.DataFrame) -> None:
    assert list(table.columns) == list(TREE_SOLVER_COLUMNS)
    assert set(table["solver"]) == set(SPARSEMAP_SOLVERS) and set(table["instance"]) == {0, 1}
    for (_, solver), rows in table.groupby(["instance", "solver"]):
        assert rows["iteration"].tolist() == list(range(len(rows))), solver
        assert len(rows) <= TINY.iterations + 1
        assert rows.iloc[0]["support"] == 1  # the MAP tree alone
        assert np.isfinite(rows[["objective", "gap", "wolfe_gap", "seconds"]].to_numpy()).all()
        assert (rows["gap"] >= 0).all() and (rows["wolfe_gap"] >= 0).all()
        # exact line searches never lower the objective: the gap shrinks, to rounding
        assert (np.diff(rows["gap"].to_numpy()) <= 1e-12).all(), solver
        assert (np.diff(rows["seconds"].to_numpy()) >= 0).all()
        assert rows["gap"].iloc[-1] < rows["gap"].iloc[0] or rows["gap"].iloc[0] == 0
        # a solver stops early only once converged, and its gap is then rounding
        if len(rows) <= TINY.iterations:
            assert rows["converged"].iloc[-1] and rows["gap"].iloc[-1] < 1e-9, solver


def test_the_active_set_reaches_the_enumerated_projection(table: pd.DataFrame) -> None:
    """Its last objective and every instance's optimum are the projection's value by enumeration
    of the trees (``reference.tree_sparsemap``: SLSQP on the dual, no Chu-Liu-Edmonds)."""
    active = table[table["solver"] == "active-set"]
    for instance, scores in enumerate(random_scores(TINY)):
        want = reference.sparsemap(arborescence.arcs(scores, TINY.words)).value
        rows = active[active["instance"] == instance]
        assert rows["converged"].iloc[-1]
        assert rows["objective"].iloc[-1] == pytest.approx(want, abs=1e-9)
        assert (table.loc[table["instance"] == instance, "optimum"] == rows["optimum"].iloc[0]).all()
        assert rows["optimum"].iloc[0] == pytest.approx(want, abs=1e-9)


def test_an_instance_is_the_same_whatever_the_number_drawn() -> None:
    few, more = random_scores(Settings(instances=1)), random_scores(Settings(instances=3))
    np.testing.assert_array_equal(few[0], more[0])
    assert not np.array_equal(more[0], more[1])
    assert few[0].shape == (21, 21)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"iterations": 50, "reference_iterations": 10}, "reference_iterations"),
        ({"words": 0}, "words"),
        ({"solvers": ("newton",)}, "solvers"),
    ],
)
def test_bad_settings_are_refused_naming_them(given: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Settings(**given)


def test_the_command_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sparsemap" / "tree-solvers.csv"
    arguments = ["sparsemap", "trees", "--words", "3", "--instances", "1", "--iterations", "5"]
    assert main([*arguments, "--seed", "2", "--out", str(out)]) == 0
    written = pd.read_csv(out)
    assert list(written.columns) == list(TREE_SOLVER_COLUMNS)
    assert set(written["words"]) == {3} and written["iteration"].max() <= 5
    assert str(out) in capsys.readouterr().out
    refused = main([*arguments, "--reference-iterations", "2", "--out", str(tmp_path / "no.csv")])
    error = capsys.readouterr().err
    assert refused == 2 and "reference_iterations" in error and error.count("\n") == 1
    assert not (tmp_path / "no.csv").exists()
