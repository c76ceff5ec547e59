"""The nightly tier's rules name what exists, and leave each test function cases in CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from . import tiers

ROOT = Path(__file__).resolve().parents[1]


def _collected(*args: str) -> set[str]:
    """The node ids ``pytest --collect-only`` lists with ``args`` (in a fresh process, one worker)."""
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "--collect-only", "-q", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.strip() for line in listed.splitlines() if "::" in line}


@pytest.fixture(scope="module")
def nightly() -> set[str]:
    return _collected("-m", "nightly")


@pytest.fixture(scope="module")
def ci() -> set[str]:
    return _collected()


def test_every_named_file_and_case_is_in_the_nightly_tier(nightly: set[str]) -> None:
    missing = [case for case in tiers.NIGHTLY_CASES if case not in nightly]
    assert not missing, f"tests/tiers.py names cases that do not exist: {missing}"
    files = {node.split("::", 1)[0] for node in nightly}
    named = tiers.NIGHTLY_FILES + tiers.JAX_NIGHTLY_FILES + (tiers.CROSS_BACKEND,)
    assert set(named) <= files


def test_ci_runs_no_nightly_case_and_keeps_a_case_of_each_function_with_a_nightly_one(
    nightly: set[str], ci: set[str]
) -> None:
    assert not nightly & ci
    function = lambda node: node.split("[", 1)[0]  # noqa: E731
    kept = {function(node) for node in ci}
    dropped = {function(node) for node in nightly if not node.startswith(tiers.NIGHTLY_FILES)}
    whole = sorted(dropped - kept)
    # Functions whose every case is nightly: a JAX-only test of a nightly file, or a single test.
    allowed = {function(case) for case in tiers.NIGHTLY_CASES if "[" not in case}
    assert all(name in allowed or "jax" in name for name in whole), whole
