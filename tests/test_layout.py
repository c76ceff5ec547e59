"""The code base stays livable: no long modules, and the torch and JAX twins do not repeat each
other (what is the same in both frameworks is written once, in ``implementations/kernels``)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The longest a module of the inference core or the engine may be, in lines.
MAX_MODULE_LINES = 600
#: The most identical lines all same-named torch/JAX modules may share together: a ratchet, lowered
#: as twins are written once (833 before the ops namespace). What is left is mostly imports and the
#: signatures of functions whose bodies differ. Raise it only with a reason a reviewer accepts:
#: 241 -> 243 when both backends' SparseMAP solve loop took one name (``run``), as twins should.
MAX_TWIN_LINES = 243


def _code_lines(path: Path) -> list[str]:
    """The non-blank, non-comment lines of ``path``, stripped of their indentation."""
    stripped = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in stripped if line and not line.startswith("#")]


def twin_overlap(root: Path = ROOT) -> dict[str, int]:
    """Per same-named module of ``torch_backend`` and ``jax_backend`` (packages: their modules by
    relative path), the code lines the two have in common (difflib's matching blocks)."""
    torch_dir, jax_dir = root / "implementations/torch_backend", root / "implementations/jax_backend"
    shared = {}
    for torch_file in sorted(torch_dir.rglob("*.py")):
        relative = torch_file.relative_to(torch_dir)
        jax_file = jax_dir / relative
        if jax_file.exists():
            matcher = difflib.SequenceMatcher(
                None, _code_lines(torch_file), _code_lines(jax_file), autojunk=False
            )
            shared[str(relative)] = sum(block.size for block in matcher.get_matching_blocks())
    return shared


@pytest.mark.parametrize("package", ["implementations", "crfbench"])
def test_no_module_is_too_long(package: str) -> None:
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / package).rglob("*.py")
    }
    too_long = {name: lines for name, lines in lengths.items() if lines > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


def test_twins_share_little() -> None:
    shared = twin_overlap()
    assert sum(shared.values()) <= MAX_TWIN_LINES, sorted(shared.items(), key=lambda item: -item[1])


def test_overlap_counts_shared_lines(tmp_path: Path) -> None:
    for backend, extra in (("torch_backend", "x = torch.ones(1)"), ("jax_backend", "x = jnp.ones(1)")):
        (tmp_path / "implementations" / backend).mkdir(parents=True)
        text = f"# a comment\n\ndef f(a):\n    return a + 1\n{extra}\n"
        (tmp_path / "implementations" / backend / "m.py").write_text(text)
    assert twin_overlap(tmp_path) == {"m.py": 2}
