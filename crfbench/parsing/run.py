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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import environment
from ..config import check_device_available, parse_device
from ..io import CorruptFileError, check_fields, load_torch, read_json, save_torch, write_json
from ..schema import CONFIG_FILE, MODEL_FILE
from ..uses import PARSER_LOSSES, check_names
from .losses import decode
from .model import ArcScorer, ParserConfig, encode
from .treebank import LANGUAGES, Parse, ParseData, load

#: The paper's Adam learning-rate grid ({.5, 1, 2, 4, 8} × 1e-3), widened by 2 at an edge that wins.
LEARNING_RATES: tuple[float, ...] = (0.5e-3, 1e-3, 2e-3, 4e-3, 8e-3)
#: How results name the parser (their ``encoder_name``).
ENCODER_NAME = "kg-bilstm"


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
            "max_train_sentences",
            "max_eval_sentences",
            "threads",
        ):
            value = getattr(self, name)
            optional = name.startswith("max_") or name == "threads"
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


def load_data(config: ParseConfig, data_dir: str | Path | None = None) -> ParseData:
    """The run's dataset, cut to its sizes."""
    return load(config.dataset, data_dir).cut(config.max_train_sentences, config.max_eval_sentences)


def record_run(run_dir: Path, config: ParseConfig, data: ParseData, device: torch.device) -> None:
    """Write ``config.json``, or check that the folder's has the same settings (ValueError if not)."""
    path = Path(run_dir) / CONFIG_FILE
    if path.exists():
        previous = check_fields(path, read_json(path), ("config",))["config"]
        if previous != config.to_dict():
            raise ValueError(f"{path}: this run directory was made with different settings; use a new one")
    write_json(
        path,
        {"config": config.to_dict(), "dataset": data.describe(), "environment": environment.describe(device)},
    )


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


@torch.no_grad()
def predict(
    scorer: ArcScorer, parses: Sequence[Parse], batch_size: int, device: torch.device
) -> list[tuple[int, ...]]:
    """The MAP tree of each sentence (its heads, 0 = root), in the order given."""
    scorer.eval()
    order = sorted(range(len(parses)), key=lambda i: len(parses[i]))  # similar lengths: less padding
    heads: dict[int, tuple[int, ...]] = {}
    for start_at in range(0, len(order), batch_size):
        indices = order[start_at : start_at + batch_size]
        batch = encode([parses[i] for i in indices], scorer.vocabulary, device)
        predicted = decode(scorer(batch.words, batch.upos, batch.lengths), batch.lengths).cpu()
        for row, i in enumerate(indices):
            heads[i] = tuple(int(h) for h in predicted[row, 1 : len(parses[i]) + 1])
    return [heads[i] for i in range(len(parses))]
