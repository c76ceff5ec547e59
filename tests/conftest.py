"""Test-suite configuration: hypothesis profiles and deterministic single-threaded torch and JAX.

Select a hypothesis profile with the environment variable ``HYPOTHESIS_PROFILE``:

- ``ci`` (default): few examples, derandomised, no deadline -- the whole suite in a few minutes
  on two cores;
- ``dev``: more examples, still no deadline;
- ``thorough``: many examples, for a long run before a release.

Tests that take a ``backend`` argument run once per backend in ``implementations.BACKENDS``
(ids ``torch`` / ``jax``; ``-k torch`` or ``-k jax`` selects one half, the latter with the
jax-only tests marked ``jax``). The jax half is skipped when jax is not installed, and deselected
for the parameter combinations marked ``torch_only`` (large oracle grids whose jax half runs a
covering subset). jax is switched to 64-bit mode at import, so float64 inputs stay float64.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, settings

import implementations
from crfbench.environment import set_threads

from . import tiers
from .implementations import backends

try:
    import jax
except ImportError:  # the jax half of the suite is skipped
    jax = None
else:
    jax.config.update("jax_enable_x64", True)
    # The jax half compiles hundreds of tiny programs (one per function, options and shape) and
    # runs each for microseconds: skip LLVM's expensive code optimisations (~1.5x less compile
    # time). The HLO program, and so what is computed, is unchanged. Set the environment variable
    # JAX_DISABLE_MOST_OPTIMIZATIONS=0 to test fully optimised code.
    if "JAX_DISABLE_MOST_OPTIMIZATIONS" not in os.environ:
        jax.config.update("jax_disable_most_optimizations", True)
set_threads(1)  # torch's and (before it starts) XLA's CPU pools

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}
settings.register_profile("ci", max_examples=20, derandomize=True, **_COMMON)
settings.register_profile("dev", max_examples=100, **_COMMON)
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True, scope="module")
def release_jax_programs():
    """Drop JAX's compiled programs after each test module: the suite compiles thousands (every
    method, option set and shape), which would otherwise pile up to the process's limit of memory
    mappings (LLVM: "Unable to allocate section memory")."""
    yield
    if jax is not None:
        jax.clear_caches()


@pytest.fixture(scope="session", params=implementations.BACKENDS)
def backend(request: pytest.FixtureRequest) -> backends.Backend:
    """The test adapter of each backend in turn; jax is skipped when it is not installed.

    Session-scoped (one adapter per backend), which also keeps it usable from ``@given`` tests.
    """
    if request.param == "jax":
        pytest.importorskip("jax")
    return backends.get(request.param)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "jax: a test of the jax backend alone (test_jit.py, test_cross_backend.py); in -k jax"
    )
    config.addinivalue_line(
        "markers",
        "torch_only: run this parameter combination on the torch backend only (a large oracle grid "
        "whose jax half runs a covering subset; test_cross_backend.py checks jax == torch)",
    )


#: The test files that take minutes on two cores, longest first (in one run of the suite: the
#: smoke pipeline's 6-9 min, the others 2.5-7 min of test time each). The workers take whole files
#: in collection order (pyproject: ``--dist loadfile --no-loadscope-reorder``), so these start
#: first and the last files to run are short ones: xdist's own order (most tests first) started the
#: smoke pipeline's two tests last, and they ran alone for ~4 minutes.
LONGEST_FIRST = (
    "tests/workflow/test_recovery.py",
    "tests/workflow/test_gpu_session.py",
    "tests/workflow/test_reference_run.py",
    "tests/implementations/test_bcrf.py",
    "tests/implementations/test_contract.py",
    "tests/implementations/test_sparsemap.py",
    "tests/implementations/test_cross_backend.py",
    "tests/implementations/test_bethe.py",
    "tests/implementations/test_second_order.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--nightly",
        action="store_true",
        help="also run the nightly tier (tests/tiers.py): the whole suite, about 50 minutes on 2 "
        "cores; without it, the tier CI runs",
    )


def _deselected(config: pytest.Config, item: pytest.Item) -> bool:
    """Whether ``item`` is left out: the jax half of a ``torch_only`` combination, or a test of the
    nightly tier (``tests/tiers.py``) unless ``--nightly`` is given or a ``-m`` expression chooses
    the tests itself (``-m nightly``: that tier alone)."""
    chosen = config.getoption("nightly") or config.getoption("markexpr")
    if item.get_closest_marker("nightly") is not None and not chosen:
        return True
    return (
        item.get_closest_marker("torch_only") is not None
        and getattr(item, "callspec", None) is not None
        and item.callspec.params.get("backend") == "jax"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the jax half of the parameter combinations marked ``torch_only``, and the
    ``nightly`` tier without ``--nightly``; then order the files: :data:`LONGEST_FIRST`, then the
    others by their number of tests, most first."""
    for item in items:
        if tiers.is_nightly(item):
            item.add_marker(pytest.mark.nightly)
    dropped = [item for item in items if _deselected(config, item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        ids = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in ids]
    files = Counter(_file(item) for item in items)
    rank = {
        name: (LONGEST_FIRST.index(name), 0) if name in LONGEST_FIRST else (len(LONGEST_FIRST), -count)
        for name, count in files.items()
    }
    items.sort(key=lambda item: rank[_file(item)])  # stable: a file's tests keep their order


def _file(item: pytest.Item) -> str:
    """The test file of ``item``, as its node id names it (relative to the root directory)."""
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Two pytest-xdist workers, a test file each at a time, where xdist is installed and the command
    line does not set ``-n`` (``-n 0`` runs in this process); pytest-benchmark's timings off where it
    is installed, unless asked for. Set here rather than in pyproject's ``addopts``, so that a plain
    ``pytest`` runs without either plugin."""
    option = config.option
    worker = hasattr(config, "workerinput")  # an xdist worker: it must not start workers of its own
    if not worker and getattr(option, "numprocesses", "absent") is None:
        option.numprocesses, option.dist, option.loadscopereorder = 2, "loadfile", False
    if getattr(option, "benchmark_disable", None) is False and not option.benchmark_only:
        option.benchmark_disable = True
