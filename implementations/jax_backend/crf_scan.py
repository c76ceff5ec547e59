"""Kernels of the exact linear-chain CRF by parallel scan: a binary tree of log-semiring and
max-plus matrix products (O(log N) dependent steps, O(N T³) work and memory; every call over
``contract.check_scan_memory``'s budget is refused, pointing to ``crf``)."""

from ..kernels.exact import exact_kernels
from . import _scores, _tree

marginals, decode, log_partition, loss, partial_loss = exact_kernels(_tree, _scores)
