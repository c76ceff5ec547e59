"""The regime each ledger cell ran in, beside the paper's: the training data (sentences used, a cap
that cut them, the split protocol) and the encoder, read from the results (``metrics.csv``'s run
columns, ``datasets.csv``'s sizes) and the paper's tables (which encoders it reports per dataset);
and the dataset-statistics table of the report (sentences and tokens used per split)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ..schema import DATASET_COLUMNS
from .layout import DATASET_LABELS
from .paper import Paper

#: The paper's split sizes where its text states them (dataset -> split -> sentences); the BCRF
#: paper says "standard splits" and gives no sizes (seeds-digest.md, §BCRF tasks and data).
PAPER_SIZES: Mapping[str, Mapping[str, int]] = {}
#: The width of the paper's from-scratch encoders (its L0/L2/L4: "embedding size 768", ibid.).
PAPER_WIDTH = 768
PROXY = "proxy"
STANDARD = "standard"


def _joined(values: pd.Series) -> str:
    return ", ".join(dict.fromkeys(str(value) for value in values if str(value)))


def _encoder(runs: pd.DataFrame, name: str, widths: pd.Series, paper_encoders: set[str]) -> tuple[str, bool]:
    """Our encoder as the results name it (its kind, layers and width where recorded), the paper's
    beside it, and whether it is a proxy: the paper reports other encoders for the dataset, or
    ours of another width."""
    details = [
        f"{_joined(runs[column])}{' layers' if column == 'layers' else ''}"
        for column in ("encoder", "layers")
        if column in runs.columns and _joined(runs[column])
    ]
    recorded = sorted({int(width) for width in widths.dropna()})
    details += [f"width {', '.join(map(str, recorded))}"] if recorded else []
    ours = f"{name} ({', '.join(details)})" if details else name
    if not paper_encoders:
        return f"encoder {ours}", False
    other_width = bool(recorded) and recorded != [PAPER_WIDTH]
    proxy = name not in paper_encoders or other_width
    paper_text = ", ".join(sorted(paper_encoders))
    return f"encoder {ours}; paper {paper_text}{f' (width {PAPER_WIDTH})' if other_width else ''}", proxy


def _train(sizes: pd.DataFrame) -> tuple[str, bool]:
    """The training sentences used and whether a cap cut them (a proxy for the full data)."""
    train = sizes[sizes["split"] == "train"]
    if train.empty:
        return "train size not recorded", False
    counts = _joined(train["sentences"].astype(int))
    cut = bool(((train["sentences"] >= train["cap"]) & train["cap"].notna()).any())
    return f"train {counts} sentences{' (cut by the run cap)' if cut else ''}", cut


def regimes(metrics: pd.DataFrame, datasets: pd.DataFrame, paper: Paper) -> dict[tuple[str, str], str]:
    """Per (dataset, encoder name) of ``metrics``' test rows: a lead, "proxy (what differs)" or "as
    the paper", then after ": " the training sentences used, the encoder beside the paper's and the
    split protocol."""
    test = metrics[metrics["split"] == "test"]
    found = {}
    for (dataset, encoder), runs in test.groupby(["dataset", "encoder_name"], sort=False):
        paper_encoders = {key[2] for key in paper.cells if key[1] == dataset}
        sizes = datasets[(datasets["dataset"] == dataset) & (datasets["encoder_name"] == encoder)]
        encoder_text, encoder_proxy = _encoder(runs, str(encoder), sizes["encoder_dim"], paper_encoders)
        train_text, cut = _train(sizes)
        protocols = _joined(runs["protocol"])
        substitute = any(protocol != STANDARD for protocol in runs["protocol"])
        flags = [
            word
            for word, flagged in (
                ("encoder", encoder_proxy),
                ("data cut", cut),
                ("substitute split", substitute),
            )
            if flagged
        ]
        lead = f"{PROXY} ({', '.join(flags)})" if flags else "as the paper"
        found[(str(dataset), str(encoder))] = f"{lead}: {train_text}; {encoder_text}; split {protocols}"
    return found


def regime_summary(cells: pd.DataFrame) -> str:
    """A claim's cells' regimes in short: how many cells are proxies, then each dataset's lead
    ("proxy (encoder, data cut)", "as the paper"; the details are in the cells' ``regime``)."""
    recorded = cells[cells["regime"].notna() & (cells["regime"] != "")]
    leads = {
        DATASET_LABELS.get(dataset, dataset): str(text).split(": ", 1)[0]
        for dataset, text in zip(recorded["dataset"], recorded["regime"], strict=True)
    }
    proxies = int(recorded["regime"].astype(str).str.startswith(PROXY).sum())
    lead = f"{PROXY} in {proxies} of {len(cells)} cells; " if proxies else ""
    return lead + "; ".join(f"{label}: {text}" for label, text in leads.items())


def _paper_size(dataset: str, split: str) -> str:
    size = PAPER_SIZES.get(dataset, {}).get(split)
    return "n/a" if size is None else str(size)


def dataset_statistics(datasets: pd.DataFrame, sentences: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and split: the sentences and tokens our runs used (``datasets.csv``; the test
    split's tokens from the scored sentences where ``datasets.csv`` lacks them), the cap that cut
    them, and the paper's sentences where stated ("n/a" where not)."""
    columns = ["dataset", "split", "protocol", "sentences", "tokens", "cap", "paper sentences"]
    if datasets.empty:
        return pd.DataFrame(columns=columns)
    scored = sentences[sentences["split"] == "test"].drop_duplicates(["dataset", "sentence"])
    test_tokens = scored.groupby("dataset")["tokens"].sum()
    facts = datasets.drop(columns=["encoder_name", "encoder_dim"]).drop_duplicates()
    rows = []
    for fact in facts[[name for name in DATASET_COLUMNS if name in facts.columns]].itertuples(index=False):
        tokens = fact.tokens
        if math.isnan(tokens) and fact.split == "test" and fact.dataset in test_tokens:
            tokens = float(test_tokens[fact.dataset])
        rows.append(
            {
                "dataset": DATASET_LABELS.get(fact.dataset, fact.dataset),
                "split": fact.split,
                "protocol": fact.protocol,
                "sentences": int(fact.sentences),
                "tokens": "n/a" if math.isnan(tokens) else str(int(tokens)),
                "cap": "" if math.isnan(fact.cap) else str(int(fact.cap)),
                "paper sentences": _paper_size(fact.dataset, fact.split),
            }
        )
    return pd.DataFrame(rows, columns=columns)
