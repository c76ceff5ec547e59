"""The report's SparseMAP sections from small results: the support-size figure and the sparsity
claim (sparsemap-2) from the dev curves, the solver figure, table and claim (sparsemap-3) from
the sweep, and the claim that no task here can test (sparsemap-4)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from crfbench.schema import CURVE_COLUMNS, SWEEP_COLUMNS

from .fixtures import render_with_claims, write_results

CLAIMS = """id,paper,claim,comparison,paper_evidence,paper_difference,kind
sparsemap-2,sparsemap,SparseMAP predictions get sparser during training,x,y,qualitative,sparsity
sparsemap-3,sparsemap,The active set beats Frank-Wolfe,x,y,qualitative,solver
sparsemap-4,sparsemap,SparseMAP attention matches softmax attention,x,y,+0.10,accuracy
"""


def _curve(loss: str, seed: int, supports: list[float]) -> list[dict]:
    run = {"dataset": "ud-pos-nl", "encoder_name": "L0", "loss": loss, "seed": seed}
    return [
        run
        | {"epoch": epoch, "train_loss": 1.0, "dev_metric": "accuracy", "dev_value": 0.8 + epoch / 100}
        | {"selection_decoder": "sparsemap", "learning_rate": 1e-3, "seconds": 2.0}
        | {"best_epoch": len(supports), "epoch_cap": 5, "stopped_by": "patience", "still_improving": False}
        | {"dev_support": support}
        for epoch, support in enumerate(supports, start=1)
    ]


#: Mean Wolfe gap and support size per (solver, iterations): the active set converged by 10
#: iterations with the smallest support; pairwise FW behind at 10 and 20, level at 50 but with
#: more sequences; vanilla FW ahead on the gap at 10 only (so: inconclusive).
SOLVES = {
    ("active-set", 10): (1e-12, 3.0),
    ("active-set", 20): (1e-12, 3.0),
    ("active-set", 50): (1e-12, 3.0),
    ("pairwise-fw", 10): (0.02, 4.0),
    ("pairwise-fw", 20): (0.001, 4.0),
    ("pairwise-fw", 50): (1e-12, 4.0),
    ("fw", 10): (0.0, 2.0),
    ("fw", 20): (0.05, 6.0),
    ("fw", 50): (0.01, 8.0),
}


def _sweep() -> pd.DataFrame:
    rows = []
    for (solver, iterations), (gap, support) in SOLVES.items():
        timed = ("seconds", 1e-4 * iterations)
        for metric, value in (("wolfe_gap", gap), ("support_size", support), ("accuracy", 0.9), timed):
            rows.append(
                {"dataset": "ud-pos-nl", "encoder_name": "L0", "loss": "crf", "seed": 0, "sentences": 200}
                | {"method": "sparsemap", "iterations": iterations, "solver": solver}
                | {"metric": metric, "value": value}
            )
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    results = write_results(root / "results")
    curves = _curve("sparsemap", 0, [20.0, 12.0, 9.0]) + _curve("sparsemap", 1, [18.0, 15.0, 10.0])
    curves += _curve("m-sparsemap", 0, [8.0, 9.0]) + _curve("m-sparsemap", 1, [8.0, 7.5])
    pd.DataFrame(curves, columns=list(CURVE_COLUMNS)).to_csv(results / "curves.csv", index=False)
    _sweep().to_csv(results / "sweep.csv", index=False)
    return render_with_claims(root, results, CLAIMS)


def test_the_sparsity_claim_compares_the_selected_epoch_with_the_first(rendered: Path) -> None:
    cells = pd.read_csv(rendered / "claims-cells.csv")
    sparsity = cells[cells["claim"] == "sparsemap-2"].set_index("a")
    assert sparsity.loc["sparsemap (selected epoch)", "verdict"] == "reproduced"  # fell in both seeds
    assert sparsity.loc["sparsemap (selected epoch)", "difference"] == pytest.approx(-9.5)
    assert sparsity.loc["m-sparsemap (selected epoch)", "verdict"] == "inconclusive"  # one seed only
    summary = pd.read_csv(rendered / "claims.csv").set_index("claim")
    assert summary.loc["sparsemap-2", "verdict"] == "inconclusive"
    assert summary.loc["sparsemap-2", "n_cells"] == 2


def test_the_solver_claim_checks_gap_and_support_at_every_budget(rendered: Path) -> None:
    cells = pd.read_csv(rendered / "claims-cells.csv")
    solvers = cells[cells["claim"] == "sparsemap-3"].set_index("b")
    assert solvers.loc["sparsemap/pairwise-fw", "verdict"] == "reproduced"  # a tie at 50 counts
    assert solvers.loc["sparsemap/fw", "verdict"] == "inconclusive"  # fw has the smaller gap at 10
    assert solvers.loc["sparsemap/fw", "metric"] == "Wolfe gap at 50 it."
    assert solvers.loc["sparsemap/fw", "difference"] == pytest.approx(-0.01, abs=1e-3)
    summary = pd.read_csv(rendered / "claims.csv").set_index("claim")
    assert summary.loc["sparsemap-3", "verdict"] == "inconclusive"
    assert summary.loc["sparsemap-4", "verdict"] == "not testable here"
    assert summary.loc["sparsemap-4", "reason"].startswith("no NLI task")


def test_support_and_solver_figures_and_the_solver_table_are_written(rendered: Path) -> None:
    for name in ("sparsemap-support.png", "sparsemap-solvers.png"):
        assert (rendered / "figures" / name).stat().st_size > 0
    table = pd.read_csv(rendered / "tables" / "sparsemap-solvers.csv")
    assert len(table) == len(SOLVES)
    row = table[(table["solver"] == "fw") & (table["iterations"] == 50)].iloc[0]
    assert (row["mean support size"], row["accuracy"], row["solve ms per sentence"]) == (8.0, 90.0, 5.0)
    assert not (rendered / "tables" / "sweep.csv").read_text().strip()  # no BCRF or MF rows to show
    readme = (rendered / "README.md").read_text()
    assert "sparsemap-support.png" in readme and "tables/sparsemap-solvers.md" in readme
