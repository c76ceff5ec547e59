"""The install's two halves agree: pyproject.toml's ranges admit every version of the reference
lock (requirements/reference.txt), the lock pins every dependency the README's commands install,
and the supported Pythons are 3.11 to 3.13."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
#: The extras the README's commands install (the main job's and the tests').
INSTALLED = ("pipeline", "dev", "cluster", "pretrained")


def _lock() -> dict[str, Version]:
    pins = {}
    for number, line in enumerate((ROOT / "requirements/reference.txt").read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line)
        assert match, f"requirements/reference.txt:{number}: expected NAME==VERSION, got {line!r}"
        pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def _requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The core dependencies and those of ``extras``, following crfbench[...] self-references."""
    found = [Requirement(text) for text in PROJECT["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in map(Requirement, PROJECT["optional-dependencies"][extra]):
            if canonicalize_name(requirement.name) == "crfbench":
                todo += sorted(requirement.extras)
            else:
                found.append(requirement)
    return found


def test_the_lock_satisfies_every_range():
    pins = _lock()
    for requirement in _requirements(tuple(PROJECT["optional-dependencies"])):
        name = canonicalize_name(requirement.name)
        if name in pins:
            pinned = Version(pins[name].public)  # torch's +cpu build is its public version's
            assert requirement.specifier.contains(pinned, prereleases=True), (
                f"{requirement}: lock has {pins[name]}"
            )


def test_the_lock_pins_everything_the_readme_installs():
    pins = _lock()
    missing = [str(r) for r in _requirements(INSTALLED) if canonicalize_name(r.name) not in pins]
    assert not missing, f"regenerate requirements/reference.txt (its header says how): {missing}"
    assert str(pins["torch"]) == "2.13.0+cpu"


def test_pythons_3_11_to_3_13():
    supported = SpecifierSet(PROJECT["requires-python"])
    assert all(supported.contains(version) for version in ("3.11.0", "3.12.1", "3.13.0"))
    assert not supported.contains("3.10.13")


def test_the_pipeline_extra_leaves_out_what_the_default_profile_does_not_use():
    names = {canonicalize_name(r.name) for r in _requirements(("pipeline",))}
    assert {"snakemake", "jax", "asv", "cvxpy", "python-crfsuite", "pytorch-crf", "transformers"} <= names
    assert not names & {"pytest-benchmark", "snakemake-executor-plugin-slurm"}
