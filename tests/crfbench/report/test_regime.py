"""Each cell's regime beside the paper's, and the dataset-statistics table, from results rows."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from crfbench.aggregate import aggregate
from crfbench.report.ledger import claim_ledger
from crfbench.report.paper import Paper, PaperValue
from crfbench.report.regime import dataset_statistics, regime_summary, regimes
from crfbench.schema import DATASET_COLUMNS

SUBSTITUTE = "substitute: train=dev[:90%], dev=dev[90%:], test=test (train split missing: x)"


def _metrics(dataset: str, protocol: str, encoder_name: str = "L0") -> dict[str, object]:
    return {"dataset": dataset, "protocol": protocol, "encoder_name": encoder_name}


def _sizes(dataset: str, train: int, cap: float, protocol: str = "standard", dim: int = 128) -> list[dict]:
    return [
        {"dataset": dataset, "dataset_options": "{}", "protocol": protocol, "encoder_name": "L0"}
        | {"encoder_dim": dim, "split": split, "sentences": size, "tokens": 10 * size, "cap": cap}
        for split, size in (("train", train), ("dev", 100), ("test", 200))
    ]


PAPER = Paper(
    {
        ("1a", "ud-pos-en", "L0", "crf", "viterbi"): PaperValue(91.3, "ok"),
        ("1b", "conll03-ner", "bert-base", "crf", "viterbi"): PaperValue(91.9, "ok"),
    }
)


def test_a_cell_is_a_proxy_for_each_regime_difference_it_has() -> None:
    metrics = pd.DataFrame(
        [
            _metrics("ud-pos-en", "standard"),
            _metrics("conll03-ner", "standard"),
            _metrics("ud-pos-nl", SUBSTITUTE),
            _metrics("umass-citation", "standard", "features"),
        ]
    ).assign(split="test", encoder="embeddings", layers=0)
    sizes = pd.DataFrame(
        _sizes("ud-pos-en", 12544, float("nan"), dim=768)
        + _sizes("conll03-ner", 4000, 4000.0)
        + _sizes("ud-pos-nl", 1387, float("nan"), SUBSTITUTE, dim=768)
    )
    found = regimes(metrics, sizes, PAPER)
    assert found[("ud-pos-en", "L0")] == (
        "as the paper: train 12544 sentences; encoder L0 (embeddings, 0 layers, width 768); paper L0; "
        "split standard"
    )
    assert found[("conll03-ner", "L0")].startswith("proxy (encoder, data cut): train 4000 sentences (cut")
    assert "paper bert-base (width 768)" in found[("conll03-ner", "L0")]
    assert found[("ud-pos-nl", "L0")].startswith("proxy (substitute split): train 1387 sentences")
    # nothing recorded of the data, no encoder of the paper's for the dataset: no flag, said so
    assert found[("umass-citation", "features")] == (
        "as the paper: train size not recorded; encoder features (embeddings, 0 layers); split standard"
    )
    cells = pd.DataFrame(
        {
            "dataset": ["ud-pos-en", "ud-pos-nl"],
            "regime": [found[("ud-pos-en", "L0")], found[("ud-pos-nl", "L0")]],
        }
    )
    assert regime_summary(cells) == "proxy in 1 of 2 cells; en: as the paper; nl: proxy (substitute split)"


def test_dataset_statistics_give_each_split_once_beside_the_paper() -> None:
    sizes = pd.DataFrame(_sizes("conll03-ner", 4000, 4000.0) + _sizes("conll03-ner", 4000, 4000.0))
    sizes.loc[sizes["split"] == "test", "tokens"] = float("nan")  # recorded before tokens were counted
    scored = pd.DataFrame(
        {"dataset": "conll03-ner", "split": "test", "sentence": [0, 1, 0], "tokens": [5, 7, 5]}
    )
    table = dataset_statistics(sizes, scored)
    assert list(table["split"]) == ["train", "dev", "test"]
    assert list(table["tokens"]) == ["40000", "1000", "12"]  # test tokens from the scored sentences
    assert list(table["cap"]) == ["4000"] * 3 and set(table["paper sentences"]) == {"n/a"}
    assert list(table["dataset"]) == ["CoNLL-03"] * 3


def test_aggregate_gathers_each_runs_data_facts_once(tmp_path: Path) -> None:
    paths = []
    for seed in (0, 1):
        path = tmp_path / str(seed) / "config.json"
        path.parent.mkdir()
        config = {"encoder_name": "L0", "scorer": {"dim": 128}, "max_train_sentences": 4000, "seed": seed}
        facts = {
            "name": "conll03-ner",
            "protocol": "standard",
            "sentences": {"train": 4000, "dev": 2000, "test": 2000},
            "tokens": {"train": 54882, "dev": 30915, "test": 29770},
        }
        path.write_text(json.dumps({"config": config, "dataset": facts}))
        paths.append(path)
    table = aggregate(paths, tmp_path / "datasets.csv")
    assert list(table.columns) == list(DATASET_COLUMNS) and len(table) == 3
    assert table.set_index("split").loc["train", ["sentences", "tokens", "cap"]].tolist() == [
        4000,
        54882,
        4000,
    ]
    assert pd.isna(table.set_index("split").loc["dev", "cap"])


def test_the_ledger_carries_each_cells_regime_and_the_claims_margin() -> None:
    rows = [
        {"dataset": "ud-pos-en", "encoder_name": "L0", "loss": "crf", "seed": seed, "split": "test"}
        | {"decoder": decoder, "sentence": sentence, "tokens": 10, "correct": 8 + (seed == sentence % 3)}
        | dict.fromkeys(("gold_spans", "predicted_spans", "matched_spans", "invalid"), 0)
        for seed in range(3)
        for decoder in ("viterbi", "bcrf-10")
        for sentence in range(30)
    ]
    claims = pd.DataFrame(
        [{"id": "bcrf-2", "paper": "bcrf", "claim": "", "comparison": "", "paper_evidence": ""}]
    ).assign(paper_difference="-0.6 to 0.0", kind="accuracy")
    regime = "proxy (encoder): train 12544 sentences; encoder L0; paper L0; split standard"
    summary, cells = claim_ledger(
        claims,
        pd.DataFrame(rows),
        pd.DataFrame(columns=["kind", "device"]),
        {"ud-pos-en": "pos"},
        regimes={("ud-pos-en", "L0"): regime},
    )
    assert cells["regime"].tolist() == [regime]
    assert (cells["paper_low"].iloc[0], cells["paper_high"].iloc[0]) == (-0.6, 0.0)
    row = summary.iloc[0]
    assert row["regime"] == "proxy in 1 of 1 cells; en: proxy (encoder)"
    assert row["margin"].startswith(f"{cells['margin'].iloc[0]:.2f} = max(paper 0.60, 2 × seed SD ")
    assert row["verdict"] == "reproduced"  # identical runs
