"""Training losses and decoders: the named uses of the inference methods in experiments, with the
labels tables and figures give them.

A use is one contract function of one method (``implementations.registry``) with fixed options:
``bcrf-10`` decodes with BCRF at 10 iterations, ``m-sparsemap`` is SparseMAP's loss with the
Hamming cost. Names are spelled once, here: an iterative method at a fixed number of iterations is
``<method>-<iterations>``. This module is pure data (no framework imported), so the command line
and the workflow can list the names cheaply; ``crfbench.objectives`` turns a use into a call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Use:
    """One named use of a method: a training loss or a decoder, with fixed options.

    A loss's ``iterations`` of ``None`` is filled in per run (``RunConfig.iterations``)."""

    name: str  # e.g. "bcrf-partial", "meanfield-10", "viterbi"
    method: str  # an ``implementations`` method name (``METHODS``, or ``DEPENDENCY_METHODS`` for parsing)
    function: str  # "loss", "partial_loss" or "decode"
    label: str  # how tables and figures name it
    options: Mapping[str, Any] = field(default_factory=dict)
    natural_decoder: str | None = None  # a loss: the decoder that goes with it (dev-set selection)


#: The fixed iteration counts of the iterative decoders (the paper's 5 and 10).
DECODER_ITERATIONS = (5, 10)


def _iterative_decoders(method: str, label: str) -> tuple[Use, ...]:
    return tuple(
        Use(f"{method}-{k}", method, "decode", f"{label} {k}", {"iterations": k}) for k in DECODER_ITERATIONS
    )


_LOSSES = (
    Use("crf", "crf", "loss", "CRF", natural_decoder="viterbi"),
    Use("crf-partial", "crf", "partial_loss", "CRF partial", natural_decoder="viterbi"),
    Use("bcrf", "bcrf", "loss", "BCRF", {"iterations": None, "temperature": 1.0}, natural_decoder="bcrf-10"),
    Use(
        "bcrf-partial",
        "bcrf",
        "partial_loss",
        "BCRF partial",
        {"iterations": None, "temperature": 1.0},
        natural_decoder="bcrf-10",
    ),
    Use("meanfield", "meanfield", "loss", "MF", {"iterations": None}, natural_decoder="meanfield-10"),
    Use("unstructured", "unstructured", "loss", "Unstructured", natural_decoder="argmax"),
    Use("sparsemap", "sparsemap", "loss", "SparseMAP", natural_decoder="sparsemap"),
    Use("m-sparsemap", "sparsemap", "loss", "m-SparseMAP", {"cost": "hamming"}, natural_decoder="sparsemap"),
    Use("sparsemap-partial", "sparsemap", "partial_loss", "SparseMAP partial", natural_decoder="sparsemap"),
)

_DECODERS = (
    Use("viterbi", "crf", "decode", "Viterbi"),
    *_iterative_decoders("bcrf", "BCRF"),
    *_iterative_decoders("meanfield", "MF"),
    Use("argmax", "unstructured", "decode", "argmax", {"repair": False}),
    Use("argmax-repair", "unstructured", "decode", "argmax + repair", {"repair": True}),
    Use("sparsemap", "sparsemap", "decode", "SparseMAP"),
)


#: How the timing stage runs a use: eager, or compiled (``crfbench.compiled``), in a table's order.
TIMING_MODES = ("eager", "compiled")

#: pytorch-crf (``torchcrf``), timed as the implementation most papers compare with: not an
#: ``implementations`` method, so ``crfbench.baselines`` calls it.
PYTORCH_CRF = "pytorch-crf"

#: The baselines the timing stage times beside the losses and decoders, never trained or evaluated:
#: the forward algorithm and Viterbi as a parallel scan (``crf-scan``, as torch-struct has them)
#: and as pytorch-crf's Python loop over positions. The sequential ones are the losses ``crf`` and
#: ``crf-partial`` and the decoder ``viterbi``.
_BASELINE_LOSSES = (
    Use("crf-scan", "crf-scan", "loss", "CRF (parallel scan)"),
    Use("crf-scan-partial", "crf-scan", "partial_loss", "CRF partial (parallel scan)"),
    Use(PYTORCH_CRF, PYTORCH_CRF, "loss", "CRF (pytorch-crf)"),
)
_BASELINE_DECODERS = (
    Use("viterbi-scan", "crf-scan", "decode", "Viterbi (parallel scan)"),
    Use(f"viterbi-{PYTORCH_CRF}", PYTORCH_CRF, "decode", "Viterbi (pytorch-crf)"),
)


def _by_name(uses: tuple[Use, ...]) -> Mapping[str, Use]:
    table = {use.name: use for use in uses}
    assert len(table) == len(uses), "duplicate use name"
    return MappingProxyType(table)


#: Training losses by name.
LOSSES: Mapping[str, Use] = _by_name(_LOSSES)
#: Decoders by name.
DECODERS: Mapping[str, Use] = _by_name(_DECODERS)
#: What the timing stage may time: the losses and the baseline losses, by name.
TIMED_LOSSES: Mapping[str, Use] = _by_name(_LOSSES + _BASELINE_LOSSES)
#: What the timing stage may time: the decoders and the baseline decoders, by name.
TIMED_DECODERS: Mapping[str, Use] = _by_name(_DECODERS + _BASELINE_DECODERS)
#: The baseline decoders' names: the pipeline's timing jobs time them beside its decoders.
BASELINE_DECODERS: tuple[str, ...] = tuple(use.name for use in _BASELINE_DECODERS)


#: The dependency parser's training losses (``crfbench.parsing``, the SparseMAP paper's Table 1), over
#: the dependency-tree methods (``implementations.DEPENDENCY_METHODS``). The structured SVM is no
#: contract function: it decodes with ``tree-crf`` on scores raised by a Hamming cost on heads
#: (``crfbench.parsing.losses``). m-SparseMAP is SparseMAP's loss with that cost, as for chains.
PARSER_LOSSES: Mapping[str, Use] = _by_name(
    (
        Use("ssvm", "tree-crf", "decode", "Structured SVM", {"cost": "hamming"}),
        Use("crf", "tree-crf", "loss", "CRF"),
        Use("sparsemap", "tree-sparsemap", "loss", "SparseMAP"),
        Use("m-sparsemap", "tree-sparsemap", "loss", "m-SparseMAP", {"cost": "hamming"}),
    )
)
#: How every parser decodes, whatever its loss: the MAP tree (Chu-Liu-Edmonds with one root child).
PARSER_DECODER = Use("chu-liu-edmonds", "tree-crf", "decode", "MAP (Chu-Liu-Edmonds)")
#: The parsers' decoders by name: the MAP tree, and SparseMAP's own prediction, the heaviest tree
#: of its support, which evaluates the models trained with a loss of its method too.
PARSER_DECODERS: Mapping[str, Use] = _by_name(
    (PARSER_DECODER, Use("sparsemap", "tree-sparsemap", "decode", "SparseMAP (heaviest tree)"))
)


def parser_decoders(loss: str) -> tuple[Use, ...]:
    """The decoders that evaluate a parser trained with ``loss``: the MAP tree for every loss, then
    those of the loss's own method (SparseMAP's heaviest tree for the SparseMAP losses)."""
    check_names("loss", [loss], PARSER_LOSSES)
    method = PARSER_LOSSES[loss].method
    return (PARSER_DECODER,) + tuple(
        use for use in PARSER_DECODERS.values() if use is not PARSER_DECODER and use.method == method
    )


def decoders_of(method: str) -> tuple[str, ...]:
    """The decoders that decode with ``method``, in listing order."""
    return tuple(name for name, use in DECODERS.items() if use.method == method)


def check_names(argument: str, names: Iterable[str], known: Iterable[str]) -> None:
    """ValueError naming ``argument`` and the first of ``names`` that is not one of ``known``."""
    known = list(known)
    for name in names:
        if name not in known:
            raise ValueError(f"{argument}: {name!r} is not one of {', '.join(known)}")
