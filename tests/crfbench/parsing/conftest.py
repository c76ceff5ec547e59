"""The parser tests' shared fixture: a few English-EWT sentences."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crfbench.data import ud
from crfbench.data.location import DataDir
from crfbench.parsing import treebank


@pytest.fixture(scope="session")
def ewt_dev() -> treebank.ParseData:
    """30 training, 20 dev and 20 test sentences, all from English-EWT's dev file."""
    root = os.environ.get("CRFBENCH_DATA", "")
    source = DataDir(Path(root)).read(ud.TREEBANKS["en"].file("dev")) if root else None
    if source is None:
        pytest.skip("English-EWT's dev file is not in $CRFBENCH_DATA")
    parses = tuple(treebank.read_parses(source)[:70])
    return treebank.ParseData("en", parses[:30], parses[30:50], parses[50:], "standard", {})
