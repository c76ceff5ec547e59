"""BCRF's C sweep in JAX (``implementations/jax_backend/_sweep_ffi.cc``, an XLA FFI handler of
``implementations/_sweep.c``): the iterations it runs are XLA's own, to rounding, on every length
1..7 with padding, dead tags, 17 tags (whole vectors and a remainder), both orders, float32 and
float64; the same values as torch's sweep bit for bit; gradients (Danskin and unrolled,
which differentiate XLA's iterations in its place) and ``vmap`` as without it; and where the linear
state cannot start (an unvouched kernel) or loses a scaling to underflow (small τ), XLA's
iterations in its place (``lax.cond``); operands of inconsistent shapes refused."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from implementations.jax_backend import _sweep  # noqa: E402
from implementations.jax_backend import bcrf as kernel  # noqa: E402

from . import backends  # noqa: E402
from .instances import all_lengths_instance  # noqa: E402
from .unbuilt import assert_unbuilt_sweep_is_unavailable  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _sweep.available(np.float64, _sweep.FROM_TAGS), reason="no C++ compiler for the sweep's XLA handler"
)
TOLERANCE = {"float64": 1e-12, "float32": 2e-5}


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each sweep traced (``"sweep"``), with every kernel large enough for it (``SWEEP_FROM`` and
    ``FROM_TAGS`` 1); jit's caches are cleared before and after, so that every call traces anew."""
    traced: list[str] = []
    iterations = _sweep.iterations
    monkeypatch.setattr(_sweep, "iterations", lambda *args: traced.append("sweep") or iterations(*args))
    monkeypatch.setattr(kernel.sweep, "SWEEP_FROM", 1)
    monkeypatch.setattr(_sweep, "FROM_TAGS", 1)
    jax.clear_caches()
    yield traced
    jax.clear_caches()


def _outputs(
    inst: Any, dtype: str, gradients: tuple[str, ...] = ("danskin", "unrolled"), **options: Any
) -> list[np.ndarray]:
    """Marginals, ``log_partition`` and the losses' values and ``gradients`` of JAX BCRF."""
    backend = backends.get("jax")
    mod, kw = backend.module("bcrf"), inst.arrays(backend, dtype)
    tags = inst.gold_array(backend)
    args = (kw["emissions"], kw["transitions"], kw["lengths"])
    ends = {"start": kw["start"], "end": kw["end"]}
    out = [
        np.asarray(x)
        for x in (*mod.marginals(*args, **ends, **options), mod.log_partition(*args, **ends, **options))
    ]
    for gradient in gradients:
        value, grad = backend.value_and_grad(
            lambda kw, o={**options, "gradient": gradient}: mod.loss(
                kw["emissions"], kw["transitions"], kw["lengths"], tags, start=kw["start"], end=kw["end"], **o
            ),
            kw,
            ("emissions", "transitions"),
        )
        out += [np.asarray(value), grad["emissions"], grad["transitions"]]
    return out


def _without_sweep(monkeypatch: pytest.MonkeyPatch, *args: Any, **options: Any) -> list[np.ndarray]:
    with monkeypatch.context() as patch:
        patch.setattr(kernel.sweep, "SWEEP_FROM", math.inf)
        jax.clear_caches()
        return _outputs(*args, **options)


def test_the_sweep_gives_xlas_iterations(monkeypatch: pytest.MonkeyPatch, runs: list[str]) -> None:
    """With every per-position kernel swept, marginals, value and both losses' values and gradients
    are those of XLA's iterations, to rounding: lengths 1..7, padding, -inf emissions (dead tags),
    17 tags (a vector of 8 float64 and a remainder), order ``even-odd`` (the bit-for-bit test
    below sweeps the other parity first, in both dtypes). One case: each compiles both paths."""
    inst = all_lengths_instance(17, 17, max_len=7, neg_inf=0.2, scale=2.0)
    inst = replace(inst, transitions=np.where(np.isneginf(inst.transitions), -2.0, inst.transitions))
    options = {"iterations": 4, "temperature": 1.0, "order": "even-odd"}
    swept = _outputs(inst, "float64", **options)
    assert runs
    expected = _without_sweep(monkeypatch, inst, "float64", **options)
    tol = TOLERANCE["float64"]
    for got, want in zip(swept, expected, strict=True):
        assert (np.isfinite(got) == np.isfinite(want)).all()
        np.testing.assert_allclose(got, want, rtol=tol, atol=10 * tol)


@pytest.mark.parametrize(
    ("tau", "finite_transitions"), [(1.0, False), (0.01, True)], ids=["unvouched", "underflow"]
)
def test_where_the_linear_state_cannot_run_xlas_iterations_run_in_its_place(
    monkeypatch: pytest.MonkeyPatch, runs: list[str], tau: float, finite_transitions: bool
) -> None:
    """A kernel with -inf arcs cannot start the linear state, and at τ = 0.01 a scaling falls under
    the floor: the sweep is traced (the choice is made as the program runs) and the results are
    XLA's iterations' all the same (the unrolled gradient, which never differentiates the sweep,
    is left to the test above)."""
    inst = all_lengths_instance(5, 4, max_len=6, neg_inf=0.3, scale=3.0)
    if finite_transitions:
        inst = replace(inst, transitions=np.where(np.isneginf(inst.transitions), -2.0, inst.transitions))
    else:
        assert np.isneginf(inst.transitions).any()
    options = {"iterations": 5, "temperature": tau}
    swept = _outputs(inst, "float64", ("danskin",), **options)
    assert runs
    expected = _without_sweep(monkeypatch, inst, "float64", ("danskin",), **options)
    for got, want in zip(swept, expected, strict=True):
        assert (np.isfinite(got) == np.isfinite(want)).all()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9 / tau)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_jax_and_torch_sweep_the_same_values(runs: list[str], dtype: str) -> None:
    """The handler runs the C of torch's sweep: from the same linear state, bit for bit the same
    scalings, shifts and smallest scaling (the even nodes projected first: order ``odd-even``)."""
    torch = pytest.importorskip("torch")
    from implementations.torch_backend import _sweep as torch_sweep

    jnp = jax.numpy
    inst = all_lengths_instance(11, 17, max_len=7, neg_inf=0.2, scale=2.0)
    inst = replace(inst, transitions=np.where(np.isneginf(inst.transitions), -2.0, inst.transitions))
    kw = inst.arrays(backends.get("jax"), dtype)
    terms = kernel.arc_terms(kw["emissions"], kw["transitions"], kw["lengths"], kw["start"], kw["end"])
    kernel_, scalings = kernel.scaling._scaled_initial(terms, kw["lengths"], 1.0)
    ok, state = kernel.sweep._linear_start(kernel_, scalings, kw["lengths"])
    assert ok
    swept = _sweep.iterations(kernel_.linear, kw["lengths"], state, 0, 3)
    (even, odd), (even_shift, odd_shift), least = (
        jax.tree.map(lambda x: torch.from_numpy(np.array(x)), part) for part in state
    )
    blocks = tuple(torch.from_numpy(np.array(x)) for x in kernel_.parities)
    lengths = torch.from_numpy(np.array(kw["lengths"]))
    expected = torch_sweep.iterations(
        blocks, lengths, (even, odd), (even_shift[..., None], odd_shift[..., None]), least, 0, 3
    )
    got = [*swept[0], *swept[1], swept[2]]
    want = [*expected[0], *(x[..., 0] for x in expected[1]), expected[2]]
    for x, y in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(x), y.numpy())
    assert bool(jnp.any(swept[2] < 1))  # some projection wrote a scaling under its vector's largest


def test_under_vmap_the_sweep_runs_each_batch_as_alone(runs: list[str]) -> None:
    """``vmap`` over a leading axis runs the handler once for each (``vmap_method="sequential"``):
    the marginals of each are those of the batch alone."""
    jnp = jax.numpy
    insts = [all_lengths_instance(seed, 17, max_len=5, neg_inf=0.0, scale=2.0) for seed in (1, 2)]
    arrays = [inst.arrays(backends.get("jax"), "float64") for inst in insts]
    options = {"iterations": 3, "temperature": 1.0, "order": "odd-even", "tolerance": None, "form": "scaling"}

    def marginals(emissions: Any, transitions: Any) -> Any:  # the kernel itself: no eager checks
        kw = arrays[0]
        return kernel.marginals(emissions, transitions, kw["lengths"], kw["start"], kw["end"], **options)[0]

    stacked = [jnp.stack([kw[name] for kw in arrays]) for name in ("emissions", "transitions")]
    batched = jax.vmap(marginals)(*stacked)
    assert runs
    for k, kw in enumerate(arrays):
        np.testing.assert_allclose(
            batched[k], marginals(kw["emissions"], kw["transitions"]), rtol=0, atol=1e-13
        )


def test_without_a_compiler_the_handler_warns_once_and_is_not_available(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A C++ compiler that cannot build the handler (here, none at ``$CXX``) gives one warning, leaves
    nothing in the cache, and the sweep unavailable: XLA runs the iterations."""
    assert_unbuilt_sweep_is_unavailable(
        monkeypatch,
        tmp_path,
        "CXX",
        _sweep._registered,
        (lambda: _sweep.available(np.float64, 128), lambda: _sweep.available(np.float32, 128)),
    )


def test_the_handler_refuses_operands_of_inconsistent_shapes(runs: list[str]) -> None:
    """Arc blocks of another tag count than the scalings' are refused with the handler's message,
    not read out of bounds."""
    jnp = jax.numpy
    batch, nodes, tags = 2, 3, 17
    state = (
        (jnp.ones((batch, 2, nodes, tags)), jnp.ones((batch, 2, nodes, tags))),
        (jnp.zeros((batch, 2, nodes)), jnp.zeros((batch, 2, nodes))),
        jnp.ones(batch),
    )
    arcs = jnp.ones((batch, 2 * nodes - 1, tags - 1, tags - 1))
    with pytest.raises(jax.errors.JaxRuntimeError, match="operands of inconsistent shapes"):
        jax.block_until_ready(_sweep.iterations(arcs, jnp.full(batch, 2 * nodes), state, 0, 1))
