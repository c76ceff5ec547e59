"""Where BCRF overtakes the exact CRF, from the asv crossover sweep (``bench_crossover.Crossover``,
rows named ``time_crossover`` in ``results/scaling.csv``): the speed-up of BCRF-5 and BCRF-10 over
each baseline against N, one line per T, and the crossover N as a table.

The sweep times our methods compiled (torch under ``torch.compile`` on a CPU and captured as a CUDA
graph on a GPU, JAX jitted) and pytorch-crf eager, so a speed-up compares each method at its best as
people would run it. A baseline is compared within a backend (``crf`` and ``crf-scan`` in torch
against BCRF in torch, in JAX against BCRF in JAX) except pytorch-crf, a torch library, which both
backends' BCRF are compared against.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.ticker import NullFormatter

from .figures import TIMES, Drawn, save_png, subplots

#: The sweep's benchmark name in the scaling table.
NAME = "time_crossover"
#: The methods whose speed-up is drawn, and the baselines they are drawn against (a panel column each).
METHODS = ("bcrf-5", "bcrf-10")
BASELINES = ("crf", "crf-scan", "pytorch-crf")
#: Baselines that exist in torch only: every backend's BCRF is compared with their torch timing.
TORCH_ONLY = frozenset({"pytorch-crf"})
OPERATIONS = {"loss_and_grad": "training step (loss + gradient)", "decode": "decoding"}
#: The sentence the report prints when the scaling table holds no crossover sweep.
NO_CROSSOVER = (
    "No crossover results: results/scaling.csv holds no asv bench_crossover.Crossover timings, so "
    "there is no crossover figure or table (run the sweep, docs/benchmarks.md)."
)
_SETTING = ["machine", "device", "operation", "B"]


def crossover_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The crossover sweep's rows, with integer N, T and B."""
    rows = frame[(frame["name"] == NAME) & frame["N"].notna()].copy()
    return rows.astype({"N": int, "T": int, "B": int})


def speedups(frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine, device, operation, B, T and N: each BCRF variant's speed-up over each baseline
    (the baseline's seconds ÷ BCRF's) in each backend BCRF was timed in; one row each, with the
    columns ``backend``, ``method``, ``baseline`` and ``speedup``."""
    rows = crossover_rows(frame)
    keys = [*_SETTING, "T", "N"]
    seconds = rows.set_index([*keys, "backend", "method"])["value"]
    out = []
    for (*key, backend, method), value in seconds.items():
        if method not in METHODS:
            continue
        for baseline in BASELINES:
            reference = seconds.get((*key, "torch" if baseline in TORCH_ONLY else backend, baseline))
            if reference is not None:
                point = dict(zip(keys, key, strict=True))
                out.append(
                    {**point, "backend": backend, "method": method, "baseline": baseline}
                    | {"speedup": float(reference) / float(value)}
                )
    columns = [*keys, "backend", "method", "baseline", "speedup"]
    return pd.DataFrame(out, columns=columns)


def faster_from(lengths: Sequence[int], faster: Sequence[bool]) -> str:
    """The first of ``lengths`` (ascending) from which ``faster`` holds at every larger one:
    ``"≤ N"`` when it already holds at the smallest (the crossover lies at or below it), ``"none"``
    when it does not hold at the largest."""
    first = next((k for k in range(len(faster)) if all(faster[k:])), None)
    if first is None:
        return "none"
    return f"≤ {int(lengths[0])}" if first == 0 else str(int(lengths[first]))


def crossover_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine, device, operation, backend, B, T and baseline: the N from which each BCRF
    variant is faster than the baseline at every larger N measured (:func:`faster_from`; "—" where
    that variant was not measured), beside the lengths measured."""
    table = speedups(frame)
    if table.empty:
        return pd.DataFrame()
    groups = ["machine", "device", "operation", "backend", "B", "T", "baseline"]
    out = []
    for key, group in table.groupby(groups, sort=True):
        cells = {}
        for method in METHODS:
            line = group[group["method"] == method].sort_values("N")
            cells[f"{method} faster from N"] = (
                faster_from(line["N"].tolist(), (line["speedup"] > 1).tolist()) if len(line) else "—"
            )
        lengths = group["N"]
        out.append(
            dict(zip(groups, key, strict=True)) | {"N measured": f"{lengths.min()}–{lengths.max()}"} | cells
        )
    return pd.DataFrame(out)


def crossover_figures(frame: pd.DataFrame, out_dir: Path) -> list[Drawn]:
    """One figure per machine, device, operation and B: BCRF's speed-up over each baseline (a panel
    column each) against N, one panel row per backend and BCRF variant, a line per T; above the
    dashed line at 1× BCRF is faster."""
    table = speedups(frame)
    written = []
    for (machine, device, name, batch), rows in table.groupby(_SETTING, sort=True):
        label = OPERATIONS.get(name, name)
        panels = [
            (backend, method)
            for backend in sorted(rows["backend"].unique(), key=("torch", "jax").index)
            for method in METHODS
            if method in set(rows.loc[rows["backend"] == backend, "method"])
        ]
        baselines = [baseline for baseline in BASELINES if baseline in set(rows["baseline"])]
        tags = sorted(rows["T"].unique())
        figure, axes = subplots(
            len(panels), len(baselines), (3.2 * len(baselines), 2.6 * len(panels) + 0.8), sharex=True
        )
        for i, (backend, method) in enumerate(panels):
            for j, baseline in enumerate(baselines):
                axis = axes[i, j]
                panel = rows[
                    (rows["backend"] == backend) & (rows["method"] == method) & (rows["baseline"] == baseline)
                ]
                for k, num_tags in enumerate(tags):
                    line = panel[panel["T"] == num_tags].sort_values("N")
                    axis.plot(
                        line["N"],
                        line["speedup"],
                        marker="o",
                        markersize=3,
                        color=f"C{k}",
                        label=f"T={num_tags}",
                    )
                axis.axhline(1.0, color="0.3", linestyle="--", linewidth=0.8)
                axis.set_xscale("log", base=2)
                axis.set_yscale("log")
                axis.yaxis.set_major_formatter(TIMES)
                axis.yaxis.set_minor_formatter(NullFormatter())
                axis.grid(True, which="major", linewidth=0.3)
                axis.set_title(f"{method} ({backend}) over {baseline}", fontsize="small")
                if j == 0:
                    axis.set_ylabel("speed-up")
                if i == len(panels) - 1:
                    axis.set_xlabel("sequence length N")
        handles, labels = [], []
        for axis in axes.flat:  # every T drawn, in order, once
            for handle, text in zip(*axis.get_legend_handles_labels(), strict=True):
                if text not in labels:
                    handles.append(handle)
                    labels.append(text)
        where = f"{machine}, {device}, B={batch}"
        figure.suptitle(f"{label}: BCRF's speed-up over each baseline ({where})", fontsize="medium")
        figure.legend(
            handles, labels, loc="outside lower center", ncol=len(labels), fontsize="small", frameon=False
        )
        written.append(
            save_png(
                figure,
                out_dir / f"crossover-{machine}-{device}-B{batch}-{name}.png",
                f"asv crossover sweep, {label} ({where}; shared transitions): speed-up of BCRF-5 and "
                "BCRF-10 (rows, per backend) over each baseline (columns: the baseline's seconds ÷ "
                "BCRF's; ours compiled: torch.compile on a CPU, a CUDA graph on a GPU, JAX jit; pytorch-crf "
                "eager and compared in torch) "
                "against N, one line per tag-set size T; above the dashed line at 1× BCRF is faster, "
                "and the N where a line crosses it for good is the crossover (tables/crossover.csv). "
                "Each point is a ratio of asv's medians, with no interval.",
                dpi=100,
            )
        )
    return written


def crossover_missing(frame: pd.DataFrame) -> list[str]:
    """:data:`NO_CROSSOVER` when ``frame`` (a scaling table) holds no crossover timings."""
    return [] if len(crossover_rows(frame)) else [NO_CROSSOVER]
