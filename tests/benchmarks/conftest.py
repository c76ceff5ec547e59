"""Benchmarks run on one CPU thread: torch ``set_num_threads(1)`` around each module, and XLA's
intra-op pool of one (set here, before JAX creates its CPU backend, when the benchmarks run on
their own). The default two threads stall for hundreds of ms on a loaded 2-core machine."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
