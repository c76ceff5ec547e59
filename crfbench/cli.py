"""Command line of the experiment engine: ``python -m crfbench <command>``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import implementations

from . import io
from .io import CorruptFileError

SettingsT = TypeVar("SettingsT")  # an experiment's Settings dataclass

#: Errors that mean the user's input is at fault (a setting, an argument, a file): reported as one
#: line ``crfbench <command>: error: <message>`` with exit status 2. Anything else is a bug and
#: keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,  # a bad setting or file content (json.JSONDecodeError and UnicodeDecodeError too)
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
    CorruptFileError,  # a truncated or damaged input file
)


def one_line(message: object) -> str:
    """``message`` on one line: its lines joined with "; " (a user error is one line on stderr)."""
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip())


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line too (``--help`` still shows the usage)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def _checked(check: Callable[[str], object], name: str) -> Callable[[str], object]:
    """An argparse ``type`` that runs ``check`` and reports a user error as a bad argument value."""

    def convert(text: str) -> object:
        try:
            return check(text)
        except USER_ERRORS as error:
            raise argparse.ArgumentTypeError(one_line(error)) from None

    convert.__name__ = name  # argparse names the type in some messages
    return convert


def _integer(least: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least:
            kind = "a positive integer" if least == 1 else f"an integer >= {least}"
            raise ValueError(f"must be {kind}, got {text!r}")
        return value

    return convert


def _fold(text: str) -> int:
    fold = _integer(0)(text)
    if fold > 9:
        raise ValueError(f"must be a fold 0-9, got {text!r}")
    return fold


positive_int = _checked(_integer(1), "positive integer")
non_negative_int = _checked(_integer(0), "non-negative integer")
input_file = _checked(lambda text: io.check_input_file(Path(text)), "input file")
input_dir = _checked(lambda text: io.check_input_dir(Path(text)), "input directory")
output_file = _checked(lambda text: io.check_output_file(Path(text)), "output file")
output_dir = _checked(lambda text: io.check_output_dir(Path(text)), "output directory")


def _agree(args: argparse.Namespace) -> int:
    from . import agreement

    if "jax" in args.backends:
        import jax

        jax.config.update("jax_enable_x64", True)  # the float64 half of the grid
    grid = agreement.QUICK_GRID if args.quick else agreement.FULL_GRID
    table = agreement.run(grid, tuple(args.backends), args.csv, args.report)
    failed = int((~table.ok).sum())
    print(f"{len(table)} comparisons, {failed} outside tolerance -> {args.csv}, {args.report}")
    return 1 if failed else 0


def _config(args: argparse.Namespace):
    """The run settings of ``--config``/``--set`` (the engine checks their device before writing)."""
    from .config import load_config

    return load_config(args.config, args.set)


def _train(args: argparse.Namespace) -> int:
    from .train import train

    summary = train(
        _config(args),
        args.run_dir,
        data_dir=args.data_dir,
        stop_after=args.stop_after,
        progress=args.progress,
        restart_if_changed=args.restart_if_changed,
    )
    metric = summary["selection_metric"]
    state = "finished" if summary["finished"] else f"stopped after epoch {summary['epochs_done']}"
    print(
        f"{state}: best dev {metric} {summary[f'best_dev_{metric}']:.4f} at epoch {summary['best_epoch']} "
        f"({summary['selection_decoder']}) -> {args.run_dir}"
    )
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from .evaluate import evaluate
    from .metrics import PRIMARY_METRIC
    from .schema import EVALUATION_FILE

    table = evaluate(
        args.run_dir,
        decoders=args.decoders,
        splits=args.splits,
        data_dir=args.data_dir,
        batch_size=args.batch_size,
        progress=args.progress,
    )
    primary = table[table.metric.isin(set(PRIMARY_METRIC.values()) | {"violations"})]
    print(primary.pivot_table(index="decoder", columns=["split", "metric"], values="value", sort=False))
    print(f"-> {args.run_dir / EVALUATION_FILE}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from .sweep import sweep

    limit = {} if args.max_sentences is None else {"max_sentences": args.max_sentences}
    table = sweep(args.run_dir, data_dir=args.data_dir, progress=args.progress, **limit)
    print(f"{len(table)} rows -> {args.run_dir}")
    return 0


def _time(args: argparse.Namespace) -> int:
    from .run_folder import read_run_config
    from .schema import CONFIG_FILE, TIMING_FILE
    from .timing import time_run

    if "jax" in args.backends:
        import jax

        jax.config.update("jax_enable_x64", True)  # SparseMAP's oracle algebra in float64, as in torch
    recorded = args.config is None and not args.set and (args.run_dir / CONFIG_FILE).exists()
    table = time_run(
        read_run_config(args.run_dir) if recorded else _config(args),
        args.run_dir,
        losses=args.losses,
        decoders=args.decoders,
        modes=args.modes,
        backends=args.backends,
        batches=args.batches,
        rounds=args.rounds,
        warmup=args.warmup,
        data_dir=args.data_dir,
        weights=args.weights,
        progress=args.progress,
        restart_if_changed=args.restart_if_changed,
    )
    medians = table.groupby(["backend", "mode", "kind", "name"], sort=False).seconds.median()
    print(medians.to_string())
    print(f"-> {args.run_dir / TIMING_FILE}")
    return 0


def _aggregate(args: argparse.Namespace) -> int:
    from .aggregate import aggregate

    table = aggregate(args.files, args.out)
    print(f"{len(table)} rows from {len(args.files)} files -> {args.out}")
    return 0


def _scaling(args: argparse.Namespace) -> int:
    from .asv_results import write_scaling_table

    table = write_scaling_table(args.asv, args.out)
    machines = ", ".join(sorted(table["machine"].unique())) or "none"
    print(f"{len(table)} results of machines {machines} -> {args.out}")
    return 0


def _data(args: argparse.Namespace) -> int:
    from . import data
    from .experiment import data_directory
    from .io import write_json
    from .run_folder import describe_dataset

    facts: dict[str, Any] = describe_dataset(data.load(args.name, data_directory(args.name, args.data_dir)))
    write_json(args.out, facts)
    sizes = ", ".join(f"{split} {count}" for split, count in facts["sentences"].items())
    print(f"{args.name}: {sizes} sentences, {facts['tags']} tags, protocol {facts['protocol']} -> {args.out}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from .report import render_report

    payload = io.read_json(args.notes) if args.notes else {}
    notes = payload.get("notes", {}) if isinstance(payload, dict) else None
    if not isinstance(notes, dict) or not all(isinstance(value, list) for value in notes.values()):
        raise CorruptFileError(f"{args.notes}: expected {{profile, notes: {{table id: [sentences]}}}}")
    notes = {key: list(value) for key, value in notes.items()}
    if payload.get("profile"):
        notes["all"] = [f"Pipeline profile: {payload['profile']}.", *notes.get("all", [])]
    written = render_report(args.results, args.paper, args.out, notes)
    print(f"{len(written)} files -> {args.out}")
    return 0


def _cgm(args: argparse.Namespace) -> int:
    from .bethe import cgm

    settings = cgm.Settings(sizes=tuple(args.sizes), trials=args.trials, beta=args.beta)
    table = cgm.run(settings, seed=args.seed)
    io.write_csv(args.out, table)
    print(table.groupby(["dataset", "model"], sort=False)[["seconds", "iterations"]].mean().to_string())
    print(f"-> {args.out}")
    return 0


def _ocr(args: argparse.Namespace) -> int:
    from .bethe import ocr
    from .data.ocr import load_ocr
    from .environment import set_threads

    set_threads(1)
    settings = _experiment_settings(ocr.Settings(), args.set)
    table, words = ocr.run_fold(load_ocr(args.data_dir), args.fold, settings, seed=args.seed)
    io.write_csv(args.out_dir / "words.csv", words)
    io.write_csv(args.out_dir / "table.csv", table)  # last: the pipeline's sign of a finished fold
    print(table.to_string(index=False, float_format=lambda value: f"{value:.2f}"))
    print(f"-> {args.out_dir}")
    return 0


def _citation(args: argparse.Namespace) -> int:
    from .bethe import citation
    from .environment import set_threads

    set_threads(1)
    tables = citation.run(args.data_dir, _experiment_settings(citation.Settings(), args.set), seed=args.seed)
    for name, table in tables.items():  # scores last: the pipeline's sign of a finished run
        if name != "scores":
            io.write_csv(args.out_dir / f"{name}.csv", table)
    io.write_csv(args.out_dir / "scores.csv", tables["scores"])
    print(tables["scores"].to_string(index=False))
    print(f"-> {args.out_dir}")
    return 0


def _newton_train(args: argparse.Namespace) -> int:
    import logging

    from .data.registry import load
    from .environment import set_threads
    from .newton import experiment

    logging.basicConfig(format="%(message)s")
    logging.getLogger("crfbench.newton").setLevel(logging.INFO)  # TRON's radius and CG steps
    settings = _experiment_settings(experiment.Settings(), args.set)
    if settings.backend == "jax" or "lbfgs-optax" in settings.solvers:
        import jax

        jax.config.update("jax_enable_x64", True)  # the objective is float64
    set_threads(1)  # after importing JAX, whose CPU pool it fixes too
    tables = experiment.train(load("conll03-ner", args.data_dir), settings, progress=_solver_progress())
    io.write_csv(args.out_dir / "trace.csv", tables["trace"])
    io.write_csv(
        args.out_dir / "solvers.csv", tables["solvers"]
    )  # last: the pipeline's sign of a finished run
    print(
        tables["solvers"][["solver", "objective", "iterations", "seconds", "test_f1"]].to_string(index=False)
    )
    print(f"-> {args.out_dir}")
    return 0


def _solver_progress() -> Callable[[str, dict], None]:
    """A tqdm bar per solver: its iterations, with objective, ‖∇f‖ and passes."""
    from tqdm.auto import tqdm

    bars: dict[str, tqdm] = {}

    def update(solver: str, row: dict) -> None:
        bar = bars.get(solver)
        if bar is None:
            for other in bars.values():
                other.close()
            bar = bars[solver] = tqdm(desc=solver, unit="it", leave=True)
        bar.update(1)
        bar.set_postfix(f=f"{row['objective']:.8g}", g=f"{row['gradient_norm']:.2e}", hv=row["hvp"])

    return update


def _newton_cost(args: argparse.Namespace) -> int:
    from .environment import set_threads
    from .newton import experiment

    if args.backend == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    set_threads(1)  # after importing JAX, whose CPU pool it fixes too
    given = {name: getattr(args, name) for name in ("tokens", "repeats") if getattr(args, name) is not None}
    table = experiment.cost(experiment.CostGrid(**given), args.backend)
    io.write_csv(args.out, table)
    print(table.to_string(index=False))
    print(f"-> {args.out}")
    return 0


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"must be a positive number, got {text!r}")
    return value


positive_float = _checked(_positive_float, "positive number")


def _parse_train(args: argparse.Namespace) -> int:
    from .parsing.run import ParseConfig
    from .parsing.train import train

    given = {
        name: getattr(args, name)
        for name in (
            "learning_rate",
            "epochs",
            "patience",
            "batch_size",
            "max_train_sentences",
            "max_eval_sentences",
        )
        if getattr(args, name) is not None
    }
    config = ParseConfig(args.dataset, args.loss, seed=args.seed, device=args.device, **given)
    summary = train(config, args.run_dir, data_dir=args.data_dir)
    print(
        f"stopped by {summary['stopped_by']}: best dev UAS {100 * summary['best_dev_uas']:.2f} at epoch "
        f"{summary['best_epoch']} (learning rate {config.learning_rate:g}) -> {args.run_dir}"
    )
    return 0


def _parse_evaluate(args: argparse.Namespace) -> int:
    from .parsing.evaluate import evaluate
    from .schema import EVALUATION_FILE

    table = evaluate(args.run_dir, data_dir=args.data_dir)
    print(table.pivot_table(index="split", columns="metric", values="value", sort=False).mul(100).round(2))
    print(f"-> {args.run_dir / EVALUATION_FILE}")
    return 0


def _experiment_settings(defaults: SettingsT, assignments: list[str]) -> SettingsT:
    """The experiment's ``Settings`` dataclass ``defaults`` with the ``--set NAME=VALUE``
    assignments applied (values read as YAML), each checked against its field's type."""
    from .config import set_dotted
    from .models.config import with_overrides

    values: dict[str, object] = {}
    for assignment in assignments:
        set_dotted(values, assignment)
    return with_overrides(defaults, values, "--set")


def _add_setting_argument(command: argparse.ArgumentParser, example: str) -> None:
    command.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"override one of the experiment's Settings (value read as YAML), e.g. {example}",
    )


def _add_restart_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--restart-if-changed",
        action="store_true",
        help="a --run-dir made with other settings is emptied and the run started afresh "
        "(the pipeline's rules use this); without it such a folder is refused",
    )


def _add_config_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--config", type=input_file, help="YAML/JSON run settings (see crfbench/config.py)")
    command.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. scorer.layers=2",
    )


def _add_common_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--data-dir", help="corpus folder (default: the config's data_dir, then $CRFBENCH_DATA)"
    )
    command.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")


def parser() -> argparse.ArgumentParser:
    """The argument parser, one sub-command per job."""
    main = _Parser(prog="crfbench", description=__doc__)
    commands = main.add_subparsers(dest="command", required=True)
    agree = commands.add_parser(
        "agree", help="compare every method across backends and with NumPy oracles; exit 1 on disagreement"
    )
    agree.add_argument(
        "--backends", nargs="+", choices=implementations.BACKENDS, default=list(implementations.BACKENDS)
    )
    agree.add_argument("--quick", action="store_true", help="small grid (N <= 8, T <= 5), for tests")
    agree.add_argument("--csv", type=output_file, default=Path("results/agreement/agreement.csv"))
    agree.add_argument("--report", type=output_file, default=Path("reports/agreement.md"))
    agree.set_defaults(handler=_agree)

    from .uses import DECODERS, TIMED_DECODERS, TIMED_LOSSES, TIMING_MODES  # names alone: no torch

    train = commands.add_parser(
        "train", help="train a scorer with one loss; resumes from the run's checkpoint"
    )
    _add_config_arguments(train)
    _add_common_arguments(train)
    train.add_argument(
        "--run-dir", type=output_dir, required=True, help="folder for config, checkpoints, model"
    )
    train.add_argument(
        "--stop-after", type=positive_int, help="stop after this many epochs in this call (resume later)"
    )
    _add_restart_argument(train)
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser(
        "evaluate", help="decode dev/test with every decoder; write evaluation.csv"
    )
    _add_common_arguments(evaluate)
    evaluate.add_argument("--run-dir", type=input_dir, required=True, help="a folder written by `train`")
    evaluate.add_argument("--decoders", nargs="+", choices=list(DECODERS), default=list(DECODERS))
    evaluate.add_argument("--splits", nargs="+", choices=["dev", "test"], default=["dev", "test"])
    evaluate.add_argument("--batch-size", type=positive_int, help="decoding batch size (default: the run's)")
    evaluate.set_defaults(handler=_evaluate)

    swept = commands.add_parser(
        "sweep", help="decode the test set with BCRF and mean field over iterations, temperatures, penalties"
    )
    _add_common_arguments(swept)
    swept.add_argument("--run-dir", type=input_dir, required=True, help="a folder written by `train`")
    swept.add_argument(
        "--max-sentences", type=positive_int, help="the first test sentences to sweep (default: 200)"
    )
    swept.set_defaults(handler=_sweep)

    timing = commands.add_parser(
        "time",
        help="time a train step per loss and decoding per decoder (settings: --config/--set, else the run's)",
    )
    _add_config_arguments(timing)
    _add_common_arguments(timing)
    timing.add_argument(
        "--run-dir",
        type=output_dir,
        required=True,
        help="folder for timing.csv and config.json (may be a trained run)",
    )
    timing.add_argument(
        "--losses",
        nargs="+",
        choices=list(TIMED_LOSSES),
        help="default: all that fit the data, the baselines (crf-scan, pytorch-crf) included",
    )
    timing.add_argument("--decoders", nargs="+", choices=list(TIMED_DECODERS), default=list(TIMED_DECODERS))
    timing.add_argument(
        "--modes",
        nargs="+",
        choices=list(TIMING_MODES),
        default=["eager"],
        help="eager, and/or compiled (torch.compile; CUDA graphs on a GPU; SparseMAP eager only)",
    )
    timing.add_argument(
        "--backends",
        nargs="+",
        choices=implementations.BACKENDS,
        default=["torch"],
        help="torch, and/or jax (the same network and batches under jax.jit: mode compiled; no pytorch-crf)",
    )
    timing.add_argument("--batches", type=positive_int, default=5, help="batches per item and round")
    timing.add_argument("--rounds", type=positive_int, default=5, help="timed rounds")
    timing.add_argument("--warmup", type=non_negative_int, default=1, help="untimed rounds first")
    timing.add_argument(
        "--weights",
        type=Path,
        help="a trained run's folder: time on its model instead of a fresh network (SparseMAP's cost "
        "depends on the scores)",
    )
    _add_restart_argument(timing)
    timing.set_defaults(handler=_time)

    facts = commands.add_parser("data", help="check a dataset's files and write its facts (sizes, protocol)")
    facts.add_argument("name", help="dataset name (see crfbench.data.DATASETS)")
    facts.add_argument("--data-dir", help="corpus folder (default: $CRFBENCH_DATA)")
    facts.add_argument("--out", type=output_file, required=True, help="JSON file to write")
    facts.set_defaults(handler=_data)

    report = commands.add_parser("report", help="render the paper's tables and figures from results/")
    report.add_argument(
        "--results", type=Path, default=Path("results"), help="folder with metrics.csv, timing.csv"
    )
    report.add_argument(
        "--paper", type=input_file, required=True, help="the paper's numbers (bcrf_tables.csv)"
    )
    report.add_argument("--notes", type=input_file, help="JSON {profile, notes: {table id: [sentences]}}")
    report.add_argument("--out", type=output_dir, default=Path("reports"), help="folder to write")
    report.set_defaults(handler=_report)

    scaling = commands.add_parser("scaling", help="tidy the latest asv results of every machine into one CSV")
    scaling.add_argument("--asv", type=Path, default=Path("results/asv"), help="asv results folder")
    scaling.add_argument(
        "--out", type=output_file, default=Path("results/scaling.csv"), help="CSV file to write"
    )
    scaling.set_defaults(handler=_scaling)

    bethe = commands.add_parser(
        "bethe", help="the Bethe-projection paper's experiments (crfbench.bethe)"
    ).add_subparsers(dest="experiment", required=True)
    from .bethe import GRIDS

    cgm = bethe.add_parser(
        "cgm",
        help="Table 5: Bethe-RDA against an interior-point solver on synthetic collective graphical models",
    )
    cgm.add_argument(
        "--sizes", nargs="+", choices=list(GRIDS), default=list(GRIDS), help="edge cardinalities"
    )
    cgm.add_argument("--trials", type=positive_int, default=10, help="problems per size (the paper: 10)")
    cgm.add_argument("--beta", type=float, default=0.0, help="Bethe-RDA's β (0: the paper's, no step size)")
    cgm.add_argument("--seed", type=non_negative_int, default=0, help="random seed of the problems")
    cgm.add_argument("--out", type=output_file, required=True, help="CSV file to write")
    cgm.set_defaults(handler=_cgm)

    ocr = bethe.add_parser(
        "ocr", help="Table 4: one fold of OCR, the 2-gram CRF with and without template energies"
    )
    ocr.add_argument("--fold", type=_checked(_fold, "fold"), required=True, help="test fold, 0-9")
    ocr.add_argument(
        "--seed", type=non_negative_int, default=0, help="random seed (split, features, batches)"
    )
    _add_setting_argument(ocr, "max_train_words=500 (see crfbench/bethe/ocr.py Settings)")
    ocr.add_argument("--data-dir", help="holds ocr-taskar/letter.data (default: $CRFBENCH_DATA)")
    ocr.add_argument("--out-dir", type=output_dir, required=True, help="folder for table.csv and words.csv")
    ocr.set_defaults(handler=_ocr)

    citation = bethe.add_parser(
        "citation", help="Table 1, Fig. 1: citation field extraction with soft global count constraints"
    )
    citation.add_argument(
        "--seed", type=non_negative_int, default=0, help="random seed (batches, parameters)"
    )
    _add_setting_argument(citation, "max_citations=100 (see crfbench/bethe/citation.py Settings)")
    citation.add_argument("--data-dir", help="holds umass-citation/ (default: $CRFBENCH_DATA)")
    citation.add_argument("--out-dir", type=output_dir, required=True, help="folder for the run's tables")
    citation.set_defaults(handler=_citation)

    newton = commands.add_parser(
        "newton", help="the Newton-CRF thesis's solvers on a feature CRF (crfbench.newton)"
    ).add_subparsers(dest="experiment", required=True)
    newton_train = newton.add_parser(
        "train", help="every solver (TRON, L-BFGS, trust-ncg, CRFsuite, Adam) on CoNLL-2003 from λ = 0"
    )
    _add_setting_argument(newton_train, "train_sentences=4000 (see crfbench/newton/experiment.py Settings)")
    newton_train.add_argument("--data-dir", help="holds conll2003/ (default: $CRFBENCH_DATA)")
    newton_train.add_argument(
        "--out-dir", type=output_dir, required=True, help="folder for trace.csv and solvers.csv"
    )
    newton_train.set_defaults(handler=_newton_train)
    newton_cost = newton.add_parser("cost", help="seconds of one Hv (DP, autodiff) against one gradient")
    newton_cost.add_argument(
        "--backend", choices=["torch", "jax"], default="torch", help="the objective's backend"
    )
    newton_cost.add_argument("--tokens", type=positive_int, help="tokens per random corpus (default 4096)")
    newton_cost.add_argument("--repeats", type=positive_int, help="best of this many calls (default 3)")
    newton_cost.add_argument("--out", type=output_file, required=True, help="CSV file to write")
    newton_cost.set_defaults(handler=_newton_cost)

    from .parsing.treebank import LANGUAGES  # no torch
    from .uses import PARSER_LOSSES

    parse = commands.add_parser(
        "parse", help="the SparseMAP paper's dependency parsers, Table 1 (crfbench.parsing)"
    ).add_subparsers(dest="experiment", required=True)
    parse_train = parse.add_parser(
        "train", help="train a K&G BiLSTM parser with one loss; keep the best dev UAS"
    )
    parse_train.add_argument(
        "--dataset", choices=list(LANGUAGES), required=True, help="the UD treebank's language"
    )
    parse_train.add_argument("--loss", choices=list(PARSER_LOSSES), required=True, help="the training loss")
    parse_train.add_argument(
        "--seed", type=non_negative_int, default=0, help="random seed (parameters, batches)"
    )
    parse_train.add_argument(
        "--run-dir", type=output_dir, required=True, help="folder for config.json, model.pt, train.json"
    )
    parse_train.add_argument(
        "--learning-rate", type=positive_float, help="Adam's (default 2e-3; the paper's grid: 5e-4 ... 8e-3)"
    )
    parse_train.add_argument("--epochs", type=positive_int, help="the epoch cap (default 30)")
    parse_train.add_argument(
        "--patience", type=positive_int, help="epochs without a better dev UAS (default 5)"
    )
    parse_train.add_argument("--batch-size", type=positive_int, help="sentences per update (default 32)")
    parse_train.add_argument(
        "--max-train-sentences", type=positive_int, help="the first n training sentences"
    )
    parse_train.add_argument(
        "--max-eval-sentences", type=positive_int, help="the first n dev and test sentences"
    )
    parse_train.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parse_train.add_argument("--data-dir", help="holds ud-2.15/ (default: $CRFBENCH_DATA)")
    parse_train.set_defaults(handler=_parse_train)
    parse_evaluate = parse.add_parser(
        "evaluate", help="UAS of a trained parser on dev and test; evaluation.csv"
    )
    parse_evaluate.add_argument(
        "--run-dir", type=input_dir, required=True, help="a folder written by `parse train`"
    )
    parse_evaluate.add_argument("--data-dir", help="holds ud-2.15/ (default: $CRFBENCH_DATA)")
    parse_evaluate.set_defaults(handler=_parse_evaluate)

    gather = commands.add_parser("aggregate", help="concatenate per-run outputs of one kind into one table")
    gather.add_argument(
        "files",
        nargs="+",
        type=input_file,
        help="evaluation.csv, timing.csv, sentences.csv or sweep.csv files, or train.json files (dev curves)",
    )
    gather.add_argument("--out", type=output_file, required=True, help="CSV file to write (.gz: compressed)")
    gather.set_defaults(handler=_aggregate)
    return main


def main(argv: list[str] | None = None) -> int:
    """Run one command; a user error (``USER_ERRORS``) is one line on stderr and exit status 2.

    Arguments are checked as they are parsed (sizes, paths) and settings before a command writes
    anything, and every output is written atomically, so a refused command leaves nothing behind.
    """
    args = parser().parse_args(argv)
    try:
        return args.handler(args)
    except USER_ERRORS as error:
        print(f"crfbench {args.command}: error: {one_line(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
