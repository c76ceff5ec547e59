"""Benchmarks run on one CPU thread: torch ``set_num_threads(1)`` around each module, and XLA's
CPU pool of one (started so by the suite's root conftest, ``crfbench.environment.set_threads``).
The default two threads stall for hundreds of ms on a loaded 2-core machine.

JAX programs are timed fully optimised: the suite's ``jax_disable_most_optimizations`` (set in
``tests/conftest.py`` to save compile time) is lifted around each benchmark module. Under it the
jitted losses of ``test_nll_speed.py`` ran 3-5x slower."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", autouse=True)
def optimised_jax():
    """Compile this module's JAX programs with every optimisation (the suite's root conftest drops
    JAX's compiled programs after each module, so none compiled otherwise is reused)."""
    try:
        import jax
    except ImportError:
        yield
        return
    lowered = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    yield
    jax.config.update("jax_disable_most_optimizations", lowered)
