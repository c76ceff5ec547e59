"""Figures as PNG (matplotlib, Agg backend): score against inference iterations and the speed-ups of
Tables 2 and 3 (the asv scaling figures are drawn by :mod:`.scaling`). Every figure is made by
``subplots`` and written by ``save_png`` with the caption that says what it shows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .. import uses
from ..io import save_atomic
from .layout import (
    BASELINE_KINDS,
    DATASET_LABELS,
    DECODER_ITERATIONS,
    PAPER_BASELINE_KIND,
    POS,
    TABLES,
    TRAIN_LABELS,
    RowSpec,
    natural_key,
)
from .paper import Paper
from .render import LEGEND, MARKS
from .tables import Table, rows_where

#: Iterative decoder families of figure (a), with their decoders in iteration order.
FAMILIES = {TRAIN_LABELS[name]: uses.decoders_of(name) for name in ("meanfield", "bcrf")}
#: The decoders figure (a) draws: Viterbi as a line, the families as points.
DRAWN = ("viterbi", *FAMILIES["MF"], *FAMILIES["BCRF"])
#: Tick labels of a speed-up axis or colour bar: "0.5×", "1×", "20×".
TIMES = FuncFormatter(lambda value, _: f"{value:g}×")


@dataclass(frozen=True)
class Drawn:
    """A figure written to ``path``, and its caption: what the marks are, what an error bar spans and
    how many seeds or rounds (n) stand behind a point."""

    path: Path
    caption: str


def subplots(rows: int, columns: int, size: tuple[float, float], **options) -> tuple[Figure, np.ndarray]:
    """A figure with a ``rows`` × ``columns`` grid of axes (always 2-D) under constrained layout, so
    that titles, tick labels, legends and colour bars fit the figure instead of being clipped."""
    return plt.subplots(rows, columns, figsize=size, squeeze=False, layout="constrained", **options)


def save_png(figure: Figure, path: Path, caption: str, dpi: int = 110) -> Drawn:
    """Write ``figure`` to ``path`` as a reproducible PNG (no software stamp), atomically, cropped to
    everything drawn (nothing outside the canvas is cut off), and close it."""
    save_atomic(
        path,
        lambda temporary: figure.savefig(
            temporary,
            format="png",
            dpi=dpi,
            bbox_inches="tight",
            pad_inches=0.1,
            metadata={"Software": None},
        ),
    )
    plt.close(figure)
    return Drawn(path, caption)


def counted(counts: Iterable[int], unit: str, bars: bool) -> str:
    """How many seeds or rounds (``unit``) stand behind the points of a figure, for its caption:
    "n = 3 rounds", "n = 1–2 seeds per point". With ``bars`` (the error bars are taken over them) it
    also says which points have none: a bar needs n > 1."""
    values = sorted(set(counts))
    low, high = values[0], values[-1]
    units = unit if high == 1 else f"{unit}s"
    text = f"n = {low} {units}" if low == high else f"n = {low}–{high} {units} per point"
    if bars and low == 1:
        text += ", so no bar" if high == 1 else ", no bar where n = 1"
    return text


def _paper_group(dataset: str) -> str | None:
    return next(
        (spec.paper_group for spec in TABLES if spec.kind == "score" and dataset in spec.datasets), None
    )


def _metric_label(dataset: str) -> str:
    return "accuracy" if dataset in POS else "score" if dataset == "synthetic" else "F1"


def _iteration_panel(axis, stats: pd.DataFrame, paper_values: dict[str, float], encoder: str) -> None:
    for index, (family, decoders) in enumerate(FAMILIES.items()):
        color = f"C{index}"
        present = [name for name in decoders if name in stats.index]
        if present:
            axis.errorbar(
                [DECODER_ITERATIONS[name] for name in present],
                stats.loc[present, "mean"],
                yerr=stats.loc[present, "std"].where(stats.loc[present, "n"] > 1),  # NaN: no bar
                marker="o",
                capsize=3,
                color=color,
                label=family,
            )
        quoted = [name for name in decoders if name in paper_values]
        if quoted:
            axis.plot(
                [DECODER_ITERATIONS[name] for name in quoted],
                [paper_values[name] for name in quoted],
                linestyle=":",
                marker="o",
                markerfacecolor="none",
                color=color,
                label=f"{family} (paper)",
            )
    if "viterbi" in stats.index:
        axis.axhline(stats.loc["viterbi", "mean"], color="black", linestyle="--", label="Viterbi")
    if "viterbi" in paper_values:
        axis.axhline(paper_values["viterbi"], color="grey", linestyle=":", label="Viterbi (paper)")
    axis.set_title(encoder)
    axis.set_xlabel("iterations")
    axis.set_xticks([5, 10])


def iteration_figures(scores: pd.DataFrame, paper: Paper, out_dir: Path) -> list[Drawn]:
    """(a) Per dataset, test score of CRF-trained models against MF and BCRF iterations, Viterbi as a
    horizontal line; one panel per encoder, the paper's values as open markers where it has them."""
    written = []
    for dataset in DATASET_LABELS:
        train = "crf-partial" if dataset == "conll03-ner-partial" else "crf"
        rows = scores[
            (scores["dataset"] == dataset) & (scores["train"] == train) & scores["decoder"].isin(DRAWN)
        ]
        if rows.empty:
            continue
        encoders = sorted(set(rows["encoder"]), key=natural_key)
        figure, axes = subplots(1, len(encoders), (3.6 * len(encoders) + 1.6, 3.6), sharey=True)
        group = _paper_group(dataset)
        for axis, encoder in zip(axes[0], encoders, strict=True):
            quoted = {
                name: value.value
                for name in DRAWN
                if group is not None
                and (value := paper.get(group, dataset, encoder, train, name)) is not None
                and value.value is not None
            }
            stats = rows[rows["encoder"] == encoder].set_index("decoder")
            _iteration_panel(axis, stats, quoted, encoder)
        metric = _metric_label(dataset)
        axes[0][0].set_ylabel(f"test {metric} (%)")
        handles: dict[str, Artist] = {}
        for axis in axes[0]:
            handles |= dict(zip(*reversed(axis.get_legend_handles_labels()), strict=True))
        figure.legend(handles.values(), handles.keys(), fontsize="small", loc="outside right center")
        title = f"{DATASET_LABELS[dataset]} ({dataset}), trained with {TRAIN_LABELS[train]}"
        figure.suptitle(title)
        caption = (
            f"{title}: test {metric} (%) against the MF / BCRF inference iterations, one panel per encoder. "
            f"Filled markers: ours, the mean over seeds ({counted(rows['n'], 'seed', bars=True)}); "
            "bar = ± 1 sample standard deviation over seeds. Open markers, dotted: the paper's values "
            "(means of 5 runs). Dashed black line: our Viterbi mean; dotted grey: the paper's Viterbi."
        )
        written.append(save_png(figure, out_dir / f"iterations-{dataset}.png", caption))
    return written


def _label_lost(axis, x: float) -> None:
    """Mark a paper cell lost in the text extraction: the word "lost" at the foot of its column, no value."""
    transform = axis.get_xaxis_transform()  # x in data, y in axes fraction
    axis.text(x, 0.02, "lost", transform=transform, rotation=90, ha="center", va="bottom", fontsize=7)


def _speedup_axis(axis, labels: list[str]) -> None:
    """A log speed-up axis ("0.5×", "1×", "2×" …, a grey line at 1×) over one slot per label."""
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_yscale("log")
    axis.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.yaxis.set_major_formatter(TIMES)
    axis.yaxis.set_minor_formatter(NullFormatter())
    axis.grid(True, axis="y", which="major", linewidth=0.3)
    axis.set_xticks(range(len(labels)), labels, rotation=35, ha="right", rotation_mode="anchor")
    axis.set_xticks(np.arange(len(labels) - 1) + 0.5, minor=True)  # faint lines between the slots
    axis.tick_params(axis="x", which="minor", length=0)
    axis.grid(True, axis="x", which="minor", linewidth=0.3, color="0.85")
    axis.set_xlim(-0.5, len(labels) - 0.5)
    axis.set_ylabel("speed-up (×), log scale")


def _speedup_legend(figure: Figure, table: Table) -> None:
    """One colour per table row, then what each kind of mark is."""
    kinds = {
        "ours (mean over seeds)": Line2D([], [], marker="o", color="0.3", linestyle="none"),
        "lowest–highest single-round ratio": Line2D([], [], marker="|", color="0.3", linestyle="none", ms=12),
        "the paper's value": Line2D([], [], marker="D", color="0.3", mfc="none", linestyle="none"),
    }
    if table.claims:
        kinds["the paper's text: up to"] = Line2D(
            [], [], marker="*", color="0.3", mfc="none", ms=11, ls="none"
        )
    handles = [Line2D([], [], marker="s", color=f"C{i}", linestyle="none") for i in range(len(table.rows))]
    names = [row.label for row in table.rows] + list(kinds)
    figure.legend(handles + list(kinds.values()), names, fontsize="small", loc="outside right upper")


def _speedup_caption(table: Table, seeds: list[int], rounds: list[int], statuses: set[str]) -> str:
    """What the speed-up figure of ``table`` shows; ``statuses``: the paper statuses it marks."""
    caption = (
        f"Table {table.spec.id}, {table.spec.title[0].lower()}{table.spec.title[1:]}, on a log axis "
        "(grey line: 1×, as fast as the baseline). Filled circles: ours, the mean over seeds of each "
        f"timing run's ratio of median seconds ({counted(seeds, 'seed', bars=False)}); bar = the lowest to "
        "the highest ratio of single timing rounds, baseline over method within one round "
        f"({counted(rounds, 'round', bars=True)}). Open diamonds: the paper's values."
    )
    caption += "".join(f" {LEGEND[status]}" for status in LEGEND if status in statuses)  # in a fixed order
    if table.claims:
        caption += ' Open stars, right of the dashed line: "up to" values stated only in the paper\'s text.'
    return caption


def _divides_by(kind: str, row: RowSpec) -> bool:
    return row.baseline_kind == kind


def speedup_figures(table: Table, figures_dir: Path, stem: str) -> list[Drawn]:
    """``speedup_figure`` once per baseline kind of Table 2 or 3 that has results of ours:
    ``<stem>.png`` over the paper's baseline, ``<stem>-vs-<kind>.png`` over each other one."""
    drawn = []
    for kind in BASELINE_KINDS:
        rows = rows_where(table, partial(_divides_by, kind))
        suffix = "" if kind == PAPER_BASELINE_KIND else "-vs-" + re.sub(r"[^a-z0-9]+", "-", kind.lower())
        drawn += speedup_figure(rows, figures_dir / f"{stem}{suffix}.png", kind)
    return drawn


def speedup_figure(table: Table, path: Path, baseline_kind: str = "") -> list[Drawn]:
    """(b) Speed-ups of Table 2 or 3 on a log axis: per column (dataset × encoder) and row (method) our
    mean as a filled circle with a bar from the lowest to the highest ratio of single timing rounds
    (only where there are several rounds), the paper's value as an open diamond ("lost" where the
    extraction lost it) and, in columns of their own, the "up to" values of the paper's text as open
    stars. Nothing when the table has no result of ours."""
    if not table.has_ours:
        return []
    rows, columns, claims = table.rows, table.columns, table.claims
    width = 0.8 / len(rows)
    figure, axes = subplots(1, 1, (max(7.0, 0.6 * (len(columns) + len(claims)) + 3.5), 4.6))
    axis = axes[0][0]
    seeds: list[int] = []
    rounds: list[int] = []
    statuses: set[str] = set()
    for i, row in enumerate(rows):
        color, offset = f"C{i}", (i - (len(rows) - 1) / 2) * width
        for j in range(len(columns)):
            cell, x = table.cell(i, j), j + offset
            if not cell.applicable:
                continue
            if cell.ours is not None:
                seeds.append(cell.ours.n)
                rounds.append(cast(int, cell.ours.rounds))  # a speed-up's Stat always has its rounds
                axis.plot(x, cell.ours.mean, "o", color=color, markersize=5, zorder=3)
                if cell.ours.interval is not None:
                    low, high = cell.ours.interval  # drawn as is: the mean need not be its midpoint
                    axis.errorbar(
                        x, (low + high) / 2, yerr=(high - low) / 2, fmt="none", ecolor=color, capsize=2
                    )
            if cell.paper is not None and cell.paper.value is None:
                _label_lost(axis, x)
                statuses.add(cell.paper.status)
            elif cell.paper is not None:
                axis.plot(
                    x, cell.paper.value, "D", color=color, markerfacecolor="none", markersize=7, mew=1.5
                )
                if cell.paper.status in MARKS:
                    statuses.add(cell.paper.status)
                    axis.annotate(
                        MARKS[cell.paper.status],
                        (x, cell.paper.value),
                        xytext=(5, 2),
                        textcoords="offset points",
                        fontsize=8,
                    )
        for k, claim in enumerate(claims):
            if (claim.train, claim.decoder) == (row.train, row.decoder):
                x = len(columns) + k + offset
                axis.plot(x, claim.value, "*", color=color, markerfacecolor="none", markersize=11, mew=1.3)
    if claims:
        axis.axvline(len(columns) - 0.5, color="0.6", linewidth=0.8, linestyle="--")
    _speedup_axis(axis, [column.label for column in columns] + [f"{c.dataset} {c.encoder}" for c in claims])
    over = "" if baseline_kind in ("", PAPER_BASELINE_KIND) else f" (baseline: {baseline_kind})"
    axis.set_title(f"Table {table.spec.id}: {table.spec.title}{over}", fontsize="medium")
    _speedup_legend(figure, table)
    return [save_png(figure, path, _speedup_caption(table, seeds, rounds, statuses))]
