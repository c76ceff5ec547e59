"""Verdict rule v2 on constructed cells: every word of the vocabulary, the conservative choice
between the sentence bootstrap and the seed-level interval, the margin, the MDE and the
sensitivity table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from crfbench.report.claims import (
    CELL_COLUMNS,
    CONTRADICTED,
    INCONCLUSIVE,
    MIXED,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
    REPRODUCED_IN_DIRECTION,
)
from crfbench.report.ledger import claim_ledger
from crfbench.report.paired import accuracy_cells
from crfbench.report.paper_difference import PaperRange, parse_paper_difference
from crfbench.report.verdicts import (
    MDE_FACTOR,
    SENSITIVITY_FACTORS,
    cell_verdict,
    claim_margin,
    claim_verdict,
    judge_cells,
    minimum_detectable_effect,
    overall_verdict,
    seed_interval,
    sensitivity_table,
    underpowered,
)

PAPER_ZERO = PaperRange(-0.8, 0.3, False)  # bcrf-1's POS/seg range: the paper calls these "equal"
PAPER_GAIN = PaperRange(9.1, 14.3, False)  # bcrf-3's segmentation gain


@pytest.mark.parametrize(
    ("expect", "low", "high", "paper", "expected"),
    [
        ("equal", -0.9, 0.9, PAPER_ZERO, REPRODUCED),
        ("equal", 1.1, 3.0, PAPER_ZERO, CONTRADICTED),  # a difference beyond the margin
        ("equal", -3.0, -1.1, None, CONTRADICTED),
        ("equal", 0.4, 1.5, PAPER_ZERO, NOT_REPRODUCED),  # excludes 0 and the paper's own range
        ("equal", 0.2, 1.5, PAPER_ZERO, underpowered(0.7)),  # overlaps the paper's range
        ("equal", -0.5, 1.5, PAPER_ZERO, underpowered(0.7)),
        ("higher", 10.0, 12.0, PAPER_GAIN, REPRODUCED),
        ("higher", 20.0, 25.0, PAPER_GAIN, REPRODUCED_IN_DIRECTION),
        ("higher", 0.1, 0.4, None, REPRODUCED),  # no stated size: the direction is the claim
        ("higher", -2.0, -0.1, PAPER_GAIN, CONTRADICTED),
        ("higher", -0.5, 9.0, PAPER_GAIN, NOT_REPRODUCED),  # the paper's gain is ruled out
        ("higher", -0.5, 10.0, PAPER_GAIN, underpowered(0.7)),
        ("higher", -0.3, 0.9, None, NOT_REPRODUCED),  # no paper size: the margin (1) is ruled out
        ("lower", -25.0, -20.0, PaperRange(-13.0, -9.6, False), REPRODUCED_IN_DIRECTION),
        ("lower", 0.1, 2.0, PaperRange(-4.4, -2.3, False), CONTRADICTED),
        ("lower", -1.0, 0.2, PaperRange(-4.4, -2.3, False), NOT_REPRODUCED),
        ("lower", -3.0, 0.2, PaperRange(-4.4, -2.3, False), underpowered(0.7)),
        ("higher", 0.5, 1.0, PaperRange(2.0, 3.0, True), REPRODUCED),  # a ratio is no size in points
    ],
)
def test_each_word_of_the_vocabulary(expect, low, high, paper, expected) -> None:
    assert cell_verdict(expect, low, high, paper, margin=1.0, mde=0.7) == expected


def test_an_underpowered_cell_states_its_mde() -> None:
    assert underpowered(1.2345) == "inconclusive (underpowered: MDE 1.23)"


def _cell(**values: object) -> dict[str, object]:
    """A judged-to-be accuracy cell: the sentence interval [-0.5, 0.5] unless given."""
    base = dict.fromkeys(CELL_COLUMNS, np.nan) | {"claim": "bcrf-1", "expect": "equal", "metric": "accuracy"}
    base |= {"difference": 0.0, "ci_low": -0.5, "ci_high": 0.5, "mde": 1.0, "margin": 1.0}
    return base | values


def test_the_verdict_takes_the_more_conservative_of_the_two_intervals() -> None:
    """The sentence bootstrap excludes 0, the seed-level interval does not: the verdict is what
    both support (inconclusive), not what the narrower one alone would give."""
    cells = pd.DataFrame(
        [
            _cell(expect="higher", ci_low=0.2, ci_high=1.8),  # one seed: the bootstrap alone
            _cell(expect="higher", ci_low=0.2, ci_high=1.8, seed_low=-1.0, seed_high=3.0),
            _cell(expect="equal", ci_low=-0.5, ci_high=0.5, seed_low=-0.6, seed_high=0.7),
            _cell(expect="equal", ci_low=-0.5, ci_high=0.5, seed_low=-1.5, seed_high=0.7),
        ]
    )
    judged = judge_cells(cells)
    assert list(judged["verdict"]) == [REPRODUCED, underpowered(1.0), REPRODUCED, underpowered(1.0)]
    assert list(judged["direction"]) == ["> 0", "spans 0", "spans 0", "spans 0"]


def test_magnitude_compares_the_paper_difference_of_the_cell() -> None:
    cells = pd.DataFrame(
        [
            _cell(
                expect="lower", difference=-1.4, ci_low=-2.2, ci_high=-0.4, paper_low=-4.4, paper_high=-2.3
            ),
            _cell(
                expect="lower", difference=-3.0, ci_low=-3.5, ci_high=-2.5, paper_low=-4.4, paper_high=-2.3
            ),
            _cell(expect="equal"),  # the paper gives no difference in points
        ]
    )
    judged = judge_cells(cells)
    assert list(judged["contains_paper"]) == ["no", "yes", ""]
    assert judged["ratio"].iloc[0] == pytest.approx(-1.4 / -3.35)
    assert math.isnan(judged["ratio"].iloc[2])
    assert list(judged["verdict"]) == [REPRODUCED_IN_DIRECTION, REPRODUCED, REPRODUCED]


def test_seed_interval_is_a_t_interval_over_seeds() -> None:
    low, high, error = seed_interval([1.0, 2.0, 3.0])
    assert error == pytest.approx(1 / math.sqrt(3))
    assert (low + high) / 2 == pytest.approx(2.0)
    assert (high - low) / 2 == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)  # t(0.975, 2 df)
    assert all(math.isnan(value) for value in seed_interval([1.0]))  # no spread with one seed


def test_mde_uses_the_wider_standard_error() -> None:
    assert pytest.approx(1.959964 + 0.841621, rel=1e-6) == MDE_FACTOR
    assert minimum_detectable_effect(-1.959964, 1.959964, math.nan) == pytest.approx(MDE_FACTOR)
    assert minimum_detectable_effect(-1.959964, 1.959964, 0.5) == pytest.approx(MDE_FACTOR)
    assert minimum_detectable_effect(-1.959964, 1.959964, 2.0) == pytest.approx(2 * MDE_FACTOR)


def test_the_margin_spans_the_paper_and_the_seed_spread() -> None:
    paper = parse_paper_difference("-0.8 to +0.3 (POS/seg; -0.2 on NER)")
    wide = claim_margin("equal", paper, [0.3, 0.35, 2.5, np.nan])  # median 0.35: the paper's 0.8 wins
    assert (wide.value, wide.paper, wide.seed_sd) == pytest.approx((0.8, 0.8, 0.35))
    assert wide.derivation() == "0.80 = max(paper 0.80, 2 × seed SD 0.35)"
    noisy = claim_margin("equal", paper, [0.6, 0.5, 2.5])  # median 0.6: two seed SDs win
    assert noisy.value == pytest.approx(1.2)
    directional = claim_margin("higher", paper, [0.6])  # the paper's differences are no margin there
    assert directional.value == pytest.approx(1.2) and directional.derivation() == "1.20 = 2 × seed SD 0.60"
    assert claim_margin("equal", None, [np.nan]).value == 0.0


def test_per_seed_differences_feed_the_seed_level_interval() -> None:
    """A run A that is 10 points better on seed 0 only: the bootstrap over sentences and seeds is
    never below 0, the t interval over seeds spans 0, and the verdict follows it."""
    rows = []
    for seed in range(3):
        for run, loss, decoder in (("a", "crf", "bcrf-10"), ("b", "crf", "viterbi")):
            better = run == "a" and seed == 0
            rows += [
                {"dataset": "ud-pos-en", "encoder_name": "L0", "loss": loss, "seed": seed, "split": "test"}
                | {"decoder": decoder, "sentence": sentence, "tokens": 10, "correct": 9 if better else 8}
                | dict.fromkeys(("gold_spans", "predicted_spans", "matched_spans", "invalid"), 0)
                for sentence in range(50)
            ]
    cells = accuracy_cells(pd.DataFrame(rows), {"ud-pos-en": "pos"})
    cell = cells[cells["claim"] == "bcrf-2"].iloc[0]
    assert cell["difference"] == pytest.approx(10 / 3)
    low, high, _ = seed_interval([10.0, 0.0, 0.0])
    assert (cell["seed_low"], cell["seed_high"]) == pytest.approx((low, high))
    assert cell["b_seed_sd"] == 0.0  # B scores 80% on every seed
    assert cell["seed_low"] < 0 < cell["seed_high"] and cell["ci_low"] >= 0  # seeds drawn: all 0 or all 10
    assert cell["verdict"].startswith(INCONCLUSIVE)  # the seed-level interval spans 0


def test_the_sensitivity_table_judges_every_accuracy_cell_at_each_factor() -> None:
    cells = judge_cells(
        pd.DataFrame(
            [
                _cell(ci_low=-0.9, ci_high=0.9),  # inside a margin of 1, not of 0.5
                _cell(expect="higher", ci_low=0.5, ci_high=1.0),  # directional: the margin is moot
            ]
        )
    )
    table = sensitivity_table(cells)
    columns = [f"verdict at {factor:g} × margin" for factor in SENSITIVITY_FACTORS]
    assert list(table[columns].iloc[0]) == [underpowered(1.0), REPRODUCED, REPRODUCED]
    assert list(table[columns].iloc[1]) == [REPRODUCED] * 3
    assert (table["margin"] == 1.0).all()
    assert table[columns[1]].tolist() == cells["verdict"].tolist()  # 1 × margin: the ledger's verdicts


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([REPRODUCED, REPRODUCED], REPRODUCED),
        ([REPRODUCED, REPRODUCED_IN_DIRECTION], REPRODUCED_IN_DIRECTION),
        ([CONTRADICTED, CONTRADICTED], CONTRADICTED),
        ([CONTRADICTED, NOT_REPRODUCED], NOT_REPRODUCED),
        ([NOT_REPRODUCED, underpowered(1.0)], NOT_REPRODUCED),
        ([REPRODUCED, underpowered(1.0)], INCONCLUSIVE),
        ([REPRODUCED_IN_DIRECTION, CONTRADICTED], MIXED),
        ([REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE], MIXED),
    ],
)
def test_claim_verdict_rule(verdicts, expected) -> None:
    assert overall_verdict(verdicts) == expected


def test_an_inconclusive_claim_states_its_cells_mdes() -> None:
    cells = pd.DataFrame(
        {"verdict": [REPRODUCED, underpowered(0.5), underpowered(2.0)], "mde": [0.1, 0.5, 2.0]}
    )
    assert claim_verdict(cells) == "inconclusive (underpowered: MDE 0.50 to 2.00)"


def test_a_claim_of_a_method_not_built_is_not_testable() -> None:
    claims = pd.DataFrame(
        [{"id": "x-1", "paper": "other", "claim": "", "comparison": "", "paper_evidence": ""}]
    ).assign(paper_difference="+1.0", kind="accuracy")
    empty = pd.DataFrame(columns=["dataset", "encoder_name", "loss", "seed", "split", "decoder", "sentence"])
    summary, _ = claim_ledger(claims, empty, pd.DataFrame(columns=["kind", "device"]), {})
    assert summary["verdict"].iloc[0] == NOT_TESTABLE
