"""The command line of the papers' own studies: the Bethe-projection experiments (``crfbench
bethe``), the Newton-CRF solvers (``crfbench newton``), the SparseMAP paper's solvers on random
trees (``crfbench sparsemap``) and its dependency parsers (``crfbench parse``), each a group of
sub-commands (``crfbench.cli``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from . import io
from .cli_args import (
    add_allow_dirty_argument,
    add_setting_argument,
    checked,
    experiment_settings,
    fold,
    input_dir,
    input_file,
    non_negative_int,
    output_dir,
    output_file,
    positive_float,
    positive_int,
)


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
    settings = experiment_settings(ocr.Settings(), args.set)
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
    tables = citation.run(args.data_dir, experiment_settings(citation.Settings(), args.set), seed=args.seed)
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
    settings = experiment_settings(experiment.Settings(), args.set)
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


def _parse_train(args: argparse.Namespace) -> int:
    from .parsing.run import load_settings
    from .parsing.train import chosen_learning_rate, train

    names = (
        "dataset",
        "loss",
        "seed",
        "learning_rate",
        "epochs",
        "patience",
        "batch_size",
        "max_train_sentences",
        "max_eval_sentences",
        "device",
    )
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    if args.learning_rate_from is not None:
        given["learning_rate"] = chosen_learning_rate(args.learning_rate_from)
    config = load_settings(args.config, given)
    summary = train(config, args.run_dir, data_dir=args.data_dir, restart_if_changed=args.restart_if_changed)
    print(
        f"stopped by {summary['stopped_by']}: best dev UAS {100 * summary['best_dev_uas']:.2f} at epoch "
        f"{summary['best_epoch']} (learning rate {config.learning_rate:g}) -> {args.run_dir}"
    )
    return 0


def _parse_choose(args: argparse.Namespace) -> int:
    from .parsing.train import record_choice

    choice = record_choice(args.run_dirs, args.out)
    print(f"learning rate {choice['learning_rate']:g} (dev UAS by rate: {choice['dev_uas']}) -> {args.out}")
    if choice["next_learning_rate"] is not None:
        print(
            f"the best rate is at an edge of those tried: the paper's widening would try "
            f"{choice['next_learning_rate']:g} next"
        )
    return 0


def _parse_evaluate(args: argparse.Namespace) -> int:
    from .parsing.evaluate import evaluate
    from .schema import EVALUATION_FILE

    table = evaluate(args.run_dir, data_dir=args.data_dir)
    print(table.pivot_table(index="split", columns="metric", values="value", sort=False).mul(100).round(2))
    print(f"-> {args.run_dir / EVALUATION_FILE}")
    return 0


def _sparsemap_trees(args: argparse.Namespace) -> int:
    from .environment import set_threads
    from .tree_solvers import Settings, run

    set_threads(1)  # the traces' seconds are one thread's
    settings = Settings(
        words=args.words,
        instances=args.instances,
        iterations=args.iterations,
        reference_iterations=args.reference_iterations,
        seed=args.seed,
    )
    table = run(settings)
    io.write_csv(args.out, table)
    last = table.groupby(["solver", "instance"], sort=False).tail(1)
    print(last.groupby("solver", sort=False)[["iteration", "gap", "support", "seconds"]].mean().to_string())
    print(f"-> {args.out}")
    return 0


def _add_sparsemap_commands(commands: Any) -> None:
    """The ``sparsemap`` group: the SparseMAP paper's solver comparison on its own setting."""
    sparsemap = commands.add_parser(
        "sparsemap", help="the SparseMAP paper's solver study on random trees, Fig. 2 (crfbench.tree_solvers)"
    ).add_subparsers(dest="experiment", required=True)
    trees = sparsemap.add_parser(
        "trees",
        help="the active set against vanilla, away-step and pairwise Frank-Wolfe on random-potential "
        "dependency trees, traced per iteration (the pipeline writes results/sparsemap/tree-solvers.csv)",
    )
    trees.add_argument("--words", type=positive_int, default=20, help="words per sentence (the paper: 20)")
    trees.add_argument("--instances", type=positive_int, default=5, help="random sentences")
    trees.add_argument("--iterations", type=positive_int, default=100, help="iterations per solver")
    trees.add_argument(
        "--reference-iterations",
        type=positive_int,
        default=1000,
        help="the active set's iteration cap for the optimum (at least --iterations)",
    )
    trees.add_argument("--seed", type=non_negative_int, default=0, help="random seed of the scores")
    trees.add_argument(
        "--out",
        type=output_file,
        required=True,
        help="CSV file to write, one row per iteration (the pipeline's: results/sparsemap/tree-solvers.csv)",
    )
    trees.set_defaults(handler=_sparsemap_trees)


def add_study_commands(commands: Any) -> None:
    """Add the ``bethe``, ``newton``, ``sparsemap`` and ``parse`` groups to ``commands`` (argparse's
    sub-parsers)."""
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
    add_allow_dirty_argument(cgm)
    cgm.set_defaults(handler=_cgm)

    ocr = bethe.add_parser(
        "ocr", help="Table 4: one fold of OCR, the 2-gram CRF with and without template energies"
    )
    ocr.add_argument("--fold", type=checked(fold, "fold"), required=True, help="test fold, 0-9")
    ocr.add_argument(
        "--seed", type=non_negative_int, default=0, help="random seed (split, features, batches)"
    )
    add_setting_argument(ocr, "max_train_words=500 (see crfbench/bethe/ocr.py Settings)")
    ocr.add_argument("--data-dir", help="holds ocr-taskar/letter.data (default: $CRFBENCH_DATA)")
    ocr.add_argument("--out-dir", type=output_dir, required=True, help="folder for table.csv and words.csv")
    add_allow_dirty_argument(ocr)
    ocr.set_defaults(handler=_ocr)

    citation = bethe.add_parser(
        "citation", help="Table 1, Fig. 1: citation field extraction with soft global count constraints"
    )
    citation.add_argument(
        "--seed", type=non_negative_int, default=0, help="random seed (batches, parameters)"
    )
    add_setting_argument(citation, "max_citations=100 (see crfbench/bethe/citation.py Settings)")
    citation.add_argument("--data-dir", help="holds umass-citation/ (default: $CRFBENCH_DATA)")
    citation.add_argument("--out-dir", type=output_dir, required=True, help="folder for the run's tables")
    add_allow_dirty_argument(citation)
    citation.set_defaults(handler=_citation)

    newton = commands.add_parser(
        "newton", help="the Newton-CRF thesis's solvers on a feature CRF (crfbench.newton)"
    ).add_subparsers(dest="experiment", required=True)
    newton_train = newton.add_parser(
        "train", help="every solver (TRON, L-BFGS, trust-ncg, CRFsuite, Adam) on CoNLL-2003 from λ = 0"
    )
    add_setting_argument(newton_train, "train_sentences=4000 (see crfbench/newton/experiment.py Settings)")
    newton_train.add_argument("--data-dir", help="holds conll2003/ (default: $CRFBENCH_DATA)")
    newton_train.add_argument(
        "--out-dir", type=output_dir, required=True, help="folder for trace.csv and solvers.csv"
    )
    add_allow_dirty_argument(newton_train)
    newton_train.set_defaults(handler=_newton_train)
    newton_cost = newton.add_parser("cost", help="seconds of one Hv (DP, autodiff) against one gradient")
    newton_cost.add_argument(
        "--backend", choices=["torch", "jax"], default="torch", help="the objective's backend"
    )
    newton_cost.add_argument("--tokens", type=positive_int, help="tokens per random corpus (default 4096)")
    newton_cost.add_argument("--repeats", type=positive_int, help="best of this many calls (default 3)")
    newton_cost.add_argument("--out", type=output_file, required=True, help="CSV file to write")
    add_allow_dirty_argument(newton_cost)
    newton_cost.set_defaults(handler=_newton_cost)

    _add_sparsemap_commands(commands)

    from .parsing.treebank import LANGUAGES  # no torch
    from .uses import PARSER_LOSSES

    parse = commands.add_parser(
        "parse", help="the SparseMAP paper's dependency parsers, Table 1 (crfbench.parsing)"
    ).add_subparsers(dest="experiment", required=True)
    parse_train = parse.add_parser(
        "train", help="train a K&G BiLSTM parser with one loss; keep the best dev UAS"
    )
    parse_train.add_argument(
        "--config",
        type=input_file,
        help="a JSON file of the run's settings (crfbench/parsing/run.py ParseConfig); flags override it",
    )
    parse_train.add_argument("--dataset", choices=list(LANGUAGES), help="the UD treebank's language")
    parse_train.add_argument("--loss", choices=list(PARSER_LOSSES), help="the training loss")
    parse_train.add_argument(
        "--seed", type=non_negative_int, help="random seed (parameters, batches; default 0)"
    )
    parse_train.add_argument(
        "--run-dir", type=output_dir, required=True, help="folder for config.json, model.pt, train.json"
    )
    rate = parse_train.add_mutually_exclusive_group()
    rate.add_argument(
        "--learning-rate", type=positive_float, help="Adam's (default 2e-3; the paper's grid: 5e-4 ... 8e-3)"
    )
    rate.add_argument(
        "--learning-rate-from",
        type=input_file,
        help="the learning rate chosen by `crfbench parse choose-lr` (its JSON file)",
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
    parse_train.add_argument("--device", help="torch device (default cpu)")
    parse_train.add_argument(
        "--restart-if-changed",
        action="store_true",
        help="discard a run made in --run-dir with other settings instead of refusing it",
    )
    parse_train.add_argument("--data-dir", help="holds ud-2.15/ (default: $CRFBENCH_DATA)")
    add_allow_dirty_argument(parse_train)
    parse_train.set_defaults(handler=_parse_train)
    parse_choose = parse.add_parser(
        "choose-lr", help="the learning rate of the best dev UAS among runs that differ only in it"
    )
    parse_choose.add_argument(
        "--run-dirs", type=input_dir, nargs="+", required=True, help="finished `parse train` folders"
    )
    parse_choose.add_argument("--out", type=output_file, required=True, help="JSON file of the choice")
    parse_choose.set_defaults(handler=_parse_choose)
    parse_evaluate = parse.add_parser(
        "evaluate", help="UAS of a trained parser on dev and test; evaluation.csv"
    )
    parse_evaluate.add_argument(
        "--run-dir", type=input_dir, required=True, help="a folder written by `parse train`"
    )
    parse_evaluate.add_argument("--data-dir", help="holds ud-2.15/ (default: $CRFBENCH_DATA)")
    add_allow_dirty_argument(parse_evaluate)
    parse_evaluate.set_defaults(handler=_parse_evaluate)
