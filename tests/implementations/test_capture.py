"""Every torch method but SparseMAP is capture-safe: ``torch.compile(fullgraph=True)`` traces its
functions (a training loss forward and backward, decoding) with no graph break, and on a GPU a
training step captures as a CUDA graph.

SparseMAP is exempt: its active set grows and stops on the scores' values (docs/engine.md).

- compiled == eager on an instance with every length, -inf scores and garbage padding, values
  and gradients; ``aot_eager`` traces the forward and the backward graphs as inductor would, with
  none of its compile time (the speed of compiled code is the benchmarks' business);
- BCRF's scaling form, whose exactness tests read tensors back in eager mode, is traced with its
  tests branch-free (``fullgraph=True`` fails on any read-back); where no test fails (finite
  scores) compiled and eager are the same to rounding, and where some do (-inf scores) too;
- a CUDA graph replays a captured loss step and decoding on new values (skipped without a GPU;
  the CPU's stand-in recorder checks the same capture plumbing everywhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch

from crfbench.capture import CapturedStep, CudaGraphRecorder, RerunRecorder

from . import backends
from .instances import Instance, invoke, make_instance, random_allowed

TORCH = backends.get("torch")

BCRF = {"iterations": 4, "temperature": 0.5, "order": "odd-even", "tolerance": None}
MEANFIELD = {"iterations": 4, "init": "unary", "penalty": 0.0, "tolerance": None}
#: (method, options): every capture-safe method, BCRF in both forms and with both gradients.
METHODS: list[tuple[str, dict[str, Any]]] = [
    ("crf", {}),
    ("crf-scan", {}),
    ("unstructured", {}),
    ("meanfield", MEANFIELD),
    *[
        ("bcrf", {**BCRF, "form": form, "gradient": gradient})
        for form in ("scaling", "log")
        for gradient in ("danskin", "unrolled")
    ],
]
IDS = [m + "".join(f"-{v}" for k, v in o.items() if k in ("form", "gradient")) for m, o in METHODS]
B, N, T = 6, 6, 4


def instance(seed: int, neg_inf: float, per_position: bool) -> tuple[Instance, np.ndarray]:
    """Every length 1..N once, start and end scores, -inf in a ``neg_inf`` share of them."""
    rng = np.random.default_rng(seed)
    lengths = rng.permutation(np.arange(1, N + 1))
    inst = make_instance(
        rng, batch=B, length=N, num_tags=T, lengths=lengths, per_position=per_position, neg_inf=neg_inf
    )
    return inst, random_allowed(rng, inst)


def options_of(method: str, function: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options ``function`` takes (the gradient is a loss's option only), and no value checks:
    they read the scores back (``validate=False``, as a compiled training step passes it)."""
    if function in ("loss", "partial_loss"):
        return {**options, "validate": False}
    return {k: v for k, v in options.items() if k != "gradient"} | {"validate": False}


def training_step(module: Any, options: dict[str, Any], tags: torch.Tensor, allowed: torch.Tensor):
    """The summed full and partial-label losses of a batch and the node marginals."""

    def step(emissions, transitions, lengths, start, end):
        kw = {
            "emissions": emissions,
            "transitions": transitions,
            "lengths": lengths,
            "start": start,
            "end": end,
        }
        loss = invoke(module.loss, kw, tags, **options).sum()
        partial = invoke(module.partial_loss, kw, allowed, **options).sum()
        return loss + partial

    return step


def leaves(inst: Instance) -> dict[str, torch.Tensor]:
    """The instance's scores as float64 leaves that require gradients, and its lengths."""
    arrays = inst.arrays(TORCH)
    out = {k: v.detach().clone().requires_grad_(True) for k, v in arrays.items() if k != "lengths"}
    return {**out, "lengths": arrays["lengths"]}


def value_and_grads(step: Any, arrays: dict[str, torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    names = ("emissions", "transitions", "start", "end")
    value = step(*(arrays[k] for k in ("emissions", "transitions", "lengths", "start", "end")))
    grads = torch.autograd.grad(value, [arrays[k] for k in names], allow_unused=True, materialize_grads=True)
    return value.detach(), list(grads)


#: -inf scores and per-position transitions for every method; for BCRF's scaling form (Danskin)
#: also finite scores and a shared matrix (its kernel then vouched for in eager mode, tested per flow
#: traced)
LOSS_CASES = [(m, o, True, 0.3) for m, o in METHODS] + [
    (m, o, False, 0.0) for m, o in METHODS if o.get("form") == "scaling" and o["gradient"] == "danskin"
]
LOSS_IDS = [f"{i}-inf" for i in IDS] + ["bcrf-scaling-danskin-finite"]


@pytest.mark.parametrize(("method", "options", "per_position", "neg_inf"), LOSS_CASES, ids=LOSS_IDS)
def test_loss_step_traces_whole_and_equals_eager(
    method: str, options: dict[str, Any], per_position: bool, neg_inf: float
) -> None:
    torch._dynamo.reset()
    inst, allowed = instance(3, neg_inf, per_position)
    module = TORCH.module(method)
    tags, mask = torch.as_tensor(inst.gold), torch.as_tensor(allowed)
    step = training_step(module, options_of(method, "loss", options), tags, mask)
    eager = value_and_grads(step, leaves(inst))
    compiled = value_and_grads(torch.compile(step, fullgraph=True, backend="aot_eager"), leaves(inst))
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-10, atol=1e-10)
    for got, want in zip(compiled[1], eager[1], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


#: decode and marginals take no gradient option: BCRF once per form
READ_OFF = [(m, o, i) for (m, o), i in zip(METHODS, IDS, strict=True) if o.get("gradient") != "unrolled"]


@pytest.mark.parametrize(
    ("method", "options"), [(m, o) for m, o, _ in READ_OFF], ids=[i for *_, i in READ_OFF]
)
def test_decode_and_marginals_trace_whole(method: str, options: dict[str, Any]) -> None:
    torch._dynamo.reset()
    inst, _ = instance(4, 0.3, True)
    module, kw = TORCH.module(method), inst.arrays(TORCH)
    for function in ("decode", "marginals"):
        opts = options_of(method, function, options)
        if method == "unstructured" and function == "decode":
            opts = {"repair": True, "validate": False}
        eager = invoke(getattr(module, function), kw, **opts)
        compiled = invoke(
            torch.compile(getattr(module, function), fullgraph=True, backend="aot_eager"), kw, **opts
        )
        for got, want in zip(*(x if isinstance(x, tuple) else (x,) for x in (compiled, eager)), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


#: How a step is captured: as a CUDA graph where a GPU is; everywhere, by the CPU's stand-in, which
#: checks the same plumbing (inputs copied in, outputs rewritten) and no capture
NO_GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA graph needs a GPU")
RECORDERS = [
    pytest.param("gpu", CudaGraphRecorder, id="cuda-graph", marks=NO_GPU),
    pytest.param("cpu", RerunRecorder, id="rerun"),
]


def captured_inputs(device: str, seed: int) -> dict[str, torch.Tensor]:
    """The instance of ``seed`` on ``device``: scores, lengths, gold tags and allowed tags."""
    inst, allowed = instance(seed, 0.3, True)
    extra = {"tags": torch.as_tensor(inst.gold), "allowed": torch.as_tensor(allowed)}
    where = "cuda" if device == "gpu" else "cpu"
    return {**inst.arrays(backends.get("torch", device=device)), **{k: v.to(where) for k, v in extra.items()}}


@pytest.mark.parametrize(("device", "recorder"), RECORDERS)
@pytest.mark.parametrize(("method", "options"), METHODS, ids=IDS)
def test_loss_step_captures_and_replays_on_new_values(
    method: str, options: dict[str, Any], device: str, recorder: Any
) -> None:
    """Captured once (``crfbench.capture``, as the timing stage captures a step on a GPU), the
    step replays on new values of the same shapes (scores, lengths, gold tags, allowed tags) and
    equals eager on them, the loss and its gradients."""
    module, names = (
        backends.get("torch", device=device).module(method),
        ("emissions", "transitions", "start", "end"),
    )

    def run(arrays: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        leaves = {k: arrays[k].detach().requires_grad_(True) for k in names}  # the inputs' memory
        step = training_step(module, options_of(method, "loss", options), arrays["tags"], arrays["allowed"])
        value = step(
            *(leaves.get(k, arrays[k]) for k in ("emissions", "transitions", "lengths", "start", "end"))
        )
        grads = torch.autograd.grad(value, list(leaves.values()), allow_unused=True, materialize_grads=True)
        return [value.detach(), *grads]

    captured = CapturedStep(run, recorder)
    captured(captured_inputs(device, 6))
    got = captured(captured_inputs(device, 7))
    assert captured.captures == 1
    for g, want in zip(got, run(captured_inputs(device, 7)), strict=True):
        torch.testing.assert_close(g, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("device", "recorder"), RECORDERS)
@pytest.mark.parametrize(
    ("method", "options"), [(m, o) for m, o, _ in READ_OFF], ids=[i for *_, i in READ_OFF]
)
def test_decoding_captures_and_replays_on_new_values(
    method: str, options: dict[str, Any], device: str, recorder: Any
) -> None:
    module = backends.get("torch", device=device).module(method)
    opts = options_of(method, "decode", options)
    if method == "unstructured":
        opts = {"repair": True, "validate": False}

    def run(arrays: Mapping[str, torch.Tensor]) -> torch.Tensor:
        keywords = {k: arrays[k] for k in ("emissions", "transitions", "lengths", "start", "end")}
        return invoke(module.decode, keywords, **opts)

    captured = CapturedStep(run, recorder)
    captured(captured_inputs(device, 8))
    assert torch.equal(captured(captured_inputs(device, 9)), run(captured_inputs(device, 9)))


def test_a_first_call_traced_compiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step whose first call ever is traced (``implementations.ops``'s per-type cache still
    empty) is not compiled again on its second call: a cache written while tracing would fail
    dynamo's guard on it."""
    from torch._dynamo.utils import counters

    from implementations import ops

    monkeypatch.setattr(ops, "_BY_TYPE", {})
    torch._dynamo.reset()
    counters.clear()
    inst, allowed = instance(5, 0.0, True)
    step = training_step(
        TORCH.module("crf"),
        options_of("crf", "loss", {}),
        torch.as_tensor(inst.gold),
        torch.as_tensor(allowed),
    )
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    first, second = (value_and_grads(compiled, leaves(inst))[0] for _ in range(2))
    torch.testing.assert_close(first, second)
    assert counters["stats"]["unique_graphs"] == 1
