"""The torch steps the timing stage times (``crfbench.timing``), per item and mode.

- ``train``: network forward + loss + backward (no optimiser step) on a batch of sentences;
- ``decode``: network forward + decoder, without gradients.

Every step featurizes its sentences on the host and copies them to the device: that is part of
every mode. ``eager`` then runs torch operator by operator. ``compiled`` runs, on a CPU, the network
and the inference call under ``torch.compile`` (``crfbench.compiled``); on a GPU, the rest of the
step (network, inference, backward) as a CUDA graph captured once per batch shape and replayed
(``crfbench.capture``), which costs seconds to make where inductor costs minutes per length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from .baselines import PytorchCrf, is_partial, timed_decoder, timed_loss
from .batching import targets
from .capture import CapturedStep, Inputs, Recorder, recorder_for
from .compiled import CompiledInference, compile_function
from .config import RunConfig
from .data.types import Sentence, TagSet
from .experiment import score_batch
from .models import Scorer
from .objectives import Inference, chain_scores

#: A timed step: a batch of sentences in, what to wait for out (torch's steps wait themselves).
Step = Callable[[Sequence[Sentence]], object]
#: The key under which a captured training step's inputs hold the gold (or allowed) tags.
TARGET = "target"


@dataclasses.dataclass
class TorchSteps:
    """Makes the torch steps of one timing run: ``scorers`` maps "has a transition head" to its
    network (the unstructured loss's has none); ``compiled`` says whether any compiled step will
    be asked for (the CPU's compiled networks are then made once, shared by every item)."""

    config: RunConfig
    tagset: TagSet
    scorers: dict[bool, Scorer]
    device: torch.device
    compiled: bool

    def __post_init__(self) -> None:
        self.recorder: Callable[[], Recorder] | None = recorder_for(self.device)
        self.compiled_scorers = (
            {key: compile_function(scorer) for key, scorer in self.scorers.items()}
            if self.compiled and self.recorder is None
            else {}
        )

    @property
    def captures(self) -> bool:
        """Whether the compiled mode captures CUDA graphs here (on a GPU) or compiles."""
        return self.recorder is not None

    def train(self, name: str, mode: str = "eager", validate: bool = False) -> Step:
        """The training step of loss ``name``; ``validate`` checks the contract's inputs (eager)."""
        if mode == "compiled" and self.recorder is not None:
            return self._captured_train(name, self.recorder)
        inference = timed_loss(name, self.config.loss_iterations, self.tagset, self.device)
        loss_function: Inference | CompiledInference | PytorchCrf = inference
        scorer: Any = self.scorers[name != "unstructured"]  # a Scorer, or compiled
        if mode == "compiled":
            loss_function = CompiledInference(cast(Inference, inference))
            scorer = self.compiled_scorers[name != "unstructured"]

        def step(sentences: Sequence[Sentence]) -> None:
            scorer.train()
            scorer.zero_grad(set_to_none=True)
            chain = score_batch(scorer, sentences, self.tagset, self.device)
            target = targets(is_partial(name), sentences, self.tagset).to(self.device)
            loss_function(chain, target, validate=validate).mean().backward()

        return step

    def decode(self, name: str, mode: str = "eager", validate: bool = False) -> Step:
        """The decoding step of decoder ``name``; ``validate`` as in :meth:`train`."""
        if mode == "compiled" and self.recorder is not None:
            return self._captured_decode(name, self.recorder)
        decoder: Inference | CompiledInference | PytorchCrf = timed_decoder(name, self.tagset, self.device)
        scorer: Any = self.scorers[True]  # a Scorer, or compiled
        if mode == "compiled":
            decoder, scorer = (
                CompiledInference(cast(Inference, decoder)),
                self.compiled_scorers[True],
            )

        @torch.no_grad()
        def step(sentences: Sequence[Sentence]) -> None:
            scorer.eval()
            decoder(score_batch(scorer, sentences, self.tagset, self.device), validate=validate)

        return step

    def _inputs(self, scorer: Scorer, sentences: Sequence[Sentence], loss: str | None = None) -> Inputs:
        """A batch's network inputs on the device, with a loss's target under :data:`TARGET`."""
        inputs = {key: tensor.to(self.device) for key, tensor in scorer.featurize(sentences).items()}
        if loss is not None:
            inputs[TARGET] = targets(is_partial(loss), sentences, self.tagset).to(self.device)
        return inputs

    def _captured_train(self, name: str, recorder: Callable[[], Recorder]) -> Step:
        inference = timed_loss(name, self.config.loss_iterations, self.tagset, self.device)
        scorer = self.scorers[name != "unstructured"]

        def device_part(inputs: Inputs) -> torch.Tensor:
            scorer.train()
            scorer.zero_grad(set_to_none=True)  # at capture: the gradients live in the graph's memory
            features = {key: tensor for key, tensor in inputs.items() if key != TARGET}
            chain = chain_scores(scorer(features), self.tagset)
            loss = cast(Inference, inference)(chain, inputs[TARGET], validate=False).mean()
            loss.backward()
            return loss.detach()

        captured = CapturedStep(device_part, recorder)
        return lambda sentences: captured(self._inputs(scorer, sentences, name))

    def _captured_decode(self, name: str, recorder: Callable[[], Recorder]) -> Step:
        decoder, scorer = cast(Inference, timed_decoder(name, self.tagset, self.device)), self.scorers[True]

        @torch.no_grad()
        def device_part(inputs: Inputs) -> torch.Tensor:
            scorer.eval()
            return decoder(chain_scores(scorer(inputs), self.tagset), validate=False)

        captured = CapturedStep(device_part, recorder)
        return lambda sentences: captured(self._inputs(scorer, sentences))
