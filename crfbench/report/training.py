"""How the numbers were reached: every run's dev curve (did training converge?) and the decoding
sweep over BCRF and mean-field iterations (how many iterations decoding needs, at which
temperature, and what mean field's penalty does), as figures and tables from ``results/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from .figures import Drawn, save_png, subplots
from .layout import DATASET_LABELS, TRAIN_LABELS

#: Runs that stopped at their epoch cap while the dev curve still rose: the pages flag them.
UNCONVERGED = "at its epoch cap and still improving"


def convergence_table(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, encoder, loss): seeds, epochs run, selected epoch (ranges over seeds),
    how training stopped, how many runs were still improving at their cap, and the wall-clock
    seconds of a run (its epochs with their dev evaluation; jobs ran two at a time, so compare
    losses within one reference run only)."""
    runs = curves.groupby(["dataset", "encoder_name", "loss", "seed"], sort=False).agg(
        epochs=("epoch", "max"),
        best=("best_epoch", "first"),
        cap=("epoch_cap", "first"),
        stopped=("stopped_by", "first"),
        rising=("still_improving", "first"),
        dev=("dev_value", "max"),
        metric=("dev_metric", "first"),
        seconds=("seconds", "sum"),
    )
    rows = []
    for (dataset, encoder, loss), group in runs.groupby(level=[0, 1, 2], sort=False):
        rows.append(
            {
                "dataset": DATASET_LABELS.get(dataset, dataset),
                "encoder": encoder,
                "loss": TRAIN_LABELS.get(loss, loss),
                "seeds": len(group),
                "epochs run": _span(group["epochs"]),
                "selected epoch": _span(group["best"]),
                "epoch cap": _span(group["cap"]),
                "stopped by patience": f"{int((group['stopped'] == 'patience').sum())}/{len(group)}",
                f"flagged: {UNCONVERGED}": int(_truthy(group["rising"]).sum()),
                "dev metric": group["metric"].iloc[0],
                "best dev, mean over seeds (%)": f"{100 * group['dev'].mean():.1f}",
                "training seconds, mean over seeds": f"{group['seconds'].mean():.0f}",
            }
        )
    return pd.DataFrame(rows)


def _span(values: pd.Series) -> str:
    """A range of whole numbers as text: "5", or "3–7"."""
    low, high = int(values.min()), int(values.max())
    return f"{low}" if low == high else f"{low}–{high}"


def _truthy(values: pd.Series) -> pd.Series:
    """A boolean column read back from CSV (True/False or true/false text)."""
    return values.astype(str).str.lower() == "true"


def flagged_runs(curves: pd.DataFrame) -> set[tuple[str, str, str]]:
    """(dataset, encoder, loss) with at least one run stopped at its cap while still improving."""
    rising = curves[_truthy(curves["still_improving"])]
    return set(rising[["dataset", "encoder_name", "loss"]].itertuples(index=False, name=None))


def curve_figure(curves: pd.DataFrame, path: Path) -> list[Drawn]:
    """One panel per (dataset, encoder): each loss's dev curve, every seed a thin line and the mean
    over seeds a thick one, a dot at each run's selected epoch."""
    if curves.empty:
        return []
    panels = list(curves.groupby(["dataset", "encoder_name"], sort=False))
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    figure, axes = subplots(rows, columns, (4.2 * columns, 3.2 * rows))
    colours = dict(zip(TRAIN_LABELS, (f"C{index}" for index in range(len(TRAIN_LABELS))), strict=True))
    seeds = set()
    for axis, ((dataset, encoder), panel) in zip(axes.flat, panels, strict=False):
        for loss, runs in panel.groupby("loss", sort=False):
            colour = colours.get(loss, "k")
            for _, run in runs.groupby("seed"):
                seeds.add(run["seed"].iloc[0])
                axis.plot(run["epoch"], 100 * run["dev_value"], color=colour, lw=0.6, alpha=0.5)
                best = run[run["epoch"] == run["best_epoch"]]
                axis.plot(best["epoch"], 100 * best["dev_value"], "o", color=colour, ms=3)
            mean = runs.groupby("epoch")["dev_value"].mean()
            axis.plot(
                mean.index, 100 * mean.to_numpy(), color=colour, lw=1.8, label=TRAIN_LABELS.get(loss, loss)
            )
        metric = panel["dev_metric"].iloc[0]
        axis.set_title(f"{DATASET_LABELS.get(dataset, dataset)} {encoder}")
        axis.set_xlabel("epoch")
        axis.set_ylabel(f"dev {metric} (%)")
        low = np.nanpercentile(100 * panel["dev_value"], 5)
        axis.set_ylim(bottom=max(0.0, low - 2))
        axis.legend(fontsize=7, loc="lower right")
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    caption = (
        "Dev-set curves of every training run (dev metric with the loss's own decoder after each epoch): "
        "thin lines one seed each, thick lines the mean over seeds, dots the epoch each run selected; "
        f"n = {len(seeds)} seed(s). Training stops once the curve is flat (patience) or at the epoch cap."
    )
    return [save_png(figure, path, caption)]


#: The sweep tables' column of solve time: ``seconds`` per sentence, in milliseconds.
MILLISECONDS = "solve ms per sentence"


def _milliseconds(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the sweep's ``seconds`` column (when present) as :data:`MILLISECONDS`."""
    if "seconds" not in table:
        return table
    return table.assign(**{MILLISECONDS: (1000 * table["seconds"]).round(2)}).drop(columns="seconds")


def _relaxations(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep's BCRF and mean-field rows (SparseMAP's solvers have their own table and figure)."""
    return sweep[sweep["method"].isin(("bcrf", "meanfield"))]


def _solvers(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep's SparseMAP rows."""
    return sweep[sweep["method"] == "sparsemap"]


def sweep_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep as one row per (dataset, method, temperature or penalty, iterations), its metrics
    as columns (percentages for scores and invalid outputs)."""
    sweep = _relaxations(sweep)
    if sweep.empty:
        return pd.DataFrame()
    frame = sweep.assign(
        setting=np.where(
            sweep["method"] == "bcrf",
            "BCRF τ=" + sweep["temperature"].map("{:g}".format),
            "MF penalty=" + sweep["penalty"].map("{:g}".format),
        )
    )
    table = frame.pivot_table(
        index=["dataset", "encoder_name", "setting", "iterations"],
        columns="metric",
        values="value",
        sort=False,
    ).reset_index()
    for name in ("accuracy", "f1", "violations"):
        if name in table:
            table[name] = (100 * table[name]).round(1)
    for name in ("constraint_error", "last_change"):
        if name in table:
            table[name] = table[name].round(3)
    table = _milliseconds(table)
    table["dataset"] = table["dataset"].map(lambda name: DATASET_LABELS.get(name, name))
    table["iterations"] = table["iterations"].astype(int)
    keep = ["dataset", "encoder_name", "setting", "iterations"]
    keep += [
        name
        for name in ("accuracy", "f1", "violations", "constraint_error", "last_change", MILLISECONDS)
        if name in table
    ]
    return table[keep].rename(columns={"encoder_name": "encoder", "violations": "invalid outputs (%)"})


def _iteration_axis(axis, label: str) -> None:
    """A log x-axis over the sweep's iteration counts (1–50), ticked at each."""
    axis.set_xscale("log")
    axis.set_xticks([1, 2, 5, 10, 20, 50], ["1", "2", "5", "10", "20", "50"])
    axis.set_xlabel(label)


def sweep_figure(sweep: pd.DataFrame, path: Path) -> list[Drawn]:
    """Per dataset (columns): the task's score, the share of invalid outputs, and IBP's constraint
    error (rows) against the iteration count, a line per BCRF temperature and mean-field penalty."""
    sweep = _relaxations(sweep)
    if sweep.empty:
        return []
    panels = list(sweep.groupby(["dataset", "encoder_name"], sort=False))
    figure, axes = subplots(3, len(panels), (3.6 * len(panels), 8.4))
    for column, ((dataset, encoder), panel) in enumerate(panels):
        score = "accuracy" if "f1" not in set(panel["metric"]) else "f1"
        for (method, temperature, penalty), runs in panel.groupby(
            ["method", "temperature", "penalty"], dropna=False, sort=False
        ):
            label = f"BCRF τ={temperature:g}" if method == "bcrf" else f"MF penalty={penalty:g}"
            style = {
                "ls": "-" if method == "bcrf" else "--",
                "marker": "o" if method == "bcrf" else "s",
                "ms": 3,
            }
            for row, metric in enumerate((score, "violations", "constraint_error")):
                points = runs[runs["metric"] == metric].sort_values("iterations")
                if points.empty:
                    continue
                scale = 1 if metric == "constraint_error" else 100
                axes[row, column].plot(points["iterations"], scale * points["value"], label=label, **style)
        axes[0, column].set_title(f"{DATASET_LABELS.get(dataset, dataset)} {encoder} (CRF-trained)")
        axes[0, column].set_ylabel(f"test {score} (%)")
        axes[1, column].set_ylabel("invalid outputs (%)")
        axes[2, column].set_ylabel("IBP constraint error")
        for axis in axes[:, column]:
            _iteration_axis(axis, "iterations")
        axes[0, column].legend(fontsize=7)
    sentences = int(sweep["sentences"].max())
    caption = (
        "Decoding the first-seed CRF-trained model's test set (first "
        f"{sentences} sentences) with BCRF (IBP at temperature τ; the paper decodes at τ = 0.1) and "
        "mean field (forbidden transitions at the penalty; 0 is the default) after 1–50 iterations: "
        "score, share of invalid outputs, and IBP's largest constraint error (mean over sentences). "
        "One model and seed: n = 1, no error bars."
    )
    return [save_png(figure, path, caption)]


def solver_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """SparseMAP's solvers on each CRF-trained model: one row per (dataset, solver, iteration
    budget) with the mean Wolfe gap left, the mean support size, the solve time per sentence and
    the task's score."""
    sweep = _solvers(sweep)
    if sweep.empty:
        return pd.DataFrame()
    table = sweep.pivot_table(
        index=["dataset", "encoder_name", "solver", "iterations"],
        columns="metric",
        values="value",
        sort=False,
    ).reset_index()
    for name in ("accuracy", "f1"):
        if name in table:
            table[name] = (100 * table[name]).round(1)
    table["wolfe_gap"] = table["wolfe_gap"].map("{:.2e}".format)
    table["support_size"] = table["support_size"].round(2)
    table = _milliseconds(table)
    table["dataset"] = table["dataset"].map(lambda name: DATASET_LABELS.get(name, name))
    table["iterations"] = table["iterations"].astype(int)
    keep = ["dataset", "encoder_name", "solver", "iterations", "wolfe_gap", "support_size"]
    keep += [name for name in (MILLISECONDS, "accuracy", "f1") if name in table]
    return table[keep].rename(
        columns={
            "encoder_name": "encoder",
            "wolfe_gap": "mean Wolfe gap",
            "support_size": "mean support size",
        }
    )


def solver_figure(sweep: pd.DataFrame, path: Path) -> list[Drawn]:
    """The SparseMAP paper's Fig. 2 on our chains: per dataset (columns), the mean Wolfe gap against
    the iteration budget and against the solve time per sentence, and the mean support size against
    the budget (rows), a line per solver."""
    sweep = _solvers(sweep)
    if sweep.empty:
        return []
    panels = list(sweep.groupby(["dataset", "encoder_name"], sort=False))
    figure, axes = subplots(3, len(panels), (3.6 * len(panels), 8.4))
    for column, ((dataset, encoder), panel) in enumerate(panels):
        for solver, runs in panel.groupby("solver", sort=False):
            values = runs.pivot_table(index="iterations", columns="metric", values="value").sort_index()
            style = {"marker": "o", "ms": 3, "label": solver}
            axes[0, column].plot(values.index, values["wolfe_gap"], **style)
            if "seconds" in values:
                axes[1, column].plot(1000 * values["seconds"], values["wolfe_gap"], **style)
            axes[2, column].plot(values.index, values["support_size"], **style)
        axes[0, column].set_title(f"{DATASET_LABELS.get(dataset, dataset)} {encoder} (CRF-trained)")
        for axis in axes[:2, column]:
            axis.set_ylabel("mean Wolfe gap")
            axis.set_yscale("symlog", linthresh=1e-6)
        axes[1, column].set_xscale("log")
        axes[1, column].xaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels collide
        axes[1, column].set_xlabel("solve time per sentence (ms)")
        axes[2, column].set_ylabel("mean support size (sequences)")
        _iteration_axis(axes[0, column], "iteration budget")
        _iteration_axis(axes[2, column], "iteration budget")
        axes[0, column].legend(fontsize=7)
    sentences = int(sweep["sentences"].max())
    caption = (
        "SparseMAP's solvers (the SparseMAP paper's Fig. 2, on chains): the first-seed CRF-trained "
        f"model's test scores (first {sentences} sentences) solved by the active set and vanilla, "
        "away-step and pairwise Frank–Wolfe with 1–50 iterations; mean Wolfe (duality) gap left "
        "against the iteration budget and against the wall-clock solve time per sentence (every "
        "setting timed on the same batches in one job, torch with the run's device and threads: "
        "compare the solvers within a panel, not times across runs), symmetric-log scale, linear "
        "below 1e-6; and mean number of sequences in the support. The asv suite's SparseMAPSolvers "
        "times each solver on random scores over N and T. One model and seed: n = 1, no error bars."
    )
    return [save_png(figure, path, caption)]


def support_figure(curves: pd.DataFrame, path: Path) -> list[Drawn]:
    """The SparseMAP paper's Fig. 4 on our tasks: per dataset, the mean support size of each
    SparseMAP loss's model on dev after every epoch, each seed a thin line, the mean a thick one."""
    curves = curves[curves["dev_support"].notna()]
    if curves.empty:
        return []
    panels = list(curves.groupby(["dataset", "encoder_name"], sort=False))
    figure, axes = subplots(1, len(panels), (4.2 * len(panels), 3.2))
    colours = dict(zip(TRAIN_LABELS, (f"C{index}" for index in range(len(TRAIN_LABELS))), strict=True))
    seeds = set()
    for axis, ((dataset, encoder), panel) in zip(axes.flat, panels, strict=True):
        for loss, runs in panel.groupby("loss", sort=False):
            colour = colours.get(loss, "k")
            for seed, run in runs.groupby("seed"):
                seeds.add(seed)
                axis.plot(run["epoch"], run["dev_support"], color=colour, lw=0.6, alpha=0.5)
            mean = runs.groupby("epoch")["dev_support"].mean()
            axis.plot(mean.index, mean.to_numpy(), color=colour, lw=1.8, label=TRAIN_LABELS.get(loss, loss))
        axis.set_title(f"{DATASET_LABELS.get(dataset, dataset)} {encoder}")
        axis.set_xlabel("epoch")
        axis.set_ylabel("mean support size on dev (sequences)")
        axis.set_ylim(bottom=0)
        axis.legend(fontsize=7)
    caption = (
        "How sparse SparseMAP's predictions are over training (the SparseMAP paper's Fig. 4, on our "
        "tasks): mean number of tag sequences in each dev sentence's support under the model after "
        "every epoch (default solver, at most 32 slots), thin lines one seed each, thick lines the "
        f"mean over seeds; n = {len(seeds)} seed(s)."
    )
    return [save_png(figure, path, caption)]
