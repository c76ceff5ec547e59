"""Parse a trained run's dev and test sets and score them (Table 1's UAS).

Every loss decodes with the highest-scoring single-root tree (``tree-crf``'s Chu-Liu-Edmonds,
decoder ``chu-liu-edmonds``): the paper does not say how its SparseMAP parsers decode, and the MAP
tree keeps the comparison about the losses alone. The models trained with a SparseMAP loss are also
decoded with SparseMAP's own prediction, the heaviest tree of its support (decoder ``sparsemap``,
``crfbench.uses.parser_decoders``), in rows of their own. Metrics (``crfbench.parsing.metrics``):
``uas``, every word counted as the CoNLL 2017 shared task's evaluation script does (the number the
paper's Table 1 compares), and ``uas_no_punct`` without punctuation.

Writes into the run directory, in the project's run-folder tables (``crfbench.schema``):
``evaluation.csv``, one ``METRICS_COLUMNS`` row per (split, decoder, metric), and ``sentences.csv``,
the test set's per-sentence counts of each decoder (``tokens`` = words, ``correct`` = words with
the gold head; the span columns do not apply and are 0) that the claim ledger can bootstrap over.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd

from .. import environment
from ..run_folder import write_run_table
from ..schema import EVALUATION_FILE, RUN_KEY, SENTENCE_COLUMNS, SENTENCES_FILE
from ..uses import parser_decoders
from .metrics import attachment, sentence_attachment
from .run import ENCODER_NAME, load_data, load_model, predict, read_config, start
from .treebank import ParseData

SPLITS = ("dev", "test")


def evaluate(
    run_dir: Path, *, data: ParseData | None = None, data_dir: str | Path | None = None
) -> pd.DataFrame:
    """Score the selected model of ``run_dir`` on dev and test; write ``evaluation.csv`` and
    ``sentences.csv``; return the evaluation table. ``data`` replaces the dataset the run names
    (cut to the run's sizes), as in ``crfbench.parsing.train.train``."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    device = start(config)
    scorer, saved = load_model(run_dir, device)
    if data is None:
        data = load_data(config, data_dir)
    else:
        data = data.cut(config.max_train_sentences, config.max_eval_sentences)
    where = environment.describe(device)
    common = {
        "dataset": data.name,
        "dataset_options": "{}",
        "protocol": data.protocol,
        "proxy": data.proxy,
        "encoder_name": ENCODER_NAME,
        "loss": config.loss,
        "seed": config.seed,
        "backend": "torch",
        "device": where["device"],
        "device_name": where["device_name"],
        "revision": where["revision"],
        "learning_rate": config.learning_rate,
        "epoch": saved.get("epoch"),
    }
    rows, per_sentence = [], []
    for split, decoder in itertools.product(SPLITS, parser_decoders(config.loss)):
        parses = data.split(split)
        predicted = predict(scorer, parses, config.batch_size, device, decoder)
        counts = attachment([p.heads for p in parses], predicted, [p.punct for p in parses])
        for metric, value in counts.scores().items():
            rows.append(
                common
                | {"split": split, "decoder": decoder.name, "decoder_method": decoder.method}
                | {"sentences": len(parses), "words": counts.words, "metric": metric, "value": value}
            )
        if split == "test":
            key = {name: common[name] for name in RUN_KEY}
            for index, (parse, heads) in enumerate(zip(parses, predicted, strict=True)):
                one = sentence_attachment(parse.heads, heads, parse.punct)
                spans = {"gold_spans": 0, "predicted_spans": 0, "matched_spans": 0, "invalid": 0}
                per_sentence.append(
                    key
                    | {"split": split, "decoder": decoder.name, "sentence": index}
                    | {"tokens": one.words, "correct": one.correct}
                    | spans
                )
    table = pd.DataFrame(rows)
    write_run_table(run_dir, SENTENCES_FILE, pd.DataFrame(per_sentence, columns=list(SENTENCE_COLUMNS)))
    write_run_table(run_dir, EVALUATION_FILE, table)
    return table
