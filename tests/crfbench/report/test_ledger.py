"""The claim ledger on synthetic per-sentence counts whose differences are known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crfbench.report import ledger
from crfbench.report.claims import (
    CELL_COLUMNS,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REPRODUCED,
    SUPERVISED,
)
from crfbench.report.ledger import accuracy_cells, claim_ledger, ledger_csv, round_verdict
from crfbench.report.paired import paired_difference
from crfbench.report.verdicts import VERDICT_RULE

TASKS = {"ud-pos-en": "pos", "ud-seg-zh": "seg", "ud-seg-ja": "seg", "conll03-ner": "ner"}
COUNTS = ("tokens", "correct", "gold_spans", "predicted_spans", "matched_spans", "invalid")


def _sentences(runs: dict[str, dict[str, np.ndarray]], dataset: str = "ud-pos-en", seeds=(0, 1, 2)):
    """Per-sentence rows of each run "loss/decoder", the same counts for every seed (absent: 0)."""
    frames = []
    for run, counts in runs.items():
        loss, decoder = run.split("/")
        size = len(counts["tokens"])
        for seed in seeds:
            columns = {name: counts.get(name, np.zeros(size, int)) for name in COUNTS}
            frames.append(
                pd.DataFrame(
                    {"dataset": dataset, "encoder_name": "L0", "loss": loss, "seed": seed, "split": "test"}
                    | {"decoder": decoder, "sentence": np.arange(size)}
                    | columns
                )
            )
    return pd.concat(frames, ignore_index=True)


NO_SENTENCES = pd.DataFrame(
    columns=["dataset", "encoder_name", "loss", "seed", "split", "decoder", "sentence", *COUNTS]
)


def _claims(*rows: tuple[str, str, str]) -> pd.DataFrame:
    """A claims.csv with rows (id, paper, kind)."""
    return pd.DataFrame(
        [
            {
                "id": claim_id,
                "paper": paper,
                "claim": f"claim {claim_id}",
                "comparison": "",
                "paper_evidence": "",
            }
            | {"paper_difference": "about 0", "kind": kind}
            for claim_id, paper, kind in rows
        ]
    )


def _timing(device: str, crf: float = 2.0, bcrf: float = 1.0, mode: str = "compiled") -> pd.DataFrame:
    """Train timings of crf and bcrf (10 iterations), three rounds, on ud-pos-en/L0, in ``mode``."""
    rows = [
        {
            "dataset": "ud-pos-en",
            "encoder_name": "L0",
            "kind": "train",
            "name": name,
            "mode": mode,
            "iterations": iterations,
        }
        | {"round": round_, "seconds": seconds * (1 + 0.1 * round_), "device": device}
        | {"device_name": "", "revision": "abc1234"}
        for name, iterations, seconds in (("crf", np.nan, crf), ("bcrf", 10.0, bcrf))
        for round_ in range(3)
    ]
    return pd.DataFrame(rows)


NO_TIMING = _timing("cpu").iloc[:0]


def _cell(cells: pd.DataFrame, claim: str, metric: str | None = None) -> pd.Series:
    chosen = cells[(cells["claim"] == claim) & ((cells["metric"] == metric) if metric else True)]
    assert len(chosen) == 1
    return chosen.iloc[0]


def _pos_runs(rng: np.random.Generator, size: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (multiples of 10) and correct counts of a good run, with room to lose 10% per sentence."""
    tenths = rng.integers(1, 4, size)
    return 10 * tenths, rng.integers(tenths, 10 * tenths + 1)


def test_identical_runs_match_exactly_and_beat_nothing():
    tokens, correct = _pos_runs(np.random.default_rng(0))
    same = {"tokens": tokens, "correct": correct}
    runs = {"crf/viterbi": same, "crf/bcrf-10": same, "crf/meanfield-10": same}
    cells = accuracy_cells(_sentences(runs), TASKS)
    matches, beats = _cell(cells, "bcrf-2"), _cell(cells, "bcrf-3")  # bcrf-10 vs viterbi, vs meanfield-10
    assert (matches["difference"], matches["ci_low"], matches["ci_high"]) == (0.0, 0.0, 0.0)
    assert (matches["n_seeds"], matches["n_sentences"], matches["metric"]) == (3, 200, "accuracy")
    assert matches["verdict"] == REPRODUCED
    assert beats["verdict"] == "not reproduced"  # "beats" with no difference at all


def test_ten_points_worse_breaks_a_match_and_proves_a_loss():
    tokens, correct = _pos_runs(np.random.default_rng(1))
    good, worse = (
        {"tokens": tokens, "correct": correct},
        {"tokens": tokens, "correct": correct - tokens // 10},
    )
    runs = {"crf/viterbi": good, "crf/bcrf-10": worse, "unstructured/argmax": worse, "crf/meanfield-10": good}
    cells = accuracy_cells(_sentences(runs), TASKS)
    for claim, expected in (("bcrf-2", CONTRADICTED), ("bcrf-6", REPRODUCED), ("bcrf-3", CONTRADICTED)):
        cell = _cell(cells, claim)
        assert cell["difference"] == pytest.approx(-10.0)
        assert cell["ci_low"] == pytest.approx(-10.0) and cell["ci_high"] == pytest.approx(-10.0)
        assert cell["verdict"] == expected, claim


def test_accuracy_is_a_ratio_of_sums_and_f1_uses_span_sums():
    pos = _sentences(
        {
            "crf/viterbi": {
                "tokens": np.array([1, 9]),
                "correct": np.array([0, 9]),
            },  # 90%, mean of ratios 50%
            "crf/bcrf-10": {"tokens": np.array([1, 9]), "correct": np.array([1, 7])},  # 80%
        },
        seeds=(0,),
    )
    spans = {"tokens": np.array([5, 5]), "gold_spans": np.array([3, 1])}
    seg = _sentences(
        {
            "crf/viterbi": spans | {"predicted_spans": np.array([2, 2]), "matched_spans": np.array([2, 1])},
            "crf/bcrf-10": spans | {"predicted_spans": np.array([4, 0]), "matched_spans": np.array([1, 0])},
        },
        dataset="ud-seg-zh",
        seeds=(0,),
    )
    cells = accuracy_cells(pd.concat([pos, seg]), TASKS).set_index("dataset")
    assert cells.loc["ud-pos-en", "difference"] == pytest.approx(100 * (8 / 10 - 9 / 10))
    f1_viterbi, f1_bcrf = 2 * 3 / (4 + 4), 2 * 1 / (4 + 4)
    assert cells.loc["ud-seg-zh", "metric"] == "f1"
    assert cells.loc["ud-seg-zh", "difference"] == pytest.approx(100 * (f1_bcrf - f1_viterbi))


def test_violation_rate_is_compared_beside_f1_on_segmentation():
    size = 100
    spans = {"tokens": np.full(size, 4), "gold_spans": np.full(size, 2), "predicted_spans": np.full(size, 2)}
    viterbi = spans | {"matched_spans": np.full(size, 2)}
    meanfield = spans | {"matched_spans": np.full(size, 1), "invalid": np.arange(size) % 2}
    cells = accuracy_cells(
        _sentences({"crf/viterbi": viterbi, "crf/meanfield-10": meanfield}, "ud-seg-zh"), TASKS
    )
    f1, violations = _cell(cells, "bcrf-4", "f1"), _cell(cells, "bcrf-4", "violations")
    assert f1["difference"] == pytest.approx(-50.0) and f1["verdict"] == REPRODUCED
    assert violations["difference"] == pytest.approx(50.0) and violations["verdict"] == REPRODUCED
    assert violations["ci_low"] < 50 < violations["ci_high"]  # which sentences break constraints varies


def _noisy_pair(rng: np.random.Generator, size: int, seeds: int = 3) -> tuple[np.ndarray, ...]:
    """Two runs sharing each sentence's difficulty; B misses one more token on a tenth of sentences."""
    tokens = np.full((seeds, size), 20.0)
    correct_a = np.round(tokens * rng.uniform(0.3, 1.0, size))
    correct_b = correct_a - (rng.uniform(size=(seeds, size)) < 0.1)
    return correct_a, tokens, correct_b, tokens


def _width(low_high: tuple[float, float, float]) -> float:
    return low_high[2] - low_high[1]


def test_interval_narrows_with_more_sentences():
    rng = np.random.default_rng(2)
    small, large = _noisy_pair(rng, 100), _noisy_pair(rng, 1600)
    assert _width(paired_difference(*large)) < _width(paired_difference(*small)) / 2


def test_pairing_cancels_what_both_sides_share():
    correct_a, tokens, correct_b, _ = _noisy_pair(np.random.default_rng(3), 400)
    paired = paired_difference(correct_a, tokens, correct_b, tokens)
    unpaired = paired_difference(
        correct_a, tokens, np.roll(correct_b, 1, axis=1), tokens
    )  # B's sentences shifted
    assert paired[0] == pytest.approx(unpaired[0])  # same corpus totals, same point estimate
    assert _width(paired) < _width(unpaired) / 4


def test_only_seeds_and_sentences_of_both_sides_are_paired():
    tokens, correct = _pos_runs(np.random.default_rng(4), 50)
    viterbi = _sentences({"crf/viterbi": {"tokens": tokens, "correct": correct}}, seeds=(0, 1, 2))
    bcrf = _sentences({"crf/bcrf-10": {"tokens": tokens, "correct": correct}}, seeds=(1, 2, 3))
    cell = _cell(accuracy_cells(pd.concat([viterbi, bcrf[bcrf["sentence"] != 7]]), TASKS), "bcrf-2")
    assert (cell["n_seeds"], cell["n_sentences"]) == (2, 49)


def test_the_bootstrap_is_reproducible_to_the_byte():
    correct_a, tokens, correct_b, _ = _noisy_pair(np.random.default_rng(5), 300)
    runs = {"crf/viterbi": {"tokens": tokens[0], "correct": correct_a[0]}}
    runs["crf/bcrf-10"] = {"tokens": tokens[0], "correct": correct_b[0]}
    sentences, claims = _sentences(runs), _claims(("bcrf-2", "bcrf", "accuracy"))
    first, second = (claim_ledger(claims, sentences, NO_TIMING, TASKS) for _ in range(2))
    assert [ledger_csv(table) for table in first] == [ledger_csv(table) for table in second]
    assert ledger_csv(first[1]).splitlines()[0] == ",".join(CELL_COLUMNS)
    other_seed = claim_ledger(claims, sentences, NO_TIMING, TASKS, seed=1)[1]
    assert other_seed["ci_low"].iloc[0] != first[1]["ci_low"].iloc[0]


def test_summary_of_testable_and_untestable_claims():
    tokens, correct = _pos_runs(np.random.default_rng(6))
    same = {"tokens": tokens, "correct": correct}
    claims = _claims(
        ("bcrf-2", "bcrf", "accuracy"),
        ("bcrf-4", "bcrf", "accuracy"),
        ("bcrf-9", "bcrf", "speed-gpu"),
        ("sparsemap-1", "sparsemap", "accuracy"),
        ("bethe-3", "bethe", "speed"),
        ("newton-1", "newton", "speed"),
    )
    sentences = _sentences({"crf/viterbi": same, "crf/bcrf-10": same})
    summary, cells = claim_ledger(claims, sentences, _timing("cpu"), TASKS)
    rows = summary.set_index("claim")
    assert list(summary["claim"]) == list(claims["id"])
    assert tuple(rows.loc["bcrf-2", ["our_range", "n_cells", "verdict", "reason"]]) == (
        "+0.0",
        1,
        REPRODUCED,
        "",
    )
    assert tuple(rows.loc["bcrf-4", ["verdict", "reason"]]) == (
        NOT_TESTABLE,
        "no cell of ud-seg-zh, ud-seg-ja in this profile has both crf/meanfield-10 and crf/viterbi",
    )
    assert tuple(rows.loc["sparsemap-1", ["verdict", "reason"]]) == (
        NOT_TESTABLE,
        "no parser run in this profile has sparsemap or m-sparsemap and crf or ssvm on dev and test; its "
        f"proxy: no cell of {', '.join(SUPERVISED)} in this profile has both sparsemap/viterbi and "
        "crf/viterbi or m-sparsemap/viterbi and crf/viterbi",
    )
    assert tuple(rows.loc["bcrf-9", ["our_range", "verdict", "reason"]]) == (
        "CPU compiled, vs sequential: x2.00 (3 rounds: x2.00)",
        NOT_TESTABLE,
        "GPU claim, CPU run",
    )
    assert tuple(rows.loc["bethe-3", ["verdict", "reason"]]) == (
        NOT_TESTABLE,
        "the CGM experiment (crfbench bethe cgm) did not run in this profile",
    )
    assert tuple(rows.loc["newton-1", ["verdict", "reason"]]) == (
        NOT_TESTABLE,
        "the Newton cost sweep (crfbench newton cost) did not run in this profile",
    )
    assert set(cells["claim"]) == {"bcrf-2"}


def test_gpu_speed_claims_are_judged_on_cuda_timings():
    claims = _claims(("bcrf-9", "bcrf", "speed-gpu"))
    timing = pd.concat([_timing("cpu", crf=1.0, bcrf=2.0), _timing("cuda:0", crf=3.0, bcrf=1.0)])
    row = claim_ledger(claims, NO_SENTENCES, timing, TASKS)[0].iloc[0]
    assert (row["our_range"], row["verdict"], row["reason"]) == (
        "cuda:0 compiled, vs sequential: x3.00 (3 rounds: x3.00)",
        REPRODUCED,
        "verdict vs sequential; vs sequential: reproduced",
    )
    # the GPU named where the timing table records it
    named = timing.assign(device_name=timing["device"].map({"cpu": "AMD EPYC", "cuda:0": "NVIDIA H200"}))
    row = claim_ledger(claims, NO_SENTENCES, named, TASKS)[0].iloc[0]
    assert (row["our_range"], row["verdict"]) == (
        "NVIDIA H200 compiled, vs sequential: x3.00 (3 rounds: x3.00)",
        REPRODUCED,
    )


def test_gpu_speed_verdicts_rest_on_compiled_timings_alone():
    """Eager GPU timings measure kernel launches: beside compiled ones they are shown, never
    judged; alone they leave the claim pending a compiled run, with the revisions they came from."""
    claims = _claims(("bcrf-9", "bcrf", "speed-gpu"))
    eager = _timing("cuda:0", crf=1.0, bcrf=4.0, mode="eager")
    both = pd.concat([eager, _timing("cuda:0", crf=3.0, bcrf=1.0)])
    row = claim_ledger(claims, NO_SENTENCES, both, TASKS)[0].iloc[0]
    assert row["our_range"] == (
        "cuda:0 compiled, vs sequential: x3.00 (3 rounds: x3.00); "
        "cuda:0 eager, vs sequential: x0.25 (3 rounds: x0.25)"
    )
    assert (row["n_cells"], row["verdict"]) == (1, REPRODUCED)
    row = claim_ledger(claims, NO_SENTENCES, eager, TASKS)[0].iloc[0]
    assert (row["our_range"], row["verdict"]) == (
        "cuda:0 eager, vs sequential: x0.25 (3 rounds: x0.25)",
        NOT_TESTABLE,
    )
    assert row["reason"] == "pending a compiled GPU run (eager timings at abc1234)"


def _baseline_timing(name: str, seconds: list[float]) -> pd.DataFrame:
    """Compiled CUDA train timings of the baseline ``name``, one round per entry of ``seconds``, as
    ``_timing``'s."""
    base = _timing("cuda:0")
    rows = base[base["name"] == "crf"].iloc[: len(seconds)]
    return rows.assign(name=name, seconds=seconds, round=range(len(seconds)))


def test_gpu_speed_verdicts_per_baseline():
    """One verdict per baseline implementation: the claim's is the sequential one's, the others are
    given beside it; a baseline slower in every round is beaten, one faster in every round is not."""
    claims = _claims(("bcrf-9", "bcrf", "speed-gpu"))
    timing = pd.concat(
        [
            _timing("cuda:0", crf=3.0, bcrf=1.0),  # bcrf rounds: 1.0, 1.1, 1.2 seconds
            _baseline_timing("crf-scan", [0.5, 0.5, 0.5]),  # faster than bcrf in every round
            _baseline_timing("pytorch-crf", [1.05, 1.5, 1.0]),  # the rounds disagree
        ]
    )
    row = claim_ledger(claims, NO_SENTENCES, timing, TASKS)[0].iloc[0]
    assert row["verdict"] == REPRODUCED
    assert row["reason"] == (
        "verdict vs sequential; vs sequential: reproduced; vs parallel scan: contradicted; "
        "vs pytorch-crf: inconclusive"
    )
    assert "vs parallel scan: x0.45 (3 rounds: x0.42 to x0.50)" in row["our_range"]
    # without the paper's baseline, the verdict is the first one timed
    row = claim_ledger(claims, NO_SENTENCES, timing[timing["name"] != "crf"], TASKS)[0].iloc[0]
    assert (row["verdict"], row["reason"].split(";")[0]) == (CONTRADICTED, "verdict vs parallel scan")


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.01, 3.0, REPRODUCED),
        (0.5, 0.99, CONTRADICTED),
        (0.9, 1.1, INCONCLUSIVE),
        (1.0, 1.0, INCONCLUSIVE),
    ],
)
def test_round_verdict(low, high, expected):
    assert round_verdict(low, high) == expected


def test_the_printed_rule_is_the_documented_one():
    assert " ".join(VERDICT_RULE.split()) in " ".join((ledger.__doc__ or "").split())


def test_torch_and_jax_timings_are_never_pooled():
    """JAX's rows (always jitted: mode compiled) get ratios of their own, beside torch's; both
    frameworks' compiled cells are judged."""
    claims = _claims(("bcrf-9", "bcrf", "speed-gpu"))
    torch_rows = _timing("cuda:0", crf=3.0, bcrf=1.0).assign(backend="torch")
    jax_rows = _timing("cuda:0", crf=1.0, bcrf=2.0).assign(backend="jax")
    row = claim_ledger(claims, NO_SENTENCES, pd.concat([torch_rows, jax_rows]), TASKS)[0].iloc[0]
    assert row["our_range"] == (
        "cuda:0 compiled, vs sequential: x3.00 (3 rounds: x3.00); "
        "cuda:0 jax compiled, vs sequential: x0.50 (3 rounds: x0.50)"
    )
    assert (row["n_cells"], row["verdict"]) == (2, "mixed")
