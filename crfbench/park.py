"""Park an unfinished pipeline run in one archive, and resume it in a checkout on another machine.

The default profile's run takes hours; the machine it started on may be gone before it ends (a
lease, a session, a preempted node). ``crfbench park`` packs what the finished jobs wrote into one
``.tar.gz``: every file under ``results/`` and ``reports/``, and Snakemake's own records of them
(``.snakemake/metadata``: each output's code, parameters and inputs), each with its modification
time. ``crfbench unpark`` unpacks it into a checkout of the same commit, times included, so that
Snakemake, run again without ``--forcerun``, finds every finished job up to date and runs only
the rest (like a Snakemake storage plugin's remote copy, with the archive as the store).

Left out, as a checkout of the commit holds them already: the files it commits, unchanged (its
committed results that the run has not remade yet); the archive keeps their times, and the
committed files the run deleted, for ``unpark`` to restore. Left out, as large and never read again: the
frozen-feature cache (a training job refills what it needs), training checkpoints (a run cut off
mid-training starts again from scratch), and a run's model once its evaluation is written
(``schema.EVALUATION_FILE``), except those matched by ``keep`` (the pipeline's sweep and timing
jobs read each dataset's first-seed CRF model after its evaluation). A partly written file
cannot be packed: every output is written atomically.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .io import save_atomic

# crfbench.environment (torch) and crfbench.schema (seqeval, SciPy) are imported where they are
# used: the command line's parser imports this module and must stay light.

#: What a parked archive holds, relative to the checkout's root.
PARKED_FOLDERS = ("results", "reports", ".snakemake/metadata")
#: Folders never packed: the frozen-feature cache (gigabytes, refilled on demand).
SKIPPED_FOLDERS = ("results/features/cache",)
#: The archive's own record: the commit it was parked at and what it holds.
MANIFEST = "PARKED.json"
#: The models the default pipeline reads after their evaluation: its sweep and timing jobs'.
PIPELINE_KEPT_MODELS = ("results/runs/*/*/crf/0/model.pt",)


@dataclass(frozen=True)
class Parked:
    """What ``park`` packed (or ``unpark`` unpacked): the commit, the files and their bytes."""

    revision: str
    files: int
    bytes: int


def parked_files(
    root: Path, keep: Sequence[str] = PIPELINE_KEPT_MODELS, unchanged: frozenset[str] = frozenset()
) -> Iterator[Path]:
    """The files under ``root`` that a parked archive holds (see the module docstring), relative
    to ``root``, in a stable order; ``unchanged`` (POSIX paths) are left out: the files the commit
    holds as they are, which a checkout of it has already."""
    for folder in PARKED_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root)
            if relative.as_posix() in unchanged or not path.is_file() or path.is_symlink():
                continue
            if not _left_out(root, relative, keep):
                yield relative


def committed_state(root: Path) -> tuple[frozenset[str], frozenset[str]]:
    """The files that git tracks under ``root``'s parked folders: those as the commit holds them,
    and those the run deleted (POSIX paths); none where ``root`` is no git checkout."""

    def listed(*arguments: str) -> frozenset[str]:
        command = ["git", "-C", str(root), *arguments, "-z", "--", *PARKED_FOLDERS]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        return frozenset(done.stdout.split("\0")) - {""} if done.returncode == 0 else frozenset()

    deleted = listed("ls-files", "--deleted")
    return listed("ls-files") - listed("diff", "--name-only", "HEAD"), deleted


def _left_out(root: Path, relative: Path, keep: Sequence[str]) -> bool:
    """Whether a file is not packed: in the feature cache, a checkpoint, or a model that no job
    reads again (its run's evaluation is written and no ``keep`` pattern matches it)."""
    from .schema import CHECKPOINT_FILE, EVALUATION_FILE, MODEL_FILE

    text = relative.as_posix()
    if any(text.startswith(folder + "/") for folder in SKIPPED_FOLDERS) or relative.name == CHECKPOINT_FILE:
        return True
    if relative.name != MODEL_FILE or any(fnmatch.fnmatchcase(text, pattern) for pattern in keep):
        return False
    return (root / relative.parent / EVALUATION_FILE).exists()


def park(
    root: Path, archive: Path, keep: Sequence[str] = PIPELINE_KEPT_MODELS, revision: str | None = None
) -> Parked:
    """Pack the run in the checkout at ``root`` into ``archive`` (written atomically), recording
    ``revision`` (default: the checkout's commit).

    ValueError when ``root`` is not a clean git checkout: a run parked from uncommitted code could
    not be resumed under the same code.
    """
    from . import environment

    root = root.resolve()
    revision = revision or environment.revision(root)
    if revision is None or revision.endswith("+dirty"):
        raise ValueError(f"{root}: not a clean git checkout ({revision or 'no git'}): commit before parking")
    unchanged, deleted = committed_state(root)
    files = list(parked_files(root, keep, unchanged))
    size = sum((root / path).stat().st_size for path in files)
    manifest = {
        "revision": revision,
        "files": len(files),
        "bytes": size,
        # A checkout's committed files are as new as the checkout: unpark gives them back the run's
        # times (an output older than its inputs is one Snakemake remakes), and deletes what it deleted.
        "committed_times": {name: (root / name).stat().st_mtime_ns for name in sorted(unchanged)},
        "deleted": sorted(deleted),
    }

    def write(temporary: Path) -> None:
        with tarfile.open(temporary, "w:gz") as tar:
            data = json.dumps(manifest, indent=1).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for path in files:
                tar.add(root / path, arcname=path.as_posix(), recursive=False)

    save_atomic(archive, write)
    return Parked(revision, len(files), size)


def read_manifest(archive: Path) -> dict[str, Any]:
    """The manifest of a parked archive; ValueError naming the file when it is not one."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(MANIFEST)
            if member is None:
                raise KeyError(MANIFEST)
            manifest: dict[str, Any] = json.loads(member.read())
    except (tarfile.TarError, KeyError, json.JSONDecodeError, OSError) as error:
        raise ValueError(f"{archive}: not a parked run ({type(error).__name__}: {error})") from None
    return manifest


def unpark(archive: Path, root: Path, revision: str | None = None) -> Parked:
    """Unpack ``archive`` into the checkout at ``root``, each file with its parked modification
    time. ValueError when the checkout (at ``revision``, default its commit) is not at the
    archive's commit, or a member would land outside ``PARKED_FOLDERS``."""
    from . import environment

    root = root.resolve()
    manifest = read_manifest(archive)
    revision = revision or environment.revision(root)
    if revision != manifest["revision"]:
        raise ValueError(
            f"{archive}: parked at {manifest['revision']}, but {root} is at {revision}: "
            f"check out {manifest['revision']} (a clean worktree) and unpark there"
        )
    times: dict[str, int] = manifest.get("committed_times", {})
    deleted: list[str] = manifest.get("deleted", [])
    for name in [*times, *deleted]:
        if not _inside_parked_folders(name):
            raise ValueError(f"{archive}: {name!r} is not a file of a parked run")
    with tarfile.open(archive, "r:gz") as tar:
        members = [member for member in tar.getmembers() if member.name != MANIFEST]
        for member in members:
            if not member.isfile() or not _inside_parked_folders(member.name):
                raise ValueError(f"{archive}: {member.name!r} is not a file of a parked run")
        tar.extractall(root, members=members, filter="data")
    for name in deleted:
        (root / name).unlink(missing_ok=True)
    for name, mtime in times.items():
        if (root / name).is_file():
            os.utime(root / name, ns=(mtime, mtime))
    size = sum(member.size for member in members)
    return Parked(manifest["revision"], len(members), size)


def _inside_parked_folders(name: str) -> bool:
    parts = Path(name).parts
    if Path(name).is_absolute() or ".." in parts:
        return False
    return any(name.startswith(folder + "/") for folder in PARKED_FOLDERS)


def _park_command(args: argparse.Namespace) -> int:
    parked = park(Path(args.root), Path(args.archive), args.keep)
    print(f"parked {parked.files} files ({parked.bytes / 1e6:.1f} MB) at {parked.revision} -> {args.archive}")
    return 0


def _unpark_command(args: argparse.Namespace) -> int:
    parked = unpark(Path(args.archive), Path(args.root))
    print(f"unparked {parked.files} files ({parked.bytes / 1e6:.1f} MB) of the run at {parked.revision}")
    print("resume: snakemake --cores N (without --forcerun: finished jobs are up to date)")
    return 0


def add_park_commands(commands: Any) -> None:
    """Add ``park`` and ``unpark`` to ``commands`` (argparse's sub-parsers)."""
    about = "pack an unfinished pipeline run (results/, reports/, Snakemake's records) into one archive"
    park_parser = commands.add_parser("park", help=about, description=about)
    park_parser.add_argument("archive", help="the .tar.gz to write")
    park_parser.add_argument("--root", default=".", help="the checkout that ran the pipeline (default: .)")
    park_parser.add_argument(
        "--keep",
        nargs="*",
        default=list(PIPELINE_KEPT_MODELS),
        help="models to pack even once evaluated (glob patterns relative to the root; default: "
        "the first-seed CRF models that the sweep and timing jobs read)",
    )
    park_parser.set_defaults(handler=_park_command, writes_results=False)
    about = "unpack a parked run into a checkout of its commit, to resume it with snakemake"
    unpark_parser = commands.add_parser("unpark", help=about, description=about)
    unpark_parser.add_argument("archive", help="the .tar.gz that crfbench park wrote")
    unpark_parser.add_argument("--root", default=".", help="the checkout to resume in (default: .)")
    unpark_parser.set_defaults(handler=_unpark_command, writes_results=False)
