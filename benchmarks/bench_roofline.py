"""Roofline reference: the machine's streaming memory bandwidth (a large array updated in place), and
the bandwidth BCRF's iterative Bregman projections achieve, so a report can say how close IBP is to
the hardware limit.

An IBP iteration is two projections. In the log form each must at least read and write every arc
(B, N-1, T, T) in float32: 16 bytes per arc per iteration; the scaling form (BCRF's default) only
reads the kernel of every arc group once per projection, as two batched matrix–vector products,
and writes O(N T) scalings: 8 bytes per arc per iteration; the C sweep on the CPU (large
per-position kernels, ``implementations/_sweep.c``, in torch and in JAX) reads each arc block once
an iteration for both projections: 4 bytes. The benchmark's transitions are per position, as the
paper's models' (with shared ones the scaling form's kernel is one (T, T) matrix and no arc is read
at all). The count is that of the form the benchmark runs (the registry's default, or the sweep
where it ran: :func:`form_run`), tracked beside the bandwidth (``track_ibp_bytes_per_arc``), so
that a report can turn either back into seconds an iteration: a form that reads less shows a
lower share of the bandwidth at a shorter time. Its time is measured as the difference between 50
and 10 iterations of ``marginals``, divided by 40 (:data:`ITERATIONS`), which leaves out the
set-up and read-off that do not repeat. For the sweep it leaves out a call's first pass over the
arcs too: the sweep takes a sequence's iterations together, so that where a sequence's kernel fits
the cache (16.7 MB at N = 256, T = 128, in a 32 MB L3) its later iterations read from there, and
its rate can pass the memory's.

IBP's traffic is almost all reads, and one thread reads markedly slower than it streams (read
plus written), so ``track_read_bandwidth`` (a large sum) gives the bound that a read-bound kernel
can reach; the report shows IBP's share of both.

Everything runs on one thread, the streaming passes included (:func:`common.use_device`): a pass
on more threads than the timed kernels would put the roofline at a multiple of what one thread
can reach.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from crfbench.timing import best_seconds
from implementations import registry

from .common import (
    DEVICES,
    GRID,
    jax,
    operation,
    random_scores,
    skip_unless_fits,
    to_device,
    use_device,
)

BACKENDS = ("torch", "jax")
STREAM_ELEMENTS = {"cpu": 2**26, "gpu": 2**28}  # 256 MiB and 1 GiB of float32: well past every cache
#: Least traffic per arc and iteration of each IBP form: two projections, each reading (and in the
#: log form writing) a float32; the sweep reads it once for both.
BYTES_PER_ARC_ITERATION = {"log": 2 * 2 * 4, "scaling": 2 * 4, "sweep": 4}
FORM = registry.BCRF.default("form", "marginals")  # the form ``bcrf-10`` runs
#: The two iteration counts whose times' difference is IBP's: 40 iterations apart, so that the
#: jitter of the set-up and read-off (which both times contain) weighs little against the
#: difference (docs/benchmarks.md, "Why the benchmarks are shaped so").
ITERATIONS = (10, 50)


def form_run(backend: str, call: Callable[[], Any]) -> str:
    """The IBP form ``call`` runs: :data:`FORM`, or ``"sweep"`` where the backend's C sweep
    iterated it (seen by wrapping the sweep for the one call: torch's as it runs, JAX's as ``call``
    traces, after jit's caches are cleared; JAX's program picks XLA's iterations in the sweep's
    place only where the linear state cannot start or underflows, never on the benchmark's
    scores)."""
    if backend == "torch":
        from implementations.torch_backend import _sweep
    else:
        from implementations.jax_backend import _sweep

        jax.clear_caches()

    ran, iterations = [], _sweep.iterations
    _sweep.iterations = lambda *args: ran.append(True) or iterations(*args)
    try:
        call()
    finally:
        _sweep.iterations = iterations
    return "sweep" if ran else FORM


def _torch_call(source: torch.Tensor, operation: Callable[[torch.Tensor], Any]):
    """A call of ``operation`` on ``source`` that returns once it is done (CUDA synchronised)."""
    wait = torch.cuda.synchronize if source.is_cuda else lambda: None
    return lambda: (operation(source), wait())


def _stream_call(backend: str, device: str):
    """A call that streams a large array once, reading and writing every element in place
    (``add_`` in torch; ``x + 1`` under ``jit`` with the input donated in JAX, since a fresh output
    buffer would time page faults, not memory)."""
    source = to_device(np.zeros(STREAM_ELEMENTS[device], dtype=np.float32), backend, device)
    if backend == "torch":
        return _torch_call(source, lambda x: x.add_(1.0))
    stream = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    state = [source]

    def call():
        state[0] = jax.block_until_ready(stream(state[0]))

    return call


def _read_call(backend: str, device: str):
    """A call that reads a large array once (its sum): the bound of a kernel that, as IBP's
    products, reads far more than it writes. The array is written first (ones): ``np.zeros``'s
    untouched pages would all map to the kernel's one zero page and be read from cache."""
    source = to_device(np.ones(STREAM_ELEMENTS[device], dtype=np.float32), backend, device)
    if backend == "torch":
        return _torch_call(source, torch.sum)
    total = jax.jit(jax.numpy.sum)
    return lambda: jax.block_until_ready(total(source))


def _gigabytes_per_second(call: Callable[[], Any], bytes_moved: int) -> float:
    """``bytes_moved`` over the fastest of 5 timed calls (after one untimed call), in GB/s."""
    call()
    return bytes_moved / best_seconds(call) / 1e9


def read_bandwidth(backend: str, device: str) -> float:
    """Read bandwidth in GB/s: bytes read over the fastest of 5 passes."""
    return _gigabytes_per_second(_read_call(backend, device), 4 * STREAM_ELEMENTS[device])


def stream_bandwidth(backend: str, device: str) -> float:
    """Streaming bandwidth in GB/s: bytes read plus bytes written over the fastest of 5 passes."""
    return _gigabytes_per_second(_stream_call(backend, device), 2 * 4 * STREAM_ELEMENTS[device])


def machine_bandwidth(device: str) -> float:
    """The roofline: the faster backend's streaming bandwidth on ``device``."""
    return max(stream_bandwidth(backend, device) for backend in BACKENDS)


class MemoryBandwidth:
    """The machine's memory bandwidth through each backend: streaming (a large in-place pass) and
    reading (a large sum)."""

    params = (BACKENDS, DEVICES)
    param_names = ("backend", "device")
    repeat = GRID.repeat
    rounds = GRID.rounds

    def setup(self, backend: str, device: str) -> None:
        use_device(backend, device)
        self.call = _stream_call(backend, device)
        self.call()

    def time_stream(self, backend: str, device: str) -> None:
        self.call()

    def track_stream_bandwidth(self, backend: str, device: str) -> float:
        return stream_bandwidth(backend, device)

    track_stream_bandwidth.unit = "GB/s"

    def track_read_bandwidth(self, backend: str, device: str) -> float:
        return read_bandwidth(backend, device)

    track_read_bandwidth.unit = "GB/s"


def _fastest_alternated(*calls: Callable[[], Any], rounds: int = 9) -> list[float]:
    """The fastest of ``rounds`` timed calls of each of ``calls``, taken in turn, so that a slow
    spell meets them alike: IBP's rate is the difference of two such times, which blocks of one
    call each would skew (docs/benchmarks.md, "Why the benchmarks are shaped so")."""
    fastest = [math.inf] * len(calls)
    for _ in range(rounds):
        for k, call in enumerate(calls):
            fastest[k] = min(fastest[k], best_seconds(call, repeats=1))
    return fastest


class IBPBandwidth:
    """Bandwidth IBP achieves (minimum bytes per iteration over time per iteration), and its fraction of
    the machine's streaming bandwidth (the faster backend's, measured in the same process)."""

    params = (BACKENDS, DEVICES, GRID.lengths, GRID.num_tags, GRID.batch)
    param_names = ("backend", "device", "N", "T", "B")
    timeout = 600.0

    def setup(self, backend: str, device: str, length: int, num_tags: int, batch: int) -> None:
        use_device(backend, device)
        skip_unless_fits("bcrf-10", device, batch, length, num_tags)
        scores = random_scores(backend, device, batch, length, num_tags)
        self.fewer, self.more = (
            operation(backend, "bcrf-10", "marginals", scores, iterations=iterations)
            for iterations in ITERATIONS
        )
        self.fewer()
        self.bytes_per_arc = BYTES_PER_ARC_ITERATION[form_run(backend, self.more)]
        self.arcs = batch * max(length - 1, 0) * num_tags**2

    def _ibp_bandwidth(self) -> float:
        fewer, more = _fastest_alternated(self.fewer, self.more)
        seconds_per_iteration = (more - fewer) / (ITERATIONS[1] - ITERATIONS[0])
        if seconds_per_iteration <= 0:  # below timer resolution: no meaningful rate
            return float("nan")
        return self.bytes_per_arc * self.arcs / seconds_per_iteration / 1e9

    def track_ibp_bandwidth(self, backend: str, device: str, length: int, num_tags: int, batch: int) -> float:
        return self._ibp_bandwidth()

    track_ibp_bandwidth.unit = "GB/s"

    def track_ibp_bytes_per_arc(
        self, backend: str, device: str, length: int, num_tags: int, batch: int
    ) -> float:
        """The traffic :meth:`track_ibp_bandwidth` counts an arc and iteration (of the form run)."""
        return float(self.bytes_per_arc)

    track_ibp_bytes_per_arc.unit = "bytes per arc and iteration"

    def track_ibp_roofline_fraction(self, backend: str, device: str, length: int, num_tags: int, batch: int):
        return self._ibp_bandwidth() / machine_bandwidth(device)

    track_ibp_roofline_fraction.unit = "fraction of streaming bandwidth"
