"""What a long job writes while it runs: one line per step worth reading (an epoch's loss, dev
score, learning rate and seconds), always, on stderr, which the pipeline's rules send to the job's
log; and a progress bar only where someone watches it, when stderr is a terminal (a bar redrawn
into a log file is noise)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TypeVar

from tqdm.auto import tqdm

ItemT = TypeVar("ItemT")


def log(line: str) -> None:
    """Write ``line`` to stderr, above any live progress bar."""
    tqdm.write(line, file=sys.stderr)


def progress_bar(items: Iterable[ItemT], description: str, *, progress: bool = True) -> Iterable[ItemT]:
    """``items`` with a transient progress bar on a terminal when ``progress`` asks for one."""
    return tqdm(items, desc=description, disable=not (progress and sys.stderr.isatty()), leave=False)
