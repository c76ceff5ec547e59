"""Command line of the experiment engine: ``python -m crfbench <command>``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import implementations

from . import io
from .cli_args import (
    USER_ERRORS,
    Parser,
    add_allow_dirty_argument,
    dirty_allowed,
    input_dir,
    input_file,
    non_negative_int,
    one_line,
    output_dir,
    output_file,
    positive_int,
    refuse_committed_outputs,
)
from .cli_studies import add_study_commands
from .io import CorruptFileError
from .park import add_park_commands

AGREEMENT_CSV = "results/agreement/agreement.csv"  # `crfbench agree`'s defaults: the committed files
AGREEMENT_REPORT = "reports/agreement.md"


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


def _features(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from . import environment
    from .experiment import load_dataset
    from .models.features import FeatureStore, timed_prepare

    config = _config(args)
    if config.scorer.encoder != "frozen":
        raise ValueError(
            f"scorer.encoder: features are cached for 'frozen' only, not {config.scorer.encoder!r}"
        )
    environment.set_threads(config.threads)
    dataset = load_dataset(config, args.data_dir)
    store = FeatureStore(config.scorer)
    splits = {split: timed_prepare(store, getattr(dataset, split)) for split in ("train", "dev", "test")}
    if args.manifest is not None:
        io.write_json(args.manifest, {"dataset": config.dataset, "key": asdict(store.key), "splits": splits})
    for split, done in splits.items():
        where = done["file"] or "the files of other splits"
        extracted = f"{done['extracted']} extracted in {done['seconds']} s"
        print(f"{split}: {done['sentences']} sentences, {extracted} -> {where}")
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
    if args.name in ("check", "fetch"):
        from .data_check import run_command

        return run_command(args.name, args.data_dir, args.profile, args.quick, args.ud_archive)
    if args.out is None:
        raise ValueError(f"data {args.name}: --out is required (the JSON file of the dataset's facts)")
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
    main = Parser(prog="crfbench", description=__doc__)
    add_allow_dirty_argument(main, writes_results=False)
    commands = main.add_subparsers(dest="command", required=True)
    about = (
        "compare every method across backends and with NumPy oracles; exit 1 on disagreement "
        f"(writes the committed {AGREEMENT_CSV} and {AGREEMENT_REPORT} by default: --overwrite)"
    )
    agree = commands.add_parser("agree", help=about, description=about)
    agree.add_argument(
        "--backends", nargs="+", choices=implementations.BACKENDS, default=list(implementations.BACKENDS)
    )
    agree.add_argument("--quick", action="store_true", help="small grid (N <= 8, T <= 5), for tests")
    agree.add_argument(
        "--csv",
        type=output_file,
        default=Path(AGREEMENT_CSV),
        help=f"table to write (default: {AGREEMENT_CSV}, committed)",
    )
    agree.add_argument(
        "--report",
        type=output_file,
        default=Path(AGREEMENT_REPORT),
        help=f"summary to write (default: {AGREEMENT_REPORT}, committed)",
    )
    add_allow_dirty_argument(agree)
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
    add_allow_dirty_argument(train)
    train.set_defaults(handler=_train)

    features = commands.add_parser(
        "features", help="extract and cache a frozen encoder's features of every split of the run's data"
    )
    _add_config_arguments(features)
    _add_common_arguments(features)
    features.add_argument(
        "--manifest", type=output_file, help="JSON: the cache files, and the seconds each took"
    )
    features.set_defaults(handler=_features)

    evaluate = commands.add_parser(
        "evaluate", help="decode dev/test with every decoder; write evaluation.csv"
    )
    _add_common_arguments(evaluate)
    evaluate.add_argument("--run-dir", type=input_dir, required=True, help="a folder written by `train`")
    evaluate.add_argument("--decoders", nargs="+", choices=list(DECODERS), default=list(DECODERS))
    evaluate.add_argument("--splits", nargs="+", choices=["dev", "test"], default=["dev", "test"])
    evaluate.add_argument("--batch-size", type=positive_int, help="decoding batch size (default: the run's)")
    add_allow_dirty_argument(evaluate)
    evaluate.set_defaults(handler=_evaluate)

    swept = commands.add_parser(
        "sweep", help="decode the test set with BCRF and mean field over iterations, temperatures, penalties"
    )
    _add_common_arguments(swept)
    swept.add_argument("--run-dir", type=input_dir, required=True, help="a folder written by `train`")
    swept.add_argument(
        "--max-sentences", type=positive_int, help="the first test sentences to sweep (default: 200)"
    )
    add_allow_dirty_argument(swept)
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
        help="eager, and/or compiled (torch.compile on a CPU, CUDA graphs on a GPU; SparseMAP eager only)",
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
    add_allow_dirty_argument(timing)
    timing.set_defaults(handler=_time)

    facts = commands.add_parser(
        "data",
        help="check a dataset's files and write its facts (sizes, protocol); `data check`: the data "
        "folder's state for the profiles' datasets; `data fetch`: download the public corpora",
    )
    facts.add_argument("name", help="dataset name (see crfbench.data.DATASETS), or check, or fetch")
    facts.add_argument("--data-dir", help="corpus folder (default: $CRFBENCH_DATA)")
    facts.add_argument("--out", type=output_file, help="JSON file to write (a dataset name's facts)")
    facts.add_argument(
        "--profile", type=input_file, nargs="+", help="check/fetch: profiles (default: config/*.yaml)"
    )
    facts.add_argument("--quick", action="store_true", help="check: hash nothing not hashed before")
    facts.add_argument("--ud-archive", help="fetch: UD 2.15's archive, a URL or a local file")
    facts.set_defaults(handler=_data)

    about = (
        "render the paper's tables and figures from results/ (into the committed reports/ by "
        "default: --overwrite)"
    )
    report = commands.add_parser("report", help=about, description=about)
    report.add_argument(
        "--results", type=Path, default=Path("results"), help="folder with metrics.csv, timing.csv"
    )
    report.add_argument(
        "--paper", type=input_file, required=True, help="the paper's numbers (bcrf_tables.csv)"
    )
    report.add_argument("--notes", type=input_file, help="JSON {profile, notes: {table id: [sentences]}}")
    report.add_argument(
        "--out",
        type=output_dir,
        default=Path("reports"),
        help="folder to write (default: reports, committed)",
    )
    report.set_defaults(handler=_report)

    about = (
        "tidy the latest asv results of every machine into one CSV (the committed "
        "results/scaling.csv by default: --overwrite)"
    )
    scaling = commands.add_parser("scaling", help=about, description=about)
    scaling.add_argument("--asv", type=Path, default=Path("results/asv"), help="asv results folder")
    scaling.add_argument(
        "--out",
        type=output_file,
        default=Path("results/scaling.csv"),
        help="CSV file to write (default: results/scaling.csv, committed)",
    )
    scaling.set_defaults(handler=_scaling)

    add_study_commands(commands)
    add_park_commands(commands)

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

    Arguments are checked as they are parsed (sizes, paths); a command that writes results refuses
    a git checkout with uncommitted changes unless ``--allow-dirty`` (``environment.check_committed``);
    an output that the git checkout commits (the reference run in results/ and reports/) is refused
    without ``--overwrite``; settings are checked before a command writes anything, and every output
    is written atomically, so a refused command leaves nothing behind.
    """
    args = parser().parse_args(argv)
    try:
        refuse_committed_outputs(args)
        if args.writes_results and not dirty_allowed(args):
            from .environment import check_committed

            check_committed()
        return args.handler(args)
    except USER_ERRORS as error:
        print(f"crfbench {args.command}: error: {one_line(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
