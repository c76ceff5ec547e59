"""Where corpus files live and how they are read: the data dir, verified reads, downloads.

Every file is addressed by its path relative to the data dir (the layout of the shared data mirror,
e.g. ``ud-2.15/UD_English-EWT/en_ewt-ud-dev.conllu``) and checked against the checksum manifest
before use, whether it was on disk or just downloaded.
"""

from __future__ import annotations

import http.client
import os
import tempfile
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

from . import checksums

ENV_VAR = "CRFBENCH_DATA"
DOWNLOAD_TIMEOUT_S = 10.0


def resolve_data_dir(configured: str | os.PathLike[str] | None) -> Path:
    """The data dir: ``configured`` if given, else the environment variable ``CRFBENCH_DATA``."""
    if configured is not None and str(configured):
        return _folder(Path(configured).expanduser(), "data dir")
    from_env = os.environ.get(ENV_VAR, "")
    if from_env:
        return _folder(Path(from_env).expanduser(), ENV_VAR)
    raise ValueError(
        "no data dir: set it in the configuration (the data_dir argument / config value) or in the "
        f"environment variable {ENV_VAR}; it is the folder holding ud-2.15/ and conll2003/"
    )


def _folder(path: Path, what: str) -> Path:
    """``path``, unless it is an existing file (NotADirectoryError naming it and where it came from)."""
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{path}: the {what} is a file, not a folder")
    return path


class DownloadError(OSError):
    """A download that did not complete (no network, timeout, HTTP error, bad URL)."""


@dataclass(frozen=True)
class Source:
    """A verified corpus file: its path relative to the data dir, where it lies, its text and SHA-256."""

    relative: str
    path: Path
    text: str
    sha256: str


class DataDir:
    """Verified access to the corpus files under ``root``, checked against the manifest at ``manifest``."""

    def __init__(self, root: Path, manifest: Path = checksums.DEFAULT_MANIFEST) -> None:
        self.root = Path(root)
        self.manifest = checksums.read_manifest(manifest)

    def path(self, relative: str) -> Path:
        return self.root / relative

    def read(self, relative: str) -> Source | None:
        """The file, verified; None when it does not exist."""
        try:
            content = self.path(relative).read_bytes()
        except FileNotFoundError:
            return None
        return self._source(relative, content)

    def download(self, relative: str, url: str, timeout: float = DOWNLOAD_TIMEOUT_S) -> Source:
        """Fetch ``url``, verify it as ``relative``, then store it there atomically.

        DownloadError when the transfer fails; ValueError (from the verification) when the content is
        not the expected file, in which case nothing is written. A verified file that cannot be stored
        (read-only data dir) is still returned, with a warning.
        """
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                content = response.read()
        except (OSError, http.client.HTTPException, ValueError) as error:
            raise DownloadError(f"download of {url} failed: {error}") from error
        source = self._source(relative, content)
        try:
            write_atomic(self.path(relative), content)
        except OSError as error:
            warnings.warn(f"{relative}: verified download could not be stored: {error}", stacklevel=2)
        return source

    def _source(self, relative: str, content: bytes) -> Source:
        path = self.path(relative)
        digest = checksums.verify(relative, content, self.manifest, shown=str(path))
        try:
            text = content.decode("utf-8-sig")  # a leading byte order mark is not part of the text
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: not UTF-8 text (byte {error.start})") from None
        return Source(relative, path, text, digest)


def write_atomic(target: Path, content: bytes) -> None:
    """Write ``content`` to a temporary file beside ``target``, then rename it over ``target``.

    Readers never see a partial file, and an interrupted write leaves no file at ``target``.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(content)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
