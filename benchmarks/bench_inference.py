"""Scaling of every method and backend in sequence length N and tag-set size T: time and peak
memory of marginals, decoding and the training loss with its gradient.

One class per operation, so ``setup`` compiles only what is timed. Each is timed in each ``mode``:
torch ``eager`` (an operator launched at a time: on a GPU mostly launches) or ``compiled``
(``torch.compile`` for the fixed shapes on a CPU, a CUDA graph captured once on a GPU); JAX is
always jitted, its one mode ``compiled``. Combinations whose biggest intermediate array exceeds the
profile's per-device cap, GPU combinations without a GPU, JAX eager, SparseMAP compiled and the
variants a profile does not compile are skipped (``NotImplementedError`` in ``setup``).
"""

from __future__ import annotations

import itertools

import torch

from .common import (
    DEVICES,
    GRID,
    MODES,
    OPERATIONS,
    VARIANTS,
    jax,
    operation,
    operator_counts,
    random_scores,
    skip_unless_fits,
    skip_unless_timed,
    use_device,
)

BACKENDS = ("torch", "jax")


class _Scaling:
    """Times ``operation_name`` on random scores of shape (B, N, T) with per-position transitions,
    in ``mode`` (the last parameter, so that results from before it existed, all eager, keep their
    parameters' order)."""

    operation_name = ""
    params = (BACKENDS, tuple(VARIANTS), GRID.lengths, GRID.num_tags, GRID.batch, DEVICES, MODES)
    param_names = ("backend", "method", "N", "T", "B", "device", "mode")
    repeat = GRID.repeat
    rounds = GRID.rounds
    warmup_time = 0.0  # setup already ran the call once (compilation, allocator warm-up)
    timeout = 600.0

    def setup(
        self, backend: str, method: str, length: int, num_tags: int, batch: int, device: str, mode: str
    ) -> None:
        use_device(backend, device)
        skip_unless_timed(backend, method, mode)
        skip_unless_fits(method, device, batch, length, num_tags)
        scores = random_scores(backend, device, batch, length, num_tags)
        self.call = operation(backend, method, self.operation_name, scores, mode=mode)
        self.call()


class Marginals(_Scaling):
    operation_name = "marginals"

    def time_marginals(self, *params) -> None:
        self.call()

    def peakmem_marginals(self, *params) -> None:
        self.call()


class Decode(_Scaling):
    operation_name = "decode"

    def time_decode(self, *params) -> None:
        self.call()


class LossAndGrad(_Scaling):
    operation_name = "loss_and_grad"

    def time_loss_and_grad(self, *params) -> None:
        self.call()

    def peakmem_loss_and_grad(self, *params) -> None:
        self.call()


class Operators:
    """Torch operators that compute, and host synchronisations, in one call at B=8, T=8
    (:class:`OperatorCount`): on a GPU, the kernel launches and queue drains that bound a step over
    short sequences. Counted on the CPU, so the same on every machine; the operators grow with N
    for the sequential forward algorithm and not for IBP's or mean field's fixed iterations, which
    is where their GPU crossover comes from. Every count is taken once, in ``setup_cache``."""

    params = (("crf", "crf-scan", "bcrf-10", "meanfield-10"), GRID.lengths, OPERATIONS)
    param_names = ("method", "N", "operation")
    timeout = 600.0

    def setup_cache(self) -> dict[tuple[str, int, str], tuple[int, int]]:
        use_device("torch", "cpu")
        return {
            (method, length, name): operator_counts(method, name, random_scores("torch", "cpu", 8, length, 8))
            for method, length, name in itertools.product(*self.params)
        }

    def track_operators(self, counts, method: str, length: int, name: str) -> int:
        return counts[method, length, name][0]

    track_operators.unit = "operators"

    def track_host_syncs(self, counts, method: str, length: int, name: str) -> int:
        return counts[method, length, name][1]

    track_host_syncs.unit = "synchronisations"


class GpuMemory:
    """Peak GPU memory (bytes) of one marginals call and one loss-and-gradient step; GPU only."""

    params = (
        BACKENDS,
        tuple(VARIANTS),
        GRID.lengths,
        GRID.num_tags,
        GRID.batch,
        ("marginals", "loss_and_grad"),
    )
    param_names = ("backend", "method", "N", "T", "B", "operation")
    unit = "bytes"
    timeout = 600.0

    def setup(self, backend: str, method: str, length: int, num_tags: int, batch: int, name: str) -> None:
        use_device(backend, "gpu")
        skip_unless_fits(method, "gpu", batch, length, num_tags)
        self.scores = random_scores(backend, "gpu", batch, length, num_tags)

    def track_gpu_peak_memory(
        self, backend: str, method: str, length: int, num_tags: int, batch: int, name: str
    ):
        call = operation(backend, method, name, self.scores)
        if backend == "torch":
            torch.cuda.reset_peak_memory_stats()
            call()
            return torch.cuda.max_memory_allocated()
        call()  # JAX keeps no resettable peak: each combination runs in its own process
        return jax.devices("gpu")[0].memory_stats()["peak_bytes_in_use"]
