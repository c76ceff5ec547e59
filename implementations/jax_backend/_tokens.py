"""The per-token pieces of the factorised methods on jax: ``implementations.kernels.tokens``,
each compiled by ``jax.jit`` (one cached program per shape when called eagerly)."""

from __future__ import annotations

import jax

from ..kernels import tokens as _shared

token_nll = jax.jit(_shared.token_nll)
token_partial_nll = jax.jit(_shared.token_partial_nll)
argmax_tags = jax.jit(_shared.argmax_tags)
product_marginals = jax.jit(_shared.product_marginals)
