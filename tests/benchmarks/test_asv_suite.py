"""The asv suite (``benchmarks/``): its grids, the calls it times (they compute what the contract
says, in both backends), and every benchmark body once at the smallest grid point on the CPU.
Nothing here is timed; ``asv check`` validates the suite's structure."""

from __future__ import annotations

import importlib
import inspect
import itertools
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks import common
from crfbench import capture
from crfbench.compiled import BACKEND_VARIABLE

ROOT = Path(__file__).resolve().parents[2]
MODULES = (
    "bench_inference",
    "bench_quality",
    "bench_roofline",
    "bench_peers",
    "bench_newton",
    "bench_bethe",
    "bench_crossover",
    "bench_trees",
)


def test_an_unknown_profile_is_named(monkeypatch):
    monkeypatch.setenv(common.PROFILE_VARIABLE, "huge")
    with pytest.raises(
        ValueError, match="CRFBENCH_ASV_PROFILE='huge': use one of check, fast, regular, paper"
    ):
        common.profile_name()
    monkeypatch.delenv(common.PROFILE_VARIABLE)
    assert common.profile_name() == "regular"


@pytest.mark.parametrize("name", list(common.PROFILES))
def test_profiles_are_log_grids_within_the_issue_ranges(name):
    grid = common.PROFILES[name]
    for values, low, high in ((grid.lengths, 16, 1024), (grid.num_tags, 8, 512)):
        assert low <= min(values) and max(values) <= high
        ratios = {b / a for a, b in itertools.pairwise(values)}  # none for a single point
        assert len(ratios) <= 1 and all(math.log2(ratio).is_integer() for ratio in ratios)


def test_smaller_profiles_are_subgrids():
    grids = [common.PROFILES[name] for name in ("check", "fast", "regular", "paper")]
    for axis in ("lengths", "num_tags"):
        for smaller, larger in itertools.pairwise(grids):
            assert set(getattr(smaller, axis)) <= set(getattr(larger, axis))


def test_the_scan_materialises_a_cube_and_the_cap_skips():
    assert common.largest_intermediate("crf", 8, 65, 32) == 8 * 64 * 32**2
    # N = 64 gives N + 1 = 65 chain factors, padded to 128: 64 products of T x T x T at the first level
    assert common.largest_intermediate("crf-scan", 8, 64, 32) == 8 * 64 * 32**3
    cap = common.GRID.element_cap["cpu"]
    with pytest.raises(NotImplementedError, match="elements"):
        common.skip_unless_fits("bcrf-10", "cpu", 1, cap + 2, 1)
    common.skip_unless_fits("bcrf-10", "cpu", 1, cap + 1, 1)  # exactly at the cap: runs


def _numpy(result):
    if isinstance(result, tuple | list):
        return [array for part in result for array in _numpy(part)]
    if result is None:  # torch leaves the gradient of an unused input (unstructured's transitions) unset
        return [None]
    return [np.asarray(result.detach().cpu() if hasattr(result, "detach") else result, dtype=np.float64)]


@pytest.mark.parametrize("variant", list(common.VARIANTS))
@pytest.mark.parametrize("name", common.OPERATIONS)
def test_the_timed_call_is_the_contract_call_in_both_backends(variant, name):
    pytest.importorskip("jax")
    import implementations

    method, options = common.VARIANTS[variant]
    scores = common.random_scores("torch", "cpu", 3, 6, 4)
    timed = _numpy(common.operation("torch", variant, name, scores)())
    emissions, transitions, lengths, tags, start, end = scores
    module = implementations.get(method, "torch")
    if name == "loss_and_grad":
        emissions, transitions = emissions.clone().requires_grad_(), transitions.clone().requires_grad_()
        total = module.loss(emissions, transitions, lengths, tags, start=start, end=end, **options).sum()
        total.backward()
        direct = _numpy((total, emissions.grad, transitions.grad))
    else:
        direct = _numpy(
            getattr(module, name)(emissions, transitions, lengths, start=start, end=end, **options)
        )
    jax_timed = _numpy(common.operation("jax", variant, name, common.random_scores("jax", "cpu", 3, 6, 4))())
    assert len(timed) == len(direct) == len(jax_timed)
    for ours, contract, other in zip(timed, direct, jax_timed, strict=True):
        if ours is None:
            assert contract is None and not other.any()
            continue
        np.testing.assert_array_equal(ours, contract)
        np.testing.assert_allclose(other, ours, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("variant", ["crf", "bcrf-10"])
@pytest.mark.parametrize("name", common.OPERATIONS)
def test_the_captured_call_equals_the_eager_one(name, variant, monkeypatch):
    """torch's compiled mode on a GPU, a CUDA graph recorded once and replayed
    (``crfbench.capture``), rehearsed with the CPU's stand-in recorder: each replay returns what
    the eager call does, the loss's gradients included."""
    monkeypatch.setenv(capture.CAPTURE_VARIABLE, "rerun")
    scores = common.random_scores("torch", "cpu", 3, 6, 4)
    eager = _numpy(common.operation("torch", variant, name, scores)())
    call = common.operation("torch", variant, name, scores, mode="compiled")
    for _ in range(2):
        replayed = _numpy(call())
        assert len(replayed) == len(eager)
        for got, want in zip(replayed, eager, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", common.OPERATIONS)
def test_the_compiled_call_equals_the_eager_one(name, monkeypatch):
    """torch's compiled mode (traced with aot_eager: what inductor would compile) computes what the
    eager call does, the loss's gradient included, and runs again without compiling again (crf:
    it traces only after an eager call, ``common._torch_operation``)."""
    monkeypatch.setenv(BACKEND_VARIABLE, "aot_eager")
    torch._dynamo.reset()
    scores = common.random_scores("torch", "cpu", 3, 6, 4)
    eager = _numpy(common.operation("torch", "crf", name, scores)())
    call = common.operation("torch", "crf", name, scores, mode="compiled")
    first = _numpy(call())
    with torch._dynamo.config.patch(error_on_recompile=True):  # compiled once, in setup's call
        again = _numpy(call())
    assert len(first) == len(eager) == len(again)
    for compiled, reference, repeated in zip(first, eager, again, strict=True):
        np.testing.assert_allclose(compiled, reference, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(repeated, compiled)


def test_modes_skip_what_is_not_timed(monkeypatch):
    """JAX is always jitted, SparseMAP never compiled, and a profile may compile a few variants."""
    with pytest.raises(NotImplementedError, match="JAX is always jitted"):
        common.skip_unless_timed("jax", "crf", "eager")
    common.skip_unless_timed("jax", "crf", "compiled")
    with pytest.raises(NotImplementedError, match="sparsemap has no compiled mode"):
        common.skip_unless_timed("torch", "sparsemap", "compiled")
    common.skip_unless_timed("torch", "sparsemap", "eager")
    with pytest.raises(ValueError, match="'jit' is not one of eager, compiled"):
        common.skip_unless_timed("torch", "crf", "jit")
    monkeypatch.setattr(common, "GRID", common.PROFILES["check"])
    with pytest.raises(NotImplementedError, match="bcrf-5: not timed compiled"):
        common.skip_unless_timed("torch", "bcrf-5", "compiled")
    common.skip_unless_timed("torch", "bcrf-5", "compiled", profile=False)  # the crossover's own list
    common.skip_unless_timed("torch", "unstructured", "compiled")


@pytest.mark.parametrize("name", list(common.PROFILES))
def test_crossover_grids_are_the_paper_tag_sets_and_grow_with_the_profile(name):
    grid = common.PROFILES[name].crossover
    assert set(grid.num_tags) <= {4, 9, 17, 50} and set(grid.methods) <= set(common.CROSSOVER_METHODS)
    assert set(grid.methods) - {"pytorch-crf"} <= set(common.VARIANTS)
    check = common.PROFILES["check"].crossover
    assert len(check.lengths) == len(check.num_tags) == len(check.batch) == 1  # CI: one point
    for axis in ("lengths", "num_tags", "batch", "methods"):
        assert set(getattr(check, axis)) <= set(getattr(grid, axis))
    assert set(common.PROFILES["regular"].crossover.lengths) <= set(
        common.PROFILES["paper"].crossover.lengths
    )


@pytest.mark.parametrize("name", list(common.PROFILES))
def test_tree_grids_span_8_to_128_words_and_grow_with_the_profile(name):
    grid = common.PROFILES[name].trees
    assert min(grid.lengths) >= 8 and max(grid.lengths) <= 128
    assert all(math.log2(n).is_integer() for n in grid.lengths)
    check = common.PROFILES["check"].trees
    assert len(check.lengths) == len(check.batch) == 1  # CI: one point
    assert set(check.lengths) <= set(grid.lengths) and set(check.batch) <= set(grid.batch)
    assert {8, 128} <= set(common.PROFILES["regular"].trees.lengths)


@pytest.mark.parametrize("variant", ["tree-crf"])
@pytest.mark.parametrize("name", ["log_partition", "loss_and_grad", "marginals", "decode"])
def test_the_timed_tree_call_is_the_contract_call_in_both_backends(variant, name):
    """Every dependency-tree operation, at a tiny size, computes what the contract says in torch,
    and the same numbers in JAX (jitted)."""
    pytest.importorskip("jax")
    import implementations
    from benchmarks import bench_trees

    assert set(bench_trees.TREE_VARIANTS) <= set(implementations.DEPENDENCY_METHODS)
    trees = bench_trees.random_trees("torch", "cpu", 3, 5)
    timed = _numpy(bench_trees.tree_operation("torch", variant, name, trees)())
    scores, lengths, heads = trees
    module = implementations.get(bench_trees.TREE_VARIANTS[variant].method, "torch")
    if name == "loss_and_grad":
        scores = scores.clone().requires_grad_()
        total = module.loss(scores, lengths, heads).sum()
        total.backward()
        direct = _numpy((total, scores.grad))
    else:
        direct = _numpy(getattr(module, name)(scores, lengths))
    jax_trees = bench_trees.random_trees("jax", "cpu", 3, 5)
    jax_timed = _numpy(bench_trees.tree_operation("jax", variant, name, jax_trees)())
    assert len(timed) == len(direct) == len(jax_timed)
    for ours, contract, other in zip(timed, direct, jax_timed, strict=True):
        np.testing.assert_array_equal(ours, contract)
        np.testing.assert_allclose(other, ours, rtol=2e-4, atol=2e-5)


def test_random_gold_trees_are_single_root_trees():
    from benchmarks import bench_trees
    from implementations import arborescence

    heads = bench_trees.random_heads(np.random.default_rng(0), 4, 9)
    assert all(arborescence.tree_problem(row, 9) is None for row in heads)


def _smallest_points(cls):
    """Every combination of the class's parameters with N, T and B at their smallest, the CPU and
    torch (JAX's timed calls are checked above; .ci/asv-check, before a push and nightly, runs them);
    eager only, and of the crossover's compiled methods crf alone (compiled calls: tested below)."""
    fixed = {"device": ["cpu"], "backend": ["torch"], "mode": ["eager"]}
    if cls.__name__ == "Crossover":
        fixed["method"] = ["crf", "pytorch-crf"]
    values = [
        [min(options)] if name in ("N", "T", "B") else fixed.get(name, list(options))
        for name, options in zip(cls.param_names, cls.params, strict=True)
    ]
    return [point for point in itertools.product(*values) if "crf (jax)" not in point]


def _benchmark_classes():
    for module_name in MODULES:
        module = importlib.import_module(f"benchmarks.{module_name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            record = issubclass(cls, tuple)  # a NamedTuple of inputs (bench_trees.TreeBatch), no benchmark
            if cls.__module__ == module.__name__ and not name.startswith("_") and not record:
                yield pytest.param(cls, id=f"{module_name}.{name}")


@pytest.mark.parametrize("cls", list(_benchmark_classes()))
def test_every_benchmark_runs_at_the_smallest_point(cls, monkeypatch):
    monkeypatch.setenv(BACKEND_VARIABLE, "aot_eager")  # traced as inductor would, nothing compiled
    bodies = [name for name in dir(cls) if name.startswith(("time_", "peakmem_", "track_"))]
    assert bodies, f"{cls.__name__} has no benchmark"
    ran = 0
    for point in _smallest_points(cls):
        instance = cls()
        params = point
        if hasattr(cls, "setup_cache"):  # asv passes its result first; here it covers this point only
            instance.params = tuple((value,) for value in point)
            params = (instance.setup_cache(), *point)
        try:
            if hasattr(instance, "setup"):  # a class with setup_cache alone may have none
                instance.setup(*params)
        except NotImplementedError:  # no GPU, a missing optional library
            continue
        for body in bodies:
            value = getattr(instance, body)(*params)
            if body.startswith("track_"):
                assert (value is not None and value >= 0) or math.isnan(value), (body, params, value)
        ran += 1
    if cls.__name__ != "GpuMemory" or common.gpu_present("torch"):
        assert ran, f"{cls.__name__}: every combination was skipped"


def test_tracked_quality_values_mean_what_they_say():
    from benchmarks.bench_quality import BCRFViolation, DecoderAgreement

    agreement = DecoderAgreement()
    agreement.setup("crf-scan", 16, 8, 4)
    assert agreement.track_decoder_agreement("crf-scan", 16, 8, 4) == 1.0
    violation = BCRFViolation()
    violation.setup("torch", 10, 1.0, 16, 8, 4)
    more = violation.track_bcrf_violation("torch", 10, 1.0, 16, 8, 4)
    violation.setup("torch", 5, 1.0, 16, 8, 4)
    assert 0 <= more < violation.track_bcrf_violation("torch", 5, 1.0, 16, 8, 4)


@pytest.mark.skipif(shutil.which("git") is None, reason="asv needs git")
def test_asv_check_passes():
    pytest.importorskip("asv")
    done = subprocess.run(
        [sys.executable, "-m", "asv", "check", "--python=same"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, common.PROFILE_VARIABLE: "check"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No problems found" in done.stdout


def _counts(variant: str, name: str, length: int) -> tuple[int, int]:
    return common.operator_counts(variant, name, common.random_scores("torch", "cpu", 2, length, 3))


@pytest.mark.parametrize("name", common.OPERATIONS)
def test_operators_grow_with_n_for_the_forward_algorithm_alone(name):
    """The sequential forward algorithm runs the same operators at every position (a count linear
    in N, backward pass included) and never reads a value back; IBP's fixed iterations run as many
    at every N."""
    crf = [_counts("crf", name, length) for length in (8, 16, 24)]
    operators = [count for count, _ in crf]
    assert operators[1] - operators[0] == operators[2] - operators[1] > 0
    assert all(syncs == 0 for _, syncs in crf)
    bcrf = {_counts("bcrf-10", name, length)[0] for length in (8, 16, 24)}
    assert len(bcrf) == 1 and bcrf.pop() > 10 * 2  # two half-steps per iteration, an operator or more each


def test_views_are_not_counted_and_a_read_back_is_a_sync():
    x = torch.ones(4, 3)
    with common.OperatorCount() as count:
        y = x[1:].unsqueeze(0).transpose(1, 2)  # views: nothing computed
        total = float((y * 2).sum())
    assert (count.operators, count.syncs, total) == (2, 1, 18.0)


def test_the_roofline_counts_the_traffic_of_the_form_run(monkeypatch):
    """The C sweep (a large per-position kernel on the CPU; here every kernel, ``FUSED_FROM`` and
    ``SWEEP_FROM`` 1) reads each arc once an iteration and is counted so, in torch and in JAX;
    the compiled projections and XLA's read it twice (the registry's form); the sweep is left
    unwrapped after the look."""
    from benchmarks import bench_roofline
    from implementations.torch_backend import _sweep, bcrf

    call = common.operation("torch", "bcrf-10", "marginals", common.random_scores("torch", "cpu", 2, 16, 16))
    assert bench_roofline.form_run("torch", call) == bench_roofline.FORM == "scaling"
    monkeypatch.setattr(bcrf.compilation, "FUSED_FROM", 1)
    iterations = _sweep.iterations
    swept = _sweep.available(torch.device("cpu"), torch.float32, 16)
    assert bench_roofline.form_run("torch", call) == ("sweep" if swept else "scaling")
    assert _sweep.iterations is iterations
    if common.jax is not None:
        from implementations.jax_backend import _sweep as jax_sweep
        from implementations.jax_backend import bcrf as jax_bcrf

        scores = common.random_scores("jax", "cpu", 2, 16, 16)
        call = common.operation("jax", "bcrf-10", "marginals", scores)
        assert bench_roofline.form_run("jax", call) == "scaling"
        monkeypatch.setattr(jax_bcrf.sweep, "SWEEP_FROM", 1)
        swept = jax_sweep.available(np.float32, 16)
        assert bench_roofline.form_run("jax", call) == ("sweep" if swept else "scaling")
    counts = bench_roofline.BYTES_PER_ARC_ITERATION
    assert counts["sweep"] * 2 == counts["scaling"]
