"""The check both backends' sweeps share: without a compiler the sweep is unavailable, says so
once, and leaves nothing in the build cache."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from implementations import _sweep as build


def assert_unbuilt_sweep_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
    scratch: Path,
    variable: str,
    loaded: Any,
    available: tuple[Callable[[], bool], Callable[[], bool]],
) -> None:
    """With ``$variable`` naming no compiler and an empty cache under ``scratch``: the first of
    ``available`` is false with one warning, the second false with none, and no library is
    cached. ``loaded``: the backend's loader (a :func:`functools.cache`), cleared before and
    after with the build's."""
    monkeypatch.setenv(variable, str(scratch / "no-such-compiler"))
    monkeypatch.setenv("CRFBENCH_CACHE", str(scratch / "cache"))
    build.library.cache_clear()
    loaded.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="sweep could not be built"):
            assert not available[0]()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no second warning
            assert not available[1]()
        assert not any((scratch / "cache").glob("*.so"))
    finally:
        build.library.cache_clear()
        loaded.cache_clear()
