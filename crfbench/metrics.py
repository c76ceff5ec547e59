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

from .data import bies_spans
from .data.types import TagSet, Task

#: The number each task reports in the paper's Table 1.
PRIMARY_METRIC: dict[str, str] = {"pos": "accuracy", "seg": "f1", "ner": "f1"}


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
