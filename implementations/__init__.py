"""The inference core: every method behind one contract (see ``docs/contract.md``).

``get(method, backend)`` returns an object exposing ``marginals``, ``decode``, ``loss``,
``partial_loss`` and ``log_partition`` (and ``solve`` for an iterative method) with identical
names, arguments, shapes and meaning in every backend. What a method is (its options, oracle and
memory model) lives in ``registry``; the functions are written once in
``public`` over each backend's kernels. Nothing here does I/O; the experiment engine
(``crfbench``) calls only this.
"""

from __future__ import annotations

import functools
import importlib
from typing import Literal, overload

from . import dependency_contract
from .public import Bound, BoundMethod, DependencyBound
from .registry import DEPENDENCY_REGISTRY, REGISTRY, method

#: The chain (sequence-labelling) methods, the contract of ``docs/contract.md``.
METHODS: tuple[str, ...] = tuple(REGISTRY)
#: The dependency-tree methods: ``(scores, lengths)`` of arc scores (``implementations.kernels.dependency``).
DEPENDENCY_METHODS: tuple[str, ...] = tuple(DEPENDENCY_REGISTRY)
BACKENDS: tuple[str, ...] = ("torch", "jax")

_PACKAGES = {"torch": "implementations.torch_backend", "jax": "implementations.jax_backend"}
_NEEDS = {  # the framework each backend imports, and how to install it
    "torch": (
        "torch",
        "pip install torch --index-url https://download.pytorch.org/whl/cpu (or your CUDA build)",
    ),
    "jax": ("jax", "pip install 'crfbench[jax]'"),
}


# A Literal name overlapping ``str`` is the intended idiom: a dependency-tree name gets its own type.
@overload
def get(name: Literal["tree-crf"], backend: str = "torch") -> DependencyBound: ...  # type: ignore[overload-overlap]


@overload
def get(name: str, backend: str = "torch") -> Bound: ...


def get(name: str, backend: str = "torch") -> Bound | DependencyBound:
    """The contract functions of method ``name`` in ``backend`` (one object per pair): a chain
    method's (:class:`Bound`), or a dependency-tree method's (:class:`DependencyBound`, whose
    kernels are written once over the ops namespace, in ``implementations.kernels``).

    Raises ``ValueError`` naming the valid choices for an unknown method or backend.
    """
    return _bound(name, backend)


@functools.cache
def _bound(name: str, backend: str) -> Bound | DependencyBound:
    record = method(name)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid backends: {', '.join(BACKENDS)}")
    framework, install = _NEEDS[backend]
    try:
        importlib.import_module(framework)
    except ImportError as error:
        raise ImportError(f"backend {backend!r} needs {framework}: {install}") from error
    if record.structure == "dependency":
        kernels = importlib.import_module(f"implementations.kernels.{record.kernel}")
        return DependencyBound(record, backend, kernels, dependency_contract)
    kernels = importlib.import_module(f"{_PACKAGES[backend]}.{record.kernel}")
    checks = importlib.import_module(f"{_PACKAGES[backend]}._validate")
    return BoundMethod(record, backend, kernels, checks)


__all__ = ["BACKENDS", "DEPENDENCY_METHODS", "METHODS", "get"]
