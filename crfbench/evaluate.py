"""Decode a trained run's dev and test sets with every decoder and score them (Table 1 rows).

Writes into the run directory ``evaluation.csv``: one tidy row per (split, decoder, metric), each
carrying how it was made (dataset, protocol, encoder, loss, decoder, iterations, seed, backend,
device, code revision); and ``sentences.csv``: the test set's per-sentence counts behind each
decoder's metrics (``metrics.SENTENCE_COUNTS``), which the claim ledger bootstraps over.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from . import environment
from .experiment import predict, run_description
from .metrics import score, sentence_counts
from .objectives import DECODERS, describe
from .run_folder import load_trained_run, write_run_table
from .schema import EVALUATION_FILE, RUN_KEY, SENTENCE_COLUMNS, SENTENCES_FILE
from .uses import check_names

SPLITS = ("dev", "test")


def evaluate(
    run_dir: Path,
    *,
    decoders: Sequence[str] = tuple(DECODERS),
    splits: Sequence[str] = SPLITS,
    data_dir: str | Path | None = None,
    batch_size: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Score the selected model of ``run_dir`` on ``splits`` with ``decoders``; write the CSV."""
    run_dir = Path(run_dir)
    check_names("decoders", decoders, DECODERS)
    check_names("splits", splits, SPLITS)
    if batch_size is not None and (
        not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1
    ):
        raise ValueError(f"batch_size: must be a positive integer, got {batch_size!r}")
    config, dataset, scorer, saved, device = load_trained_run(run_dir, data_dir)
    where = environment.describe(device)
    common = run_description(config, dataset.protocol) | {
        "epoch": saved["epoch"],
        "device": where["device"],
        "device_name": where["device_name"],
        "revision": where["revision"],
    }
    rows, per_sentence = [], []
    jobs = [(split, name) for split in splits for name in decoders]
    for split, name in tqdm(jobs, desc="evaluate", disable=not progress, leave=False):
        sentences = getattr(dataset, split)
        decoder = DECODERS[name]
        predicted = predict(
            scorer, sentences, dataset.tagset, decoder, batch_size or config.batch_size, device
        )
        gold = [s.tags for s in sentences]
        metrics = score(dataset.task, dataset.tagset, gold, predicted)
        if split == "test":
            key = {name: common[name] for name in RUN_KEY} | {"split": split, "decoder": name}
            counts = sentence_counts(dataset.task, dataset.tagset, gold, predicted)
            per_sentence += [key | {"sentence": index} | row for index, row in enumerate(counts)]
        for metric, value in metrics.items():
            rows.append(
                common
                | {"split": split, "decoder": name, "decoder_method": describe(decoder)["method"]}
                | {"iterations": describe(decoder)["iterations"], "sentences": len(sentences)}
                | {"metric": metric, "value": value}
            )
    table = pd.DataFrame(rows)
    write_run_table(run_dir, SENTENCES_FILE, pd.DataFrame(per_sentence, columns=list(SENTENCE_COLUMNS)))
    write_run_table(run_dir, EVALUATION_FILE, table)
    return table
