"""The two tiers of the test suite: what CI runs on every push, and what only the nightly run adds.

CI (`.ci/run`, the README's test command: `python -m pytest`) must finish within 30 minutes on 2
cores, installation included; the whole suite takes about 50. The nightly workflow
(`.github/workflows/tests-nightly.yml`) runs `pytest --nightly`, everything. What moves to the
nightly tier is what costs most and repeats a check CI still makes another way:

- the smoke pipeline killed and resumed, and re-configured (`test_recovery.py`); CI still runs
  the smoke pipeline once from scratch, end to end;
- the JAX half of the iterative methods' property tests (BCRF, SparseMAP, Bethe: each case a JAX
  program that takes seconds to compile, most of the suite's time). Their mathematics is written
  once for both frameworks (`implementations/kernels/`), so CI's torch half tests it, and CI still
  checks JAX against torch at every method's defaults (`test_cross_backend.py`) and the cheap
  methods' JAX half everywhere;
- the same comparison for each method's other option values, and a few single costly cases
  (:data:`NIGHTLY_CASES`), each of whose test functions keeps cheaper cases in CI.
"""

from __future__ import annotations

import pytest

#: Whole files of the nightly tier.
NIGHTLY_FILES: tuple[str, ...] = ()

#: Files whose tests' JAX half (parameter ``backend`` or ``backend_name`` = ``"jax"``) is nightly.
JAX_NIGHTLY_FILES = (
    "tests/implementations/test_bcrf.py",
    "tests/implementations/test_sparsemap.py",
    "tests/implementations/test_bethe.py",
    "tests/implementations/test_second_order.py",
)

#: The methods whose JAX half is nightly in every file (a test's parameter ``method``).
JAX_NIGHTLY_METHODS = ("bcrf", "sparsemap", "bethe")

#: ``test_cross_backend.py``: cases named with option values (``bcrf-iterations=1-...``) are
#: nightly; each method's defaults (``[bcrf]``) stay in CI.
CROSS_BACKEND = "tests/implementations/test_cross_backend.py"

#: Single costly cases (node ids), each the dearest of its test function's cases.
NIGHTLY_CASES = (
    "tests/workflow/test_recovery.py::test_a_killed_run_resumes_with_a_plain_rerun_to_the_undisturbed_results",
    "tests/workflow/test_recovery.py::test_a_changed_setting_retrains_exactly_the_runs_it_affects",
    "tests/implementations/test_sparsemap.py::test_agrees_with_the_reference_qp[torch-fw-T4-shared]",
    "tests/implementations/test_capture.py::test_loss_step_traces_whole_and_equals_eager[bcrf-scaling-unrolled-inf]",
    "tests/implementations/test_capture.py::test_loss_step_traces_whole_and_equals_eager[bcrf-scaling-danskin-inf]",
    "tests/implementations/test_capture.py::test_loss_step_traces_whole_and_equals_eager[bcrf-scaling-danskin-finite]",
    "tests/implementations/test_capture.py::test_loss_step_traces_whole_and_equals_eager[bcrf-log-unrolled-inf]",
    "tests/implementations/test_bethe.py::test_convex_energy_reaches_the_reference[torch-False-rda]",
    "tests/implementations/test_bethe.py::test_convex_energy_reaches_the_reference[torch-False-accelerated]",
    "tests/crfbench/test_compiled.py::test_compiled_calls_equal_eager_ones",
    "tests/crfbench/test_compiled.py::test_every_item_but_sparsemap_is_timed_in_both_modes",
    "tests/implementations/test_bethe.py::test_torch_and_jax_agree_and_jit[rda]",
    "tests/implementations/test_bethe.py::test_torch_and_jax_agree_and_jit[accelerated]",
    "tests/implementations/test_capture.py::test_decode_and_marginals_trace_whole[bcrf-scaling-danskin]",
    "tests/implementations/test_jax_sweep.py::test_where_the_linear_state_cannot_run_xlas_iterations_run_in_its_place[unvouched]",
    "tests/workflow/test_workflow.py::test_stale_locks_are_cleared_but_a_live_runs_locks_are_respected",
    "tests/workflow/test_workflow.py::test_asv_results_are_tidied_and_published_unless_scaling_is_off",
    "tests/test_tiers.py::test_every_named_file_and_case_is_in_the_nightly_tier",
    "tests/test_tiers.py::test_ci_runs_no_nightly_case_and_keeps_a_case_of_each_function_with_a_nightly_one",
    "tests/workflow/test_workflow.py::test_every_config_validates_and_plans_every_rule[config/paper.yaml]",
    "tests/workflow/test_workflow.py::test_slurm_profile_plans_the_paper_run",
    "tests/workflow/test_workflow.py::test_the_paper_profile_chooses_each_languages_rates_on_its_own_grid",
    "tests/crfbench/test_jax_timing.py::test_the_jax_loss_is_the_torch_loss_on_the_first_batch[m-sparsemap]",
    "tests/crfbench/test_jax_timing.py::test_the_jax_loss_is_the_torch_loss_on_the_first_batch[bcrf]",
)


def _param(item: pytest.Item, name: str) -> object:
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get(name)


def is_nightly(item: pytest.Item) -> bool:
    """Whether ``item`` belongs to the nightly tier: marked ``nightly``, or chosen by the rules above."""
    if item.get_closest_marker("nightly") is not None:
        return True
    path = item.nodeid.split("::", 1)[0]
    jax = "jax" in (_param(item, "backend"), _param(item, "backend_name"))
    if path in NIGHTLY_FILES or item.nodeid in NIGHTLY_CASES:
        return True
    if jax and (path in JAX_NIGHTLY_FILES or _param(item, "method") in JAX_NIGHTLY_METHODS):
        return True
    return path == CROSS_BACKEND and "=" in item.nodeid.split("[", 1)[-1]
