"""The inference core: every method behind one contract (see ``docs/contract.md``).

``get(method, backend)`` returns a module exposing ``marginals``, ``decode``, ``loss``,
``partial_loss`` and ``log_partition`` with identical names, arguments, shapes and meaning in
every backend. Nothing here does I/O; the experiment engine (``crfbench``) calls only this.
"""

from __future__ import annotations

import importlib
from types import ModuleType

METHODS: tuple[str, ...] = ("crf", "crf-scan", "bcrf", "meanfield", "unstructured")
BACKENDS: tuple[str, ...] = ("torch", "jax")

_PACKAGES = {"torch": "implementations.torch_backend", "jax": "implementations.jax_backend"}
_NEEDS = {  # the framework each backend imports, and how to install it
    "torch": ("torch", "pip install 'torch==2.13.0'"),
    "jax": ("jax", "pip install 'crfbench[jax]'"),
}


def get(method: str, backend: str = "torch") -> ModuleType:
    """Return the module implementing ``method`` in ``backend``.

    Raises ``ValueError`` naming the valid choices for an unknown method or backend.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid backends: {', '.join(BACKENDS)}")
    framework, install = _NEEDS[backend]
    try:
        importlib.import_module(framework)
    except ImportError as error:
        raise ImportError(f"backend {backend!r} needs {framework}: {install}") from error
    return importlib.import_module(f"{_PACKAGES[backend]}.{method.replace('-', '_')}")


__all__ = ["BACKENDS", "METHODS", "get"]
