"""render_report end to end on a small results folder with known values."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from crfbench.report import render_report

from .fixtures import markdown_cell, timing_rows, write_paper, write_results

NOTES = {"all": ["Every dataset is subsampled."], "1a": ["UD 2.15 replaced by a substitute split."]}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("report")
    results = write_results(root / "results")
    paper = write_paper(root / "paper.csv")
    out = root / "out"
    return out, render_report(results, paper, out, NOTES)


def _tidy(out: Path, stem: str) -> pd.DataFrame:
    return pd.read_csv(out / "tables" / f"{stem}.csv", dtype={"encoder": str})


def _cell(frame: pd.DataFrame, row: str, dataset: str, encoder: str) -> pd.Series:
    chosen = frame[(frame["row"] == row) & (frame["dataset"] == dataset) & (frame["encoder"] == encoder)]
    assert len(chosen) == 1, chosen
    return chosen.iloc[0]


def test_mean_std_and_paper_value_land_in_their_cell(rendered):
    out, _ = rendered
    cell = _cell(_tidy(out, "table1a"), "CRF → MF 5", "ud-pos-en", "L0")
    assert cell["ours_mean"] == pytest.approx(91.0)
    assert cell["ours_std"] == pytest.approx(math.sqrt(2), abs=1e-6)  # sample std of 90 and 92
    assert cell["n_seeds"] == 2
    assert (cell["paper_value"], cell["paper_status"]) == (90.6, "ok")
    assert cell["difference"] == pytest.approx(0.4)
    assert (cell["train"], cell["decoder"], cell["iterations"]) == ("crf", "meanfield-5", 5)
    text = markdown_cell(out / "tables" / "table1a.md", "CRF → MF 5", "en L0")
    assert text == "91.0 ± 1.4 (paper 90.6, Δ +0.4)"
    assert markdown_cell(out / "tables" / "table1a.md", "CRF → MF 10", "en L0") == "92.0 ± 0.7"


def test_one_seed_shows_no_std(rendered):
    out, _ = rendered
    cell = _cell(_tidy(out, "table1c"), "CRF → Viterbi", "ud-seg-zh", "L0")
    assert (cell["ours_mean"], cell["n_seeds"]) == (85.0, 1)
    assert math.isnan(cell["ours_std"])
    assert (
        markdown_cell(out / "tables" / "table1c.md", "CRF → Viterbi", "zh L0") == "85.0 (paper 84.2, Δ +0.8)"
    )


def test_lost_paper_cells_stay_lost(rendered):
    out, _ = rendered
    cell = _cell(_tidy(out, "table1c"), "CRF → MF 5", "ud-seg-zh", "L0")
    assert cell["paper_status"] == "lost"
    assert math.isnan(cell["paper_value"]) and math.isnan(cell["difference"])
    assert markdown_cell(out / "tables" / "table1c.md", "CRF → MF 5", "zh L0") == "70.0 (paper lost)"
    assert "lost: the paper's cell did not survive" in (out / "tables" / "table1c.md").read_text()


def test_uncertain_and_rejoined_paper_cells_carry_marks(rendered):
    out, _ = rendered
    table = out / "tables" / "table1a.md"
    assert markdown_cell(table, "CRF → BCRF 5", "en L0") == "93.0 ± 2.8 (paper 91.3†, Δ +1.7)"
    assert markdown_cell(table, "CRF → Viterbi", "en L2") == "95.0 ± 1.4 (paper 91.9‡, Δ +3.1)"
    text = table.read_text()
    assert "† the paper's value is uncertain" in text and "‡ the paper's value was rejoined" in text


def test_missing_results_show_a_dash_and_are_listed(rendered):
    out, _ = rendered
    table = out / "tables" / "table1a.md"
    assert markdown_cell(table, "CRF → Viterbi", "nl L0") == "— (paper 94.3)"
    assert markdown_cell(table, "MF → Viterbi", "en L0") == "—"
    cell = _cell(_tidy(out, "table1a"), "MF → Viterbi", "ud-pos-en", "L0")
    assert pd.isna(cell["ours_mean"]) and pd.isna(cell["n_seeds"]) and pd.isna(cell["paper_value"])
    readme = (out / "README.md").read_text()
    assert "Table 1a: no results for nl L0." in readme
    assert "Table 1a, en L0: no results for Unstructured, CRF → BCRF 10, MF → Viterbi," in readme


def test_ours_only_row_is_marked(rendered):
    out, _ = rendered
    table = out / "tables" / "table1a.md"
    assert markdown_cell(table, "Unstructured → argmax + repair *", "en L0") == "82.0 ± 2.8"
    assert "Rows marked * are not in the paper: ours only." in table.read_text()


def test_paper_encoders_sit_beside_ours(rendered):
    out, _ = rendered
    table = out / "tables" / "table1b.md"
    assert markdown_cell(table, "CRF → Viterbi", "CoNLL-03 minilm") == "89.0 ± 1.4"
    assert markdown_cell(table, "CRF → Viterbi", "CoNLL-03 bert-base") == "— (paper 91.9)"


def test_training_speedup_is_a_ratio_of_medians(rendered):
    out, _ = rendered
    frame = _tidy(out, "table2")
    cell = _cell(frame, "BCRF (10 it.)", "ud-pos-en", "L0")
    # seed 0: median 2.0 / median 1.0; seed 1: 3.0 / 1.0 (the ratio of means would be 4.0 / 2.83).
    assert cell["ours_mean"] == pytest.approx(2.5)
    assert cell["ours_std"] == pytest.approx(math.sqrt(0.5), abs=1e-6)
    # single rounds (crf / bcrf): seed 0 2.0, 2.0, 9/7; seed 1 3.0 three times
    assert (cell["interval_low"], cell["interval_high"], cell["n_rounds"]) == (pytest.approx(9 / 7), 3.0, 6)
    text = markdown_cell(out / "tables" / "table2.md", "BCRF (10 it.)", "en L0")
    assert text == "2.50 ± 0.71 [1.29–3.00, n=6]"
    assert pd.isna(_cell(frame, "MF (10 it.)", "ud-pos-en", "L0")["ours_mean"])  # timed at 5 iterations
    assert _cell(frame, "BCRF (10 it.)", "conll03-ner", "bert-base")["paper_value"] == 1.9
    assert not (frame["paper_status"] == "text-only").any()
    assert "up to ×7.3 for POS (max over languages), L0" in (out / "tables" / "table2.md").read_text()


def test_decoding_speedup_is_a_ratio_of_medians(rendered):
    out, _ = rendered
    cell = _cell(_tidy(out, "table3"), "MF 5", "ud-pos-en", "L0")
    assert (cell["ours_mean"], cell["n_seeds"], cell["paper_value"]) == (2.0, 1, 9.0)
    # the median ratio hides a slow round (100 s): the interval shows it
    assert (cell["interval_low"], cell["interval_high"], cell["n_rounds"]) == (0.02, 2.0, 3)
    text = markdown_cell(out / "tables" / "table3.md", "MF 5", "en L0")
    assert text == "2.00 [0.02–2.00, n=3] (paper 9.0, Δ −7.00)"
    assert (
        "MF 5 & 2.00 [0.02--2.00, n=3] {\\scriptsize(9.0; $-7.00$)}"
        in (out / "tables" / "table3.tex").read_text()
    )
    assert markdown_cell(out / "tables" / "table3.md", "BCRF 5", "en L0") == "—"
    # the other baselines have rows of their own, without the paper's value (its baseline is sequential)
    scan = _cell(_tidy(out, "table3"), "MF 5 vs Viterbi (parallel scan)", "ud-pos-en", "L0")
    assert scan["baseline"] == "viterbi-scan" and pd.isna(scan["paper_value"]) and pd.isna(scan["ours_mean"])
    assert cell["baseline"] == "viterbi"
    assert (
        "in brackets the lowest–highest ratio of single rounds" in (out / "tables" / "table3.md").read_text()
    )


def test_violations_table_lists_only_the_pairs_run(rendered):
    out, _ = rendered
    frame = _tidy(out, "violations")
    assert set(frame["row"]) == {"CRF → MF 5"}
    assert _cell(frame, "CRF → MF 5", "conll03-ner", "minilm")["ours_mean"] == pytest.approx(3.0)
    assert frame["paper_value"].isna().all()


def _strip_escaped(text: str) -> str:
    return re.sub(r"\\[{}&%$#_]", "", text)


def test_latex_is_well_formed(rendered):
    _out, written = rendered
    for path in [path for path in written if path.suffix == ".tex"]:
        text = _strip_escaped(path.read_text())
        assert text.count("{") == text.count("}"), path
        assert text.count("\\begin{tabular}") == text.count("\\end{tabular}") == 1, path
        assert text.count("\\begin{table}") == text.count("\\end{table}") == 1, path
        assert text.index("\\toprule") < text.index("\\midrule") < text.index("\\bottomrule"), path
        columns = re.search(r"\\begin\{tabular\}\{(l c*)\}", text.replace("lc", "l c")).group(1).count("c")
        body = text[text.index("\\toprule") : text.index("\\bottomrule")]
        rows = [line for line in body.splitlines() if line.endswith("\\\\")]
        assert rows and all(row.count("&") == columns for row in rows), path


def test_html_shows_every_table_and_figure(rendered):
    out, written = rendered
    page = (out / "index.html").read_text()
    for path in written:
        relative = path.relative_to(out).as_posix()
        if path.suffix == ".png":
            assert f'<img src="{relative}"' in page
        elif path.parent.name == "tables":
            assert f'href="{relative}"' in page
    for table in ("1a", "1b", "1c", "2", "3", "V"):
        assert f'<section id="table-{table}">' in page
    assert "table-1d" not in page and "Table 1d (NER F1 (%), partial labels): no results of ours." in page
    assert "http" not in page and "<script" not in page
    assert "UD 2.15 replaced by a substitute split." in page and "Every dataset is subsampled." in page
    assert "Test CPU" in page and "abc1234" in page and "standard" in page
    assert "Difference from the paper's protocol: UD 2.15" in (out / "tables" / "table1a.md").read_text()


def test_the_pages_link_the_agreement_report(tmp_path):
    results = write_results(tmp_path / "results")
    (results / "agreement").mkdir()
    (results / "agreement" / "agreement.csv").write_text("method,ok\ncrf,True\nbcrf,True\nmeanfield,False\n")
    out = tmp_path / "out"
    render_report(results, write_paper(tmp_path / "paper.csv"), out)
    page, readme = (out / "index.html").read_text(), (out / "README.md").read_text()
    assert '<a href="#agreement">' in page and '<a href="agreement.md">md</a>' in page
    assert "[md](agreement.md)" in readme
    summary = "3 comparisons (methods: crf, bcrf, meanfield), 1 outside tolerance."
    assert summary in page and summary in readme


def test_without_the_agreement_step_the_pages_say_so(rendered):
    out, _ = rendered
    page, readme = (out / "index.html").read_text(), (out / "README.md").read_text()
    assert 'href="agreement.md"' not in page and "(agreement.md)" not in readme
    assert readme.count("The agreement step has not run") == 2  # its section and what is missing


def test_every_figure_has_a_caption_saying_what_it_shows(rendered):
    out, _ = rendered
    page = (out / "index.html").read_text()
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page)
    assert len(captions) == 5 and all("n = " in caption for caption in captions)
    assert all("bar = " in caption for caption in captions)


def test_figures_are_drawn(rendered):
    _out, written = rendered
    names = {path.name for path in written if path.suffix == ".png"}
    assert names == {
        "iterations-ud-pos-en.png",
        "iterations-ud-seg-zh.png",
        "iterations-conll03-ner.png",
        "speedup-train.png",
        "speedup-decode.png",
    }
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in written if path.suffix == ".png")


def test_files_are_written_atomically(rendered):
    out, written = rendered
    assert all(path.is_file() for path in written)
    everything = {path for path in out.rglob("*") if path.is_file()}
    assert everything == set(written)  # no temporary file left behind
    assert not [path for path in everything if path.name.startswith(".")]


def test_missing_inputs_render_the_paper_alone(tmp_path):
    paper = write_paper(tmp_path / "paper.csv")
    (tmp_path / "results").mkdir()
    written = render_report(tmp_path / "results", paper, tmp_path / "out")
    names = {path.name for path in written}
    assert {"table1a.csv", "table1b.csv", "table1c.csv", "table2.csv", "table3.csv", "index.html"} <= names
    assert not {"table1s.csv", "violations.csv"} & names and not [p for p in written if p.suffix == ".png"]
    frame = _tidy(tmp_path / "out", "table1a")
    assert frame["ours_mean"].isna().all() and set(frame["paper_value"].dropna()) == {90.6, 91.3, 91.9, 94.3}
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "metrics.csv is absent" in readme and "Table 1a (POS tagging accuracy (%)): no results" in readme


def test_timings_from_two_devices_get_their_own_columns(tmp_path):
    results = write_results(tmp_path / "results", timing=False)
    rows = timing_rows("CPU A") + timing_rows("GPU B")
    pd.DataFrame(rows).to_csv(results / "timing.csv", index=False)
    render_report(results, write_paper(tmp_path / "paper.csv"), tmp_path / "out")
    frame = _tidy(tmp_path / "out", "table3")
    for device in ("CPU A", "GPU B"):
        cell = _cell(frame, "MF 5", "ud-pos-en", f"L0 [{device}]")
        assert (cell["ours_mean"], cell["paper_value"]) == (2.0, 9.0)


def test_a_scaling_table_without_its_columns_is_rejected(tmp_path):
    results = write_results(tmp_path / "results", metrics=False)
    (results / "scaling.csv").write_text("n,seconds\n1,1.0\n")
    with pytest.raises(ValueError, match=r"scaling.csv: missing columns machine"):
        render_report(results, write_paper(tmp_path / "paper.csv"), tmp_path / "out")


def test_unknown_note_keys_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown table id"):
        render_report(tmp_path, write_paper(tmp_path / "paper.csv"), tmp_path / "out", {"1e": ["x"]})
