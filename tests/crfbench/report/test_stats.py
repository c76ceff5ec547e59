"""Statistics over seeds and speed-ups, on tiny hand-made tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from crfbench.report.stats import (
    SPEEDUP_DTYPES,
    STAT_DTYPES,
    decode_speedups,
    over_seeds,
    score_stats,
    train_speedups,
)

from .fixtures import RUN, timing_rows


def _values(*pairs: tuple[str, float]) -> pd.DataFrame:
    keys = {
        "dataset": "ud-pos-en",
        "encoder": "L0",
        "device": "",
        "train": "crf",
        "decoder": "viterbi",
        "baseline": "",
    }
    return pd.DataFrame([keys | {"seed": seed, "value": value} for seed, value in pairs])


def test_each_seed_counts_once():
    stats = over_seeds(_values(("0", 1.0), ("0", 3.0), ("1", 4.0)))  # seed 0 re-run: its mean is 2.0
    row = stats.iloc[0]
    assert (row["mean"], row["n"]) == (3.0, 2)
    assert row["std"] == pytest.approx(math.sqrt(2))


def test_one_seed_has_no_std():
    assert math.isnan(over_seeds(_values(("0", 1.0)))["std"].iloc[0])


def test_empty_inputs_give_empty_statistics():
    columns = ["kind", "name", "iterations", "round", "seconds", "dataset", "encoder_name", "seed"]
    empty = pd.DataFrame(columns=columns).assign(device="", device_name="", mode="")
    for stats in (train_speedups(empty), decode_speedups(empty)):
        assert stats.empty and list(stats.columns) == list(SPEEDUP_DTYPES)
    stats = over_seeds(pd.DataFrame())
    assert stats.empty and list(stats.columns) == list(STAT_DTYPES)


def test_scores_use_the_test_split_and_the_table_metric():
    rows = [
        RUN
        | {"dataset": "ud-seg-zh", "encoder_name": "L0", "loss": "crf", "seed": "0", "decoder": "viterbi"}
        | {"split": split, "metric": metric, "value": value}
        for split, metric, value in [("test", "f1", 0.8), ("test", "accuracy", 0.9), ("dev", "f1", 0.1)]
    ]
    stats = score_stats(pd.DataFrame(rows))
    assert stats["mean"].tolist() == [pytest.approx(80.0)]


def _timing(rows: list[dict[str, object]]) -> pd.DataFrame:
    """Timing rows typed as ``inputs.read_results`` reads them."""
    timing = pd.DataFrame(rows)
    timing["seed"] = timing["seed"].astype(str)
    timing["iterations"] = pd.to_numeric(timing["iterations"])
    for column in ("device", "device_name", "dataset", "encoder_name"):
        timing[column] = timing[column].astype(str)
    return timing


def test_speedups_pair_timings_within_one_run():
    timing = _timing(timing_rows("A") + timing_rows("B", dataset="ud-pos-nl"))
    stats = train_speedups(timing).set_index(["dataset", "device", "train"])
    assert stats.loc[("ud-pos-en", "A", "bcrf"), "mean"] == pytest.approx(2.5)
    assert stats.loc[("ud-pos-nl", "B", "bcrf"), "n"] == 2
    assert "meanfield" not in stats.index.get_level_values("train")  # timed at 5 iterations only
    decode = decode_speedups(timing)
    assert decode["decoder"].unique().tolist() == ["meanfield-5"] and (decode["mean"] == 2.0).all()


def test_speedups_carry_the_spread_of_single_round_ratios():
    stats = train_speedups(_timing(timing_rows())).set_index("train").loc["bcrf"]
    # seed 0, rounds (crf / bcrf): 1.0/0.5, 2.0/1.0, 9.0/7.0; seed 1: 3.0/1.0 three times
    assert (stats["low"], stats["high"], stats["rounds"]) == (pytest.approx(9 / 7), 3.0, 6)
    assert stats["mean"] == pytest.approx(2.5)  # still the mean over seeds of the ratios of medians
    decode = decode_speedups(_timing(timing_rows())).iloc[0]
    assert (decode["low"], decode["high"], decode["rounds"]) == (0.02, 2.0, 3)  # 2/100 … 2/1


def test_rounds_pair_up_by_round_index():
    rows = [row for row in timing_rows() if row["kind"] == "decode" and row["round"] == 0]
    decode = decode_speedups(_timing(rows)).iloc[0]
    assert (decode["mean"], decode["low"], decode["high"], decode["rounds"]) == (2.0, 2.0, 2.0, 1)


def test_eager_and_compiled_timings_are_never_pooled():
    """A timing run's compiled rows pair with its compiled baseline, and the table's bracket label
    names the mode where the rows hold several (on one device: the mode alone)."""
    eager = timing_rows()
    compiled = [
        row | {"mode": "compiled"} | ({"seconds": row["seconds"] / 2} if row["name"] == "bcrf" else {})
        for row in eager
    ]
    stats = train_speedups(_timing(eager + compiled)).set_index(["device", "train"])
    assert stats.loc[("eager", "bcrf"), "mean"] == pytest.approx(2.5)
    assert stats.loc[("compiled", "bcrf"), "mean"] == pytest.approx(5.0)
    assert stats.loc[("compiled", "bcrf"), "rounds"] == 6  # its own rounds, not the eager ones too


def test_each_baseline_implementation_has_its_own_speedups():
    """The parallel-scan and pytorch-crf baselines are divided by as the sequential one is, each in
    rows of its own (``baseline``), within the same timing run and round."""
    rows = timing_rows()
    baselines = [
        row | {"name": name, "method": name, "seconds": row["seconds"] * factor}
        for row in rows
        if row["name"] == "crf"
        for name, factor in (("crf-scan", 0.5), ("pytorch-crf", 4.0))
    ]
    stats = train_speedups(_timing(rows + baselines)).set_index(["train", "baseline"])
    sequential = stats.loc[("bcrf", "crf"), "mean"]
    assert sequential == pytest.approx(2.5)
    assert stats.loc[("bcrf", "crf-scan"), "mean"] == pytest.approx(sequential * 0.5)
    assert stats.loc[("bcrf", "pytorch-crf"), "mean"] == pytest.approx(sequential * 4.0)
    assert stats.loc[("bcrf", "crf-scan"), "rounds"] == stats.loc[("bcrf", "crf"), "rounds"] == 6


def test_frameworks_split_the_columns_and_never_pool():
    rows = timing_rows()
    jax = [row | {"backend": "jax", "mode": "compiled"} for row in rows]
    torch = [row | {"backend": "torch"} for row in rows]
    stats = train_speedups(_timing(torch + jax)).set_index(["device", "train", "baseline"])
    assert set(stats.index.get_level_values("device")) == {"torch, eager", "jax, compiled"}
    assert stats.loc[("jax, compiled", "bcrf", "crf"), "rounds"] == 6
