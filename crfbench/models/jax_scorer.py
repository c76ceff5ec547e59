"""The L0 scorer in JAX: the torch :class:`~crfbench.models.Scorer`'s emission and transition scores
as a pure function of a parameter pytree, so that the timing stage can time a training step and
decoding in JAX on the very network it times in torch (``crfbench.jax_timing``).

Only what the L0 encoders use is written here: word embeddings, an optional char-CNN added to them,
no self-attention layers (``layers=0``), and the two MLP heads. The parameters are the torch
module's ``state_dict`` as JAX arrays under the same names (:func:`scorer_params`), so a trained
run's weights score alike in both frameworks; the inputs are ``Scorer.featurize``'s padded ids as
JAX arrays (:func:`jax_features`).

Dropout: with a PRNG ``key`` and a ``dropout`` rate, :func:`jax_scores` drops where the torch
scorer does in training mode (the embeddings, and each head's hidden layer), with its own random
masks; without a key it is the torch scorer in eval mode, to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from torch import Tensor

from .encoders import EmbeddingEncoder
from .scorer import Scorer
from .vocab import PAD

#: A scorer's parameters: its ``state_dict`` names -> float32 JAX arrays.
Params = dict[str, jax.Array]


def scorer_params(scorer: Scorer, device: jax.Device | None = None) -> Params:
    """``scorer``'s parameters as float32 JAX arrays on ``device`` (JAX's default if None).

    ValueError for a scorer this module cannot compute: a pretrained encoder or self-attention
    layers (only the L0 encoders are written in JAX).
    """
    config = scorer.config
    if not isinstance(scorer.encoder, EmbeddingEncoder) or config.encoder != "embeddings":
        raise ValueError(f"scorer: the JAX scorer has the embeddings encoder only, not {config.encoder!r}")
    if config.layers != 0:
        raise ValueError(
            f"scorer: the JAX scorer has no self-attention layers (layers=0), got {config.layers}"
        )
    return {
        name: jax.device_put(np.asarray(tensor.detach().float().cpu().numpy()), device)
        for name, tensor in scorer.state_dict().items()
    }


def jax_features(features: Mapping[str, Tensor], device: jax.Device | None = None) -> dict[str, jax.Array]:
    """``Scorer.featurize``'s id tensors as int32 JAX arrays on ``device``."""
    return {
        name: jax.device_put(tensor.numpy().astype(np.int32), device) for name, tensor in features.items()
    }


def _linear(params: Params, name: str, x: jax.Array) -> jax.Array:
    return x @ params[f"{name}.weight"].T + params[f"{name}.bias"]


def _dropout(x: jax.Array, rate: float, key: jax.Array | None) -> jax.Array:
    """Inverted dropout as torch's: zero with probability ``rate``, scale the rest by 1/(1-rate)."""
    if key is None or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def _char_cnn(params: Params, chars: jax.Array) -> jax.Array:
    """``CharCNN.forward``: (B, N, C) char ids -> (B, N, dim)."""
    batch, length, width = chars.shape
    flat = chars.reshape(batch * length, width)
    mask = flat != PAD  # (BN, C)
    x = params["encoder.char_cnn.embedding.weight"][flat] * mask[..., None]  # (BN, C, char_dim)
    kernel = params["encoder.char_cnn.conv.weight"]  # (out, in, k), a cross-correlation as torch's
    half = kernel.shape[-1] // 2
    x = jax.lax.conv_general_dilated(
        x.transpose(0, 2, 1), kernel, (1,), [(half, half)], dimension_numbers=("NCH", "OIH", "NCH")
    )
    x = x + params["encoder.char_cnn.conv.bias"][:, None]  # (BN, char_dim, C)
    x = jnp.where(mask[:, None, :], x, jnp.finfo(x.dtype).min).max(axis=2)
    x = jnp.where(mask.any(axis=1, keepdims=True), x, jnp.zeros_like(x))
    return _linear(params, "encoder.char_cnn.proj", x).reshape(batch, length, -1)


def jax_scores(
    params: Params,
    features: Mapping[str, jax.Array],
    *,
    dropout: float = 0.0,
    key: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array | None]:
    """Raw emission (B, N, T) and transition (B, N-1, T, T) scores, as ``Scorer.forward`` gives
    them (transitions None for a scorer without a transition head); dropout at rate ``dropout``
    where ``key`` is given, else none (eval mode)."""
    keys: list[Any] = [None] * 3 if key is None else list(jax.random.split(key, 3))
    h = params["encoder.word_embedding.weight"][features["words"]]
    if "encoder.char_cnn.conv.weight" in params:
        h = h + _char_cnn(params, features["chars"])
    h = _dropout(h, dropout, keys[0])  # (B, N, D)
    hidden = jax.nn.gelu(_linear(params, "emission_head.mlp.0", h), approximate=False)
    emissions = _linear(params, "emission_head.mlp.3", _dropout(hidden, dropout, keys[1]))
    if "transition_head.first.weight" not in params:
        return emissions, None
    batch, length, _ = h.shape
    weight, bias = params["transition_head.first.weight"], params["transition_head.first.bias"]
    size = weight.shape[0] // 2  # [W_prev; W_cur], the bias counted once (TransitionHead)
    pairs = h[:, :-1] @ weight[:size].T + h[:, 1:] @ weight[size:].T + bias[:size] + bias[size:]
    hidden = _dropout(jax.nn.gelu(pairs, approximate=False), dropout, keys[2])
    out = _linear(params, "transition_head.rest.2", hidden)
    tags = emissions.shape[-1]
    return emissions, out.reshape(batch, max(length - 1, 0), tags, tags)
