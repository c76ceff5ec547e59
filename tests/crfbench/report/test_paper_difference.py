"""The paper's difference per cell, parsed from the free text of claims.csv's paper_difference."""

from __future__ import annotations

import pytest

from crfbench.report.paper_difference import PaperRange, parse_paper_difference


def _points(low: float, high: float) -> PaperRange:
    return PaperRange(low, high, ratio=False)


@pytest.mark.parametrize(
    ("text", "task", "expected"),
    [
        ("-0.6 to 0.0", "pos", _points(-0.6, 0.0)),  # untagged: every task
        ("-0.6 to 0.0", "ner", _points(-0.6, 0.0)),
        ("+1.00", "citation", _points(1.0, 1.0)),
        ("0.0", "ner", _points(0.0, 0.0)),
        ("about 0", "pos", _points(0.0, 0.0)),
        ("-0.2 to -5.5 (POS); -1.7 to -37.7 (seg); -0.3 (NER)", "seg", _points(-37.7, -1.7)),  # sorted
        ("-0.2 to -5.5 (POS); -1.7 to -37.7 (seg); -0.3 (NER)", "ner", _points(-0.3, -0.3)),
        ("-0.8 to +0.3 (POS/seg; -0.2 on NER)", "seg", _points(-0.8, 0.3)),  # a tag carrying a value
        ("-0.8 to +0.3 (POS/seg; -0.2 on NER)", "ner", _points(-0.2, -0.2)),
        ("-9.6 / -13.0", "seg", _points(-13.0, -9.6)),  # a list: the range it spans
        ("x15 / x34 / x49", "", PaperRange(15.0, 49.0, ratio=True)),
        ("x1.5 to x2.6 (NER); up to x10.4 on POS (uncertain)", "pos", PaperRange(1.0, 10.4, ratio=True)),
    ],
)
def test_each_form_of_the_claims_list(text: str, task: str, expected: PaperRange) -> None:
    parsed = parse_paper_difference(text)
    assert parsed is not None and parsed.for_task(task) == expected


def test_a_task_the_text_does_not_name_has_no_difference() -> None:
    parsed = parse_paper_difference("0.0 to +0.9 (POS); +9.1 to +14.3 (seg)")
    assert parsed is not None and parsed.for_task("ner") is None


@pytest.mark.parametrize("text", ["qualitative", "none", "9.8 mean", "", "x2 to 3", "-0.3 (verbs)"])
def test_text_that_states_no_difference_parses_to_none(text: str) -> None:
    assert parse_paper_difference(text) is None


def test_the_middle_of_a_range_is_what_a_ratio_divides_by() -> None:
    assert _points(-4.4, -2.3).middle == pytest.approx(-3.35)
