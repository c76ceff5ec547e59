"""What every benchmark of the asv suite shares: the grid of the chosen profile, the methods as
benchmarked, random scores on a backend and device, and compiled, synchronised calls.

The profile comes from ``CRFBENCH_ASV_PROFILE`` (``check`` for CI, ``fast``, ``regular`` nightly,
the default, or ``paper``); it only sizes the grid, so results of one profile are comparable across
commits.
Every timing runs on one CPU thread (``crfbench.environment.set_threads``: torch's
``set_num_threads(1)`` and XLA's CPU pool of one, fixed by :func:`use_device` before JAX starts)
unless a benchmark's ``threads`` parameter says otherwise: on a loaded 2-core machine the default
thread pool stalls for hundreds of milliseconds.
"""

from __future__ import annotations

import os

# Before JAX initialises a backend: no up-front grab of GPU memory (torch and JAX share the device,
# and peak memory must mean what the method used).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import implementations
from crfbench.capture import CapturedStep, Recorder, recorder_for
from crfbench.compiled import compile_function, compiles
from crfbench.environment import gpu_present, set_threads
from crfbench.uses import TIMING_MODES
from implementations import registry
from implementations.torch_backend import bcrf as torch_bcrf

# Imported here, before asv's forkserver forks a process per parameter combination, so that no
# timing process pays for importing them; JAX is optional and its combinations skip without it.
try:
    import jax
except ImportError:  # pragma: no cover - the bench environments install it
    jax = None

PROFILE_VARIABLE = "CRFBENCH_ASV_PROFILE"
DEVICES = ("cpu", "gpu")
#: How a call is timed (``crfbench.uses.TIMING_MODES``): torch eager, or compiled (under
#: ``torch.compile`` on a CPU, captured as a CUDA graph on a GPU); JAX is always jitted, its
#: ``compiled`` mode.
MODES = TIMING_MODES


@dataclass(frozen=True)
class CrossoverGrid:
    """Where BCRF overtakes the exact CRF (``bench_crossover``): its own grid, at the tag-set sizes
    of the paper's datasets rather than the scaling suite's log grid, and the methods timed."""

    lengths: tuple[int, ...]  # N
    num_tags: tuple[int, ...]  # T
    batch: tuple[int, ...]  # B
    methods: tuple[str, ...]  # asv variants, and the pytorch-crf baseline


#: Every method of the crossover: BCRF at both iteration counts and the baselines it must beat.
CROSSOVER_METHODS = ("crf", "crf-scan", "bcrf-5", "bcrf-10", "pytorch-crf")


@dataclass(frozen=True)
class TreeGrid:
    """The dependency-tree benchmarks' grid (``bench_trees``): sentence lengths N (words, scores
    (B, N+1, N+1)) and batch sizes; a tree method has no tag set, so no T."""

    lengths: tuple[int, ...]  # N
    batch: tuple[int, ...]  # B


@dataclass(frozen=True)
class Grid:
    """The parameter values and timing budget of one profile."""

    lengths: tuple[int, ...]  # N, a log grid
    num_tags: tuple[int, ...]  # T, a log grid
    batch: tuple[int, ...]  # B
    repeat: tuple[int, int, float]  # asv: (min samples, max samples, max seconds)
    rounds: int  # asv: interleaved rounds of every benchmark
    #: largest number of float32 elements a method's biggest intermediate may hold, per device
    element_cap: dict[str, int]
    #: the variants the scaling benchmarks time compiled (None: every one that compiles); the
    #: others' compiled combinations skip
    compiled: tuple[str, ...] | None = None
    crossover: CrossoverGrid = field(
        default=CrossoverGrid((16, 64, 256, 1024), (4, 9, 17, 50), (8, 32, 256), CROSSOVER_METHODS)
    )
    trees: TreeGrid = field(default=TreeGrid((8, 16, 32, 64, 128), (8,)))


_FAST = Grid(
    (16, 64),
    (8, 32),
    (4,),
    repeat=(1, 3, 1.0),
    rounds=1,
    element_cap={"cpu": 2**22, "gpu": 2**28},
    crossover=CrossoverGrid((16, 256), (4, 17), (8,), CROSSOVER_METHODS),
    trees=TreeGrid((8, 32), (8,)),
)

PROFILES = {
    #: the fast grid at one point, every benchmark once (CI's .ci/asv-check): 123 against 394 s for
    #: its four, most of them JAX's compilations (2 cores); T = 32, past the tag thresholds that the
    #: test suite's smallest point (T = 8, tests/benchmarks/test_asv_suite.py) stays under
    #: torch's compiled mode for the variant that traces fastest, and the crossover for crf and the
    #: eager baseline (asv traces again in each benchmark's process; CI traces with aot_eager,
    #: .ci/asv-check)
    "check": replace(
        _FAST,
        lengths=(16,),
        num_tags=(32,),
        compiled=("unstructured",),
        crossover=CrossoverGrid((16,), (17,), (8,), ("crf", "pytorch-crf")),
        trees=TreeGrid((8,), (8,)),
    ),
    "fast": _FAST,
    "regular": Grid(
        (16, 64, 256, 1024),
        (8, 32, 128, 512),
        (8,),
        repeat=(2, 7, 4.0),
        rounds=1,
        element_cap={"cpu": 2**26, "gpu": 2**30},
    ),
    "paper": Grid(
        tuple(2**k for k in range(4, 11)),
        tuple(2**k for k in range(3, 10)),
        (8, 64),
        repeat=(3, 10, 10.0),
        rounds=2,
        element_cap={"cpu": 2**27, "gpu": 2**31},
        crossover=CrossoverGrid(
            tuple(2**k for k in range(4, 11)), (4, 9, 17, 50), (8, 16, 32, 64, 128, 256), CROSSOVER_METHODS
        ),
    ),
}


def profile_name() -> str:
    """The profile named by ``CRFBENCH_ASV_PROFILE`` (default ``regular``)."""
    name = os.environ.get(PROFILE_VARIABLE, "regular")
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_VARIABLE}={name!r}: use one of {', '.join(PROFILES)}")
    return name


GRID = PROFILES[profile_name()]


class Variant(NamedTuple):
    """A method as benchmarked: the implementation and its options."""

    method: str  # an ``implementations.METHODS`` name
    options: dict[str, Any]


#: Every method under each of its benchmarked settings, in registry order: an iterative method at
#: the paper's 5 and 10 iterations (``<method>-<iterations>``, as its decoders are named), the
#: others with their defaults. Bethe is timed by its own benchmarks (``bench_bethe``).
VARIANTS = {
    "crf": Variant("crf", {}),
    "crf-scan": Variant("crf-scan", {}),
    "bcrf-5": Variant("bcrf", {"iterations": 5}),
    "bcrf-10": Variant("bcrf", {"iterations": 10}),
    "meanfield-5": Variant("meanfield", {"iterations": 5}),
    "meanfield-10": Variant("meanfield", {"iterations": 10}),
    "unstructured": Variant("unstructured", {}),
    "sparsemap": Variant("sparsemap", {}),
}
OPERATIONS = ("marginals", "decode", "loss_and_grad")


def _method(variant: str) -> registry.Method:
    """The registry record of an asv variant, or of a method timed outside the variants (bethe)."""
    return registry.REGISTRY[VARIANTS[variant].method if variant in VARIANTS else variant]


def largest_intermediate(variant: str, batch: int, length: int, num_tags: int) -> int:
    """Elements of the biggest array ``variant`` materialises (the registry's
    ``largest_intermediate``: the (B, N-1, T, T) arc scores, or for the parallel scan its first
    level of log-semiring products)."""
    return _method(variant).largest_intermediate(batch, length, num_tags)


def skip_unless_fits(
    variant: str, device: str, batch: int, length: int, num_tags: int, *, cap: int | None = None
) -> None:
    """asv skips a parameter combination whose ``setup`` raises ``NotImplementedError``: one over
    the profile's per-device cap (or a benchmark's own ``cap``, where smaller), or over what the
    method itself refuses (float32 scores here)."""
    elements = largest_intermediate(variant, batch, length, num_tags)
    cap = min(GRID.element_cap[device], cap or GRID.element_cap[device])
    budget = _method(variant).memory_budget
    if budget is not None:
        cap = min(cap, budget() // 4)
    if elements > cap:
        raise NotImplementedError(
            f"{variant} at B={batch} N={length} T={num_tags}: {elements} > {cap} elements"
        )


def use_device(backend: str, device: str, threads: int = 1) -> None:
    """Fix the thread count of both backends (before JAX starts: asv calls this first in every
    benchmark's process); skip (``NotImplementedError``) a JAX combination without JAX and a GPU
    combination without a GPU."""
    if backend == "jax" and jax is None:
        raise NotImplementedError("JAX is not installed (pip install 'crfbench[jax]')")
    set_threads(threads)
    if device == "gpu" and not gpu_present(backend):
        raise NotImplementedError(f"no GPU for {backend}")


class TimingBatch(NamedTuple):
    """A batch of random scores on one backend and device (full lengths, so N is exact).

    Not ``implementations.reference.instances.random_batch``: timing inputs reach 2^31 float32
    elements on a GPU, drawn straight in float32, with no -inf, padding or planted path to check."""

    emissions: Any  # (B, N, T) float32
    transitions: Any  # (B, N-1, T, T) per position, or (T, T) when shared
    lengths: Any  # (B,) int, all N
    tags: Any  # (B, N) int, a random gold sequence
    start: Any  # (T,) float32
    end: Any  # (T,) float32


def random_scores(
    backend: str, device: str, batch: int, length: int, num_tags: int, *, shared: bool = False, seed: int = 0
) -> TimingBatch:
    """Standard normal emissions, transitions and start/end scores (per-position transitions, as the
    paper's models, unless ``shared``); the same numbers for every backend."""
    generator = np.random.default_rng(seed)
    transition_shape = (num_tags, num_tags) if shared else (batch, max(length - 1, 0), num_tags, num_tags)
    arrays = [
        generator.standard_normal((batch, length, num_tags), dtype=np.float32),
        generator.standard_normal(transition_shape, dtype=np.float32),
        np.full(batch, length, dtype=np.int32),
        generator.integers(0, num_tags, (batch, length), dtype=np.int32),
        generator.standard_normal(num_tags, dtype=np.float32),
        generator.standard_normal(num_tags, dtype=np.float32),
    ]
    return TimingBatch(*(to_device(array, backend, device) for array in arrays))


def to_device(array: np.ndarray, backend: str, device: str) -> Any:
    if backend == "torch":
        tensor = torch.from_numpy(array)
        tensor = tensor.long() if array.dtype == np.int32 else tensor
        return tensor.to("cuda" if device == "gpu" else "cpu")
    return jax.device_put(array, jax.devices(device)[0])


def skip_unless_timed(backend: str, variant: str, mode: str, *, profile: bool = True) -> None:
    """Skip (``NotImplementedError``, with the reason) a combination that is not timed in ``mode``:
    JAX eager (JAX is always jitted: its one mode is ``compiled``), torch compiled for a method
    that never compiles (``crfbench.compiled.CAPTURE_EXEMPT``: SparseMAP stops on the scores'
    values), and with ``profile``, a variant the profile's scaling benchmarks do not time compiled
    (``Grid.compiled``)."""
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    if backend == "jax" and mode == "eager":
        raise NotImplementedError("JAX is always jitted: its calls are timed in the compiled mode")
    if backend == "torch" and mode == "compiled":
        method = VARIANTS[variant].method if variant in VARIANTS else variant
        if not compiles(method):
            raise NotImplementedError(f"{variant} has no compiled mode (it reads values back)")
        if profile and GRID.compiled is not None and variant not in GRID.compiled:
            raise NotImplementedError(f"{variant}: not timed compiled in the {profile_name()} profile")


def operation(
    backend: str, variant: str, name: str, scores: TimingBatch, *, mode: str = "eager", **overrides: Any
) -> Callable[[], Any]:
    """A no-argument call of ``name`` (one of ``OPERATIONS``) on ``scores`` that returns the result
    once it is ready; for ``loss_and_grad``, ``(loss summed over the batch, (gradient w.r.t.
    emissions, w.r.t. transitions))`` in both backends. Jitted in JAX, whatever ``mode``; in torch
    eager, or with ``mode="compiled"`` under ``torch.compile`` for the scores' fixed shapes (for
    ``loss_and_grad`` the summed loss, whose backward AOTAutograd compiles with it), on a GPU
    recorded once as a CUDA graph instead (``crfbench.capture``). Call it once to compile. No input
    validation; no autograd graph but for ``loss_and_grad``. ``overrides`` replace the variant's
    options."""
    method, options = VARIANTS[variant]
    options = {**options, **overrides}
    module = implementations.get(method, backend)
    emissions, transitions, lengths, tags, start, end = scores
    common = {"start": start, "end": end, "validate": False, **options}
    if backend == "torch":
        return _torch_operation(module, name, scores, common, compiled=mode == "compiled")
    if name == "loss_and_grad":

        def total(emissions, transitions):
            return module.loss(emissions, transitions, lengths, tags, **common).sum()

        step = jax.jit(jax.value_and_grad(total, argnums=(0, 1)))
        return lambda: jax.block_until_ready(step(emissions, transitions))
    function = jax.jit(
        lambda emissions, transitions: getattr(module, name)(emissions, transitions, lengths, **common)
    )
    return lambda: jax.block_until_ready(function(emissions, transitions))


def _torch_operation(
    module: Any, name: str, scores: TimingBatch, common: dict[str, Any], *, compiled: bool = False
) -> Callable[[], Any]:
    """The torch call of :func:`operation`. A compiled one runs once eagerly before it is compiled:
    the implementations fill module-level caches at first use (``implementations.ops``' namespace
    per array type); traced while one is empty, the program is guarded on its emptiness and
    compiled again at the next call, inside the timing, and crf's log-partition autograd.Function
    fails to trace when the cache is filled inside it."""
    emissions, transitions, lengths, tags, _, _ = scores
    wait = torch.cuda.synchronize if emissions.is_cuda else lambda: None
    recorder = recorder_for(emissions.device)  # compiled on a GPU: captured as a CUDA graph
    if name == "loss_and_grad":
        emissions, transitions = emissions.clone().requires_grad_(), transitions.clone().requires_grad_()

        def total(emissions, transitions):
            return module.loss(emissions, transitions, lengths, tags, **common).sum()

        if compiled and recorder is not None:

            def gradients() -> tuple[torch.Tensor, ...]:
                value = total(emissions, transitions)
                return (value.detach(), *torch.autograd.grad(value, (emissions, transitions)))

            return _replayed(gradients, recorder, wait, lambda out: (out[0], out[1:]))
        if compiled:
            total(emissions, transitions).backward()  # eagerly first (the docstring)
            total = compile_function(total, dynamic=False)

        def step():
            emissions.grad = transitions.grad = None
            value = total(emissions, transitions)
            value.backward()
            wait()
            return value.detach(), (emissions.grad, transitions.grad)

        return step
    function = partial(getattr(module, name), **common)
    if compiled and recorder is not None:
        return _replayed(torch.no_grad()(lambda: function(emissions, transitions, lengths)), recorder, wait)
    if compiled:
        with torch.no_grad():
            function(emissions, transitions, lengths)  # eagerly first (the docstring)
        function = compile_function(function, dynamic=False)

    def call():
        with torch.no_grad():
            result = function(emissions, transitions, lengths)
        wait()
        return result

    return call


def _replayed(
    call: Callable[[], Any],
    recorder: Callable[[], Recorder],
    wait: Callable[[], object],
    arrange: Callable[[Any], Any] = lambda outputs: outputs,
) -> Callable[[], Any]:
    """``call`` (on the scores' fixed tensors, so no inputs to copy) captured once
    (:class:`crfbench.capture.CapturedStep`), as a replay that waits for the device and returns the
    captured outputs, arranged by ``arrange``."""
    captured = CapturedStep(lambda _: call(), recorder)
    captured({})  # captured here, in the benchmark's setup

    def replay() -> Any:
        outputs = captured({})
        wait()
        return arrange(outputs)

    return replay


class OperatorCount(TorchDispatchMode):
    """Counts, inside a ``with`` block (the backward pass's included), the torch operators that
    compute (``operators``: views, which launch nothing, left out) and the host synchronisations
    (``syncs``: a tensor's value read by Python, e.g. ``float(x)``).

    On a GPU each computing operator launches one kernel or more, and a step over small arrays
    costs about its launches (a few microseconds each) rather than its arithmetic or traffic; a
    synchronisation also drains the queue of launched kernels, so the host waits for the device
    and the next launches are not overlapped with it. Both counts are the device-independent part
    of a GPU step's time."""

    def __init__(self) -> None:
        super().__init__()
        self.operators = self.syncs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.syncs += 1
        elif not func.is_view:
            self.operators += 1
        return func(*args, **(kwargs or {}))


def operator_counts(variant: str, name: str, scores: TimingBatch) -> tuple[int, int]:
    """The computing operators and host synchronisations (:class:`OperatorCount`) of one torch
    call of ``name`` by ``variant`` on ``scores``, after a first, uncounted call, as a GPU runs it:
    BCRF defers its exactness tests there, not on the CPU (:func:`exactness_tests_deferred`)."""
    call = operation("torch", variant, name, scores)
    with torch_bcrf.exactness_tests_deferred():
        call()
        with OperatorCount() as count:
            call()
    return count.operators, count.syncs
