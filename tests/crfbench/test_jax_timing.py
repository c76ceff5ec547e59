"""The timing stage's JAX items: a run with both backends gives JAX rows (compiled) for every item
but pytorch-crf's, and a JAX loss is the torch loss on the same batch and network, so that the two
frameworks time the same computation."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("jax")

from crfbench import cli, jax_timing
from crfbench.baselines import is_partial, timed_decoder, timed_loss
from crfbench.batching import targets
from crfbench.compiled import BACKEND_VARIABLE
from crfbench.experiment import load_dataset, score_batch
from crfbench.objectives import Inference
from crfbench.timing import time_run, timed_inputs

from .test_engine import make_config

CPU = torch.device("cpu")


def test_both_backends_time_every_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_VARIABLE, "aot_eager")  # traces as inductor would, compiles nothing
    torch._dynamo.reset()
    losses, decoders = ("crf", "pytorch-crf"), ("viterbi",)
    table = time_run(
        make_config(),
        tmp_path,
        losses=losses,
        decoders=decoders,
        modes=("eager", "compiled"),
        backends=("torch", "jax"),
        batches=1,
        rounds=1,
        warmup=1,
        progress=False,
    )
    timed = Counter(zip(table.backend, table["mode"], table.kind, table.name, strict=True))
    items = [("train", name) for name in losses] + [("decode", name) for name in decoders]
    assert timed == Counter(
        {("torch", "eager", *item): 1 for item in items}
        | {("torch", "compiled", *item): 1 for item in items if item[1] != "pytorch-crf"}
        | {("jax", "compiled", *item): 1 for item in items if item[1] != "pytorch-crf"}
    )
    assert np.isfinite(table.seconds).all() and (table.seconds > 0).all()


@pytest.mark.parametrize("name", ["crf", "crf-partial", "bcrf", "meanfield", "unstructured", "m-sparsemap"])
def test_the_jax_loss_is_the_torch_loss_on_the_first_batch(name: str) -> None:
    """Eval mode in both (dropout's masks differ between frameworks); float32."""
    config = make_config(
        scorer={"dim": 32, "mlp_hidden": 32, "dropout": 0.1, "char_cnn": True, "char_dim": 8}
    )
    dataset = load_dataset(config)
    inputs = timed_inputs(config, dataset, 1, None, CPU)
    scorer, batch = inputs.scorers[name != "unstructured"], inputs.train[0]
    loss = timed_loss(name, config.loss_iterations, dataset.tagset, CPU)
    assert isinstance(loss, Inference)
    scorer.eval()
    with torch.no_grad():
        chain = score_batch(scorer, batch, dataset.tagset, CPU)
        expected = loss(chain, targets(is_partial(name), batch, dataset.tagset)).mean().item()
    network = jax_timing.JaxNetwork(scorer, dataset.tagset, CPU)
    features, target = network.inputs(batch, is_partial(name))
    got = float(jax_timing.mean_loss(network, loss, network.params, features, target))
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-5)


def test_the_jax_decoder_decodes_as_torch() -> None:
    config = make_config()
    dataset = load_dataset(config)
    inputs = timed_inputs(config, dataset, 1, None, CPU)
    scorer, batch = inputs.scorers[True], inputs.dev[0]
    decoder = timed_decoder("viterbi", dataset.tagset, CPU)
    scorer.eval()
    with torch.no_grad():
        expected = decoder(score_batch(scorer, batch, dataset.tagset, CPU)).numpy()
    got = jax_timing.decode_step(jax_timing.JaxNetwork(scorer, dataset.tagset, CPU), decoder)(batch)
    lengths = [len(sentence.tokens) for sentence in batch]
    for row, length in enumerate(lengths):
        np.testing.assert_array_equal(np.asarray(got)[row, :length], expected[row, :length])


def test_bad_backends_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="backends: 'numpy' is not one of torch, jax"):
        time_run(make_config(), tmp_path, backends=("numpy",), batches=1, rounds=1, progress=False)
    with pytest.raises(ValueError, match="warmup: the jax backend needs at least 1 untimed round"):
        time_run(make_config(), tmp_path, backends=("jax",), warmup=0, batches=1, rounds=1, progress=False)


def test_the_cli_times_the_backends_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = tmp_path / "run.json"
    settings.write_text(json.dumps(make_config().to_dict()))
    run = tmp_path / "run"
    argv = [
        "time",
        "--allow-dirty",
        "--config",
        str(settings),
        "--run-dir",
        str(run),
        "--backends",
        "jax",
        "--no-progress",
    ]
    rest = ["--losses", "unstructured", "--decoders", "argmax", "--batches", "1", "--rounds", "1"]
    assert cli.main([*argv, *rest]) == 0
    table = pd.read_csv(run / "timing.csv")
    assert set(zip(table.backend, table["mode"], table.name, strict=True)) == {
        ("jax", "compiled", "unstructured"),
        ("jax", "compiled", "argmax"),
    }
    assert "jax" in capsys.readouterr().out
