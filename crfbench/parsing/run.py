"""A parser run's settings and folder, shared by training and evaluation (neither imports the other).

A run's folder holds the files of ``crfbench.schema`` that fit a parser: ``config.json`` (settings,
dataset facts, environment), ``model.pt`` (the model of the best dev epoch, with its vocabulary),
``train.json`` (the per-epoch dev curve, written when training ends), ``evaluation.csv`` (the
``METRICS_COLUMNS`` rows) and ``sentences.csv`` (per-sentence counts of the test set).

Defaults where the SparseMAP paper is silent (:class:`ParseConfig`): the learning rate is the
middle of the paper's grid (``LEARNING_RATES``), to be chosen on dev with
``crfbench.tuning.choose_learning_rate``; batches of 32 sentences, the loss averaged over
them; at most 30 epochs, stopping once 5 epochs in a row have not raised the dev UAS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from .. import environment
from ..config import check_device_available, parse_device
from ..io import CorruptFileError, check_fields, load_torch, read_json, save_torch, write_json
from ..run_folder import recorded_settings_kept, summary_curve
from ..schema import CONFIG_FILE, EVALUATION_FILE, MODEL_FILE, SENTENCES_FILE, SUMMARY_FILE
from ..uses import PARSER_DECODER, PARSER_LOSSES, Use, check_names
from .losses import decode, support_sizes
from .model import ArcScorer, ParserConfig, encode
from .treebank import LANGUAGES, TASK, Parse, ParseData, dataset_name, load

#: The paper's Adam learning-rate grid ({.5, 1, 2, 4, 8} × 1e-3), widened by 2 at an edge that wins.
LEARNING_RATES: tuple[float, ...] = (0.5e-3, 1e-3, 2e-3, 4e-3, 8e-3)
#: How results name the parser (their ``encoder_name``).
ENCODER_NAME = "kg-bilstm"
#: Everything training and evaluation write into a parser run's folder; the settings record last,
#: so that a discard cut short is finished by the next call instead of mixing two runs.
RUN_FILES = (MODEL_FILE, SUMMARY_FILE, EVALUATION_FILE, SENTENCES_FILE, CONFIG_FILE)


@dataclass(frozen=True)
class ParseConfig:
    """Settings of one parser run (one cell of the paper's Table 1 for one seed and learning rate)."""

    dataset: str  # a language of crfbench.parsing.treebank.LANGUAGES
    loss: str  # a name of crfbench.uses.PARSER_LOSSES
    seed: int = 0
    learning_rate: float = 2e-3
    epochs: int = 30  # the cap
    patience: int = 5  # epochs without a better dev UAS before stopping
    batch_size: int = 32
    length_pool: int | None = 50  # batches of similar lengths, as RunConfig.length_pool; None: random
    max_train_sentences: int | None = None  # the first n training sentences (smoke runs)
    max_eval_sentences: int | None = None  # the first n dev and test sentences (smoke runs)
    parser: ParserConfig = field(default_factory=ParserConfig)
    device: str = "cpu"
    threads: int | None = 1  # torch CPU threads; None leaves torch's default

    def __post_init__(self) -> None:
        check_names("dataset", [self.dataset], LANGUAGES)
        check_names("loss", [self.loss], PARSER_LOSSES)
        if not isinstance(self.learning_rate, int | float) or not self.learning_rate > 0:
            raise ValueError(f"learning_rate: must be a positive number, got {self.learning_rate!r}")
        for name in (
            "epochs",
            "patience",
            "batch_size",
            "length_pool",
            "max_train_sentences",
            "max_eval_sentences",
            "threads",
        ):
            value = getattr(self, name)
            optional = name.startswith("max_") or name in ("threads", "length_pool")
            if (value is None and optional) or (
                isinstance(value, int) and not isinstance(value, bool) and value >= 1
            ):
                continue
            raise ValueError(f"{name.replace('_', '-')}: must be a positive integer, got {value!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed: must be an integer, got {self.seed!r}")
        parse_device(self.device)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ParseConfig:
        values = dict(values)
        parser = ParserConfig.from_dict(values.pop("parser", {}))
        known = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
        return cls(**values, parser=parser)


def load_settings(path: Path | None, given: Mapping[str, Any]) -> ParseConfig:
    """A run's settings: the JSON mapping of ``ParseConfig`` fields in ``path`` (the pipeline's
    ``settings.json``; none when ``path`` is None) with the ``given`` values laid over it.
    ValueError naming the file, or the setting, that is wrong."""
    values: dict[str, Any] = {}
    if path is not None:
        values = read_json(path)
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a mapping of parser settings at the top level")
    values = values | dict(given)
    for name in ("dataset", "loss"):
        if name not in values:
            raise ValueError(f"--{name}: required (or in the settings file)")
    try:
        return ParseConfig.from_dict(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}" if path is not None else str(error)) from None


def load_data(config: ParseConfig, data_dir: str | Path | None = None) -> ParseData:
    """The run's dataset, cut to its sizes."""
    return load(config.dataset, data_dir).cut(config.max_train_sentences, config.max_eval_sentences)


def record_run(
    run_dir: Path,
    config: ParseConfig,
    data: ParseData,
    device: torch.device,
    *,
    restart_if_changed: bool = False,
) -> None:
    """Write ``config.json``, or check that the folder's has the same settings: a folder made with
    others is refused (ValueError), or with ``restart_if_changed`` emptied of the run's files
    (``RUN_FILES``) first, as the pipeline wants when a setting of its config changed."""
    if recorded_settings_kept(run_dir, config.to_dict(), RUN_FILES, restart_if_changed):
        return
    write_json(
        Path(run_dir) / CONFIG_FILE,
        {"config": config.to_dict(), "dataset": data.describe(), "environment": environment.describe(device)},
    )


def is_parser_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a parser run: its ``config.json`` records a parsing dataset (a
    tagger run's records its own task)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a run directory (no {CONFIG_FILE})")
    facts = check_fields(path, read_json(path), ("dataset",))["dataset"]
    return isinstance(facts, dict) and facts.get("task") == TASK


def dev_curve(run_dir: Path) -> pd.DataFrame:
    """The per-epoch dev curve of the finished parser run in ``run_dir`` (its ``train.json``) in the
    tagger runs' ``CURVE_COLUMNS`` (``run_folder.summary_curve``): the dataset as results name it
    (``ud-parse-en``), the parser as ``ENCODER_NAME``, the dev metric ``uas``, ``dev_support`` for
    the SparseMAP losses."""
    config = read_config(run_dir)
    run = {"dataset": dataset_name(config.dataset), "encoder_name": ENCODER_NAME, "loss": config.loss}
    return summary_curve(Path(run_dir) / SUMMARY_FILE, run | {"seed": config.seed})


def read_config(run_dir: Path) -> ParseConfig:
    """The settings recorded in ``run_dir/config.json``."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a parser run directory (no {CONFIG_FILE})")
    try:
        return ParseConfig.from_dict(check_fields(path, read_json(path), ("config",))["config"])
    except (TypeError, ValueError) as error:
        raise CorruptFileError(f"{path}: not a parser run's settings ({error})") from None


def save_model(path: Path, scorer: ArcScorer, epoch: int, dev_uas: float) -> None:
    """The scorer with what rebuilds it (sizes, vocabulary) and the epoch that made it."""
    payload = {
        "parser_config": scorer.config.to_dict(),
        "vocab": scorer.vocab_state(),
        "state_dict": scorer.state_dict(),
        "epoch": epoch,
        "dev_uas": dev_uas,
    }
    save_torch(path, payload)


def load_model(run_dir: Path, device: torch.device) -> tuple[ArcScorer, dict[str, Any]]:
    """The run's selected scorer (on ``device``, in evaluation mode) and ``model.pt``'s other fields."""
    path = Path(run_dir) / MODEL_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no trained parser; run `crfbench parse train` first")
    saved = check_fields(
        path, load_torch(path, map_location=device), ("parser_config", "vocab", "state_dict")
    )
    try:
        scorer = ArcScorer.from_state(ParserConfig.from_dict(saved["parser_config"]), saved["vocab"])
        scorer.load_state_dict(saved["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CorruptFileError(f"{path}: not a model of this code's parser ({reason})") from None
    return scorer.to(device).eval(), saved


def start(config: ParseConfig) -> torch.device:
    """Threads and device of a run (ValueError when the device is absent)."""
    environment.set_threads(config.threads)
    return check_device_available(config.device)


def _scored_batches(
    scorer: ArcScorer, parses: Sequence[Parse], batch_size: int, device: torch.device
) -> Iterator[tuple[list[int], Tensor, Tensor]]:
    """The arc scores of ``parses`` in batches of similar lengths (less padding): each batch's
    sentence indices, scores (B, N+1, N+1) and lengths (B,), the model in evaluation mode."""
    scorer.eval()
    order = sorted(range(len(parses)), key=lambda i: len(parses[i]))
    for start_at in range(0, len(order), batch_size):
        indices = order[start_at : start_at + batch_size]
        batch = encode([parses[i] for i in indices], scorer.vocabulary, device)
        yield indices, scorer(batch.words, batch.upos, batch.lengths), batch.lengths


@torch.no_grad()
def predict(
    scorer: ArcScorer,
    parses: Sequence[Parse],
    batch_size: int,
    device: torch.device,
    decoder: Use = PARSER_DECODER,
) -> list[tuple[int, ...]]:
    """The tree ``decoder`` predicts for each sentence (its heads, 0 = root), in the order given: by
    default the MAP tree."""
    heads: dict[int, tuple[int, ...]] = {}
    for indices, scores, lengths in _scored_batches(scorer, parses, batch_size, device):
        predicted = decode(scores, lengths, decoder).cpu()
        for row, i in enumerate(indices):
            heads[i] = tuple(int(h) for h in predicted[row, 1 : len(parses[i]) + 1])
    return [heads[i] for i in range(len(parses))]


@torch.no_grad()
def mean_support(scorer: ArcScorer, parses: Sequence[Parse], batch_size: int, device: torch.device) -> float:
    """The mean number of trees in each sentence's SparseMAP support under the model (``losses.
    support_sizes``): how sparse SparseMAP's predictions are, the per-epoch ``dev_support`` of the
    SparseMAP losses' dev curves."""
    trees = 0
    for _, scores, lengths in _scored_batches(scorer, parses, batch_size, device):
        trees += int(support_sizes(scores, lengths).sum())
    return trees / len(parses)
