"""Time training steps per loss and decoding per decoder, in one process, interleaved.

What is timed follows the paper (§6.4: "all timings include the forward (and backward if
training) pass in the neural network"):

- ``train``: network forward + loss + backward (no optimiser step) on the same training batches;
- ``decode``: network forward + decoder, without gradients, on the same dev batches.

The network is a fresh one, or with ``weights`` a trained run's selected model (the pipeline
gives the first-seed CRF run). Only SparseMAP's cost depends on the scores (it runs to its
optimality certificate, and its support grows with how undecided the scores are): a fresh
network gives its worst case, a trained one what training and decoding meet once the model has
learnt. The ``network`` column records which.

Each item runs in each of ``modes``: ``eager``, or ``compiled`` (SparseMAP eager only; what
compiled means on a CPU and on a GPU: ``crfbench.timed_steps``), recorded in the ``mode`` column.
Every round runs each (item, mode) once over all its batches, in a fresh random order per round, so
slow drifts of the machine hit every item alike; the first ``warmup`` rounds are discarded (in
compiled mode they also absorb the compilations and captures). An item whose CUDA graph fails to
capture is logged and left out of the compiled mode.

Each item runs in each of ``backends``: ``torch``, and ``jax`` (``crfbench.jax_timing``: the same
network, loss or decoder and batches in JAX, always under ``jax.jit``, so in the ``compiled``
mode only; pytorch-crf has no JAX item), recorded in the ``backend`` column.

Scores are validated once before timing and not inside the timed loop. CPU threads are fixed by
the config (one by default) and recorded with the device. Speed-ups (Tables 2 and 3) are ratios
of medians from one such file.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from implementations import BACKENDS

from . import console, environment
from .baselines import is_partial, timed_decoder, timed_loss
from .batching import select, shuffled_batches
from .compiled import check_modes, compiles
from .config import RunConfig, check_device_available
from .data.types import Dataset, Sentence
from .experiment import load_dataset, run_description
from .models import Scorer, build_scorer
from .objectives import describe
from .run_folder import load_model, read_run_config, record_run, write_run_table
from .schema import MODEL_FILE, TIMING_FILE
from .stopwatch import best_seconds  # noqa: F401  (benchmarks import it from here)
from .timed_steps import Step, TorchSteps
from .uses import TIMED_DECODERS, TIMED_LOSSES, check_names


def default_losses(partial: bool) -> tuple[str, ...]:
    """The losses and baseline losses that apply to fully or partially annotated training data."""
    return tuple(name for name in TIMED_LOSSES if is_partial(name) == partial)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _trained_scorer(
    run_dir: Path, fresh: Scorer, tags: tuple[str, ...], device: torch.device
) -> tuple[Scorer, str]:
    """The selected model of the trained run ``run_dir`` and how the timing table names it
    ("trained: <loss>, seed <seed>, epoch <epoch>"); ValueError naming the file when its network
    or tag set is not the one ``fresh`` was built for."""
    path = run_dir / MODEL_FILE
    if not path.exists():
        raise FileNotFoundError(f"weights: {path}: no trained model; run `crfbench train` first")
    scorer, saved = load_model(path, device)
    if tuple(saved["tags"]) != tags:
        raise ValueError(f"weights: {path}: the model's tag set differs from the dataset's")
    if scorer.config != fresh.config or scorer.vocab_state() != fresh.vocab_state():
        raise ValueError(f"weights: {path}: the model's network differs from the timing run's settings")
    trained = read_run_config(run_dir)
    return scorer, f"trained: {trained.loss}, seed {trained.seed}, epoch {saved['epoch']}"


def _checked(
    *, batches: int, rounds: int, warmup: int, modes: Sequence[str], backends: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The timing modes and backends, once the counts are checked; ValueError naming a bad argument."""
    for name, value in {"batches": batches, "rounds": rounds}.items():
        if value < 1:
            raise ValueError(f"{name}: must be at least 1, got {value}")
    if warmup < 0:
        raise ValueError(f"warmup: must be at least 0, got {warmup}")
    modes = check_modes(list(modes))
    if "compiled" in modes and warmup < 1:
        raise ValueError("warmup: the compiled mode needs at least 1 untimed round (its compilations)")
    check_names("backends", backends, BACKENDS)
    if "jax" in backends and warmup < 1:
        raise ValueError("warmup: the jax backend needs at least 1 untimed round (its compilations)")
    return modes, tuple(backends)


@dataclasses.dataclass(frozen=True)
class TimedInputs:
    """What every item of a timing run is timed on: the networks (``True``: with a transition head;
    ``False``: the unstructured loss's, without), how the ``network`` column names them, and the
    training and dev batches."""

    scorers: dict[bool, Scorer]
    network: str
    train: list[list[Sentence]]
    dev: list[list[Sentence]]


def timed_inputs(
    config: RunConfig, dataset: Dataset, batches: int, weights: Path | None, device: torch.device
) -> TimedInputs:
    """The networks (fresh from ``config.seed``, or ``weights``' trained model) and the first
    ``batches`` training batches (in ``config.seed``'s shuffled order) and dev batches."""
    scorers = {}
    for transitions in (True, False):  # the unstructured loss has its own network: no transition head
        torch.manual_seed(config.seed)
        scorer_config = dataclasses.replace(config.scorer, transitions=transitions)
        scorers[transitions] = build_scorer(scorer_config, dataset.train, len(dataset.tagset)).to(device)
    network = "untrained"
    if weights is not None:
        scorers[True], network = _trained_scorer(Path(weights), scorers[True], dataset.tagset.tags, device)
    order = shuffled_batches(
        len(dataset.train), config.batch_size, torch.Generator().manual_seed(config.seed)
    )
    train_batches = [select(dataset.train, indices) for indices in order[:batches]]
    dev_batches = [
        list(dataset.dev[i : i + config.batch_size])
        for i in range(0, min(len(dataset.dev), batches * config.batch_size), config.batch_size)
    ]
    return TimedInputs(scorers, network, train_batches, dev_batches)


def time_run(
    config: RunConfig,
    run_dir: Path,
    *,
    losses: Sequence[str] | None = None,
    decoders: Sequence[str] = tuple(TIMED_DECODERS),
    modes: Sequence[str] = ("eager",),
    backends: Sequence[str] = ("torch",),
    batches: int = 5,
    rounds: int = 5,
    warmup: int = 1,
    data_dir: str | Path | None = None,
    weights: Path | None = None,
    progress: bool = True,
    restart_if_changed: bool = False,
) -> pd.DataFrame:
    """Measure and write one row per (item, round) to ``run_dir/timing.csv``, rewritten after every
    timed round; return the table.

    ``run_dir`` also gets ``config.json`` (or may be a trained run with the same settings; one
    made with other settings is refused, or emptied first with ``restart_if_changed``).
    ``weights``: a trained run's folder whose selected model scores every item but the
    unstructured loss (which has its own network, without transitions); its scorer settings and
    tag set must be this config's.
    """
    timed_modes, backends = _checked(
        batches=batches, rounds=rounds, warmup=warmup, modes=modes, backends=backends
    )
    if "jax" in backends:  # imported before the thread count is fixed: it fixes XLA's too
        from . import jax_timing

        jax_timing.share_the_gpu()
    environment.set_threads(config.threads)
    device = check_device_available(config.device)
    dataset = load_dataset(config, data_dir)
    record_run(run_dir, config, dataset, device, restart_if_changed=restart_if_changed)
    partial = any(sentence.allowed is not None for sentence in dataset.train)
    losses = default_losses(partial) if losses is None else tuple(losses)
    check_names("losses", losses, TIMED_LOSSES)
    check_names("decoders", decoders, TIMED_DECODERS)

    inputs = timed_inputs(config, dataset, batches, weights, device)
    scorers, network = inputs.scorers, inputs.network
    train_batches, dev_batches = inputs.train, inputs.dev

    steps = TorchSteps(config, dataset.tagset, scorers, device, compiled="compiled" in timed_modes)
    items = [
        (
            "train",
            name,
            steps.train,
            train_batches,
            timed_loss(name, config.loss_iterations, dataset.tagset, device),
        )
        for name in losses
    ] + [
        ("decode", name, steps.decode, dev_batches, timed_decoder(name, dataset.tagset, device))
        for name in decoders
    ]
    # (backend, mode, kind, name, batches, inference, step, wait for the step's outputs)
    timed: list[tuple[str, str, str, str, list[list[Sentence]], Any, Step, Callable[[list[Any]], None]]] = []
    if "torch" in backends:
        for _, name, make_step, batch_list, _ in items:  # validate every input once, untimed
            make_step(name, validate=True)(batch_list[0])
        timed += [
            (
                "torch",
                mode,
                kind,
                name,
                batch_list,
                inference,
                make_step(name, mode),
                lambda _: _synchronize(device),
            )
            for mode in timed_modes
            for kind, name, make_step, batch_list, inference in items
            if mode == "eager" or compiles(inference.method)
        ]
    if "jax" in backends:
        networks = {
            transitions: jax_timing.JaxNetwork(scorer, dataset.tagset, device)
            for transitions, scorer in scorers.items()
        }
        timed += [
            (
                "jax",
                jax_timing.JAX_MODE,
                kind,
                name,
                batch_list,
                inference,
                jax_timing.timed_step(kind, name, inference, networks, config.seed, batch_list[0]),
                jax_timing.finish,
            )
            for kind, name, _, batch_list, inference in items
            if jax_timing.has_jax(inference)
        ]

    where = environment.describe(device)
    common = run_description(config, dataset.protocol) | {
        "device": where["device"],
        "device_name": where["device_name"],
        "threads": where["threads"],
        "batch_size": config.batch_size,
        "revision": where["revision"],
        "network": network,
    }
    shuffle = random.Random(config.seed)
    rows = []
    for round_index in tqdm(range(warmup + rounds), desc="timing rounds", disable=not progress, leave=False):
        for item in shuffle.sample(timed, len(timed)):
            backend, mode, kind, name, batch_list, inference, step, finish = item
            _synchronize(device)
            started = time.perf_counter()
            try:
                finish([step(sentences) for sentences in batch_list])
            except RuntimeError as error:  # a CUDA graph's capture fails in the first round, if ever
                if not (round_index == 0 and backend == "torch" and mode == "compiled" and steps.captures):
                    raise
                console.log(f"not timed compiled: {kind} {name}: its capture failed: {error}".splitlines()[0])
                timed.remove(item)
                continue
            seconds = time.perf_counter() - started
            if round_index == 0:  # where a warm-up's time goes: compiling, mostly
                console.log(f"warm-up: {backend} {mode} {kind} {name}: {seconds:.1f} s")
            if round_index >= warmup:
                rows.append(
                    common
                    | {"backend": backend, "kind": kind, "name": name, "mode": mode}
                    | {
                        "method": describe(inference)["method"],
                        "iterations": describe(inference)["iterations"],
                    }
                    | {"round": round_index - warmup, "seconds": seconds, "batches": len(batch_list)}
                    | {"sentences": sum(len(b) for b in batch_list)}
                    | {"tokens": sum(len(s.tokens) for b in batch_list for s in b)}
                )
        stage = "warm-up" if round_index < warmup else "timed"
        console.log(f"round {round_index + 1}/{warmup + rounds} done ({stage})")
        if round_index >= warmup:  # every finished round kept: a run cut off by a time limit keeps them
            write_run_table(run_dir, TIMING_FILE, pd.DataFrame(rows))
    return pd.DataFrame(rows)
