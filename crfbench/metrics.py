"""Scores of predicted tag sequences: the paper's metric per task, plus constraint violations.

- POS: token accuracy.
- Segmentation + POS: F1 on words rebuilt from BIES×UPOS character tags, a word being correct when
  its (start, end, UPOS) matches a gold word (``data.bies_spans`` documents the rebuild of invalid
  sequences).
- NER: entity F1 from seqeval (conlleval-compatible default mode, IOB2).
Every task also reports token accuracy and the share of predicted sequences that break a
constraint of the tag set (forbidden first tag, transition or last tag).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from seqeval.metrics import f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities

from .data import bies_spans
from .data.types import TagSet, Task

#: The number each task reports in the paper's Table 1 (and dependency parsing's, the SparseMAP
#: paper's Table 1: unlabelled attachment, ``crfbench.parsing.metrics``).
PRIMARY_METRIC: dict[str, str] = {"pos": "accuracy", "seg": "f1", "ner": "f1", "parse": "uas"}


def token_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    correct = sum(g == p for gs, ps in zip(gold, predicted, strict=True) for g, p in zip(gs, ps, strict=True))
    total = sum(len(gs) for gs in gold)
    return correct / total if total else float("nan")


def span_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """Precision, recall and F1 of BIES-rebuilt (start, end, label) words, micro-averaged."""
    true_positives = predicted_count = gold_count = 0
    for gold_tags, predicted_tags in zip(gold, predicted, strict=True):
        gold_words = Counter(bies_spans(gold_tags))
        predicted_words = Counter(bies_spans(predicted_tags))
        true_positives += sum((gold_words & predicted_words).values())
        gold_count += sum(gold_words.values())
        predicted_count += sum(predicted_words.values())
    precision = true_positives / predicted_count if predicted_count else 0.0
    recall = true_positives / gold_count if gold_count else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict[str, float]:
    """seqeval's entity precision, recall and F1 (IOB2, default conlleval-like matching)."""
    gold, predicted = [list(tags) for tags in gold], [list(tags) for tags in predicted]
    return {
        "precision": precision_score(gold, predicted, zero_division=0),
        "recall": recall_score(gold, predicted, zero_division=0),
        "f1": f1_score(gold, predicted, zero_division=0),
    }


#: Per-sentence counts behind every corpus metric (:func:`sentence_counts`), so that a difference
#: of two decoders can be bootstrapped over sentences: accuracy = Σ correct / Σ tokens, span F1 =
#: 2 Σ matched / (Σ gold_spans + Σ predicted_spans), violations = mean of invalid.
SENTENCE_COUNTS = ("tokens", "correct", "gold_spans", "predicted_spans", "matched_spans", "invalid")


def _spans(task: Task, tags: Sequence[str]) -> Counter:
    """The scored units of a sentence: BIES words (seg), seqeval entities (ner), none (pos)."""
    if task == "seg":
        return Counter(bies_spans(tags))
    if task == "ner":  # seqeval's own reading, so that the sums give its corpus F1
        return Counter(get_entities(list(tags)))
    return Counter()


def tag_counts(task: Task, gold_tags: Sequence[str], predicted_tags: Sequence[str]) -> dict[str, int]:
    """The :data:`SENTENCE_COUNTS` of one sentence's predicted tag names but ``invalid`` (which
    needs a tag set)."""
    gold_units, predicted_units = _spans(task, gold_tags), _spans(task, predicted_tags)
    return {
        "tokens": len(gold_tags),
        "correct": sum(g == p for g, p in zip(gold_tags, predicted_tags, strict=True)),
        "gold_spans": sum(gold_units.values()),
        "predicted_spans": sum(predicted_units.values()),
        "matched_spans": sum((gold_units & predicted_units).values()),
    }


def sentence_counts(
    task: Task, tagset: TagSet, gold: Sequence[Sequence[str]], predicted_ids: Sequence[Sequence[int]]
) -> list[dict[str, int]]:
    """One dict of :data:`SENTENCE_COUNTS` per sentence; summed, they give :func:`score`'s metrics."""
    if len(gold) != len(predicted_ids):
        raise ValueError(f"sentence_counts: {len(gold)} gold sequences but {len(predicted_ids)} predictions")
    return [
        tag_counts(task, gold_tags, tagset.decode(ids)) | {"invalid": int(not tagset.is_valid(ids))}
        for gold_tags, ids in zip(gold, predicted_ids, strict=True)
    ]


def violation_rate(predicted_ids: Sequence[Sequence[int]], tagset: TagSet) -> float:
    """Share of sequences that break a start, transition or end constraint of ``tagset``."""
    if not predicted_ids:
        return float("nan")
    return sum(not tagset.is_valid(ids) for ids in predicted_ids) / len(predicted_ids)


def score(
    task: Task, tagset: TagSet, gold: Sequence[Sequence[str]], predicted_ids: Sequence[Sequence[int]]
) -> dict[str, float]:
    """Every metric of ``task`` for predicted tag ids against gold tag names (percentages as 0–1)."""
    if len(gold) != len(predicted_ids):
        raise ValueError(f"score: {len(gold)} gold sequences but {len(predicted_ids)} predictions")
    predicted = [tagset.decode(ids) for ids in predicted_ids]
    metrics = {"accuracy": token_accuracy(gold, predicted)}
    if task == "seg":
        metrics |= span_scores(gold, predicted)
    elif task == "ner":
        metrics |= entity_scores(gold, predicted)
    metrics["violations"] = violation_rate(predicted_ids, tagset)
    return metrics
