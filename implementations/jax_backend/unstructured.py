"""Unstructured baseline on jax: ``implementations.kernels.unstructured``, each function one
``jax.jit`` program (``repair`` static), its repaired decoding by this backend's exact CRF."""

from __future__ import annotations

import jax

from ..kernels import unstructured as _shared
from . import crf

marginals = jax.jit(_shared.marginals)
decode = jax.jit(_shared.decoder(crf.decode), static_argnames="repair")
loss = jax.jit(_shared.loss)
partial_loss = jax.jit(_shared.partial_loss)
log_partition = jax.jit(_shared.log_partition)
