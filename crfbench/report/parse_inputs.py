"""Where the report finds the dependency parsers' results: the one place that ties the SparseMAP
paper's Table 1 (``crfbench.report.parsing``) and its parsing claims (sparsemap-1, sparsemap-2;
``crfbench.report.parse_claims``) to tables, columns and names.

A parser run (``crfbench parse train|evaluate``) writes the run-folder files of ``crfbench.schema``,
gathered as the taggers' are, into tables of their own under ``results/parse/`` (``PARSE_*_TABLE``)
with the taggers' columns; their datasets are ``ud-parse-<language>``
(``crfbench.parsing.treebank.dataset_name``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..parsing.treebank import LANGUAGES, dataset_name
from ..schema import (
    CURVE_COLUMNS,
    CURVE_NUMBERS,
    METRICS_COLUMNS,
    PARSE_CURVES_TABLE,
    PARSE_METRICS_TABLE,
    PARSE_SENTENCES_TABLE,
    SENTENCE_COLUMNS,
    SENTENCE_NUMBERS,
)
from ..uses import PARSER_DECODER

#: The curves' column holding a SparseMAP-trained parser's mean support size on dev per epoch
#: (trees per sentence); empty for the other losses.
TREE_SUPPORT = "dev_support"
#: The parsing datasets, in ``treebank.LANGUAGES`` order, and the language each one is.
PARSE_DATASETS: tuple[str, ...] = tuple(dataset_name(language) for language in LANGUAGES)
LANGUAGE_OF = dict(zip(PARSE_DATASETS, LANGUAGES, strict=True))
#: The metric Table 1 compares (every word counted, ``crfbench.parsing.metrics``) and the task name
#: under which the claim ledger reads it (``crfbench.metrics.PRIMARY_METRIC``).
UAS = "uas"
PARSE_TASK = "parse"
PARSE_TASKS = dict.fromkeys(PARSE_DATASETS, PARSE_TASK)
#: How every parser decodes for Table 1 (the MAP tree); other decoders of a run are extra rows.
MAP_DECODER = PARSER_DECODER.name
#: The protocol of a dataset on its official splits (``crfbench.data.ud``); any other is a proxy.
STANDARD_PROTOCOL = "standard"
#: The SparseMAP paper's numbers, beside the BCRF paper's CSV.
PAPER_FILE = "sparsemap_tables.csv"


@dataclass(frozen=True)
class ParseResults:
    """The parser's rows of the results tables (each empty when no parser ran)."""

    metrics: pd.DataFrame
    sentences: pd.DataFrame
    curves: pd.DataFrame

    @property
    def empty(self) -> bool:
        return self.metrics.empty and self.sentences.empty and self.curves.empty


def parse_results(metrics: pd.DataFrame, sentences: pd.DataFrame, curves: pd.DataFrame) -> ParseResults:
    """The parser's rows of evaluation rows (``METRICS_COLUMNS``), test sentences' counts
    (``tokens`` = words, ``correct`` = words with the gold head) and dev curves."""
    return ParseResults(*(_parsing_rows(table) for table in (metrics, sentences, curves)))


def read_parse_results(results_dir: Path) -> ParseResults:
    """The parsers' tables under ``results_dir`` (``PARSE_*_TABLE``; each empty when absent)."""
    from .inputs import read_results

    results_dir = Path(results_dir)
    return parse_results(
        read_results(results_dir / PARSE_METRICS_TABLE, METRICS_COLUMNS),
        read_results(results_dir / PARSE_SENTENCES_TABLE, SENTENCE_COLUMNS, SENTENCE_NUMBERS),
        read_results(results_dir / PARSE_CURVES_TABLE, CURVE_COLUMNS, CURVE_NUMBERS),
    )


def _parsing_rows(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["dataset"].isin(PARSE_DATASETS)].reset_index(drop=True)


def proxy_datasets(metrics: pd.DataFrame) -> set[str]:
    """The datasets of ``metrics`` run on a substitute protocol (a missing train split): proxies of
    the paper's setting, which every number of theirs is marked as."""
    return set(metrics.loc[metrics["protocol"] != STANDARD_PROTOCOL, "dataset"])
