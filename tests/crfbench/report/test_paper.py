"""The paper CSV: name mapping, prose-only claims, and every table value of the real file in our tables."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from crfbench.report import render_report
from crfbench.report.paper import PAPER_DATASETS, PaperValue, group_of, load_paper, our_decoder

from .fixtures import write_paper

DATA = os.environ.get("CRFBENCH_DATA") or Path(__file__).resolve().parents[3].parent / "shared" / "data"
REAL_PAPER = Path(DATA) / "paper" / "bcrf_tables.csv"
STEMS = {"1a": "table1a", "1b": "table1b", "1c": "table1c", "1d": "table1d"}


def test_paper_cells_are_keyed_by_our_names(tmp_path):
    paper = load_paper(write_paper(tmp_path / "paper.csv"))
    assert paper.get("1a", "ud-pos-en", "L0", "crf", "meanfield-5") == PaperValue(90.6, "ok")
    assert paper.get("1c", "ud-seg-zh", "L0", "crf", "meanfield-5") == PaperValue(None, "lost")
    assert paper.get("2", "conll03-ner", "bert-base", "bcrf", "") == PaperValue(1.9, "ok")
    assert paper.get("3", "ud-pos-en", "L0", "", "meanfield-5") == PaperValue(9.0, "ok")
    assert paper.encoders("1a", "ud-pos-en") == {"L0", "L2"}
    (claim,) = paper.text_only["2"]
    assert (claim.dataset, claim.encoder, claim.train, claim.decoder, claim.value) == (
        "POS (max over languages)",
        "L0",
        "bcrf",
        "",
        7.3,
    )
    assert "BCRF training speed-up over CRF of up to ×7.3" in claim.sentence
    assert not any(key[1].startswith("POS") for key in paper.cells)


def test_group_of_merges_sub_tables_2_and_3():
    assert [group_of(name) for name in ("1a", "1d", "2a", "2c", "3b")] == ["1a", "1d", "2", "2", "3"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1a,UD_Klingon,L0,crf,viterbi,,accuracy,90.0,ok", "unknown dataset"),
        ("1a,UD_English-EWT,L0,crf,meanfield,7,accuracy,90.0,ok", "unknown dataset"),
        ("1a,UD_English-EWT,L0,crf,viterbi,,accuracy,90.0,maybe", "status"),
        ("1a,UD_English-EWT,L0,crf,viterbi,,accuracy,,ok", "a value must be given"),
        ("1a,UD_English-EWT,L0,crf,meanfield,5,accuracy,1.0,ok", "duplicate"),
    ],
)
def test_malformed_paper_rows_are_rejected(tmp_path, line, message):
    path = write_paper(tmp_path / "paper.csv")
    path.write_text(path.read_text() + line + "\n")
    with pytest.raises(ValueError, match=message):
        load_paper(path)


@pytest.mark.skipif(not REAL_PAPER.exists(), reason="the shared paper CSV is not checked out")
def test_every_paper_value_of_table_1_is_shown(tmp_path):
    (tmp_path / "results").mkdir()
    render_report(tmp_path / "results", REAL_PAPER, tmp_path / "out")
    paper = pd.read_csv(REAL_PAPER, dtype=str, keep_default_na=False)
    cells = paper[paper["table"].isin(list(STEMS)) & ~paper["status"].isin(["lost", "text-only"])]
    assert len(cells) > 150
    for table, rows in cells.groupby("table"):
        shown = pd.read_csv(tmp_path / "out" / "tables" / f"{STEMS[table]}.csv", dtype={"encoder": str})
        index = shown.set_index(["dataset", "encoder", "train", "decoder"])
        for row in rows.itertuples(index=False):
            decoder = our_decoder(row.decoder, row.iterations)
            cell = index.loc[(PAPER_DATASETS[row.dataset], row.encoder, row.train, decoder)]
            assert (cell["paper_value"], cell["paper_status"]) == (float(row.value), row.status), row
    lost = paper[paper["status"] == "lost"]
    shown = pd.read_csv(tmp_path / "out" / "tables" / "table1c.csv")
    assert (shown["paper_status"] == "lost").sum() == len(lost)
    assert shown.loc[shown["paper_status"] == "lost", "paper_value"].isna().all()
