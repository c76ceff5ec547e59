"""What the figures draw: the paper's speed-ups on a log axis, error bars only where n > 1, captions
that say what is shown, "not measured" heatmap cells unlike a measured 1×, nothing clipped."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import LogNorm
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from crfbench.report import figures, render_report
from crfbench.report.figures import Drawn, counted, save_png
from crfbench.report.scaling import NOT_MEASURED, heatmap

from .fixtures import timing_rows, write_paper, write_results

#: A paper cell of Table 3 lost in the extraction, beside a value of ours.
LOST = "3b,UD_English-EWT,L0,,bcrf,5,decode_speedup,,lost\n"


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[Figure, str]]:
    """Every figure the report saves, by file name, with its caption (artists stay inspectable)."""
    seen: dict[str, tuple[Figure, str]] = {}

    def recording(figure: Figure, path: Path, caption: str, dpi: int = 110) -> Drawn:
        seen[path.name] = (figure, caption)
        return save_png(figure, path, caption, dpi)

    monkeypatch.setattr(figures, "save_png", recording)
    return seen


def _render(root: Path, timing: list[dict[str, object]] | None = None, paper_extra: str = "") -> Path:
    results = write_results(root / "results")
    if timing is not None:
        pd.DataFrame(timing).to_csv(results / "timing.csv", index=False)
    paper = write_paper(root / "paper.csv")
    paper.write_text(paper.read_text() + paper_extra)
    render_report(results, paper, root / "out")
    return root / "out"


def _points(axis, marker: str) -> list[tuple[float, float]]:
    return [
        (float(line.get_xdata()[0]), float(line.get_ydata()[0]))
        for line in axis.get_lines()
        if line.get_marker() == marker
    ]


def _bars(axis) -> list[np.ndarray]:
    """The vertical segments of every error bar drawn on ``axis`` (none where a bar is NaN)."""
    segments = [
        segment
        for container in axis.containers
        if isinstance(container, ErrorbarContainer)
        for collection in container.lines[2]
        for segment in collection.get_segments()
    ]
    return [segment for segment in segments if segment.size and np.isfinite(segment).all()]


def test_speedups_are_drawn_on_a_log_axis_with_the_papers_values(tmp_path, drawn):
    _render(tmp_path, paper_extra=LOST)
    train, caption = drawn["speedup-train.png"]
    axis = train.axes[0]
    assert axis.get_yscale() == "log"
    labels = [label.get_text() for label in axis.get_xticklabels()]
    # the paper's cell with no result of ours is drawn in its own column, the text-only claim too
    bert = labels.index("CoNLL-03 bert-base")
    assert [value for x, value in _points(axis, "D") if abs(x - bert) < 0.5] == [1.9]
    assert labels[-1] == "POS (max over languages) L0" and [y for _, y in _points(axis, "*")] == [7.3]
    assert "Open diamonds: the paper's values." in caption and "paper's text" in caption

    decode, caption = drawn["speedup-decode.png"]
    axis = decode.axes[0]
    assert [y for _, y in _points(axis, "D")] == [9.0]  # the lost BCRF 5 cell draws no value
    assert [text.get_text() for text in axis.texts] == ["lost"]
    assert "lost: the paper's cell did not survive the text extraction" in caption


def test_a_speedup_bar_spans_the_single_round_ratios(tmp_path, drawn):
    _render(tmp_path)
    figure, caption = drawn["speedup-decode.png"]
    (bar,) = _bars(figure.axes[0])
    assert sorted(bar[:, 1]) == pytest.approx([0.02, 2.0])  # Viterbi 2 s over MF 5's 1, 1 and 100 s
    assert "(n = 1 seed)" in caption and "(n = 3 rounds)" in caption
    assert "lowest to the highest ratio of single timing rounds" in caption


def test_one_round_draws_no_bar_and_says_n_1(tmp_path, drawn):
    out = _render(tmp_path, [row for row in timing_rows() if row["round"] == 0])
    figure, caption = drawn["speedup-decode.png"]
    assert _bars(figure.axes[0]) == [] and [y for _, y in _points(figure.axes[0], "o")] == [2.0]
    assert "(n = 1 round, so no bar)" in caption
    table = (out / "tables" / "table3.md").read_text()
    assert "| 2.00 [n=1] (paper 9.0, Δ −7.00) |" in table
    tidy = pd.read_csv(out / "tables" / "table3.csv", dtype={"encoder": str})
    cell = tidy[(tidy["row"] == "MF 5") & (tidy["encoder"] == "L0")].iloc[0]
    assert cell["n_rounds"] == 1 and pd.isna(cell["interval_low"]) and pd.isna(cell["interval_high"])


def test_score_bars_only_where_there_are_several_seeds(tmp_path, drawn):
    _render(tmp_path)
    en, caption = drawn["iterations-ud-pos-en.png"]
    assert _bars(en.axes[0]) and "(n = 2 seeds)" in caption and "± 1 sample standard deviation" in caption
    zh, caption = drawn["iterations-ud-seg-zh.png"]  # one seed
    assert _bars(zh.axes[0]) == [] and "(n = 1 seed, so no bar)" in caption


@pytest.mark.parametrize(
    ("counts", "bars", "text"),
    [
        ([3, 3], True, "n = 3 rounds"),
        ([1], True, "n = 1 round, so no bar"),
        ([1, 2, 2], True, "n = 1–2 rounds per point, no bar where n = 1"),
        ([1, 2], False, "n = 1–2 rounds per point"),
    ],
)
def test_counts_in_captions(counts, bars, text):
    assert counted(counts, "round", bars) == text


def _cell_pixels(figure: Figure, axis, x: int, y: int) -> np.ndarray:
    """The RGB pixels of a corner of grid cell (x, y), away from its centred text."""
    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].astype(float)
    left, top = axis.transData.transform((x - 0.45, y + 0.45))
    right, bottom = axis.transData.transform((x - 0.2, y + 0.2))
    height = image.shape[0]  # display y counts from the bottom, rows from the top
    return image[int(height - top) : int(height - bottom), int(left) : int(right)].reshape(-1, 3)


def test_a_point_not_measured_never_reads_as_a_measured_1x():
    figure, axis = plt.subplots(figsize=(4, 3), dpi=100)
    grid = pd.DataFrame([[1.0, np.nan], [10.0, 0.1]], index=[8, 32], columns=[16, 64])
    heatmap(axis, grid, LogNorm(vmin=0.1, vmax=10))
    texts = {tuple(np.round(text.get_position()).astype(int)): text.get_text() for text in axis.texts}
    assert texts == {(0, 0): "1", (1, 0): NOT_MEASURED, (0, 1): "10", (1, 1): "0.1"}
    measured, missing = _cell_pixels(figure, axis, 0, 0), _cell_pixels(figure, axis, 1, 0)
    assert measured.std(axis=0).max() < 1  # a flat colour …
    assert missing.std(axis=0).max() > 20  # … against hatching
    assert abs(measured.mean() - missing.mean()) > 20  # and a darker grey than the 1× colour
    plt.close(figure)


def test_a_title_wider_than_the_canvas_is_not_clipped(tmp_path):
    figure, axis = plt.subplots(figsize=(2, 2), dpi=50)
    axis.set_title("a title far wider than the two-inch canvas it is drawn on")
    drawn = save_png(figure, tmp_path / "wide.png", "caption", dpi=50)
    assert drawn == Drawn(tmp_path / "wide.png", "caption")
    assert plt.imread(drawn.path).shape[1] > 2 * 50 * 1.5  # cropped to the title, not to the canvas
