"""Agreement between implementations: does every backend compute the same numbers, and the
right ones?

Every method × backend runs on a fixed grid of instances (lengths N, tag-set sizes T, with and
without -inf constraints, float32 and float64; 3 sequences each, one of full length and two of
random lengths, so padding is exercised). Each backend is compared with the other, and with a
NumPy oracle from ``implementations.reference.oracles``: brute-force enumeration for the exact CRF where
``T**N`` is small, the cluster-by-cluster loop IBP for BCRF (same iterations), the loop mean
field, the closed forms of the unstructured model. Oracles run in float64; a float32 backend is
held to float32 tolerances.

Tolerance of a comparison: ``atol + rtol · max|reference|`` with (atol, rtol) = (1e-10, 1e-10) in
float64 and (1e-4, 1e-5) in float32; decoded tags are compared as the fraction of positions that
differ, which must be 0 (float64) or at most 2 % (float32: near-ties may break either way), and
against brute force by the score of the decoded path, which must be the best score.

The dependency-tree methods (``tree-crf``) are checked on arc scores by ``crfbench.agreement_trees``,
into the same table, on their own small lengths (``Grid.tree_lengths``).

Which oracle checks a method is the method's registry entry (``implementations.registry``); how
this report names that oracle, and the options it runs a method and its oracle with, are
:data:`SETTINGS` here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import implementations
from implementations import energies, registry
from implementations.interop import from_numpy, to_numpy
from implementations.reference import brute_force, oracles
from implementations.reference.instances import random_batch

from .io import write_atomic
from .schema import AGREEMENT_COLUMNS

#: The agreement table's columns (``crfbench.schema``).
COLUMNS = list(AGREEMENT_COLUMNS)
BATCH = 3
TOLERANCES = {  # dtype -> atol, rtol, fraction of decoded tags that may differ
    "float64": (1e-10, 1e-10, 0.0),
    "float32": (1e-4, 1e-5, 0.02),
}


@dataclass(frozen=True)
class Grid:
    """The instances to compare on."""

    lengths: tuple[int, ...] = (1, 2, 3, 8, 64)
    num_tags: tuple[int, ...] = (2, 5, 17)
    neg_inf: tuple[bool, ...] = (False, True)
    dtypes: tuple[str, ...] = ("float32", "float64")
    #: words of the longest sentence of the dependency-tree batches (the enumeration oracle lists
    #: every tree: N ≤ 5)
    tree_lengths: tuple[int, ...] = (1, 2, 3, 4, 5)


FULL_GRID = Grid()
QUICK_GRID = Grid(lengths=(1, 2, 3, 8), num_tags=(2, 5), tree_lengths=(5,))


@dataclass(frozen=True)
class Instance:
    """One batch in NumPy float64: per-position transitions, start/end, gold tags on a finite
    path and a partial annotation that allows them."""

    emissions: np.ndarray  # (B, N, T)
    transitions: np.ndarray  # (B, N-1, T, T)
    lengths: np.ndarray  # (B,)
    start: np.ndarray  # (T,)
    end: np.ndarray  # (T,)
    tags: np.ndarray  # (B, N), -1 on padding
    allowed: np.ndarray  # (B, N, T) bool

    def sequence(self, b: int) -> dict[str, np.ndarray]:
        """Scores of sequence ``b`` alone, as the oracles take them."""
        n = int(self.lengths[b])
        return {
            "emissions": self.emissions[b, :n],
            "transitions": self.transitions[b, : n - 1],
            "start": self.start,
            "end": self.end,
        }


def make_instance(length: int, num_tags: int, neg_inf: bool, seed: int) -> Instance:
    """A random batch (``implementations.reference.instances.random_batch``, scores N(0, 4)): one
    sequence of full length and two of random lengths, garbage past each length; with ``neg_inf``
    about a third of the scores are -inf, never on the planted gold path."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([[length], rng.integers(1, length + 1, size=BATCH - 1)])
    chain = random_batch(
        rng,
        batch=BATCH,
        length=length,
        num_tags=num_tags,
        lengths=lengths,
        neg_inf=1 / 3 if neg_inf else 0.0,
        scale=2.0,
    )
    allowed = rng.random((BATCH, length, num_tags)) < 0.5
    np.put_along_axis(allowed, np.maximum(chain.gold, 0)[..., None], True, axis=-1)
    # random_batch draws start and end scores by default (start=True, end=True)
    if chain.start is None or chain.end is None:
        raise RuntimeError("random_batch drew no start or end scores")
    return Instance(
        chain.emissions, chain.transitions, chain.lengths, chain.start, chain.end, chain.gold, allowed
    )


@dataclass(frozen=True)
class Setting:
    """How the report checks one method: the name it gives the method's oracle, the options it
    runs the backends and the oracle with, and an energy (NumPy parameters) for T tags that it adds
    as the ``energy`` option."""

    oracle_name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    energy: Callable[[int], Any] | None = None


def _measurements(num_tags: int) -> energies.Measurements:
    """Bethe's agreement energy: two soft measurements with unary and pairwise weights."""
    return energies.Measurements(
        unary_weights=np.linspace(-1.0, 1.0, 2 * num_tags).reshape(2, num_tags),
        offsets=np.array([0.5, -0.5]),
        weights=np.array([1.0, 0.5]),
        pairwise_weights=np.cos(np.arange(2 * num_tags**2)).reshape(2, num_tags, num_tags) / num_tags,
    )


#: Every registered method's setting, by method name.
SETTINGS: Mapping[str, Setting] = {
    "crf": Setting("brute-force"),
    "crf-scan": Setting("brute-force"),
    "bcrf": Setting("ibp-loop", {"iterations": 10}),
    "meanfield": Setting("meanfield-loop", {"iterations": 10}),
    "unstructured": Setting("closed-form"),
    "sparsemap": Setting("enumeration-qp", {"max_support": 64}),
    # the loop oracle runs every iteration
    "bethe": Setting("mirror-descent-loop", {"iterations": 10, "tolerance": None}, _measurements),
    # the dependency-tree methods (``crfbench.agreement_trees``)
    "tree-crf": Setting("enumeration"),
    "tree-sparsemap": Setting("enumeration-qp", {"max_support": 64}),
}
#: The NumPy oracles the report checks the methods against, by the names it gives them.
ORACLE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(setting.oracle_name for setting in SETTINGS.values()))


def agreement_options(method: str, num_tags: int, convert=None) -> dict[str, object]:
    """The options the report runs ``method`` with, with its energy for ``num_tags`` tags if it has
    one (its NumPy parameters passed through ``convert`` for a backend)."""
    setting = SETTINGS[method]
    options = dict(setting.options)
    if setting.energy is not None:
        energy = setting.energy(num_tags)
        options["energy"] = energy if convert is None else energies.with_arrays(energy, convert)
    return options


def run_backend(
    method: str, backend: str, instance: Instance, dtype: str
) -> dict[tuple[str, str], np.ndarray]:
    """Every contract function of ``method`` in ``backend``: {(function, quantity): array}."""
    module = implementations.get(method, backend)
    scores = (
        from_numpy(instance.emissions, backend, dtype),
        from_numpy(instance.transitions, backend, dtype),
    )
    lengths = from_numpy(instance.lengths, backend)
    boundary = {
        "start": from_numpy(instance.start, backend, dtype),
        "end": from_numpy(instance.end, backend, dtype),
    }
    options = agreement_options(method, instance.emissions.shape[-1], lambda a: from_numpy(a, backend, dtype))
    tags = from_numpy(instance.tags, backend)
    allowed = from_numpy(instance.allowed, backend)
    emissions, transitions = scores
    keywords: dict[str, Any] = {**boundary, **options}
    unary, pairwise = module.marginals(emissions, transitions, lengths, **keywords)
    results = {
        ("marginals", "unary"): unary,
        ("marginals", "pairwise"): pairwise,
        ("decode", "tags"): module.decode(emissions, transitions, lengths, **keywords),
        ("loss", "value"): module.loss(emissions, transitions, lengths, tags, **keywords),
        ("partial_loss", "value"): module.partial_loss(emissions, transitions, lengths, allowed, **keywords),
        ("log_partition", "value"): module.log_partition(emissions, transitions, lengths, **keywords),
    }
    return {key: to_numpy(value) for key, value in results.items()}


def _padded(rows: list[np.ndarray], shape: tuple[int, ...], fill: float) -> np.ndarray:
    out = np.full(shape, fill)
    for b, row in enumerate(rows):
        out[(b, *(slice(0, s) for s in row.shape))] = row  # type: ignore[index]
    return out


def run_reference(method: str, instance: Instance) -> tuple[str, dict[tuple[str, str], np.ndarray]] | None:
    """The oracle's name and its results in the backends' layout, or None where it cannot answer
    (the method's oracle in ``implementations.reference.oracles``, named by the registry)."""
    record = registry.REGISTRY[method]
    oracle = getattr(oracles, record.oracle)
    batch, length, num_tags = instance.emissions.shape
    answers = []
    for b in range(batch):
        n = int(instance.lengths[b])
        answer = oracle(
            instance.sequence(b),
            instance.tags[b, :n],
            instance.allowed[b, :n],
            **agreement_options(method, num_tags),
        )
        if answer is None:
            return None
        answers.append(answer)
    results = {
        (function, "value"): np.array([getattr(a, function) for a in answers])
        for function in ("log_partition", "loss", "partial_loss")
    }
    if answers[0].tags is None:  # checked by the score of the decoded path
        results["decode", "path_score"] = np.array([a.best_score for a in answers])
    else:
        results["decode", "tags"] = _padded([a.tags for a in answers], (batch, length), -1)
    results["marginals", "unary"] = _padded([a.unary for a in answers], (batch, length, num_tags), 0.0)
    results["marginals", "pairwise"] = _padded(
        [a.pairwise for a in answers], (batch, max(length - 1, 0), num_tags, num_tags), 0.0
    )
    return SETTINGS[method].oracle_name, results


def compare(
    got: np.ndarray, expected: np.ndarray, tolerance: tuple[float, float, float]
) -> tuple[float, float, float]:
    """(max_abs_err, max_rel_err, tolerance) of ``got`` against ``expected``; -inf matching -inf
    and +inf/NaN anywhere count as exact / infinite error."""
    atol, rtol, _ = tolerance
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    error = np.abs(np.subtract(got, expected, out=np.zeros_like(got), where=got != expected))
    error = np.where(np.isnan(error), np.inf, error)  # NaN anywhere: infinitely wrong
    scale = float(np.abs(np.where(np.isfinite(expected), expected, 0.0)).max(initial=0.0))
    worst = float(error.max(initial=0.0))
    return worst, worst / max(scale, np.finfo(np.float64).tiny), atol + rtol * scale


def compare_tags(
    got: np.ndarray, expected: np.ndarray, lengths: np.ndarray, tolerance: tuple[float, float, float]
) -> tuple[float, float, float]:
    """Fraction of positions whose decoded tag differs, against its tolerance."""
    inside = np.arange(got.shape[1])[None, :] < lengths[:, None]
    mismatch = float((got != expected)[inside].mean()) if inside.any() else 0.0
    return mismatch, mismatch, tolerance[2]


def _decoded_path_scores(tags: np.ndarray, instance: Instance) -> np.ndarray:
    return np.array(
        [
            brute_force.path_score(tags[b, : instance.lengths[b]], **instance.sequence(b))
            for b in range(tags.shape[0])
        ]
    )


def release_compiled(backends: tuple[str, ...]) -> None:
    """Drop JAX's compiled programs: those of one shape (N, T) are never reused once the grid
    moves on, and a full grid's worth (SparseMAP's solver loops among them) exhausts the process's
    memory mappings (LLVM: "Unable to allocate section memory")."""
    if "jax" in backends:
        import jax

        jax.clear_caches()


def agreement_rows(grid: Grid, backends: tuple[str, ...]) -> Iterator[dict[str, object]]:
    """One row per comparison, over the whole grid: the chain methods', then the dependency-tree
    methods' (``crfbench.agreement_trees``, which builds on this module, so imported here)."""
    points = itertools.product(grid.lengths, grid.num_tags, grid.neg_inf)
    shape = None
    for seed, (length, num_tags, neg_inf) in enumerate(points):
        if (length, num_tags) != shape:  # with and without -inf share the shape's programs
            release_compiled(backends)
            shape = (length, num_tags)
        instance = make_instance(length, num_tags, neg_inf, seed)
        for method in implementations.METHODS:
            reference = run_reference(method, instance)
            for dtype in grid.dtypes:
                tolerance = TOLERANCES[dtype]
                ours = {backend: run_backend(method, backend, instance, dtype) for backend in backends}
                pairs = [(a, b, ours[a], ours[b]) for a, b in itertools.combinations(backends, 2)]
                if reference is not None:
                    pairs += [(a, reference[0], ours[a], reference[1]) for a in backends]
                for backend_a, backend_b, got, expected in pairs:
                    for (function, quantity), value in expected.items():
                        if quantity == "tags":
                            errors = compare_tags(
                                got[(function, quantity)], value, instance.lengths, tolerance
                            )
                        elif quantity == "path_score":  # scored in float64 by the oracle
                            decoded_scores = _decoded_path_scores(got[(function, "tags")], instance)
                            errors = compare(decoded_scores, value, TOLERANCES["float64"])
                        else:
                            errors = compare(got[(function, quantity)], value, tolerance)
                        yield dict(
                            zip(
                                COLUMNS,
                                (
                                    method,
                                    function,
                                    quantity,
                                    backend_a,
                                    backend_b,
                                    length,
                                    num_tags,
                                    dtype,
                                    neg_inf,
                                    *errors,
                                    errors[0] <= errors[2],
                                ),
                                strict=True,
                            )
                        )
    from .agreement_trees import tree_rows

    yield from tree_rows(grid, backends)


def markdown_report(table: pd.DataFrame) -> str:
    """A readable summary: worst error per method, comparison and dtype, then every failure."""
    summary = (
        table.assign(ratio=table.max_abs_err / table.tolerance.where(table.tolerance > 0, np.nan))
        .groupby(["method", "backend_a", "backend_b", "dtype"], sort=False)
        .agg(
            comparisons=("ok", "size"),
            failed=("ok", lambda ok: int((~ok).sum())),
            worst_abs_err=("max_abs_err", "max"),
            worst_err_over_tolerance=("ratio", "max"),
        )
        .reset_index()
    )
    failures = table[~table.ok]
    lines = [
        "# Agreement between implementations",
        "",
        "Generated by `python -m crfbench agree` from `results/agreement/agreement.csv`; every "
        "backend against the other and against a NumPy oracle "
        f"({', '.join(ORACLE_NAMES)}). Tolerances: see `crfbench/agreement.py`.",
        "",
        f"{len(table)} comparisons, {int((~table.ok).sum())} outside tolerance.",
        "",
        summary.to_markdown(index=False, floatfmt=".2e"),
        "",
    ]
    if len(failures):
        lines += ["## Outside tolerance", "", failures.to_markdown(index=False, floatfmt=".2e"), ""]
    return "\n".join(lines)


def run(grid: Grid, backends: tuple[str, ...], csv_path: Path, report_path: Path) -> pd.DataFrame:
    """Compute every comparison, write the CSV and the Markdown report, return the table."""
    table = pd.DataFrame(agreement_rows(grid, backends), columns=COLUMNS)
    write_atomic(csv_path, table.to_csv(index=False, float_format="%.3e"))
    write_atomic(report_path, markdown_report(table))
    return table
