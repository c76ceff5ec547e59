"""Reading dependency trees from CoNLL-U: syntactic words, heads, punctuation, errors, proxies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crfbench.data import checksums, ud
from crfbench.data.location import Source
from crfbench.parsing import treebank

from ..data.corpora import GSD_ZH, DataDirFixture


def line(index: str | int, form: str, upos: str, head: str | int) -> str:
    return "\t".join([str(index), form, form, upos, "_", "_", str(head), "dep", "_", "_"])


# "Zorbs blicken fnord ." with a multiword token (2-3) and an empty node (3.1).
SENTENCE = [
    "# sent_id = t1",
    line(1, "Zorbs", "PROPN", 2),
    "2-3\tblicken\t_\t_\t_\t_\t_\t_\t_\t_",
    line(2, "blick", "VERB", 0),
    line(3, "en", "PART", 2),
    "3.1\tfnord\tfnord\tVERB\t_\t_\t_\t_\t2:conj\t_",
    line(4, ".", "PUNCT", 2),
]
SHORT = ["# sent_id = t2", line(1, "Quux", "NOUN", 0), line(2, "!", "PUNCT", 1)]


def text(*sentences: list[str]) -> str:
    return "".join("\n".join(lines) + "\n\n" for lines in sentences)


def source(content: str) -> Source:
    return Source("made-up.conllu", Path("/made/up.conllu"), content, checksums.sha256(content.encode()))


def test_reads_syntactic_words_heads_and_punctuation():
    first, second = treebank.read_parses(source(text(SENTENCE, SHORT)))
    assert first.words == ("Zorbs", "blick", "en", ".")
    assert first.upos == ("PROPN", "VERB", "PART", "PUNCT")
    assert first.heads == (2, 0, 2, 2)
    assert first.punct == (False, False, False, True)
    assert len(first) == 4
    assert second.heads == (0, 1) and second.punct == (False, True)


@pytest.mark.parametrize(
    ("bad", "where", "message"),
    [
        (line(4, ".", "PUNCT", "x"), 7, "expected a HEAD in 0..4, found 'x'"),
        (line(4, ".", "PUNCT", 9), 7, "expected a HEAD in 0..4, found '9'"),
        (line(4, ".", "PUNCT", 0), 2, "not a single-root tree: 2 words attach to the root"),
        (line(4, ".", "PUNCT", 4), 2, "not a single-root tree: word 4 is its own head"),
        ("4\t.\t.\tPUNCT\t_\t_\t2\tdep\t_", 7, "expected 10 tab-separated columns, found 9"),
    ],
)
def test_malformed_sentences_name_file_and_line(bad, where, message):
    lines = [*SENTENCE[:-1], bad]
    with pytest.raises(ValueError, match=re.escape(f"/made/up.conllu:{where}:") + ".*" + re.escape(message)):
        treebank.read_parses(source(text(lines)))


def test_a_cycle_is_refused():
    cyclic = ["# sent_id = c", line(1, "a", "NOUN", 2), line(2, "b", "NOUN", 1), line(3, "c", "VERB", 0)]
    with pytest.raises(ValueError, match=re.escape("/made/up.conllu:2:") + ".*words 1, 2 form a cycle"):
        treebank.read_parses(source(text(cyclic)))


def test_missing_train_split_gives_a_proxy_dataset(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.add(GSD_ZH.format("dev"), text(*[SHORT] * 10))
    fixture.add(GSD_ZH.format("test"), text(SENTENCE))
    with pytest.warns(ud.SubstituteProtocolWarning):
        data = treebank.load("zh", fixture.root, download=False, checksums_path=fixture.manifest)
    assert data.proxy and data.protocol.startswith("substitute")
    assert (len(data.train), len(data.dev), len(data.test)) == (9, 1, 1)
    assert data.name == "ud-parse-zh"
    facts = data.describe()
    assert facts["proxy"] is True and facts["words"] == {"train": 18, "dev": 2, "test": 4}
    assert data.cut(2, 0).train == data.train[:2] and data.cut(2, 0).test == ()


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown parsing dataset 'ro'; valid datasets: en, vi, zh, ja"):
        treebank.load("ro")
