"""Tables as cells: our statistic and the paper's value for each (row, column) of a ``TableSpec``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import SupportsFloat

import pandas as pd

from .layout import (
    DATASET_LABELS,
    PAPER_BASELINE_KIND,
    TRAIN_ITERATIONS,
    RowSpec,
    TableSpec,
    applies,
    encoder_key,
    natural_key,
)
from .paper import Claim, Paper, PaperValue

#: How the spread of a speed-up over timing rounds is shown (Tables 2 and 3).
_ROUNDS = (
    "the std omitted for a single seed; in brackets the lowest–highest ratio of single rounds (every round "
    "times each item once, so the rounds of the two items pair up; all seeds' rounds pooled) and n, the "
    "number of rounds (n=1 alone: one round has no interval);"
)
#: Which implementations of the baseline the rows divide by (Tables 2 and 3).
_BASELINES = (
    'A row without "vs" divides by the sequential forward algorithm or Viterbi (our crf: a loop over '
    "positions, each step vectorised over the batch and tags), as the paper's baseline; a row \"vs CRF "
    '(parallel scan)" divides by the same computation as a balanced tree of log-semiring matrix products '
    '(our crf-scan, as torch-struct computes it), and "vs CRF (pytorch-crf)" by pytorch-crf\'s, the '
    "implementation most papers compare with; all timed in the same run. Only the first has the paper's "
    "value beside it. Columns split by device and by timing mode (eager: one operator launched at a time; "
    "compiled: torch.compile on a CPU, the step captured as a CUDA graph on a GPU) where the rows hold "
    "several."
)
_EXPLANATIONS = {
    "score": (
        "Ours: mean ± sample standard deviation (n − 1) over seeds of the test-set score in %, the std "
        "omitted for a single seed; beside it the paper's value (a mean of 5 runs) and the difference "
        "ours − paper."
    ),
    "violations": (
        "Share of test sentences whose output breaks a start, transition or end constraint of the tag set, "
        "in %: mean ± sample standard deviation over seeds."
    ),
    "train": (
        "Speed-up = median seconds over timing rounds of the forward-algorithm loss (CRF; partial CRF for "
        f"the partial-label loss) / median seconds of the loss at {TRAIN_ITERATIONS} iterations, both "
        "measured in one timing run with the network's forward and backward passes; mean ± sample standard "
        f"deviation over seeds, {_ROUNDS} then the paper's value and the difference ours − paper. "
        "SparseMAP's losses run to their optimality certificate, so their cost depends on the scores: "
        "the pipeline times every item on the dataset's first-seed CRF model (timing.csv's network "
        "column; a fresh network, where supports are largest, is SparseMAP's worst case); the "
        f"convergence table gives each run's training seconds. {_BASELINES}"
    ),
    "decode": (
        "Speed-up = median seconds over timing rounds of Viterbi decoding / median seconds of the decoder, "
        "both measured in one timing run with the network's forward pass; mean ± sample standard deviation "
        f"over seeds, {_ROUNDS} then the paper's value and the difference ours − paper. SparseMAP, as in "
        f"training, is timed on the dataset's first-seed CRF model. {_BASELINES}"
    ),
}


@dataclass(frozen=True)
class Stat:
    """Our value of one cell: mean, sample std (None for one seed) and number of seeds; for a speed-up
    also the lowest and highest per-round ratio and the number of timing rounds behind them (None for
    a score, which has no rounds)."""

    mean: float
    std: float | None
    n: int
    low: float | None = None
    high: float | None = None
    rounds: int | None = None
    flagged: bool = False  # a run behind it stopped at its epoch cap while its dev curve still rose

    @property
    def interval(self) -> tuple[float, float] | None:
        """(lowest, highest) per-round ratio where there are at least two rounds: one round, or a score,
        has no interval to show."""
        if self.rounds is None or self.rounds < 2 or self.low is None or self.high is None:
            return None
        return self.low, self.high


@dataclass(frozen=True)
class Column:
    """A dataset × encoder column; ``device`` is set only when timings come from several devices."""

    dataset: str
    encoder: str
    device: str = ""

    @property
    def encoder_label(self) -> str:
        return f"{self.encoder} [{self.device}]" if self.device else self.encoder

    @property
    def label(self) -> str:
        return f"{DATASET_LABELS[self.dataset]} {self.encoder_label}"


@dataclass(frozen=True)
class Cell:
    ours: Stat | None
    paper: PaperValue | None
    applicable: bool = True

    @property
    def difference(self) -> float | None:
        """Ours − paper, when both exist."""
        if self.ours is None or self.paper is None or self.paper.value is None:
            return None
        return self.ours.mean - self.paper.value


@dataclass(frozen=True)
class Table:
    spec: TableSpec
    rows: tuple[RowSpec, ...]
    columns: tuple[Column, ...]
    cells: Mapping[tuple[int, int], Cell]  # (row index, column index)
    explanation: str  # how the cells are made
    claims: tuple[Claim, ...]  # the paper's prose-only claims about this table

    def cell(self, row: int, column: int) -> Cell:
        return self.cells[row, column]

    @property
    def has_ours(self) -> bool:
        return any(cell.ours is not None for cell in self.cells.values())

    @property
    def has_columns(self) -> bool:
        return bool(self.columns)


def _number(value: SupportsFloat) -> float | None:
    """A float column's value, None where it is missing (NaN or None)."""
    return None if pd.isna(value) else float(value)


StatKey = tuple[str, str, str, str, str, str]


def _stats_by_key(stats: pd.DataFrame) -> dict[StatKey, Stat]:
    """Our statistics by ``stats.STAT_KEYS`` (dataset, encoder, device, train, decoder, baseline);
    speed-ups bring their round spread."""
    rounds, flagged = "rounds" in stats.columns, "flagged" in stats.columns
    return {
        (row.dataset, row.encoder, row.device, row.train, row.decoder, row.baseline): Stat(
            float(row.mean),
            _number(row.std),
            int(row.n),
            *((_number(row.low), _number(row.high), int(row.rounds)) if rounds else ()),
            **({"flagged": bool(row.flagged)} if flagged else {}),
        )
        for row in stats.itertuples(index=False)
    }


def _columns(spec: TableSpec, ours: Mapping[StatKey, Stat], paper: Paper) -> tuple[Column, ...]:
    """Our columns and the paper's (dataset, encoder) pairs we lack, encoder-major as in the paper."""
    row_keys = {(row.train, row.decoder, row.baseline) for row in spec.rows}
    found = {key[:3] for key in ours if key[0] in spec.datasets and key[3:] in row_keys}
    covered = {key[:2] for key in found}
    if spec.paper_group is not None:
        for dataset in spec.datasets:
            found |= {
                (dataset, encoder, "")
                for encoder in paper.encoders(spec.paper_group, dataset)
                if (dataset, encoder) not in covered
            }
    encoders = sorted({key[1] for key in found}, key=encoder_key)
    devices = sorted({key[2] for key in found}, key=natural_key)
    return tuple(
        Column(dataset, encoder, device)
        for encoder in encoders
        for dataset in spec.datasets
        for device in devices
        if (dataset, encoder, device) in found
    )


def build_table(spec: TableSpec, stats: pd.DataFrame, paper: Paper) -> Table:
    """Fill ``spec`` from our statistics (``stats.STAT_KEYS`` + mean, std, n) and the paper."""
    ours = _stats_by_key(stats)
    columns = _columns(spec, ours, paper)

    def cell(row: RowSpec, column: Column) -> Cell:
        stat = ours.get((column.dataset, column.encoder, column.device, row.train, row.decoder, row.baseline))
        group = spec.paper_group
        value = (
            None
            if group is None or row.baseline_kind not in ("", PAPER_BASELINE_KIND)
            else paper.get(group, column.dataset, column.encoder, row.train, row.decoder)
        )
        return Cell(stat, value, applies(row, column.dataset))

    rows = tuple(
        row
        for row in spec.rows
        if not spec.drop_empty_rows or any(cell(row, column).ours is not None for column in columns)
    )
    cells = {(i, j): cell(row, column) for i, row in enumerate(rows) for j, column in enumerate(columns)}
    claims = paper.text_only.get(spec.paper_group or "", ())
    return Table(spec, rows, columns, cells, _EXPLANATIONS[spec.kind], claims)


def rows_where(table: Table, keep: Callable[[RowSpec], bool]) -> Table:
    """``table`` with only the rows that ``keep`` accepts (a figure per baseline of Tables 2 and 3)."""
    kept = [i for i, row in enumerate(table.rows) if keep(row)]
    cells = {(new, j): table.cell(i, j) for new, i in enumerate(kept) for j in range(len(table.columns))}
    rows = tuple(table.rows[i] for i in kept)
    return dataclasses.replace(table, rows=rows, cells=cells)


def missing(table: Table) -> list[str]:
    """Sentences naming the applicable cells of ``table`` that have no result of ours (for tables that
    list only the pairs that were run, just whether there is any result)."""
    name = f"Table {table.spec.id}"
    if not table.has_ours:
        return [f"{name} ({table.spec.title}): no results of ours."]
    if table.spec.drop_empty_rows:
        return []
    empty, lines = [], []
    for j, column in enumerate(table.columns):
        absent = [
            row.label
            for i, row in enumerate(table.rows)
            if table.cell(i, j).applicable and table.cell(i, j).ours is None
        ]
        applicable = sum(table.cell(i, j).applicable for i in range(len(table.rows)))
        if absent and len(absent) == applicable:
            empty.append(column.label)
        elif absent:
            lines.append(f"{name}, {column.label}: no results for {', '.join(absent)}.")
    if empty:
        lines.insert(0, f"{name}: no results for {', '.join(empty)}.")
    return lines
