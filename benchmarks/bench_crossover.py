"""Where BCRF overtakes the exact CRF: the training step (loss, forward and backward) and decoding,
compiled, of BCRF-5 and BCRF-10 and of the baselines they must beat (sequential ``crf``, the
parallel scan ``crf-scan`` and pytorch-crf, the implementation most papers compare with), over the
crossover grid of the profile (``Grid.crossover``: B, N, and T at the paper's tag-set sizes).

Our methods run compiled: torch under ``torch.compile`` for the fixed shapes on a CPU and captured
once as a CUDA graph on a GPU (``crfbench.capture``), JAX jitted. pytorch-crf is torch only and
eager only (its Viterbi backtraces on the host), timed as people run it. Every method scores one
shared (T, T) transition matrix with start and end scores, the one form pytorch-crf has (a tagger's
CRF layer). The report draws BCRF's speed-up over each baseline against N and tabulates the
crossover N (``crfbench.report.crossover``).
"""

from __future__ import annotations

from typing import Any

import torch

from crfbench.uses import PYTORCH_CRF
from implementations import peers

from .bench_peers import optional_import
from .common import (
    DEVICES,
    GRID,
    TimingBatch,
    operation,
    random_scores,
    skip_unless_fits,
    skip_unless_timed,
    use_device,
)

BACKENDS = ("torch", "jax")
#: The timed operations: the training step and decoding.
CROSSOVER_OPERATIONS = ("loss_and_grad", "decode")


def pytorch_crf_call(name: str, scores: TimingBatch) -> Any:
    """pytorch-crf's loss forward + backward (w.r.t. the emissions and its parameters) or Viterbi
    on ``scores`` (torch, shared transitions), as a no-argument call that waits for the device."""
    optional_import("torchcrf")
    emissions, transitions, lengths, tags, start, end = scores
    crf = peers.to_pytorch_crf(transitions, start, end)
    mask = peers.pytorch_crf_mask(lengths, emissions.shape[1])
    wait = torch.cuda.synchronize if emissions.is_cuda else lambda: None
    if name == "decode":

        def decode() -> list[list[int]]:
            with torch.no_grad():
                return crf.decode(emissions, mask=mask)  # on the host: no wait needed

        return decode
    emissions = emissions.clone().requires_grad_()
    leaves = (emissions, *crf.parameters())

    def step() -> torch.Tensor:
        for leaf in leaves:
            leaf.grad = None
        total = -crf(emissions, tags, mask=mask, reduction="sum")
        total.backward()
        wait()
        return total.detach()

    return step


class Crossover:
    """Times ``operation`` (training step or decoding) of a crossover method, compiled (pytorch-crf:
    eager), on random scores of shape (B, N, T) with shared transitions."""

    params = (
        BACKENDS,
        GRID.crossover.methods,
        CROSSOVER_OPERATIONS,
        GRID.crossover.lengths,
        GRID.crossover.num_tags,
        GRID.crossover.batch,
        DEVICES,
    )
    param_names = ("backend", "method", "operation", "N", "T", "B", "device")
    repeat = GRID.repeat
    rounds = GRID.rounds
    warmup_time = 0.0  # setup already ran the call once (compilation, allocator warm-up)
    timeout = 600.0

    def setup(
        self, backend: str, method: str, name: str, length: int, num_tags: int, batch: int, device: str
    ) -> None:
        if method == PYTORCH_CRF and backend != "torch":
            raise NotImplementedError("pytorch-crf is a torch library")
        use_device(backend, device)
        if method != PYTORCH_CRF:
            skip_unless_timed(backend, method, "compiled", profile=False)
        # pytorch-crf's biggest array is the exact CRF's (B, T, T) a step at most: crf's bound holds
        skip_unless_fits("crf" if method == PYTORCH_CRF else method, device, batch, length, num_tags)
        scores = random_scores(backend, device, batch, length, num_tags, shared=True)
        if method == PYTORCH_CRF:
            self.call = pytorch_crf_call(name, scores)
        else:
            self.call = operation(backend, method, name, scores, mode="compiled")
        self.call()

    def time_crossover(
        self, backend: str, method: str, name: str, length: int, num_tags: int, batch: int, device: str
    ) -> None:
        self.call()
