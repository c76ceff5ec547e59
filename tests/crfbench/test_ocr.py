"""The OCR reader and the Table 4 experiment (``crfbench.data.ocr``, ``crfbench.bethe.ocr``) on
synthetic 16 × 8 words: a small dictionary of words whose letters are noisy copies of random
binary letter prototypes, so that the chain CRF alone makes mistakes that knowing the dictionary
(the template energies, the word classifier) can fix. The real data never enters a test."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from crfbench.bethe import ocr
from crfbench.data.ocr import LETTERS, PIXELS, Word, parse_ocr, read_ocr

DICTIONARY = ("cab", "bad", "dab", "face", "cafe", "bead", "faded", "ebbed")


def synthetic_words(count: int, flip: float, seed: int) -> list[Word]:
    """``count`` words drawn from :data:`DICTIONARY`, each letter its prototype with every pixel
    flipped with probability ``flip``; folds 0..9 in turn."""
    rng = np.random.default_rng(seed)
    prototypes = rng.random((len(LETTERS), PIXELS)) < 0.3
    words = []
    for index in range(count):
        tags = np.array([LETTERS.index(c) for c in DICTIONARY[rng.integers(len(DICTIONARY))]])
        pixels = prototypes[tags] ^ (rng.random((len(tags), PIXELS)) < flip)
        words.append(Word(pixels.astype(np.float32), tags, fold=index % 10, word_id=index + 1))
    return words


def letter_data(words: list[Word]) -> list[str]:
    """``words`` as the lines of Taskar's ``letter.data``."""
    lines, letter_id = [], 1
    for word in words:
        for position, (tag, pixels) in enumerate(zip(word.tags, word.pixels, strict=True), start=1):
            next_id = -1 if position == len(word.tags) else letter_id + 1
            head = [letter_id, LETTERS[tag], next_id, word.word_id, position, word.fold]
            fields = [str(value) for value in head] + [str(int(p)) for p in pixels]
            lines.append("\t".join(fields) + "\t\n")
            letter_id += 1
    return lines


# ------------------------------------------------------------------------------ the reader


def test_reader_round_trip(tmp_path: Path) -> None:
    words = synthetic_words(12, flip=0.1, seed=0)
    path = tmp_path / "letter.data"
    path.write_text("".join(letter_data(words)), encoding="ascii")
    got = read_ocr(path)
    assert len(got) == len(words)
    for want, have in zip(words, got, strict=True):
        assert have.pixels.dtype == np.float32 and have.pixels.shape == (len(want.tags), PIXELS)
        np.testing.assert_array_equal(have.pixels, want.pixels)
        np.testing.assert_array_equal(have.tags, want.tags)
        assert (have.fold, have.word_id, have.text) == (want.fold, want.word_id, want.text)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (1, "A", "not one of a..z"),
        (10, "2", "pixel is not 0 or 1"),
        (5, "x", "must be integers"),
        (5, "12", "fold 12"),
        (4, "3", "does not continue word"),
        (None, None, "tab-separated fields"),
    ],
)
def test_a_malformed_line_is_named(field: int | None, value: str | None, message: str) -> None:
    """Line 5 is the second letter of the second word (the first word has 3 letters)."""
    words = [Word(np.zeros((n, PIXELS), np.float32), np.arange(n), 0, i + 1) for i, n in enumerate((3, 4))]
    lines = letter_data(words)
    fields = lines[4].rstrip("\n").split("\t")
    if field is None:
        del fields[7]
    else:
        fields[field] = value
    lines[4] = "\t".join(fields) + "\n"
    with pytest.raises(ValueError, match=f"letter.data, line 5: .*{message}"):
        parse_ocr(lines, "letter.data")


def test_a_file_ending_inside_a_word_is_an_error() -> None:
    lines = letter_data([Word(np.zeros((3, PIXELS), np.float32), np.arange(3), 0, 1)])
    with pytest.raises(ValueError, match="ends inside word 1"):
        parse_ocr(lines[:2], "letter.data")


# ------------------------------------------------------------------------------ pieces


def test_mean_map_ignores_padding() -> None:
    words = synthetic_words(4, flip=0.2, seed=1)
    projection, phase = torch.randn(PIXELS, 16), torch.rand(16)
    together = ocr.pad(words, projection, phase).features
    alone = torch.cat([ocr.pad([word], projection, phase).features for word in words])
    torch.testing.assert_close(together, alone)
    assert together.shape == (4, 16)


def test_templates_and_their_indices() -> None:
    words = synthetic_words(40, flip=0.2, seed=2)
    bank = ocr.templates(words, length=6)
    distinct = sorted({tuple(word.tags.tolist()) for word in words})
    assert bank.one_hot.shape == (len(distinct), 6, 26)
    assert bank.lengths.tolist() == [len(tags) for tags in distinct]
    assert bank.counts[0].tolist() == np.bincount(distinct[0], minlength=26).tolist()
    padded = ocr.pad(words, torch.randn(PIXELS, 8), torch.rand(8))
    index = ocr.template_index(bank, padded)
    found = bank.one_hot[index].argmax(-1)
    for row, word in enumerate(words):
        assert found[row, : len(word.tags)].tolist() == word.tags.tolist()
    zzz = Word(np.zeros((3, PIXELS), np.float32), np.array([25, 25, 25]), 0, 1)
    stranger = ocr.pad([zzz], torch.ones(PIXELS, 8), torch.ones(8))
    assert ocr.template_index(bank, stranger).tolist() == [-1]


# ------------------------------------------------------------------------------ one fold

FAST = ocr.Settings(
    batch_size=16,
    patience=3,
    base_epochs=15,
    template_epochs=6,
    classifier_epochs=30,
    rff_features=64,
    iterations=10,
)


@pytest.fixture(scope="module")
def fold() -> tuple[pd.DataFrame, pd.DataFrame]:
    torch.set_num_threads(1)
    return ocr.run_fold(synthetic_words(300, flip=0.42, seed=3), test_fold=4, settings=FAST, seed=0)


@pytest.fixture(scope="module")
def table(fold: tuple[pd.DataFrame, pd.DataFrame]) -> pd.DataFrame:
    return fold[0]


def test_the_per_word_counts_sum_to_the_table(fold: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """One row per (model, test word), the word ids of fold 4, each model's counts summing to its
    character accuracy."""
    table, words = fold
    assert list(words.columns) == list(ocr.SENTENCE_COLUMNS)
    test_ids = [word.word_id for word in synthetic_words(300, flip=0.42, seed=3) if word.fold == 4]
    for model, rows in words.groupby("loss", sort=False):
        assert rows["sentence"].tolist() == test_ids
        assert rows["decoder"].iloc[0] == ocr.DECODERS[model]
        accuracy = float(table.set_index("model").loc[model, "char_accuracy"])
        assert 100 * rows["correct"].sum() / rows["tokens"].sum() == pytest.approx(accuracy)
    assert (words["dataset"] == "ocr-taskar").all() and (words["tokens"] >= words["correct"]).all()


def test_the_table_has_a_row_per_model(table: pd.DataFrame) -> None:
    assert list(table.columns) == list(ocr.COLUMNS)
    assert table["model"].tolist() == list(ocr.MODELS)
    assert (table["fold"] == 4).all()
    assert table["char_accuracy"].between(0, 100).all()
    energies = table["model"].isin(["Lu", "Lu-MM", "Lw", "Lw-MM"])
    assert table.loc[energies, "solver_iterations"].between(1, FAST.iterations).all()
    assert table.loc[~energies, "solver_iterations"].isna().all()
    assert (table.loc[energies, "psi"] >= 0).all()
    assert (table["epochs"] >= table["best_epoch"]).all() and (table["seconds"] > 0).all()


def test_the_dictionary_helps(table: pd.DataFrame) -> None:
    """The base model errs; the word energies and the word classifier, which know the dictionary,
    do better (L^u, counts only, at least as well as the base)."""
    accuracy = table.set_index("model")["char_accuracy"]
    assert 40 < accuracy["2gram-base"] < 95
    assert accuracy["Lw"] > accuracy["2gram-base"] + 3
    assert accuracy["Lw-MM"] > accuracy["2gram-base"] + 3
    assert accuracy["Lu"] >= accuracy["2gram-base"] - 1
    assert accuracy["Lu-MM"] >= accuracy["2gram-base"] - 1
    assert accuracy["55-class-classifier-MM"] > 50  # anagrams (bad, dab; face, cafe) share a mean map


def test_a_run_repeats_and_can_select_models() -> None:
    words = synthetic_words(120, flip=0.42, seed=4)
    settings = dataclasses.replace(FAST, models=("Lw", "55-class-classifier-MM"), template_epochs=2)
    first = ocr.run_fold(words, 1, settings, seed=5)[0]
    second = ocr.run_fold(words, 1, settings, seed=5)[0]
    assert first["model"].tolist() == ["Lw", "55-class-classifier-MM"]
    columns = ["char_accuracy", "dev_accuracy", "epochs", "psi", "solver_iterations"]
    pd.testing.assert_frame_equal(first[columns], second[columns])


def test_unknown_models_and_empty_folds_are_refused() -> None:
    words = synthetic_words(30, flip=0.3, seed=6)
    with pytest.raises(ValueError, match="unknown models"):
        ocr.run_fold(words, 0, dataclasses.replace(FAST, models=("Lz",)))
    with pytest.raises(ValueError, match="fold 11"):
        ocr.run_fold(words, 11, FAST)
