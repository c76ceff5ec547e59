"""One record per inference method: what a method *is*, and nothing about how experiments use it.

A :class:`Method` holds its name, its kernel module, its options (defaults, checks, docs), its
NumPy oracle and its memory model. The public layer (``implementations.public``) takes a method's
options, defaults and checks from here. Adding a method is a kernel module per backend
(``<backend>_backend/<kernel>.py``, see ``implementations.public``), an oracle in
``implementations.reference.oracles`` and one :class:`Method` in :data:`REGISTRY`. A method over
dependency trees (``structure="dependency"``, e.g. ``tree-crf``) has its kernels written once in
``implementations/kernels/<kernel>.py`` and lives in :data:`DEPENDENCY_REGISTRY`, apart from the
chain methods that the experiments iterate over. How the experiments use a method lives with them:
training losses and decoders with their labels in ``crfbench.uses``, the agreement report's
settings in ``crfbench.agreement``, the benchmarked variants in ``benchmarks/common.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from . import contract

#: The contract's functions, in the order the documentation lists them.
FUNCTIONS = ("marginals", "decode", "loss", "partial_loss", "log_partition")
#: ``solve``: the iterate with its convergence record (``implementations.solver``), iterative methods only.
SOLVE = "solve"
#: The structures a method predicts: tag sequences (the contract of ``docs/contract.md``) or
#: dependency trees (``(scores, lengths)`` of arc scores, ``implementations.kernels.dependency``).
STRUCTURES = ("chain", "dependency")
#: The functions of a dependency-tree method, in the order the documentation lists them (and
#: ``solve`` for an iterative one).
DEPENDENCY_FUNCTIONS = ("marginals", "decode", "loss", "log_partition")

Check = Callable[[str, Any], None]  # raises ValueError naming the option


def positive_int(name: str, value: Any) -> None:
    contract.check_positive(name, value, integer=True)


def positive(name: str, value: Any) -> None:
    contract.check_positive(name, value)


def choice(*choices: object) -> Check:
    def check(name: str, value: Any) -> None:
        contract.check_choice(name, value, choices)

    return check


def boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def tolerance(name: str, value: Any) -> None:
    if value is not None:
        contract.check_positive(name, value)


def penalty(name: str, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value <= 0)
    ):
        raise ValueError(f"{name} must be a finite score <= 0 replacing -inf transitions, got {value!r}")


def non_negative(name: str, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value >= 0)
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def energy(name: str, value: Any) -> None:
    if value is not None and not (hasattr(value, "value") and hasattr(value, "gradient")):
        raise ValueError(
            f"{name} must be None or an energy with value() and gradient() (implementations.energies), "
            f"got {value!r}"
        )


def arc_elements(batch: int, length: int, num_tags: int) -> int:
    """Elements of the (B, N-1, T, T) arc scores: the biggest array most methods build."""
    return batch * max(length - 1, 1) * num_tags**2


@dataclass(frozen=True)
class Option:
    """A keyword option: its default, its check, and which functions take it (all if ``None``)."""

    name: str
    default: Any
    check: Check
    doc: str
    functions: tuple[str, ...] | None = None
    #: a different default for some functions (BCRF decodes at τ = 0.1)
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def applies_to(self, function: str) -> bool:
        return self.functions is None or function in self.functions

    def default_for(self, function: str) -> Any:
        return self.defaults.get(function, self.default)


@dataclass(frozen=True)
class Method:
    """Everything about one inference method."""

    name: str  # the name ``implementations.get`` takes
    kernel: str  # the kernel module in each backend package
    summary: str  # one line: heads the docstring of each of its functions
    options: tuple[Option, ...] = ()
    oracle: str = ""  # a function of ``implementations.reference.oracles``
    #: elements of the biggest array a call on (B, N, T) scores builds (benchmarks skip what does not fit)
    largest_intermediate: Callable[[int, int, int], int] = arc_elements
    #: bytes of that array above which the method refuses a call (read when called), if it has a limit
    memory_budget: Callable[[], int] | None = None
    #: what it predicts (one of :data:`STRUCTURES`); the chain machinery knows only ``"chain"``
    structure: str = "chain"

    @property
    def iterative(self) -> bool:
        """Has ``solve`` (an iterative solver with a convergence record)."""
        return any(option.name == "iterations" for option in self.options)

    @property
    def functions(self) -> tuple[str, ...]:
        if self.structure == "dependency":
            return DEPENDENCY_FUNCTIONS + ((SOLVE,) if self.iterative else ())
        return FUNCTIONS + ((SOLVE,) if self.iterative else ())

    def default(self, option: str, function: str) -> Any:
        """The default of ``option`` in ``function``."""
        return next(o for o in self.options if o.name == option).default_for(function)

    def options_for(self, function: str) -> tuple[Option, ...]:
        return tuple(option for option in self.options if option.applies_to(function))

    def resolve(self, function: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every option ``function`` takes, from ``given`` or its default, each checked; an
        unknown name raises ``TypeError`` listing the valid ones."""
        options = self.options_for(function)
        unknown = set(given) - {option.name for option in options}
        if unknown:
            valid = ", ".join(option.name for option in options) or "none"
            raise TypeError(
                f"{self.name}.{function}() got unexpected option(s) {', '.join(sorted(unknown))}; "
                f"valid options: {valid}"
            )
        resolved = {}
        for option in options:
            value = given.get(option.name, option.default_for(function))
            option.check(option.name, value)
            resolved[option.name] = value
        return resolved


def _iterations(default: int) -> Option:
    return Option("iterations", default, positive_int, "iterations run (the most, with a tolerance)")


TOLERANCE = Option(
    "tolerance",
    None,
    tolerance,
    "stop once every sequence's error is at most this (None: run every iteration)",
)


CRF = Method(
    name="crf",
    kernel="crf",
    summary="exact linear-chain CRF: forward, forward-backward and Viterbi, one step per position",
    oracle="exact",
)

CRF_SCAN = Method(
    name="crf-scan",
    kernel="crf_scan",
    summary="exact linear-chain CRF by parallel scan: O(log N) depth, O(N T^3) work and memory",
    largest_intermediate=contract.scan_intermediate_elements,
    memory_budget=lambda: contract.SCAN_MEMORY_BUDGET,
    oracle="exact",
)

BCRF = Method(
    name="bcrf",
    kernel="bcrf",
    summary="Bregman CRF: iterative Bregman projections onto the marginal polytope (Corro et al. 2025)",
    options=(
        _iterations(10),
        Option("temperature", 1.0, positive, "τ: scores are divided by it", defaults={"decode": 0.1}),
        Option(
            "order", "odd-even", choice("odd-even", "even-odd"), "which parity each iteration projects first"
        ),
        Option(
            "form",
            "scaling",
            choice("scaling", "log"),
            "scaling: q = v ⊙ K ⊙ u, a projection is two matrix–vector products (log-stabilised); "
            "log: every projection rewrites log q. Same iterates; decode defaults to log, as at its "
            "τ = 0.1 on sharp scores most scaling projections fall back to log space (derivations §3.12)",
            defaults={"decode": "log"},
        ),
        Option(
            "gradient",
            "danskin",
            choice("danskin", "unrolled"),
            "danskin: q − y, no backpropagation through the iterations; unrolled: through them",
            functions=("loss", "partial_loss"),
        ),
        TOLERANCE,
    ),
    oracle="bcrf",
)

MEANFIELD = Method(
    name="meanfield",
    kernel="meanfield",
    summary="naive mean field with parallel updates (the paper's MF baseline)",
    options=(
        _iterations(10),
        Option(
            "init",
            "unary",
            choice("unary", "uniform"),
            "first iterate: softmax of the tag scores, or uniform",
        ),
        Option("penalty", 0.0, penalty, "finite score that replaces a -inf transition"),
        TOLERANCE,
    ),
    oracle="meanfield",
)

UNSTRUCTURED = Method(
    name="unstructured",
    kernel="unstructured",
    summary="independent per-token softmax; transitions only constrain the repair decoder",
    options=(
        Option(
            "repair",
            False,
            boolean,
            "decode the best sequence the -inf constraints allow instead of the per-token argmax",
            functions=("decode",),
        ),
    ),
    oracle="unstructured",
)

#: SparseMAP's solvers: the active set (default) and the conditional-gradient family.
SPARSEMAP_SOLVERS = ("active-set", "fw", "away-fw", "pairwise-fw")

SPARSEMAP = Method(
    name="sparsemap",
    kernel="sparsemap",
    summary="SparseMAP (Niculae et al. 2018): a sparse mixture of a few tag sequences, by Viterbi calls",
    options=(
        Option(
            "solver",
            "active-set",
            choice(*SPARSEMAP_SOLVERS),
            "active-set: the relaxed QP on the support by its KKT system; fw, away-fw, pairwise-fw: "
            "Frank-Wolfe variants with exact line search",
        ),
        _iterations(100),
        Option(
            "tolerance",
            None,
            tolerance,
            "stop once the Wolfe gap is at most this (None: once it is within rounding of the scores)",
        ),
        Option("max_support", 32, positive_int, "slots for the support; a sequence that needs more stops"),
        Option(
            "oracle", "viterbi", choice("viterbi", "scan"), "MAP oracle: sequential Viterbi or max-plus scan"
        ),
        Option(
            "cost",
            "none",
            choice("none", "hamming"),
            "hamming: m-SparseMAP, the value at cost-augmented scores",
            functions=("loss",),
        ),
    ),
    oracle="sparsemap",
)

#: Bethe projections' solvers: Algorithms 1, 4 and 5 of Vilnis et al. (2015).
BETHE_SOLVERS = ("rda", "md", "accelerated")

BETHE = Method(
    name="bethe",
    kernel="bethe",
    summary="Bethe projections (Vilnis et al. 2015): CRF marginals under a non-local energy (mirror descent)",
    options=(
        Option(
            "energy",
            None,
            energy,
            "the non-local energy L(μ) (implementations.energies); None: no energy, the CRF itself",
        ),
        Option(
            "solver",
            "rda",
            choice(*BETHE_SOLVERS),
            "rda: dual averaging (Algorithm 1); md: composite mirror descent (Algorithm 4); "
            "accelerated: accelerated RDA for a smooth energy (Algorithm 5)",
        ),
        _iterations(40),
        Option(
            "tolerance",
            1e-6,
            tolerance,
            "stop once no marginal changed by more than this in an iteration (None: run every iteration)",
        ),
        Option(
            "output",
            "last",
            choice("last", "average"),
            "the last iterate, or the average of the iterates (rda and md; their guarantee's)",
        ),
        Option("beta", 0.0, non_negative, "rda's β: the prox term's weight β/t (0: no step size)"),
        Option("decay", 1.0, positive, "md's λ: step size η_t = 1/(λ t)"),
        Option("smoothness", 1.0, positive, "accelerated: the energy's smoothness constant L"),
        Option(
            "tilt",
            "gradient",
            choice("gradient", "dual"),
            "decode and losses on θ − ∇L(μ*) (Prop. 1), or on θ − s with s the shift of the last "
            "projection, whose marginals are the last iterate (for non-smooth energies)",
        ),
    ),
    oracle="bethe",
)

TREE_CRF = Method(
    name="tree-crf",
    kernel="dependency",
    summary="CRF over non-projective single-root dependency trees: matrix-tree theorem and Chu-Liu-Edmonds",
    oracle="dependency",
    largest_intermediate=lambda batch, words, _: batch * (words + 1) ** 2,
    structure="dependency",
)

TREE_SPARSEMAP = Method(
    name="tree-sparsemap",
    kernel="tree_sparsemap",
    summary="SparseMAP over non-projective single-root dependency trees: the chain's solvers, "
    "Chu-Liu-Edmonds as the oracle",
    # the chain's options but the oracle, which is Chu-Liu-Edmonds here
    options=tuple(option for option in SPARSEMAP.options if option.name != "oracle"),
    oracle="tree_sparsemap",
    # the solver's (B, K, N+1, N+1) indicators of the support, K = max_support (32 by default)
    largest_intermediate=lambda batch, words, _: batch * 32 * (words + 1) ** 2,
    structure="dependency",
)

#: Every chain method (``implementations.METHODS``), in the order listings show them: the methods of
#: the sequence-labelling contract, which the experiments, benchmarks and documentation iterate over.
REGISTRY: Mapping[str, Method] = MappingProxyType(
    {method.name: method for method in (CRF, CRF_SCAN, BCRF, MEANFIELD, UNSTRUCTURED, SPARSEMAP, BETHE)}
)

#: Every dependency-tree method (``implementations.DEPENDENCY_METHODS``): their own, smaller
#: contract over arc scores, outside :data:`REGISTRY` so the chain machinery never meets them.
DEPENDENCY_REGISTRY: Mapping[str, Method] = MappingProxyType(
    {method.name: method for method in (TREE_CRF, TREE_SPARSEMAP)}
)


def method(name: str) -> Method:
    """The record of ``name`` (a chain or a dependency-tree method); ``ValueError`` listing the
    valid names for an unknown one."""
    if name in REGISTRY:
        return REGISTRY[name]
    if name in DEPENDENCY_REGISTRY:
        return DEPENDENCY_REGISTRY[name]
    raise ValueError(
        f"unknown method {name!r}; valid methods: {', '.join([*REGISTRY, *DEPENDENCY_REGISTRY])}"
    )
