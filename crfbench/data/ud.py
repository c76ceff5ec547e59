"""Universal Dependencies 2.15 treebanks: POS tagging and character-level segmentation + POS.

CoNLL-U is parsed by the ``conllu`` package, one sentence block at a time, so that every word keeps
the line it came from for error messages. The tagged units are syntactic words (integer IDs);
multiword-token ranges (``3-4``) and empty nodes (``5.1``) are skipped.

A missing file is downloaded from the treebank's repository at tag ``r2.15`` (when allowed). When a
train file stays missing, the splits follow the substitute protocol (see ``SUBSTITUTE``) with a
warning; a missing dev or test file is an error.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import conllu
from conllu.exceptions import ParseException

from . import schemes
from .location import DataDir, DownloadError, Source
from .types import Dataset, Sentence, TagSet

RELEASE = "ud-2.15"
RELEASE_TAG = "r2.15"
UD_BASE_URL = "https://raw.githubusercontent.com/UniversalDependencies"
SPLITS = ("train", "dev", "test")
COLUMNS = 10
SUBSTITUTE = "substitute: train=dev[:90%], dev=dev[90%:], test=test (train split missing: {file})"

_UPOS = frozenset(schemes.UPOS)


def _unparsed(columns: list[str], index: int) -> str:
    return columns[index]


# Columns we never look at stay strings: parsing is twice as fast.
FIELD_PARSERS: dict[str, Callable[[list[str], int], Any]] = {
    field: _unparsed for field in ("feats", "head", "deps", "misc")
}


class SubstituteProtocolWarning(UserWarning):
    """The official splits could not be used; the dataset follows a substitute protocol."""


@dataclass(frozen=True)
class Treebank:
    """A UD treebank: its repository name, file prefix and whether it annotates XPOS."""

    name: str
    prefix: str
    has_xpos: bool = True

    def file(self, split: str) -> str:
        """Path of a split relative to the data dir."""
        return f"{RELEASE}/{self.name}/{self.prefix}-ud-{split}.conllu"

    def url(self, split: str, base_url: str | None = None) -> str:
        return f"{base_url or UD_BASE_URL}/{self.name}/{RELEASE_TAG}/{self.prefix}-ud-{split}.conllu"


TREEBANKS = {
    "nl": Treebank("UD_Dutch-LassySmall", "nl_lassysmall"),
    "en": Treebank("UD_English-EWT", "en_ewt"),
    "fr": Treebank("UD_French-GSD", "fr_gsd", has_xpos=False),
    "de": Treebank("UD_German-GSD", "de_gsd"),
    "zh": Treebank("UD_Chinese-GSD", "zh_gsd"),  # traditional script
    "ja": Treebank("UD_Japanese-GSD", "ja_gsd"),
    "vi": Treebank("UD_Vietnamese-VTB", "vi_vtb"),  # dependency parsing only (crfbench.parsing)
}


@dataclass(frozen=True)
class Word:
    """A syntactic word and where it is (file and line), for error messages.

    ``head`` is the HEAD column as written (``crfbench.parsing`` reads it as an integer)."""

    form: str
    upos: str
    xpos: str | None
    file: Path
    line: int
    head: str = "_"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}:"


def read_conllu(source: Source) -> list[list[Word]]:
    """The sentences of a CoNLL-U file as syntactic words.

    ValueError ``<file>:<line>: ...`` on a token line without 10 tab-separated columns, an ID that is
    not an integer, range or decimal, integer IDs that do not run 1, 2, ..., a missing or unknown
    UPOS, or a sentence without words.
    """
    return [_words(source, block) for block in _blocks(source.text)]


def _blocks(text: str) -> Iterator[list[tuple[int, str]]]:
    """Blank-line-separated blocks of ``(line number, line)``."""
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _words(source: Source, block: list[tuple[int, str]]) -> list[Word]:
    def where(number: int) -> str:
        return f"{source.path}:{number}:"

    token_lines = [(number, line) for number, line in block if not line.strip().startswith("#")]
    for number, line in token_lines:
        found = len(line.strip().split("\t"))
        if found != COLUMNS:
            raise ValueError(f"{where(number)} expected {COLUMNS} tab-separated columns, found {found}")
    try:
        (tokens,) = conllu.parse("\n".join(line for _, line in block), field_parsers=FIELD_PARSERS)
    except ParseException as error:
        number = next((number for number, line in token_lines if _fails(line)), block[0][0])
        raise ValueError(f"{where(number)} {error}") from None
    words: list[Word] = []
    for token, (number, _) in zip(tokens, token_lines, strict=True):
        token_id = token["id"]
        if isinstance(token_id, tuple):  # multiword-token range or empty node
            continue
        if token_id is None:
            raise ValueError(f"{where(number)} expected an integer word ID, a range N-M or a decimal N.M")
        if token_id != len(words) + 1:
            raise ValueError(f"{where(number)} expected word ID {len(words) + 1}, found {token_id}")
        if token["upos"] not in _UPOS:
            raise ValueError(
                f"{where(number)} expected a UPOS tag ({', '.join(schemes.UPOS)}), found {token['upos']!r}"
            )
        words.append(Word(token["form"], token["upos"], token["xpos"], source.path, number, token["head"]))
    if not words:
        raise ValueError(f"{where(block[0][0])} expected a sentence with at least one word line")
    return words


def _fails(line: str) -> bool:
    try:
        conllu.parse(line, field_parsers=FIELD_PARSERS)
    except ParseException:
        return True
    return False


@dataclass(frozen=True)
class Splits:
    """The words of each split, how the splits were made, and the files read."""

    train: list[list[Word]]
    dev: list[list[Word]]
    test: list[list[Word]]
    protocol: str
    sources: dict[str, str]


def read_splits(
    data: DataDir, treebank: Treebank, download: bool = True, base_url: str | None = None
) -> Splits:
    """Read (or download) the three splits; substitute protocol with a warning when train is missing."""
    sources: dict[str, Source | None] = {}
    failures: dict[str, str] = {}
    for split in SPLITS:
        relative = treebank.file(split)
        source = data.read(relative)
        if source is None and download:
            try:
                source = data.download(relative, treebank.url(split, base_url))
            except DownloadError as error:
                failures[split] = str(error)
        sources[split] = source
    for split in ("dev", "test"):
        if sources[split] is None:
            reason = failures.get(split, "download=False")
            raise FileNotFoundError(
                f"{data.path(treebank.file(split))} is missing ({reason}). Add it from the UD 2.15 release "
                f"(ud-treebanks-v2.15.tgz) or from {treebank.url(split)}, or run with a network and "
                "download=True."
            )
    read = {split: read_conllu(source) for split, source in sources.items() if source is not None}
    for split, source in sources.items():
        if source is not None and not read[split]:
            raise ValueError(f"{source.path}: no sentences (an empty {split} file?)")
    hashes = {source.relative: source.sha256 for source in sources.values() if source is not None}
    if "train" in read:
        return Splits(read["train"], read["dev"], read["test"], "standard", hashes)
    missing = treebank.file("train")
    protocol = SUBSTITUTE.format(file=missing)
    reason = failures.get("train", "download=False")
    warnings.warn(
        f"{data.path(missing)} is missing ({reason}); using {protocol}. Add the file (git blob hash in "
        "crfbench/data/checksums.tsv) to get the standard splits.",
        SubstituteProtocolWarning,
        stacklevel=3,  # the caller of data.load
    )
    dev_source = sources["dev"]
    assert dev_source is not None  # read above
    cut = len(read["dev"]) * 9 // 10
    if not 0 < cut < len(read["dev"]):
        raise ValueError(
            f"{dev_source.path}: {len(read['dev'])} sentence(s) are too few to split into train and dev"
        )
    return Splits(read["dev"][:cut], read["dev"][cut:], read["test"], protocol, hashes)


def check_tags(name: str, treebank: Treebank, tags: object) -> None:
    """ValueError unless ``tags`` is ``"upos"``, or ``"xpos"`` for a treebank that annotates XPOS."""
    if tags not in ("upos", "xpos"):
        raise ValueError(f"{name}: option tags must be 'upos' or 'xpos', got {tags!r}")
    if tags == "xpos" and not treebank.has_xpos:
        raise ValueError(
            f"{name}: {treebank.name} has no XPOS annotation (every XPOS is '_'); use tags='upos'"
        )


def pos_dataset(name: str, treebank: Treebank, splits: Splits, tags: str) -> Dataset:
    """POS tagging: one token per syntactic word, tagged with its UPOS (``tags="upos"``) or XPOS.

    The UPOS tag set is the 17 universal tags (sorted); the XPOS tag set is the sorted union of the
    XPOS tags in the splits read. Both are unconstrained.
    """
    check_tags(name, treebank, tags)
    parts = (splits.train, splits.dev, splits.test)
    if tags == "xpos":
        for words in (words for part in parts for words in part):
            missing = next((word for word in words if word.xpos is None), None)
            if missing is not None:
                raise ValueError(f"{missing.where} expected an XPOS tag, found '_'")
        inventory = sorted({word.xpos or "" for part in parts for words in part for word in words})
        tagset = TagSet.unconstrained(inventory)
    else:
        tagset = TagSet.unconstrained(schemes.UPOS)

    def sentence(words: list[Word]) -> Sentence:
        labels = tuple(word.upos if tags == "upos" else (word.xpos or "") for word in words)  # xpos: checked
        return Sentence(tuple(word.form for word in words), labels)

    train, dev, test = (tuple(map(sentence, part)) for part in parts)
    return Dataset(name, "pos", tagset, train, dev, test, splits.protocol, splits.sources, {"tags": tags})


def seg_dataset(name: str, splits: Splits) -> Dataset:
    """Joint segmentation and POS: one token per character, tagged BIES × the word's UPOS.

    The tag set is BIES × the 17 UPOS (68 tags) with the BIES constraints of ``schemes.bies_tagset``.
    """

    def sentence(words: list[Word]) -> Sentence:
        for word in words:
            if any(character.isspace() for character in word.form):
                raise ValueError(f"{word.where} expected a word form without whitespace")
        characters = tuple(character for word in words for character in word.form)
        tags = schemes.bies_tags((len(word.form), word.upos) for word in words)
        return Sentence(characters, tuple(tags))

    train, dev, test = (tuple(map(sentence, part)) for part in (splits.train, splits.dev, splits.test))
    tagset = schemes.bies_tagset(schemes.UPOS)
    return Dataset(name, "seg", tagset, train, dev, test, splits.protocol, splits.sources)
