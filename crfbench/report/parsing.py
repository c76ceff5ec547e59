"""The SparseMAP paper's Table 1 (Niculae et al. 2018: UAS of a Kiperwasser & Goldberg BiLSTM parser
trained with four losses on five UD treebanks) beside ours, and the parsers' support size over
training (its Fig. 4's question, claim sparsemap-2), from the parser's rows of ``results/``
(``crfbench.report.parse_inputs``) and ``sparsemap_tables.csv`` beside the BCRF paper's CSV.

Table 1's rows are the losses, each decoded with the MAP tree (the paper's rows; a run's other
decoders, such as SparseMAP's heaviest tree, follow as rows of ours), then the paper's UDPipe
reference system, then claim sparsemap-1's difference (the best SparseMAP loss minus the best of
CRF and SSVM, from the claim ledger's cells). Its columns are the paper's languages: a language run
on a substitute protocol is marked "proxy", one whose treebank the data mirror lacks
"unobtainable". Nothing is rendered when no parser ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import read_csv, write_atomic
from ..parsing.treebank import LANGUAGES, dataset_name
from ..uses import PARSER_LOSSES
from .claims import CLAIMS, BestOfClaim
from .parse_claims import dev_choices
from .parse_inputs import (
    LANGUAGE_OF,
    MAP_DECODER,
    PAPER_FILE,
    TREE_SUPPORT,
    UAS,
    ParseResults,
    proxy_datasets,
)
from .render import MISSING
from .stats import STAT_KEYS, over_seeds

#: The ledger's claim whose cells make Table 1's difference row.
CLAIM_ID = "sparsemap-1"
#: The paper's Table 1 in its CSV: the table id, its languages (our codes, the paper's column
#: order), the parser's model and its losses (our names), and the reference system's model.
PAPER_TABLE = "1"
PAPER_LANGUAGES = {
    "UD_English": "en",
    "UD_Chinese": "zh",
    "UD_Vietnamese": "vi",
    "UD_Romanian": "ro",
    "UD_Japanese": "ja",
}
PAPER_MODEL = "kiperwasser-goldberg-bilstm"
PAPER_LOSSES = {
    "structured-svm": "ssvm",
    "crf": "crf",
    "sparsemap": "sparsemap",
    "m-sparsemap": "m-sparsemap",
}
REFERENCE_MODELS = {"udpipe-conll2017-baseline": "UDPipe (CoNLL 2017 baseline; the paper's reference)"}
PAPER_COLUMNS = ("table", "dataset", "model", "loss", "metric", "value", "status")
#: Decimals of every UAS shown (the paper prints two).
DECIMALS = 2
#: How the decoders are named in the rows: the MAP tree; any other decoder by its own name.
DECODING_LABELS = {MAP_DECODER: "MAP tree"}
PROXY, UNOBTAINABLE = "proxy", "unobtainable"

PARSE_INTRO = (
    "Dependency parsing, the SparseMAP paper's Table 1 (Niculae et al. 2018): test UAS in % (every word "
    "counted, as the CoNLL 2017 evaluation), ours as mean ± sample standard deviation over seeds with the "
    "number of seeds n, beside the paper's value and the difference Δ = ours − paper. Every parser is "
    "decoded with the MAP tree; the paper does not say how its SparseMAP parsers decode, so its value "
    "sits beside every decoding of a loss. The last row is claim sparsemap-1: the best SparseMAP loss "
    "minus the best of CRF and SSVM, ours chosen on dev (mean dev UAS over seeds), with the claim "
    "ledger's paired difference and 95% bootstrap interval; the paper's from its table (chosen on "
    "test, the only numbers it gives). 'proxy': a language on substitute splits (the data mirror lacks "
    "its train file); 'unobtainable': no treebank of the language in the data mirror. The paper used "
    "UD 2.0 (CoNLL 2017); we use UD 2.15."
)
PARSE_SKIPPED = "No dependency-parsing results in results/: the SparseMAP paper's Table 1 is not rendered."


@dataclass(frozen=True)
class ParseSection:
    """One table of the section: the file stem, its title, the table as shown (Markdown, HTML) and
    its tidy form (CSV)."""

    stem: str
    title: str
    shown: pd.DataFrame
    tidy: pd.DataFrame


def read_paper(paper_csv: Path) -> pd.DataFrame:
    """The paper's Table 1 (language, loss, value; loss "" and ``model`` set for a reference system),
    from ``sparsemap_tables.csv`` beside ``paper_csv``; empty when absent. ValueError naming the file
    and row of a language, model or loss not understood."""
    path = Path(paper_csv).parent / PAPER_FILE
    columns = ["language", "model", "loss", "value"]
    if not path.exists():
        return pd.DataFrame(columns=columns)
    table = read_csv(path, complete=False, dtype=str, keep_default_na=False)
    missing = [name for name in PAPER_COLUMNS if name not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    rows = []
    for index, row in table[table["table"] == PAPER_TABLE].iterrows():
        where = f"{path}: row {int(index) + 2}"
        language = PAPER_LANGUAGES.get(row["dataset"])
        loss = PAPER_LOSSES.get(row["loss"]) if row["model"] == PAPER_MODEL else ""
        if language is None or loss is None or (not loss and row["model"] not in REFERENCE_MODELS):
            raise ValueError(f"{where}: unknown dataset {row['dataset']!r}, model or loss {row['loss']!r}")
        try:
            value = float(row["value"])
        except ValueError:
            raise ValueError(f"{where}: value {row['value']!r} is not a number") from None
        rows.append({"language": language, "model": row["model"], "loss": loss, "value": value})
    return pd.DataFrame(rows, columns=columns)


def uas_stats(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, loss as ``train``, decoder): mean, std and n over seeds of the test UAS in %."""
    rows = metrics[(metrics["split"] == "test") & (metrics["metric"] == UAS)]
    values = pd.DataFrame(
        {
            "dataset": rows["dataset"],
            "encoder": "",  # one parser
            "device": "",
            "train": rows["loss"],
            "decoder": rows["decoder"],
            "baseline": "",
            "seed": rows["seed"],
            "value": 100 * rows["value"].astype(float),
        }
    )
    return over_seeds(values).drop(
        columns=[key for key in STAT_KEYS if key not in ("dataset", "train", "decoder")]
    )


def _languages(paper: pd.DataFrame) -> list[str]:
    """Table 1's columns: the paper's languages in its order, then ours it lacks."""
    return list(dict.fromkeys([*PAPER_LANGUAGES.values(), *paper["language"], *LANGUAGES]))


def _header(language: str, proxies: set[str]) -> str:
    if language not in LANGUAGES:
        return f"{language} ({UNOBTAINABLE})"
    return f"{language} ({PROXY})" if dataset_name(language) in proxies else language


def _signed(value: float) -> str:
    return f"{value:+.{DECIMALS}f}".replace("-", "−")


def _ours(mean: float, std: float, n: int) -> str:
    spread = "" if pd.isna(std) else f" ± {std:.{DECIMALS}f}"
    return f"{mean:.{DECIMALS}f}{spread}, n={n}"


def _beside(ours: str, paper: float | None, difference: float | None) -> str:
    """A cell: ours, then the paper's value and Δ in brackets (the paper's alone when ours is "")."""
    if paper is None:
        return ours
    theirs = f"paper {paper:.{DECIMALS}f}" + ("" if difference is None else f", Δ {_signed(difference)}")
    return f"{ours} ({theirs})" if ours else theirs


def _decoders(stats: pd.DataFrame, loss: str) -> list[str]:
    """The decoders of ``loss``'s rows: the MAP tree first (always), then the others that ran."""
    ran = sorted(set(stats.loc[stats["train"] == loss, "decoder"]) - {MAP_DECODER})
    return [MAP_DECODER, *ran]


def _loss_rows(stats: pd.DataFrame, paper: pd.DataFrame, languages: list[str]) -> tuple[list, list]:
    """The shown and tidy rows of every (loss, decoder)."""
    ours = stats.set_index(["dataset", "train", "decoder"])
    theirs = paper[paper["loss"] != ""].set_index(["language", "loss"])["value"]
    shown, tidy = [], []
    for loss, use in PARSER_LOSSES.items():
        for decoder in _decoders(stats, loss):
            line = {"loss": use.label, "decoding": DECODING_LABELS.get(decoder, decoder)}
            for language in languages:
                dataset = dataset_name(language)
                stat = ours.loc[(dataset, loss, decoder)] if (dataset, loss, decoder) in ours.index else None
                value = float(theirs[(language, loss)]) if (language, loss) in theirs.index else None
                difference = None if stat is None or value is None else float(stat["mean"]) - value
                text = MISSING if stat is None else _ours(stat["mean"], stat["std"], int(stat["n"]))
                line[language] = (
                    UNOBTAINABLE if language not in LANGUAGES else _beside(text, value, difference)
                )
                tidy.append(
                    {
                        "row": "loss",
                        "loss": loss,
                        "decoder": decoder,
                        "language": language,
                        "ours_mean": np.nan if stat is None else float(stat["mean"]),
                        "ours_std": np.nan if stat is None else float(stat["std"]),
                        "n_seeds": 0 if stat is None else int(stat["n"]),
                        "paper_value": np.nan if value is None else value,
                        "difference": np.nan if difference is None else difference,
                    }
                )
            shown.append(line)
    return shown, tidy


def _reference_rows(paper: pd.DataFrame, languages: list[str]) -> tuple[list, list]:
    """The paper's reference systems (UDPipe): the paper's values only."""
    shown, tidy = [], []
    for model, label in REFERENCE_MODELS.items():
        values = paper[paper["model"] == model].set_index("language")["value"]
        if values.empty:
            continue
        line = {"loss": label, "decoding": ""}
        for language in languages:
            value = float(values[language]) if language in values.index else None
            line[language] = "" if value is None else _beside("", value, None)
            tidy.append({"row": "reference", "loss": model, "language": language, "paper_value": value})
        shown.append(line)
    return shown, tidy


def paper_best_of(paper: pd.DataFrame, spec: BestOfClaim) -> dict[str, tuple[float, str, str]]:
    """Per language of the paper: its best ``spec.a`` loss minus its best ``spec.b`` loss (by its
    test values, all it gives), with the two losses."""
    found = {}
    values = paper[paper["loss"] != ""]
    for language, rows in values.groupby("language", sort=False):
        scores = rows.set_index("loss")["value"]
        sides = [scores[scores.index.isin(side)] for side in (spec.a, spec.b)]
        if sides[0].empty or sides[1].empty:
            continue
        found[language] = (sides[0].max() - sides[1].max(), sides[0].idxmax(), sides[1].idxmax())
    return found


def _difference_rows(
    parse: ParseResults, paper: pd.DataFrame, cells: pd.DataFrame, languages: list[str]
) -> tuple[list, list]:
    """Claim sparsemap-1's row: our paired difference (ledger cells) beside the paper's."""
    spec = CLAIMS[CLAIM_ID]
    assert isinstance(spec, BestOfClaim), CLAIM_ID
    choices = dev_choices(parse.metrics, spec).set_index("dataset")
    ours = cells[(cells["claim"] == CLAIM_ID) & cells["dataset"].isin(spec.datasets)].set_index("dataset")
    theirs = paper_best_of(paper, spec)
    label = {loss: use.label for loss, use in PARSER_LOSSES.items()}
    line = {"loss": "best SparseMAP − best of CRF, SSVM (sparsemap-1)", "decoding": "MAP tree"}
    tidy = []
    for language in languages:
        dataset = dataset_name(language)
        text = UNOBTAINABLE if language not in LANGUAGES else MISSING
        cell = ours.loc[dataset] if dataset in ours.index and dataset in choices.index else None
        if cell is not None:
            chosen = choices.loc[dataset]
            text = (
                f"{_signed(cell['difference'])} [{_signed(cell['ci_low'])}, {_signed(cell['ci_high'])}] "
                f"{label[chosen['a']]} − {label[chosen['b']]}, n={int(cell['n_seeds'])}"
            )
        paper_text = ""
        if language in theirs:
            value, a, b = theirs[language]
            paper_text = f"paper {_signed(value)} {label[a]} − {label[b]}"
        line[language] = f"{text} ({paper_text})" if paper_text else text
        tidy.append(
            {
                "row": "difference",
                "loss": "" if cell is None else f"{choices.loc[dataset, 'a']} − {choices.loc[dataset, 'b']}",
                "decoder": MAP_DECODER,
                "language": language,
                "ours_mean": np.nan if cell is None else float(cell["difference"]),
                "ci_low": np.nan if cell is None else float(cell["ci_low"]),
                "ci_high": np.nan if cell is None else float(cell["ci_high"]),
                "n_seeds": 0 if cell is None else int(cell["n_seeds"]),
                "paper_value": theirs[language][0] if language in theirs else np.nan,
                "paper_compared": f"{theirs[language][1]} − {theirs[language][2]}"
                if language in theirs
                else "",
            }
        )
    return [line], tidy


TIDY_COLUMNS = (
    "row",
    "loss",
    "decoder",
    "language",
    "dataset",
    "proxy",
    "ours_mean",
    "ours_std",
    "n_seeds",
    "ci_low",
    "ci_high",
    "paper_value",
    "paper_compared",
    "difference",
)


def table1(
    parse: ParseResults, paper: pd.DataFrame, cells: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1 as shown (a column per language, headed with its proxy or unobtainable mark) and in
    tidy form (:data:`TIDY_COLUMNS`, a row per (table row, language))."""
    languages = _languages(paper)
    proxies = proxy_datasets(parse.metrics)
    stats = uas_stats(parse.metrics)
    parts = [
        _loss_rows(stats, paper, languages),
        _reference_rows(paper, languages),
        _difference_rows(parse, paper, cells, languages),
    ]
    shown = pd.DataFrame(
        [line for part in parts for line in part[0]], columns=["loss", "decoding", *languages]
    )
    shown = shown.rename(columns={language: _header(language, proxies) for language in languages})
    tidy = pd.DataFrame([row for part in parts for row in part[1]])
    tidy = tidy.assign(
        dataset=[dataset_name(language) if language in LANGUAGES else "" for language in tidy["language"]],
    )
    tidy = tidy.assign(proxy=tidy["dataset"].isin(proxies))
    return shown, tidy.reindex(columns=list(TIDY_COLUMNS))


def support_table(parse: ParseResults) -> pd.DataFrame:
    """Per (language, SparseMAP loss) whose curves hold a support size: the mean over seeds of the
    trees per sentence at epoch 1, at the selected epoch and at the last epoch (epoch 0, the
    untrained model, left out as in the ledger's cells)."""
    if TREE_SUPPORT not in parse.curves.columns:
        return pd.DataFrame()
    curves = parse.curves[(parse.curves["epoch"] >= 1) & parse.curves[TREE_SUPPORT].notna()]
    proxies = proxy_datasets(parse.metrics)
    rows = []
    for (dataset, loss), runs in curves.groupby(["dataset", "loss"], sort=False):
        ends: dict[str, list[float]] = {"first": [], "selected": [], "last": []}
        for _, run in runs.groupby("seed"):
            support = run.set_index("epoch")[TREE_SUPPORT].astype(float)
            selected = run["best_epoch"].iloc[0]
            ends["first"].append(support[support.index.min()])
            ends["selected"].append(support.get(selected, np.nan))
            ends["last"].append(support[support.index.max()])
        rows.append(
            {
                "language": _header(LANGUAGE_OF[dataset], proxies),
                "loss": PARSER_LOSSES[loss].label if loss in PARSER_LOSSES else loss,
                "seeds": runs["seed"].nunique(),
                "trees per sentence, epoch 1": f"{np.mean(ends['first']):.2f}",
                "at the selected epoch": f"{np.nanmean(ends['selected']):.2f}",
                "at the last epoch": f"{np.mean(ends['last']):.2f}",
            }
        )
    return pd.DataFrame(rows)


def parse_sections(parse: ParseResults, paper_csv: Path, cells: pd.DataFrame) -> list[ParseSection]:
    """The section's tables that have results: Table 1 when a parser was evaluated on test, the
    support table when a parser's curves hold its support size; none when no parser ran."""
    sections = []
    if not uas_stats(parse.metrics).empty:
        shown, tidy = table1(parse, read_paper(paper_csv), cells)
        title = "SparseMAP paper, Table 1: dependency parsing, test UAS (%), ours beside the paper's"
        sections.append(ParseSection("sparsemap-table1-parsing", title, shown, tidy))
    support = support_table(parse)
    if not support.empty:
        title = "SparseMAP paper, Fig. 4's question: the parsers' support size over training (sparsemap-2)"
        sections.append(ParseSection("sparsemap-parsing-support", title, support, support))
    return sections


def write_sections(sections: list[ParseSection], tables_dir: Path) -> list[Path]:
    """Each section as ``<stem>.md`` (as shown) and ``<stem>.csv`` (tidy); the paths written."""
    written = []
    for section in sections:
        forms: Mapping[str, str] = {
            "md": section.shown.to_markdown(index=False) + "\n",
            "csv": section.tidy.to_csv(index=False, lineterminator="\n"),
        }
        for extension, text in forms.items():
            path = tables_dir / f"{section.stem}.{extension}"
            write_atomic(path, text)
            written.append(path)
    return written
