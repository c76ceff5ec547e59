"""The results folder's layout: every file the engine and the workflow write under it (paths relative
to the results folder) and the columns of its tables.

One home for these names, so that their writers (the engine's stages, the Bethe and Newton
experiments), the workflow (``workflow/rules/*.smk``), ``crfbench aggregate`` and the report agree
on them without importing each other. Only names and column lists live here: the module imports
nothing heavy, since Snakemake reads it while it parses the workflow.
"""

from __future__ import annotations

from .metrics import SENTENCE_COUNTS

# -- a run's folder --------------------------------------------------------------------------------

#: One trained run's folder, and the folder of one (dataset, encoder)'s timing job.
RUN_DIR = "runs/{dataset}/{encoder}/{loss}/{seed}"
TIMING_DIR = "timing/{dataset}/{encoder}"
#: The settings a job is asked for (the workflow writes it; its change reruns the job).
SETTINGS_FILE = "settings.json"
#: The files the engine writes into a run's (or timing job's) folder.
CONFIG_FILE = "config.json"  # resolved settings, dataset facts, environment
CHECKPOINT_FILE = "checkpoint.pt"  # everything needed to resume after the last finished epoch
MODEL_FILE = "model.pt"  # the selected model
SUMMARY_FILE = "train.json"  # the dev curve and why training stopped, written when it ends
EVALUATION_FILE = "evaluation.csv"  # METRICS_COLUMNS
SENTENCES_FILE = "sentences.csv"  # SENTENCE_COLUMNS
SWEEP_FILE = "sweep.csv"  # SWEEP_COLUMNS
TIMING_FILE = "timing.csv"  # TIMING_COLUMNS
#: A dataset's facts (``crfbench prepare-data``), which the training and timing jobs wait for.
DATA_FACTS = "data/{dataset}.json"
#: Timing tables measured on a lent GPU and committed beside this run's.
DEVICE_TIMING_FILES = "gpu/*/timing/*/*/timing.csv"

# -- the results tables ----------------------------------------------------------------------------

#: The per-run files gathered (``crfbench aggregate``) into one table each.
METRICS_TABLE = "metrics.csv"  # every run's evaluation.csv
SENTENCES_TABLE = "sentences.csv.gz"  # every run's sentences.csv
CURVES_TABLE = "curves.csv"  # the dev curve of every run's train.json
SWEEP_TABLE = "sweep.csv"  # every swept run's sweep.csv
TIMING_TABLE = "timing.csv"  # every timing job's timing.csv (and the GPU ones)
DATASETS_TABLE = "datasets.csv"  # the data each run used, from its config.json (DATASET_COLUMNS)
#: The agreement step's table (``crfbench agree``): one row per comparison, ``ok`` within tolerance.
AGREEMENT_TABLE = "agreement/agreement.csv"
#: The asv scaling suite's results as one table (``crfbench scaling``).
SCALING_TABLE = "scaling.csv"
#: The profile's notes the report prints (the workflow's report job writes them).
REPORT_NOTES = "report-notes.json"

#: Columns of ``datasets.csv``: per dataset (options, protocol), encoder (name, width) and split,
#: the sentences and tokens the runs used, and the cap the run's settings put on that split
#: (``max_train_sentences``, ``max_eval_sentences``; empty: none); one row per distinct fact.
DATASET_COLUMNS = (
    "dataset",
    "dataset_options",
    "protocol",
    "encoder_name",
    "encoder_dim",
    "split",
    "sentences",
    "tokens",
    "cap",
)
DATASET_NUMBERS = ("encoder_dim", "sentences", "tokens", "cap")

#: What names a run: one (dataset, encoder, training loss, seed).
RUN_KEY = ("dataset", "encoder_name", "loss", "seed")

#: What a measured row says of its run and where it ran (the start of metrics and timing rows).
MEASURED_RUN = (
    "dataset",
    "dataset_options",
    "protocol",
    "encoder_name",
    "loss",
    "seed",
    "backend",
    "device",
    "device_name",
)
#: Columns of ``evaluation.csv`` / ``metrics.csv`` that the report reads; the others are kept.
METRICS_COLUMNS = (
    *MEASURED_RUN,
    "revision",
    "split",
    "decoder",
    "metric",
    "value",
)
#: Columns of ``timing.csv`` that the report reads; the others are kept.
TIMING_COLUMNS = (
    *MEASURED_RUN,
    "threads",
    "batch_size",
    "revision",
    "network",  # "untrained", or the trained run whose model was timed (crfbench.timing)
    "kind",
    "name",
    "mode",  # one of crfbench.uses.TIMING_MODES
    "iterations",
    "round",
    "seconds",
)
#: The columns of the metrics and timing tables that hold numbers.
NUMERIC_COLUMNS = ("value", "iterations", "round", "seconds")
METRICS_NUMBERS = tuple(name for name in METRICS_COLUMNS if name in NUMERIC_COLUMNS)
TIMING_NUMBERS = tuple(name for name in TIMING_COLUMNS if name in NUMERIC_COLUMNS)

#: The per-epoch dev curves (a run's ``train.json`` -> ``curves.csv``).
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

#: The test set's per-sentence counts (``sentences.csv`` -> ``sentences.csv.gz``), which the claim
#: ledger bootstraps over; the Bethe experiments' per-word and per-citation tables share them.
SENTENCE_COLUMNS = RUN_KEY + ("split", "decoder", "sentence") + SENTENCE_COUNTS
SENTENCE_NUMBERS = ("seed", "sentence") + SENTENCE_COUNTS

#: The iteration sweep (``sweep.csv``).
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

#: The agreement table's columns (``crfbench.agreement`` writes them).
AGREEMENT_COLUMNS = (
    "method",
    "function",
    "quantity",
    "backend_a",
    "backend_b",
    "N",
    "T",
    "dtype",
    "neg_inf",
    "max_abs_err",
    "max_rel_err",
    "tolerance",
    "ok",
)

#: Parameters of the asv suite's benchmarks, in the order they appear in the scaling table.
SCALING_PARAMETERS = (
    "backend",
    "device",
    "method",
    "operation",
    "N",
    "T",
    "B",
    "iterations",
    "temperature",
    "implementation",
    "threads",
    "solver",
    "measurements",
    "task",
    "F",
    "mode",  # eager or compiled (benchmarks.common.MODES); last: added after the others
)
#: The interquartile range of a timing's repeats (asv's ``q_25`` and ``q_75``; empty for a ``track_``
#: benchmark, which records one number).
SCALING_SPREAD = ("q25", "q75")
SCALING_COLUMNS = (
    "machine",
    "commit",
    "date",
    "benchmark",
    "name",
    "unit",
    "value",
    *SCALING_SPREAD,
    *SCALING_PARAMETERS,
)

# -- the Bethe-projection paper's experiments (results/bethe/) ------------------------------------

#: Table 5's collective graphical models (``crfbench bethe cgm``).
CGM_TABLE = "bethe/cgm.csv"
CGM_COLUMNS = (
    "dataset",
    "cells",
    "edge_entries",
    "trial",
    "model",
    "seconds",
    "iterations",
    "converged",
    "objective",
    "objective_gap",
    "marginal_difference",
)

#: Table 4's OCR: one folder per test fold, with the fold's table and its per-word counts
#: (SENTENCE_COLUMNS), gathered into one table each.
OCR_FOLD = "bethe/ocr/fold{fold}"
OCR_FOLD_TABLE = "table.csv"  # written last: the sign of a finished fold
OCR_FOLD_WORDS = "words.csv"
OCR_TABLE = "bethe/ocr.csv"
OCR_WORDS_TABLE = "bethe/ocr-words.csv.gz"
#: The dataset and encoder names of the OCR per-word rows.
OCR_DATASET, OCR_ENCODER = "ocr-taskar", "pixels"
#: The OCR table's models (its rows, in order): the chain CRF, the Bethe models, the classifier.
OCR_MODELS = ("2gram-base", "Lu", "Lu-MM", "Lw", "Lw-MM", "55-class-classifier-MM")
OCR_COLUMNS = (
    "fold",
    "model",
    "char_accuracy",
    "dev_accuracy",
    "epochs",
    "best_epoch",
    "flattened",
    "solver_iterations",
    "psi",
    "seconds",
)
#: The columns that hold numbers (``solver_iterations`` and ``psi`` are empty for the models without
#: an energy).
OCR_NUMBERS = (
    "fold",
    "char_accuracy",
    "dev_accuracy",
    "epochs",
    "best_epoch",
    "solver_iterations",
    "psi",
    "seconds",
)

#: Table 1's citation field extraction: one folder per seed holding a table (``CITATION_RUN_FILE``)
#: for each name of ``CITATION_TABLES``, each gathered into the results table it maps to.
CITATION_RUN = "bethe/citation/seed{seed}"
CITATION_RUN_FILE = "{name}.csv"
CITATION_SCORES_TABLE = "bethe/citation.csv"
CITATION_CAPS_TABLE = "bethe/citation-caps.csv"
CITATION_ITERATIONS_TABLE = "bethe/citation-iterations.csv"
CITATION_SENTENCES_TABLE = "bethe/citation-sentences.csv.gz"
CITATION_TABLES = {
    "scores": CITATION_SCORES_TABLE,
    "iteration_cap": CITATION_CAPS_TABLE,
    "iterations": CITATION_ITERATIONS_TABLE,
    "sentences": CITATION_SENTENCES_TABLE,
}
#: The dataset and encoder names of the per-citation rows, and the two models compared.
CITATION_DATASET, CITATION_ENCODER = "umass-citation", "features"
CITATION_BASELINE, CITATION_NONLOCAL = "chain-crf-baseline", "nonlocal-energies"
#: Columns of a run's tables (each with its seed, so that runs concatenate).
CITATION_SCORE_COLUMNS = ("seed", "model", "segment_f1", "dev_f1", "best_epoch", "epochs_run")
CITATION_SCORE_NUMBERS = ("seed", "segment_f1", "dev_f1", "best_epoch", "epochs_run")
CITATION_CAP_COLUMNS = ("seed", "cap", "segment_f1")
CITATION_CAP_NUMBERS = CITATION_CAP_COLUMNS
CITATION_ITERATION_COLUMNS = ("seed", "tolerance", "citation", "iterations", "converged")
CITATION_ITERATION_NUMBERS = ("seed", "tolerance", "citation", "iterations")
#: Per-sentence counts of the Bethe experiments (SENTENCE_COLUMNS), for the claim ledger.
BETHE_SENTENCE_TABLES = (OCR_WORDS_TABLE, CITATION_SENTENCES_TABLE)

# -- the Newton-CRF study (results/newton/) ---------------------------------------------------------

#: Each solver's path to the optimum, one row per iteration.
NEWTON_TRACE_TABLE = "newton/trace.csv"
NEWTON_TRACE_COLUMNS = (
    "solver",
    "iteration",
    "seconds",
    "objective",
    "gradient_norm",
    "function",
    "gradient",
    "hvp",
)
#: Each solver's end point.
NEWTON_SOLVERS_TABLE = "newton/solvers.csv"
NEWTON_SOLVER_COLUMNS = (
    "solver",
    "objective",
    "gradient_norm",
    "iterations",
    "seconds",
    "test_f1",
    "train_sentences",
    "parameters",
)
#: What one gradient and one Hessian-vector product cost, per grid point.
NEWTON_COST_TABLE = "newton/cost.csv"
NEWTON_COST_COLUMNS = ("backend", "N", "T", "F", "gradient", "hvp_dp", "hvp_dp_with_sweep", "hvp_autodiff")

# -- the SparseMAP tree-solver study (results/sparsemap/) --------------------------------------------

#: Every solver's trace on every random tree instance, one row per iteration (crfbench.tree_solvers).
TREE_SOLVERS_TABLE = "sparsemap/tree-solvers.csv"
TREE_SOLVER_COLUMNS = (
    "instance",
    "words",
    "solver",
    "iteration",
    "seconds",
    "objective",
    "optimum",
    "gap",
    "wolfe_gap",
    "support",
    "converged",
)

# -- the SparseMAP paper's dependency parsers (results/parse/) --------------------------------------

#: A parser run's folder (``crfbench parse train`` and ``evaluate``: ``CONFIG_FILE``, ``MODEL_FILE``,
#: ``SUMMARY_FILE``, ``EVALUATION_FILE``, ``SENTENCES_FILE``); ``language`` one of
#: ``crfbench.parsing.treebank.LANGUAGES``, ``loss`` one of ``crfbench.uses.PARSER_LOSSES``.
PARSE_RUN_DIR = "parse/runs/{language}/{loss}/{seed}"
#: The settings of a (language, loss)'s runs but their seed and learning rate (the workflow writes it).
PARSE_SETTINGS_FILE = "parse/settings/{language}/{loss}.json"
#: A learning-rate grid run's folder (``learning_rate`` as Python writes the float), and the
#: choice among a (language, loss)'s grid runs (``crfbench parse choose-lr``).
PARSE_GRID_RUN_DIR = "parse/lr/{language}/{loss}/seed{seed}/lr{learning_rate}"
PARSE_LEARNING_RATE_FILE = "parse/lr/{language}/{loss}/chosen.json"
#: Every parser run's evaluation.csv, sentences.csv and dev curve (train.json), gathered as the
#: tagger runs' are into tables of the same columns (METRICS_COLUMNS and the parser's own,
#: SENTENCE_COLUMNS, CURVE_COLUMNS).
PARSE_METRICS_TABLE = "parse/metrics.csv"
PARSE_SENTENCES_TABLE = "parse/sentences.csv.gz"
PARSE_CURVES_TABLE = "parse/curves.csv"

# -- what crfbench aggregate gathers ---------------------------------------------------------------

#: Each per-run CSV kind that ``crfbench aggregate`` takes: the columns the results tables need, and
#: which of them must be numbers.
PER_RUN_TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    EVALUATION_FILE: (METRICS_COLUMNS, METRICS_NUMBERS),
    TIMING_FILE: (TIMING_COLUMNS, TIMING_NUMBERS),
    SENTENCES_FILE: (SENTENCE_COLUMNS, SENTENCE_NUMBERS),
    SWEEP_FILE: (SWEEP_COLUMNS, SWEEP_NUMBERS),
    f"bethe OCR {OCR_FOLD_TABLE}": (OCR_COLUMNS, OCR_NUMBERS),
    "bethe citation scores.csv": (CITATION_SCORE_COLUMNS, CITATION_SCORE_NUMBERS),
    "bethe citation iteration_cap.csv": (CITATION_CAP_COLUMNS, CITATION_CAP_NUMBERS),
    "bethe citation iterations.csv": (CITATION_ITERATION_COLUMNS, CITATION_ITERATION_NUMBERS),
}
