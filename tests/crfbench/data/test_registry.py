"""Dataset names and options of ``data.load``."""

from __future__ import annotations

import pytest

from crfbench import data


def test_dataset_names():
    assert data.DATASETS == (
        "ud-pos-nl", "ud-pos-en", "ud-pos-fr", "ud-pos-de", "ud-seg-zh", "ud-seg-ja",
        "conll03-ner", "conll03-ner-partial", "synthetic",
    )  # fmt: skip
    assert set(data.OPTIONS) == set(data.DATASETS)


def test_unknown_dataset_lists_the_valid_names(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'ud-pos-xx'; valid names: ud-pos-nl, ud-pos-en"):
        data.load("ud-pos-xx", tmp_path)


def test_unknown_option_is_named_with_the_valid_ones(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"unknown option.* colour, size for dataset 'ud-pos-en'; valid options: download, tags",
    ):
        data.load("ud-pos-en", tmp_path, size=3, colour="red")
    with pytest.raises(ValueError, match=r"unknown option.* tags for dataset 'conll03-ner'"):
        data.load("conll03-ner", tmp_path, tags="upos")


def test_download_must_be_a_bool(tmp_path):
    with pytest.raises(ValueError, match="download must be True or False"):
        data.load("ud-seg-ja", tmp_path, download="no")


def test_data_dir_comes_from_the_environment_when_not_given(monkeypatch, tmp_path):
    monkeypatch.delenv("CRFBENCH_DATA", raising=False)
    with pytest.raises(ValueError, match="CRFBENCH_DATA"):
        data.load("conll03-ner")
    monkeypatch.setenv("CRFBENCH_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        data.load("conll03-ner")


def test_synthetic_needs_no_data_dir(monkeypatch):
    monkeypatch.delenv("CRFBENCH_DATA", raising=False)
    assert len(data.load("synthetic", train=3, download=False).train) == 3
