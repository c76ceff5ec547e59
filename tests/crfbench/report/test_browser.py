"""The HTML report as a browser sees it: headless Chromium loads it and finds every table and image.

Skipped where Chromium is not installed (Debian package ``chromium``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from crfbench.report import render_report

from .fixtures import write_paper, write_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed")


def test_the_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    render_report(write_results(tmp_path / "results"), write_paper(tmp_path / "paper.csv"), out)
    page = (out / "index.html").as_uri()
    profile = f"--user-data-dir={tmp_path / 'profile'}"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, profile, "--dump-dom", page],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count("<table") >= 6  # Tables 1a-1d, 2, 3 (+ V) as the browser parsed them
    for image in (out / "figures").glob("*.png"):
        assert f"figures/{image.name}" in dom
    screenshot = tmp_path / "page.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, profile, "--window-size=1200,2000", f"--screenshot={screenshot}", page],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert screenshot.stat().st_size > 10_000  # a rendered page, not a blank one
