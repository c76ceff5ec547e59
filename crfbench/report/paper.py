"""The paper's reported numbers (``bcrf_tables.csv``), keyed by our dataset and decoder names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import uses
from ..io import read_csv
from .layout import DECODER_LABELS, TRAIN_LABELS

PAPER_DATASETS = {
    "UD_Dutch-LassySmall": "ud-pos-nl",
    "UD_English-EWT": "ud-pos-en",
    "UD_French-GSD": "ud-pos-fr",
    "UD_German-GSD": "ud-pos-de",
    "UD_Chinese-GSD": "ud-seg-zh",
    "UD_Japanese-GSD": "ud-seg-ja",
    "conll2003": "conll03-ner",
    "conll2003-partial": "conll03-ner-partial",
}
STATUSES = ("ok", "rejoined", "uncertain", "lost", "text-only")
COLUMNS = ("table", "dataset", "encoder", "train", "decoder", "iterations", "metric", "value", "status")

Key = tuple[str, str, str, str, str]  # (table group, dataset, encoder, train, decoder)


def our_decoder(decoder: str, iterations: str) -> str | None:
    """The paper's (decoder, iterations) in our spelling (``crfbench.uses``):
    ``<method>-<iterations>`` for an iterative decoder, the name alone otherwise, "" for a Table 2
    row (a training loss, no decoder); None for a decoder we do not have."""
    if not decoder:
        return ""
    name = f"{decoder}-{iterations}" if iterations else decoder
    return name if name in uses.DECODERS else None


@dataclass(frozen=True)
class PaperValue:
    """One cell of the paper: ``value`` is None exactly when ``status`` is "lost"."""

    value: float | None
    status: str


_CLAIMS = {"train_speedup": "training speed-up over CRF", "decode_speedup": "decoding speed-up over Viterbi"}


@dataclass(frozen=True)
class Claim:
    """A number the paper states only in its text (status "text-only"), for no single table cell:
    ``dataset`` is the paper's wording (e.g. "POS (max over languages)"), ``train`` and ``decoder``
    our names, so that a figure can draw it beside the table row it is about."""

    dataset: str
    encoder: str
    train: str
    decoder: str
    metric: str
    value: float

    @property
    def sentence(self) -> str:
        """The claim as the note printed under its table."""
        what = TRAIN_LABELS.get(self.train) or DECODER_LABELS.get(self.decoder, self.decoder)
        claim = _CLAIMS.get(self.metric, self.metric)
        return (
            f"The paper's text (not a table cell) states a {what} {claim} of up to ×{self.value:g} "
            f"for {self.dataset}, {self.encoder}."
        )


@dataclass(frozen=True)
class Paper:
    """The paper's table cells and its prose-only claims, per table group ("1a" … "1d", "2", "3")."""

    cells: Mapping[Key, PaperValue] = field(default_factory=dict)
    text_only: Mapping[str, tuple[Claim, ...]] = field(default_factory=dict)

    def get(self, group: str, dataset: str, encoder: str, train: str, decoder: str) -> PaperValue | None:
        return self.cells.get((group, dataset, encoder, train, decoder))

    def encoders(self, group: str, dataset: str) -> set[str]:
        """Encoders the paper reports for ``dataset`` in table group ``group``."""
        return {key[2] for key in self.cells if key[:2] == (group, dataset)}


def group_of(table: str) -> str:
    """Our table for a paper sub-table: 1a–1d stay apart, 2a–2c are Table 2, 3a–3c Table 3."""
    return table if table.startswith("1") else table[0]


def _number(where: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: value {text!r} is not a number") from None


def load_paper(path: Path) -> Paper:
    """Read the paper CSV; errors name the row whose dataset, decoder or status is not understood."""
    # not necessarily ending in a line end: the paper's CSV is not written by the engine
    table = read_csv(path, complete=False, dtype=str, keep_default_na=False)
    missing = [name for name in COLUMNS if name not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    cells: dict[Key, PaperValue] = {}
    text_only: dict[str, list[Claim]] = {}
    for index, row in table.iterrows():
        where = f"{path}: row {int(index) + 2}"
        status, group = row["status"], group_of(row["table"])
        if status not in STATUSES:
            raise ValueError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
        decoder = our_decoder(row["decoder"], row["iterations"])
        if status == "text-only":
            if decoder is None:
                raise ValueError(f"{where}: unknown decoder {row['decoder']!r}")
            claim = Claim(
                row["dataset"],
                row["encoder"],
                row["train"],
                decoder,
                row["metric"],
                _number(where, row["value"]),
            )
            text_only.setdefault(group, []).append(claim)
            continue
        if (status == "lost") != (row["value"] == ""):
            raise ValueError(f"{where}: a value must be given unless the status is 'lost'")
        dataset = PAPER_DATASETS.get(row["dataset"])
        if dataset is None or decoder is None:
            raise ValueError(f"{where}: unknown dataset {row['dataset']!r} or decoder {row['decoder']!r}")
        key = (group, dataset, row["encoder"], row["train"], decoder)
        if key in cells:
            raise ValueError(f"{where}: duplicate cell {key}")
        cells[key] = PaperValue(None if status == "lost" else _number(where, row["value"]), status)
    return Paper(cells, {group: tuple(claims) for group, claims in text_only.items()})
