"""A small results folder and paper CSV with known values, shared by the report tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from crfbench.report import render_report

RUN = {
    "dataset_options": "{}",
    "protocol": "standard",
    "encoder": "embeddings",
    "layers": 0,
    "backend": "torch",
    "device": "cpu",
    "device_name": "Test CPU",
    "revision": "abc1234",
}

#: Test-set values (0–1) of seeds 0 and 1 per (dataset, encoder, loss, decoder); one value = one seed.
SCORES = {
    ("ud-pos-en", "L0", "crf", "meanfield-5"): (0.90, 0.92),
    ("ud-pos-en", "L0", "crf", "viterbi"): (0.93, 0.93),
    ("ud-pos-en", "L0", "crf", "bcrf-5"): (0.91, 0.95),
    ("ud-pos-en", "L0", "crf", "meanfield-10"): (0.915, 0.925),
    ("ud-pos-en", "L0", "unstructured", "argmax-repair"): (0.80, 0.84),
    ("ud-pos-en", "L2", "crf", "viterbi"): (0.94, 0.96),
    ("ud-seg-zh", "L0", "crf", "viterbi"): (0.85,),
    ("ud-seg-zh", "L0", "crf", "meanfield-5"): (0.70,),
    ("conll03-ner", "minilm", "crf", "viterbi"): (0.88, 0.90),
}
#: Share of violating test outputs per (dataset, encoder, loss, decoder), seeds 0 and 1.
VIOLATIONS = {
    ("ud-seg-zh", "L0", "crf", "meanfield-5"): (0.10,),
    ("conll03-ner", "minilm", "crf", "meanfield-5"): (0.02, 0.04),
}

PAPER_CSV = """table,dataset,encoder,train,decoder,iterations,metric,value,status
1a,UD_English-EWT,L0,crf,meanfield,5,accuracy,90.6,ok
1a,UD_English-EWT,L0,crf,bcrf,5,accuracy,91.3,uncertain
1a,UD_English-EWT,L2,crf,viterbi,,accuracy,91.9,rejoined
1a,UD_Dutch-LassySmall,L0,crf,viterbi,,accuracy,94.3,ok
1c,UD_Chinese-GSD,L0,crf,meanfield,5,word_f1,,lost
1c,UD_Chinese-GSD,L0,crf,viterbi,,word_f1,84.2,ok
1b,conll2003,bert-base,crf,viterbi,,entity_f1,91.9,ok
2c,conll2003,bert-base,bcrf,,10,train_speedup,1.9,ok
3b,UD_English-EWT,L0,,meanfield,5,decode_speedup,9.0,ok
2a,POS (max over languages),L0,bcrf,,10,train_speedup,7.3,text-only
"""


def _metric_rows() -> list[dict[str, object]]:
    rows = []
    for table, metric in ((SCORES, None), (VIOLATIONS, "violations")):
        for (dataset, encoder, loss, decoder), values in table.items():
            name = metric or ("accuracy" if dataset.startswith("ud-pos") else "f1")
            for seed, value in enumerate(values):
                base = RUN | {"dataset": dataset, "encoder_name": encoder, "loss": loss, "seed": seed}
                base |= {
                    "epoch": 3,
                    "decoder": decoder,
                    "decoder_method": "",
                    "iterations": "",
                    "sentences": 9,
                }
                rows.append(base | {"split": "test", "metric": name, "value": value})
                rows.append(base | {"split": "dev", "metric": name, "value": 0.5})  # never in a table
                other = "f1" if name == "accuracy" else "precision"
                rows.append(base | {"split": "test", "metric": other, "value": 0.1})  # not the table metric
    return rows


#: Seconds per round, per (seed, kind, name, iterations): medians differ from means on purpose.
TIMINGS = {
    (0, "train", "crf", ""): (1.0, 2.0, 9.0),
    (0, "train", "bcrf", 10): (0.5, 1.0, 7.0),
    (0, "train", "meanfield", 5): (0.5, 0.5, 0.5),  # not 10 iterations: not in Table 2
    (1, "train", "crf", ""): (3.0, 3.0, 3.0),
    (1, "train", "bcrf", 10): (1.0, 1.0, 1.0),
    (0, "decode", "viterbi", ""): (2.0, 2.0, 2.0),
    (0, "decode", "meanfield-5", 5): (1.0, 1.0, 100.0),
}


def timing_rows(device_name: str = "Test CPU", dataset: str = "ud-pos-en") -> list[dict[str, object]]:
    rows = []
    for (seed, kind, name, iterations), seconds in TIMINGS.items():
        for index, value in enumerate(seconds):
            rows.append(
                RUN
                | {"device_name": device_name, "dataset": dataset, "encoder_name": "L0", "loss": "crf"}
                | {"seed": seed, "threads": 1, "batch_size": 32, "network": "untrained"}
                | {"kind": kind, "name": name, "mode": "eager", "method": name}
                | {"iterations": iterations, "round": index, "seconds": value}
                | {"batches": 2, "sentences": 64, "tokens": 900}
            )
    return rows


def write_results(folder: Path, metrics: bool = True, timing: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if metrics:
        pd.DataFrame(_metric_rows()).to_csv(folder / "metrics.csv", index=False)
    if timing:
        pd.DataFrame(timing_rows()).to_csv(folder / "timing.csv", index=False)
    return folder


def write_paper(path: Path) -> Path:
    path.write_text(PAPER_CSV)
    return path


def markdown_cell(path: Path, row: str, column: str) -> str:
    """The text of one cell of a Markdown table written by the report."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split(" | ")]
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if cells[0] == row:
            return cells[header.index(column)]
    raise KeyError(row)


def render_with_claims(root: Path, results: Path, claims: str, paper_files: Mapping[str, str] = {}) -> Path:
    """Render the report of ``results`` beside the fixture paper CSV, ``claims`` (claims.csv text)
    and ``paper_files`` (file name -> text, e.g. another paper's values) into ``root/out``; the
    output folder."""
    (root / "paper").mkdir()
    paper = write_paper(root / "paper" / "bcrf_tables.csv")
    (root / "paper" / "claims.csv").write_text(claims)
    for name, text in paper_files.items():
        (root / "paper" / name).write_text(text)
    out = root / "out"
    render_report(results, paper, out)
    return out
