"""What a parser run leaves for the pipeline's tables, on tiny real runs (30 English-EWT sentences,
one epoch): SparseMAP's support on the dev curve, the SparseMAP-trained models decoded by the MAP
tree and by SparseMAP's heaviest tree, and ``crfbench aggregate``'s tables of parser runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import implementations
from crfbench.aggregate import aggregate
from crfbench.parsing.evaluate import evaluate
from crfbench.parsing.metrics import attachment
from crfbench.parsing.model import encode
from crfbench.parsing.run import ParseConfig, is_parser_run, load_model, mean_support
from crfbench.parsing.train import train
from crfbench.schema import (
    CONFIG_FILE,
    CURVE_COLUMNS,
    EVALUATION_FILE,
    METRICS_COLUMNS,
    SENTENCES_FILE,
    SUMMARY_FILE,
)
from tests.crfbench.parsing.tiny import SMALL

LOSSES = ("crf", "sparsemap")
RATE = 8e-3


@pytest.fixture(scope="module")
def runs(ewt_dev, tmp_path_factory) -> dict[str, Path]:
    """A trained and evaluated run per loss of ``LOSSES``."""
    root = tmp_path_factory.mktemp("parser-runs")
    made = {}
    for loss in LOSSES:
        config = ParseConfig("en", loss, epochs=1, batch_size=10, learning_rate=RATE, parser=SMALL)
        train(config, root / loss, data=ewt_dev, log=None)
        evaluate(root / loss, data=ewt_dev)
        made[loss] = root / loss
    return made


def history(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / SUMMARY_FILE).read_text())["history"]


def test_only_the_sparsemap_curves_record_the_dev_support(runs):
    support = [entry.get("dev_support") for entry in history(runs["sparsemap"])]
    assert len(support) == 2 and all(1 <= value <= 32 for value in support), support  # K = 32 slots
    assert all("dev_support" not in entry for entry in history(runs["crf"]))


def test_mean_support_counts_each_sentences_trees_whatever_the_batch(runs, ewt_dev):
    scorer, _ = load_model(runs["sparsemap"], torch.device("cpu"))
    solver = implementations.get("tree-sparsemap", "torch")
    sizes = []
    for parse in ewt_dev.dev:
        batch = encode([parse], scorer.vocabulary, torch.device("cpu"))
        with torch.no_grad():
            weights = solver.solve(scorer(batch.words, batch.upos, batch.lengths), batch.lengths).weights
        sizes.append(int((weights > 0).sum()))
    assert mean_support(scorer, ewt_dev.dev, 7, torch.device("cpu")) == pytest.approx(np.mean(sizes))


def test_sparsemap_models_are_decoded_by_the_map_tree_and_by_the_heaviest_support_tree(runs, ewt_dev):
    table = pd.read_csv(runs["sparsemap"] / EVALUATION_FILE)
    methods = dict(zip(table.decoder, table.decoder_method, strict=True))
    assert methods == {"chu-liu-edmonds": "tree-crf", "sparsemap": "tree-sparsemap"}
    assert set(pd.read_csv(runs["crf"] / EVALUATION_FILE).decoder) == {"chu-liu-edmonds"}

    scorer, _ = load_model(runs["sparsemap"], torch.device("cpu"))
    test = ewt_dev.test
    batch = encode(list(test), scorer.vocabulary, torch.device("cpu"))
    with torch.no_grad():
        scores = scorer(batch.words, batch.upos, batch.lengths)
    for decoder, method in methods.items():
        heads = implementations.get(method, "torch").decode(scores, batch.lengths)
        predicted = [tuple(int(h) for h in heads[i, 1 : len(p) + 1]) for i, p in enumerate(test)]
        expected = attachment([p.heads for p in test], predicted, [p.punct for p in test]).uas
        row = table[(table.split == "test") & (table.decoder == decoder) & (table.metric == "uas")]
        assert row.value.item() == pytest.approx(expected), decoder


def test_aggregate_gathers_parser_runs_into_the_tagger_tables_columns(runs, tmp_path):
    metrics = aggregate([runs[loss] / EVALUATION_FILE for loss in LOSSES], tmp_path / "metrics.csv")
    assert set(METRICS_COLUMNS) <= set(metrics.columns)
    assert set(zip(metrics.loss, metrics.decoder, strict=True)) == {
        ("crf", "chu-liu-edmonds"),
        ("sparsemap", "chu-liu-edmonds"),
        ("sparsemap", "sparsemap"),
    }
    assert set(metrics.dataset) == {"ud-parse-en"} and set(metrics.encoder_name) == {"kg-bilstm"}

    sentences = aggregate([runs[loss] / SENTENCES_FILE for loss in LOSSES], tmp_path / "sentences.csv.gz")
    assert sentences.groupby(["loss", "decoder"]).size().to_dict() == {
        ("crf", "chu-liu-edmonds"): 20,
        ("sparsemap", "chu-liu-edmonds"): 20,
        ("sparsemap", "sparsemap"): 20,
    }
    for (loss, decoder), counts in sentences.groupby(["loss", "decoder"]):
        row = metrics[
            (metrics.loss == loss)
            & (metrics.decoder == decoder)
            & (metrics.split == "test")
            & (metrics.metric == "uas")
        ]
        assert counts.correct.sum() / counts.tokens.sum() == pytest.approx(row.value.item())

    curves = aggregate([runs[loss] / SUMMARY_FILE for loss in LOSSES], tmp_path / "curves.csv")
    assert list(curves.columns) == list(CURVE_COLUMNS)
    assert set(curves.dataset) == {"ud-parse-en"} and set(curves.encoder_name) == {"kg-bilstm"}
    assert set(curves.dev_metric) == {"uas"} and set(curves.selection_decoder) == {"chu-liu-edmonds"}
    assert (curves.learning_rate == RATE).all() and curves.still_improving.all()  # stopped at its 1-epoch cap
    for loss in LOSSES:
        curve = curves[curves.loss == loss]
        entries = history(runs[loss])
        assert curve.epoch.tolist() == [0, 1]
        assert curve.dev_value.tolist() == pytest.approx([entry["dev_uas"] for entry in entries])
        support = [entry.get("dev_support", np.nan) for entry in entries]
        np.testing.assert_allclose(curve.dev_support.to_numpy(float), support)


def test_a_run_folder_is_told_by_its_datasets_task(runs, tmp_path):
    assert is_parser_run(runs["crf"])
    header = json.loads((runs["crf"] / CONFIG_FILE).read_text())
    tagger = header | {"dataset": {"name": "ud-pos-en", "task": "pos"}}
    (tmp_path / CONFIG_FILE).write_text(json.dumps(tagger))
    assert not is_parser_run(tmp_path)
    with pytest.raises(FileNotFoundError, match=CONFIG_FILE):
        is_parser_run(tmp_path / "absent")
