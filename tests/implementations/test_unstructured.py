"""The unstructured baseline: closed forms, and the ``repair`` decoder against enumeration.

Every test that calls a backend runs against each of them (``backend`` fixture)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from implementations.reference import brute_force
from implementations.reference import unstructured as ref

from . import backends
from .backends import Backend
from .instances import (
    Instance,
    all_lengths_instance,
    instances,
    make_instance,
    npy,
    path_is_valid,
    random_allowed,
)


def args(inst: Instance, backend: Backend) -> tuple[tuple[Any, ...], dict[str, Any]]:
    t = inst.arrays(backend)
    return (t["emissions"], t["transitions"], t["lengths"]), {"start": t["start"], "end": t["end"]}


@backends.given(inst=instances(max_len=7, max_tags=5))
def test_closed_forms(backend: Backend, inst: Instance) -> None:
    """Per-token softmax, outer products, argmax, summed token cross-entropy, partial CE,
    Σ logsumexp -- with -inf emissions giving exact zeros."""
    allowed = random_allowed(np.random.default_rng(0), inst)
    (unary, pairwise), decoded, loss, partial, log_part = backend.calls(
        "unstructured",
        inst.arrays(backend),
        ("marginals", (), {}),
        ("decode", (), {}),
        ("loss", (inst.gold_array(backend),), {}),
        ("partial_loss", (backend.array(allowed),), {}),
        ("log_partition", (), {}),
    )
    unary, pairwise, decoded, loss, partial, log_part = map(
        npy, (unary, pairwise, decoded, loss, partial, log_part)
    )
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        em = inst.emissions[b, :n]
        ref_u, ref_p = ref.marginals(em)
        np.testing.assert_allclose(unary[b, :n], ref_u, rtol=0, atol=1e-14)
        np.testing.assert_allclose(pairwise[b, : n - 1], ref_p, rtol=0, atol=1e-14)
        assert (unary[b, :n][np.isneginf(em)] == 0).all()
        np.testing.assert_allclose(ref_u[np.arange(n), decoded[b, :n]], ref_u.max(1), rtol=0, atol=1e-12)
        assert loss[b] == pytest.approx(ref.loss(em, inst.gold[b, :n]), rel=1e-12, abs=1e-12)
        assert partial[b] == pytest.approx(ref.partial_loss(em, allowed[b, :n]), rel=1e-12, abs=1e-12)
        assert log_part[b] == pytest.approx(ref.log_partition(em), rel=1e-12, abs=1e-12)


def test_transitions_and_boundaries_are_unused(backend: Backend) -> None:
    """Changing finite transition/start/end values changes nothing (without repair)."""
    un = backend.module("unstructured")
    rng = np.random.default_rng(70)
    inst = make_instance(rng, batch=4, length=6, num_tags=4, neg_inf=0.0)
    other = replace(
        inst,
        transitions=inst.transitions + rng.normal(size=inst.transitions.shape) * 5,
        start=rng.normal(size=4) * 5,
        end=rng.normal(size=4) * 5,
    )
    allowed = random_allowed(rng, inst)
    for fn in ("marginals", "decode", "loss", "partial_loss", "log_partition"):
        outs = []
        for x in (inst, other):
            a, kw = args(x, backend)
            extra = {"loss": (x.gold_array(backend),), "partial_loss": (backend.array(allowed),)}.get(fn, ())
            out = getattr(un, fn)(*a, *extra, **kw)
            outs.append([npy(o) for o in out] if isinstance(out, tuple) else [npy(out)])
        for x, y in zip(*outs, strict=True):
            np.testing.assert_array_equal(x, y, err_msg=fn)


@pytest.mark.parametrize("num_tags", [2, 3, 4])
@pytest.mark.parametrize("neg_inf", [0.3, 0.5])
def test_repair_is_best_valid_sequence(backend: Backend, num_tags: int, neg_inf: float) -> None:
    """``repair=True``: a valid sequence (no -inf transition/start/end/emission used) that
    maximises the sum of per-token log-marginals -- checked by enumeration, lengths 1..6."""
    un = backend.module("unstructured")
    inst = all_lengths_instance(71 + num_tags, num_tags, neg_inf=neg_inf, per_position=num_tags != 3)
    a, kw = args(inst, backend)
    repaired = npy(un.decode(*a, **kw, repair=True))
    plain = npy(un.decode(*a, **kw))
    np.testing.assert_array_equal(repaired[~inst.valid()], -1)
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        seq = inst.seq(b)
        path = repaired[b, :n]
        assert path_is_valid(inst, b, path)
        best, best_path, gap = ref.repair(**seq)
        log_u = np.log(ref.marginals(seq["emissions"])[0][np.arange(n), path])
        assert log_u.sum() == pytest.approx(best, rel=1e-12, abs=1e-12)
        if gap > 1e-9:
            np.testing.assert_array_equal(path, best_path)
        if path_is_valid(inst, b, plain[b, :n]):  # repair never changes an already valid argmax
            np.testing.assert_array_equal(path, plain[b, :n])


def test_repair_fixes_an_invalid_argmax(backend: Backend) -> None:
    """Token argmax 0 0 0 with 0 -> 0 forbidden: repair must change it, to the enumerated best."""
    un = backend.module("unstructured")
    em = np.array([[[2.0, 0.0], [3.0, 0.0], [2.5, 0.0]]])
    trans = np.array([[-np.inf, 0.0], [0.0, 0.0]])
    inst = Instance(em, trans, np.array([3]), None, None, np.array([[0, 1, 0]]))
    a, kw = args(inst, backend)
    plain = npy(un.decode(*a, **kw))[0]
    np.testing.assert_array_equal(plain, [0, 0, 0])
    repaired = npy(un.decode(*a, **kw, repair=True))[0]
    _, best_path, gap = ref.repair(**inst.seq(0))
    assert gap > 1e-3
    np.testing.assert_array_equal(repaired, best_path)
    np.testing.assert_array_equal(repaired, [0, 1, 0])


@pytest.mark.parametrize("length", [1, 2, 4])
def test_repair_respects_start_and_end(backend: Backend, length: int) -> None:
    """Token argmax is tag 0 everywhere but start and end forbid tag 0: repair must move the
    first and last tags (only), to the enumerated best valid sequence."""
    un = backend.module("unstructured")
    rng = np.random.default_rng(74 + length)
    em = rng.normal(size=(1, length, 3)) * 0.3
    em[0, :, 0] += 3.0
    trans = rng.normal(size=(3, 3))
    start = np.array([-np.inf, 0.5, -1.0])
    end = np.array([-np.inf, -2.0, 1.0])
    inst = Instance(em, trans, np.array([length]), start, end, np.full((1, length), 1))
    a, kw = args(inst, backend)
    np.testing.assert_array_equal(npy(un.decode(*a, **kw))[0], np.zeros(length, dtype=int))
    repaired = npy(un.decode(*a, **kw, repair=True))[0]
    assert path_is_valid(inst, 0, repaired)
    _, best_path, gap = ref.repair(**inst.seq(0))
    assert gap > 1e-6
    np.testing.assert_array_equal(repaired, best_path)


def test_repair_false_is_plain_argmax(backend: Backend) -> None:
    un = backend.module("unstructured")
    rng = np.random.default_rng(72)
    inst = make_instance(rng, batch=4, length=6, num_tags=4, neg_inf=0.4)
    a, kw = args(inst, backend)
    np.testing.assert_array_equal(npy(un.decode(*a, **kw, repair=False)), npy(un.decode(*a, **kw)))


def test_repair_oracle_self_check() -> None:
    """Oracle check: the reference repair never returns a path with a -inf step."""
    rng = np.random.default_rng(73)
    inst = make_instance(rng, batch=5, length=5, num_tags=3, neg_inf=0.5)
    for b in range(inst.batch):
        score, path, _ = ref.repair(**inst.seq(b))
        assert np.isfinite(score) and path_is_valid(inst, b, path)
        assert np.isfinite(brute_force.path_score(path, **inst.seq(b)))
