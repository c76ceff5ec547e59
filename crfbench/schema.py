"""Columns of the compact result tables that name a run by its key alone: the per-epoch dev curves
(``train.dev_curve`` -> ``results/curves.csv``), the test set's per-sentence counts (``evaluate``
-> ``results/sentences.csv.gz``) and the iteration sweep (``sweep`` -> ``results/sweep.csv``).
Their writers, ``aggregate`` and the report read them from here."""

from __future__ import annotations

from .metrics import SENTENCE_COUNTS

#: What names a run: one (dataset, encoder, training loss, seed).
RUN_KEY = ("dataset", "encoder_name", "loss", "seed")

CURVE_COLUMNS = RUN_KEY + (
    "epoch",
    "train_loss",
    "dev_metric",
    "dev_value",
    "selection_decoder",
    "learning_rate",
    "seconds",
    "best_epoch",
    "epoch_cap",
    "stopped_by",
    "still_improving",
    "dev_support",  # SparseMAP losses: mean support size on dev (paths per sentence); empty for others
)
CURVE_NUMBERS = (
    "seed",
    "epoch",
    "train_loss",
    "dev_value",
    "learning_rate",
    "seconds",
    "best_epoch",
    "epoch_cap",
    "dev_support",
)

SENTENCE_COLUMNS = RUN_KEY + ("split", "decoder", "sentence") + SENTENCE_COUNTS
SENTENCE_NUMBERS = ("seed", "sentence") + SENTENCE_COUNTS

SWEEP_COLUMNS = RUN_KEY + (
    "sentences",
    "method",
    "iterations",
    "temperature",
    "penalty",
    "solver",  # SparseMAP's; empty for the other methods
    "metric",
    "value",
)
SWEEP_NUMBERS = ("seed", "sentences", "iterations", "temperature", "penalty", "value")
#: Number columns that may be empty: a metric without a value, options a method does not have (the
#: Bethe OCR table's solver iterations and ψ, for its models without an energy).
OPTIONAL_NUMBERS = ("value", "iterations", "temperature", "penalty", "solver_iterations", "psi")
