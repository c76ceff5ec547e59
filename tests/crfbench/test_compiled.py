"""The timing stage's compiled mode: every item but SparseMAP's timed eager and compiled, the
compiled calls equal the eager ones, and bad modes are refused by name. Compiled with
``aot_eager`` (``CRFBENCH_COMPILE_BACKEND``): it traces as inductor would and compiles nothing;
what compiled code costs is the benchmarks' business."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from crfbench.batching import targets
from crfbench.compiled import BACKEND_VARIABLE, CompiledInference, compile_function
from crfbench.experiment import load_dataset, score_batch
from crfbench.models import build_scorer
from crfbench.objectives import DECODERS, training_loss
from crfbench.timing import time_run

from .test_engine import make_config

#: Timed: one loss that compiles and one that is exempt, and a decoder.
LOSSES = ("bcrf", "sparsemap")
DECODER_NAMES = ("viterbi",)


@pytest.fixture(autouse=True)
def traced_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_VARIABLE, "aot_eager")
    torch._dynamo.reset()


def timed_in_both_modes(path: Path, losses: tuple[str, ...], decoders: tuple[str, ...], **sizes: int):
    """``time_run`` of the test config's ``losses`` and ``decoders``, eager and compiled, one
    batch, one round and one warm-up round unless ``sizes`` say otherwise."""
    sizes = {"batches": 1, "rounds": 1, "warmup": 1} | sizes
    return time_run(
        make_config(),
        path,
        losses=losses,
        decoders=decoders,
        modes=("eager", "compiled"),
        progress=False,
        **sizes,
    )


def test_every_item_but_sparsemap_is_timed_in_both_modes(tmp_path: Path) -> None:
    table = timed_in_both_modes(tmp_path, LOSSES, DECODER_NAMES)
    timed = Counter(zip(table["mode"], table.kind, table.name, strict=True))
    items = [("train", name) for name in LOSSES] + [("decode", name) for name in DECODER_NAMES]
    assert timed == Counter(
        {("eager", *item): 1 for item in items}
        | {("compiled", *item): 1 for item in items if item[1] != "sparsemap"}
    )
    assert (table.seconds > 0).all()


def test_compiled_calls_equal_eager_ones() -> None:
    config = make_config()
    dataset = load_dataset(config, None)
    torch.manual_seed(0)
    scorer = build_scorer(config.scorer, dataset.train, len(dataset.tagset))
    sentences = list(dataset.train[:8])
    chain = score_batch(scorer, sentences, dataset.tagset, torch.device("cpu"))
    gold = targets(False, sentences, dataset.tagset)
    for name in ("bcrf", "unstructured"):  # every method: tests/implementations/test_capture.py
        eager = training_loss(name, config.loss_iterations)
        compiled = CompiledInference(eager)
        torch.testing.assert_close(compiled(chain, gold), eager(chain, gold, validate=False))
    for name in ("bcrf-10",):
        compiled = CompiledInference(DECODERS[name])
        assert torch.equal(compiled(chain), DECODERS[name](chain, validate=False))
    with pytest.raises(ValueError, match="sparsemap: has no compiled mode"):
        CompiledInference(DECODERS["sparsemap"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"modes": ("eager", "jit")}, "modes: 'jit' is not one of eager, compiled"),
        ({"modes": ("compiled",), "warmup": 0}, "warmup: the compiled mode needs at least 1 untimed round"),
    ],
)
def test_bad_modes_are_refused_by_name(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        time_run(make_config(), tmp_path, batches=1, rounds=1, progress=False, **({"warmup": 1} | options))


#: Graphs compiled by the counting backend of ``test_every_variant_of_one_function_compiles``.
COMPILED_GRAPHS: list[torch.fx.GraphModule] = []


def _counting_backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
    COMPILED_GRAPHS.append(graph)
    return graph.forward


def test_every_variant_of_one_function_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing stage compiles one contract call per method, all through the public layer's same
    functions, each closing over another kernel: every one of them is compiled (beyond dynamo's
    default of 8 variants per function), none falls back to eager."""
    name = "crfbench_test_counter"
    if name not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(_counting_backend, name=name)
    monkeypatch.setenv(BACKEND_VARIABLE, name)
    torch._dynamo.reset()
    COMPILED_GRAPHS.clear()

    def through(kernel):  # one code object for every variant, as the public layer's functions
        def call(x: torch.Tensor) -> torch.Tensor:
            return kernel(x)

        return call

    kernels = [eval(f"lambda x: x * {k}") for k in range(12)]  # a code object of its own each
    variants = [compile_function(through(kernel)) for kernel in kernels]
    x = torch.ones(3)
    assert [float(variant(x)[0]) for variant in variants] == [float(k) for k in range(12)]
    assert len(COMPILED_GRAPHS) == 12
