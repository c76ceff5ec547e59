"""The asv scaling results (``results/scaling.csv``) as figures: time against N for every T, the
speed-up of each method over the sequential exact CRF on the N × T grid, SparseMAP's and the Bethe
projection's solvers on random scores over N and T, and the crossover sweep's figures
(``crossover``); the summary tables are ``crfbench.report.scaling_tables``'.

The scaling benchmarks are timed in a ``mode``, torch eager or compiled (JAX always jitted); rows
from before that parameter, or with none, read as eager, and each mode gets figures of its own."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.colors import LogNorm
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullFormatter

from implementations import registry

from ..asv_results import ADDED_LAST, legacy_mode
from ..io import read_csv
from ..schema import SCALING_COLUMNS as COLUMNS
from ..schema import SCALING_SPREAD
from . import crossover
from .figures import TIMES, Drawn, save_png, subplots

TIMED = {"time_marginals": "marginals", "time_decode": "decode", "time_loss_and_grad": "loss and gradient"}
HEATMAPS = ("time_marginals", "time_loss_and_grad")
BASELINE = "crf"
EAGER = "eager"


def read_scaling(path: Path) -> pd.DataFrame:
    """The tidy scaling table, or an empty one when ``path`` does not exist."""
    if not Path(path).exists():
        return pd.DataFrame(columns=list(COLUMNS))
    frame = read_csv(path, allow_empty=True)  # a whole file, or CorruptFileError naming it
    for column in (*ADDED_LAST, *SCALING_SPREAD):  # a table written before the column existed
        if column not in frame.columns:
            frame[column] = None
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {', '.join(missing)} (write it with `crfbench scaling`)")
    return frame


def _variant_key(name: str) -> tuple[int, int] | None:
    """Where an asv variant (``crf``, ``bcrf-10``) sorts: by its method's place in the registry,
    then by its iterations; None for a name that is neither."""
    methods = list(registry.REGISTRY)
    if name in registry.REGISTRY:
        return methods.index(name), 0
    base, _, iterations = name.rpartition("-")
    if base in registry.REGISTRY and iterations.isdigit():
        return methods.index(base), int(iterations)
    return None


def in_legend_order(methods) -> list[str]:
    """Methods (asv variants) in the order of the figures' legends and panels: the registry's,
    each method's variants by iterations, then any unknown name alphabetically."""
    names = set(methods)
    keys = {name: key for name in names if (key := _variant_key(name)) is not None}
    return sorted(keys, key=keys.__getitem__) + sorted(names - set(keys))


def timings(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of one grid timing benchmark (``time_marginals``, ...) with integer N, T, B and the mode,
    where none is given the one it was timed in (:func:`legacy_mode`); the peer comparison, which
    shares the name ``time_loss_and_grad``, has no method and is left out."""
    rows = frame[(frame["name"] == name) & frame["method"].notna() & frame["N"].notna()].copy()
    for column in ("N", "T", "B"):
        rows[column] = rows[column].astype(int)
    rows["mode"] = [
        legacy_mode(backend) if pd.isna(mode) else mode
        for backend, mode in zip(rows["backend"], rows["mode"], strict=True)
    ]
    return rows


def _backends(rows: pd.DataFrame) -> list[str]:
    return sorted(rows["backend"].unique(), key=("torch", "jax").index)


def time_figure(rows: pd.DataFrame, title: str, path: Path, caption: str) -> list[Drawn]:
    """Seconds against N (log-log), one panel per T (columns) and backend (rows), a line per method."""
    backends = _backends(rows)
    tags = sorted(rows["T"].unique())
    # one colour per method
    colors = {method: f"C{k}" for k, method in enumerate(in_legend_order(rows["method"]))}
    figure, axes = subplots(
        len(backends), len(tags), (3.2 * len(tags), 2.8 * len(backends) + 0.8), sharex=True
    )
    for i, backend in enumerate(backends):
        for j, num_tags in enumerate(tags):
            axis = axes[i, j]
            panel = rows[(rows["backend"] == backend) & (rows["T"] == num_tags)]
            for method in in_legend_order(panel["method"]):
                line = panel[panel["method"] == method].sort_values("N")
                axis.plot(
                    line["N"], line["value"], marker="o", markersize=3, label=method, color=colors[method]
                )
                _interquartile_band(axis, line, colors[method])
            axis.set_xscale("log", base=2)
            axis.set_yscale("log")
            axis.yaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels crowd a panel
            axis.set_title(f"{backend}, T={num_tags}", fontsize="small")
            axis.grid(True, which="major", linewidth=0.3)
            if j == 0:
                axis.set_ylabel("seconds")
            if i == len(backends) - 1:
                axis.set_xlabel("sequence length N")
    handles: dict[str, Artist] = {}
    for axis in axes.flat:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    labels = in_legend_order(handles)
    figure.suptitle(title, fontsize="medium")
    figure.legend(
        [handles[name] for name in labels],
        labels,
        loc="outside lower center",
        ncol=len(labels),
        fontsize="small",
        frameon=False,
    )
    return [save_png(figure, path, caption, dpi=100)]


def _interquartile_band(axis, line: pd.DataFrame, color: str) -> None:
    """Shade the interquartile range of ``line``'s repeated timings, where asv kept one."""
    spread = line.dropna(subset=list(SCALING_SPREAD))
    if len(spread):
        axis.fill_between(
            spread["N"].astype(float),
            spread["q25"].astype(float),
            spread["q75"].astype(float),
            color=color,
            alpha=0.2,
            linewidth=0,
        )


def speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """Speed-up of every method over ``crf`` (its time ÷ the method's) per backend, N, T and B."""
    keys = ["backend", "N", "T", "B"]
    baseline = rows[rows["method"] == BASELINE].set_index(keys)["value"]
    others = rows[rows["method"] != BASELINE].set_index(keys)
    joined = others.join(baseline.rename("baseline"), how="inner")
    joined["speedup"] = joined["baseline"] / joined["value"]
    return joined.reset_index()[[*keys, "method", "speedup"]]


#: Panels per row of the speed-up heatmaps: wide enough to read at the report page's width.
HEATMAP_COLUMNS = 3
#: The text of a grid point that was not measured (it may not fit the memory cap, or lie off the grid).
NOT_MEASURED = "n/m"


def heatmap(axis, grid: pd.DataFrame, norm: LogNorm) -> AxesImage:
    """One method's speed-ups on the N × T grid: colour and number per measured point, and a hatched
    grey "n/m" where nothing was measured, so that it cannot read as a measured 1×."""
    values = grid.to_numpy(dtype=float)
    rows, columns = values.shape
    # the hatched background shows through the image where a value is NaN (the colour map's "bad"
    # colour is transparent)
    background = Rectangle((-0.5, -0.5), columns, rows, facecolor="0.88", edgecolor="0.6", hatch="///")
    axis.add_patch(background).set(linewidth=0, zorder=0)
    image = axis.imshow(values, cmap="RdBu", norm=norm, origin="lower", aspect="auto", zorder=1)
    vmax = cast(float, norm.vmax)  # speedup_figure makes the norm with its vmax
    for (y, x), value in np.ndenumerate(values):
        if not np.isfinite(value):
            axis.text(x, y, NOT_MEASURED, ha="center", va="center", fontsize=8, color="0.25")
            continue
        dark = abs(np.log10(value)) > 0.6 * np.log10(vmax)  # white text on the deepest colours
        axis.text(
            x, y, f"{value:.2g}", ha="center", va="center", fontsize=8, color="white" if dark else "black"
        )
    axis.set_xticks(range(columns), grid.columns, fontsize=8)
    axis.set_yticks(range(rows), grid.index, fontsize=8)
    return image


def speedup_figure(rows: pd.DataFrame, title: str, path: Path, caption: str) -> list[Drawn]:
    """Heatmaps of ``speedups`` on the N × T grid: one panel per method, ``HEATMAP_COLUMNS`` to a row,
    each backend's panels starting a new row."""
    table = speedups(rows)
    if table.empty:
        return []
    backends = _backends(table)
    methods = in_legend_order(table["method"])
    lengths, tags = sorted(rows["N"].unique()), sorted(rows["T"].unique())
    spread = max(float(np.abs(np.log10(table["speedup"])).max()), 0.5)
    norm = LogNorm(vmin=10**-spread, vmax=10**spread)
    columns = min(HEATMAP_COLUMNS, len(methods))
    lines = -(-len(methods) // columns)  # panel rows per backend
    figure, axes = subplots(
        len(backends) * lines, columns, (3.3 * columns + 1.2, 2.7 * len(backends) * lines + 0.6)
    )
    for axis in axes.flat:
        axis.set_visible(False)  # shown below when a method takes the slot
    for i, backend in enumerate(backends):
        for k, method in enumerate(methods):
            axis = axes[i * lines + k // columns, k % columns]
            axis.set_visible(True)
            cells = table[(table["backend"] == backend) & (table["method"] == method)]
            grid = cells.pivot_table(index="T", columns="N", values="speedup").reindex(
                index=tags, columns=lengths
            )
            image = heatmap(axis, grid, norm)
            axis.set_title(f"{method} ({backend})", fontsize="medium")
            if k % columns == 0:
                axis.set_ylabel("tag-set size T")
            axis.set_xlabel("sequence length N", fontsize="small")
    colorbar = figure.colorbar(image, ax=axes, shrink=0.6, label=f"speed-up over {BASELINE} (×), log scale")
    colorbar.ax.yaxis.set_major_formatter(TIMES)
    figure.suptitle(title, fontsize="large")
    return [save_png(figure, path, caption, dpi=100)]


#: What a scaling figure's marks are, for the captions: asv keeps one number per point.
ASV_POINTS = (
    "Each point is asv's median over its repeated timings; the shaded band around a line of seconds "
    "spans their interquartile range (asv's 25th to 75th percentile; often thinner than the line)."
)


#: SparseMAPSolvers' numbers, in the solver figure's rows: (benchmark name, axis label, log scale).
SOLVER_ROWS = (
    ("time_solve", "seconds per solve", True),
    ("track_iterations", "iterations run", False),
    ("track_support_size", "mean support size", False),
    ("track_converged", "share converged", False),
)
#: BetheSolvers' numbers, likewise (a Bethe solve has no support).
BETHE_ROWS = tuple(row for row in SOLVER_ROWS if row[0] != "track_support_size")


def solver_figure(
    rows: pd.DataFrame,
    title: str,
    path: Path,
    caption: str,
    solvers: tuple[str, ...] = registry.SPARSEMAP_SOLVERS,
    panels: tuple[tuple[str, str, bool], ...] = SOLVER_ROWS,
) -> list[Drawn]:
    """A method's solvers on random scores: each of ``panels`` (rows) against N, one panel column
    per T measured at two or more N (a lone point draws no curve; the caption names those left
    out), a line per solver (those of ``solvers`` that were run). Shares are drawn on [0, 1]."""
    lengths = rows.groupby("T")["N"].nunique()
    tags = sorted(lengths.index[lengths >= 2])
    alone = sorted(set(lengths.index) - set(tags))
    if not tags:
        return []
    if alone:
        points = ", ".join(f"T = {t} (N = {int(rows[rows['T'] == t]['N'].iloc[0])})" for t in alone)
        caption += f" Measured at a single N and not drawn: {points}; its numbers are in results/scaling.csv."
    solvers = tuple(name for name in solvers if name in set(rows["solver"]))
    # one y-axis per row: the panels compare across T, and a narrow log range gets readable decades
    height = 2.4 * len(panels)
    figure, axes = subplots(len(panels), len(tags), (3.2 * len(tags), height), sharex=True, sharey="row")
    for j, num_tags in enumerate(tags):
        for i, (name, label, log) in enumerate(panels):
            axis = axes[i, j]
            panel = rows[(rows["name"] == name) & (rows["T"] == num_tags)]
            for k, solver in enumerate(solvers):
                line = panel[panel["solver"] == solver].sort_values("N")
                axis.plot(line["N"], line["value"], marker="o", markersize=3, label=solver, color=f"C{k}")
                _interquartile_band(axis, line, f"C{k}")
            axis.set_xscale("log", base=2)
            if log:
                axis.set_yscale("log")
                axis.yaxis.set_minor_formatter(NullFormatter())
            if name.startswith("track_converged"):  # a share: a flat line at 1 stays at 1 of [0, 1]
                axis.set_ylim(-0.05, 1.05)
            axis.grid(True, which="major", linewidth=0.3)
            if j == 0:
                axis.set_ylabel(label)
        axes[0, j].set_title(f"T={num_tags}", fontsize="small")
        axes[-1, j].set_xlabel("sequence length N")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.suptitle(title, fontsize="medium")
    figure.legend(
        handles, labels, loc="outside lower center", ncol=len(labels), fontsize="small", frameon=False
    )
    return [save_png(figure, path, caption, dpi=100)]


def scaling_figures(frame: pd.DataFrame, out_dir: Path) -> list[Drawn]:
    """Time-against-N figures for every timed operation and speed-up heatmaps for marginals and the
    training step, per machine, device and batch size; and SparseMAP's solvers over N and T."""
    written = []
    sparsemap = frame["benchmark"].str.contains("SparseMAPSolvers", regex=False)
    solves = frame[sparsemap & frame["N"].notna()].astype({"N": int, "T": int, "B": int})
    for (machine, batch), rows in solves.groupby(["machine", "B"]):  # SparseMAPSolvers runs on CPU
        where = f"{machine}, cpu, B={batch}"
        written += solver_figure(
            rows,
            f"SparseMAP's solvers on random scores ({where})",
            out_dir / f"scaling-sparsemap-solvers-{machine}-B{batch}.png",
            f"asv SparseMAPSolvers ({where}; torch, one thread): one solve of a batch of random scores "
            "(the timings' scores) by the active set and vanilla, away-step and pairwise Frank–Wolfe, "
            "each with the registry's iteration budget and support size: seconds per solve, iterations "
            "run, mean number of sequences in the support, and the share of the batch whose "
            "optimality certificate was met (below 1: the budget or the support's slots ran out "
            f"first), against N, one column per T. {ASV_POINTS}",
        )
    bethe = frame["benchmark"].str.contains("BetheSolvers", regex=False)
    solves = frame[bethe & frame["N"].notna()].astype({"N": int, "T": int, "B": int, "measurements": int})
    for (machine, batch, count), rows in solves.groupby(["machine", "B", "measurements"]):
        where = f"{machine}, cpu, B={batch}, J={count}"
        written += solver_figure(
            rows,
            f"Bethe projections' solvers on random scores ({where})",
            out_dir / f"scaling-bethe-solvers-{machine}-B{batch}-J{count}.png",
            f"asv BetheSolvers ({where}; torch, one thread): one solve of a batch of random scores "
            f"under J = {count} random convex soft constraints on the expected tag counts, by "
            "Bethe-RDA, Bethe-MD and accelerated RDA, until no marginal moves by more than 1e-4 or "
            "200 iterations: seconds per solve, iterations run and the share of the batch that "
            "stopped moving, against N, one column per T (grid capped at 2^23 arcs). "
            f"{ASV_POINTS}",
            solvers=registry.BETHE_SOLVERS,
            panels=BETHE_ROWS,
        )
    for name, label in TIMED.items():
        # one figure per machine, device, batch size and torch mode (a panel's lines need one B
        # and mode), JAX's jitted rows beside each; the eager figures keep their names
        for (machine, device, batch, mode), rows in _by_torch_mode(timings(frame, name)):
            where = f"{machine}, {device}, B={batch}" + ("" if mode == EAGER else f", torch {mode}")
            stem = f"{machine}-{device}-B{batch}-{name.removeprefix('time_')}"
            stem += "" if mode == EAGER else f"-{mode}"
            written += time_figure(
                rows,
                f"{label}: seconds against N ({where})",
                out_dir / f"scaling-time-{stem}.png",
                f"asv scaling, {label} ({where}): seconds against sequence length N (log-log), one panel "
                f"per tag-set size T and backend, a line per method. {ASV_POINTS}",
            )
            if name in HEATMAPS:
                written += speedup_figure(
                    rows,
                    f"{label}: speed-up over sequential {BASELINE} ({where})",
                    out_dir / f"scaling-speedup-{stem}.png",
                    f"asv scaling, {label} ({where}): speed-up of each method over sequential {BASELINE} "
                    f"({BASELINE}'s seconds ÷ the method's) on the N × T grid, one panel per method and "
                    "backend; colour (log scale, blue: faster than crf, red: slower) and number: the "
                    f'speed-up; hatched grey "{NOT_MEASURED}": not measured. {ASV_POINTS}',
                )
    return written + crossover.crossover_figures(frame, out_dir)


def _by_torch_mode(rows: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """``rows`` per machine, device, B and torch mode, each with JAX's rows of the same machine,
    device and B (JAX has one mode, jitted); JAX's rows alone under ``compiled``."""
    groups = []
    for (machine, device, batch), group in rows.groupby(["machine", "device", "B"]):
        torch_rows, jax_rows = group[group["backend"] != "jax"], group[group["backend"] == "jax"]
        for mode in sorted(set(torch_rows["mode"])) or ["compiled"]:
            both = pd.concat([torch_rows[torch_rows["mode"] == mode], jax_rows])
            groups.append(((machine, device, batch, mode), both))
    return groups
