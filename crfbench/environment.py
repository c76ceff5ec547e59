"""Where and with what a result was produced: device, threads, library versions, code revision."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import torch

PACKAGES = ("crfbench", "torch", "numpy", "transformers", "jax", "jaxlib", "seqeval", "conllu")


def set_threads(threads: int | None) -> None:
    """Fix the CPU thread count of torch and, in a process that has imported JAX, of XLA's CPU
    runtime (``None`` keeps the defaults); timings depend on it."""
    if threads is None:
        return
    torch.set_num_threads(threads)
    if "jax" in sys.modules:
        start_jax(threads)


def start_jax(threads: int) -> None:
    """Start JAX's backends with an intra-op pool of ``threads`` CPU threads.

    XLA's CPU runtime sizes its pool by the CPUs the process may run on when its backend starts, and
    splits large element-wise loops and products over it whatever ``XLA_FLAGS`` says
    (``--xla_cpu_multi_thread_eigen=false`` covers Eigen's products only): a "one-thread" JAX
    timing of a 256 MiB array ran on both cores of a 2-core machine. So the backend starts while
    every thread of the process is held to ``threads`` CPUs, and each gets all its CPUs back
    afterwards: the pool keeps its size and may run anywhere. Where JAX has already started, its
    pool cannot change and nothing happens; off Linux, only the JAX start happens. Every backend
    starts, as at JAX's first computation (a GPU one too: set ``XLA_PYTHON_CLIENT_PREALLOCATE``
    before, where JAX must not take most of the GPU's memory up front).
    """
    import jax

    allowed: set[int] = getattr(os, "sched_getaffinity", lambda _: set())(0)
    if len(allowed) <= threads:
        jax.devices()
        return
    _hold_threads(set(sorted(allowed)[:threads]))
    try:
        jax.devices()
    finally:
        _hold_threads(allowed)


def _hold_threads(cpus: set[int]) -> None:
    """Let every thread of this process (Linux: ``/proc/self/task``) run on ``cpus`` only."""
    for thread in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(thread), cpus)
        except (ProcessLookupError, PermissionError):  # a thread that ended meanwhile
            continue


def gpu_present(backend: str) -> bool:
    """Backend ``backend`` (``"torch"`` or ``"jax"``) sees a GPU: CUDA for torch, any GPU platform
    for JAX (imported here, which starts its backends where nothing has yet)."""
    if backend == "torch":
        return torch.cuda.is_available()
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def device_name(device: torch.device) -> str:
    """A human-readable name of the device computations run on."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return cpu


#: The checkout the code runs from: its commit is every result's revision.
SOURCE_ROOT = Path(__file__).resolve().parent.parent
#: Folders the pipeline writes into (tracked tables and pages it regenerates): changes there are
#: its own outputs, not changes to the code, so they never make a checkout dirty.
OUTPUT_FOLDERS = ("results/", "reports/")
#: How many changed files a refusal names.
NAMED_CHANGES = 5


def _git(root: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=root, capture_output=True, text=True, check=True, timeout=10
    ).stdout


def changed_files(root: Path | None = None) -> list[str] | None:
    """The tracked files of the git checkout at ``root`` (default ``SOURCE_ROOT``) with uncommitted
    changes (staged or not) outside ``OUTPUT_FOLDERS``; None when ``root`` is not a git checkout
    (or git is missing).

    Untracked files do not count: the code that runs is tracked (an untracked module only runs
    when a tracked one, then changed, imports it), and run folders, logs and scratch files are
    untracked outputs.
    """
    root = SOURCE_ROOT if root is None else root
    try:
        status = _git(root, "status", "--porcelain", "--untracked-files=no", "-z")
    except (OSError, subprocess.SubprocessError):
        return None
    entries = [entry for entry in status.split("\0") if entry]
    paths, skip = [], False
    for entry in entries:
        if skip:  # a rename's second field: the path it was renamed from
            skip = False
            continue
        code, path = entry[:2], entry[3:]
        skip = "R" in code or "C" in code
        if not path.startswith(OUTPUT_FOLDERS):
            paths.append(path)
    return paths


def revision(root: Path | None = None) -> str | None:
    """The git commit of the checkout at ``root``, with ``+dirty`` if it has changes
    (``changed_files``); None outside a git checkout."""
    root = SOURCE_ROOT if root is None else root
    try:
        commit = _git(root, "rev-parse", "HEAD").strip()
    except (OSError, subprocess.SubprocessError):
        return None
    changed = changed_files(root)
    return commit + ("+dirty" if changed is None or changed else "")


def check_committed(root: Path | None = None) -> None:
    """ValueError (one line, naming the first changed files) when the code at ``root`` is not a
    clean git checkout: results must name the commit that made them. ``--allow-dirty`` skips this
    check, and the results then record the revision with ``+dirty``."""
    root = SOURCE_ROOT if root is None else root
    changed = changed_files(root)
    if changed is None:
        raise ValueError(
            f"{root} is not a git checkout: results could not name their commit; pass --allow-dirty "
            "to write them anyway"
        )
    if changed:
        named = ", ".join(changed[:NAMED_CHANGES])
        more = f" and {len(changed) - NAMED_CHANGES} more" if len(changed) > NAMED_CHANGES else ""
        raise ValueError(
            f"the checkout {root} has uncommitted changes ({named}{more}): commit them, or pass "
            "--allow-dirty (pipeline: allow_dirty: true) to write results marked +dirty"
        )


def describe(device: torch.device) -> dict[str, object]:
    """Environment record written into every run directory."""
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return {
        "device": str(device),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "revision": revision(),
        "versions": versions,
    }
