"""The tables' rows and column order, in the paper's layout (docs/derivations.md §7.3), plus
display labels."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .. import uses

#: Our dataset names in the paper's column order, with the short labels of the table headers.
DATASET_LABELS = {
    "ud-pos-nl": "nl",
    "ud-pos-en": "en",
    "ud-pos-fr": "fr",
    "ud-pos-de": "de",
    "ud-seg-zh": "zh",
    "ud-seg-ja": "ja",
    "conll03-ner": "CoNLL-03",
    "conll03-ner-partial": "CoNLL-03 partial",
    "synthetic": "synthetic",
}
POS = ("ud-pos-nl", "ud-pos-en", "ud-pos-fr", "ud-pos-de")
SEG = ("ud-seg-zh", "ud-seg-ja")
NER = ("conll03-ner",)
NER_PARTIAL = ("conll03-ner-partial",)
SYNTHETIC = ("synthetic",)
#: Each dataset's task (its table metric: accuracy for "pos", F1 for "seg" and "ner").
TASKS = (
    dict.fromkeys(POS, "pos")
    | dict.fromkeys(SEG + SYNTHETIC, "seg")
    | dict.fromkeys(NER + NER_PARTIAL, "ner")
)


def _paper_order(names: dict[str, str], paper: tuple[str, ...]) -> dict[str, str]:
    """``names`` with the paper's ones first, in the paper's order, then the rest as given."""
    return {name: names[name] for name in paper if name in names} | names


#: Display labels of the training losses and decoders (``crfbench.uses``), the
#: paper's in its row order first; and the decoders' fixed iteration counts.
TRAIN_LABELS = _paper_order(
    {name: use.label for name, use in uses.LOSSES.items()},
    ("unstructured", "crf", "meanfield", "bcrf", "crf-partial", "bcrf-partial"),
)
DECODER_LABELS = _paper_order(
    {name: use.label for name, use in uses.DECODERS.items()},
    ("viterbi", "meanfield-5", "meanfield-10", "bcrf-5", "bcrf-10", "argmax", "argmax-repair"),
)
DECODER_ITERATIONS = {
    name: use.options["iterations"] for name, use in uses.DECODERS.items() if "iterations" in use.options
}

#: Training iterations of the MF / BCRF losses that Table 2 compares (paper §6.4).
TRAIN_ITERATIONS = 10
#: The forward-algorithm loss each Table 2 loss is compared with (the partial data has no plain CRF).
#: SparseMAP's losses, not in the BCRF paper, iterate until their optimality certificate holds.
TRAIN_BASELINES = {
    "meanfield": "crf",
    "bcrf": "crf",
    "bcrf-partial": "crf-partial",
    "sparsemap": "crf",
    "m-sparsemap": "crf",
    "sparsemap-partial": "crf-partial",
}
#: The Table 2 losses run at a fixed iteration count (TRAIN_ITERATIONS); the others to convergence.
FIXED_ITERATION_LOSSES = ("meanfield", "bcrf", "bcrf-partial")
#: Table 3 compares these decoders with Viterbi.
DECODE_BASELINE = "viterbi"
DECODE_COMPARED = ("meanfield-5", "meanfield-10", "bcrf-5", "bcrf-10", "argmax", "sparsemap")

Kind = Literal["score", "violations", "train", "decode"]


@dataclass(frozen=True)
class RowSpec:
    """One table row: what was trained and how it was decoded (empty string: not applicable)."""

    label: str
    train: str
    decoder: str
    iterations: int | None
    in_paper: bool = True


@dataclass(frozen=True)
class TableSpec:
    """One table: which statistic fills it, which datasets are its columns, which paper cells go beside."""

    id: str
    stem: str
    title: str
    kind: Kind
    datasets: tuple[str, ...]
    rows: tuple[RowSpec, ...]
    paper_group: str | None
    decimals: int
    drop_empty_rows: bool = False  # ours-only tables list only the (train, decoder) pairs that were run


def _decode_row(train: str, decoder: str, in_paper: bool = True) -> RowSpec:
    label = f"{TRAIN_LABELS[train]} → {DECODER_LABELS[decoder]}"
    if (train, decoder) == ("unstructured", "argmax"):
        label = TRAIN_LABELS[train]  # the paper's label
    return RowSpec(label, train, decoder, DECODER_ITERATIONS.get(decoder), in_paper)


_ALL_DECODERS = ("viterbi", "meanfield-5", "meanfield-10", "bcrf-5", "bcrf-10")
_SUPERVISED_ROWS = (
    _decode_row("unstructured", "argmax"),
    _decode_row("unstructured", "argmax-repair", in_paper=False),
    *(_decode_row("crf", decoder) for decoder in _ALL_DECODERS),
    *(_decode_row("meanfield", decoder) for decoder in ("viterbi", "meanfield-5", "meanfield-10")),
    *(_decode_row("bcrf", decoder) for decoder in ("viterbi", "bcrf-5", "bcrf-10")),
    # SparseMAP (Niculae et al. 2018), not in the BCRF paper: decoding a CRF, and its own losses
    _decode_row("crf", "sparsemap", in_paper=False),
    *(
        _decode_row(train, decoder, in_paper=False)
        for train in ("sparsemap", "m-sparsemap")
        for decoder in ("viterbi", "sparsemap")
    ),
)
_PARTIAL_ROWS = tuple(
    _decode_row(train, decoder) for train in ("crf-partial", "bcrf-partial") for decoder in _ALL_DECODERS
)
_TRAIN_ROWS = tuple(
    RowSpec(f"{TRAIN_LABELS[loss]} ({TRAIN_ITERATIONS} it.)", loss, "", TRAIN_ITERATIONS)
    if loss in FIXED_ITERATION_LOSSES
    else RowSpec(TRAIN_LABELS[loss], loss, "", None, in_paper=False)
    for loss in TRAIN_BASELINES
)
_DECODE_ROWS = tuple(
    RowSpec(
        DECODER_LABELS[name],
        "",
        name,
        DECODER_ITERATIONS.get(name),
        in_paper=name not in ("argmax", "sparsemap"),
    )
    for name in DECODE_COMPARED
)
_CONSTRAINED = SEG + NER + NER_PARTIAL + SYNTHETIC

TABLES = (
    TableSpec("1a", "table1a", "POS tagging accuracy (%)", "score", POS, _SUPERVISED_ROWS, "1a", 1),
    TableSpec("1b", "table1b", "NER F1 (%), supervised", "score", NER, _SUPERVISED_ROWS, "1b", 1),
    TableSpec(
        "1c",
        "table1c",
        "Joint segmentation and POS tagging F1 (%)",
        "score",
        SEG,
        _SUPERVISED_ROWS,
        "1c",
        1,
    ),
    TableSpec("1d", "table1d", "NER F1 (%), partial labels", "score", NER_PARTIAL, _PARTIAL_ROWS, "1d", 1),
    TableSpec(
        "1s",
        "table1s",
        "Synthetic HMM task score (%), not in the paper",
        "score",
        SYNTHETIC,
        _SUPERVISED_ROWS,
        None,
        1,
    ),
    TableSpec(
        "2",
        "table2",
        f"Training speed-up over the forward-algorithm loss ({TRAIN_ITERATIONS} iterations)",
        "train",
        tuple(DATASET_LABELS),
        _TRAIN_ROWS,
        "2",
        2,
    ),
    TableSpec(
        "3",
        "table3",
        "Decoding speed-up over Viterbi",
        "decode",
        tuple(DATASET_LABELS),
        _DECODE_ROWS,
        "3",
        2,
    ),
    TableSpec(
        "V",
        "violations",
        "Outputs that violate the tag constraints (% of test sentences), ours only",
        "violations",
        _CONSTRAINED,
        tuple(
            _decode_row(train, decoder, in_paper=False)
            for train in TRAIN_LABELS
            for decoder in DECODER_LABELS
        ),
        None,
        1,
        drop_empty_rows=True,
    ),
)


def applies(row: RowSpec, dataset: str) -> bool:
    """Whether a row can have a value for ``dataset``: partial-label losses need partial labels and the
    plain supervised losses need full labels (Table 2 and V mix both kinds of dataset)."""
    return row.train == "" or row.train.endswith("-partial") == (dataset in NER_PARTIAL)


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key that orders embedded numbers by value ("L2" before "L10")."""
    return tuple(int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text))


def encoder_key(name: str) -> tuple[object, ...]:
    """Column order of encoders: the paper's self-attentive depths (L0, L2, L4 …) first, then names."""
    return (re.fullmatch(r"L\d+", name) is None, *natural_key(name))
