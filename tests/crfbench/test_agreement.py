"""The agreement report: it writes complete, tidy outputs, passes on the real implementations,
and fails (exit 1) when an implementation is off by more than its tolerance."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from crfbench import agreement, agreement_trees, cli

TINY = agreement.Grid(lengths=(1, 3), num_tags=(2, 3), neg_inf=(False, True), dtypes=("float64",))


def test_compare_treats_matching_neg_inf_as_exact_and_nan_as_infinite():
    tolerance = agreement.TOLERANCES["float64"]
    assert agreement.compare(np.array([-np.inf, 1.0]), np.array([-np.inf, 1.0]), tolerance)[0] == 0.0
    assert agreement.compare(np.array([np.nan]), np.array([1.0]), tolerance)[0] == np.inf
    assert agreement.compare(np.array([-np.inf]), np.array([0.0]), tolerance)[0] == np.inf
    error, relative, allowed = agreement.compare(np.array([2.0 + 1e-9]), np.array([2.0]), tolerance)
    assert (
        error == pytest.approx(1e-9) and relative == pytest.approx(5e-10) and allowed == pytest.approx(3e-10)
    )


def test_compare_tags_counts_only_positions_inside_the_length():
    got = np.array([[0, 1, -1], [2, 2, 2]])
    expected = np.array([[0, 1, 5], [2, 0, 2]])
    mismatch, _, _ = agreement.compare_tags(got, expected, np.array([2, 3]), agreement.TOLERANCES["float64"])
    assert mismatch == pytest.approx(1 / 5)


def test_instances_keep_the_gold_path_finite():
    from implementations.reference import brute_force

    for seed in range(5):
        instance = agreement.make_instance(6, 3, neg_inf=True, seed=seed)
        assert np.isneginf(instance.transitions).any()
        for b in range(agreement.BATCH):
            n = instance.lengths[b]
            assert np.isfinite(brute_force.path_score(instance.tags[b, :n], **instance.sequence(b)))
            assert instance.allowed[b, np.arange(n), instance.tags[b, :n]].all()


def test_report_on_the_real_implementations(tmp_path):
    csv, report = tmp_path / "agreement" / "agreement.csv", tmp_path / "agreement.md"
    table = agreement.run(TINY, ("torch",), csv, report)
    written = pd.read_csv(csv)
    assert list(written.columns) == agreement.COLUMNS
    assert len(written) == len(table) > 0 and written.ok.all()
    assert set(written.method) == {
        "crf",
        "crf-scan",
        "bcrf",
        "meanfield",
        "unstructured",
        "sparsemap",
        "bethe",
        "tree-crf",
        "tree-sparsemap",
    }
    assert {
        "brute-force",
        "ibp-loop",
        "meanfield-loop",
        "closed-form",
        "enumeration-qp",
        "enumeration",
    } <= set(written.backend_b)
    text = report.read_text()
    assert f"{len(table)} comparisons, 0 outside tolerance" in text
    assert not list(tmp_path.rglob(".*.tmp")), "temporary files left behind"


def test_a_wrong_implementation_fails_the_command(tmp_path, monkeypatch):
    real = agreement.run_backend

    def off_by_a_little(method, backend, instance, dtype):
        results = real(method, backend, instance, dtype)
        if method == "bcrf":
            results[("log_partition", "value")] = results[("log_partition", "value")] + 1e-6
        return results

    monkeypatch.setattr(agreement, "run_backend", off_by_a_little)
    monkeypatch.setattr(agreement, "QUICK_GRID", TINY)
    csv, report = tmp_path / "a.csv", tmp_path / "a.md"
    status = cli.main(
        [
            "agree",
            "--allow-dirty",
            "--backends",
            "torch",
            "--quick",
            "--csv",
            str(csv),
            "--report",
            str(report),
        ]
    )
    assert status == 1
    failures = pd.read_csv(csv).query("not ok")
    assert set(failures.method) == {"bcrf"} and set(failures.function) == {"log_partition"}
    assert "Outside tolerance" in report.read_text()


def test_tree_crf_agrees_across_backends_with_enumeration_and_torch_struct():
    """tree-crf's rows: torch against JAX, both against enumeration, torch against torch-struct
    (without -inf), for log Z, the arc marginals and the decoded trees, all within tolerance; the
    batches hold shorter, padded sentences (``agreement_trees.make_tree_instance``). tree-sparsemap's
    rows: its value and marginals against the enumerated projection, its decoding (a heaviest support
    tree, not unique) across backends only, and never against torch-struct's CRF."""
    backends = ("torch", "jax") if importlib.util.find_spec("jax") else ("torch",)
    grid = agreement.Grid(lengths=(), tree_lengths=(4,), dtypes=("float32", "float64"))
    everything = pd.DataFrame(agreement_trees.tree_rows(grid, backends), columns=agreement.COLUMNS)
    assert set(everything.method) == {"tree-crf", "tree-sparsemap"}
    assert everything.ok.all(), everything[~everything.ok]
    sparse = everything[everything.method == "tree-sparsemap"]
    assert set(sparse.backend_b) == {"enumeration-qp", *backends[1:]}
    assert set(sparse[sparse.function == "decode"].backend_b) == set(backends[1:])
    table = everything[everything.method == "tree-crf"]
    assert set(table.function) == {"log_partition", "marginals", "decode"}
    assert set(table.N) == {4} and set(table["T"]) == {0}
    expected = {"enumeration", *backends[1:]}
    if importlib.util.find_spec("torch_struct"):
        expected.add(agreement_trees.TORCH_STRUCT)
        peer = table[table.backend_b == agreement_trees.TORCH_STRUCT]
        assert (peer.tolerance == agreement_trees.TORCH_STRUCT_TOLERANCE[0]).all()
        assert not peer.neg_inf.all()  # it is skipped where an arc is -inf
    assert set(table.backend_b) == expected


def test_decoded_trees_agree_at_a_tie_and_not_otherwise():
    """Two different trees of equal score agree (error 0); a worse one is off by its score gap."""
    scores = np.full((1, 3, 3), -np.inf)
    scores[0, 0, 1] = scores[0, 0, 2] = 1.0  # root -> 1 or root -> 2, each with the other word below
    scores[0, 1, 2] = scores[0, 2, 1] = 0.5
    instance = agreement_trees.TreeInstance(scores, np.array([2]))
    tolerance = agreement.TOLERANCES["float64"]
    left, right = np.array([[-1, 0, 1]]), np.array([[-1, 2, 0]])
    assert agreement_trees.compare_trees(left, right, instance, tolerance)[0] == 0.0
    scores[0, 0, 2] = 0.0
    assert agreement_trees.compare_trees(right, left, instance, tolerance)[0] == pytest.approx(1.0)


def test_tree_instances_are_feasible_and_padded_with_garbage():
    from implementations import arborescence

    instance = agreement_trees.make_tree_instance(5, neg_inf=True, seed=3)
    assert np.isneginf(instance.scores).any() and (instance.scores == 1e4).any()
    for b, n in enumerate(instance.lengths.tolist()):
        heads = arborescence.best_tree(instance.scores[b], n)
        assert np.isfinite(arborescence.tree_score(arborescence.arcs(instance.scores[b], n), heads))
