"""Fixed-shape steps captured once as CUDA graphs and replayed: the compiled mode on a GPU.

A CUDA graph records every kernel a step launches, once, and replays them all with one launch.
What an eager GPU step spends on launching kernels and on Python (most of it, for a tagger's small
arrays) is gone, and nothing is compiled: a step of any length is ready after a few eager calls.
``torch.compile`` instead unrolls the sequential methods' loop over positions and compiles every
length for minutes (docs/benchmarks.md), which a lent GPU's minutes cannot pay for. The replayed
kernels are eager torch's own, unfused: the mode removes launches and host overhead, not memory
traffic.

Capture needs a step that reads nothing back to the host and copies nothing from it: every method
but SparseMAP (``crfbench.compiled.CAPTURE_EXEMPT``; ``tests/implementations/test_capture.py``
captures each one's training step and decoding). A replay rewrites the memory of the captured
inputs and outputs in place, so each call copies its inputs into the captured ones and returns the
captured outputs, valid until the next call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, cast

import torch
from torch import Tensor

Output = TypeVar("Output")
#: A step's inputs: named tensors, each of one shape per capture.
Inputs = Mapping[str, Tensor]
#: Eager calls before a capture, on a side stream: first-use work (allocations, cuBLAS handles,
#: lazily built caches) must not happen while capturing.
WARMUP_CALLS = 2


class Recorder(Protocol):
    """Records one call and replays it: ``record`` returns the call's outputs, whose memory every
    ``replay`` rewrites."""

    def record(self, call: Callable[[], Output]) -> Output: ...

    def replay(self) -> None: ...


class CudaGraphRecorder:
    """A call recorded as a CUDA graph on the current device, after :data:`WARMUP_CALLS` eager
    calls on a side stream (as capture requires)."""

    def __init__(self) -> None:
        self.graph = torch.cuda.CUDAGraph()

    def record(self, call: Callable[[], Output]) -> Output:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                call()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            return call()

    def replay(self) -> None:
        self.graph.replay()


class RerunRecorder:
    """The CPU's stand-in for a CUDA graph: records by calling, and replays by calling again and
    writing the results into the recorded outputs, as a graph's replay rewrites them. It checks a
    captured step's plumbing (inputs copied in, outputs rewritten, one capture per shape) where no
    GPU is; it saves nothing."""

    def record(self, call: Callable[[], Output]) -> Output:
        self._call = call
        self._outputs = call()
        return self._outputs

    def replay(self) -> None:
        fresh = self._call()
        with torch.no_grad():
            for recorded, new in zip(_tensors(self._outputs), _tensors(fresh), strict=True):
                recorded.copy_(new)


def _tensors(outputs: object) -> list[Tensor]:
    """The tensors of a step's outputs: a tensor, or a tuple or list of them, or None."""
    if outputs is None:
        return []
    return [outputs] if isinstance(outputs, Tensor) else [t for t in cast(Sequence[Tensor], outputs)]


#: Set to ``rerun``, the compiled mode on a CPU takes the GPU's path with :class:`RerunRecorder`
#: (the GPU session's CPU rehearsal, ``benchmarks/gpu_session.sh``).
CAPTURE_VARIABLE = "CRFBENCH_CAPTURE"


def recorder_for(device: torch.device) -> Callable[[], Recorder] | None:
    """What records a step on ``device``: CUDA graphs on a CUDA device; None elsewhere, where the
    compiled mode is ``torch.compile`` (``crfbench.compiled``), unless :data:`CAPTURE_VARIABLE`
    asks for the rehearsal."""
    if device.type == "cuda":
        return CudaGraphRecorder
    choice = os.environ.get(CAPTURE_VARIABLE, "")
    if choice not in ("", "rerun"):
        raise ValueError(f"{CAPTURE_VARIABLE}: {choice!r} is not 'rerun' (or unset)")
    return RerunRecorder if choice == "rerun" else None


def _shapes(inputs: Inputs) -> tuple[tuple[str, tuple[int, ...], torch.dtype], ...]:
    return tuple(sorted((name, tuple(tensor.shape), tensor.dtype) for name, tensor in inputs.items()))


class CapturedStep(Generic[Output]):
    """``step(inputs)`` captured once per set of input shapes and replayed: a call copies
    ``inputs`` into the captured inputs of their shapes (capturing a new graph for shapes it has
    not met), replays, and returns the captured outputs (rewritten by the next call of the same
    shapes). ``step`` must use nothing but ``inputs`` and tensors that outlive it (a network's
    parameters); what it does in Python (setting ``.grad`` to None, say) runs at capture only."""

    def __init__(self, step: Callable[[Inputs], Output], recorder: Callable[[], Recorder]) -> None:
        self._step, self._recorder = step, recorder
        self._captures: dict[Any, tuple[dict[str, Tensor], Recorder, Output]] = {}

    @property
    def captures(self) -> int:
        """How many graphs were captured: one per set of input shapes met."""
        return len(self._captures)

    def __call__(self, inputs: Inputs) -> Output:
        key = _shapes(inputs)
        if key not in self._captures:
            static = {name: tensor.clone() for name, tensor in inputs.items()}
            recorder = self._recorder()
            outputs = recorder.record(lambda: self._step(static))
            self._captures[key] = (static, recorder, outputs)
        static, recorder, outputs = self._captures[key]
        with torch.no_grad():
            for name, tensor in inputs.items():
                static[name].copy_(tensor)
        recorder.replay()
        return outputs
