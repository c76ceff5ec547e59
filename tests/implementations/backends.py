"""One small adapter per backend, so a test can be written once and run against torch and jax.

A :class:`Backend` turns NumPy arrays into the backend's arrays (float32/float64, integer, bool),
turns results back into NumPy, and differentiates the sum of a ``(B,)`` function with the
backend's own machinery (``torch.autograd`` or ``jax.grad``). Nothing else in a test needs to know
which framework it runs on. ``get(name)`` imports the framework lazily, so the torch half of the
suite never needs jax.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import hypothesis
import numpy as np
import pytest

import implementations

Array = Any  # a torch.Tensor or a jax.Array
Call = tuple[str, tuple[Any, ...], dict[str, Any]]  # function name, extra arrays, options


class Backend:
    """What a test needs from an array framework (subclassed per backend)."""

    name: str
    #: dtype names ``decode`` may return: torch promises exactly int64; jax any integer dtype
    #: (int32 by default, int64 under ``jax_enable_x64``).
    decode_dtypes: tuple[str, ...]

    #: where arrays are made: ``"cpu"`` or ``"gpu"`` (the backend's first GPU)
    device: str = "cpu"

    def module(self, method: str) -> Any:
        """The contract module of ``method`` in this backend (called eagerly: every check runs)."""
        return implementations.get(method, backend=self.name)

    # --------------------------------------------------------------------------- conversions

    def array(self, x: np.ndarray | None, dtype: str | None = None) -> Array | None:
        """A backend array from NumPy, keeping the kind: floats become ``dtype`` (default: as
        given), integers int64, bools bool. ``None`` stays ``None``."""
        if x is None:
            return None
        x = np.asarray(x)
        if x.dtype.kind == "f":
            return self._make(x, dtype or x.dtype.name)
        if x.dtype.kind in "iu":
            return self._make(x, "int64")
        if x.dtype.kind == "b":
            return self._make(x, "bool")
        raise TypeError(f"unsupported dtype {x.dtype}")

    def arrays(self, values: Mapping[str, np.ndarray | None], dtype: str | None = None) -> dict[str, Array]:
        """:meth:`array` on every value of a mapping (floats converted to ``dtype``)."""
        return {key: self.array(value, dtype) for key, value in values.items()}

    def numpy(self, x: Array) -> np.ndarray:
        """A NumPy copy of a backend array (detached from any graph)."""
        raise NotImplementedError

    def dtype_name(self, x: Array) -> str:
        """``"float64"``, ``"float32"``, ``"int64"``, ``"bool"``, ...: the array's dtype by name."""
        return str(x.dtype).removeprefix("torch.")

    def is_array(self, x: object) -> bool:
        """``x`` is an array of this backend (not a list, not a NumPy array)."""
        raise NotImplementedError

    def _make(self, x: np.ndarray, dtype: str) -> Array:
        raise NotImplementedError

    def calls(self, method: str, kw: Mapping[str, Array | None], *specs: Call) -> list[Any]:
        """Several contract functions of ``method`` on the same scores ``kw`` (a dict with
        ``emissions, transitions, lengths, start, end``); each spec is ``(function name, extra
        arrays, options)``, the extra arrays being the ``tags`` of ``loss`` or the ``allowed`` of
        ``partial_loss``. The results, in order, exactly as the functions return them."""
        mod = self.module(method)
        return [_invoke(getattr(mod, fn), kw, extra, opts) for fn, extra, opts in specs]

    # ----------------------------------------------------------------------------- gradients

    def value_and_grad(
        self,
        fn: Callable[[dict[str, Array]], Array],
        inputs: Mapping[str, Array | None],
        wrt: Sequence[str],
        *,
        connected: bool = True,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``fn(inputs)`` (a ``(B,)`` array) and the gradient of its sum w.r.t. ``inputs[k]``
        for every ``k`` in ``wrt``, all as NumPy. With ``connected`` (the default) torch asserts
        that every input is in the graph (its ``.grad`` is not None, as a test reading ``.grad``
        requires); otherwise an input the value does not depend on gets a zero gradient, as jax
        always gives."""
        raise NotImplementedError

    @contextlib.contextmanager
    def no_grad(self) -> Iterator[None]:
        """Evaluation without recording a graph (a no-op where nothing is recorded)."""
        yield

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


class TorchBackend(Backend):
    name = "torch"
    decode_dtypes = ("int64",)

    def __init__(self, device: str = "cpu") -> None:
        import torch

        self.torch, self.device = torch, device

    def _make(self, x: np.ndarray, dtype: str) -> Array:
        where = "cuda" if self.device == "gpu" else "cpu"
        return self.torch.tensor(x, dtype=getattr(self.torch, dtype), device=where)

    def numpy(self, x: Array) -> np.ndarray:
        return x.detach().cpu().numpy()

    def is_array(self, x: object) -> bool:
        return isinstance(x, self.torch.Tensor)

    def value_and_grad(
        self,
        fn: Callable[[dict[str, Array]], Array],
        inputs: Mapping[str, Array | None],
        wrt: Sequence[str],
        *,
        connected: bool = True,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        leaves = {k: inputs[k].detach().clone().requires_grad_(True) for k in wrt}
        value = fn({**inputs, **leaves})
        value.sum().backward()
        if connected:
            assert all(leaf.grad is not None for leaf in leaves.values()), "an input is not in the graph"
        grads = {
            k: self.numpy(leaf.grad) if leaf.grad is not None else np.zeros(tuple(leaf.shape))
            for k, leaf in leaves.items()
        }
        return self.numpy(value), grads

    @contextlib.contextmanager
    def no_grad(self) -> Iterator[None]:
        with self.torch.no_grad():
            yield


class JaxBackend(Backend):
    name = "jax"
    decode_dtypes = ("int32", "int64")

    def __init__(self, device: str = "cpu") -> None:
        import jax
        import jax.numpy as jnp

        enable_x64()
        self.jax, self.jnp, self.device = jax, jnp, device
        self._programs: dict[Any, Callable[..., Any]] = {}

    def calls(self, method: str, kw: Mapping[str, Array | None], *specs: Call) -> list[Any]:
        """As :meth:`Backend.calls`, but all the functions in one ``jax.jit`` program (compiled
        once per method, specs and input shapes): one XLA compilation instead of one or more per
        function, about half the time. Under jit the value checks are skipped (valid inputs
        only); ``test_jit.py`` checks that jit == eager."""
        key = (method, tuple((fn, len(extra), tuple(sorted(opts.items()))) for fn, extra, opts in specs))
        if key not in self._programs:
            mod = self.module(method)
            static = [(fn, opts) for fn, _, opts in specs]

            def program(kw: Mapping[str, Array | None], extras: list[tuple[Array, ...]]) -> list[Any]:
                return [
                    _invoke(getattr(mod, fn), kw, extra, opts)
                    for (fn, opts), extra in zip(static, extras, strict=True)
                ]

            self._programs[key] = self.jax.jit(program)
        out = self._programs[key](dict(kw), [tuple(extra) for _, extra, _ in specs])
        return [_solve_iterations(fn, result) for (fn, _, _), result in zip(specs, out, strict=True)]

    def _make(self, x: np.ndarray, dtype: str) -> Array:
        # committed to the device, so that a jitted program runs there (a GPU machine's default
        # device is its GPU, also for the CPU adapter)
        return self.jax.device_put(np.asarray(x, dtype=dtype), self.jax.devices(self.device)[0])

    def numpy(self, x: Array) -> np.ndarray:
        return np.array(x)

    def is_array(self, x: object) -> bool:
        return isinstance(x, self.jax.Array)

    def value_and_grad(
        self,
        fn: Callable[[dict[str, Array]], Array],
        inputs: Mapping[str, Array | None],
        wrt: Sequence[str],
        *,
        connected: bool = True,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        def total(leaves: dict[str, Array]) -> tuple[Array, Array]:
            value = fn({**inputs, **leaves})
            return value.sum(), value

        (_, value), grads = self.jax.value_and_grad(total, has_aux=True)({k: inputs[k] for k in wrt})
        return self.numpy(value), {k: self.numpy(g) for k, g in grads.items()}


def _invoke(
    function: Callable[..., Any], kw: Mapping[str, Array | None], extra: Sequence[Any], opts: dict
) -> Any:
    scores = (kw["emissions"], kw["transitions"], kw["lengths"])
    return function(*scores, *extra, start=kw.get("start"), end=kw.get("end"), **opts)


def _solve_iterations(fn: str, result: Any) -> Any:
    """``solve``'s ``iterations`` is a Python int; out of ``jax.jit`` it comes back as a 0-d array."""
    import jax

    if fn == "solve" and not isinstance(result.iterations, jax.core.Tracer):
        return result._replace(iterations=int(result.iterations))
    return result


def enable_x64() -> None:
    """Let jax hold float64/int64 (it silently truncates to 32 bits otherwise)."""
    import jax

    jax.config.update("jax_enable_x64", True)


@functools.cache
def get(name: str, device: str = "cpu") -> Backend:
    """The adapter of backend ``name`` (one of ``implementations.BACKENDS``) on ``device``
    (``"cpu"``, or ``"gpu"``: see ``crfbench.environment.gpu_present``)."""
    if name == "torch":
        return TorchBackend(device)
    if name == "jax":
        return JaxBackend(device)
    raise ValueError(f"no test adapter for backend {name!r}")


#: Share of the hypothesis profile's ``max_examples`` that the jax half of a property test draws.
#: Every new input shape costs jax an XLA compilation per function (~0.3-1 s), against ~1 ms for
#: an eager torch call; the cross-backend test (``test_cross_backend.py``) is where jax meets
#: random instances in bulk. ``HYPOTHESIS_PROFILE=dev``/``thorough`` scale this up as well.
JAX_EXAMPLES = 0.15


def given(*, jax_examples: float = JAX_EXAMPLES, **strategies: Any) -> Callable[[Callable], Callable]:
    """``hypothesis.given`` for a test that takes the ``backend`` fixture: the torch half draws
    the profile's examples, the jax half ``jax_examples`` of them (at least 3)."""

    def decorate(test: Callable) -> Callable:
        full = hypothesis.given(**strategies)(test)
        budget = max(3, round(hypothesis.settings.default.max_examples * jax_examples))
        light = hypothesis.settings(max_examples=budget)(hypothesis.given(**strategies)(test))

        @functools.wraps(full)
        def run(*args: Any, **kwargs: Any) -> None:
            (light if kwargs["backend"].name == "jax" else full)(*args, **kwargs)

        return run

    return decorate


#: Mark a parameter value whose jax half is deselected (see ``tests/conftest.py``): every jax
#: program costs an XLA compilation, so a large oracle grid runs on jax as a covering subset.
TORCH_ONLY = pytest.mark.torch_only


def jax_subset(values: Sequence[Any], keep: Sequence[Any]) -> list[Any]:
    """``values`` for ``pytest.mark.parametrize``, those not in ``keep`` marked :data:`TORCH_ONLY`."""
    return [value if value in keep else pytest.param(value, marks=TORCH_ONLY) for value in values]
