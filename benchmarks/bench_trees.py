"""Dependency-tree methods (``implementations.registry.DEPENDENCY_REGISTRY``): ``log Z``, the
training step (loss, forward and backward), the arc marginals and decoding, over the profile's
tree grid (``Grid.trees``: sentence lengths N and batch sizes B), in both backends, on the CPU and
the GPU.

The methods take arc scores (B, N+1, N+1), not the chain's (emissions, transitions), so they have
their own variants, random scores and calls here; the conventions are the chain suite's
(``common``): one CPU thread, JAX jitted and warmed up in ``setup``, each call waits for the
device. torch runs eagerly. Decoding (Chu-Liu-Edmonds) runs on the host in both backends: it is
timed with the copy of the scores it needs, and is never jitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

import implementations
from implementations.reference.dependency import random_tree

from .common import DEVICES, GRID, Variant, jax, to_device, use_device

BACKENDS = ("torch", "jax")
#: Every dependency-tree method as benchmarked, with its options (``common.VARIANTS``' form): a
#: new method is one line here.
TREE_VARIANTS = {
    "tree-crf": Variant("tree-crf", {}),
}
#: The timed functions: ``log Z``, the training step, the marginals and decoding.
TREE_OPERATIONS = ("log_partition", "loss_and_grad", "marginals", "decode")


class TreeBatch(NamedTuple):
    """A batch of random arc scores on one backend and device, every sentence of full length."""

    scores: Any  # (B, N+1, N+1) float32, scores[b, h, m] the arc h -> m, node 0 the root
    lengths: Any  # (B,) int, all N
    heads: Any  # (B, N+1) int, a random single-root gold tree, -1 at index 0


def random_heads(generator: np.random.Generator, batch: int, words: int) -> np.ndarray:
    """(B, N+1) heads of random single-root trees: words in a random order, the first on the
    root, each later one on a word before it (so no cycle and one root child)."""
    return np.stack([random_tree(generator, words) for _ in range(batch)]).astype(np.int32)


def random_trees(backend: str, device: str, batch: int, words: int, *, seed: int = 0) -> TreeBatch:
    """Standard normal arc scores and a random gold tree per sentence; the same numbers for every
    backend."""
    generator = np.random.default_rng(seed)
    arrays = [
        generator.standard_normal((batch, words + 1, words + 1), dtype=np.float32),
        np.full(batch, words, dtype=np.int32),
        random_heads(generator, batch, words),
    ]
    return TreeBatch(*(to_device(array, backend, device) for array in arrays))


def tree_operation(backend: str, variant: str, name: str, trees: TreeBatch) -> Callable[[], Any]:
    """A no-argument call of ``name`` (one of ``TREE_OPERATIONS``) on ``trees`` that returns once
    the result is ready; ``loss_and_grad`` returns ``(loss summed over the batch, its gradient
    w.r.t. the scores)`` in both backends. No input validation; no autograd graph but for
    ``loss_and_grad``. Jitted in JAX (but ``decode``, which runs on the host); call it once to
    compile."""
    method, options = TREE_VARIANTS[variant]
    module = implementations.get(method, backend)
    scores, lengths, heads = trees
    common = {"validate": False, **options}
    if backend == "torch":
        return _torch_tree_operation(module, name, trees, common)
    if name == "decode":
        return lambda: module.decode(scores, lengths, **common)
    if name == "loss_and_grad":

        def total(scores):
            return module.loss(scores, lengths, heads, **common).sum()

        step = jax.jit(jax.value_and_grad(total))
        return lambda: jax.block_until_ready(step(scores))
    function = jax.jit(lambda scores: getattr(module, name)(scores, lengths, **common))
    return lambda: jax.block_until_ready(function(scores))


def _torch_tree_operation(
    module: Any, name: str, trees: TreeBatch, common: dict[str, Any]
) -> Callable[[], Any]:
    """The torch call of :func:`tree_operation` (eager)."""
    scores, lengths, heads = trees
    wait = torch.cuda.synchronize if scores.is_cuda else lambda: None
    if name == "loss_and_grad":
        scores = scores.clone().requires_grad_()

        def step():
            scores.grad = None
            value = module.loss(scores, lengths, heads, **common).sum()
            value.backward()
            wait()
            return value.detach(), scores.grad

        return step
    function = getattr(module, name)

    def call():
        with torch.no_grad():
            result = function(scores, lengths, **common)
        wait()
        return result

    return call


class Trees:
    """Times ``operation`` of a dependency-tree method on random arc scores (B, N+1, N+1)."""

    params = (BACKENDS, tuple(TREE_VARIANTS), TREE_OPERATIONS, GRID.trees.lengths, GRID.trees.batch, DEVICES)
    param_names = ("backend", "method", "operation", "N", "B", "device")
    repeat = GRID.repeat
    rounds = GRID.rounds
    warmup_time = 0.0  # setup already ran the call once (compilation, allocator warm-up)
    timeout = 600.0

    def setup(self, backend: str, method: str, name: str, words: int, batch: int, device: str) -> None:
        use_device(backend, device)
        self.call = tree_operation(backend, method, name, random_trees(backend, device, batch, words))
        self.call()

    def time_trees(self, backend: str, method: str, name: str, words: int, batch: int, device: str) -> None:
        self.call()
