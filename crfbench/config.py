"""One run's settings: what to train on, how, and with which scorer. Every output records them.

Where the paper is silent (batch size, epochs, dropout, gradient clipping, selection decoder) the
default below is what the field commonly does, and the resolved value is written next to every
result so that no choice is hidden.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from .io import read_text
from .models import ScorerConfig
from .models.config import check_field_types
from .objectives import DECODERS, LOSSES

#: Adam learning rates of paper App. I: from scratch / fine-tuning a pretrained encoder; a BiLSTM
#: trained over frozen features (not in the paper): the usual 1e-3.
LEARNING_RATES = {"embeddings": 3e-4, "pretrained": 3e-5, "frozen": 1e-3}


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training run (one cell of Table 1 for one seed)."""

    dataset: str
    dataset_options: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None  # None: the CRFBENCH_DATA environment variable
    scorer: ScorerConfig = field(default_factory=ScorerConfig)
    encoder_name: str | None = (
        None  # label of the scorer settings in results; None: "L<layers>" / "pretrained"
    )
    loss: str = "crf"
    loss_iterations: int = 10  # MF / BCRF iterations inside the training loss (paper: 10)
    epochs: int = 100  # the cap, set high: the learning-rate schedule ends training (below)
    # Adam at a constant rate, cut by ``lr_factor`` whenever the dev score has not risen by more
    # than ``min_delta`` over its last step up for ``patience`` epochs (torch's ReduceLROnPlateau);
    # the next such plateau after ``lr_reductions`` cuts, or at the ``min_learning_rate`` floor, ends
    # training. ``patience`` None: no cuts and no early stop, the constant rate to the cap.
    patience: int | None = 2
    min_delta: float = 0.0
    lr_factor: float = 0.5
    lr_reductions: int = 2
    min_learning_rate: float = 0.0
    batch_size: int = 32
    # Training batches from pools of ``length_pool`` batches sorted by length (less padding for the
    # sequential methods; crfbench.batching.length_pooled_batches); None: uniformly random batches.
    length_pool: int | None = 50
    learning_rate: float | None = None  # None: LEARNING_RATES[scorer.encoder]
    # A dev grid: one run per rate (sub-folders of the run's), the best dev score's is the run's
    # (crfbench.tuning.choose_learning_rate); replaces ``learning_rate``.
    learning_rates: tuple[float, ...] | None = None
    grad_clip: float | None = 5.0  # max gradient norm; None disables clipping
    selection_decoder: str | None = None  # dev-set model selection; None: the loss's own decoder
    seed: int = 0
    max_train_sentences: int | None = None  # first n training sentences (smoke runs)
    max_eval_sentences: int | None = None  # first n dev/test sentences (smoke runs)
    device: str = "cpu"
    threads: int | None = 1  # torch CPU threads; None leaves torch's default

    def __post_init__(self) -> None:
        check_field_types(self, lambda name: f"{name}:")
        parse_device(self.device)
        if self.loss not in LOSSES:
            raise ValueError(f"loss: {self.loss!r} is not one of {', '.join(LOSSES)}")
        if self.encoder_name is None:
            encoder = self.scorer.encoder
            label = encoder if encoder in ("pretrained", "frozen") else f"L{self.scorer.layers}"
            object.__setattr__(self, "encoder_name", label)
        if self.loss == "unstructured" and self.scorer.transitions:
            # Paper, Table 1: "the unstructured model does not have transition scores".
            object.__setattr__(self, "scorer", dataclasses.replace(self.scorer, transitions=False))
        if self.selection_decoder is not None and self.selection_decoder not in DECODERS:
            raise ValueError(
                f"selection_decoder: {self.selection_decoder!r} is not one of {', '.join(DECODERS)}"
            )
        positive = {"loss_iterations": self.loss_iterations, "epochs": self.epochs}
        positive |= {"batch_size": self.batch_size}
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        for name in ("min_delta", "min_learning_rate"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        if not 0.0 < self.lr_factor < 1.0:
            raise ValueError(f"lr_factor: must be in (0, 1), got {self.lr_factor!r}")
        if isinstance(self.lr_reductions, bool) or self.lr_reductions < 0:
            raise ValueError(f"lr_reductions: must be an integer >= 0, got {self.lr_reductions!r}")
        if self.learning_rates is not None:
            if self.learning_rate is not None:
                raise ValueError("learning_rates: give a grid or one learning_rate, not both")
            rates = self.learning_rates
            if not rates or len(set(rates)) != len(rates) or not all(rate > 0 for rate in rates):
                raise ValueError(f"learning_rates: must be distinct positive numbers, got {list(rates)!r}")
        for name in ("learning_rate", "grad_clip"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name}: must be positive or null, got {value!r}")
        for name in ("patience", "length_pool", "max_train_sentences", "max_eval_sentences", "threads"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}: must be a positive integer or null, got {value!r}")

    @property
    def resolved_learning_rate(self) -> float:
        return self.learning_rate if self.learning_rate is not None else LEARNING_RATES[self.scorer.encoder]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunConfig:
        """Build from plain values (YAML/JSON); unknown keys raise ``ValueError`` naming them."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown run setting(s) {unknown}; valid: {sorted(known)}")
        if "dataset" not in values:
            raise ValueError("dataset: a run needs a dataset name")
        values = dict(values)
        scorer = values.get("scorer") or {}
        if not isinstance(scorer, dict):
            raise ValueError(f"scorer: must be a mapping of scorer settings, got {scorer!r}")
        values["scorer"] = ScorerConfig.from_dict(scorer)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["scorer"] = self.scorer.to_dict()
        if self.learning_rates is not None:  # as JSON reads it back
            values["learning_rates"] = list(self.learning_rates)
        return values

    def at_learning_rate(self, rate: float) -> RunConfig:
        """The settings of one run of the ``learning_rates`` grid: trained at ``rate``."""
        return dataclasses.replace(self, learning_rate=rate, learning_rates=None)


def parse_device(device: str) -> torch.device:
    """``device`` as a torch device; ValueError naming the setting when it is not one we run on."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device: {device!r} is not a device to run on; use cpu, cuda or cuda:<index>")
    return parsed


def check_device_available(device: str) -> torch.device:
    """The torch device ``device`` when this machine has it; ValueError naming the setting otherwise.

    Separate from ``RunConfig`` so that settings for a GPU can be checked (and recorded runs read)
    on a machine without one; commands call it before they write anything.
    """
    parsed = parse_device(device)
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            raise ValueError(f"device: {device!r} is not available: this machine has no CUDA device")
        if parsed.index is not None and parsed.index >= count:
            raise ValueError(f"device: {device!r} is not available: this machine has {count} CUDA device(s)")
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device: {device!r} is not available on this machine")
    return parsed


def set_dotted(values: dict[str, Any], assignment: str) -> None:
    """Apply one ``key.sub=value`` override (value parsed as YAML) to nested ``values``."""
    key, separator, text = assignment.partition("=")
    if not separator or not key:
        raise ValueError(f"--set {assignment!r}: expected key=value (e.g. scorer.layers=2)")
    *parents, leaf = key.split(".")
    target = values
    for parent in parents:
        target = target.setdefault(parent, {})
        if not isinstance(target, dict):
            raise ValueError(f"--set {assignment!r}: {parent} is not a section")
    target[leaf] = yaml.safe_load(text)


def load_config(path: Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a YAML or JSON run config (or start empty) and apply ``key=value`` overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        text = read_text(path)
        try:  # JSON by its own parser: YAML 1.1 reads a number like 5e-05 as a string
            values = json.loads(text) if Path(path).suffix == ".json" else yaml.safe_load(text) or {}
        except (json.JSONDecodeError, yaml.YAMLError) as error:
            raise ValueError(
                f"{path}: not valid {'JSON' if Path(path).suffix == '.json' else 'YAML'}: {error}"
            ) from None
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a mapping of run settings at the top level")
    from_file = copy.deepcopy(values)
    for assignment in overrides:
        set_dotted(values, assignment)
    try:
        return RunConfig.from_dict(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{_blame(path, from_file, overrides)}{error}") from None


def _blame(path: Path | None, from_file: dict[str, Any], overrides: Sequence[str]) -> str:
    """The prefix of a settings error: the file, unless it is fine alone and an override is at fault."""
    if overrides:
        try:
            RunConfig.from_dict(from_file)
        except (TypeError, ValueError):
            pass
        else:
            return "--set: "
    return f"{path}: " if path is not None else ""


#: Pipeline config keys that say where jobs run or what they may write, not what they compute: left
#: out of :func:`profile_digest`.
PLACEMENT_KEYS = ("cluster", "allow_dirty", "data_dir")


def profile_digest(config: Mapping[str, Any]) -> str:
    """The SHA-256 of a pipeline config as Snakemake validated it (defaults filled in), without its
    :data:`PLACEMENT_KEYS`: the report job records it beside the profile's notes, and a checkout's
    committed results count as the reference run of a config only when their digest is its own
    (``workflow/rules/common.smk``, ``reference``)."""
    kept = {key: value for key, value in config.items() if key not in PLACEMENT_KEYS}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()
