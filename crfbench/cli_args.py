"""The command line's argument types and shared arguments: values checked as they are parsed, and
user errors reported as one line (``crfbench.cli``)."""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

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
    FileExistsError,  # an output the repository commits, written without --overwrite
    CorruptFileError,  # a truncated or damaged input file
)


def one_line(message: object) -> str:
    """``message`` on one line: its lines joined with "; " (a user error is one line on stderr)."""
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip())


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line too (``--help`` still shows the usage).

    A command with an output argument (type ``output_file`` or ``output_dir``) gets ``--overwrite``
    and lists that argument in the ``outputs`` default, which ``refuse_committed_outputs`` checks
    before the command runs: the committed reference run is never written over by accident.
    """

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        if action.type in (output_file, output_dir):
            outputs = self.get_default("outputs") or ()
            if not outputs:
                super().add_argument(
                    "--overwrite",
                    action="store_true",
                    help="write over files the git checkout commits (the reference run in results/ "
                    "and reports/; the pipeline's rules pass this); without it they are refused",
                )
            self.set_defaults(outputs=(*outputs, action.dest))
        return action


def checked(check: Callable[[str], object], name: str) -> Callable[[str], object]:
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


def fold(text: str) -> int:
    fold = _integer(0)(text)
    if fold > 9:
        raise ValueError(f"must be a fold 0-9, got {text!r}")
    return fold


positive_int = checked(_integer(1), "positive integer")
non_negative_int = checked(_integer(0), "non-negative integer")
input_file = checked(lambda text: io.check_input_file(Path(text)), "input file")
input_dir = checked(lambda text: io.check_input_dir(Path(text)), "input directory")
output_file = checked(lambda text: io.check_output_file(Path(text)), "output file")
output_dir = checked(lambda text: io.check_output_dir(Path(text)), "output directory")


def committed_files(path: Path) -> list[str]:
    """The files git tracks at ``path`` or under it, relative to the repository (none where ``path``
    is in no git checkout, or git is missing): a result committed as part of the reference run."""
    target = Path(path).absolute()
    where = target
    while not where.is_dir():  # git runs in the nearest existing folder on the way
        where = where.parent
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--full-name", "--", str(target)],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [name for name in listed.stdout.split("\0") if name] if listed.returncode == 0 else []


def refuse_committed_outputs(args: argparse.Namespace) -> None:
    """FileExistsError naming the first committed file that an output argument of the command
    (``Parser``'s ``outputs``) would write over, unless ``--overwrite`` was given."""
    if getattr(args, "overwrite", False):
        return
    outputs: Sequence[str] = getattr(args, "outputs", ())
    for dest in outputs:
        path = getattr(args, dest)
        committed = committed_files(path) if path is not None else []
        if committed and Path(path).is_dir():
            raise FileExistsError(
                f"{path}: holds files of the committed reference run ({committed[0]}, ...); "
                "pass --overwrite to write over them"
            )
        if committed:
            raise FileExistsError(
                f"{path}: a file of the committed reference run; pass --overwrite to write over it"
            )


def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"must be a positive number, got {text!r}")
    return value


positive_float = checked(positive_number, "positive number")


def experiment_settings(defaults: SettingsT, assignments: list[str]) -> SettingsT:
    """The experiment's ``Settings`` dataclass ``defaults`` with the ``--set NAME=VALUE``
    assignments applied (values read as YAML), each checked against its field's type."""
    from .config import set_dotted
    from .models.config import with_overrides

    values: dict[str, object] = {}
    for assignment in assignments:
        set_dotted(values, assignment)
    return with_overrides(defaults, values, "--set")


def add_setting_argument(command: argparse.ArgumentParser, example: str) -> None:
    command.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"override one of the experiment's Settings (value read as YAML), e.g. {example}",
    )


#: Set to 1 in the environment, as ``--allow-dirty``: the pipeline's ``allow_dirty`` key sets it for
#: its jobs (workflow/rules/common.smk) rather than adding a flag to their commands, whose text
#: Snakemake compares to decide what to rerun: allowing a dirty checkout changes no result.
ALLOW_DIRTY_VARIABLE = "CRFBENCH_ALLOW_DIRTY"
_ALLOW_DIRTY_HELP = (
    "write results from a git checkout with uncommitted changes (they record the revision with "
    f"+dirty); without it such a checkout is refused (also: {ALLOW_DIRTY_VARIABLE}=1)"
)


def add_allow_dirty_argument(command: argparse.ArgumentParser, *, writes_results: bool = True) -> None:
    """Give ``command`` the ``--allow-dirty`` flag; ``writes_results`` marks it as a command whose
    results must come from committed code (``crfbench.cli.main`` checks before it runs). The flag
    is also accepted before the command name (``crfbench --allow-dirty train ...``)."""
    command.add_argument(
        "--allow-dirty", action="store_true", default=argparse.SUPPRESS, help=_ALLOW_DIRTY_HELP
    )
    command.set_defaults(writes_results=writes_results)


def dirty_allowed(args: argparse.Namespace) -> bool:
    """Whether ``--allow-dirty`` (or its environment variable) lets results come from a checkout
    with uncommitted changes."""
    return bool(getattr(args, "allow_dirty", False)) or os.environ.get(ALLOW_DIRTY_VARIABLE) == "1"
