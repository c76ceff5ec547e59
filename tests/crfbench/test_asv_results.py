import math

import pandas as pd
import pytest

from crfbench.asv_results import COLUMNS, read_asv_results, write_scaling_table

from .asv_fixture import write_asv_results

MARGINALS = "bench_inference.Marginals.time_marginals"
BANDWIDTH = "bench_roofline.MemoryBandwidth.track_stream_bandwidth"


def _marginals(values):
    return (("backend", "method", "N"), (("torch",), ("crf", "bcrf-10"), (16, 64)), values, "seconds")


def test_one_row_per_combination_with_a_number_and_parameters_by_name(tmp_path):
    write_asv_results(
        tmp_path,
        "cpu-box",
        "a" * 40,
        1_700_000_000_000,
        {
            MARGINALS: _marginals([1.0, 2.0, math.nan, None]),
            BANDWIDTH: (("backend", "device"), (("torch", "jax"), ("cpu",)), [40.0, 50.0], "GB/s"),
        },
    )
    frame = read_asv_results(tmp_path)
    assert list(frame.columns) == list(COLUMNS)
    timed = frame[frame["benchmark"] == MARGINALS]
    # skipped (NaN) and failed (None) combinations have no row; the others keep their parameters
    assert timed[["method", "N", "value"]].values.tolist() == [["crf", 16, 1.0], ["crf", 64, 2.0]]
    assert set(timed["name"]) == {"time_marginals"} and set(timed["unit"]) == {"seconds"}
    assert timed["device"].isna().all()
    stream = frame[frame["benchmark"] == BANDWIDTH].set_index("backend")["value"]
    assert stream.to_dict() == {"torch": 40.0, "jax": 50.0}
    assert set(frame["machine"]) == {"cpu-box"} and set(frame["commit"]) == {"a" * 40}


def test_each_benchmarks_latest_run_of_each_machine_is_read(tmp_path):
    """A later run replaces a benchmark's numbers; a later run of part of the suite leaves the
    other benchmarks' numbers from the run before."""
    write_asv_results(tmp_path, "box", "a" * 40, 1_000, {MARGINALS: _marginals([1.0, 1.0, 1.0, 1.0])})
    write_asv_results(tmp_path, "box", "b" * 40, 2_000, {MARGINALS: _marginals([2.0, 2.0, 2.0, 2.0])})
    write_asv_results(tmp_path, "other", "a" * 40, 1_000, {MARGINALS: _marginals([3.0, 3.0, 3.0, 3.0])})
    bandwidth = (("backend", "device"), (("torch",), ("cpu",)), [40.0], "GB/s")
    write_asv_results(tmp_path, "box", "c" * 40, 3_000, {BANDWIDTH: bandwidth})
    frame = read_asv_results(tmp_path)
    latest = frame.groupby(["machine", "benchmark"])[["commit", "value"]].agg(set)
    assert latest.loc[("box", MARGINALS), "commit"] == {"b" * 40}
    assert latest.loc[("box", MARGINALS), "value"] == {2.0}
    assert latest.loc[("box", BANDWIDTH)].to_dict() == {"commit": {"c" * 40}, "value": {40.0}}
    assert latest.loc[("other", MARGINALS), "value"] == {3.0}
    assert ("other", BANDWIDTH) not in latest.index


def test_the_table_is_written_and_reads_back(tmp_path):
    write_asv_results(tmp_path / "asv", "box", "a" * 40, 1_000, {MARGINALS: _marginals([1.5, 2.5, 3.5, 4.5])})
    out = tmp_path / "scaling.csv"
    frame = write_scaling_table(tmp_path / "asv", out)
    back = pd.read_csv(out)
    assert back["value"].tolist() == frame["value"].tolist() == [1.5, 2.5, 3.5, 4.5]


def test_missing_catalogue_and_unknown_parameters_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"benchmarks.json: missing"):
        read_asv_results(tmp_path)
    write_asv_results(
        tmp_path, "box", "a" * 40, 1_000, {MARGINALS: (("colour",), (("red",),), [1.0], "seconds")}
    )
    with pytest.raises(ValueError, match="parameter 'colour'"):
        read_asv_results(tmp_path)


def test_a_run_from_before_the_mode_parameter_reads_as_eager(tmp_path):
    """The catalogue's benchmark takes ``mode`` last; a run kept from before it has one parameter
    fewer and was all eager. A benchmark whose catalogue has no mode leaves it empty."""
    write_asv_results(tmp_path, "box", "a" * 40, 1_000, {MARGINALS: _marginals([1.0, 2.0, 3.0, 4.0])})
    _, params, values, unit = _marginals([5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0])
    modes = (("backend", "method", "N", "mode"), (*params, ("eager", "compiled")), values, unit)
    write_asv_results(tmp_path, "new", "b" * 40, 2_000, {MARGINALS: modes})  # rewrites the catalogue
    frame = read_asv_results(tmp_path).set_index(["machine", "method", "N", "mode"])["value"]
    assert frame[("box", "crf", 16, "eager")] == 1.0 and frame[("box", "bcrf-10", 64, "eager")] == 4.0
    assert set(frame.loc["box"].index.get_level_values("mode")) == {"eager"}
    assert frame[("new", "crf", 16, "compiled")] == 6.0 and frame[("new", "bcrf-10", 64, "eager")] == 11.0
    write_asv_results(
        tmp_path, "box", "c" * 40, 3_000, {BANDWIDTH: (("backend",), (("torch",),), [1.0], "GB/s")}
    )
    bandwidth = read_asv_results(tmp_path).query("benchmark == @BANDWIDTH")
    assert bandwidth["mode"].isna().all()


def test_a_run_missing_another_parameter_is_refused(tmp_path):
    write_asv_results(tmp_path, "box", "a" * 40, 1_000, {MARGINALS: _marginals([1.0, 2.0, 3.0, 4.0])})
    _, params, values, unit = _marginals([1.0] * 8)
    wider = (("backend", "method", "N", "T"), (*params, (8, 32)), values, unit)
    write_asv_results(tmp_path, "new", "b" * 40, 2_000, {MARGINALS: wider})
    with pytest.raises(ValueError):
        read_asv_results(tmp_path)


def test_the_interquartile_range_of_a_timings_repeats_is_kept(tmp_path):
    """asv's q_25 and q_75 of each combination's repeats become ``q25`` and ``q75``; a combination
    without repeats (a track, or a value given alone) leaves them empty."""
    repeats = [[1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 10.0, 30.0, 30.0, 30.0], [1.0], [2.0]]
    names, params, values, unit = _marginals([3.0, 30.0, 1.0, 2.0])
    bandwidth = (("backend", "device"), (("torch",), ("cpu",)), [40.0], "GB/s")
    timed = (names, params, values, unit, repeats)
    write_asv_results(tmp_path, "box", "a" * 40, 1_000, {MARGINALS: timed, BANDWIDTH: bandwidth})
    frame = read_asv_results(tmp_path).set_index(["benchmark", "method", "N"])
    assert frame.loc[(MARGINALS, "crf", 16), ["q25", "q75"]].tolist() == [2.0, 4.0]
    assert frame.loc[(MARGINALS, "crf", 64), ["q25", "q75"]].tolist() == [10.0, 30.0]
    assert frame.loc[[BANDWIDTH], ["q25", "q75"]].isna().all(axis=None)
