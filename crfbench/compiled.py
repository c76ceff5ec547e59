"""The timing stage's modes: each method eager (torch's default, an operator launched at a time) or
compiled, at its best in torch.

On a GPU, eager timing mostly measures kernel launches, not methods, so a speed verdict rests on
the compiled mode. There, compiled is the step captured as a CUDA graph and replayed
(``crfbench.capture``). On a CPU it is ``torch.compile`` (inductor), here with shapes dynamic (the
batches' lengths vary), of the network and of the inference call apart. Either needs every method
to read nothing back to the host: SparseMAP cannot (its active set grows and stops on the scores'
values) and is timed eager only, as is the pytorch-crf baseline (:data:`CAPTURE_EXEMPT`).

``CRFBENCH_COMPILE_BACKEND`` names another ``torch.compile`` backend (the tests trace with
``aot_eager``, which compiles nothing; timings are only meaningful with the default, inductor).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

import implementations

from .objectives import ChainScores, Inference
from .uses import PYTORCH_CRF, check_names
from .uses import TIMING_MODES as MODES

#: Methods that are never compiled: SparseMAP's iterations stop on the scores' values, and
#: pytorch-crf's Viterbi backtraces on the host (a baseline timed as people run it).
CAPTURE_EXEMPT = frozenset({"sparsemap", PYTORCH_CRF})
#: Names the ``torch.compile`` backend (default: inductor).
BACKEND_VARIABLE = "CRFBENCH_COMPILE_BACKEND"


def check_modes(modes: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``modes`` as a tuple, each one of :data:`MODES`; ValueError naming the bad one."""
    check_names("modes", modes, MODES)
    return tuple(modes)


def compiles(method: str) -> bool:
    """Whether ``method`` has a compiled mode (it is not :data:`CAPTURE_EXEMPT`)."""
    return method not in CAPTURE_EXEMPT


#: How many compiled variants one function's code may hold. Every method's contract call runs the
#: public layer's same few functions, each method a variant of them (dynamo guards on the kernel
#: they close over): past torch's default of 8, dynamo would run the rest eagerly, unnoticed.
RECOMPILE_LIMIT = 64


def compile_function(function: Callable[..., Any], *, dynamic: bool = True) -> Callable[..., Any]:
    """``function`` under ``torch.compile``: a CPU's compiled mode (a GPU's captures instead,
    ``crfbench.capture``); shapes dynamic unless ``dynamic`` is False (a benchmark's fixed
    shapes: one specialised program, as a training loop on padded batches of one shape would run).

    Raises the limit of compiled variants per code object to :data:`RECOMPILE_LIMIT` and makes
    reaching it an error (a process-wide setting of dynamo's): a step timed as compiled never falls
    back to eager silently."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    backend = os.environ.get(BACKEND_VARIABLE, "inductor")
    return torch.compile(function, dynamic=dynamic, backend=backend)


class CompiledInference:
    """``inference`` with its contract call compiled (no input checks: they read the scores back);
    called like an :class:`Inference`."""

    def __init__(self, inference: Inference) -> None:
        if not compiles(inference.method):
            raise ValueError(f"{inference.method}: has no compiled mode (its iterations stop on values)")
        self.method, self.function, self.options = inference.method, inference.function, inference.options
        contract = getattr(implementations.get(inference.method, backend="torch"), inference.function)
        self._call = compile_function(partial(contract, validate=False, **inference.options))

    def __call__(self, chain: ChainScores, *target: torch.Tensor, validate: bool = False) -> torch.Tensor:
        if validate:
            raise ValueError("validate: a compiled call checks nothing; validate eagerly first")
        return self._call(
            chain.emissions, chain.transitions, chain.lengths, *target, start=chain.start, end=chain.end
        )
