"""The numbers that fill the tables: means over seeds of test scores, and speed-ups as ratios of median
timings within one timing run (``crfbench.timing``), then averaged over seeds, with the spread of the
ratios of single rounds."""

from __future__ import annotations

import pandas as pd

from .layout import (
    DECODE_BASELINE,
    DECODE_COMPARED,
    FIXED_ITERATION_LOSSES,
    POS,
    TRAIN_BASELINES,
    TRAIN_ITERATIONS,
    baselines_of,
)

#: What a statistic is about; "" where a key does not apply (no device split, no decoder in Table 2,
#: no baseline for a score …).
STAT_KEYS = ("dataset", "encoder", "device", "train", "decoder", "baseline")
STAT_DTYPES = dict.fromkeys(STAT_KEYS, "str") | {"mean": "float", "std": "float", "n": "int"}
#: Speed-ups add the lowest and highest ratio of single timing rounds and the number of rounds.
SPEEDUP_DTYPES = STAT_DTYPES | {"low": "float", "high": "float", "rounds": "int"}
#: Columns of ``timing.csv`` that describe one timed item, not the timing run it belongs to.
ITEM_COLUMNS = ("kind", "name", "method", "iterations", "round", "seconds", "batches", "sentences", "tokens")


def table_metric(dataset: str, available: set[str]) -> str | None:
    """The paper's metric for ``dataset``: accuracy for POS, F1 otherwise (synthetic: F1 when scored)."""
    preferred = ("accuracy",) if dataset in POS else ("f1", "accuracy") if dataset == "synthetic" else ("f1",)
    return next((metric for metric in preferred if metric in available), None)


def over_seeds(values: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample standard deviation (n − 1; NaN for one seed) and seed count of ``value`` per
    ``STAT_KEYS``. Repeated observations of one seed are averaged first, so that each seed counts once."""
    if values.empty:
        return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in STAT_DTYPES.items()})
    per_seed = values.groupby([*STAT_KEYS, "seed"], as_index=False)["value"].mean()
    stats = per_seed.groupby(list(STAT_KEYS), as_index=False)["value"].agg(mean="mean", std="std", n="count")
    return stats[list(STAT_DTYPES)]


def _metric_values(metrics: pd.DataFrame, rows: pd.Series) -> pd.DataFrame:
    chosen = metrics[rows]
    return pd.DataFrame(
        {
            "dataset": chosen["dataset"],
            "encoder": chosen["encoder_name"],
            "device": "",
            "train": chosen["loss"],
            "decoder": chosen["decoder"],
            "baseline": "",
            "seed": chosen["seed"],
            "value": 100 * chosen["value"],
        }
    )


def score_stats(metrics: pd.DataFrame) -> pd.DataFrame:
    """Test-set table metric in percent (Tables 1a–1d, 1s)."""
    available = metrics.groupby("dataset")["metric"].agg(set)
    metric = {dataset: table_metric(dataset, metrics_) for dataset, metrics_ in available.items()}
    rows = (metrics["split"] == "test") & (metrics["metric"] == metrics["dataset"].map(metric))
    return over_seeds(_metric_values(metrics, rows))


def violation_stats(metrics: pd.DataFrame) -> pd.DataFrame:
    """Share of test outputs that break a tag constraint, in percent (Table V)."""
    rows = (metrics["split"] == "test") & (metrics["metric"] == "violations")
    return over_seeds(_metric_values(metrics, rows))


def device_labels(timing: pd.DataFrame) -> pd.Series:
    """What sets each timing row apart from rows timed elsewhere, for a table column's brackets: its
    device where the rows come from several, its framework (``torch``, ``jax``) where they hold
    several, its timing mode (``eager``, ``compiled``) where they hold several, joined by ", "; ""
    everywhere when all rows share all three (no split)."""
    devices = timing["device_name"].where(timing["device_name"] != "", timing["device"])
    backends = timing["backend"] if "backend" in timing.columns else pd.Series("torch", index=timing.index)
    parts = [labels.astype(str) for labels in (devices, backends, timing["mode"]) if labels.nunique() > 1]
    if not parts:
        return pd.Series("", index=timing.index, dtype="str")
    joined = parts[0]
    for labels in parts[1:]:
        joined = joined + ", " + labels
    return joined


def _round_seconds(timing: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Seconds of every (timing run, item, round) of ``kind``, with the run's dataset, encoder, device
    and seed."""
    rows = timing[timing["kind"] == kind]
    run_columns = [name for name in timing.columns if name not in ITEM_COLUMNS]
    return pd.DataFrame(
        {
            "run": rows.groupby(run_columns, dropna=False).ngroup(),
            "name": rows["name"],
            "iterations": rows["iterations"],
            "round": rows["round"],
            "seconds": rows["seconds"],
            "dataset": rows["dataset"],
            "encoder": rows["encoder_name"],
            "device": device_labels(timing)[rows.index],
            "seed": rows["seed"],
        }
    )


def _paired(
    rounds: pd.DataFrame, compared: pd.Series, baseline: str, train: str, decoder: str
) -> pd.DataFrame:
    """The ``compared`` rows beside the baseline's seconds of the same run and round (a round times
    every item once, so rounds pair up; runs without the baseline drop out)."""
    base = rounds.loc[rounds["name"] == baseline, ["run", "round", "seconds"]]
    joined = rounds[compared].merge(base.rename(columns={"seconds": "base"}), on=["run", "round"])
    return joined.assign(train=train, decoder=decoder, baseline=baseline)


def speedup_stats(paired: pd.DataFrame) -> pd.DataFrame:
    """Per ``STAT_KEYS``: the speed-up of each timing run (baseline median seconds / compared median
    seconds over its rounds), its mean ± std over seeds (``over_seeds``), and the lowest and highest
    ratio of single rounds (baseline seconds / compared seconds of one round, all runs pooled) with the
    number of rounds, so that the spread of the timings can be set against the speed-up."""
    if paired.empty:
        return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in SPEEDUP_DTYPES.items()})
    medians = paired.groupby([*STAT_KEYS, "seed", "run"], as_index=False)[["base", "seconds"]].median()
    stats = over_seeds(medians.assign(value=medians["base"] / medians["seconds"]))
    ratios = paired.assign(ratio=paired["base"] / paired["seconds"])
    spread = ratios.groupby(list(STAT_KEYS), as_index=False)["ratio"].agg(
        low="min", high="max", rounds="count"
    )
    return stats.merge(spread, on=list(STAT_KEYS))[list(SPEEDUP_DTYPES)]


def train_speedups(timing: pd.DataFrame) -> pd.DataFrame:
    """Table 2: median time of the forward-algorithm loss (each of its baseline implementations,
    ``baselines_of``) / median time of each MF / BCRF loss at ``TRAIN_ITERATIONS`` iterations, and
    of each SparseMAP loss (run to convergence), per timing run; then ``speedup_stats``."""
    rounds = _round_seconds(timing, "train")
    fixed = rounds["iterations"] == TRAIN_ITERATIONS
    parts = [
        _paired(
            rounds,
            (rounds["name"] == loss) & (fixed if loss in FIXED_ITERATION_LOSSES else True),
            baseline,
            loss,
            "",
        )
        for loss, paper_baseline in TRAIN_BASELINES.items()
        for baseline in baselines_of(paper_baseline).values()
    ]
    return speedup_stats(pd.concat(parts, ignore_index=True))


def decode_speedups(timing: pd.DataFrame) -> pd.DataFrame:
    """Table 3: median Viterbi decoding time (each of its baseline implementations, ``baselines_of``)
    / median time of each compared decoder, per timing run; then ``speedup_stats``."""
    rounds = _round_seconds(timing, "decode")
    parts = [
        _paired(rounds, rounds["name"] == name, baseline, "", name)
        for name in DECODE_COMPARED
        for baseline in baselines_of(DECODE_BASELINE).values()
    ]
    return speedup_stats(pd.concat(parts, ignore_index=True))
