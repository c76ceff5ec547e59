"""The per-token pieces of the factorised methods on torch: ``implementations.kernels.tokens``,
run as they are."""

from __future__ import annotations

from ..kernels.tokens import argmax_tags, product_marginals, token_nll, token_partial_nll

__all__ = ["argmax_tags", "product_marginals", "token_nll", "token_partial_nll"]
