"""Citation field extraction with soft global count constraints (the Bethe-projection paper's
Table 1, Fig. 1 and App. B; digest §4.5(a)), on the UMass citation dataset
(:mod:`crfbench.data.citation`: hierarchical BIO path labels).

Stages of :func:`run` (each timed in the ``timings`` table):

1. **Baseline** (``chain-crf-baseline``): a linear-chain CRF whose emissions are sums of hashed
   sparse token features (:func:`token_features`) looked up in an ``EmbeddingBag`` (buckets, T),
   with learned transitions and start/end scores plus fixed ``-inf`` on the BIO-invalid ones
   (``I-p`` only after ``B-p``/``I-p``), trained on train with the CRF loss by
   :func:`crfbench.bethe.learning.fit` (Adam, early stopping on dev segment F1 of Viterbi).
   Because decoded sequences are BIO-valid, the number of ``B-p`` tags is the number of
   ``p`` segments, which the constraints count.
2. **Constraints** (:func:`constraints`), Anzaroot et al. (2014)-style soft counts on the expected
   number of segments of each label ``n_p = Σ_i μ_i(B-p)``, as one
   :class:`~implementations.energies.Measurements` energy ``Σ_j ψ_j ℓ̃(a_jᵀμ − b_j)`` (``ℓ̃``
   Rennie's smooth hinge, zero once ``a_jᵀμ ≥ b_j + 1``; offsets are set so that the penalty is
   zero exactly when the constraint holds and positive when it is violated):
   ``at-most-one:p`` (n_p ≤ 1) and ``at-least-one:p`` (n_p ≥ 1) for every label p, and
   ``not-fewer:p>=q`` (n_p ≥ n_q) for every ordered pair of the ``pair_labels`` most frequent
   labels (both directions, so a pair together asks for equal counts, e.g. as many first as last
   names). With the default 41 labels and 20 paired: 82 + 380 = 462 candidates.
3. **Penalties** ψ = c_j learned on dev by the paper's Algorithm 3 with θ fixed: Adam steps on
   ψ (started at 0) with the ``bethe`` loss ``−log Q(y; θ − ∇L_ψ(μ*))``, μ* held fixed, and ψ
   projected onto ψ ≥ 0 after every step (``fit``'s ``non_negative``) rather than learned freely and
   the negative ones dropped afterwards: the projection keeps the energy convex during learning,
   where the solver's guarantees hold, and a weight that would go negative sits at 0 instead,
   which is the paper's "ignore c_j < 0". Weights left at 0 are dropped (the ``constraints``
   table lists the kept ones). Early stopping on the dev F1 of the non-local decoder.
4. **Evaluation** on test: segment F1 (seqeval entity F1 on the path labels, conlleval-style
   micro average over all segment types, in %) of Viterbi for the baseline and of the ``bethe``
   ``decode`` (Viterbi on θ − ∇L(μ*), Algorithm 1 = ``rda``) for the non-local model; the same F1
   when the solver's iterations are capped (Fig. 1); and, from ``solve``, each test citation's
   iterations to convergence, the first iteration whose largest marginal change is within a
   tolerance, for each of ``convergence_tolerances`` (App. B; not converged within
   ``iterations``: ``converged`` False, ``iterations`` = the cap).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import torch

import implementations
from implementations.energies import Measurements

from .. import schema
from ..data.citation import OUTSIDE, Citation, LabelScheme, label_scheme, read_split
from ..metrics import entity_scores, tag_counts
from ..schema import SENTENCE_COLUMNS
from .citation_features import (  # noqa: F401  (shape, token_features, hashed: re-exported)
    Batch,
    Encoded,
    batches,
    encode,
    hashed,
    shape,
    token_features,
)
from .learning import Curve, fit

BASELINE, NONLOCAL = schema.CITATION_BASELINE, schema.CITATION_NONLOCAL
DTYPE = torch.float32


@dataclass(frozen=True)
class Settings:
    """The experiment's knobs. The defaults are the full run on the real data (5–7 minutes on
    one CPU thread); ``energy_learning_rate`` was picked on dev among 0.02, 0.05 and 0.1 (dev F1
    92.87 after 6 epochs, 92.85 after 3, 92.54: within noise, so the cheapest), the rest were
    set once, not tuned.

    - ``min_segments``: a label path is kept if it labels that many training segments (41 paths,
      83 tags with 5).
    - ``buckets``: hashed feature buckets (2¹⁷; collisions are rare with ~10⁵ distinct features).
    - ``batch_size``: citations per minibatch; batches hold citations of similar length, so the
      padded length (the solver's cost) stays near the citations' own.
    - ``crf_epochs``, ``crf_learning_rate``: the baseline's epoch cap and Adam step size.
    - ``patience``: epochs without a dev improvement before stopping (both stages).
    - ``pair_labels``: how many of the most frequent labels get pairwise constraints.
    - ``energy_epochs``, ``energy_learning_rate``: the ψ stage's epoch cap and Adam step size.
    - ``learning_iterations``: solver iterations for μ* while learning ψ (cheaper than at test;
      the paper's Fig. 1 says most of the gain comes within 5–10).
    - ``iterations``, ``tolerance``: the test-time solver's cap (the paper's 40) and stopping
      tolerance on the largest change of a marginal between iterations (unstated in the paper).
    - ``caps``: the iteration caps of Fig. 1.
    - ``convergence_tolerances``: the tolerances at which each test citation's iterations to
      convergence are counted (App. B's histogram; the paper does not state its own).
    - ``max_citations``: use only the first that many citations of each split (None: all).
    """

    min_segments: int = 5
    buckets: int = 2**17
    batch_size: int = 32
    crf_epochs: int = 15
    crf_learning_rate: float = 0.02
    patience: int = 2
    pair_labels: int = 20
    energy_epochs: int = 10
    energy_learning_rate: float = 0.05
    learning_iterations: int = 10
    iterations: int = 40
    tolerance: float = 1e-3
    caps: tuple[int, ...] = (1, 2, 3, 5, 10, 20, 40)
    convergence_tolerances: tuple[float, ...] = (1e-3, 1e-4)
    max_citations: int | None = None


# ----------------------------------------------------------------------------------------- the model


def bio_masks(tags: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """``-inf`` where BIO forbids: transitions (T, T) into ``I-p`` from anything but ``B-p``/``I-p``,
    and starting with an ``I-`` tag (T,); 0 elsewhere."""
    forbidden_transitions = torch.zeros(len(tags), len(tags), dtype=DTYPE)
    forbidden_start = torch.zeros(len(tags), dtype=DTYPE)
    for j, tag in enumerate(tags):
        if tag.startswith("I-"):
            forbidden_start[j] = -torch.inf
            for i, previous in enumerate(tags):
                if previous[2:] != tag[2:] or previous == OUTSIDE:
                    forbidden_transitions[i, j] = -torch.inf
    return forbidden_transitions, forbidden_start


class ChainCRF(torch.nn.Module):
    """Hashed-feature emissions ``Σ_f W[f]`` (an EmbeddingBag (buckets, T)), transitions (T, T),
    start and end scores (T,), all learned from zero, plus the fixed BIO masks."""

    forbidden_transitions: torch.Tensor  # buffers, registered in __init__
    forbidden_start: torch.Tensor

    def __init__(self, tags: Sequence[str], buckets: int) -> None:
        super().__init__()
        size = len(tags)
        self.table = torch.nn.EmbeddingBag(buckets, size, mode="sum", padding_idx=0, dtype=DTYPE)
        torch.nn.init.zeros_(self.table.weight)
        self.transitions = torch.nn.Parameter(torch.zeros(size, size, dtype=DTYPE))
        self.start = torch.nn.Parameter(torch.zeros(size, dtype=DTYPE))
        self.end = torch.nn.Parameter(torch.zeros(size, dtype=DTYPE))
        forbidden_transitions, forbidden_start = bio_masks(tags)
        self.register_buffer("forbidden_transitions", forbidden_transitions)
        self.register_buffer("forbidden_start", forbidden_start)

    def scores(self, features: torch.Tensor, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        """The contract's score arguments for a batch: emissions (B, N, T), transitions (T, T),
        lengths (B,), start and end (T,)."""
        batch, length, width = features.shape
        emissions = self.table(features.reshape(-1, width)).reshape(batch, length, -1)
        return {
            "emissions": emissions,
            "transitions": self.transitions + self.forbidden_transitions,
            "lengths": lengths,
            "start": self.start + self.forbidden_start,
            "end": self.end,
        }


def decode_all(
    model: ChainCRF, data: Encoded, scheme: LabelScheme, decode: Callable[..., torch.Tensor], size: int
) -> list[list[str]]:
    """Every citation's predicted labels, in the split's order, by ``decode(**scores)`` (B, N)."""
    predicted: list[list[str]] = [[] for _ in data.gold]
    with torch.no_grad():
        for rows, features, lengths, _ in batches(data, size):
            tags = decode(**model.scores(features, lengths))
            for row, citation in enumerate(rows):
                predicted[citation] = [scheme.tags[t] for t in tags[row, : int(lengths[row])].tolist()]
    return predicted


def segment_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Segment-level F1 in %: seqeval's entity F1 on the path labels (micro-averaged)."""
    return 100.0 * entity_scores(gold, predicted)["f1"]


def train_baseline(
    model: ChainCRF, train: Encoded, dev: Encoded, scheme: LabelScheme, settings: Settings, seed: int
) -> Curve:
    """Fit the CRF on ``train`` by :func:`fit`, early-stopped on dev F1 of Viterbi; the curve."""
    crf = implementations.get("crf", "torch")

    def loss(batch: Batch) -> torch.Tensor:
        _, features, lengths, tags = batch
        # the contract's Protocols type the scores positional-only; the kernels take keywords too
        return crf.loss(**model.scores(features, lengths), tags=tags)

    return fit(
        list(model.parameters()),
        loss,
        lambda epoch: batches(train, settings.batch_size, np.random.default_rng([seed, epoch])),
        lambda: segment_f1(dev.gold, decode_all(model, dev, scheme, crf.decode, settings.batch_size)),
        epochs=settings.crf_epochs,
        learning_rate=settings.crf_learning_rate,
        patience=settings.patience,
    )


# ----------------------------------------------------------------------------------------- constraints


@dataclass(frozen=True)
class Constraints:
    """Candidate soft constraints: ``names`` (J,), ``unary_weights`` a (J, T) on the expected tag
    counts and ``offsets`` b (J,), so that ``a_jᵀμ − b_j ≥ 1`` (zero penalty) exactly when
    constraint j holds."""

    names: tuple[str, ...]
    unary_weights: torch.Tensor
    offsets: torch.Tensor

    def energy(self, weights: torch.Tensor) -> Measurements:
        """The energy ``Σ_j ψ_j ℓ̃(a_jᵀμ − b_j)`` with ``weights`` ψ (J,)."""
        return Measurements(self.unary_weights, self.offsets, weights)

    def subset(self, keep: torch.Tensor) -> Constraints:
        """The constraints where ``keep`` (J,) bool is set."""
        names = tuple(name for name, kept in zip(self.names, keep.tolist(), strict=True) if kept)
        return Constraints(names, self.unary_weights[keep], self.offsets[keep])


def constraints(scheme: LabelScheme, pair_labels: int) -> Constraints:
    """The candidate set of the module docstring: per label ``at-most-one`` (−n_p ≥ −1, b = −2) and
    ``at-least-one`` (n_p ≥ 1, b = 0); per ordered pair of the ``pair_labels`` first (most frequent)
    labels ``not-fewer`` (n_p − n_q ≥ 0, b = −1); n_p counts ``B-p`` tags."""
    begin = {path: scheme.tags.index(f"B-{path}") for path in scheme.paths}
    names, rows, offsets = [], [], []

    def add(name: str, counts: dict[str, float], bound: float) -> None:
        row = torch.zeros(len(scheme.tags), dtype=DTYPE)
        for path, coefficient in counts.items():
            row[begin[path]] = coefficient
        names.append(name)
        rows.append(row)
        offsets.append(bound - 1.0)  # ℓ̃(z) = 0 iff z ≥ 1, i.e. a_jᵀμ ≥ bound

    for path in scheme.paths:
        add(f"at-most-one:{path}", {path: -1.0}, -1.0)
        add(f"at-least-one:{path}", {path: 1.0}, 1.0)
    paired = scheme.paths[:pair_labels]
    for p in paired:
        for q in paired:
            if p != q:
                add(f"not-fewer:{p}>={q}", {p: 1.0, q: -1.0}, 0.0)
    return Constraints(tuple(names), torch.stack(rows), torch.tensor(offsets, dtype=DTYPE))


def bethe_options(energy: Measurements, iterations: int, tolerance: float) -> dict[str, Any]:
    """The ``bethe`` method's options: Algorithm 1 (``rda``, β = 0), last iterate."""
    return {"energy": energy, "solver": "rda", "iterations": iterations, "tolerance": tolerance}


def learn_penalties(
    model: ChainCRF, dev: Encoded, scheme: LabelScheme, candidates: Constraints, settings: Settings, seed: int
) -> tuple[torch.Tensor, Curve]:
    """ψ ≥ 0 (J,) learned on ``dev`` by Algorithm 3 with the CRF's parameters θ fixed (they take
    no gradient meanwhile); returns (ψ, curve)."""
    bethe = implementations.get("bethe", "torch")
    weights = torch.zeros(len(candidates.names), dtype=DTYPE, requires_grad=True)
    options = bethe_options(candidates.energy(weights), settings.learning_iterations, settings.tolerance)
    model.requires_grad_(False)

    def loss(batch: Batch) -> torch.Tensor:
        _, features, lengths, tags = batch
        # the contract's Protocols type the scores positional-only; the kernels take keywords too
        return bethe.loss(**model.scores(features, lengths), tags=tags, **options)

    def dev_score() -> float:
        frozen = bethe_options(
            candidates.energy(weights.detach()), settings.learning_iterations, settings.tolerance
        )
        decode = lambda **scores: bethe.decode(**scores, **frozen)  # noqa: E731
        return segment_f1(dev.gold, decode_all(model, dev, scheme, decode, settings.batch_size))

    curve = fit(
        [weights],
        loss,
        lambda epoch: batches(dev, settings.batch_size, np.random.default_rng([seed, 1000 + epoch])),
        dev_score,
        epochs=settings.energy_epochs,
        learning_rate=settings.energy_learning_rate,
        patience=settings.patience,
        non_negative=[weights],
    )
    model.requires_grad_(True)
    return weights.detach(), curve


# ----------------------------------------------------------------------------------------- evaluation


def iterations_to_converge(errors: torch.Tensor, tolerance: float, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """From ``solve``'s errors (iterations, B) (NaN where not run): per citation the first iteration
    whose change is ≤ ``tolerance`` and whether there is one (else ``cap``, False)."""
    below = (errors <= tolerance).numpy()  # NaN compares False
    converged = cast(np.ndarray, below.any(axis=0))  # (B,): any over axis 0 of a 2-D array
    first = np.where(converged, below.argmax(axis=0) + 1, cap)
    return first, converged


def convergence_table(
    model: ChainCRF, test: Encoded, energy: Measurements, settings: Settings
) -> pd.DataFrame:
    """One row per test citation (split order) and convergence tolerance: ``tolerance``,
    ``citation``, ``iterations``, ``converged``. One ``solve`` at the smallest tolerance serves them
    all: a citation's iterates do not depend on when the batch stops, so its change history up to
    any larger tolerance's first hit is the same."""
    bethe = implementations.get("bethe", "torch")
    tolerances = settings.convergence_tolerances
    iterations = np.zeros((len(tolerances), len(test.gold)), dtype=np.int64)
    converged = np.zeros((len(tolerances), len(test.gold)), dtype=bool)
    options = bethe_options(energy, settings.iterations, min(tolerances))
    with torch.no_grad():
        for rows, features, lengths, _ in batches(test, settings.batch_size):
            # the contract's Protocols type the scores positional-only; the kernels take keywords too
            scores = model.scores(features, lengths)
            errors = bethe.solve(**scores, **options).errors  # (iterations, B)
            for k, tolerance in enumerate(tolerances):
                iterations[k, rows], converged[k, rows] = iterations_to_converge(
                    errors, tolerance, settings.iterations
                )
    return pd.DataFrame(
        {
            "tolerance": np.repeat(tolerances, len(test.gold)),
            "citation": np.tile(np.arange(len(test.gold)), len(tolerances)),
            "iterations": iterations.ravel(),
            "converged": converged.ravel(),
        }
    )


def nonlocal_labels(
    model: ChainCRF,
    data: Encoded,
    scheme: LabelScheme,
    energy: Measurements,
    iterations: int,
    settings: Settings,
) -> list[list[str]]:
    """Every citation's labels by the ``bethe`` decoder with the solver capped at ``iterations``."""
    bethe = implementations.get("bethe", "torch")
    options = bethe_options(energy, iterations, settings.tolerance)
    decode = lambda **scores: bethe.decode(**scores, **options)  # noqa: E731
    return decode_all(model, data, scheme, decode, settings.batch_size)


#: Columns of the tables a run writes (each with its seed, so that runs concatenate): ``crfbench.schema``'s,
#: which the report and ``crfbench aggregate`` read too.
SCORE_COLUMNS, CAP_COLUMNS = schema.CITATION_SCORE_COLUMNS, schema.CITATION_CAP_COLUMNS
ITERATION_COLUMNS = schema.CITATION_ITERATION_COLUMNS
#: The per-citation table's dataset and encoder names (the suite's per-sentence counts,
#: ``crfbench.schema.SENTENCE_COLUMNS``, so that the claim ledger pairs models over test citations).
DATASET, ENCODER = schema.CITATION_DATASET, schema.CITATION_ENCODER


def sentences(
    gold: Sequence[Sequence[str]], predictions: dict[tuple[str, str], list[list[str]]], seed: int
) -> pd.DataFrame:
    """One row per (model, decoder, test citation): the citation's counts (segments as seqeval
    reads them) under each model's decoder, e.g. (``nonlocal-energies``, ``bethe-10``)."""
    rows = [
        {
            "dataset": DATASET,
            "encoder_name": ENCODER,
            "loss": model,
            "seed": seed,
            "split": "test",
            "decoder": decoder,
            "sentence": index,
            **tag_counts("ner", gold_tags, predicted_tags),
            "invalid": 0,  # the decoders forbid invalid BIO transitions
        }
        for (model, decoder), labels in predictions.items()
        for index, (gold_tags, predicted_tags) in enumerate(zip(gold, labels, strict=True))
    ]
    return pd.DataFrame(rows, columns=list(SENTENCE_COLUMNS))


# ----------------------------------------------------------------------------------------- the experiment


def experiment(
    splits: dict[str, Sequence[Citation]], settings: Settings = Settings(), seed: int = 0
) -> dict[str, pd.DataFrame]:
    """The whole study on ``splits`` (train, dev, test citations): the tables ``scores`` (model,
    segment_f1 on test, dev_f1, best_epoch, epochs_run), ``iteration_cap`` (cap, segment_f1),
    ``iterations`` (tolerance, citation, iterations, converged), ``constraints`` (the kept ones: name,
    weight), ``curves`` (stage, epoch, loss, dev, seconds), ``timings`` (stage, seconds) and
    ``settings`` (name, value). Deterministic given ``seed`` (shuffling; parameters start at 0)."""
    torch.manual_seed(seed)
    timings: list[dict[str, Any]] = []
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings.append({"stage": stage, "seconds": now - clock})
        clock = now

    limit = settings.max_citations
    train, dev, test = (list(splits[name])[:limit] for name in ("train", "dev", "test"))
    scheme = label_scheme(train, settings.min_segments)
    data = {
        name: encode(part, scheme, settings.buckets)
        for name, part in (("train", train), ("dev", dev), ("test", test))
    }
    lap("features")

    model = ChainCRF(scheme.tags, settings.buckets)
    crf_curve = train_baseline(model, data["train"], data["dev"], scheme, settings, seed)
    crf = implementations.get("crf", "torch")
    gold = data["test"].gold
    predictions = {
        (BASELINE, "viterbi"): decode_all(model, data["test"], scheme, crf.decode, settings.batch_size)
    }
    lap("baseline")

    candidates = constraints(scheme, settings.pair_labels)
    weights, energy_curve = learn_penalties(model, data["dev"], scheme, candidates, settings, seed)
    keep = weights > 0
    kept = candidates.subset(keep)
    energy = kept.energy(weights[keep])
    lap("penalties")

    caps = dict.fromkeys((*settings.caps, settings.iterations))  # the test-time solver's own last
    decoders = {cap: "bethe" if cap == settings.iterations else f"bethe-{cap}" for cap in caps}
    for cap, decoder in decoders.items():
        predictions[NONLOCAL, decoder] = nonlocal_labels(model, data["test"], scheme, energy, cap, settings)
    f1_at = {cap: segment_f1(gold, predictions[NONLOCAL, decoder]) for cap, decoder in decoders.items()}
    lap("nonlocal-test")  # the test F1 at every cap, the test-time solver's own included
    iterations = convergence_table(model, data["test"], energy, settings)
    lap("convergence")

    scores = pd.DataFrame(
        [
            {
                "seed": seed,
                "model": BASELINE,
                "segment_f1": segment_f1(gold, predictions[BASELINE, "viterbi"]),
                **_curve_summary(crf_curve),
            },
            {
                "seed": seed,
                "model": NONLOCAL,
                "segment_f1": f1_at[settings.iterations],
                **_curve_summary(energy_curve),
            },
        ],
        columns=list(SCORE_COLUMNS),
    )
    curves = pd.DataFrame(
        [
            {"stage": stage, **row}
            for stage, curve in (("baseline", crf_curve), ("penalties", energy_curve))
            for row in curve.rows
        ]
    )
    return {
        "scores": scores,
        "iteration_cap": pd.DataFrame(
            {"seed": seed, "cap": settings.caps, "segment_f1": [f1_at[c] for c in settings.caps]},
            columns=list(CAP_COLUMNS),
        ),
        "iterations": iterations.assign(seed=seed)[list(ITERATION_COLUMNS)],
        "sentences": sentences(gold, predictions, seed),
        "constraints": pd.DataFrame({"name": kept.names, "weight": weights[keep].tolist()}),
        "curves": curves,
        "timings": pd.DataFrame(timings),
        "settings": pd.DataFrame(
            {"name": list(asdict(settings)), "value": [str(v) for v in asdict(settings).values()]}
        ),
    }


def _curve_summary(curve: Curve) -> dict[str, float]:
    """The dev F1 of the kept epoch, that epoch and how many epochs ran."""
    return {
        "dev_f1": curve.rows[curve.best_epoch]["dev"],
        "best_epoch": curve.best_epoch,
        "epochs_run": len(curve.rows) - 1,
    }


def run(
    data_dir: str | Path | None, settings: Settings = Settings(), seed: int = 0
) -> dict[str, pd.DataFrame]:
    """:func:`experiment` on the UMass citation files under the data dir (``data_dir``, else
    ``$CRFBENCH_DATA``; markup repaired)."""
    splits: dict[str, Sequence[Citation]] = {
        split: read_split(data_dir, split) for split in ("train", "dev", "test")
    }
    return experiment(splits, settings, seed)
