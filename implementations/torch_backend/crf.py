"""Kernels of the exact linear-chain CRF, sequential: forward, forward–backward and Viterbi, one
step per position (O(N T²) work, N dependent steps)."""

from ..kernels.exact import exact_kernels
from . import _chain, _scores

marginals, decode, log_partition, loss, partial_loss = exact_kernels(_chain, _scores)
