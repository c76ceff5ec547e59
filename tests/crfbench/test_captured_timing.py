"""The timing stage's compiled mode on a GPU: each step's device part captured once per batch
shape and replayed (``crfbench.capture``). Rehearsed on a CPU with the stand-in recorder
(``CRFBENCH_CAPTURE=rerun``), which runs the same plumbing: a replayed step equals the eager one
on every batch (its gradients included), every item but SparseMAP's is timed in both modes, and an
item whose capture fails is left out of the compiled mode, said so, instead of ending the run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from crfbench import capture
from crfbench.experiment import load_dataset
from crfbench.models import build_scorer
from crfbench.objectives import DECODERS, chain_scores
from crfbench.timed_steps import TorchSteps

from .test_compiled import timed_in_both_modes
from .test_engine import SMALL_SCORER, make_config


@pytest.fixture(autouse=True)
def rehearsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(capture.CAPTURE_VARIABLE, "rerun")


#: Where a step is captured: on a GPU as a CUDA graph (the GPU session's capture stage runs these),
#: on the CPU by the stand-in recorder
DEVICES = [
    pytest.param(
        "cuda", id="cuda-graph", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
    ),
    "cpu",
]


def steps_without_dropout(device: str = "cpu") -> tuple[TorchSteps, list]:
    config = make_config(scorer=SMALL_SCORER | {"dropout": 0.0})
    dataset = load_dataset(config, None)
    scorers = {}
    for transitions in (True, False):
        torch.manual_seed(0)
        scorer_config = dataclasses.replace(config.scorer, transitions=transitions)
        scorers[transitions] = build_scorer(scorer_config, dataset.train, len(dataset.tagset)).to(device)
    steps = TorchSteps(config, dataset.tagset, scorers, torch.device(device), compiled=True)
    return steps, [list(dataset.train[i : i + 8]) for i in (0, 8, 16)]


def gradients(steps: TorchSteps) -> list[torch.Tensor]:
    return [p.grad.clone() for p in steps.scorers[True].parameters() if p.grad is not None]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("loss", ["crf", "bcrf"])
def test_a_captured_training_step_equals_the_eager_one_on_every_batch(loss: str, device: str) -> None:
    steps, batches = steps_without_dropout(device)
    assert steps.captures and not steps.compiled_scorers
    captured, eager = steps.train(loss, "compiled"), steps.train(loss)
    for batch in batches:
        captured(batch)
        replayed = gradients(steps)
        eager(batch)
        assert replayed and len(replayed) == len(gradients(steps))
        for got, want in zip(replayed, gradients(steps), strict=True):
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_captured_decoding_equals_eager_decoding_on_every_batch(device: str) -> None:
    steps, batches = steps_without_dropout(device)
    decode, scorer = steps.decode("bcrf-10", "compiled"), steps.scorers[True]
    for batch in batches:
        got = torch.as_tensor(decode(batch)).clone()
        features = {key: tensor.to(device) for key, tensor in scorer.featurize(batch).items()}
        with torch.no_grad():
            want = DECODERS["bcrf-10"](chain_scores(scorer(features), steps.tagset))
        assert torch.equal(got, want)


def test_every_item_but_sparsemap_is_timed_captured(tmp_path: Path) -> None:
    table = timed_in_both_modes(tmp_path, ("crf", "sparsemap"), ("viterbi",), batches=2)
    compiled = set(zip(table["mode"], table.kind, table.name, strict=True))
    assert ("compiled", "train", "crf") in compiled and ("compiled", "decode", "viterbi") in compiled
    assert ("compiled", "train", "sparsemap") not in compiled and ("eager", "train", "sparsemap") in compiled


class FailingRecorder(capture.RerunRecorder):
    def record(self, call):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore")


def test_an_item_whose_capture_fails_is_timed_eager_only_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("crfbench.timed_steps.recorder_for", lambda device: FailingRecorder)
    table = timed_in_both_modes(tmp_path, ("crf",), ("viterbi",), rounds=2)
    assert set(table["mode"]) == {"eager"} and len(table) == 2 * 2  # two items, two rounds
    logged = capsys.readouterr()
    assert "not timed compiled: train crf: its capture failed: CUDA error" in logged.out + logged.err


def test_a_bad_capture_setting_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(capture.CAPTURE_VARIABLE, "graphs")
    with pytest.raises(ValueError, match="CRFBENCH_CAPTURE: 'graphs' is not 'rerun'"):
        capture.recorder_for(torch.device("cpu"))
