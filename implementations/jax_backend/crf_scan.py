"""Exact linear-chain CRF by parallel scan: the same quantities as ``crf`` from a binary tree of
log-semiring (``log Z``, marginals) and max-plus (Viterbi) matrix products, O(log N) dependent
steps and O(N T³) work. Padding is masked by semiring identities, which is exact for these
semirings. Results equal ``crf`` up to floating-point rounding, at every score scale (marginals
are normalised per chain factor, never by subtracting ``log Z``).

Memory is O(B N T³) as well: every function refuses a call over the budget that
``contract.check_scan_memory`` states, pointing to ``crf``.
"""

from . import _tree
from ._exact import ExactCRF

_crf_scan = ExactCRF(_tree)

log_partition = _crf_scan.log_partition
marginals = _crf_scan.marginals
decode = _crf_scan.decode
loss = _crf_scan.loss
partial_loss = _crf_scan.partial_loss

__all__ = ["decode", "log_partition", "loss", "marginals", "partial_loss"]
