"""Benchmark, not a test: training-loss forward + backward at B=64, N=50, T=17 on one CPU thread.

Exact CRF NLL for ``crf``, ``crf-scan``, pytorch-crf 0.7.2 and torch-struct 0.5, and the BCRF
(10 iterations) and mean-field (10 iterations) losses, all on the same float32 scores (shared
transitions, start/end scores, lengths 25..50; BCRF in its default scaling form and in the log
form), in torch and in jitted JAX
(``jax.value_and_grad``, compiled in a warm-up call before timing, outputs awaited with
``block_until_ready``). In the normal test run (``--benchmark-disable``) each body runs once as
a smoke check; time it with::

    python -m pytest tests/benchmarks -n 0 --benchmark-enable --benchmark-only \
        --benchmark-columns=median,iqr,rounds

One thread: see ``conftest.py``.
"""

from __future__ import annotations

import pytest
import torch

import implementations
from implementations import peers

BATCH, LENGTH, NUM_TAGS = 64, 50, 17


@pytest.fixture(scope="module")
def scores():
    generator = torch.Generator().manual_seed(0)
    emissions = torch.randn(BATCH, LENGTH, NUM_TAGS, generator=generator).requires_grad_()
    transitions = torch.randn(NUM_TAGS, NUM_TAGS, generator=generator).requires_grad_()
    start = torch.randn(NUM_TAGS, generator=generator).requires_grad_()
    end = torch.randn(NUM_TAGS, generator=generator).requires_grad_()
    lengths = torch.randint(LENGTH // 2, LENGTH + 1, (BATCH,), generator=generator)
    lengths[0] = LENGTH
    tags = torch.randint(0, NUM_TAGS, (BATCH, LENGTH), generator=generator)
    return emissions, transitions, lengths, tags, start, end


def _forward_backward(loss_fn, leaves):
    def run():
        loss_fn().sum().backward()
        for leaf in leaves:
            leaf.grad = None

    return run


def _record(benchmark, name):
    benchmark.group = f"nll forward+backward B={BATCH} N={LENGTH} T={NUM_TAGS}"
    benchmark.extra_info.update(implementation=name, threads=torch.get_num_threads())


def _label(method: str, options: dict) -> str:
    return f"{method} ({options['form']} form)" if "form" in options else method


METHODS = pytest.mark.parametrize(
    ("method", "options"),
    [
        ("crf", {}),
        ("crf-scan", {}),
        ("bcrf", {"iterations": 10}),
        ("bcrf", {"iterations": 10, "form": "log"}),
        ("meanfield", {"iterations": 10}),
    ],
    ids=["crf", "crf-scan", "bcrf-10", "bcrf-10-log", "meanfield-10"],
)


@METHODS
def test_ours(benchmark, scores, method, options):
    emissions, transitions, lengths, tags, start, end = scores
    loss = implementations.get(method, "torch").loss
    _record(benchmark, _label(method, options))
    benchmark(
        _forward_backward(
            lambda: loss(emissions, transitions, lengths, tags, start=start, end=end, **options),
            (emissions, transitions, start, end),
        )
    )


def test_pytorch_crf(benchmark, scores):
    pytest.importorskip("torchcrf")
    emissions, transitions, lengths, tags, start, end = scores
    crf = peers.to_pytorch_crf(transitions.detach(), start.detach(), end.detach())
    mask = peers.pytorch_crf_mask(lengths, LENGTH)
    _record(benchmark, "pytorch-crf 0.7.2")
    benchmark(
        _forward_backward(
            lambda: -crf(emissions, tags, mask=mask, reduction="none"), (emissions, *crf.parameters())
        )
    )


def test_torch_struct(benchmark, scores):
    torch_struct = pytest.importorskip("torch_struct")
    emissions, transitions, lengths, tags, start, end = scores
    parts = torch_struct.LinearChainCRF.struct.to_parts(tags, NUM_TAGS, lengths=lengths).to(emissions.dtype)

    def nll():
        potentials = peers.to_torch_struct(emissions, transitions, lengths, start, end)
        return -torch_struct.LinearChainCRF(potentials, lengths=lengths).log_prob(parts)

    _record(benchmark, "torch-struct 0.5")
    benchmark(_forward_backward(nll, (emissions, transitions, start, end)))


@METHODS
def test_ours_jax(benchmark, scores, method, options):
    jax = pytest.importorskip("jax")
    from implementations.interop import from_numpy, to_numpy

    emissions, transitions, lengths, tags, start, end = (
        from_numpy(to_numpy(x), "jax", "float32" if x.is_floating_point() else "int32") for x in scores
    )
    loss = implementations.get(method, "jax").loss

    def total(emissions, transitions, start, end):
        value = loss(emissions, transitions, lengths, tags, start=start, end=end, validate=False, **options)
        return value.sum()

    step = jax.jit(jax.value_and_grad(total, argnums=(0, 1, 2, 3)))
    jax.block_until_ready(step(emissions, transitions, start, end))  # compile outside the timing
    _record(benchmark, f"{_label(method, options)} (jax, jit)")
    benchmark(lambda: jax.block_until_ready(step(emissions, transitions, start, end)))
