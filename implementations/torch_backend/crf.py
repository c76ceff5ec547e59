"""Exact linear-chain CRF, sequential: forward / forward–backward / Viterbi, one step per position.

O(N T²) work and N dependent steps. Marginals come from an explicit forward–backward pass;
``log_partition`` is differentiable by autograd (its gradient equals those marginals), to any
order: the marginals are differentiable too (their derivative, the covariance of the sufficient
statistics, gives Hessian-vector products), through ``loss`` and ``partial_loss`` as well.
"""

from . import _chain
from ._exact import ExactCRF

_crf = ExactCRF(_chain)

log_partition = _crf.log_partition
marginals = _crf.marginals
decode = _crf.decode
loss = _crf.loss
partial_loss = _crf.partial_loss

__all__ = ["decode", "log_partition", "loss", "marginals", "partial_loss"]
