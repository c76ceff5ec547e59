"""Where and with what a result was produced: device, threads, library versions, code revision."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

PACKAGES = ("crfbench", "torch", "numpy", "transformers", "jax", "jaxlib", "seqeval", "conllu")


def set_threads(threads: int | None) -> None:
    """Fix torch's CPU thread count (``None`` keeps the default); timings depend on it."""
    if threads is not None:
        torch.set_num_threads(threads)


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


def _revision() -> str | None:
    """The git commit of the checkout the code runs from, with ``+dirty`` if it has changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


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
        "revision": _revision(),
        "versions": versions,
    }
