"""The documentation cannot go stale unnoticed: the generated methods page equals what the registry
produces, the README's example runs, its set-up commands are the ones CI and the tests rely on, and
every relative link of the README and of docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crfbench import docs_methods

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

#: The README's two set-up commands, byte for byte (the main job and the test suite).
#: Torch's CPU build first: a local wheel on our machines, else the CPU wheel index.
TORCH = (
    '{ .venv/bin/pip install "torch==2.13.0+cpu" || .venv/bin/pip install "torch==2.13.0+cpu" '
    "--index-url https://download.pytorch.org/whl/cpu; } && "
)
MAIN_JOB = (
    f"python3.11 -m venv .venv && {TORCH}"
    '.venv/bin/pip install -c requirements/reference.txt -e ".[pipeline]" && '
    "CRFBENCH_DATA=../shared/data .venv/bin/snakemake --cores 2 --forcerun train time agreement "
    "bethe_cgm bethe_ocr_fold bethe_citation_run newton_train newton_cost parse_grid_train parse_train "
    "tree_solvers"
)
TESTS = (
    f"python3.11 -m venv .venv && {TORCH}"
    '.venv/bin/pip install -c requirements/reference.txt -e ".[dev,pipeline,cluster,pretrained]" && '
    ".venv/bin/python -m pytest"
)

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_methods_page_is_generated_from_the_registry():
    committed = docs_methods.PAGE.read_text(encoding="utf-8")
    assert committed == docs_methods.render(), "docs/methods.md is stale: run python -m crfbench.docs_methods"


def test_check_flag_reports_a_stale_page(tmp_path: Path):
    page = tmp_path / "methods.md"
    assert docs_methods.main(["--out", str(page)]) == 0
    assert docs_methods.main(["--check", "--out", str(page)]) == 0
    page.write_text("stale\n", encoding="utf-8")
    assert docs_methods.main(["--check", "--out", str(page)]) == 1


def test_every_method_and_option_is_documented():
    page = docs_methods.render()
    assert "## Dependency trees" in page
    for method in [*docs_methods.REGISTRY.values(), *docs_methods.DEPENDENCY_REGISTRY.values()]:
        assert f"## `{method.name}`" in page
        for option in method.options:
            assert f"| `{option.name}` |" in page


def test_readme_keeps_the_set_up_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert MAIN_JOB in lines
    assert TESTS in lines


def test_readme_is_a_short_page():
    assert len(README.read_text(encoding="utf-8")) <= 12_000


def test_readme_example_runs():
    text = README.read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert example is not None
    namespace: dict = {}
    exec(compile(example.group(1), "README.md", "exec"), namespace)
    assert namespace["tags"].shape == (2, 5)
    assert bool(namespace["record"].converged.shape == (2,))


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path):
    text = page.read_text(encoding="utf-8")
    anchors = {_slug(heading) for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        path, _, anchor = target.partition("#")
        if path:
            assert (page.parent / path).exists(), f"{page.name}: broken link {target}"
        elif anchor:
            assert anchor in anchors, f"{page.name}: no heading for #{anchor}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
