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
#: The forward-algorithm loss each Table 2 loss is compared with first, the paper's baseline (the
#: partial data has no plain CRF). SparseMAP's losses, not in the BCRF paper, iterate until their
#: optimality certificate holds.
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
#: Every implementation of the paper's baselines that Tables 2 and 3 divide by, by kind: the
#: sequential forward algorithm and Viterbi (the paper's, named by ``TRAIN_BASELINES`` and
#: ``DECODE_BASELINE``), the parallel scan (as torch-struct has them) and pytorch-crf's (the one most
#: papers compare with; no partial-label loss), each timed in the same process
#: (``crfbench.uses``'s baseline uses).
BASELINE_KINDS = {
    "sequential": {"crf": "crf", "crf-partial": "crf-partial", "viterbi": "viterbi"},
    "parallel scan": {"crf": "crf-scan", "crf-partial": "crf-scan-partial", "viterbi": "viterbi-scan"},
    uses.PYTORCH_CRF: {"crf": uses.PYTORCH_CRF, "viterbi": f"viterbi-{uses.PYTORCH_CRF}"},
}
#: The baseline kind whose speed-ups the paper's values sit beside.
PAPER_BASELINE_KIND = "sequential"


def baselines_of(paper_baseline: str) -> dict[str, str]:
    """The implementations of ``paper_baseline`` (``crf``, ``crf-partial`` or ``viterbi``) timed as
    baselines, by kind (``BASELINE_KINDS``), the paper's first."""
    return {kind: names[paper_baseline] for kind, names in BASELINE_KINDS.items() if paper_baseline in names}


Kind = Literal["score", "violations", "train", "decode"]


@dataclass(frozen=True)
class RowSpec:
    """One table row: what was trained and how it was decoded (empty string: not applicable)."""

    label: str
    train: str
    decoder: str
    iterations: int | None
    in_paper: bool = True
    baseline: str = ""  # a speed-up's baseline, a timing name (``BASELINE_KINDS``); "" for a score

    @property
    def baseline_kind(self) -> str:
        """The kind of baseline (``BASELINE_KINDS``) a speed-up row divides by; "" for a score."""
        return next((kind for kind, names in BASELINE_KINDS.items() if self.baseline in names.values()), "")


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


def _speed_row(
    label: str, train: str, decoder: str, iterations: int | None, in_paper: bool, baseline: str
) -> RowSpec:
    """A speed-up row over ``baseline``: the paper's label over the paper's baseline, else the
    baseline's name after "vs"; only the paper's baseline has the paper's value beside it."""
    if baseline in (TRAIN_BASELINES.get(train), DECODE_BASELINE):
        return RowSpec(label, train, decoder, iterations, in_paper, baseline)
    return RowSpec(f"{label} vs {_BASELINE_LABELS[baseline]}", train, decoder, iterations, False, baseline)


_BASELINE_LABELS = {name: use.label for name, use in {**uses.TIMED_LOSSES, **uses.TIMED_DECODERS}.items()}
_TRAIN_ROWS = tuple(
    _speed_row(
        f"{TRAIN_LABELS[loss]} ({TRAIN_ITERATIONS} it.)"
        if loss in FIXED_ITERATION_LOSSES
        else TRAIN_LABELS[loss],
        loss,
        "",
        TRAIN_ITERATIONS if loss in FIXED_ITERATION_LOSSES else None,
        loss in FIXED_ITERATION_LOSSES,
        baseline,
    )
    for loss, paper_baseline in TRAIN_BASELINES.items()
    for baseline in baselines_of(paper_baseline).values()
)
_DECODE_ROWS = tuple(
    _speed_row(
        DECODER_LABELS[name],
        "",
        name,
        DECODER_ITERATIONS.get(name),
        name not in ("argmax", "sparsemap"),
        baseline,
    )
    for name in DECODE_COMPARED
    for baseline in baselines_of(DECODE_BASELINE).values()
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
