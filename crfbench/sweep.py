"""Decode a trained model's test set with BCRF (IBP), mean field and SparseMAP over their iteration
counts, at several BCRF temperatures, mean-field penalties and SparseMAP solvers: how many iterations
decoding needs, what the temperature does to accuracy, to invalid outputs and to IBP's constraint
error, and how SparseMAP's active set and Frank–Wolfe variants close their gap (the SparseMAP
paper's Fig. 2, on a trained model's scores).

Writes ``sweep.csv`` into the run directory: one tidy row per (method, iterations, temperature,
penalty or solver, metric). Metrics: the task's metrics of :func:`metrics.score` (``violations`` is
the share of invalid outputs) and, per sentence averaged, ``constraint_error`` (BCRF: the iterate's
largest error in the polytope's constraints), ``last_change`` (mean field: the last update's size),
or for SparseMAP ``wolfe_gap`` (the duality gap left) and ``support_size`` (sequences in the
support); and ``seconds``, the wall-clock time of the setting's ``solve`` per sentence. Every
setting is timed on the same batches in turn, so times compare across settings of one sweep (the
SparseMAP paper's gap against time) but not across runs or machines; the ``seconds`` rows are the
only ones that differ between two sweeps of one model. Decoding is the contract's ``decode`` (BCRF
and mean field: the argmax of ``solve``'s marginals, read off the same solve); the network scores
each batch once for every setting.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from implementations.registry import SPARSEMAP_SOLVERS

from .batching import length_sorted_batches, select
from .experiment import score_batch
from .metrics import score
from .objectives import ChainScores, Inference
from .run_folder import load_trained_run, write_run_table
from .schema import SWEEP_COLUMNS, SWEEP_FILE

ITERATIONS = (1, 2, 3, 5, 10, 20, 50)
TEMPERATURES = (1.0, 0.5, 0.1)  # BCRF's τ; the paper decodes at 0.1
PENALTIES = (0.0, -1e4)  # mean field's replacement for -inf transitions: the default, and a large one
MAX_SENTENCES = 200  # the first test sentences swept (segmentation's IBP at 50 iterations is slow on a CPU)

#: (method, iterations, temperature, penalty, solver): each swept setting, None where not an option
Setting = tuple[str, int, float | None, float | None, str | None]


def settings() -> list[Setting]:
    """Every setting swept."""
    bcrf: list[Setting] = [
        ("bcrf", k, temperature, None, None) for temperature in TEMPERATURES for k in ITERATIONS
    ]
    meanfield: list[Setting] = [
        ("meanfield", k, None, penalty, None) for penalty in PENALTIES for k in ITERATIONS
    ]
    sparsemap: list[Setting] = [
        ("sparsemap", k, None, None, solver) for solver in SPARSEMAP_SOLVERS for k in ITERATIONS
    ]
    return bcrf + meanfield + sparsemap


def _timed_solve(method: str, options: dict, chain: ChainScores) -> tuple[Any, float]:
    """The contract's ``solve`` of ``chain`` and its wall-clock seconds (the device synchronised)."""
    synchronise = torch.cuda.synchronize if chain.emissions.is_cuda else lambda: None
    synchronise()
    start = time.perf_counter()
    result = Inference(method, "solve", options)(chain)
    synchronise()
    return result, time.perf_counter() - start


def _decode(chain: ChainScores, setting: Setting) -> tuple[torch.Tensor, dict[str, torch.Tensor | float]]:
    """Decoded tags (B, N) and the diagnostics of one setting: per sentence (name -> (B,)), and
    ``seconds``, the batch's solve time."""
    method, iterations, temperature, penalty, solver = setting
    if method == "sparsemap":
        options = {"iterations": iterations, "solver": solver}
        result, seconds = _timed_solve(method, options, chain)
        tags = Inference(method, "decode", options)(chain)
        support = (result.weights > 0).sum(-1).to(result.error.dtype)
        return tags, {"wolfe_gap": result.error, "support_size": support, "seconds": seconds}
    option = {"temperature": temperature} if method == "bcrf" else {"penalty": penalty}
    result, seconds = _timed_solve(method, {"iterations": iterations, **option}, chain)
    name = "constraint_error" if method == "bcrf" else "last_change"
    return result.unary.argmax(-1), {name: result.error, "seconds": seconds}


@torch.no_grad()
def sweep(
    run_dir: Path,
    *,
    max_sentences: int = MAX_SENTENCES,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Sweep the selected model of ``run_dir`` over :func:`settings` on its first ``max_sentences``
    test sentences; write and return the table."""
    run_dir = Path(run_dir)
    config, dataset, scorer, _, device = load_trained_run(run_dir, data_dir)
    scorer.eval()
    sentences = dataset.test[:max_sentences]
    grid = settings()
    predicted: dict[Setting, list[list[int]]] = {setting: [[] for _ in sentences] for setting in grid}
    diagnostics: dict[Setting, dict[str, float]] = {setting: {} for setting in grid}
    batches = length_sorted_batches(sentences, config.batch_size)
    for indices in tqdm(batches, desc="sweep", disable=not progress, leave=False):
        batch = select(sentences, indices)
        chain = score_batch(scorer, batch, dataset.tagset, device)
        for setting in grid:
            tags, per_sentence = _decode(chain, setting)
            tags = tags.cpu()
            for row, index in enumerate(indices):
                predicted[setting][index] = tags[row, : len(batch[row].tokens)].tolist()
            for name, values in per_sentence.items():
                total = values if isinstance(values, float) else float(values.sum())
                diagnostics[setting][name] = diagnostics[setting].get(name, 0.0) + total
    gold = [sentence.tags for sentence in sentences]
    run: dict[str, Any] = {
        "dataset": config.dataset,
        "encoder_name": config.encoder_name,
        "loss": config.loss,
    }
    run |= {"seed": config.seed, "sentences": len(sentences)}
    rows = []
    for setting in grid:
        metrics = score(dataset.task, dataset.tagset, gold, predicted[setting])
        for name, total in diagnostics[setting].items():
            metrics[name] = total / len(sentences)
        method, iterations, temperature, penalty, solver = setting
        described = {"method": method, "iterations": iterations, "temperature": temperature}
        described |= {"penalty": penalty, "solver": solver}
        rows += [run | described | {"metric": name, "value": value} for name, value in metrics.items()]
    table = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    write_run_table(run_dir, SWEEP_FILE, table)
    return table
