"""Where the results come from (devices, backends, code revisions, dataset protocols) and what in them
the tables cannot show."""

from __future__ import annotations

import pandas as pd

from .layout import DATASET_LABELS, DECODER_LABELS, TRAIN_LABELS, natural_key


def _joined(values: pd.Series) -> str:
    return ", ".join(sorted(set(values), key=natural_key))


def sources(files: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (file, device, backend, threads, revision) with the datasets and row count."""
    parts = []
    for name, frame in files.items():
        if frame.empty:
            continue
        described = frame.assign(threads=frame.get("threads", ""))
        keys = ["device", "device_name", "backend", "threads", "revision"]
        grouped = described.groupby(keys, as_index=False).agg(
            datasets=("dataset", _joined), rows=("dataset", "size")
        )
        parts.append(grouped.assign(file=name))
    columns = ["file", "device", "device_name", "backend", "threads", "revision", "datasets", "rows"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def protocols(files: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (dataset, protocol, options): official or substitute splits, and which files use it."""
    parts = [
        frame[["dataset", "protocol", "dataset_options", "encoder_name"]].assign(file=name)
        for name, frame in files.items()
        if not frame.empty
    ]
    columns = ["dataset", "protocol", "dataset_options", "encoders", "files"]
    if not parts:
        return pd.DataFrame(columns=columns)
    grouped = (
        pd.concat(parts, ignore_index=True)
        .groupby(["dataset", "protocol", "dataset_options"], as_index=False)
        .agg(encoders=("encoder_name", _joined), files=("file", _joined))
    )
    order = grouped["dataset"].map(
        lambda name: (
            (list(DATASET_LABELS).index(name), "") if name in DATASET_LABELS else (len(DATASET_LABELS), name)
        )
    )
    return grouped.assign(order=order).sort_values("order", kind="stable")[columns].reset_index(drop=True)


def warnings(files: dict[str, pd.DataFrame]) -> list[str]:
    """Sentences on results the tables leave out or merge: unknown names, mixed dataset options."""
    lines = []
    known = {"dataset": DATASET_LABELS, "loss": TRAIN_LABELS, "decoder": DECODER_LABELS}
    for name, frame in files.items():
        for column, labels in known.items():
            if column in frame:
                unknown = sorted(set(frame[column]) - set(labels) - {""})
                if unknown:
                    lines.append(f"{name}: {column} {', '.join(unknown)} is in no table.")
        options = frame.groupby("dataset")["dataset_options"].nunique()
        for dataset, count in options[options > 1].items():
            lines.append(
                f"{name}: {dataset} has results with {count} different dataset options; "
                "its cells average over them."
            )
    return lines


#: The mark a result row's revision carries when its code had uncommitted changes (``environment``).
DIRTY = "+dirty"


def commits(sources_table: pd.DataFrame) -> pd.DataFrame:
    """One row per code revision of the results (``sources``' rows summed): ``revision`` (the
    commit's first 7 digits, ``+dirty`` kept; "unknown" where none was recorded), ``rows``, and
    ``dirty`` (made from a checkout with uncommitted changes)."""
    columns = ["revision", "rows", "dirty"]
    if sources_table.empty:
        return pd.DataFrame(columns=columns)
    revision = sources_table["revision"].astype(str)
    dirty = revision.str.endswith(DIRTY)
    short = revision.str.removesuffix(DIRTY).str[:7].where(revision != "", "unknown")
    named = sources_table.assign(revision=short + dirty.map({True: DIRTY, False: ""}), dirty=dirty)
    return named.groupby(["revision", "dirty"], as_index=False)["rows"].sum()[columns]


def commit_line(sources_table: pd.DataFrame) -> str:
    """The report's header line on where the results come from: each revision with its rows."""
    table = commits(sources_table)
    if table.empty:
        return "No result rows: no code revision to name."
    named = ", ".join(f"{row.revision} ({row.rows} rows)" for row in table.itertuples(index=False))
    return f"Results from commit(s) {named}."


def dirty_warning(sources_table: pd.DataFrame) -> str | None:
    """A warning naming how many result rows come from code with uncommitted changes (their revision
    ends in ``+dirty``: no commit holds the code that made them), or None when none do."""
    table = commits(sources_table)
    rows = int(table.loc[table["dirty"], "rows"].sum()) if not table.empty else 0
    if not rows:
        return None
    return (
        f"{rows} of {int(table['rows'].sum())} result rows come from a checkout with uncommitted "
        f"changes ({DIRTY}): no commit holds the code that made them; the Sources table marks them."
    )
