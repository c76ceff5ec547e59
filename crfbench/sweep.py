"""Decode a trained model's test set with BCRF (IBP) and mean field over their iteration counts, at
several BCRF temperatures and mean-field penalties: how many iterations decoding needs, and what
the temperature does to accuracy, to invalid outputs and to IBP's constraint error.

Writes ``sweep.csv`` into the run directory: one tidy row per (method, iterations, temperature or
penalty, metric). Metrics: the task's metrics of :func:`metrics.score` (``violations`` is the share
of invalid outputs) and, per sentence averaged, ``constraint_error`` (BCRF: the iterate's largest
error in the polytope's constraints) or ``last_change`` (mean field: the last update's size).
Decoding is the argmax of ``solve``'s marginals, as the contract's ``decode`` does; the network
scores each batch once for every setting.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from .batching import length_sorted_batches, select
from .experiment import SWEEP_FILE, score_batch
from .io import write_csv
from .metrics import score
from .objectives import Inference
from .schema import SWEEP_COLUMNS
from .train import load_trained_run

ITERATIONS = (1, 2, 3, 5, 10, 20, 50)
TEMPERATURES = (1.0, 0.5, 0.1)  # BCRF's τ; the paper decodes at 0.1
PENALTIES = (0.0, -1e4)  # mean field's replacement for -inf transitions: the default, and a large one
MAX_SENTENCES = 200  # the first test sentences swept (segmentation's IBP at 50 iterations is slow on a CPU)


def settings() -> list[tuple[str, int, float | None, float | None]]:
    """Every (method, iterations, temperature, penalty) swept."""
    bcrf = [("bcrf", k, temperature, None) for temperature in TEMPERATURES for k in ITERATIONS]
    return bcrf + [("meanfield", k, None, penalty) for penalty in PENALTIES for k in ITERATIONS]


def _solve(chain, method: str, iterations: int, temperature: float | None, penalty: float | None):
    """``solve``'s marginals (B, N, T) and its per-sentence diagnostic (B,)."""
    option = {"temperature": temperature} if method == "bcrf" else {"penalty": penalty}
    result = Inference(method, "solve", {"iterations": iterations, **option})(chain)
    return result.unary, result.error


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
    predicted: dict[tuple, list[list[int]]] = {setting: [[] for _ in sentences] for setting in grid}
    diagnostic: dict[tuple, list[float]] = {setting: [] for setting in grid}
    batches = length_sorted_batches(sentences, config.batch_size)
    for indices in tqdm(batches, desc="sweep", disable=not progress, leave=False):
        batch = select(sentences, indices)
        chain = score_batch(scorer, batch, dataset.tagset, device)
        for setting in grid:
            unary, per_sentence = _solve(chain, *setting)
            tags = unary.argmax(-1).cpu()
            for row, index in enumerate(indices):
                predicted[setting][index] = tags[row, : len(batch[row].tokens)].tolist()
            diagnostic[setting] += per_sentence.cpu().tolist()
    gold = [sentence.tags for sentence in sentences]
    run = {"dataset": config.dataset, "encoder_name": config.encoder_name, "loss": config.loss}
    run |= {"seed": config.seed, "sentences": len(sentences)}
    rows = []
    for method, iterations, temperature, penalty in grid:
        setting = (method, iterations, temperature, penalty)
        metrics = score(dataset.task, dataset.tagset, gold, predicted[setting])
        diagnostic_name = "constraint_error" if method == "bcrf" else "last_change"
        metrics[diagnostic_name] = sum(diagnostic[setting]) / len(sentences)
        described = {
            "method": method,
            "iterations": iterations,
            "temperature": temperature,
            "penalty": penalty,
        }
        rows += [run | described | {"metric": name, "value": value} for name, value in metrics.items()]
    table = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    write_csv(run_dir / SWEEP_FILE, table)
    return table
