"""UD readers on made-up CoNLL-U: words, POS and BIES datasets, malformed files, missing files."""

from __future__ import annotations

import re

import pytest

from crfbench import data
from crfbench.data import checksums, schemes, ud

from .corpora import EWT, GSD_ZH, DataDirFixture, conllu, no_temporary_files, sentence, ud_sentences, word

# A sentence with a multiword token (2-3) and an empty node (3.1): three syntactic words.
WITH_MWT = [
    "# newdoc id = made-up-doc",
    "# sent_id = t1",
    "# text = Zorbs blicken.",
    word(1, "Zorbs", "PROPN", "NNP"),
    "2-3\tblicken\t_\t_\t_\t_\t_\t_\t_\t_",
    word(2, "blick", "VERB", "VB"),
    word(3, "en", "PART", "RP"),
    "3.1\tfnord\tfnord\tVERB\tVB\t_\t_\t_\t2:conj\t_",
    word(4, ".", "PUNCT", "."),
]
SECOND = sentence(("Quux", "NOUN", "NN"), ("!", "PUNCT", "."))


@pytest.fixture
def ewt(tmp_path) -> DataDirFixture:
    fixture = DataDirFixture(tmp_path)
    fixture.add(EWT.format("train"), conllu(WITH_MWT, SECOND))
    fixture.add(EWT.format("dev"), conllu(SECOND))
    fixture.add(EWT.format("test"), conllu(SECOND, WITH_MWT))
    return fixture


def test_pos_reads_syntactic_words_skipping_ranges_and_empty_nodes(ewt):
    dataset = ewt.load("ud-pos-en")
    assert dataset.name == "ud-pos-en" and dataset.task == "pos" and dataset.protocol == "standard"
    assert dataset.train[0].tokens == ("Zorbs", "blick", "en", ".")
    assert dataset.train[0].tags == ("PROPN", "VERB", "PART", "PUNCT")
    assert dataset.train[0].allowed is None
    assert [len(split) for split in (dataset.train, dataset.dev, dataset.test)] == [2, 1, 2]
    assert dataset.tagset.tags == schemes.UPOS and not dataset.tagset.constrained
    assert dataset.options == {"tags": "upos"}
    assert dataset.sources == {
        EWT.format(split): checksums.sha256((ewt.root / EWT.format(split)).read_bytes())
        for split in ("train", "dev", "test")
    }


def test_pos_xpos_inventory_is_the_sorted_union_of_the_splits(ewt):
    dataset = ewt.load("ud-pos-en", tags="xpos")
    assert dataset.tagset.tags == (".", "NN", "NNP", "RP", "VB")
    assert dataset.train[0].tags == ("NNP", "VB", "RP", ".")
    assert dataset.options == {"tags": "xpos"}


def test_pos_bad_tags_option(ewt):
    with pytest.raises(ValueError, match="'upos' or 'xpos'"):
        ewt.load("ud-pos-en", tags="lemma")


def test_french_has_no_xpos(tmp_path):
    with pytest.raises(ValueError, match="UD_French-GSD has no XPOS"):
        DataDirFixture(tmp_path).load("ud-pos-fr", tags="xpos")


def test_missing_xpos_is_reported_with_its_line(tmp_path):
    fixture = DataDirFixture(tmp_path)
    text = conllu(sentence(("Zorbs", "PROPN", "NNP"), ("blick", "VERB")))
    path = fixture.add(EWT.format("train"), text)
    fixture.add(EWT.format("dev"), text)
    fixture.add(EWT.format("test"), text)
    with pytest.raises(ValueError, match=re.escape(f"{path}:3: expected an XPOS tag")):
        fixture.load("ud-pos-en", tags="xpos")


def test_seg_tags_characters_with_bies_times_upos(tmp_path):
    fixture = DataDirFixture(tmp_path)
    text = conllu(WITH_MWT, SECOND)
    for split in ("train", "dev", "test"):
        fixture.add(GSD_ZH.format(split), text)
    dataset = fixture.load("ud-seg-zh")
    assert dataset.task == "seg" and len(dataset.tagset) == 68 and dataset.tagset.constrained
    first = dataset.train[0]
    assert first.tokens == tuple("Zorbsblicken.")
    assert first.tags == (
        ("B-PROPN", "I-PROPN", "I-PROPN", "I-PROPN", "E-PROPN")
        + ("B-VERB", "I-VERB", "I-VERB", "I-VERB", "E-VERB")
        + ("B-PART", "E-PART", "S-PUNCT")
    )
    assert data.bies_spans(first.tags) == [
        (0, 5, "PROPN"),
        (5, 10, "VERB"),
        (10, 12, "PART"),
        (12, 13, "PUNCT"),
    ]
    for split in (dataset.train, dataset.dev, dataset.test):
        for item in split:
            assert dataset.tagset.is_valid(dataset.tagset.encode(item.tags))


def test_seg_rejects_a_form_with_whitespace(tmp_path):
    fixture = DataDirFixture(tmp_path)
    text = conllu(["# sent_id = w", "\t".join(["1", "ab cd", "ab", "NOUN", "_", "_", "0", "root", "_", "_"])])
    for split in ("train", "dev", "test"):
        fixture.add(GSD_ZH.format(split), text)
    with pytest.raises(ValueError, match=re.escape(":2: expected a word form without whitespace")):
        fixture.load("ud-seg-zh")


MALFORMED = [
    # (what to put on the bad line, expected message after "<file>:<line>: ")
    ("1\tZorbs\tzorb\tPROPN\tNNP\t_\t0\troot\t_", "expected 10 tab-separated columns, found 9"),
    ("1\tZorbs\tzorb\tPROPN\tNNP\t_\t0\troot\t_\t_\t_", "expected 10 tab-separated columns, found 11"),
    ("one\tZorbs\tzorb\tPROPN\tNNP\t_\t0\troot\t_\t_", "'one' is not a valid ID"),
    ("_\tZorbs\tzorb\tPROPN\tNNP\t_\t0\troot\t_\t_", "expected an integer word ID"),
    ("1\tZorbs\tzorb\t_\tNNP\t_\t0\troot\t_\t_", "expected a UPOS tag (ADJ, ADP"),
    ("1\tZorbs\tzorb\tNOUNISH\tNNP\t_\t0\troot\t_\t_", "found 'NOUNISH'"),
    ("2\tZorbs\tzorb\tPROPN\tNNP\t_\t0\troot\t_\t_", "expected word ID 1, found 2"),
]


@pytest.mark.parametrize(("bad_line", "message"), MALFORMED)
def test_malformed_conllu_names_file_and_line(tmp_path, bad_line, message):
    fixture = DataDirFixture(tmp_path)
    lines = [*SECOND, "", "# sent_id = bad", bad_line, word(2, "blick", "VERB", "VB"), ""]
    bad_number = lines.index(bad_line) + 1
    path = fixture.add(EWT.format("dev"), "\n".join(lines) + "\n")
    fixture.add(EWT.format("test"), conllu(SECOND))
    with pytest.raises(ValueError, match=re.escape(f"{path}:{bad_number}: ") + ".*" + re.escape(message)):
        fixture.load("ud-pos-en", download=False)


def test_sentence_without_words_is_malformed(tmp_path):
    fixture = DataDirFixture(tmp_path)
    path = fixture.add(EWT.format("dev"), conllu(SECOND, ["# sent_id = empty", "# text = nothing"]))
    fixture.add(EWT.format("test"), conllu(SECOND))
    with pytest.raises(ValueError, match=re.escape(f"{path}:5: expected a sentence with at least one word")):
        fixture.load("ud-pos-en", download=False)


def test_missing_train_gives_the_substitute_protocol_with_a_warning(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.add(EWT.format("dev"), ud_sentences(20))
    fixture.add(EWT.format("test"), ud_sentences(3))
    with pytest.warns(data.SubstituteProtocolWarning, match="en_ewt-ud-train.conllu is missing"):
        dataset = fixture.load("ud-pos-en", download=False)
    assert dataset.protocol == (
        f"substitute: train=dev[:90%], dev=dev[90%:], test=test (train split missing: {EWT.format('train')})"
    )
    assert [item.tokens[0] for item in dataset.train] == [f"s{i}" for i in range(18)]
    assert [item.tokens[0] for item in dataset.dev] == ["s18", "s19"]
    assert len(dataset.test) == 3
    assert set(dataset.sources) == {EWT.format("dev"), EWT.format("test")}


@pytest.mark.parametrize("split", ["dev", "test"])
def test_missing_dev_or_test_is_an_error(tmp_path, split):
    fixture = DataDirFixture(tmp_path)
    for present in {"train", "dev", "test"} - {split}:
        fixture.add(EWT.format(present), ud_sentences(2))
    with pytest.raises(FileNotFoundError, match=rf"en_ewt-ud-{split}\.conllu is missing \(download=False\)"):
        fixture.load("ud-pos-en", download=False)


def test_missing_train_is_downloaded_verified_and_stored(tmp_path, monkeypatch):
    fixture = DataDirFixture(tmp_path)
    fixture.add(EWT.format("dev"), ud_sentences(2))
    fixture.add(EWT.format("test"), ud_sentences(2))
    train = ud_sentences(5).encode()
    fixture.expect_blob(EWT.format("train"), train)
    remote = tmp_path / "remote" / "UD_English-EWT" / "r2.15" / "en_ewt-ud-train.conllu"
    remote.parent.mkdir(parents=True)
    remote.write_bytes(train)
    monkeypatch.setattr(ud, "UD_BASE_URL", (tmp_path / "remote").as_uri())
    dataset = fixture.load("ud-pos-en")
    assert dataset.protocol == "standard" and len(dataset.train) == 5
    stored = fixture.root / EWT.format("train")
    assert stored.read_bytes() == train and no_temporary_files(stored.parent)
    assert dataset.sources[EWT.format("train")] == checksums.sha256(train)


def test_download_with_the_wrong_content_is_an_error(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.add(EWT.format("dev"), ud_sentences(2))
    fixture.add(EWT.format("test"), ud_sentences(2))
    fixture.expect_blob(EWT.format("train"), ud_sentences(5).encode())
    remote = tmp_path / "remote" / "UD_English-EWT" / "r2.15" / "en_ewt-ud-train.conllu"
    remote.parent.mkdir(parents=True)
    remote.write_text(ud_sentences(4))
    store = data.location.DataDir(fixture.root, fixture.manifest)
    with pytest.raises(ValueError, match="git blob hash mismatch"):
        ud.read_splits(store, ud.TREEBANKS["en"], base_url=(tmp_path / "remote").as_uri())
    assert not (fixture.root / EWT.format("train")).exists()


def test_failed_download_falls_back_to_the_substitute_and_says_why(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.add(EWT.format("dev"), ud_sentences(10))
    fixture.add(EWT.format("test"), ud_sentences(2))
    store = data.location.DataDir(fixture.root, fixture.manifest)
    empty = (tmp_path / "empty-remote").as_uri()
    with pytest.warns(data.SubstituteProtocolWarning, match="download of file://"):
        splits = ud.read_splits(store, ud.TREEBANKS["en"], base_url=empty)
    assert splits.protocol.startswith("substitute:") and (len(splits.train), len(splits.dev)) == (9, 1)
