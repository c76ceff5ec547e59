"""The asv scaling summaries and figures on tidy tables with known values."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from crfbench.asv_results import COLUMNS
from crfbench.report import render_report
from crfbench.report.scaling import (
    BETHE_ROWS,
    SOLVER_ROWS,
    _interquartile_band,
    scaling_figures,
    solver_figure,
    speedups,
)
from crfbench.report.scaling_tables import (
    crossover_table,
    operators_table,
    peers_table,
    roofline_table,
    summary_tables,
)
from implementations.registry import BETHE_SOLVERS, SPARSEMAP_SOLVERS

from .fixtures import write_paper, write_results


def _row(name: str, value: float, **parameters) -> dict:
    row = dict.fromkeys(COLUMNS, None)
    row.update(
        machine="box", commit="a" * 40, date="2026-11-21", benchmark=f"x.{name}", name=name, value=value
    )
    row.update({"device": "cpu", **parameters})
    return row


def _frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _marginals(seconds: dict[str, list[float]], lengths=(16, 64, 256, 1024), backend="torch", num_tags=8):
    return [
        _row("time_marginals", value, backend=backend, method=method, N=n, T=num_tags, B=8)
        for method, values in seconds.items()
        for n, value in zip(lengths, values, strict=True)
    ]


def test_speedup_is_the_baseline_time_over_the_method_time():
    frame = _frame(_marginals({"crf": [2.0, 4.0, 8.0, 16.0], "bcrf-10": [4.0, 4.0, 2.0, 1.0]}))
    table = speedups(frame[frame["name"] == "time_marginals"]).set_index("N")["speedup"]
    assert table.to_dict() == {16: 0.5, 64: 1.0, 256: 4.0, 1024: 16.0}


@pytest.mark.parametrize(
    ("bcrf", "expected"),
    [
        ([2.0, 1.5, 0.5, 0.4], "256"),  # faster from 256 on
        ([0.5, 1.5, 0.5, 0.4], "256"),  # faster at 16, slower at 64: it overtakes for good at 256
        ([0.5, 0.5, 0.5, 0.5], "≤ 16"),  # already faster at the smallest N measured
        ([2.0, 2.0, 2.0, 0.9], "1024"),
        ([2.0, 2.0, 2.0, 2.0], "none"),
    ],
)
def test_crossover_is_the_first_n_from_which_bcrf_stays_faster(bcrf, expected):
    frame = _frame(_marginals({"crf": [1.0, 1.0, 1.0, 1.0], "bcrf-10": bcrf}))
    table = crossover_table(frame)
    assert table["marginals: bcrf-10 faster from N"].tolist() == [expected]
    assert table["loss + gradient: bcrf-10 faster from N"].tolist() == ["—"]  # not measured
    assert table["N measured"].tolist() == ["16–1024"]


def test_crossover_of_the_loss_beside_that_of_marginals_on_a_partial_grid():
    """A GPU run that measured only N = 256 and 1024: the crossover is at or below 256."""
    marginals = _marginals({"crf": [3.0, 9.0], "bcrf-10": [1.0, 1.0]}, lengths=(256, 1024), backend="torch")
    loss = [
        _row("time_loss_and_grad", value, backend="torch", method=method, N=n, T=8, B=8)
        for method, values in {"crf": [1.0, 9.0], "bcrf-10": [2.0, 1.0]}.items()
        for n, value in zip((256, 1024), values, strict=True)
    ]
    row = crossover_table(_frame(marginals + loss)).iloc[0]
    assert row["N measured"] == "256–1024"
    assert row["marginals: bcrf-10 faster from N"] == "≤ 256"
    assert row["loss + gradient: bcrf-10 faster from N"] == "1024"


def test_roofline_reads_the_largest_point_against_the_faster_streaming_backend():
    rows = [
        _row("track_stream_bandwidth", 40.0, backend="torch"),
        _row("track_stream_bandwidth", 50.0, backend="jax"),
        _row("track_read_bandwidth", 25.0, backend="torch"),
        _row("track_read_bandwidth", 20.0, backend="jax"),
    ]
    for backend, (n, t, gbs) in itertools.product(
        ("torch", "jax"), [(16, 512, 10.0), (1024, 32, 20.0), (64, 8, 1.0)]
    ):
        scale = 2 if backend == "jax" else 1
        rows.append(_row("track_ibp_bandwidth", scale * gbs, backend=backend, N=n, T=t, B=8))
    table = roofline_table(_frame(rows)).set_index("backend")
    # the most arcs: B (N-1) T^2 = 8 * 15 * 512^2 beats 8 * 1023 * 32^2
    assert table.loc["torch", "largest point"] == "B=8 N=16 T=512"
    assert table.loc["torch", "IBP GB/s"] == 10.0 and table.loc["jax", "IBP GB/s"] == 20.0
    assert table.loc["jax", "share of streaming bandwidth"] == pytest.approx(0.4)  # 20 / 50
    assert table.loc["torch", "share of streaming bandwidth"] == pytest.approx(0.2)
    assert set(table["streaming GB/s"]) == {50.0}
    assert set(table["read GB/s"]) == {25.0}  # the faster backend's read pass
    assert table.loc["jax", "share of read bandwidth"] == pytest.approx(0.8)  # 20 / 25


def test_roofline_turns_the_traffic_counted_into_seconds_an_iteration():
    """torch's sweep counts 4 bytes an arc and iteration (each arc read once), JAX's projections 8;
    a run that did not record the count leaves it and the seconds unknown."""
    rows = [_row("track_stream_bandwidth", 40.0, backend="torch")]
    for backend, per_arc, gbs in (("torch", 4.0, 10.0), ("jax", 8.0, 10.0), ("cuda", None, 10.0)):
        rows.append(_row("track_ibp_bandwidth", gbs, backend=backend, N=17, T=128, B=8))
        if per_arc is not None:
            rows.append(_row("track_ibp_bytes_per_arc", per_arc, backend=backend, N=17, T=128, B=8))
        rows.append(_row("track_ibp_bytes_per_arc", 16.0, backend=backend, N=9, T=128, B=8))  # another point
    table = roofline_table(_frame(rows)).set_index("backend")
    arcs = 8 * 16 * 128**2
    assert table.loc["torch", "bytes an arc and iteration"] == 4.0
    assert table.loc["torch", "ms an iteration"] == pytest.approx(round(4 * arcs / 10e9 * 1e3, 2))
    assert table.loc["jax", "ms an iteration"] == pytest.approx(round(8 * arcs / 10e9 * 1e3, 2))
    assert np.isnan(table.loc["cuda", "bytes an arc and iteration"]) and np.isnan(
        table.loc["cuda", "ms an iteration"]
    )


def test_roofline_without_a_read_pass_leaves_its_share_unknown():
    rows = [
        _row("track_stream_bandwidth", 40.0, backend="torch"),
        _row("track_ibp_bandwidth", 10.0, backend="torch", N=64, T=32, B=8),
    ]
    table = roofline_table(_frame(rows))
    assert table["share of streaming bandwidth"].tolist() == [0.25]
    assert table["share of read bandwidth"].isna().all()


def test_peers_table_gives_our_time_as_a_fraction_of_each():
    seconds = {"crf": 0.002, "pytorch-crf": 0.004, "torch-struct": 0.04}
    frame = _frame(
        [_row("time_loss_and_grad", value, implementation=name) for name, value in seconds.items()]
    )
    table = peers_table(frame).set_index("implementation")
    assert table["crf (torch) ÷ this"].to_dict() == {"crf": 1.0, "pytorch-crf": 0.5, "torch-struct": 0.05}
    assert table.loc["pytorch-crf", "ms"] == 4.0


def _suite_frame() -> pd.DataFrame:
    rows = []
    for name, backend in itertools.product(
        ("time_marginals", "time_decode", "time_loss_and_grad"), ("torch", "jax")
    ):
        for method, n, t in itertools.product(("crf", "bcrf-10", "meanfield-5"), (16, 64), (8, 32)):
            seconds = n * t * (2.0 if method == "crf" else 1.0) * 1e-6
            rows.append(_row(name, seconds, backend=backend, method=method, N=n, T=t, B=8))
    rows.append(_row("track_stream_bandwidth", 30.0, backend="torch"))
    rows.append(_row("track_ibp_bandwidth", 3.0, backend="torch", N=64, T=32, B=8))
    rows.append(_row("track_ibp_roofline_fraction", 0.1, backend="torch", N=64, T=32, B=8))
    rows.append(_row("time_loss_and_grad", 0.01, implementation="crf"))
    for (name, _, _), solver, n, t in itertools.product(SOLVER_ROWS, SPARSEMAP_SOLVERS, (16, 64), (8, 32)):
        rows.append(_row(name, n * t * 1e-5, device=None, solver=solver, N=n, T=t, B=8))
        rows[-1]["benchmark"] = f"bench_sparsemap.SparseMAPSolvers.{name}"
    # Bethe's solvers get figures of their own, one per number of measurements
    for (name, _, _), solver, count, n in itertools.product(BETHE_ROWS, BETHE_SOLVERS, (4, 64), (16, 64)):
        rows.append(_row(name, n * 1e-4, device=None, solver=solver, measurements=count, N=n, T=8, B=4))
        rows[-1]["benchmark"] = f"bench_bethe.BetheSolvers.{name}"
    return _frame(rows)


def test_figures_per_operation_heatmaps_for_marginals_and_training_and_both_methods_solvers(tmp_path):
    written = [drawn.path for drawn in scaling_figures(_suite_frame(), tmp_path)]
    assert sorted(path.name for path in written) == [
        "scaling-bethe-solvers-box-B4-J4.png",
        "scaling-bethe-solvers-box-B4-J64.png",
        "scaling-sparsemap-solvers-box-B8.png",
        "scaling-speedup-box-cpu-B8-loss_and_grad.png",
        "scaling-speedup-box-cpu-B8-marginals.png",
        "scaling-time-box-cpu-B8-decode.png",
        "scaling-time-box-cpu-B8-loss_and_grad.png",
        "scaling-time-box-cpu-B8-marginals.png",
    ]
    assert all(path.stat().st_size > 10_000 for path in written)


def test_summaries_with_data_only():
    assert set(summary_tables(_suite_frame())) == {"scaling-roofline", "scaling-peers", "scaling-crossover"}
    assert summary_tables(_frame([])) == {}


def test_the_report_shows_the_scaling_section(tmp_path):
    results = write_results(tmp_path / "results", metrics=False)
    _suite_frame().to_csv(results / "scaling.csv", index=False)
    out = tmp_path / "out"
    written = render_report(results, write_paper(tmp_path / "paper.csv"), out)
    assert out / "tables" / "scaling-roofline.md" in written
    page = (out / "index.html").read_text()
    assert "Scaling (asv suite)" in page and "Roofline: IBP-10" in page
    assert 'src="figures/scaling-speedup-box-cpu-B8-marginals.png"' in page
    assert "hatched grey &quot;n/m&quot;: not measured" in page  # a caption says what each mark is
    assert "spans their interquartile range" in page
    readme = (out / "README.md").read_text()
    assert "### Where BCRF-10 overtakes sequential forward" in readme
    assert "| box | cpu | torch | eager | 8 | 16–64 | ≤ 16 | ≤ 16 |" in readme  # no mode: eager


def test_without_scaling_results_the_report_says_so(tmp_path):
    results = write_results(tmp_path / "results", metrics=False)
    render_report(results, write_paper(tmp_path / "paper.csv"), tmp_path / "out")
    page = (tmp_path / "out" / "index.html").read_text()
    assert "scaling.csv is absent" in page and "No asv scaling results." in page


def test_each_batch_size_gets_its_own_figures(tmp_path):
    frame = _frame(
        _marginals({"crf": [1.0, 1.0, 1.0, 1.0], "bcrf-10": [2.0, 2.0, 2.0, 2.0]})
        + [{**row, "B": 64} for row in _marginals({"crf": [3.0] * 4, "bcrf-10": [1.0] * 4})]
    )
    names = sorted(drawn.path.name for drawn in scaling_figures(frame, tmp_path))
    assert names == [
        "scaling-speedup-box-cpu-B64-marginals.png",
        "scaling-speedup-box-cpu-B8-marginals.png",
        "scaling-time-box-cpu-B64-marginals.png",
        "scaling-time-box-cpu-B8-marginals.png",
    ]


def test_operators_table_has_one_column_per_length_in_method_order():
    rows = [
        _row(name, count, method=method, operation="marginals", N=n, device=None)
        for method, counts, syncs in (("bcrf-10", (90, 90), (20, 20)), ("crf", (40, 130), (0, 0)))
        for n, count, sync in zip((16, 64), counts, syncs, strict=True)
        for name, count in (("track_operators", count), ("track_host_syncs", sync))
    ]
    table = operators_table(_frame(rows))
    assert table.columns.tolist() == ["machine", "method", "operation", "N=16", "N=64"]
    assert table["method"].tolist() == ["crf", "bcrf-10"]  # the report's method order
    assert table["N=64"].tolist() == ["130", "90 (20 syncs)"]
    assert operators_table(_frame([])).empty


def test_each_torch_mode_gets_its_figures_with_jax_beside_and_old_rows_read_as_they_ran(tmp_path):
    """Rows without a mode are torch eager and JAX jitted (``compiled``); torch's compiled rows get
    figures of their own, JAX's beside them as beside the eager ones."""
    seconds = {"crf": [2.0, 2.0, 2.0, 2.0], "bcrf-10": [1.0, 1.0, 1.0, 1.0]}
    compiled = [{**row, "mode": "compiled"} for row in _marginals(seconds)]
    frame = _frame(_marginals(seconds) + compiled + _marginals(seconds, backend="jax"))
    table = crossover_table(frame).set_index(["backend", "mode"])
    assert sorted(table.index) == [("jax", "compiled"), ("torch", "compiled"), ("torch", "eager")]
    names = sorted(drawn.path.name for drawn in scaling_figures(frame, tmp_path))
    assert names == [
        "scaling-speedup-box-cpu-B8-marginals-compiled.png",
        "scaling-speedup-box-cpu-B8-marginals.png",
        "scaling-time-box-cpu-B8-marginals-compiled.png",
        "scaling-time-box-cpu-B8-marginals.png",
    ]


def test_the_interquartile_band_is_shaded_where_asv_kept_one():
    figure, axis = plt.subplots()
    line = _frame([_row("time_marginals", 2.0, N=16), _row("time_marginals", 3.0, N=64)])
    _interquartile_band(axis, line, "C0")  # no repeats kept: nothing to shade
    assert not axis.collections
    line[["q25", "q75"]] = [[1.5, 2.5], [2.5, 3.5]]
    _interquartile_band(axis, line, "C0")
    (band,) = axis.collections
    assert band.get_paths()[0].get_extents().bounds == pytest.approx((16, 1.5, 48, 2.0))
    plt.close(figure)


def test_a_solver_column_measured_at_one_length_is_named_not_drawn(tmp_path):
    rows = []
    for (name, _, _), solver in itertools.product(SOLVER_ROWS, SPARSEMAP_SOLVERS):
        for n, t in ((16, 8), (64, 8), (16, 512)):
            rows.append(_row(name, n * t * 1e-5, device=None, solver=solver, N=n, T=t, B=8))
    (drawn,) = solver_figure(_frame(rows), "solvers", tmp_path / "solvers.png", "Caption.")
    assert drawn.caption.endswith(
        "Measured at a single N and not drawn: T = 512 (N = 16); its numbers are in results/scaling.csv."
    )
    lone = _frame([row for row in rows if row["T"] == 512])
    assert solver_figure(lone, "solvers", tmp_path / "lone.png", "Caption.") == []
