"""The timing stage's JAX items (``crfbench.timing``, ``backends`` with ``"jax"``): the same training
step and decoding as the torch items, on the same batches and the same network, in JAX.

- ``train``: ``jax.jit(jax.value_and_grad(mean loss))`` over the network's parameters, the loss
  being ``implementations.get(method, "jax")``'s with the torch item's options (network forward +
  loss + backward, no optimiser step), with dropout as the torch step has it (training mode; a
  PRNG key carried from step to step inside the compiled call);
- ``decode``: ``jax.jit`` of the network (no dropout) and the decoder.

A JAX item is always timed compiled (``jax.jit``: JAX has no eager mode worth timing), so its rows
carry ``mode="compiled"`` whatever the torch items' modes. Batches are padded to their longest
sentence as in torch, so each batch shape compiles once; the untimed warm-up rounds absorb that.
Each step's inputs are featurized on the host and put on the device inside the step, as torch's
are; a batch list is timed until every output is ready (JAX dispatches asynchronously).

The network is :mod:`crfbench.models.jax_scorer` with the torch scorer's weights (the L0 encoders
only; another scorer is refused). pytorch-crf is a torch library and has no JAX item
(:data:`NO_JAX`); every other timed loss and decoder, SparseMAP's and the partial-label ones
included, has the JAX implementation of the same method.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeGuard

import jax
import numpy as np
import torch

from .baselines import is_partial
from .batching import targets
from .data.types import Sentence, TagSet
from .models import Scorer
from .models.jax_scorer import Params, jax_features, jax_scores, scorer_params
from .objectives import ChainScores, Inference
from .uses import PYTORCH_CRF

#: How JAX items are timed: always under ``jax.jit`` (``crfbench.uses.TIMING_MODES``' name for it).
JAX_MODE = "compiled"
#: The timed methods without a JAX item, and why.
NO_JAX = {PYTORCH_CRF: "pytorch-crf is a torch library"}

#: A timed step: a batch of sentences in, the outputs to wait for out.
Step = Callable[[Sequence[Sentence]], Any]


def has_jax(inference: object) -> TypeGuard[Inference]:
    """Whether the timed loss or decoder ``inference`` has a JAX item (not in :data:`NO_JAX`)."""
    return isinstance(inference, Inference) and inference.method not in NO_JAX


def share_the_gpu() -> None:
    """Keep JAX from taking most of a GPU's memory when its backends start (its default), since
    the torch items run in the same process on the same GPU; call before JAX starts. Where the
    variable is already set, it stays as set."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def jax_device(device: torch.device) -> jax.Device:
    """The JAX device that stands for torch's ``device``: a GPU for CUDA, else the CPU."""
    devices = jax.devices("gpu" if device.type == "cuda" else "cpu")
    return devices[device.index or 0]


class Chain(NamedTuple):
    """Contract arguments for a batch in JAX, as ``crfbench.objectives.ChainScores`` in torch."""

    emissions: jax.Array
    transitions: jax.Array
    lengths: jax.Array
    start: jax.Array | None
    end: jax.Array | None


class JaxNetwork:
    """A torch scorer's network in JAX on the device standing for ``device``: its parameters, its
    featurizer (the torch scorer's) and the tag set's constraints, added as torch's
    ``chain_scores`` adds them."""

    def __init__(self, scorer: Scorer, tagset: TagSet, device: torch.device) -> None:
        self.scorer, self.tagset, self.device = scorer, tagset, jax_device(device)
        self.params: Params = scorer_params(scorer, self.device)
        self.dropout = scorer.config.dropout
        self.masks = [jax.device_put(mask.astype(np.float32), self.device) for mask in tagset.score_masks()]

    def inputs(self, sentences: Sequence[Sentence], partial: bool) -> tuple[dict[str, jax.Array], jax.Array]:
        """A batch's features and its loss target (gold tags, or the allowed mask), on the device."""
        features = self.scorer.featurize(sentences)
        target = targets(partial, sentences, self.tagset).numpy()
        return jax_features(features, self.device), jax.device_put(
            target if partial else target.astype(np.int32), self.device
        )

    def chain(self, params: Params, features: dict[str, jax.Array], key: jax.Array | None = None) -> Chain:
        """The network's scores with the constraints (``-inf`` where forbidden); dropout with ``key``."""
        emissions, transitions = jax_scores(params, features, dropout=self.dropout, key=key)
        transition_mask, start, end = self.masks
        transitions = transition_mask if transitions is None else transitions + transition_mask
        constrained = self.tagset.constrained
        return Chain(
            emissions, transitions, features["lengths"], *((start, end) if constrained else (None, None))
        )


def mean_loss(
    network: JaxNetwork,
    loss: Inference,
    params: Params,
    features: dict[str, jax.Array],
    target: jax.Array,
    key: jax.Array | None = None,
    validate: bool = False,
) -> jax.Array:
    """The batch's mean loss, what the train step differentiates (dropout with ``key``; without,
    the torch scorer's eval-mode loss to rounding); ``validate`` checks the inputs (eagerly only)."""
    return loss.in_backend("jax", network.chain(params, features, key), target, validate=validate).mean()


def train_step(network: JaxNetwork, loss: Inference, partial: bool, seed: int) -> Step:
    """The compiled training step of ``loss`` on ``network``: its loss and gradients."""

    def value_and_grad(
        params: Params, key: jax.Array, features: dict[str, jax.Array], target: jax.Array
    ) -> tuple[jax.Array, Params, jax.Array]:
        key, dropout = jax.random.split(key)
        value, grads = jax.value_and_grad(lambda p: mean_loss(network, loss, p, features, target, dropout))(
            params
        )
        return value, grads, key

    compiled = jax.jit(value_and_grad)
    state = {"key": jax.device_put(jax.random.key(seed), network.device)}

    def step(sentences: Sequence[Sentence]) -> Any:
        features, target = network.inputs(sentences, partial)
        value, grads, state["key"] = compiled(network.params, state["key"], features, target)
        return value, grads

    return step


def decode_step(network: JaxNetwork, decoder: Inference) -> Step:
    """The compiled decoding step of ``decoder`` on ``network``: the tags."""
    compiled = jax.jit(
        lambda params, features: decoder.in_backend("jax", network.chain(params, features), validate=False)
    )

    def step(sentences: Sequence[Sentence]) -> Any:
        features = jax_features(network.scorer.featurize(sentences), network.device)
        return compiled(network.params, features)

    return step


def validate(network: JaxNetwork, inference: Inference, sentences: Sequence[Sentence], partial: bool) -> None:
    """Check a batch's inputs to ``inference`` once, untimed: the contract's checks on values
    (compiled calls check none) run on the JAX network's scores and the batch's target through the
    torch backend, the same checks at the cost of one eager torch call (an eager JAX call compiles
    each operation, which costs more than the whole timing of small batches)."""
    features, target = network.inputs(sentences, partial)
    chain = network.chain(network.params, features)
    as_torch = lambda array: torch.from_numpy(np.array(array))  # noqa: E731
    scores = ChainScores(
        as_torch(chain.emissions),
        as_torch(chain.transitions),
        as_torch(chain.lengths).long(),
        None if chain.start is None else as_torch(chain.start),
        None if chain.end is None else as_torch(chain.end),
    )
    given = as_torch(target) if partial else as_torch(target).long()
    inference(scores, *((given,) if inference.function != "decode" else ()), validate=True)


def timed_step(
    kind: str,
    name: str,
    inference: Inference,
    networks: Mapping[bool, JaxNetwork],
    seed: int,
    first: Sequence[Sentence],
) -> Step:
    """The JAX step of the timed loss (``kind="train"``) or decoder (``"decode"``) ``name``, once
    its inputs on the batch ``first`` are validated. ``networks``: the network with a transition
    head (``True``) and the unstructured loss's, without one (``False``), as the torch items'."""
    partial = kind == "train" and is_partial(name)
    network = networks[kind == "decode" or name != "unstructured"]
    validate(network, inference, first, partial)
    if kind == "train":
        return train_step(network, inference, partial, seed)
    return decode_step(network, inference)


def finish(outputs: list[Any]) -> None:
    """Wait until every output of a timed batch list is computed."""
    jax.block_until_ready(outputs)
