"""UD 2.15 treebanks with gold dependency trees: the data of the SparseMAP paper's Table 1.

The files, their checksums, the CoNLL-U reading (``conllu``, syntactic words only: multiword-token
ranges and empty nodes skipped, errors ``<file>:<line>: ...``) and the substitute protocol for a
missing train split are those of ``crfbench.data.ud``; this module adds what parsing needs on top:
each word's gold head (the HEAD column: 0 for the root, else the 1-based index of the head word)
and whether it is punctuation (UPOS ``PUNCT``), and checks that every sentence's heads form a
single-root tree (UD's own validation guarantees it; a file that breaks it is refused here rather
than inside a training loss).

Datasets (the paper's languages that UD 2.15 and the data mirror hold): ``en`` English-EWT, ``vi``
Vietnamese-VTB, ``zh`` Chinese-GSD and ``ja`` Japanese-GSD. The mirror lacks the train files of
Chinese-GSD and Japanese-GSD, so those two follow ``ud.SUBSTITUTE`` (train = 90% of dev, dev = the
rest) and are *proxies* of the paper's setting (``ParseData.proxy``); Romanian is not in the mirror.
The paper used the CoNLL 2017 shared task's data (UD 2.0), so even the standard splits are a newer
release of the same treebanks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from implementations import arborescence

from ..data import ud
from ..data.checksums import DEFAULT_MANIFEST
from ..data.location import DataDir, Source, resolve_data_dir

#: The parsing datasets: language code -> ``crfbench.data.ud.TREEBANKS`` key.
LANGUAGES: tuple[str, ...] = ("en", "vi", "zh", "ja")
#: The task name of the parsing datasets (their facts' ``task``, which tells a parser run's folder).
TASK = "parse"
#: The UPOS tag of punctuation (the words the second attachment score leaves out).
PUNCTUATION = "PUNCT"


def dataset_name(language: str) -> str:
    """How results name a parsing dataset (``ud-parse-en``), apart from the POS datasets."""
    return f"ud-parse-{language}"


@dataclass(frozen=True)
class Parse:
    """One sentence's syntactic words with their gold UPOS, heads (0 = root) and punctuation flags."""

    words: tuple[str, ...]
    upos: tuple[str, ...]
    heads: tuple[int, ...]
    punct: tuple[bool, ...]

    def __post_init__(self) -> None:
        sizes = {len(self.words), len(self.upos), len(self.heads), len(self.punct)}
        if len(sizes) != 1:
            raise ValueError(f"Parse: words, upos, heads and punct differ in length ({sorted(sizes)})")

    def __len__(self) -> int:
        return len(self.words)


@dataclass(frozen=True)
class ParseData:
    """A parsing dataset's three splits, how they were made and the files read (with SHA-256)."""

    language: str
    train: tuple[Parse, ...]
    dev: tuple[Parse, ...]
    test: tuple[Parse, ...]
    protocol: str  # "standard", or the substitute protocol (ud.SUBSTITUTE)
    sources: dict[str, str]

    @property
    def name(self) -> str:
        return dataset_name(self.language)

    @property
    def proxy(self) -> bool:
        """Whether the splits stand in for the official ones (a missing train file)."""
        return self.protocol != "standard"

    def split(self, name: str) -> tuple[Parse, ...]:
        if name not in ud.SPLITS:
            raise ValueError(f"unknown split {name!r}; valid splits: {', '.join(ud.SPLITS)}")
        parses: tuple[Parse, ...] = getattr(self, name)
        return parses

    def cut(self, max_train: int | None = None, max_eval: int | None = None) -> ParseData:
        """The first ``max_train`` training and ``max_eval`` dev/test sentences (smoke runs)."""
        train = self.train if max_train is None else self.train[:max_train]
        dev = self.dev if max_eval is None else self.dev[:max_eval]
        test = self.test if max_eval is None else self.test[:max_eval]
        return replace(self, train=train, dev=dev, test=test)

    def describe(self) -> dict[str, object]:
        """The facts recorded with every run (never any text)."""
        return {
            "name": self.name,
            "task": TASK,
            "protocol": self.protocol,
            "proxy": self.proxy,
            "sentences": {"train": len(self.train), "dev": len(self.dev), "test": len(self.test)},
            "words": {split: sum(map(len, self.split(split))) for split in ud.SPLITS},
            "sources": self.sources,
        }


def parse_words(words: Sequence[ud.Word]) -> Parse:
    """A sentence read by ``ud.read_conllu`` as a :class:`Parse`.

    ValueError ``<file>:<line>: ...`` on a HEAD that is not an integer in ``0..n`` (the line of that
    word), or heads that do not form a single-root tree (the line of the sentence's first word).
    """
    heads: list[int] = []
    for word in words:
        try:
            head = int(word.head)
        except ValueError:
            head = -1
        if not 0 <= head <= len(words):
            raise ValueError(f"{word.where} expected a HEAD in 0..{len(words)}, found {word.head!r}")
        heads.append(head)
    problem = arborescence.tree_problem(np.array([-1, *heads]), len(words))
    if problem is not None:
        raise ValueError(f"{words[0].where} the sentence's heads are not a single-root tree: {problem}")
    return Parse(
        tuple(word.form for word in words),
        tuple(word.upos for word in words),
        tuple(heads),
        tuple(word.upos == PUNCTUATION for word in words),
    )


def read_parses(source: Source) -> list[Parse]:
    """The sentences of a CoNLL-U file with their gold trees (errors as in ``ud.read_conllu``)."""
    return [parse_words(words) for words in ud.read_conllu(source)]


def treebank(language: str) -> ud.Treebank:
    """The UD treebank of a parsing dataset; ValueError naming the valid languages otherwise."""
    if language not in LANGUAGES:
        raise ValueError(f"unknown parsing dataset {language!r}; valid datasets: {', '.join(LANGUAGES)}")
    return ud.TREEBANKS[language]


def load(
    language: str,
    data_dir: str | Path | None = None,
    *,
    download: bool = True,
    checksums_path: Path = DEFAULT_MANIFEST,
) -> ParseData:
    """Read (or download) the three splits of ``language`` from ``data_dir`` (else
    ``$CRFBENCH_DATA``), verified against the checksum manifest; a missing train file gives the
    substitute protocol with a ``ud.SubstituteProtocolWarning`` (``ud.read_splits``)."""
    chosen = treebank(language)
    data = DataDir(resolve_data_dir(data_dir), checksums_path)
    splits = ud.read_splits(data, chosen, download)
    train, dev, test = (
        tuple(parse_words(words) for words in part) for part in (splits.train, splits.dev, splits.test)
    )
    return ParseData(language, train, dev, test, splits.protocol, splits.sources)
