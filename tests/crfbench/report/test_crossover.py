"""The crossover sweep's speed-ups, crossover table and figures on tables with known crossovers,
and the report with and without the sweep."""

from __future__ import annotations

import pandas as pd
import pytest

from crfbench.asv_results import COLUMNS
from crfbench.report import render_report
from crfbench.report.crossover import (
    NO_CROSSOVER,
    crossover_figures,
    crossover_table,
    faster_from,
    speedups,
)

from .fixtures import write_paper, write_results

LENGTHS = (16, 64, 256, 1024)


def _rows(seconds: dict[tuple[str, str], list[float]], operation="loss_and_grad", num_tags=17, batch=8):
    """Crossover rows: (backend, method) -> seconds at each of ``LENGTHS``."""
    rows = []
    for (backend, method), values in seconds.items():
        for n, value in zip(LENGTHS, values, strict=True):
            row = dict.fromkeys(COLUMNS, None)
            row.update(
                machine="box",
                commit="a" * 40,
                date="2026-11-21",
                benchmark="bench_crossover.Crossover.time_crossover",
                name="time_crossover",
                unit="seconds",
                value=value,
                backend=backend,
                method=method,
                operation=operation,
                N=n,
                T=num_tags,
                B=batch,
                device="cpu",
            )
            rows.append(row)
    return rows


#: BCRF-5 overtakes crf from N = 256 on and crf-scan never; BCRF-10 overtakes neither; pytorch-crf,
#: torch only, is slower than both BCRFs everywhere (a JAX BCRF is compared with it too).
KNOWN = {
    ("torch", "crf"): [1.0, 1.0, 1.0, 1.0],
    ("torch", "crf-scan"): [0.1, 0.1, 0.1, 0.1],
    ("torch", "pytorch-crf"): [8.0, 8.0, 8.0, 8.0],
    ("torch", "bcrf-5"): [2.0, 1.5, 0.5, 0.4],
    ("torch", "bcrf-10"): [4.0, 3.0, 2.0, 2.0],
    ("jax", "crf"): [1.0, 1.0, 1.0, 1.0],
    ("jax", "bcrf-5"): [0.5, 2.0, 0.5, 0.5],
}


def _frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_speedup_is_the_baseline_over_bcrf_within_a_backend_and_over_torch_pytorch_crf():
    table = speedups(_frame(_rows(KNOWN))).set_index(["backend", "method", "baseline", "N"])["speedup"]
    assert table[("torch", "bcrf-5", "crf", 256)] == 2.0
    assert table[("torch", "bcrf-10", "crf-scan", 16)] == pytest.approx(0.025)
    assert table[("jax", "bcrf-5", "pytorch-crf", 16)] == 16.0  # JAX's BCRF against torch's pytorch-crf
    assert ("jax", "bcrf-5", "crf-scan", 16) not in table.index  # no JAX crf-scan timed


@pytest.mark.parametrize(
    ("faster", "expected"),
    [
        ([False, False, True, True], "256"),
        ([True, False, True, True], "256"),  # faster at 16, slower at 64: for good from 256
        ([True, True, True, True], "≤ 16"),
        ([False, False, False, True], "1024"),
        ([True, True, True, False], "none"),
    ],
)
def test_faster_from_is_the_first_n_from_which_it_stays_faster(faster, expected):
    assert faster_from(LENGTHS, faster) == expected


def test_crossover_table_gives_the_crossover_n_per_baseline_and_t():
    rows = _rows(KNOWN) + _rows({key: [v / 4 for v in values] for key, values in KNOWN.items()}, num_tags=4)
    table = crossover_table(_frame(rows))
    torch_t17 = table[(table["backend"] == "torch") & (table["T"] == 17)].set_index("baseline")
    assert torch_t17.loc["crf", "bcrf-5 faster from N"] == "256"
    assert torch_t17.loc["crf", "bcrf-10 faster from N"] == "none"
    assert torch_t17.loc["crf-scan", "bcrf-5 faster from N"] == "none"
    assert torch_t17.loc["pytorch-crf", "bcrf-10 faster from N"] == "≤ 16"
    jax = table[(table["backend"] == "jax") & (table["T"] == 17)].set_index("baseline")
    assert jax.loc["crf", "bcrf-5 faster from N"] == "256"
    assert jax.loc["crf", "bcrf-10 faster from N"] == "—"  # no JAX BCRF-10 timed
    assert set(jax.index) == {"crf", "pytorch-crf"}
    assert set(table["T"]) == {4, 17} and set(table["N measured"]) == {"16–1024"}
    assert crossover_table(_frame([])).empty


def test_one_figure_per_machine_device_operation_and_batch(tmp_path):
    rows = _rows(KNOWN) + _rows(KNOWN, operation="decode") + _rows(KNOWN, batch=32)
    names = sorted(drawn.path.name for drawn in crossover_figures(_frame(rows), tmp_path))
    assert names == [
        "crossover-box-cpu-B32-loss_and_grad.png",
        "crossover-box-cpu-B8-decode.png",
        "crossover-box-cpu-B8-loss_and_grad.png",
    ]
    assert all((tmp_path / name).stat().st_size > 10_000 for name in names)


def _scaling_row() -> dict:
    row = dict.fromkeys(COLUMNS, None)
    row.update(
        machine="box", commit="a" * 40, date="2026-11-21", benchmark="x.time_marginals", name="time_marginals"
    )
    return row | {"value": 1.0, "backend": "torch", "method": "crf", "N": 16, "T": 8, "B": 8, "device": "cpu"}


def test_the_report_draws_the_crossover_and_writes_its_table(tmp_path):
    results = write_results(tmp_path / "results", metrics=False)
    _frame([_scaling_row(), *_rows(KNOWN)]).to_csv(results / "scaling.csv", index=False)
    out = tmp_path / "out"
    written = render_report(results, write_paper(tmp_path / "paper.csv"), out)
    assert out / "tables" / "crossover.csv" in written
    table = pd.read_csv(out / "tables" / "crossover.csv")
    crf = table[(table["backend"] == "torch") & (table["baseline"] == "crf")]
    assert crf["bcrf-5 faster from N"].tolist() == ["256"]
    page = (out / "index.html").read_text()
    assert 'src="figures/crossover-box-cpu-B8-loss_and_grad.png"' in page
    assert NO_CROSSOVER not in page


def test_without_crossover_results_the_report_says_so(tmp_path):
    results = write_results(tmp_path / "results", metrics=False)
    _frame([_scaling_row()]).drop(columns="mode").to_csv(results / "scaling.csv", index=False)  # an old table
    out = tmp_path / "out"
    written = render_report(results, write_paper(tmp_path / "paper.csv"), out)
    assert out / "tables" / "crossover.csv" not in written
    assert "No crossover results" in (out / "index.html").read_text()
    assert "No crossover results" in (out / "README.md").read_text()
