"""The committed reference run: reports/ is exactly what the report code makes of results/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crfbench.config import profile_digest

ROOT = Path(__file__).resolve().parents[2]
PAPER = Path(os.environ.get("CRFBENCH_DATA", ROOT.parent / "shared/data")) / "paper/bcrf_tables.csv"


@pytest.mark.skipif(not PAPER.exists(), reason="the paper's CSV is not in the data directory")
def test_committed_reports_are_regenerated_byte_for_byte_from_committed_results(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    command = [sys.executable, "-m", "crfbench", "report", "--results", str(ROOT / "results")]
    command += ["--paper", str(PAPER), "--notes", str(ROOT / "results/report-notes.json"), "--out", str(out)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    written = sorted(path.relative_to(out) for path in out.rglob("*") if path.is_file())
    assert written, "the report wrote nothing"
    for relative in written:
        assert (ROOT / "reports" / relative).read_bytes() == (out / relative).read_bytes(), relative
    assert json.loads((ROOT / "results/report-notes.json").read_text())["profile"] == "default"


def test_committed_notes_are_the_default_profiles() -> None:
    """The notes printed under the tables say what the profile did (seeds, cuts): they must be those
    of the config the committed results were made under, which the report job records as its digest
    (they once said 2 seeds for a 3-seed run). Results of an older config keep that config's notes
    until the default profile's reference run replaces them; a fresh clone then plans that run
    (test_fresh_clone.py)."""
    yaml = pytest.importorskip("yaml")
    validate = pytest.importorskip("snakemake.utils").validate
    profile = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    validate(profile, str(ROOT / "workflow/schemas/config.schema.yaml"))  # as the Snakefile: defaults in
    committed = json.loads((ROOT / "results/report-notes.json").read_text())
    if committed.get("config_digest") != profile_digest(profile):
        pytest.skip("the committed results are not the default profile's run (no matching digest)")
    assert {key: committed[key] for key in ("profile", "notes")} == {
        "profile": profile["profile"],
        "notes": profile["notes"],
    }


@pytest.mark.skipif(not (ROOT / "results/asv/benchmarks.json").exists(), reason="no committed asv results")
def test_committed_scaling_table_is_regenerated_from_committed_asv_results(tmp_path: Path) -> None:
    pytest.importorskip("asv")
    out = tmp_path / "scaling.csv"
    command = [
        sys.executable,
        "-m",
        "crfbench",
        "scaling",
        "--asv",
        str(ROOT / "results/asv"),
        "--out",
        str(out),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    assert out.read_bytes() == (ROOT / "results/scaling.csv").read_bytes()
