"""The checksum manifest of every corpus file the readers use, and hash verification.

``checksums.tsv`` (next to this module) has one row per file: its path relative to the data dir, its
SHA-256 and its git blob hash (``git hash-object``), either may be empty. The SHA-256 values come from
the data mirror's ``MANIFEST.tsv``; the UD train files missing from the mirror have only the blob hash
of their UD 2.15 release, which the data README records. A file must match every hash recorded for it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MANIFEST = Path(__file__).with_name("checksums.tsv")
COLUMNS = ("path", "sha256", "git_blob")


@dataclass(frozen=True)
class Expected:
    """The hashes a file must have; an empty string means "not recorded"."""

    sha256: str
    git_blob: str


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def git_blob(content: bytes) -> str:
    """The hash ``git hash-object`` prints: SHA-1 of ``b"blob <size>\\0" + content``."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def read_manifest(path: Path = DEFAULT_MANIFEST) -> dict[str, Expected]:
    """Relative path -> expected hashes. Lines starting with ``#`` are comments; the header is checked."""
    rows: dict[str, Expected] = {}
    header_seen = False
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if not header_seen:
            if tuple(cells) != COLUMNS:
                raise ValueError(f"{path}:{number}: expected the header {'<TAB>'.join(COLUMNS)}")
            header_seen = True
            continue
        if len(cells) != len(COLUMNS) or not (cells[1] or cells[2]):
            raise ValueError(
                f"{path}:{number}: expected a path and at least one hash in {len(COLUMNS)} columns"
            )
        rows[cells[0]] = Expected(cells[1], cells[2])
    return rows


def verify(relative: str, content: bytes, manifest: dict[str, Expected], shown: str | None = None) -> str:
    """Check ``content`` against the manifest's hashes for ``relative``; return its SHA-256.

    ValueError naming the file (as ``shown``, by default ``relative``), the expected and the actual
    hash on a mismatch, or when the manifest has no entry for the file.
    """
    shown = shown or relative
    expected = manifest.get(relative)
    if expected is None:
        raise ValueError(f"{shown}: no checksum recorded in the manifest; add it before reading the file")
    actual_sha256 = sha256(content)
    for kind, want, have in (
        ("SHA-256", expected.sha256, actual_sha256),
        ("git blob hash", expected.git_blob, expected.git_blob and git_blob(content)),
    ):
        if want and want != have:
            raise ValueError(
                f"{shown}: {kind} mismatch: expected {want}, actual {have} "
                "(a different version of the file, or a corrupt copy)"
            )
    return actual_sha256
