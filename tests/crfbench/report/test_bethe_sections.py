"""The report's Bethe section from a small CGM table: Table 5 beside the paper's values (read from
bethe_tables.csv beside the BCRF paper's CSV), and the speed claim bethe-3 per problem size:
reproduced at a ×10 speed-up with equal objectives, not reproduced below ×10 or when the
objectives differ, inconclusive when an interior-point solve is inaccurate."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from crfbench.bethe.cgm import COLUMNS
from crfbench.report.ledger import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED

from .fixtures import render_with_claims, write_results

CLAIMS = """id,paper,claim,comparison,paper_evidence,paper_difference,kind
bethe-3,bethe,Bethe-RDA is an order of magnitude faster than interior point,x,y,x15,speed
"""
PAPER = """table,dataset,model,metric,value,note,status
5,cgm-synthetic-s625,bethe-rda,seconds,0.19,mean of 10 trials,ok
5,cgm-synthetic-s625,interior-point,seconds,2.8,Sheldon et al. 2013 solver,ok
"""


def _rows(size: str, rda: list[float], conic: list[float], gap: float = 0.0, accurate: bool = True) -> list:
    """Two trials of one size: Bethe-RDA's and the interior point's seconds; the interior point's
    objective ``gap`` above Bethe-RDA's; whether its solves were accurate."""
    rows = []
    for trial, (fast, slow) in enumerate(zip(rda, conic, strict=True)):
        rows.append((f"cgm-synthetic-{size}", 25, 625, trial, "bethe-rda", fast, 30, True, -10.0, 0.0, 1e-6))
        rows.append(
            (
                f"cgm-synthetic-{size}",
                25,
                625,
                trial,
                "interior-point",
                slow,
                50,
                accurate,
                -10.0 + gap,
                gap,
                1e-6,
            )
        )
    return rows


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    results = write_results(tmp_path / "results")
    (results / "bethe").mkdir()
    rows = (
        _rows("s625", [0.1, 0.3], [3.0, 5.0])  # x20: reproduced
        + _rows("s10k", [1.0, 1.0], [5.0, 5.0])  # x5: not reproduced
        + _rows("s50k", [1.0, 1.0], [50.0, 50.0], gap=1e-3)  # objectives differ: not reproduced
        + _rows("s99", [1.0, 1.0], [50.0, 50.0], accurate=False)  # inconclusive
    )
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(results / "bethe" / "cgm.csv", index=False)
    return render_with_claims(tmp_path, results, CLAIMS, {"bethe_tables.csv": PAPER})


def test_table5_shows_ours_beside_the_papers(rendered: Path) -> None:
    table = pd.read_csv(rendered / "tables" / "bethe-table5-cgm.csv", dtype=str, keep_default_na=False)
    first = table.iloc[0]
    assert first["Bethe-RDA s"] == "0.2 ± 0.14" and first["interior point s"] == "4 ± 1.4"
    assert first["speed-up"] == "x20" and first["converged (RDA / IP)"] == "2 / 2"
    assert first["paper Bethe-RDA s"] == "0.19" and first["paper speed-up"] == "x15"
    assert table.iloc[1]["paper Bethe-RDA s"] == ""  # the fixture paper has no such row
    page = (rendered / "README.md").read_text()
    assert "## Bethe projections" in page and "Table 5: collective graphical models" in page


def test_the_speed_claim_is_judged_per_size(rendered: Path) -> None:
    cells = pd.read_csv(rendered / "claims-cells.csv")
    verdicts = dict(zip(cells["dataset"], cells["verdict"], strict=True))
    assert verdicts == {
        "cgm-synthetic-s625": REPRODUCED,
        "cgm-synthetic-s10k": NOT_REPRODUCED,
        "cgm-synthetic-s50k": NOT_REPRODUCED,
        "cgm-synthetic-s99": INCONCLUSIVE,
    }
    summary = pd.read_csv(rendered / "claims.csv").set_index("claim")
    assert summary.loc["bethe-3", "our_range"] == "x5 to x50" and summary.loc["bethe-3", "verdict"] == "mixed"
