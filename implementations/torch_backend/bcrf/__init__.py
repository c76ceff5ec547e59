"""Bregman CRF (Corro, Lacroix & Le Roux, 2025) in torch: entropy of the transition marginals,
solved by iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (docs/derivations.md §3.3). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``). A node with
no in- or out-mass is killed (``alive``) so -inf never becomes NaN, and clusters past a sequence's
length are skipped, so padding never changes a result. Lengths 1 and 2 have no inner cluster:
length 1 is a softmax over tags, length 2 a softmax over tag pairs (every arc group is normalised
before the first projection, which leaves the iterates of longer sequences unchanged because they
are invariant to per-group shifts).

This module holds the contract's functions; the package's modules hold the strategies, which
compute the same iterates (docs/derivations.md §3.12):

- :mod:`implementations.kernels.bcrf_log_form`: ``form="log"``, the iterate is ``log q`` itself
  (written once for both backends);
- :mod:`.scaling`: ``form="scaling"`` (the default but for ``decode``), ``log q = log K + log v ⊕
  log u`` with a fixed kernel (:mod:`.transition_kernel`), each projection two matrix products,
  whose flows :mod:`.exactness` vouches for or recomputes in log space;
- :mod:`.linear`: the scaling form's linear state for large vouched per-position kernels, iterated
  by the C sweep on the CPU (:mod:`.sweep`) or by compiled projections (:mod:`.compilation`);
- :mod:`.forms` picks one for a call, :mod:`.gradients` differentiates the loss (Danskin or
  unrolled), and :mod:`.run_state` holds every switch a call or the process carries.

The options reach the strategies as one :class:`~implementations.kernels.bcrf_options.BcrfOptions`;
``solve`` reports which strategy ran (``SolverOutput.path``). To count a GPU step's host
synchronisations elsewhere, :func:`exactness_tests_deferred` defers the exactness tests on every
device, as a GPU does.
"""

from __future__ import annotations

from functools import update_wrapper
from typing import Any

from ...kernels.bcrf_contract import Pieces, bind, bind_decode
from ...kernels.bcrf_numerics import _unary
from ...solver import SolverOutput
from .._fixed_point import iterate_with_errors
from .._scores import arc_terms, gold_score, mask_emissions
from .._tokens import argmax_tags
from .exactness import _tested_once
from .forms import _form, _run
from .gradients import _scaled_value
from .run_state import exactness_tests_deferred

__all__ = [
    "decode",
    "exactness_tests_deferred",
    "log_partition",
    "loss",
    "marginals",
    "partial_loss",
    "solve",
]


_FUNCTIONS = bind(
    Pieces(arc_terms, gold_score, mask_emissions, _unary, _form, _run, iterate_with_errors, _scaled_value),
    __name__,
)


def _solve(*args: Any, **options: Any) -> SolverOutput:
    fields: tuple[Any, Any, Any, Any, Any, Any]  # unary, pairwise, value, iterations, converged, errors
    fields, path = _FUNCTIONS["solve"](*args, **options)
    return SolverOutput(*fields, path=path)


# each reads its exactness tests back once a call where the device defers them (exactness.py)
marginals = _tested_once(_FUNCTIONS["marginals"])
log_partition = _tested_once(_FUNCTIONS["log_partition"])
solve = _tested_once(update_wrapper(_solve, _FUNCTIONS["solve"]))
loss = _tested_once(_FUNCTIONS["loss"])
partial_loss = _tested_once(_FUNCTIONS["partial_loss"])
decode = bind_decode(marginals, argmax_tags, __name__)
