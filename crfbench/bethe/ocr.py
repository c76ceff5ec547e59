"""The OCR study of Vilnis et al. (2015), their Table 4 (digest §4.5(b)): handwritten words of
Taskar's OCR data, character accuracy of a chain CRF alone and with non-convex template energies.

Protocol for test fold f: train on the other nine folds and test on fold f (the paper's "train on
9, test on 1"). A random 10 % of the training words (``Settings.dev_fraction``, drawn from the
seed) is held out as the dev set that early stopping reads (``fit``'s dev score is the dev
character accuracy); the other 90 % are trained on. The templates of the energies are the distinct
words of all nine training folds, dev part included (templates are not fitted by gradient, and the
paper builds them from the training words).

Models (the ``model`` column):

- ``2gram-base``: chain CRF, emissions a linear map of the 128 pixels (128 → 26 plus bias),
  transitions 26 × 26 edge biases, no start/end scores; trained with the CRF loss.
- ``Lu``, ``Lu-MM``, ``Lw``, ``Lw-MM``: the base model plus ``L^u_ψ`` (distance of the expected
  letter counts to the nearest training word's counts) or ``L^w_ψ`` (distance of the node marginals
  to the nearest same-length training word), ``implementations.energies``. θ starts from the
  trained base model and is learned jointly with ψ by Algorithm 3 (``fit`` on the ``bethe``
  method's loss, μ* held fixed). ψ is one learned scalar, kept ≥ 0 by projection; or, for ``-MM``,
  ψ(x) = softplus(vᵀφ(x)/√D + c) on the word's random-Fourier-feature mean map φ(x) (softplus keeps
  ψ > 0 smoothly; at the start v = 0 and softplus(c) = ``psi_init``). Prediction is Viterbi on the
  tilted scores θ − s, s the shift of the solver's last projection (``tilt="dual"``), whose
  marginals are μ*; learning uses the same scores, so its gradients are Algorithm 3's.
- ``55-class-classifier-MM``: multinomial logistic regression over the distinct training words on
  φ(x), where only the words of the input's length compete; its character accuracy is that of the
  predicted word (an input whose length no training word has counts as all wrong).

Why not the paper's θ − ∇L_ψ(μ*): the template energies are ℓ₁ distances, whose subgradient is
±ψ per letter wherever the expected counts are not exactly the template's, however close. On
fold 0 (base model's θ, full template bank, 5 iterations) that tilt overshoots: character accuracy
92.1 at ψ = 1 but 89.0 at ψ = 2, 67.2 at ψ = 4 and 44.3 at ψ = 8, even with the gold word as the
only template (68.8 at ψ = 4); learning settles on ψ ≈ 1.2 and L^u ends near 91.7 % over the 10
folds, 2.3 points under the paper's 94.01. Tilting by the solver's shift gives 94.0 at ψ = 2 and
93.4 at ψ = 4 on the same fold (98.4 with the gold template at ψ = 4, 40 iterations).

φ(x) = mean over letters i of sqrt(2/D) cos(W x_i + b), W (D, 128) Gaussian with standard deviation
1/``bandwidth``, b uniform on [0, 2π): random features of the Gaussian kernel
exp(−‖x − x'‖² / (2 bandwidth²)), averaged over the word (a kernel mean map). The default D = 1024
is the paper's "about 1000" (cheap here: φ is computed once per word; on fold 0 the classifier
reached 84.9 % with D = 256 and 88.0 % with D = 1024). The default bandwidth 4 is a little below
the median distance between two letters' pixel vectors in the real data (median squared distance
41, distance 6.4); on fold 0 it beat 6 and 9 for the classifier.

Solver: Bethe-RDA with at most 5 iterations and tolerance 1e-3. With L^w the nearest template is
settled after the first oracle call, so every word stops after 2 iterations; with L^u test accuracy
at fixed ψ moved by less than one point between caps of 3 and 40 iterations (fold 0, 1000 words).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

import implementations
from implementations import energies

from .. import schema
from ..data.ocr import PIXELS, Word
from .learning import Curve, fit
from .ocr_data import NUM_TAGS, Templates, Words, accuracy, batches, pad, split, templates, word_counts

#: The rows of a fold's table, in order, its columns, and those that hold numbers: ``crfbench.schema``'s,
#: which the report and ``crfbench aggregate`` read too.
MODELS, COLUMNS, NUMBERS = schema.OCR_MODELS, schema.OCR_COLUMNS, schema.OCR_NUMBERS
BASE, CLASSIFIER = MODELS[0], MODELS[-1]


@dataclass(frozen=True)
class Settings:
    """Hyperparameters of one fold's run. Learning rates are Adam's; an epoch cap is reached only if
    the dev accuracy still improves (``patience`` epochs without improvement stop a run early)."""

    dev_fraction: float = 0.1  # share of the training words held out for early stopping
    max_train_words: int | None = None  # subsample the nine training folds' words (None: all), for speed
    batch_size: int = 32  # words per minibatch (Adam step)
    patience: int = 5  # epochs without a better dev accuracy that stop a run
    base_epochs: int = 40  # epoch cap of the chain CRF
    base_learning_rate: float = 0.02
    template_epochs: int = 25  # epoch cap of each energy's model (θ from the base, ψ from psi_init)
    template_learning_rate: float = 0.01
    classifier_epochs: int = 60  # epoch cap of the word classifier
    classifier_learning_rate: float = 0.05
    rff_features: int = 1024  # D, random Fourier features of the mean map (the paper: about 1000)
    bandwidth: float = 4.0  # the Gaussian kernel's length scale, in pixels (a unit per pixel)
    psi_init: float = 1.0  # ψ at the start (the best fixed scalar ψ for L^u on fold 0's dev words)
    solver: str = "rda"  # the bethe method's solver (Algorithm 1) ...
    iterations: int = 5  # ... its iteration cap (the paper: most of the gain within 5–10) ...
    tolerance: float = 1e-3  # ... and its stopping test: no marginal changed by more than this ...
    tilt: str = "dual"  # ... and the scores it decodes and learns on (the bethe method's option)
    models: tuple[str, ...] = MODELS


@dataclass(frozen=True)
class Chain:
    """The base model's parameters: emissions ``pixels @ weight + bias`` (128, 26) and (26,),
    ``transitions`` (26, 26)."""

    weight: Tensor
    bias: Tensor
    transitions: Tensor

    @staticmethod
    def zeros() -> Chain:
        """All parameters zero (the CRF loss is convex in them, so no random start is needed)."""
        return Chain(
            *(
                torch.zeros(shape, requires_grad=True)
                for shape in ((PIXELS, NUM_TAGS), NUM_TAGS, (NUM_TAGS, NUM_TAGS))
            )
        )

    def copy(self) -> Chain:
        """Fresh leaf tensors with the same values (to train from them, leaving these as they are)."""
        return Chain(*(p.detach().clone().requires_grad_() for p in self.parameters()))

    def parameters(self) -> list[Tensor]:
        return [self.weight, self.bias, self.transitions]

    def emissions(self, words: Words) -> Tensor:
        """(B, N, 26)."""
        return words.pixels @ self.weight + self.bias


@dataclass(frozen=True)
class Psi:
    """The energy's weight: a ``scalar`` ψ ≥ 0 (``mean_map`` None), or ψ(x) = softplus(vᵀφ(x)/√D + c)
    with ``mean_map`` v (D,) and ``scalar`` c. The 1/√D is for Adam, whose step is about the
    learning rate on every coordinate: without it one step moves vᵀφ(x) about √D times as far as
    c, and on every one of the 10 folds the dev accuracy of L^u-MM never improved on its start."""

    scalar: Tensor
    mean_map: Tensor | None

    @staticmethod
    def initial(value: float, features: int | None) -> Psi:
        """ψ = ``value`` everywhere: the scalar itself, or v = 0 and softplus(c) = ``value`` for a mean
        map of ``features`` dimensions."""
        if features is None:
            return Psi(torch.tensor(value, requires_grad=True), None)
        offset = torch.tensor(math.log(math.expm1(value)), requires_grad=True)
        return Psi(offset, torch.zeros(features, requires_grad=True))

    def parameters(self) -> list[Tensor]:
        return [self.scalar] if self.mean_map is None else [self.scalar, self.mean_map]

    def __call__(self, words: Words) -> Tensor:
        """ψ: 0-d, or (B,) one per word."""
        if self.mean_map is None:
            return self.scalar
        scale = self.mean_map.shape[0] ** -0.5
        return torch.nn.functional.softplus(scale * (words.features @ self.mean_map) + self.scalar)


# ------------------------------------------------------------------------------ models


@dataclass(frozen=True)
class Trained:
    """A trained model: its predictor (B, N) tags, its training curve, the mean ψ over the training
    words (energies only), and the options of the bethe solver it decodes with (energies only)."""

    predict: Callable[[Words], Tensor]
    curve: Curve
    psi: float = float("nan")
    solver_inputs: Callable[[Words], dict[str, object]] | None = None


def early_stopped(
    parameters: list[Tensor],
    loss: Callable[[Words], Tensor],
    predict: Callable[[Words], Tensor],
    data: tuple[Words, Words, Settings, int],
    **options: Any,
) -> Curve:
    """How every model of a fold trains: ``fit`` of ``parameters`` on ``loss`` over the shuffled
    minibatches of ``data`` = (train, dev, settings, seed), stopped early on the dev character
    accuracy of ``predict`` with the settings' batch size and patience; ``options`` (epochs,
    learning rate, ...) go to ``fit``."""
    train, dev, settings, seed = data
    return fit(
        parameters,
        loss,
        batches(train, settings.batch_size, seed),
        lambda: accuracy(predict, dev),
        patience=settings.patience,
        **options,
    )


def train_base(train: Words, dev: Words, settings: Settings, seed: int) -> tuple[Chain, Trained]:
    """The chain CRF, from zero parameters (its loss is convex), with the CRF loss."""
    crf = implementations.get("crf", "torch")
    chain = Chain.zeros()

    def predict(words: Words) -> Tensor:
        return crf.decode(chain.emissions(words), chain.transitions, words.lengths)

    def loss(words: Words) -> Tensor:
        return crf.loss(chain.emissions(words), chain.transitions, words.lengths, words.tags)

    curve = early_stopped(
        chain.parameters(),
        loss,
        predict,
        (train, dev, settings, seed),
        epochs=settings.base_epochs,
        learning_rate=settings.base_learning_rate,
    )
    return chain, Trained(predict, curve)


def energy(kind: str, bank: Templates, weights: Tensor) -> energies.Energy:
    """``L^u`` (``kind`` "Lu") or ``L^w`` ("Lw") over the templates ``bank`` with weights ψ."""
    if kind == "Lu":
        return energies.UnigramTemplates(bank.counts, weights)
    return energies.WordTemplates(bank.one_hot, bank.lengths, weights)


def train_templates(
    model: str, base: Chain, bank: Templates, train: Words, dev: Words, settings: Settings, seed: int
) -> Trained:
    """``model`` ("Lu", "Lu-MM", "Lw" or "Lw-MM"): θ (from ``base``) and ψ learned jointly by
    Algorithm 3, ``fit`` on the bethe method's loss with the energy (μ* held fixed)."""
    bethe = implementations.get("bethe", "torch")
    kind, with_mean_map = model[:2], model.endswith("-MM")
    chain = base.copy()
    psi = Psi.initial(settings.psi_init, train.features.shape[1] if with_mean_map else None)

    def inputs(words: Words) -> dict[str, object]:
        return {
            "emissions": chain.emissions(words),
            "transitions": chain.transitions,
            "lengths": words.lengths,
            "start": None,
            "end": None,
            "energy": energy(kind, bank, psi(words)),
            "solver": settings.solver,
            "iterations": settings.iterations,
            "tolerance": settings.tolerance,
            "tilt": settings.tilt,
        }

    # the contract's Protocols type the scores positional-only; the kernels take keywords too
    def predict(words: Words) -> Tensor:
        return bethe.decode(**inputs(words))

    curve = early_stopped(
        chain.parameters() + psi.parameters(),
        lambda words: bethe.loss(**inputs(words), tags=words.tags),
        predict,
        (train, dev, settings, seed),
        epochs=settings.template_epochs,
        learning_rate=settings.template_learning_rate,
        non_negative=psi.parameters() if psi.mean_map is None else (),
    )
    with torch.no_grad():
        mean_psi = float(torch.as_tensor(psi(train)).mean())
    return Trained(predict, curve, mean_psi, inputs)


def solver_iterations(inputs: Callable[[Words], dict[str, object]], words: Words, tolerance: float) -> float:
    """Mean over ``words`` of the iterations the bethe solver runs on each: up to its first iteration
    whose change is within ``tolerance`` (the cap if none is)."""
    bethe = implementations.get("bethe", "torch")
    counts = []
    with torch.no_grad():
        for chunk in words.chunks():
            out = bethe.solve(**inputs(chunk))
            within = out.errors[: int(out.iterations)] <= tolerance  # (iterations run, B)
            first = within.float().argmax(0) + 1
            counts.append(torch.where(within.any(0), first, within.shape[0]).float())
    return float(torch.cat(counts).mean())


def template_index(bank: Templates, words: Words) -> Tensor:
    """(B,) the index of each word's tag sequence among the templates, -1 if it is none of them."""
    gold = torch.nn.functional.one_hot(words.tags.clamp(min=0), NUM_TAGS) * (words.tags >= 0)[..., None]
    agreement = torch.einsum("bnt,knt->bk", gold.float(), bank.one_hot[:, : words.tags.shape[1]])
    same = (agreement == words.lengths[:, None]) & (bank.lengths[None] == words.lengths[:, None])
    return torch.where(same.any(1), same.float().argmax(1), -1)


def train_classifier(bank: Templates, train: Words, dev: Words, settings: Settings, seed: int) -> Trained:
    """Length-constrained multinomial logistic regression from φ(x) to the K training words."""
    weight = torch.zeros(train.features.shape[1], bank.lengths.shape[0], requires_grad=True)
    bias = torch.zeros(bank.lengths.shape[0], requires_grad=True)

    def logits(words: Words) -> Tensor:
        """(B, K), −inf for the templates of another length."""
        same = bank.lengths[None] == words.lengths[:, None]
        return (words.features @ weight + bias).masked_fill(~same, -math.inf)

    def predict(words: Words) -> Tensor:
        scores = logits(words)
        tags = bank.one_hot[scores.argmax(1), : words.tags.shape[1]].argmax(-1)  # (B, N)
        return torch.where(torch.isfinite(scores).any(1)[:, None], tags, -1)

    def loss(words: Words) -> Tensor:
        return torch.nn.functional.cross_entropy(logits(words), template_index(bank, words))

    curve = early_stopped(
        [weight, bias],
        loss,
        predict,
        (train, dev, settings, seed),
        epochs=settings.classifier_epochs,
        learning_rate=settings.classifier_learning_rate,
    )
    return Trained(predict, curve)


# ------------------------------------------------------------------------------ one fold


#: How each model decodes (the ``decoder`` of its per-word rows).
DECODERS = {BASE: "viterbi", CLASSIFIER: "classifier"} | dict.fromkeys(
    ("Lu", "Lu-MM", "Lw", "Lw-MM"), "bethe"
)
#: The per-word table's columns: the suite's per-sentence counts (``crfbench.schema``), so that the
#: claim ledger bootstraps its intervals over the test words of every fold.
SENTENCE_COLUMNS = schema.SENTENCE_COLUMNS
DATASET, ENCODER = schema.OCR_DATASET, schema.OCR_ENCODER


def row(
    fold: int, model: str, trained: Trained, test: Words, settings: Settings, start: float
) -> tuple[dict[str, object], tuple[np.ndarray, np.ndarray]]:
    """The table row of ``model`` evaluated on ``test`` (``start``: when its training began), and
    each test word's (correct, letters)."""
    correct, total = word_counts(trained.predict, test)
    iterations = (
        float("nan")
        if trained.solver_inputs is None
        else solver_iterations(trained.solver_inputs, test, settings.tolerance)
    )
    curve = trained.curve
    summary = {
        "fold": fold,
        "model": model,
        "char_accuracy": 100.0 * correct.sum() / total.sum(),
        "dev_accuracy": curve.rows[curve.best_epoch]["dev"],
        "epochs": len(curve.rows) - 1,
        "best_epoch": curve.best_epoch,
        "flattened": curve.flattened,
        "solver_iterations": iterations,
        "psi": trained.psi,
        "seconds": time.perf_counter() - start,
    }
    return summary, (correct, total)


def sentences(
    model: str, seed: int, word_ids: Sequence[int], counts: tuple[np.ndarray, np.ndarray]
) -> pd.DataFrame:
    """Per-word rows (:data:`SENTENCE_COLUMNS`) of ``model`` on the test words ``word_ids`` (the
    data's word ids, unique over the folds, so that folds' rows pool)."""
    correct, total = counts
    zeros = np.zeros(len(word_ids), dtype=int)
    return pd.DataFrame(
        {
            "dataset": DATASET,
            "encoder_name": ENCODER,
            "loss": model,
            "seed": seed,
            "split": "test",
            "decoder": DECODERS[model],
            "sentence": list(word_ids),
            "tokens": total,
            "correct": correct,
            "gold_spans": zeros,
            "predicted_spans": zeros,
            "matched_spans": zeros,
            "invalid": zeros,
        },
        columns=list(SENTENCE_COLUMNS),
    )


def run_fold(
    words: Sequence[Word], test_fold: int, settings: Settings = Settings(), seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per model of ``settings.models`` (:data:`COLUMNS`), and one per (model, test word)
    (:data:`SENTENCE_COLUMNS`): train on the folds other than ``test_fold``, test on it. The base
    model is trained whenever a chain model is asked for, since the energies' models start from
    it; ``seconds`` of an energy's model counts its own training and testing, not the base's.
    Deterministic given ``seed`` (split, random features, minibatches)."""
    unknown = set(settings.models) - set(MODELS)
    if unknown:
        raise ValueError(f"unknown models {sorted(unknown)}; valid models: {', '.join(MODELS)}")
    train_words, dev_words, test_words = split(words, test_fold, settings, np.random.default_rng(seed))
    generator = torch.Generator().manual_seed(seed)
    projection = torch.randn(PIXELS, settings.rff_features, generator=generator) / settings.bandwidth
    phase = 2 * math.pi * torch.rand(settings.rff_features, generator=generator)
    train, dev, test = (pad(part, projection, phase) for part in (train_words, dev_words, test_words))
    bank = templates(train_words + dev_words, max(len(word.tags) for word in words))
    chain_models = [model for model in settings.models if model != CLASSIFIER]
    trained_models = [
        model for model in MODELS if model in settings.models or (model == BASE and chain_models)
    ]
    rows, words_rows, base = [], [], None
    for model in trained_models:
        start = time.perf_counter()
        if model == BASE:
            base, trained = train_base(train, dev, settings, seed)
        elif model == CLASSIFIER:
            trained = train_classifier(bank, train, dev, settings, seed)
        else:
            if base is None:  # MODELS[0] is BASE: trained first whenever a chain model is
                raise RuntimeError("the base chain model was not trained first")
            trained = train_templates(model, base, bank, train, dev, settings, seed)
        if model in settings.models:
            summary, counts = row(test_fold, model, trained, test, settings, start)
            rows.append(summary)
            words_rows.append(sentences(model, seed, [word.word_id for word in test_words], counts))
    return pd.DataFrame(rows, columns=list(COLUMNS)), pd.concat(words_rows, ignore_index=True)
