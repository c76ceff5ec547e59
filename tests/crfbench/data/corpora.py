"""Tiny made-up corpora for the data tests, written under ``tmp_path`` with their checksum manifest.

Every word here is invented; nothing is copied from a real corpus.
"""

from __future__ import annotations

import os
from pathlib import Path

from crfbench import data
from crfbench.data import checksums

EWT = "ud-2.15/UD_English-EWT/en_ewt-ud-{}.conllu"
GSD_ZH = "ud-2.15/UD_Chinese-GSD/zh_gsd-ud-{}.conllu"
CONLL03 = {"train": "conll2003/eng.train", "dev": "conll2003/eng.testa", "test": "conll2003/eng.testb"}


def word(index: str | int, form: str, upos: str, xpos: str = "_") -> str:
    """A CoNLL-U line: ID, FORM, LEMMA (= FORM), UPOS, XPOS, and placeholders for the rest."""
    head = "0" if str(index) == "1" else "1"
    return "\t".join([str(index), form, form, upos, xpos, "_", head, "dep", "_", "_"])


def sentence(*words: tuple[str, str] | tuple[str, str, str]) -> list[str]:
    """A CoNLL-U sentence of ``(form, upos[, xpos])`` words with consecutive IDs."""
    return ["# sent_id = made-up", *(word(i, *w) for i, w in enumerate(words, start=1))]


def conllu(*sentences: list[str]) -> str:
    return "".join("\n".join(lines) + "\n\n" for lines in sentences)


def ud_sentences(count: int) -> str:
    """``count`` made-up sentences, the i-th starting with the word ``s<i>`` (to see the order)."""
    return conllu(
        *(
            sentence((f"s{i}", "PROPN", "NNP"), ("glorped", "VERB", "VBD"), (".", "PUNCT", "."))
            for i in range(count)
        )
    )


class DataDirFixture:
    """A data dir under ``tmp_path`` whose manifest records whatever the test writes or expects."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "data"
        self.root.mkdir()
        self.manifest = tmp_path / "checksums.tsv"
        self.rows: dict[str, tuple[str, str]] = {}
        self._write_manifest()

    def add(self, relative: str, text: str) -> Path:
        """Write a file into the data dir and record its SHA-256."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.rows[relative] = (checksums.sha256(text.encode()), "")
        self._write_manifest()
        return path

    def expect_blob(self, relative: str, content: bytes) -> None:
        """Record only the git blob hash of a file that is not in the data dir (like a missing train file)."""
        self.rows[relative] = ("", checksums.git_blob(content))
        self._write_manifest()

    def load(self, name: str, **options: object) -> data.Dataset:
        return data.load(name, self.root, checksums_path=self.manifest, **options)

    def _write_manifest(self) -> None:
        lines = ["# test manifest", "\t".join(checksums.COLUMNS)]
        lines += [f"{path}\t{sha}\t{blob}" for path, (sha, blob) in self.rows.items()]
        self.manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")


def kept_type(
    tags: tuple[str, ...],
    allowed_sets: tuple[frozenset[str], ...],
    types: tuple[str, ...] = ("LOC", "MISC", "ORG", "PER"),
) -> str:
    """The only annotated type of a partially annotated sentence, read off its allowed sets.

    Takes tags, not sentences, so that a failure on a real corpus shows no text.
    """
    kept = set()
    for tag, allowed in zip(tags, allowed_sets, strict=True):
        if len(allowed) == 1:
            kept.add(tag[2:])
        else:
            kept |= {label for label in types if f"B-{label}" not in allowed}
    (label,) = kept
    return label


def no_temporary_files(directory: Path) -> bool:
    return not [name for name in os.listdir(directory) if name.endswith(".part")]
