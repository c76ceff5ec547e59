"""Exact linear-chain CRF by parallel scan: the same quantities as ``crf`` from a binary tree of
log-semiring (``log Z``, marginals) and max-plus (Viterbi) matrix products, O(log N) dependent
steps and O(N T³) work. Padding is masked by semiring identities, which is exact for these
semirings. Results equal ``crf`` up to floating-point rounding, at every score scale (marginals
are normalised per chain factor, never by subtracting ``log Z``).

Memory is O(B N T³) as well: every function raises ``ValueError`` (pointing to ``crf``) when the
largest intermediate, ``B · P/2 · T³`` scores with P the N + 1 factors rounded up to a power of
two, would exceed ``contract.SCAN_MEMORY_BUDGET`` bytes (2 GiB), from the shapes alone, before
anything is allocated, whether or not ``validate`` is set.
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
