"""Atomic writers: complete or absent, and reproducible byte for byte."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from crfbench.io import CorruptFileError, read_csv, save_torch, write_csv, write_json


def test_equal_torch_payloads_give_equal_files(tmp_path: Path) -> None:
    """torch.save names the archive after the file it writes; the atomic write's temporary file has
    a random name, which made two saves of the same weights differ (found by the recovery test)."""
    payload = {"weights": torch.arange(6.0).reshape(2, 3), "epoch": 3}
    save_torch(tmp_path / "one.pt", payload)
    save_torch(tmp_path / "two.pt", payload)
    assert (tmp_path / "one.pt").read_bytes() == (tmp_path / "two.pt").read_bytes()
    assert torch.equal(torch.load(tmp_path / "one.pt")["weights"], payload["weights"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.pt", "two.pt"]  # no temporary left


def test_compressed_tables_are_reproducible_and_read_back_checked(tmp_path: Path) -> None:
    """A .gz table has no time stamp in its header (equal tables, equal bytes) and is read through
    the same whole-file checks as a plain CSV; a truncated one is refused naming it."""
    table = pd.DataFrame({"sentence": [0, 1, 2], "tokens": [5, 7, 1]})
    write_csv(tmp_path / "one.csv.gz", table)
    time.sleep(1.1)  # a gzip header would carry the second it was written in
    write_csv(tmp_path / "two.csv.gz", table)
    assert (tmp_path / "one.csv.gz").read_bytes() == (tmp_path / "two.csv.gz").read_bytes()
    pd.testing.assert_frame_equal(read_csv(tmp_path / "one.csv.gz"), table)
    damaged = tmp_path / "damaged.csv.gz"
    damaged.write_bytes((tmp_path / "one.csv.gz").read_bytes()[:-6])
    with pytest.raises(CorruptFileError, match=r"damaged.csv.gz: not a whole gzip file"):
        read_csv(damaged)


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path: Path) -> None:
    """A writer killed mid-write leaves ``.name.<random>.tmp``; writing ``name`` again removes it,
    and nothing else (another file's temporary, a look-alike name) is touched."""
    stale = tmp_path / ".train.json.6bbsrqsm.tmp"
    others = [tmp_path / ".other.json.abc.tmp", tmp_path / ".train.json.keep", tmp_path / "train.json.x.tmp"]
    for path in (stale, *others):
        path.write_text("half")
    write_json(tmp_path / "train.json", {"epoch": 1})
    assert not stale.exists() and all(path.exists() for path in others)
    assert json.loads((tmp_path / "train.json").read_text()) == {"epoch": 1}
