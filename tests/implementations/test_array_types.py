"""Arrays of the wrong framework are refused at the contract with a one-line TypeError naming the
argument, and the checked mode stages the value checks under ``jax.jit`` (checkify)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import implementations

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax.experimental import checkify  # noqa: E402

from implementations.jax_backend.checked import checked  # noqa: E402

RNG = np.random.default_rng(0)
EMISSIONS = RNG.standard_normal((2, 5, 3)).astype(np.float32)
TRANSITIONS = RNG.standard_normal((3, 3)).astype(np.float32)
LENGTHS = np.array([5, 3])
TAGS = np.zeros((2, 5), dtype=np.int64)


def _torch(*arrays):
    return [torch.as_tensor(a) for a in arrays]


@pytest.mark.parametrize(
    ("position", "value", "kind"),
    [
        (0, EMISSIONS, "numpy.ndarray"),
        (1, TRANSITIONS.tolist(), "builtins.list"),
        (2, [5, 3], "builtins.list"),
    ],
)
def test_torch_refuses_numpy_arrays_and_lists(position: int, value, kind: str):
    crf = implementations.get("crf", backend="torch")
    args = _torch(EMISSIONS, TRANSITIONS, LENGTHS)
    args[position] = value
    name = ("emissions", "transitions", "lengths")[position]
    with pytest.raises(
        TypeError, match=rf"^{name} must be a torch\.Tensor .* for the torch backend, got {kind}$"
    ):
        crf.marginals(*args)


def test_torch_loss_names_the_tags_and_start():
    crf = implementations.get("crf", backend="torch")
    with pytest.raises(TypeError, match=r"^tags must be a torch\.Tensor"):
        crf.loss(*_torch(EMISSIONS, TRANSITIONS, LENGTHS), TAGS)
    with pytest.raises(TypeError, match=r"^start must be a torch\.Tensor"):
        crf.marginals(*_torch(EMISSIONS, TRANSITIONS, LENGTHS), start=np.zeros(3, np.float32))


@pytest.mark.parametrize("position", [0, 1, 2])
def test_jax_refuses_torch_tensors(position: int):
    crf = implementations.get("crf", backend="jax")
    args: list = [jnp.asarray(EMISSIONS), jnp.asarray(TRANSITIONS), jnp.asarray(LENGTHS)]
    args[position] = torch.as_tensor(np.array(args[position]))
    name = ("emissions", "transitions", "lengths")[position]
    with pytest.raises(
        TypeError, match=rf"^{name} must be a jax\.Array or NumPy array .* got torch\.Tensor$"
    ):
        crf.marginals(*args)


def test_jax_takes_numpy_arrays():
    crf = implementations.get("crf", backend="jax")
    unary, _ = crf.marginals(EMISSIONS, TRANSITIONS, LENGTHS)
    assert unary.shape == EMISSIONS.shape


def test_the_trees_check_their_arrays():
    scores = RNG.standard_normal((2, 4, 4)).astype(np.float32)
    with pytest.raises(TypeError, match=r"^scores must be a torch\.Tensor"):
        implementations.get("tree-crf", backend="torch").marginals(scores, torch.tensor([3, 2]))
    with pytest.raises(TypeError, match=r"^lengths must be a jax\.Array"):
        implementations.get("tree-crf", backend="jax").marginals(jnp.asarray(scores), torch.tensor([3, 2]))


@pytest.fixture(scope="module")
def checked_marginals():
    return jax.jit(checked(implementations.get("crf", backend="jax").marginals))


def test_checked_mode_passes_valid_input(checked_marginals):
    error, (unary, _) = checked_marginals(
        jnp.asarray(EMISSIONS), jnp.asarray(TRANSITIONS), jnp.asarray(LENGTHS)
    )
    assert error.get() is None
    eager, _ = implementations.get("crf", backend="jax").marginals(EMISSIONS, TRANSITIONS, LENGTHS)
    np.testing.assert_allclose(np.asarray(unary), np.asarray(eager), rtol=1e-6)


def test_checked_mode_reports_lengths_over_n(checked_marginals):
    error, _ = checked_marginals(jnp.asarray(EMISSIONS), jnp.asarray(TRANSITIONS), jnp.asarray([5, 9]))
    assert error.get().startswith("lengths must satisfy 1 <= lengths[b] <= N = 5; lengths[1] = 9")
    with pytest.raises(checkify.JaxRuntimeError, match="lengths must satisfy"):
        error.throw()


def test_checked_mode_reports_nan_scores(checked_marginals):
    emissions = EMISSIONS.copy()
    emissions[1, 2, 0] = np.nan
    error, _ = checked_marginals(jnp.asarray(emissions), jnp.asarray(TRANSITIONS), jnp.asarray(LENGTHS))
    assert error.get().startswith("emissions contains NaN")
    transitions = TRANSITIONS.copy()
    transitions[0, 0] = np.inf
    error, _ = checked_marginals(jnp.asarray(EMISSIONS), jnp.asarray(transitions), jnp.asarray(LENGTHS))
    assert error.get().startswith("transitions contains +inf")


def test_checked_mode_for_the_trees():
    marginals = jax.jit(checked(implementations.get("tree-crf", backend="jax").marginals))
    scores = jnp.asarray(RNG.standard_normal((2, 4, 4)).astype(np.float32))
    assert marginals(scores, jnp.asarray([3, 2]))[0].get() is None
    assert (
        marginals(scores, jnp.asarray([3, 4]))[0]
        .get()
        .startswith("lengths must satisfy 1 <= lengths[b] <= N = 3")
    )


def test_without_checked_nothing_is_staged():
    marginals = jax.jit(implementations.get("crf", backend="jax").marginals)
    unary, _ = marginals(jnp.asarray(EMISSIONS), jnp.asarray(TRANSITIONS), jnp.asarray([5, 9]))  # no error
    assert unary.shape == EMISSIONS.shape
