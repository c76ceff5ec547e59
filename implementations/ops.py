"""How a kernel is written once for both frameworks: through the backend's *ops* namespace.

Each backend has a module ``ops`` (``torch_backend/ops.py``, ``jax_backend/ops.py``) with the same
names and meanings: array creation that needs a dtype and device (``zeros(shape, like)``), index
operations whose spelling differs (``take_along_axis``, ``one_hot``), log-space reductions with
finite gradients (``logsumexp``), and ``stop_gradient``. A kernel in ``implementations/kernels/``
asks for the namespace of its inputs, as array-API code does (``xp = array_namespace(x)``)::

    o = ops.of(emissions)
    scores = o.where(mask, emissions, -o.inf)

and otherwise uses what both frameworks spell alike: arithmetic, indexing with ``...`` and
``None``, ``.shape``, ``.sum(axis)``... What genuinely differs (loops, custom gradients, in-place
updates) stays in each backend's own short modules. ``tests/implementations/test_ops.py`` checks
that the two namespaces have the same names and agree on every function.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

#: The namespace found for each array type so far (a dict lookup on the hot path).
_BY_TYPE: dict[type, ModuleType] = {}


def of(*arrays: Any) -> ModuleType:
    """The ops namespace of the first array among ``arrays`` that is not None: torch's for a
    ``torch.Tensor``, jax's for anything else (a ``jax.Array`` or a tracer)."""
    for array in arrays:
        if array is None:
            continue
        namespace = _BY_TYPE.get(type(array))
        if namespace is None:
            namespace = _namespace(array)
            if not _torch_compiling():  # a traced write would make the next call recompile
                _BY_TYPE[type(array)] = namespace
        return namespace
    raise TypeError("ops.of: every argument is None; give at least one array")


def _torch_compiling() -> bool:
    """Whether torch.compile is tracing this call: dynamo guards on the globals a traced call
    reads, so a cache written while tracing would fail the guard and recompile the next call."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def _namespace(array: Any) -> ModuleType:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(array, torch.Tensor):
        from .torch_backend import ops as torch_ops

        return torch_ops
    from .jax_backend import ops as jax_ops

    return jax_ops
