"""The report's claim ledger, convergence section and decoding sweep, rendered from small results."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from crfbench.io import write_csv
from crfbench.report.render import UNCONVERGED_MARK
from crfbench.schema import CURVE_COLUMNS, SENTENCE_COLUMNS

from .fixtures import markdown_cell, render_with_claims, write_results

CLAIMS = """id,paper,claim,comparison,paper_evidence,paper_difference,kind
bcrf-2,bcrf,BCRF decoding matches Viterbi after CRF training,x,y,-0.6 to 0.0,accuracy
newton-1,newton,A Hessian-vector product costs the same order as a gradient,x,y,none,speed
"""


def _curve(loss: str, seed: int, scores: list[float], cap: int, stopped_by: str, rising: bool) -> list[dict]:
    best = 1 + scores.index(max(scores))
    run = {"dataset": "ud-pos-en", "encoder_name": "L0", "loss": loss, "seed": seed}
    return [
        run
        | {"epoch": epoch, "train_loss": 1.0 / epoch, "dev_metric": "accuracy", "dev_value": value}
        | {"selection_decoder": "viterbi", "learning_rate": 1e-3, "seconds": 1.0, "best_epoch": best}
        | {"epoch_cap": cap, "stopped_by": stopped_by, "still_improving": rising}
        for epoch, value in enumerate(scores, start=1)
    ]


def _sentences() -> pd.DataFrame:
    """Two seeds of a CRF model on 40 POS test sentences; BCRF decoding agrees with Viterbi."""
    rows = []
    for seed in (0, 1):
        for decoder in ("viterbi", "bcrf-10"):
            for sentence in range(40):
                counts = {"tokens": 10, "correct": 9 if sentence % 3 else 8, "gold_spans": 0}
                counts |= {"predicted_spans": 0, "matched_spans": 0, "invalid": 0}
                key = {"dataset": "ud-pos-en", "encoder_name": "L0", "loss": "crf", "seed": seed}
                rows.append(key | {"split": "test", "decoder": decoder, "sentence": sentence} | counts)
    return pd.DataFrame(rows, columns=list(SENTENCE_COLUMNS))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    results = write_results(root / "results")
    curves = _curve("crf", 0, [0.80, 0.85, 0.90], 3, "epoch cap", True)
    curves += _curve("crf", 1, [0.82, 0.86, 0.86, 0.85], 6, "patience", False)
    pd.DataFrame(curves, columns=list(CURVE_COLUMNS)).to_csv(results / "curves.csv", index=False)
    write_csv(results / "sentences.csv.gz", _sentences())
    return render_with_claims(root, results, CLAIMS)


def test_the_claim_ledger_is_the_first_section_of_both_pages(rendered: Path) -> None:
    readme = (rendered / "README.md").read_text()
    assert re.findall(r"^## (.+)$", readme, re.M)[0] == "Claim ledger"
    page = (rendered / "index.html").read_text()
    assert page.index('id="claims"') < page.index("<h2>Contents</h2>") < page.index('id="table-1a"')
    summary = pd.read_csv(rendered / "claims.csv")
    assert summary.set_index("claim").loc["bcrf-2", "verdict"] == "reproduced"  # identical decoders
    assert summary.set_index("claim").loc["newton-1", "reason"] == (
        "the Newton cost sweep (crfbench newton cost) did not run in this profile"
    )
    cells = pd.read_csv(rendered / "claims-cells.csv")
    shown = cells[["claim", "n_seeds", "n_sentences", "difference"]].values.tolist()
    assert shown == [["bcrf-2", 2, 40, 0.0]]


def test_a_run_at_its_cap_while_improving_is_flagged_in_its_table(rendered: Path) -> None:
    cell = markdown_cell(rendered / "tables" / "table1a.md", "CRF → Viterbi", "en L0")
    assert cell.endswith(UNCONVERGED_MARK)
    lines = (rendered / "tables" / "table1a.md").read_text().splitlines()
    notes = [line for line in lines if "|" not in line]
    assert any(line.lstrip("- _").startswith(f"{UNCONVERGED_MARK}: a run behind") for line in notes), notes
    convergence = pd.read_csv(rendered / "tables" / "convergence.csv")
    row = convergence.iloc[0]
    assert (row["seeds"], row["epochs run"], row["stopped by patience"]) == (2, "3–4", "1/2")
    assert row["flagged: at its epoch cap and still improving"] == 1
    assert (rendered / "figures" / "dev-curves.png").stat().st_size > 0
