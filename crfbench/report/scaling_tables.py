"""The asv scaling results' summary tables (``results/scaling.csv``; the figures are
``crfbench.report.scaling``'s): the roofline (IBP's achieved bandwidth against the machine's
streaming and read bandwidths), the exact CRF against the PyTorch CRF libraries, torch's operator
counts, where BCRF-10 overtakes the sequential exact CRF on the scaling grid, and the crossover
sweep's table (``crfbench.report.crossover``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import crossover
from .scaling import BASELINE, in_legend_order, timings


def _point(row) -> str:
    return f"B={int(row['B'])} N={int(row['N'])} T={int(row['T'])}"


def roofline_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine, device and backend: IBP-10's achieved bandwidth at the largest grid point measured
    (most arcs B·(N-1)·T²), the traffic it counts an arc and iteration (that of the form run: 8
    bytes for two projections' reads, 4 for torch's sweep, which reads each arc once; NaN in runs
    that did not record it) and the seconds an iteration that gives, the machine's streaming and
    read bandwidths (the faster backend's, from ``MemoryBandwidth``; NaN for a run without the
    read pass) and IBP's share of each. (``track_ibp_roofline_fraction`` in the asv history is the
    share of streaming bandwidth against a pass timed in the benchmark's own process.)"""

    def fastest(name: str) -> pd.Series:
        return frame[frame["name"] == name].groupby(["machine", "device"])["value"].max()

    stream, read = fastest("track_stream_bandwidth"), fastest("track_read_bandwidth")
    ibp = frame[frame["name"] == "track_ibp_bandwidth"]
    point = ["machine", "commit", "device", "backend", "B", "N", "T"]
    counted = frame[frame["name"] == "track_ibp_bytes_per_arc"].set_index(point)["value"]
    rows = []
    for (machine, device, backend), group in ibp.groupby(["machine", "device", "backend"], sort=True):
        arcs = group["B"].astype(int) * (group["N"].astype(int) - 1) * group["T"].astype(int) ** 2
        largest = group.loc[arcs.idxmax()]
        streaming, reading = (float(bound.get((machine, device), np.nan)) for bound in (stream, read))
        achieved = float(largest["value"])
        per_arc = float(counted.get(tuple(largest[point]), np.nan))
        rows.append(
            {
                "machine": machine,
                "device": device,
                "backend": backend,
                "largest point": _point(largest),
                "bytes an arc and iteration": per_arc,
                "ms an iteration": round(per_arc * float(arcs.max()) / achieved / 1e6, 2),
                "IBP GB/s": round(achieved, 2),
                "streaming GB/s": round(streaming, 2),
                "share of streaming bandwidth": round(achieved / streaming, 3),
                "read GB/s": round(reading, 2),
                "share of read bandwidth": round(achieved / reading, 3),
            }
        )
    return pd.DataFrame(rows)


def peers_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Exact CRF loss forward + backward at B=64, N=50, T=17: each implementation's time and our
    sequential torch ``crf``'s time as a fraction of it (below 1: ours is faster)."""
    rows = frame[frame["name"] == "time_loss_and_grad"].dropna(subset=["implementation"])
    out = []
    for (machine, device), group in rows.groupby(["machine", "device"], sort=True):
        ours = group.loc[group["implementation"] == BASELINE, "value"]
        for _, row in group.iterrows():
            out.append(
                {
                    "machine": machine,
                    "device": device,
                    "implementation": row["implementation"],
                    "ms": round(1000 * float(row["value"]), 3),
                    "crf (torch) ÷ this": round(float(ours.iloc[0] / row["value"]), 3) if len(ours) else None,
                }
            )
    return pd.DataFrame(out)


def operators_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Torch operators that compute per call at B=8, T=8 (asv's ``Operators``), with the host
    synchronisations in brackets where there are any, per machine, method and operation, one
    column per N: on a GPU, the kernel launches and queue drains that bound a short sequence."""
    counts = frame[frame["name"].isin(["track_operators", "track_host_syncs"])]
    if counts.empty:
        return pd.DataFrame()
    table = counts.pivot_table(
        index=["machine", "method", "operation", "N"], columns="name", values="value", aggfunc="first"
    ).dropna()
    cells = [
        f"{int(ops)}" + (f" ({int(syncs)} sync{'s' * (syncs != 1)})" if syncs else "")
        for ops, syncs in zip(table["track_operators"], table["track_host_syncs"], strict=True)
    ]
    table = pd.Series(cells, index=table.index).unstack("N")
    order = {method: rank for rank, method in enumerate(in_legend_order(counts["method"].unique()))}
    table = table.reindex(sorted(table.index, key=lambda key: (key[0], order[key[1]], key[2])))
    table.columns = [f"N={int(n)}" for n in table.columns]
    return table.fillna("—").reset_index()


#: The operations whose crossover the scaling report shows, by asv benchmark name.
CROSSOVER_OPERATIONS = {"time_marginals": "marginals", "time_loss_and_grad": "loss + gradient"}


def _overtakes(group: pd.DataFrame, method: str) -> str | None:
    """The first N of ``group``'s grid from which ``method`` is faster than sequential ``crf`` at
    every larger N measured: ``"≤ N"`` when it is already faster at the smallest N measured (the
    crossover lies at or below it), ``"none"`` when never; None when one of the two is missing."""
    pivot = group.pivot_table(index="N", columns="method", values="value").sort_index()
    if BASELINE not in pivot or method not in pivot:
        return None
    both = pivot[[BASELINE, method]].dropna()
    return crossover.faster_from(both.index.tolist(), (both[method] < both[BASELINE]).tolist())


def crossover_table(frame: pd.DataFrame, method: str = "bcrf-10") -> pd.DataFrame:
    """Per machine, device, backend, mode and T: for marginals and for the loss with its gradient,
    the smallest N of the grid from which ``method`` is faster than sequential ``crf`` at every
    larger N measured (:func:`_overtakes`), beside the lengths measured."""
    overtakes: dict[tuple, dict[str, str]] = {}  # (machine, device, backend, mode, T) -> label -> N
    lengths: dict[tuple, set[int]] = {}
    settings = ["machine", "device", "backend", "mode", "T"]
    for name, label in CROSSOVER_OPERATIONS.items():
        for keys, group in timings(frame, name).groupby(settings, sort=True):
            found = _overtakes(group, method)
            if found is not None:
                overtakes.setdefault(keys, {})[label] = found
                lengths.setdefault(keys, set()).update(group["N"].astype(int))
    return pd.DataFrame(
        [
            {
                "machine": machine,
                "device": device,
                "backend": backend,
                "mode": mode,
                "T": int(num_tags),
                "N measured": f"{min(lengths[keys])}–{max(lengths[keys])}",
                **{
                    f"{label}: {method} faster from N": cells.get(label, "—")
                    for label in CROSSOVER_OPERATIONS.values()
                },
            }
            for keys, cells in sorted(overtakes.items())
            for machine, device, backend, mode, num_tags in [keys]
        ]
    )


def summary_tables(frame: pd.DataFrame) -> dict[str, tuple[str, pd.DataFrame]]:
    """The scaling summaries that have data, by file stem: (title, table)."""
    tables = {
        "scaling-roofline": (
            "Roofline: IBP-10's achieved bandwidth against streaming and read bandwidth (the traffic "
            "counted is the form's; torch's CPU sweep reads each arc once an iteration, from memory "
            "once a call and from cache after, so it can pass both)",
            roofline_table(frame),
        ),
        "scaling-peers": (
            "Exact CRF loss + gradient at B=64, N=50, T=17 against PyTorch CRF libraries",
            peers_table(frame),
        ),
        "scaling-crossover": ("Where BCRF-10 overtakes sequential forward", crossover_table(frame)),
        "crossover": (
            "Crossover sweep: the N from which BCRF is faster than each baseline (ours compiled, "
            "pytorch-crf eager)",
            crossover.crossover_table(frame),
        ),
        "scaling-operators": (
            "Torch operators (host synchronisations) per call, B=8, T=8: a GPU step's kernel launches",
            operators_table(frame),
        ),
    }
    return {stem: (title, table) for stem, (title, table) in tables.items() if not table.empty}
