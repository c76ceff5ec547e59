"""Atomic file output: every file the engine writes is complete or absent, never half-written."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _default_mode() -> int:
    """The permissions a newly created file gets under the current umask (mkstemp uses 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _replace_with(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in the same folder, then rename it onto ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
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


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` as indented JSON, atomically."""
    write_atomic(path, json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


def save_atomic(path: Path, save: Callable[[Path], None]) -> None:
    """Run ``save(temporary_path)`` (e.g. ``torch.save``) and move the result onto ``path``."""
    _replace_with(Path(path), save)
