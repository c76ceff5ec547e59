"""Benchmarks, not tests: the hot kernels on one CPU thread, so regressions show in a developer's loop.

* IBP half-step: one KL projection onto one parity of clusters of a (B, N-1, T, T) arc tensor,
  B=64, N=50, in the log form (``kernels.bcrf_log_form._project``) and in the scaling form
  (``bcrf.scaling._scaling_projection``, from its initial state, built outside the timing), the latter
  with per-position transitions (a kernel per arc group) and shared ones (one (T, T) kernel);
* forward step: one filtering step of the sequential exact CRF (``_chain.forward_step``), B=64.

Both at T=17 (the UD POS tag set) and T=128, in torch and jitted JAX (compiled before timing,
outputs awaited). In the normal test run (``--benchmark-disable``) each body runs once as a smoke
check; time them with::

    python -m pytest tests/benchmarks/test_kernels.py -n 0 --benchmark-enable --benchmark-only \
        --benchmark-columns=median,iqr,rounds

The asv suite (``benchmarks/``) times whole methods over the N x T grid.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from implementations.interop import from_numpy

BATCH, LENGTH = 64, 50
TAGS = pytest.mark.parametrize("num_tags", [17, 128])


def _arrays(backend: str, *shapes: tuple[int, ...]):
    generator = np.random.default_rng(0)
    return [from_numpy(generator.standard_normal(shape).astype(np.float32), backend) for shape in shapes]


def _ibp_inputs(backend: str, num_tags: int):
    (log_q,) = _arrays(backend, (BATCH, LENGTH - 1, num_tags, num_tags))
    lengths = from_numpy(np.full(BATCH, LENGTH, dtype=np.int32), backend)
    return log_q, lengths


@TAGS
def test_ibp_half_step_torch(benchmark, num_tags):
    from implementations.kernels.bcrf_log_form import _project

    log_q, lengths = _ibp_inputs("torch", num_tags)
    benchmark.group = f"IBP half-step B={BATCH} N={LENGTH} T={num_tags}"
    result = benchmark(_project, log_q, lengths, 2)
    assert result.shape == log_q.shape


@TAGS
def test_ibp_half_step_jax(benchmark, num_tags):
    jax = pytest.importorskip("jax")
    from implementations.kernels.bcrf_log_form import _project

    log_q, lengths = _ibp_inputs("jax", num_tags)
    project = jax.jit(_project, static_argnums=2)
    jax.block_until_ready(project(log_q, lengths, 2))  # compile outside the timing
    benchmark.group = f"IBP half-step B={BATCH} N={LENGTH} T={num_tags}"
    result = benchmark(lambda: jax.block_until_ready(project(log_q, lengths, 2)))
    assert result.shape == log_q.shape


@TAGS
@pytest.mark.parametrize("transitions", ["per-arc", "shared"])
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_ibp_scaling_half_step(benchmark, backend, transitions, num_tags):
    if backend == "jax":
        jax = pytest.importorskip("jax")
        from implementations.jax_backend import bcrf
        from implementations.jax_backend._scores import ArcTerms
    else:
        from implementations.torch_backend import bcrf
        from implementations.torch_backend._scores import ArcTerms
    log_q, lengths = _ibp_inputs(backend, num_tags)
    (rows, columns) = _arrays(backend, (BATCH, LENGTH - 1, num_tags), (BATCH, LENGTH - 1, num_tags))
    pairs = log_q if transitions == "per-arc" else log_q[0, 0]
    terms = ArcTerms(pairs, rows, columns, rows[:, 0])
    if backend == "jax":  # one program each, the kernel an argument (not a constant folded in)
        kernel, state = jax.jit(bcrf.scaling._scaled_initial, static_argnums=2)(terms, lengths, 1.0)
        jitted = partial(
            jax.jit(lambda k, s: bcrf.scaling._scaling_projection(k, lengths, LENGTH - 1, 2)(s)), kernel
        )
        jax.block_until_ready(jitted(state))
        call = lambda: jax.block_until_ready(jitted(state))  # noqa: E731
    else:
        kernel, state = bcrf.scaling._scaled_initial(terms, lengths, 1.0)
        project = bcrf.scaling._scaling_projection(kernel, lengths, LENGTH - 1, 2)
        call = lambda: project(state)  # noqa: E731
    benchmark.group = f"IBP half-step B={BATCH} N={LENGTH} T={num_tags}"
    result = benchmark(call)
    assert [x.shape for x in result] == [x.shape for x in state]


def _step_inputs(backend: str, num_tags: int):
    alpha, transition, emission = _arrays(
        backend, (BATCH, num_tags), (BATCH, num_tags, num_tags), (BATCH, num_tags)
    )
    active = from_numpy(np.ones((BATCH, 1), dtype=bool), backend)
    return alpha, transition, emission, active


@TAGS
def test_forward_step_torch(benchmark, num_tags):
    from implementations.torch_backend._chain import forward_step

    inputs = _step_inputs("torch", num_tags)
    benchmark.group = f"forward step B={BATCH} T={num_tags}"
    alpha, weight, _ = benchmark(forward_step, *inputs)
    assert alpha.shape == (BATCH, num_tags) and weight.shape == (BATCH, num_tags, num_tags)


@TAGS
def test_forward_step_jax(benchmark, num_tags):
    jax = pytest.importorskip("jax")
    from implementations.jax_backend._chain import forward_step

    inputs = _step_inputs("jax", num_tags)
    step = jax.jit(forward_step)
    jax.block_until_ready(step(*inputs))
    benchmark.group = f"forward step B={BATCH} T={num_tags}"
    alpha, weight, _ = benchmark(lambda: jax.block_until_ready(step(*inputs)))
    assert alpha.shape == (BATCH, num_tags) and weight.shape == (BATCH, num_tags, num_tags)
