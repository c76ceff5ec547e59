"""Moving arrays between NumPy and a backend, so that one script can feed the same instance to
every backend and compare what comes back (agreement report, cross-backend tests)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .contract import to_numpy


def from_numpy(array: np.ndarray | None, backend: str, dtype: str | None = None) -> Any:
    """``array`` as a ``backend`` array (``dtype`` by name, e.g. "float64"; default: its own).

    ``None`` stays ``None`` (an absent ``start``/``end``). A float64 jax array needs
    ``jax_enable_x64``; without it jax silently gives float32, so this raises instead.
    """
    if array is None:
        return None
    dtype = dtype or str(array.dtype)
    if backend == "torch":
        import torch

        return torch.from_numpy(np.ascontiguousarray(array)).to(getattr(torch, dtype))
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        if dtype in ("float64", "int64") and not jax.config.read("jax_enable_x64"):
            raise ValueError(f"a {dtype} jax array needs jax.config.update('jax_enable_x64', True)")
        return jnp.asarray(array, dtype=dtype)
    raise ValueError(f"unknown backend {backend!r}")


__all__ = ["from_numpy", "to_numpy"]
