"""Metrics against independent implementations (seqeval's strict IOBES matching) and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from seqeval.metrics import f1_score, precision_score, recall_score
from seqeval.scheme import IOBES

import implementations
from crfbench.data.types import TagSet
from crfbench.metrics import score, sentence_counts, span_scores, token_accuracy, violation_rate

LABELS = ("NOUN", "VERB")


@st.composite
def bies_sentence(draw: st.DrawFn, length: int | None = None) -> list[str]:
    """A valid BIES×label character tag sequence (words of 1 to 4 characters), of ``length`` if given."""
    remaining = draw(st.integers(1, 12)) if length is None else length
    tags: list[str] = []
    while remaining:
        label = draw(st.sampled_from(LABELS))
        size = draw(st.integers(1, min(4, remaining)))
        tags += [f"S-{label}"] if size == 1 else [f"B-{label}", *[f"I-{label}"] * (size - 2), f"E-{label}"]
        remaining -= size
    return tags


@st.composite
def gold_and_prediction(draw: st.DrawFn) -> tuple[list[list[str]], list[list[str]]]:
    """Pairs of equally long valid BIES sequences (several sentences)."""
    gold = draw(st.lists(bies_sentence(), min_size=1, max_size=4))
    return gold, [draw(bies_sentence(len(tags))) for tags in gold]


@given(gold_and_prediction())
def test_span_scores_match_seqeval_strict_iobes_on_valid_sequences(pair) -> None:
    """BIES tag names are IOBES names, so seqeval's strict mode is an independent oracle."""
    gold, predicted = pair
    ours = span_scores(gold, predicted)
    theirs = {
        "precision": precision_score(gold, predicted, mode="strict", scheme=IOBES),
        "recall": recall_score(gold, predicted, mode="strict", scheme=IOBES),
        "f1": f1_score(gold, predicted, mode="strict", scheme=IOBES),
    }
    assert ours == pytest.approx(theirs)


@given(st.lists(bies_sentence(), min_size=1, max_size=4))
def test_span_scores_are_perfect_on_gold(gold) -> None:
    assert span_scores(gold, gold) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


def test_a_word_with_the_right_span_but_wrong_label_is_wrong() -> None:
    scores = span_scores([["B-NOUN", "E-NOUN", "S-VERB"]], [["B-VERB", "E-VERB", "S-VERB"]])
    assert scores == pytest.approx({"precision": 0.5, "recall": 0.5, "f1": 0.5})


def test_token_accuracy_counts_tokens_not_sentences() -> None:
    assert token_accuracy([["a", "b", "c"], ["a"]], [["a", "x", "c"], ["x"]]) == pytest.approx(0.5)


def _bio_tagset() -> TagSet:
    tags = ("O", "B-PER", "I-PER")
    transitions = np.ones((3, 3), bool)
    transitions[0, 2] = False  # O -> I-PER
    start = np.array([True, True, False])
    return TagSet(tags, transitions, start, np.ones(3, bool))


def test_violation_rate_flags_forbidden_start_and_transition() -> None:
    tagset = _bio_tagset()
    predictions = [[0, 1, 2], [2, 2], [0, 2], [1]]  # ok, bad start, bad transition, ok
    assert violation_rate(predictions, tagset) == pytest.approx(0.5)


def test_ner_score_uses_entity_f1_and_reports_violations() -> None:
    tagset = _bio_tagset()
    gold = [["B-PER", "I-PER", "O"], ["O", "B-PER"]]
    predicted = [[1, 2, 0], [0, 2]]  # second: an I-PER after O (invalid; seqeval reads it as an entity)
    metrics = score("ner", tagset, gold, predicted)
    expected_f1 = f1_score(gold, [tagset.decode(ids) for ids in predicted])
    assert metrics["f1"] == pytest.approx(expected_f1)
    assert metrics["violations"] == pytest.approx(0.5)
    assert metrics["accuracy"] == pytest.approx(4 / 5)


def test_score_rejects_mismatched_counts() -> None:
    with pytest.raises(ValueError, match="2 gold sequences but 1 predictions"):
        score("pos", TagSet.unconstrained(["A"]), [["A"], ["A"]], [[0]])


def _summed(rows: list[dict[str, int]]) -> dict[str, float]:
    """Corpus metrics from per-sentence counts, as the claim ledger computes them."""
    total = {name: sum(row[name] for row in rows) for name in rows[0]}
    spans = total["gold_spans"] + total["predicted_spans"]
    return {
        "accuracy": total["correct"] / total["tokens"],
        "f1": 2 * total["matched_spans"] / spans if spans else 0.0,
        "violations": total["invalid"] / len(rows),
    }


@given(gold_and_prediction())
def test_sentence_counts_sum_to_the_corpus_scores_on_segmentation(pair) -> None:
    gold, predicted = pair
    tagset = TagSet.unconstrained(sorted({t for tags in gold + predicted for t in tags}))
    ids = [tagset.encode(tags) for tags in predicted]
    rows = sentence_counts("seg", tagset, gold, ids)
    corpus = score("seg", tagset, gold, ids)
    for name, value in _summed(rows).items():
        assert value == pytest.approx(corpus[name]), name


def test_sentence_counts_sum_to_seqeval_on_ner_even_for_invalid_sequences() -> None:
    tagset = _bio_tagset()
    gold = [["B-PER", "I-PER", "O"], ["O", "B-PER"], ["I-PER", "O"]]
    predicted = [[1, 2, 0], [0, 2], [2, 2]]  # an I-PER after O and at the start: seqeval reads entities
    rows = sentence_counts("ner", tagset, gold, predicted)
    corpus = score("ner", tagset, gold, predicted)
    assert [row["invalid"] for row in rows] == [0, 1, 1]
    for name, value in _summed(rows).items():
        assert value == pytest.approx(corpus[name]), name
    with pytest.raises(ValueError, match="3 gold sequences but 1 predictions"):
        sentence_counts("ner", tagset, gold, predicted[:1])


def test_argmax_can_outscore_viterbi_only_through_invalid_sequences() -> None:
    """Anomaly (a) of issue 12, its mechanism on a tiny BIO task: a model that has learned entity
    tokens as I-PER but not yet B-PER at entity starts (the under-trained BCRF NER model put 658
    test tokens on I-PER and none on B-PER) scores well by argmax only because seqeval's default
    mode reads an invalid "O I-PER" as an entity; Viterbi must respect O -> I-PER being forbidden,
    and with weak transition scores favouring O it gives up the entity altogether."""
    tagset = _bio_tagset()
    gold = [["O", "B-PER", "I-PER", "O"]] * 8
    emissions = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [2.0, 0.0, 0.0]]] * 8)
    transition_mask, start_mask, end_mask = (
        torch.as_tensor(m, dtype=torch.float32) for m in tagset.score_masks()
    )
    learned = torch.tensor([[0.5, -0.3, 0.0], [0.0, 0.0, -0.3], [0.3, 0.0, -0.3]])  # weak, favouring O
    chain = {"lengths": torch.full((8,), 4), "start": start_mask, "end": end_mask}
    argmax = (
        implementations.get("unstructured").decode(emissions, transition_mask, repair=False, **chain).tolist()
    )
    viterbi = implementations.get("crf").decode(emissions, transition_mask + learned, **chain).tolist()
    assert argmax[0] == [0, 2, 2, 0] and viterbi[0] == [0, 0, 0, 0]
    by_argmax, by_viterbi = score("ner", tagset, gold, argmax), score("ner", tagset, gold, viterbi)
    assert by_argmax["f1"] == 1.0 and by_argmax["violations"] == 1.0
    assert by_viterbi["f1"] == 0.0 and by_viterbi["violations"] == 0.0
