"""A checked mode under ``jax.jit``: the contract's value checks (NaN or +inf scores, lengths
outside ``1 <= lengths[b] <= N``) as ``jax.experimental.checkify`` checks.

Under a trace the values are unknown, so the public functions run only the shape and dtype checks
(``_validate``). Inside :func:`checked` they also stage the value checks into the program, and the
checked function returns ``(error, result)``; ``error.throw()`` raises the first failed check as
``checkify.JaxRuntimeError`` with the contract's message::

    marginals = jax.jit(checked(crf.marginals))
    error, (unary, pairwise) = marginals(emissions, transitions, lengths)
    error.throw()

Wrap the function to be traced (``jax.jit(checked(f))``): a function jitted on its own before may
reuse its unchecked program. Outside :func:`checked` nothing is staged, so programs stay as fast.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
from jax.experimental import checkify

_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("implementations_checked", default=False)


def checked(function: Callable[..., Any]) -> Callable[..., tuple[checkify.Error, Any]]:
    """``function`` with the contract's value checks staged wherever it calls a public function
    under a trace; it returns ``(error, result)`` (``jax.experimental.checkify``)."""

    @functools.wraps(function)
    def active(*args: Any, **kwargs: Any) -> Any:
        token = _ACTIVE.set(True)
        try:
            return function(*args, **kwargs)
        finally:
            _ACTIVE.reset(token)

    return checkify.checkify(active, errors=checkify.user_checks)


def check_traced(scores: dict[str, Any], lengths: Any, length: int) -> None:
    """Stage the value checks of traced ``scores`` (name -> array or None) and ``lengths`` (each in
    ``1..length``), inside :func:`checked` only."""
    if not _ACTIVE.get():
        return
    for name, x in scores.items():
        if x is not None:
            checkify.check(~jnp.isnan(x).any(), f"{name} contains NaN")
            checkify.check(
                ~(x == jnp.inf).any(), f"{name} contains +inf (only -inf, meaning 'forbidden', is allowed)"
            )
    bad = (lengths < 1) | (lengths > length)
    first = jnp.argmax(bad)
    checkify.check(
        ~bad.any(),
        f"lengths must satisfy 1 <= lengths[b] <= N = {length}; lengths[{{index}}] = {{value}}",
        index=first,
        value=lengths[first],
    )
