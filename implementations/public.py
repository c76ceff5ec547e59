"""The contract's functions, written once for every method and backend (``docs/contract.md``).

A backend provides, per method, a *kernel* module with the same function names as the contract
(``marginals``, ``decode``, ``loss``, ``partial_loss``, ``log_partition``, and ``solve`` for an
iterative method), each taking ``(emissions, transitions, lengths, [tags | allowed,] start, end,
**options)`` positionally, every option given, nothing validated: only the mathematics, which is
what really differs between frameworks. This layer adds what does not: the keyword signature,
the options' defaults and checks (from ``implementations.registry``) and the input validation
(the backend's ``_validate``, which knows how to look at its arrays).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from .contract import check_array_types
from .registry import Method

#: The validation each function runs, and the extra argument it takes after ``lengths``.
_CHECKS = {
    "marginals": ("check_scores", None),
    "decode": ("check_scores", None),
    "log_partition": ("check_scores", None),
    "solve": ("check_scores", None),
    "loss": ("check_gold", "tags"),
    "partial_loss": ("check_partial", "allowed"),
}


class ScoresFunction(Protocol):
    """A contract function of the scores alone: ``marginals``, ``decode``, ``log_partition``, ``solve``."""

    def __call__(
        self,
        emissions: Any,
        transitions: Any,
        lengths: Any,
        *,
        start: Any = None,
        end: Any = None,
        validate: Any = True,
        **options: Any,
    ) -> Any: ...


class TargetFunction(Protocol):
    """A contract function of the scores and a target: ``loss`` (tags), ``partial_loss`` (allowed)."""

    def __call__(
        self,
        emissions: Any,
        transitions: Any,
        lengths: Any,
        target: Any = None,
        *,
        start: Any = None,
        end: Any = None,
        validate: Any = True,
        **options: Any,
    ) -> Any: ...


class Bound(Protocol):
    """One method in one backend, as ``implementations.get`` returns it: the contract's functions
    as attributes; ``solve`` only for an iterative method (``Method.iterative``)."""

    method: Method
    backend: str
    marginals: ScoresFunction
    decode: ScoresFunction
    log_partition: ScoresFunction
    loss: TargetFunction
    partial_loss: TargetFunction
    solve: ScoresFunction


class BoundMethod:
    """The :class:`Bound` the public layer builds from a backend's kernel module and checks."""

    method: Method
    backend: str
    marginals: ScoresFunction
    decode: ScoresFunction
    log_partition: ScoresFunction
    loss: TargetFunction
    partial_loss: TargetFunction
    solve: ScoresFunction  # iterative methods only: an AttributeError otherwise, as for any name

    def __init__(self, method: Method, backend: str, kernels: ModuleType, checks: ModuleType):
        self.method, self.backend = method, backend
        self.marginals = _public(method, backend, "marginals", kernels.marginals, checks)
        self.decode = _public(method, backend, "decode", kernels.decode, checks)
        self.log_partition = _public(method, backend, "log_partition", kernels.log_partition, checks)
        self.loss = _public(method, backend, "loss", kernels.loss, checks)
        self.partial_loss = _public(method, backend, "partial_loss", kernels.partial_loss, checks)
        if method.iterative:
            self.solve = _public(method, backend, "solve", kernels.solve, checks)

    def __repr__(self) -> str:
        return f"<{self.method.name} ({self.backend}): {', '.join(self.method.functions)}>"


def _public(
    method: Method, backend: str, function: str, kernel: Callable[..., Any], checks: ModuleType
) -> Any:
    check_name, target = _CHECKS[function]
    check = getattr(checks, check_name)
    resolve = method.resolve

    def of_scores(emissions, transitions, lengths, *, start=None, end=None, validate=True, **options):
        options = resolve(function, options)
        if validate:
            arrays = {"emissions": emissions, "transitions": transitions, "lengths": lengths}
            check_array_types(backend, arrays | {"start": start, "end": end})
            check(emissions, transitions, lengths, start, end)
        return kernel(emissions, transitions, lengths, start, end, **options)

    def of_target(
        emissions, transitions, lengths, extra=None, *, start=None, end=None, validate=True, **options
    ):
        if extra is None:  # given by its name (tags=..., allowed=...)
            if target not in options:
                raise TypeError(f"{method.name}.{function}() missing its argument {target!r}")
            extra = options.pop(target)
        options = resolve(function, options)
        if validate:
            arrays = {"emissions": emissions, "transitions": transitions, "lengths": lengths, target: extra}
            check_array_types(backend, arrays | {"start": start, "end": end})
            check(emissions, transitions, lengths, extra, start, end)
        return kernel(emissions, transitions, lengths, extra, start, end, **options)

    public: Any = of_scores if target is None else of_target
    public.__name__ = public.__qualname__ = function
    public.__module__ = kernel.__module__
    public.__doc__ = _doc(method, function, kernel)
    public.__signature__ = _signature(method, function, target)
    return public


def _signature(method: Method, function: str, target: str | None) -> inspect.Signature:
    positional = ["emissions", "transitions", "lengths"] + ([target] if target else [])
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in positional]
    keywords = {"start": None, "end": None, "validate": True}
    keywords |= {option.name: option.default_for(function) for option in method.options_for(function)}
    parameters += [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in keywords.items()
    ]
    return inspect.Signature(parameters)


def _doc(method: Method, function: str, kernel: Callable[..., Any]) -> str:
    lines = [inspect.getdoc(kernel) or "", "", f"{method.name}: {method.summary}.", "", "Options:"]
    lines += [
        f"    {option.name} (default {option.default_for(function)!r}): {option.doc}"
        for option in method.options_for(function)
    ] or ["    none"]
    lines += ["", "``validate=False`` skips the input checks (``docs/contract.md``)."]
    return "\n".join(lines)


class TreeFunction(Protocol):
    """A dependency-tree function of the arc scores: ``marginals``, ``decode``, ``log_partition``,
    ``solve``."""

    def __call__(self, scores: Any, lengths: Any, *, validate: Any = True, **options: Any) -> Any: ...


class TreeTargetFunction(Protocol):
    """A dependency-tree function of the arc scores and gold ``heads``: ``loss``."""

    def __call__(
        self, scores: Any, lengths: Any, heads: Any, *, validate: Any = True, **options: Any
    ) -> Any: ...


class DependencyBound:
    """One dependency-tree method (``structure="dependency"``) in one backend: ``marginals``,
    ``decode`` and ``log_partition`` (and ``solve`` for an iterative method) of ``(scores,
    lengths)`` and ``loss`` of ``(scores, lengths, heads)``, keyword options checked by the
    registry, inputs by ``checks`` (``implementations.dependency_contract``). The kernels are
    written once over the ops namespace, which the arrays' type selects."""

    method: Method
    backend: str
    marginals: TreeFunction
    decode: TreeFunction
    log_partition: TreeFunction
    loss: TreeTargetFunction
    solve: TreeFunction  # iterative methods only: an AttributeError otherwise, as for any name

    def __init__(self, method: Method, backend: str, kernels: ModuleType, checks: ModuleType):
        self.method, self.backend = method, backend
        scores, gold = checks.check_scores, checks.check_gold
        self.marginals = _tree_public(method, backend, "marginals", kernels.marginals, scores)
        self.decode = _tree_public(method, backend, "decode", kernels.decode, scores)
        self.log_partition = _tree_public(method, backend, "log_partition", kernels.log_partition, scores)
        self.loss = _tree_public(method, backend, "loss", kernels.loss, gold)
        if method.iterative:
            self.solve = _tree_public(method, backend, "solve", kernels.solve, scores)

    def __repr__(self) -> str:
        return f"<{self.method.name} ({self.backend}): {', '.join(self.method.functions)}>"


def _tree_public(
    method: Method, backend: str, function: str, kernel: Callable[..., Any], check: Callable[..., Any]
) -> Any:
    resolve = method.resolve

    def of_scores(scores, lengths, *, validate=True, **options):
        options = resolve(function, options)
        if validate:
            check_array_types(backend, {"scores": scores, "lengths": lengths})
            check(scores, lengths)
        return kernel(scores, lengths, **options)

    def of_heads(scores, lengths, heads, *, validate=True, **options):
        options = resolve(function, options)
        if validate:
            check_array_types(backend, {"scores": scores, "lengths": lengths, "heads": heads})
            check(scores, lengths, heads)
        return kernel(scores, lengths, heads, **options)

    public: Any = of_heads if function == "loss" else of_scores
    names = ["scores", "lengths"] + (["heads"] if function == "loss" else [])
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names]
    parameters.append(inspect.Parameter("validate", inspect.Parameter.KEYWORD_ONLY, default=True))
    parameters += [
        inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default_for(function))
        for o in method.options_for(function)
    ]
    public.__name__ = public.__qualname__ = function
    public.__module__ = kernel.__module__
    public.__doc__ = _doc(method, function, kernel).replace(
        "docs/contract.md", "implementations.dependency_contract"
    )
    public.__signature__ = inspect.Signature(parameters)
    return public
