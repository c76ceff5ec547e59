"""The solver output record every iterative method returns (``implementations.solver``), and the
optional ``tolerance`` that stops the iterations early.

Checked for every fixed-point method of the registry (BCRF, mean field), in every backend: the
error history is what the iterate's own error measure gives (BCRF: the polytope violation
recomputed from the arc marginals by the NumPy reference; mean field: the largest change of a
marginal, from the loop reference); a tolerance stops at the first iteration where every sequence
is within it, gives the same iterate as that many fixed iterations, freezes each sequence once it
is within (so a padded batch gives each sequence what it gets alone), and leaves NaN for iterations
not run; the functions other than ``solve`` stop at the same point; and the jitted jax ``solve`` (a
``lax.while_loop``) equals the eager one.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from implementations import registry
from implementations.reference import ibp
from implementations.reference import meanfield as mf_ref

from .backends import Backend
from .instances import Instance, apply, make_instance, npy

#: the fixed-point methods: the shared ``tolerance`` option (``None``: run every iteration);
#: SparseMAP's solvers stop at their optimality certificate and have their own (test_sparsemap.py)
ITERATIVE = [name for name, method in registry.REGISTRY.items() if registry.TOLERANCE in method.options]
TOLERANCE = {"bcrf": 1e-6, "meanfield": 1e-6}
MAX_ITERATIONS = 200


def instance(seed: int = 0, per_position: bool = True) -> Instance:
    """(B, N, T) = (4, 7, 3): lengths 7, 1, 2, 5, -inf in 20 % of the scores, garbage padding;
    transitions per position or shared."""
    rng = np.random.default_rng(seed)
    return make_instance(
        rng, batch=4, length=7, num_tags=3, lengths=[7, 1, 2, 5], neg_inf=0.2, per_position=per_position
    )


def reference_errors(method: str, inst: Instance, b: int, iterations: int) -> np.ndarray:
    """The error after each of ``iterations`` iterations of sequence ``b``, from the references."""
    if method == "bcrf":
        runs = [ibp.bcrf(**inst.seq(b), iterations=k) for k in range(1, iterations + 1)]
        return np.array([run.violation for run in runs])
    history = mf_ref.meanfield(**inst.seq(b), iterations=iterations).history
    return np.array([np.abs(now - before).max() for before, now in itertools.pairwise(history)])


@pytest.mark.parametrize("method", ITERATIVE)
def test_fields_and_error_history(method: str, backend: Backend) -> None:
    inst = instance()
    out = apply(backend.module(method), "solve", inst.arrays(backend), iterations=6)
    assert out._fields == ("unary", "pairwise", "value", "iterations", "converged", "errors")
    assert out.iterations == 6 and isinstance(out.iterations, int)
    errors = npy(out.errors)
    assert errors.shape == (6, inst.batch)
    for b in range(inst.batch):
        np.testing.assert_allclose(errors[:, b], reference_errors(method, inst, b, 6), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(npy(out.error), errors[-1])
    np.testing.assert_array_equal(npy(out.converged), errors[-1] <= 0)


@pytest.mark.parametrize("per_position", [True, False])
@pytest.mark.parametrize("method", ITERATIVE)
def test_tolerance_stops_where_every_sequence_is_within_it(
    method: str, backend: Backend, per_position: bool
) -> None:
    """Shared transitions too: BCRF's iterate then holds the sequences last (a frozen one must be
    found along that dim)."""
    inst = instance(1, per_position)
    module, kw, tolerance = backend.module(method), inst.arrays(backend), TOLERANCE[method]
    full = apply(module, "solve", kw, iterations=MAX_ITERATIONS)
    history = npy(full.errors)
    # a sequence is frozen from its first iteration within the tolerance; the loop ends when all are
    first = np.array([np.flatnonzero(history[:, b] <= tolerance)[0] for b in range(inst.batch)]) + 1
    stopped = apply(module, "solve", kw, iterations=MAX_ITERATIONS, tolerance=tolerance)
    assert int(stopped.iterations) == first.max() < MAX_ITERATIONS
    assert npy(stopped.converged).all()
    errors = npy(stopped.errors)
    assert np.isnan(errors[first.max() :]).all() and not np.isnan(errors[: first.max()]).any()
    for b in range(inst.batch):
        alone = apply(module, "solve", inst.alone(b).arrays(backend), iterations=int(first[b]))
        n = int(inst.lengths[b])
        np.testing.assert_allclose(npy(stopped.unary)[b, :n], npy(alone.unary)[0, :n], rtol=0, atol=1e-13)
        np.testing.assert_allclose(npy(stopped.value)[b], npy(alone.value)[0], rtol=1e-13, atol=1e-13)
        assert npy(stopped.error)[b] == pytest.approx(npy(alone.error)[0], abs=1e-15)


@pytest.mark.parametrize("method", ITERATIVE)
@pytest.mark.parametrize("function", ["marginals", "decode", "log_partition"])
def test_every_function_stops_where_solve_does(method: str, function: str, backend: Backend) -> None:
    inst = instance(2)
    module, kw, tolerance = backend.module(method), inst.arrays(backend), TOLERANCE[method]
    options: dict[str, Any] = {"iterations": MAX_ITERATIONS, "tolerance": tolerance}
    solved = apply(module, "solve", kw, **options)
    got = apply(module, function, kw, **options)
    if function == "marginals":
        np.testing.assert_array_equal(npy(got[0]), npy(solved.unary))
    elif function == "log_partition":
        np.testing.assert_array_equal(npy(got), npy(solved.value))
    else:  # decoding runs at its own default temperature: compare with solve at that temperature
        decode_default = {
            o.name: o.default_for("decode") for o in registry.REGISTRY[method].options_for("decode")
        }
        at = apply(module, "solve", kw, **{**decode_default, **options})
        expected = np.where(np.arange(inst.length) < inst.lengths[:, None], npy(at.unary).argmax(-1), -1)
        np.testing.assert_array_equal(npy(got), expected)


@pytest.mark.jax
@pytest.mark.parametrize("method", ITERATIVE)
def test_jitted_solve_with_a_tolerance_equals_eager(method: str) -> None:
    jax = pytest.importorskip("jax")
    from .backends import get

    backend = get("jax")
    inst = instance(3)
    module, kw = backend.module(method), inst.arrays(backend)
    options = {"iterations": MAX_ITERATIONS, "tolerance": TOLERANCE[method], "validate": False}
    eager = apply(module, "solve", kw, **options)
    jitted = jax.jit(lambda kw: apply(module, "solve", kw, **options))(kw)
    for field in eager._fields:
        np.testing.assert_array_equal(npy(getattr(jitted, field)), npy(getattr(eager, field)))


@pytest.mark.parametrize("method", ITERATIVE)
def test_a_bad_tolerance_is_refused(method: str, backend: Backend) -> None:
    inst = instance()
    with pytest.raises(ValueError, match="tolerance must be > 0"):
        apply(backend.module(method), "solve", inst.arrays(backend), tolerance=-1.0)
