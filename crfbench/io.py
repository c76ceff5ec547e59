"""File input and output with user-facing errors.

Output is atomic: every file the engine writes is complete or absent, never half-written. Input
helpers read the files a user hands over (settings, results tables, saved models) and turn what is
wrong with them into one-line errors that name the file (and the line where its content is at
fault): ``FileNotFoundError``, ``IsADirectoryError``, ``NotADirectoryError`` for where a path
points, ``CorruptFileError`` for a truncated or damaged file. The command line reports those as a
user error (exit status 2), not a traceback.
"""

from __future__ import annotations

import csv
import glob
import gzip
import io
import json
import os
import pickle
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


class CorruptFileError(Exception):
    """A file that exists but is truncated, damaged or not the kind of file expected; the message
    names the file (``<file>: ...`` or ``<file>:<line>: ...``)."""


# -- where a path points ---------------------------------------------------------------------------


def _existing_ancestor_is_directory(path: Path) -> None:
    """NotADirectoryError when the nearest existing ancestor of ``path`` is not a folder."""
    for ancestor in path.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise NotADirectoryError(f"{path}: {ancestor} is not a directory")
            return
        if ancestor.is_symlink():  # a dangling link: mkdir would fail on it
            raise NotADirectoryError(f"{path}: {ancestor} is a broken symbolic link")


def check_output_file(path: Path) -> Path:
    """``path`` if a file can be written there (it is not a folder, and no file stands where a
    folder on the way must be); IsADirectoryError / NotADirectoryError naming it otherwise."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; expected the path of a file to write")
    _existing_ancestor_is_directory(path)
    return path


def check_output_dir(path: Path) -> Path:
    """``path`` if it is a folder or can be made one; NotADirectoryError naming it otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{path}: exists and is not a directory")
    _existing_ancestor_is_directory(path)
    return path


def check_input_file(path: Path) -> Path:
    """``path`` if it is an existing file; FileNotFoundError / IsADirectoryError naming it otherwise."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, not a file")
    if not path.exists():
        _existing_ancestor_is_directory(path)
        raise FileNotFoundError(f"{path}: no such file")
    return path


def check_input_dir(path: Path) -> Path:
    """``path`` if it is an existing folder; FileNotFoundError / NotADirectoryError naming it otherwise."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such directory")
    if not path.is_dir():
        raise NotADirectoryError(f"{path}: is a file, not a directory")
    return path


# -- atomic output -------------------------------------------------------------------------------------


def _default_mode() -> int:
    """The permissions a newly created file gets under the current umask (mkstemp uses 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _replace_with(path: Path, write: Callable[[Path], object]) -> None:
    """Write through a temporary file in the same folder, then rename it onto ``path``.

    A writer killed outright (SIGKILL, or SIGTERM's default action: no ``except`` runs) leaves its
    temporary behind; the next write of the same file removes it, so a resumed run leaves nothing
    half-written. Each output has one writer at a time (Snakemake's jobs own their outputs)."""
    check_output_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f"{glob.escape(f'.{path.name}.')}*.tmp"):
        stale.unlink(missing_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(descriptor)
    try:
        write(Path(temporary))
        os.chmod(temporary, _default_mode())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that ``path`` is complete or absent."""
    _replace_with(Path(path), lambda temporary: temporary.write_text(text))


def write_csv(path: Path, table: pd.DataFrame) -> None:
    """Write ``table`` (no index) atomically; gzip-compressed when ``path`` ends in ``.gz``, with
    no time stamp in the gzip header, so that equal tables give equal bytes."""
    text = table.to_csv(index=False)
    if Path(path).suffix != ".gz":
        write_atomic(path, text)
        return
    content = gzip.compress(text.encode("utf-8"), mtime=0)
    save_atomic(path, lambda temporary: temporary.write_bytes(content))


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` as indented JSON, atomically."""
    write_atomic(path, json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


def save_atomic(path: Path, save: Callable[[Path], object]) -> None:
    """Run ``save(temporary_path)`` (e.g. a figure's ``savefig``) and move the result onto ``path``."""
    _replace_with(Path(path), save)


def save_torch(path: Path, payload: Any) -> None:
    """``torch.save(payload)`` to ``path``, atomically and byte for byte reproducibly.

    Saved through an open file rather than the temporary file's (random) name, which ``torch.save``
    would otherwise write into the archive as its top folder: equal payloads give equal files.
    """
    import torch

    def save(temporary: Path) -> None:
        with temporary.open("wb") as handle:
            torch.save(payload, handle)

    _replace_with(Path(path), save)


# -- checked input ---------------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path`` (gunzipped when it ends in ``.gz``; a leading byte order mark
    dropped); one-line errors naming it."""
    path = check_input_file(path)
    content = path.read_bytes()
    if path.suffix == ".gz":
        try:
            content = gzip.decompress(content)
        except (OSError, EOFError) as error:
            raise CorruptFileError(f"{path}: not a whole gzip file ({error})") from None
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CorruptFileError(f"{path}: not UTF-8 text (byte {error.start})") from None


def read_json(path: Path) -> Any:
    """The JSON value in ``path``; CorruptFileError ``<file>:<line>: ...`` when it is not JSON."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CorruptFileError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None


#: What ``torch.load`` raises on a truncated or damaged file (or one that is not a torch file).
_TORCH_LOAD_ERRORS = (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, OSError)


def load_torch(path: Path, map_location: Any = None, *, mmap: bool = False) -> Any:
    """``torch.load(path)`` (full pickles: files the engine wrote; ``mmap``: tensors memory-mapped,
    read from disk as they are used); CorruptFileError naming the file when it is truncated or
    damaged, FileNotFoundError when it is absent."""
    import torch

    path = check_input_file(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=False, mmap=mmap)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except _TORCH_LOAD_ERRORS as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0].split(". ")[0][:100]
        raise CorruptFileError(f"{path}: truncated or corrupt PyTorch file (torch.load: {reason})") from None


def check_fields(path: Path, payload: Any, fields: tuple[str, ...]) -> Any:
    """``payload`` if it is a mapping holding ``fields``; CorruptFileError naming ``path`` otherwise."""
    if not isinstance(payload, dict):
        raise CorruptFileError(f"{path}: expected a mapping, found {type(payload).__name__}")
    missing = [name for name in fields if name not in payload]
    if missing:
        raise CorruptFileError(f"{path}: missing field(s) {', '.join(missing)}")
    return payload


def read_csv(path: Path, *, complete: bool = True, allow_empty: bool = False, **options: Any) -> pd.DataFrame:
    """The CSV table in ``path`` (``options`` go to ``pandas.read_csv``), checked to be whole.

    CorruptFileError naming the file (and line) when it is empty, has no data row (unless
    ``allow_empty``: a header alone is then an empty table), a header with an empty or repeated
    name, a row with another number of fields than the header, a quoted field that never ends, or
    (``complete``, for files the engine writes) a last line without a line end: what a truncated
    copy looks like.
    """
    import pandas as pd

    text = read_text(path)
    if not text.strip():
        raise CorruptFileError(f"{path}: empty file; expected a CSV table with a header row")
    if complete and not text.endswith(("\n", "\r")):
        line = text.count("\n") + 1
        raise CorruptFileError(f"{path}:{line}: the last line has no line end (a truncated file?)")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows = 0
    try:
        header = next(reader)
        names = [name.strip() for name in header]
        if "" in names or len(set(names)) != len(names):
            raise CorruptFileError(f"{path}:1: expected a header of distinct, non-empty column names")
        for record in reader:
            if not record:
                continue  # a blank line
            if len(record) != len(header):
                raise CorruptFileError(
                    f"{path}:{reader.line_num}: expected {len(header)} fields as in the header, "
                    f"found {len(record)} (a truncated or damaged row)"
                )
            rows += 1
    except csv.Error as error:
        raise CorruptFileError(f"{path}:{reader.line_num}: not valid CSV ({error})") from None
    if not rows and not allow_empty:
        raise CorruptFileError(f"{path}: no data rows after the header (a truncated file?)")
    return pd.read_csv(io.StringIO(text), **options)


def numeric_column(path: Path, table: pd.DataFrame, name: str, *, required: bool = False) -> pd.Series:
    """Column ``name`` of the table read from ``path`` as numbers; CorruptFileError naming the
    file line of the first cell that is not a number. An empty cell is NaN unless ``required``."""
    import pandas as pd

    cells = table[name]
    numbers = pd.to_numeric(cells, errors="coerce")
    bad = numbers.isna() & (cells.notna() | required)
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise CorruptFileError(f"{path}:{row + 2}: column {name} must be a number, found {cells.iloc[row]!r}")
    return numbers
