"""Atomic writers: complete or absent, and reproducible byte for byte."""

from __future__ import annotations

from pathlib import Path

import torch

from crfbench.io import save_torch


def test_equal_torch_payloads_give_equal_files(tmp_path: Path) -> None:
    """torch.save names the archive after the file it writes; the atomic write's temporary file has
    a random name, which made two saves of the same weights differ (found by the recovery test)."""
    payload = {"weights": torch.arange(6.0).reshape(2, 3), "epoch": 3}
    save_torch(tmp_path / "one.pt", payload)
    save_torch(tmp_path / "two.pt", payload)
    assert (tmp_path / "one.pt").read_bytes() == (tmp_path / "two.pt").read_bytes()
    assert torch.equal(torch.load(tmp_path / "one.pt")["weights"], payload["weights"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.pt", "two.pt"]  # no temporary left
