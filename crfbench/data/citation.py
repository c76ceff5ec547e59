"""The UMass citation field extraction dataset (Anzaroot & McCallum 2013) as tokens with
hierarchical BIO labels, in the style of Anzaroot et al. (2014).

**Files.** ``umass-citation/{training,dev,testing}.docs`` under the data dir
(``../shared/data/umass-citation/README.md``): UTF-8, one citation per line, no trailing newline;
tokens and XML-like tags separated by spaces, except that a tag may be glued to its neighbour
(``</thesis><institution>``, ``<language>(``), so each whitespace-separated chunk is split again
on tag boundaries.

**Markup.** :func:`parse_line` is strict: a closing tag must close the innermost open element,
every element must be closed by the end of the line, and a chunk that looks like a broken tag
(``</``, ``<x``, ``</<x>``) is an error; ``ValueError`` names the file and line. The distributed
files break these rules on 9 training, 5 dev and 5 test lines (overlapping elements such as
``<note> … </venue> </note>``, unclosed ``<venue>``, ``</<person-first>``), so :func:`read_docs`
can ``repair`` them instead, HTML-style: a closing tag that matches an open element further out
closes every element inside it too, a closing tag that matches no open element is dropped, a
broken tag fragment is dropped, and elements still open at the end of the line are closed there.
Each citation records whether it needed repair.

**Labels.** A token's *path* is the list of tags open around it, outermost first, with a tag
nested directly in a tag of the same name merged into it (``person/person`` is annotation debris,
8 training tokens). Its label is ``B-path`` if it starts a segment and ``I-path`` otherwise, a
segment being a maximal run of tokens in the same element at the path's depth (two adjacent
``person-last`` elements are two segments; text of ``venue`` before and after a ``booktitle``
child are two segments); ``O`` outside every tag. E.g. ``<authors> <person> <person-first> E.
</person-first> <person-last> Montroll , </person-last> </person> </authors>`` gives
``B-authors/person/person-first B-authors/person/person-last I-authors/person/person-last``.

**Bounding the label set.** :func:`label_scheme` keeps the paths that label at least
``min_segments`` segments in the training citations; any other path (rare, or unseen in training)
is replaced by its longest kept prefix (``venue/category/date/year`` → ``venue``), or by ``O`` when
no prefix is kept, before the B/I prefixes are assigned. Dev and test gold labels go through the
same map, so every split is scored in the training inventory.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .location import DataDir, resolve_data_dir

#: The three splits, as paths relative to the data dir.
FILES = {
    "train": "umass-citation/training.docs",
    "dev": "umass-citation/dev.docs",
    "test": "umass-citation/testing.docs",
}
OUTSIDE = "O"
_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_-]*)>")
_SEPARATOR = "/"

#: One open element: its tag name and its index in the citation (in opening order), which tells
#: two adjacent elements of the same name apart.
Element = tuple[str, int]


@dataclass(frozen=True)
class Citation:
    """One citation: ``tokens`` and, per token, the ``elements`` open around it (outermost first,
    same-name directly nested elements merged); ``repaired`` if its markup needed repair."""

    tokens: tuple[str, ...]
    elements: tuple[tuple[Element, ...], ...]
    repaired: bool = False


def _pieces(chunk: str) -> list[str]:
    """A whitespace-free chunk split into tags and the text between them."""
    pieces, position = [], 0
    for match in _TAG.finditer(chunk):
        if match.start() > position:
            pieces.append(chunk[position : match.start()])
        pieces.append(match.group(0))
        position = match.end()
    if position < len(chunk):
        pieces.append(chunk[position:])
    return pieces


def _is_fragment(piece: str) -> bool:
    """Whether a non-tag piece is a broken tag (``</…``, ``<x…``, ``…>`` after a ``<``), rather than a
    word that happens to contain ``<`` or ``>`` (``2 @0 < 2 @1``)."""
    return piece.startswith("</") or bool(re.match(r"<[A-Za-z_]", piece)) or ("<" in piece and ">" in piece)


class _Markup(ValueError):
    """A markup error inside one line (the caller adds the file and line)."""


def parse_line(line: str, *, repair: bool = False) -> Citation:
    """The citation on one line. Strict (``repair=False``): ``ValueError`` on a closing tag that
    does not close the innermost open element, an element left open, or a broken tag fragment;
    with ``repair``, the module docstring's rules fix those instead. ``ValueError`` for a line
    without tokens either way."""
    stack: list[Element] = []
    tokens: list[str] = []
    elements: list[tuple[Element, ...]] = []
    opened, repaired = 0, False

    def broken(message: str) -> None:
        nonlocal repaired
        if not repair:
            raise _Markup(message)
        repaired = True

    for piece in (piece for chunk in line.split() for piece in _pieces(chunk)):
        tag = _TAG.fullmatch(piece)
        if tag is None:
            if _is_fragment(piece):
                broken(f"broken tag {piece!r}")
                continue
            tokens.append(piece)
            elements.append(_merged(stack))
        elif not tag.group(1):
            stack.append((tag.group(2), opened))
            opened += 1
        else:
            names = [name for name, _ in stack]
            if names and names[-1] == tag.group(2):
                stack.pop()
                continue
            broken(f"</{tag.group(2)}> does not close the innermost open element {names[-1:] or 'none'}")
            if tag.group(2) in names:
                del stack[len(names) - 1 - names[::-1].index(tag.group(2)) :]
    if stack:
        broken(f"elements left open at the end of the line: {[name for name, _ in stack]}")
    if not tokens:
        raise _Markup("no tokens")
    return Citation(tuple(tokens), tuple(elements), repaired)


def _merged(stack: Sequence[Element]) -> tuple[Element, ...]:
    """The open elements with each element nested directly in one of the same name merged into it
    (the inner one's index is kept: its tokens are the ones being labelled)."""
    merged: list[Element] = []
    for element in stack:
        if merged and merged[-1][0] == element[0]:
            merged[-1] = element
        else:
            merged.append(element)
    return tuple(merged)


def parse_lines(lines: Iterable[str], source: str, *, repair: bool = False) -> list[Citation]:
    """Every line's citation; ``ValueError`` ``<source>:<line>: …`` on a bad line."""
    citations = []
    for number, line in enumerate(lines, start=1):
        try:
            citations.append(parse_line(line, repair=repair))
        except _Markup as error:
            raise ValueError(f"{source}:{number}: {error}") from None
    return citations


def read_docs(path: str | Path, *, repair: bool = False) -> list[Citation]:
    """The citations of one ``.docs`` file (see :func:`parse_line` for ``repair``)."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_lines(text.split("\n"), str(path), repair=repair)


def read_split(data_dir: str | Path | None, split: str, *, repair: bool = True) -> list[Citation]:
    """The ``split`` (train, dev or test) under the data dir (``data_dir``, else
    ``$CRFBENCH_DATA``), checked against the checksum manifest first; repaired by default, since
    the distributed files have malformed lines in every split."""
    if split not in FILES:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(FILES)}")
    root = resolve_data_dir(data_dir)
    source = DataDir(root).read(FILES[split])
    if source is None:
        raise FileNotFoundError(f"{root / FILES[split]}: the citation {split} file is missing")
    return parse_lines(source.text.split("\n"), str(source.path), repair=repair)


def path_of(elements: Sequence[Element]) -> str:
    """A token's path, e.g. ``authors/person/person-first`` (empty outside every tag)."""
    return _SEPARATOR.join(name for name, _ in elements)


@dataclass(frozen=True)
class LabelScheme:
    """The kept ``paths``: tag ``B-p``/``I-p`` for each, plus ``O``."""

    paths: tuple[str, ...]

    @property
    def tags(self) -> tuple[str, ...]:
        """``O``, then ``B-p``, ``I-p`` for each kept path in order (2·paths + 1 tags)."""
        return (OUTSIDE, *(f"{prefix}-{path}" for path in self.paths for prefix in "BI"))

    def depth(self, elements: Sequence[Element]) -> int:
        """How many of ``elements`` the token's label keeps: its longest kept path prefix (0: O)."""
        kept = set(self.paths)
        for depth in range(len(elements), 0, -1):
            if path_of(elements[:depth]) in kept:
                return depth
        return 0

    def labels(self, citation: Citation) -> tuple[str, ...]:
        """The citation's BIO path labels (module docstring)."""
        labels, previous = [], None
        for elements in citation.elements:
            depth = self.depth(elements)
            if depth == 0:
                labels.append(OUTSIDE)
                previous = None
                continue
            segment = elements[:depth]  # the element at the label's depth identifies the segment
            labels.append(f"{'I' if segment == previous else 'B'}-{path_of(segment)}")
            previous = segment
        return tuple(labels)


def segment_counts(citations: Iterable[Citation]) -> Counter[str]:
    """How many segments each full path labels (a run of tokens with the same innermost elements)."""
    counts: Counter[str] = Counter()
    for citation in citations:
        previous = None
        for elements in citation.elements:
            if elements and elements != previous:
                counts[path_of(elements)] += 1
            previous = elements
    return counts


def label_scheme(training: Iterable[Citation], min_segments: int = 5) -> LabelScheme:
    """The paths labelling at least ``min_segments`` training segments, most frequent first (ties
    by name), so the inventory is deterministic."""
    if min_segments < 1:
        raise ValueError(f"min_segments must be >= 1, got {min_segments}")
    counts = segment_counts(training)
    kept = [path for path, count in counts.items() if count >= min_segments]
    return LabelScheme(tuple(sorted(kept, key=lambda path: (-counts[path], path))))
