"""The numbers that fill the tables: means over seeds of test scores, and speed-ups as ratios of median
timings within one timing run (``crfbench.timing``), then averaged over seeds."""

from __future__ import annotations

import pandas as pd

from .layout import DECODE_BASELINE, DECODE_COMPARED, POS, TRAIN_BASELINES, TRAIN_ITERATIONS

#: What a statistic is about; "" where a key does not apply (no device split, no decoder in Table 2 …).
STAT_KEYS = ("dataset", "encoder", "device", "train", "decoder")
STAT_DTYPES = dict.fromkeys(STAT_KEYS, "str") | {"mean": "float", "std": "float", "n": "int"}
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
    """The device of each timing row, or "" everywhere when all rows come from one device (no split)."""
    labels = timing["device_name"].where(timing["device_name"] != "", timing["device"])
    return labels if labels.nunique() > 1 else pd.Series("", index=timing.index, dtype="str")


def _median_seconds(timing: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Median seconds over rounds per (timing run, item), with the run's dataset, encoder, device, seed."""
    rows = timing[timing["kind"] == kind]
    run_columns = [name for name in timing.columns if name not in ITEM_COLUMNS]
    described = rows.assign(
        run=rows.groupby(run_columns, dropna=False).ngroup(), label=device_labels(timing)[rows.index]
    )
    return described.groupby(["run", "name"], as_index=False).agg(
        dataset=("dataset", "first"),
        encoder=("encoder_name", "first"),
        device=("label", "first"),
        seed=("seed", "first"),
        iterations=("iterations", "first"),
        seconds=("seconds", "median"),
    )


def _speedups(
    medians: pd.DataFrame, compared: pd.DataFrame, baseline: str, train: str, decoder: str
) -> pd.DataFrame:
    """Baseline median / compared median, run by run (runs without the baseline drop out)."""
    base = medians.loc[medians["name"] == baseline, ["run", "seconds"]].rename(columns={"seconds": "base"})
    joined = compared.merge(base, on="run")
    return joined.assign(train=train, decoder=decoder, value=joined["base"] / joined["seconds"])


def train_speedups(timing: pd.DataFrame) -> pd.DataFrame:
    """Table 2: median time of the forward-algorithm loss / median time of each MF / BCRF loss at
    ``TRAIN_ITERATIONS`` iterations, per timing run; then mean ± std over seeds."""
    medians = _median_seconds(timing, "train")
    parts = [
        _speedups(
            medians,
            medians[(medians["name"] == loss) & (medians["iterations"] == TRAIN_ITERATIONS)],
            baseline,
            loss,
            "",
        )
        for loss, baseline in TRAIN_BASELINES.items()
    ]
    return over_seeds(pd.concat(parts, ignore_index=True))


def decode_speedups(timing: pd.DataFrame) -> pd.DataFrame:
    """Table 3: median Viterbi decoding time / median time of each compared decoder, per timing run;
    then mean ± std over seeds."""
    medians = _median_seconds(timing, "decode")
    parts = [
        _speedups(medians, medians[medians["name"] == name], DECODE_BASELINE, "", name)
        for name in DECODE_COMPARED
    ]
    return over_seeds(pd.concat(parts, ignore_index=True))
