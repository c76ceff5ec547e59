"""The Newton study's report: suboptimality, time to each level, the solver and cost tables, the
figures, and the ledger's verdicts on the thesis's two claims."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crfbench.io import write_csv
from crfbench.report import newton
from crfbench.report.claims import HV_SAME_ORDER, INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from crfbench.report.ledger import claim_ledger
from crfbench.report.study_cells import hv_cost_cells, newton_solver_cells

from .test_ledger import NO_SENTENCES

OPTIMUM = 100.0


def _trace(solver: str, objectives: list[float], seconds: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "solver": solver,
            "iteration": range(len(objectives)),
            "seconds": seconds,
            "objective": objectives,
            "gradient_norm": 1.0,
            "function": 0,
            "gradient": range(1, len(objectives) + 1),
            "hvp": 0,
        }
    )


def _run(tron_seconds: list[float], lbfgs_objectives: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    trace = pd.concat(
        [
            _trace("tron", [200.0, 100.01, OPTIMUM * (1 + 1e-9)], tron_seconds),
            _trace("lbfgs", lbfgs_objectives, [1.0, 2.0, 3.0]),
        ],
        ignore_index=True,
    )
    solvers = pd.DataFrame(
        {
            "solver": ["tron", "lbfgs"],
            "objective": [OPTIMUM, lbfgs_objectives[-1]],
            "gradient_norm": [1e-6, 1e-3],
            "iterations": [2, 2],
            "seconds": [tron_seconds[-1], 3.0],
            "test_f1": [80.0, 80.0],
            "train_sentences": 50,
            "parameters": 1000,
        }
    )
    return trace, solvers


def test_suboptimality_is_relative_to_the_best_final_objective_and_never_negative():
    trace, solvers = _run([0.0, 1.0, 2.0], [200.0, 150.0, 99.0])  # lbfgs ends lowest
    gaps = newton.suboptimality(trace, solvers)
    assert gaps["gap"].min() == 0.0
    assert gaps.loc[gaps["solver"] == "tron", "gap"].iloc[-1] == pytest.approx(1.0 / 99.0)
    assert gaps["passes"].tolist()[:3] == [1, 2, 3]


def test_first_reach_gives_the_first_row_within_each_level_or_nan():
    trace, solvers = _run([0.0, 1.0, 2.5], [200.0, 150.0, 100.5])
    reach = newton.first_reach(trace, solvers, 1e-3).set_index("solver")
    assert reach.loc["tron", "seconds"] == 1.0 and reach.loc["tron", "passes"] == 2
    assert np.isnan(reach.loc["lbfgs", "seconds"])
    table = newton.solver_table(trace, solvers).set_index("solver")
    assert table.loc["lbfgs", "to 0.001: seconds / passes"] == "never"
    assert table.loc["tron", "to 1e-07: seconds / passes"] == "2.5 s / 3"
    assert table["at f* (≤ 1e-07)"].tolist() == ["yes", "no"]


@pytest.mark.parametrize(
    ("tron_seconds", "lbfgs_objectives", "expected"),
    [
        ([0.0, 1.0, 2.0], [200.0, 100.001, OPTIMUM], [REPRODUCED, REPRODUCED, REPRODUCED]),  # faster
        ([0.0, 5.0, 9.0], [200.0, 100.0000001, OPTIMUM], [NOT_REPRODUCED] * 3),  # slower
        ([0.0, 1.0, 2.0], [200.0, 150.0, 120.0], [REPRODUCED] * 3),  # lbfgs never gets there
    ],
)
def test_the_tron_claim_compares_seconds_to_each_level(tron_seconds, lbfgs_objectives, expected):
    trace, solvers = _run(tron_seconds, lbfgs_objectives)
    cells = newton_solver_cells(trace, solvers)
    assert cells["verdict"].tolist() == expected
    assert set(cells["a"]) == {"tron"} and set(cells["b"]) == {"lbfgs"}


def test_the_tron_claim_is_inconclusive_where_neither_solver_reaches_a_level():
    trace, solvers = _run([0.0, 1.0, 2.0], [200.0, 150.0, 120.0])
    solvers.loc[solvers["solver"] == "tron", "objective"] = 90.0  # a third party's optimum, say
    assert set(newton_solver_cells(trace, solvers)["verdict"]) == {INCONCLUSIVE}


def _cost(ratio: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "backend": "torch",
            "N": [8, 32],
            "T": 9,
            "F": 1000,
            "tokens": 4096,
            "gradient": [1.0, 2.0],
            "hvp_dp": [0.5, 1.0],
            "hvp_dp_with_sweep": [ratio, 2 * ratio],
            "hvp_autodiff": [3.0, 6.0],
        }
    )


@pytest.mark.parametrize(("ratio", "expected"), [(1.5, REPRODUCED), (HV_SAME_ORDER + 0.5, NOT_REPRODUCED)])
def test_the_hv_cost_claim_reads_the_dp_hv_with_its_sweep(ratio, expected):
    cells = hv_cost_cells(_cost(ratio))
    assert cells["difference"].tolist() == [ratio, ratio]
    assert set(cells["verdict"]) == {expected}


def test_the_ledger_gives_both_newton_claims_a_verdict():
    trace, solvers = _run([0.0, 1.0, 2.0], [200.0, 100.001, OPTIMUM])
    claims = pd.DataFrame(
        [
            {
                "id": claim,
                "paper": "newton",
                "claim": claim,
                "comparison": "",
                "paper_evidence": "",
                "paper_difference": "none",
                "kind": "speed",
            }
            for claim in ("newton-1", "newton-2")
        ]
    )
    summary, _ = claim_ledger(
        claims, NO_SENTENCES, pd.DataFrame(columns=["device"]), {}, newton=(trace, solvers, _cost(1.5))
    )
    rows = summary.set_index("claim")
    assert rows.loc["newton-1", "verdict"] == REPRODUCED and rows.loc["newton-1", "our_range"] == "x1.50"
    assert rows.loc["newton-2", "verdict"] == REPRODUCED


def test_sections_and_figures_appear_only_for_results_that_exist(tmp_path: Path):
    assert newton.newton_sections(tmp_path) == [] and newton.newton_figures(tmp_path, tmp_path / "f") == []
    trace, solvers = _run([0.0, 1.0, 2.0], [200.0, 100.001, OPTIMUM])
    write_csv(tmp_path / newton.TRACE_TABLE, trace)
    write_csv(tmp_path / newton.SOLVERS_TABLE, solvers)
    write_csv(tmp_path / newton.COST_TABLE, _cost(1.5))
    stems = [stem for stem, _, _ in newton.newton_sections(tmp_path)]
    assert stems == ["newton-solvers", "newton-hv-cost"]
    drawn = newton.newton_figures(tmp_path, tmp_path / "figures")
    assert [d.path.name for d in drawn] == ["newton-convergence.png", "newton-hv-cost.png"]
    assert all(d.path.stat().st_size > 0 for d in drawn)


def test_a_table_missing_a_column_is_an_error_naming_it(tmp_path: Path):
    write_csv(tmp_path / newton.COST_TABLE, _cost(1.5).drop(columns=["hvp_autodiff"]))
    with pytest.raises(ValueError, match=r"cost.csv: missing column.*hvp_autodiff"):
        newton.read_newton(tmp_path)
