"""Unstructured baseline on torch: ``implementations.kernels.unstructured`` as it is, its
repaired decoding by this backend's exact CRF."""

from __future__ import annotations

from ..kernels.unstructured import decoder, log_partition, loss, marginals, partial_loss
from . import crf

decode = decoder(crf.decode)

__all__ = ["decode", "log_partition", "loss", "marginals", "partial_loss"]
