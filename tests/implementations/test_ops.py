"""The two ops namespaces (``implementations.ops``) are interchangeable: the same public names,
and every function gives the same values in torch and in jax on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest

from implementations import ops

torch = pytest.importorskip("torch")
jnp = pytest.importorskip("jax.numpy")

from implementations.jax_backend import ops as jax_ops  # noqa: E402
from implementations.torch_backend import ops as torch_ops  # noqa: E402


def _public(module) -> set[str]:
    return {name for name in vars(module) if not name.startswith("_") and name not in {"annotations"}}


def _own(module) -> set[str]:
    """The names a namespace defines, less what it imports for its own use."""
    imported = {"Any", "Array", "Tensor", "Sequence", "jax", "jnp", "torch"}
    return _public(module) - imported


def test_same_names() -> None:
    assert _own(torch_ops) == _own(jax_ops)


def test_of_dispatches_on_the_array_type() -> None:
    assert ops.of(None, torch.zeros(1)) is torch_ops
    assert ops.of(jnp.zeros(1)) is jax_ops
    with pytest.raises(TypeError, match="every argument is None"):
        ops.of(None)


_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(3, 4))
_Y = _RNG.normal(size=(3, 4))
_I = _RNG.integers(0, 4, size=(3, 2))
_MASK = _X > 0

#: (name, arguments as NumPy values: an array is passed as each backend's array).
CASES = [
    ("where", (_MASK, _X, _Y)),
    ("maximum", (_X, _Y)),
    ("maximum", (_X, 0.0)),
    ("minimum", (_X, _Y)),
    ("minimum", (_X, 0.5)),
    ("abs", (_X,)),
    ("exp", (_X,)),
    ("amax", (_X, 1)),
    ("logsumexp", (_X, 0)),
    ("logsumexp", (np.full((2, 3), -np.inf), 1)),
    ("take_along_axis", (_X, _I, 1)),
    ("concatenate", ([_X, _Y], 0)),
    ("stack", ([_X, _Y], 1)),
    ("stop_gradient", (_X,)),
    ("nan_to_num", (np.where(_MASK, _X, -np.inf), np.nan, np.inf, 0.0)),
    ("nan_to_num", (np.array([np.nan, np.inf, -np.inf, 1.0]), 0.0, 2.0, -3.0)),
    # the SparseMAP kernels
    ("isfinite", (np.where(_MASK, _X, np.inf),)),
    ("add_at", (np.zeros((3, 4)), _I, _Y[:, :2])),
    ("add_at", (np.zeros((3, 4)), np.zeros((3, 2), dtype=np.int64), _Y[:, :2])),  # repeats accumulate
    ("pinv", (_X @ _X.T,)),
    ("pinv", (_X @ _X.T, True)),
    # the scores, tree, token and mean-field kernels
    ("isneginf", (np.where(_MASK, _X, -np.inf),)),
    ("softmax", (_X, 1)),
    ("log_softmax", (_X, 0)),
    ("swapaxes", (_X, 0, 1)),
    # the exact and Bethe kernels
    ("xlogy", (np.abs(_X), np.abs(_Y))),
    ("xlogy", (np.where(_MASK, _X, 0.0) ** 2, np.abs(_Y))),  # 0 · log y = 0
    # BCRF's log form
    ("expand_dims", (_X, 0)),
    ("expand_dims", (_X, -1)),
    ("put_rows", (np.zeros((3, 5, 2)), np.array([3, 0]), _RNG.normal(size=(3, 2, 2)))),
    ("inner", (_RNG.normal(size=(3, 2, 4)), _RNG.normal(size=(3, 2, 4)))),
]


def _to(backend: str, value):
    if isinstance(value, np.ndarray):
        return torch.as_tensor(value) if backend == "torch" else jnp.asarray(value)
    if isinstance(value, list):
        return [_to(backend, v) for v in value]
    return value


@pytest.mark.parametrize(("name", "arguments"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_functions_agree(name: str, arguments: tuple) -> None:
    got_torch = np.asarray(getattr(torch_ops, name)(*[_to("torch", a) for a in arguments]))
    got_jax = np.asarray(getattr(jax_ops, name)(*[_to("jax", a) for a in arguments]))
    np.testing.assert_allclose(got_torch, got_jax, rtol=1e-6, atol=1e-12)


def test_creation_follows_like() -> None:
    like_t, like_j = torch.zeros(2, dtype=torch.float64), jnp.zeros(2, dtype=jnp.float32)
    for o, like in ((torch_ops, like_t), (jax_ops, like_j)):
        assert o.zeros((2, 3), like).dtype == like.dtype
        assert o.ones((2,), like).shape == (2,)
        np.testing.assert_array_equal(np.asarray(o.full((2,), 3.0, like)), [3.0, 3.0])
        np.testing.assert_array_equal(np.asarray(o.arange(3, like)), [0, 1, 2])
        np.testing.assert_array_equal(np.asarray(o.eye(2, like)), np.eye(2))
        hot = o.one_hot(o.arange(3, like), 3, like.dtype)
        np.testing.assert_array_equal(np.asarray(hot), np.eye(3))
        assert o.finfo(like.dtype).eps > 0
        assert o.broadcast_to(o.zeros((1, 2), like), (3, 2)).shape == (3, 2)
        assert o.astype(o.zeros((1,), like), o.bool_).dtype == o.bool_


def test_min_and_argmin_agree_and_take_the_first_minimum() -> None:
    ties = np.array([[2.0, 1.0, 1.0], [np.inf, np.inf, np.inf]])
    for value in (_X, ties):
        got = [o.min_and_argmin(_to(o.name, value), 1) for o in (torch_ops, jax_ops)]
        for backend_min, backend_arg in got:
            np.testing.assert_array_equal(np.asarray(backend_min), value.min(1))
            np.testing.assert_array_equal(np.asarray(backend_arg), value.argmin(1))
    for o in (torch_ops, jax_ops):
        assert o.astype(o.zeros((1,), _to(o.name, _X)), o.uint8).dtype == o.uint8


def test_max_argmax_agree() -> None:
    """The largest entry and its first index, in both namespaces (ties included)."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    for o, array in ((torch_ops, torch.as_tensor(x)), (jax_ops, jnp.asarray(x))):
        values, indices = o.max_argmax(array, 1)
        np.testing.assert_array_equal(np.asarray(values), [3.0, 2.0])
        np.testing.assert_array_equal(np.asarray(indices), [1, 0])


def test_without_gradient_and_array_namespace() -> None:
    """``without_gradient`` calls the function with nothing recorded for differentiation;
    ``array_namespace`` is the framework's NumPy-like module."""
    x = torch.ones(3, requires_grad=True)
    result = torch_ops.without_gradient(lambda a, b: a * b, x, 2.0)
    assert not result.requires_grad and torch.equal(result, torch.full((3,), 2.0))
    assert float(jax_ops.without_gradient(lambda a: a.sum(), jnp.ones(3))) == 3.0
    assert torch_ops.array_namespace is torch and jax_ops.array_namespace is jnp


def test_recorded() -> None:
    """``recorded``: torch answers whether autograd records (a tensor that requires grad, outside
    ``no_grad``); jax cannot tell under a trace and answers True (differentiation may follow)."""
    x, plain = torch.ones(2, requires_grad=True), torch.ones(2)
    assert torch_ops.recorded(plain, x) and not torch_ops.recorded(plain)
    with torch.no_grad():
        assert not torch_ops.recorded(x)
    assert jax_ops.recorded(jnp.ones(2))


def test_gradient_from_host_and_traced() -> None:
    """``gradient`` differentiates the sum of a function (torch: itself differentiable when its
    input is recorded); ``from_host`` makes a backend array of a NumPy one; only jax traces."""
    jax = pytest.importorskip("jax")
    heads = np.array([[-1, 0, 1]])
    for o, like in ((torch_ops, torch.as_tensor(_X)), (jax_ops, jnp.asarray(_X))):
        np.testing.assert_allclose(np.asarray(o.gradient(lambda x: (x**2).sum(1), like)), 2 * _X)
        np.testing.assert_array_equal(np.asarray(o.from_host(heads, like)), heads)
        assert not o.traced(like, None)
    x = torch.as_tensor(_X).requires_grad_(True)
    second = torch_ops.gradient(lambda y: (y**3).sum(1), x).sum()
    (hessian_diagonal,) = torch.autograd.grad(second, x)
    np.testing.assert_allclose(hessian_diagonal.numpy(), 6 * _X)
    assert not torch_ops.gradient(lambda y: y.sum(1), torch.as_tensor(_X)).requires_grad
    assert jax.jit(lambda y: jnp.asarray(jax_ops.traced(y)))(jnp.asarray(_X))


def test_scan_agrees() -> None:
    """``scan`` carries a state over the first axis of one array or a tuple of arrays, stacking
    the outputs, in both namespaces (torch: a loop; jax: ``lax.scan``)."""

    def step(total, x):
        k, value = x
        return total + value * k, (total, value)

    ks, values = np.arange(4), _X.T  # four steps of (3,) values
    for o, make in ((torch_ops, torch.as_tensor), (jax_ops, jnp.asarray)):
        total, (partial, seen) = o.scan(step, make(np.zeros(3)), (make(ks), make(values)))
        np.testing.assert_allclose(np.asarray(total), (values * ks[:, None]).sum(0))
        np.testing.assert_allclose(np.asarray(seen), values)
        assert np.asarray(partial).shape == (4, 3)
