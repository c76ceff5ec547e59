"""The exact CRF against the PyTorch CRF libraries people compare with, and thread scaling.

``PeerCRF`` times the training loss forward + backward at the issue's reference point B=64, N=50,
T=17 (shared transitions, start/end scores, full lengths): ours in torch and JAX, pytorch-crf 0.7.2
and torch-struct 0.5 (the ``peers`` extra; skipped when absent). ``Threads`` is the one place where
the CPU thread count is a parameter.
"""

from __future__ import annotations

import importlib
import os

import torch

from implementations import peers

from .common import DEVICES, GRID, operation, random_scores, skip_unless_fits, use_device

BATCH, LENGTH, NUM_TAGS = 64, 50, 17
IMPLEMENTATIONS = ("crf", "crf-scan", "crf (jax)", "pytorch-crf", "torch-struct")


def _peer_step(name: str, scores):
    """Loss forward + backward of a peer library on contract ``scores`` (torch)."""
    emissions, transitions, lengths, tags, start, end = scores
    emissions = emissions.clone().requires_grad_()
    wait = torch.cuda.synchronize if emissions.is_cuda else lambda: None
    if name == "pytorch-crf":
        optional_import("torchcrf")
        crf = peers.to_pytorch_crf(transitions, start, end)
        mask = peers.pytorch_crf_mask(lengths, LENGTH)
        leaves = (emissions, *crf.parameters())

        def loss():
            return -crf(emissions, tags, mask=mask, reduction="none")
    else:
        torch_struct = optional_import("torch_struct")
        transitions, start, end = (x.clone().requires_grad_() for x in (transitions, start, end))
        parts = torch_struct.LinearChainCRF.struct.to_parts(tags, NUM_TAGS, lengths=lengths).to(
            emissions.dtype
        )
        leaves = (emissions, transitions, start, end)

        def loss():
            potentials = peers.to_torch_struct(emissions, transitions, lengths, start, end)
            return -torch_struct.LinearChainCRF(potentials, lengths=lengths).log_prob(parts)

    def step():
        loss().sum().backward()
        for leaf in leaves:
            leaf.grad = None
        wait()

    return step


def optional_import(module: str):
    """Import an optional peer library, or skip the combination when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise NotImplementedError(f"{module} is not installed (pip install 'crfbench[peers]')") from error


class PeerCRF:
    """Exact CRF negative log-likelihood, forward + backward, at B=64, N=50, T=17."""

    params = (IMPLEMENTATIONS, DEVICES)
    param_names = ("implementation", "device")
    repeat = GRID.repeat
    rounds = GRID.rounds
    warmup_time = 0.0

    def setup(self, implementation: str, device: str) -> None:
        backend = "jax" if implementation.endswith("(jax)") else "torch"
        use_device(backend, device)
        scores = random_scores(backend, device, BATCH, LENGTH, NUM_TAGS, shared=True)
        if implementation in ("pytorch-crf", "torch-struct"):
            self.call = _peer_step(implementation, scores)
        else:
            self.call = operation(backend, implementation.removesuffix(" (jax)"), "loss_and_grad", scores)
        self.call()

    def time_loss_and_grad(self, implementation: str, device: str) -> None:
        self.call()


class Threads:
    """Torch marginals on 1, 2, ... CPU threads at a mid-size point of the grid (torch only: XLA's
    thread pool is fixed when JAX starts)."""

    params = (("crf", "bcrf-10", "meanfield-10"), tuple(sorted({1, 2, os.cpu_count() or 1})))
    param_names = ("method", "threads")
    repeat = GRID.repeat
    rounds = GRID.rounds
    warmup_time = 0.0
    batch, length, num_tags = (
        GRID.batch[-1],
        GRID.lengths[len(GRID.lengths) // 2],
        GRID.num_tags[len(GRID.num_tags) // 2],
    )

    def setup(self, method: str, threads: int) -> None:
        use_device("torch", "cpu", threads=threads)
        skip_unless_fits(method, "cpu", self.batch, self.length, self.num_tags)
        self.call = operation(
            "torch",
            method,
            "marginals",
            random_scores("torch", "cpu", self.batch, self.length, self.num_tags),
        )
        self.call()

    def time_marginals(self, method: str, threads: int) -> None:
        self.call()
