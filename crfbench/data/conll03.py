"""CoNLL-2003 English NER from the original shared-task files, with entity tags converted to BIO.

The files have one token per line, ``TOKEN POS CHUNK NER`` separated by spaces, blank lines between
sentences and ``-DOCSTART-`` lines between documents; the NER column is IOB1. The text is licensed
Reuters data, so it is never shipped: the files must be placed in the data dir by the user.
"""

from __future__ import annotations

from . import schemes
from .location import DataDir, Source
from .types import Dataset, Sentence, TagSet

TYPES = ("LOC", "MISC", "ORG", "PER")
FILES = {"train": "conll2003/eng.train", "dev": "conll2003/eng.testa", "test": "conll2003/eng.testb"}
COLUMNS = 4
DOCSTART = "-DOCSTART-"
_ENTITY_TAGS = frozenset({"O", *(f"{prefix}-{label}" for label in TYPES for prefix in "BI")})


def tagset() -> TagSet:
    """O plus B-/I- × LOC, MISC, ORG, PER (9 tags), with the BIO constraints."""
    return schemes.bio_tagset(TYPES)


def read_columns(source: Source) -> list[Sentence]:
    """The sentences of a CoNLL-2003 column file, tokens and BIO (IOB2) entity tags.

    ValueError ``<file>:<line>: ...`` on a line without 4 space-separated columns or with an entity
    tag that is not O, B-X or I-X for X in LOC, MISC, ORG, PER.
    """
    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []

    def close() -> None:
        if tokens:
            sentences.append(Sentence(tuple(tokens), tuple(schemes.iob1_to_iob2(tags))))
            tokens.clear()
            tags.clear()

    for number, line in enumerate(source.text.split("\n"), start=1):
        columns = line.split()
        if not columns:
            close()
            continue
        if len(columns) != COLUMNS:
            raise ValueError(
                f"{source.path}:{number}: expected {COLUMNS} space-separated columns "
                f"(TOKEN POS CHUNK NER), found {len(columns)}"
            )
        if columns[0] == DOCSTART:
            close()
            continue
        if columns[3] not in _ENTITY_TAGS:
            raise ValueError(
                f"{source.path}:{number}: expected an entity tag O, B-X or I-X with X one of "
                f"{', '.join(TYPES)}, found {columns[3]!r}"
            )
        tokens.append(columns[0])
        tags.append(columns[3])
    close()
    return sentences


def load(data: DataDir, name: str = "conll03-ner") -> Dataset:
    """The official splits: train = eng.train, dev = eng.testa, test = eng.testb."""
    splits = {}
    sources = {}
    for split, relative in FILES.items():
        source = data.read(relative)
        if source is None:
            raise FileNotFoundError(
                f"{data.path(relative)} is missing. CoNLL-2003 is licensed Reuters (RCV1) text and cannot be "
                "downloaded: obtain it from the CoNLL-2003 shared task (annotations and build scripts) "
                "with the Reuters Corpus from NIST/LDC (RCV1), build eng.train, eng.testa and eng.testb "
                f"and place them in {data.path('conll2003')}."
            )
        splits[split] = tuple(read_columns(source))
        if not splits[split]:
            raise ValueError(f"{source.path}: no sentences (an empty {split} file?)")
        sources[relative] = source.sha256
    return Dataset(name, "ner", tagset(), splits["train"], splits["dev"], splits["test"], "standard", sources)
