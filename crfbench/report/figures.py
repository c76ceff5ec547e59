"""Figures as PNG (matplotlib, Agg backend): score against inference iterations and speed-up bar
charts (the asv scaling figures are drawn by :mod:`.scaling`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ..io import save_atomic  # noqa: E402
from .layout import (  # noqa: E402
    DATASET_LABELS,
    DECODER_ITERATIONS,
    POS,
    TABLES,
    TRAIN_LABELS,
    natural_key,
)
from .paper import Paper  # noqa: E402
from .tables import Table  # noqa: E402

#: Iterative decoder families of figure (a), with their decoders in iteration order.
FAMILIES = {"MF": ("mf-5", "mf-10"), "BCRF": ("bcrf-5", "bcrf-10")}


def save_png(figure: Figure, path: Path, dpi: int = 110) -> Path:
    """Write ``figure`` to ``path`` as a reproducible PNG (no software stamp), atomically, and close it."""
    save_atomic(
        path, lambda temporary: figure.savefig(temporary, format="png", dpi=dpi, metadata={"Software": None})
    )
    plt.close(figure)
    return path


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
                yerr=stats.loc[present, "std"].fillna(0),
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


def iteration_figures(scores: pd.DataFrame, paper: Paper, out_dir: Path) -> list[Path]:
    """(a) Per dataset, test score of CRF-trained models against MF and BCRF iterations, Viterbi as a
    horizontal line; one panel per encoder, the paper's values as open markers where it has them."""
    written = []
    for dataset in DATASET_LABELS:
        train = "crf-partial" if dataset == "conll03-ner-partial" else "crf"
        rows = scores[(scores["dataset"] == dataset) & (scores["train"] == train)]
        if rows.empty:
            continue
        encoders = sorted(set(rows["encoder"]), key=natural_key)
        figure, axes = plt.subplots(
            1, len(encoders), figsize=(3.6 * len(encoders) + 1, 3.4), squeeze=False, sharey=True
        )
        group = _paper_group(dataset)
        for axis, encoder in zip(axes[0], encoders, strict=True):
            quoted = {
                name: value.value
                for name in ("viterbi", *FAMILIES["MF"], *FAMILIES["BCRF"])
                if group is not None
                and (value := paper.get(group, dataset, encoder, train, name)) is not None
                and value.value is not None
            }
            stats = rows[rows["encoder"] == encoder].set_index("decoder")
            _iteration_panel(axis, stats, quoted, encoder)
        axes[0][0].set_ylabel(f"test {_metric_label(dataset)} (%)")
        handles = {}
        for axis in axes[0]:
            handles |= dict(zip(*reversed(axis.get_legend_handles_labels()), strict=True))
        axes[0][-1].legend(
            handles.values(), handles.keys(), fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1)
        )
        figure.suptitle(f"{DATASET_LABELS[dataset]} ({dataset}), trained with {TRAIN_LABELS[train]}")
        figure.tight_layout()
        written.append(save_png(figure, out_dir / f"iterations-{dataset}.png"))
    return written


def speedup_figure(table: Table, path: Path) -> list[Path]:
    """(b) One bar per method (table row) and column with our mean speed-up, error bars = std over
    seeds, the paper's values as black diamonds; nothing when the table has no result of ours."""
    columns = [
        j for j in range(len(table.columns)) if any(table.cell(i, j).ours for i in range(len(table.rows)))
    ]
    if not columns:
        return []
    width = 0.8 / len(table.rows)
    figure, axis = plt.subplots(figsize=(max(6.0, 0.25 * len(columns) * len(table.rows) + 2), 4.0))
    paper_labelled = False
    for i, row in enumerate(table.rows):
        offset = (i - (len(table.rows) - 1) / 2) * width
        cells = [(k + offset, table.cell(i, j)) for k, j in enumerate(columns)]
        ours = [(x, cell.ours) for x, cell in cells if cell.ours is not None]
        if ours:
            axis.bar(
                [x for x, _ in ours],
                [stat.mean for _, stat in ours],
                width,
                yerr=[stat.std or 0 for _, stat in ours],
                capsize=2,
                label=row.label,
                color=f"C{i}",
            )
        quoted = [(x, cell.paper.value) for x, cell in cells if cell.paper and cell.paper.value is not None]
        if quoted:
            axis.plot(
                [x for x, _ in quoted],
                [value for _, value in quoted],
                linestyle="none",
                marker="D",
                color="black",
                label=None if paper_labelled else "paper",
            )
            paper_labelled = True
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_xticks(range(len(columns)), [table.columns[j].label for j in columns], rotation=30, ha="right")
    axis.set_ylabel("speed-up (×)")
    axis.set_title(f"Table {table.spec.id}: {table.spec.title}", fontsize="medium")
    axis.legend(fontsize="small")
    figure.tight_layout()
    return [save_png(figure, path)]


def caption(path: Path) -> str:
    """What a figure written by this module shows, from its file name."""
    if path.stem.startswith("iterations-"):
        dataset = path.stem.removeprefix("iterations-")
        return f"{dataset}: test score of CRF-trained models against MF / BCRF iterations (Viterbi dashed)."
    kind = {"speedup-train": "Training speed-ups (Table 2)", "speedup-decode": "Decoding speed-ups (Table 3)"}
    return f"{kind[path.stem]}, mean ± std over seeds; black diamonds: the paper's values."
