"""Command line of the experiment engine: ``python -m crfbench <command>``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import implementations


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


def parser() -> argparse.ArgumentParser:
    """The argument parser, one sub-command per job."""
    main = argparse.ArgumentParser(prog="crfbench", description=__doc__)
    commands = main.add_subparsers(dest="command", required=True)
    agree = commands.add_parser(
        "agree", help="compare every method across backends and with NumPy oracles; exit 1 on disagreement"
    )
    agree.add_argument(
        "--backends", nargs="+", choices=implementations.BACKENDS, default=list(implementations.BACKENDS)
    )
    agree.add_argument("--quick", action="store_true", help="small grid (N <= 8, T <= 5), for tests")
    agree.add_argument("--csv", type=Path, default=Path("results/agreement/agreement.csv"))
    agree.add_argument("--report", type=Path, default=Path("reports/agreement.md"))
    agree.set_defaults(handler=_agree)
    return main


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
