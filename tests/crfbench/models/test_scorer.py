"""The from-scratch scorer: shapes, padding invariance, vocabularies, checkpoint round trip, gradients."""

from __future__ import annotations

import json

import pytest
import torch

from crfbench.data.types import Sentence
from crfbench.models import Scorer, ScorerConfig, Scores, Vocabulary, build_scorer
from crfbench.models.encoders import MAX_WORD_CHARS, word_chars

SMALL = {"dim": 32, "heads": 4, "feedforward": 64, "mlp_hidden": 16}
NUM_TAGS = 5


def sentence(text: str) -> Sentence:
    tokens = tuple(text.split())
    return Sentence(tokens, ("X",) * len(tokens))


TRAIN = [
    sentence("the blorf zanged a quimble"),
    sentence("a quimble zanged"),
    sentence("the frumious blorf"),
    sentence("zanged"),
]
BATCH = [
    sentence("the quimble"),
    sentence("a frumious blorf zanged the quimble"),
    sentence("blorf"),
    sentence("the wug zanged"),
]


def make(seed: int = 0, **overrides: object) -> Scorer:
    torch.manual_seed(seed)
    return build_scorer(ScorerConfig.from_dict(SMALL | overrides), TRAIN, NUM_TAGS)


def run(scorer: Scorer, sentences: list[Sentence]) -> Scores:
    scorer.eval()
    with torch.no_grad():
        return scorer(scorer.featurize(sentences))


@pytest.mark.parametrize(
    "overrides", [{}, {"layers": 2}, {"char_cnn": True}, {"layers": 2, "char_cnn": True}]
)
def test_shapes(overrides: dict) -> None:
    scores = run(make(**overrides), BATCH)
    assert scores.emissions.shape == (4, 6, NUM_TAGS)
    assert scores.transitions is not None and scores.transitions.shape == (4, 5, NUM_TAGS, NUM_TAGS)
    assert scores.lengths.tolist() == [2, 6, 1, 3]
    assert torch.isfinite(scores.emissions).all() and torch.isfinite(scores.transitions).all()


def test_length_one_batch_and_no_transitions() -> None:
    scores = run(make(layers=2), [sentence("blorf"), sentence("wug")])
    assert scores.emissions.shape == (2, 1, NUM_TAGS)
    assert scores.transitions is not None and scores.transitions.shape == (2, 0, NUM_TAGS, NUM_TAGS)
    unstructured = make(layers=2, transitions=False)
    assert unstructured.transition_head is None
    assert run(unstructured, BATCH).transitions is None


def test_empty_sentence_rejected() -> None:
    with pytest.raises(ValueError, match="sentence 1 has no tokens"):
        make().featurize([sentence("a"), Sentence((), ())])


@pytest.mark.parametrize("layers", [0, 2])
@pytest.mark.parametrize("char_cnn", [False, True])
def test_padding_invariance(layers: int, char_cnn: bool) -> None:
    scorer = make(layers=layers, char_cnn=char_cnn)
    together = run(scorer, BATCH)
    for i, s in enumerate(BATCH):
        alone = run(scorer, [s])
        n = len(s.tokens)
        torch.testing.assert_close(together.emissions[i, :n], alone.emissions[0], rtol=0, atol=1e-5)
        torch.testing.assert_close(together.transitions[i, : n - 1], alone.transitions[0], rtol=0, atol=1e-5)


def test_char_cnn_independent_of_word_width() -> None:
    """A short word's char features do not depend on a longer word elsewhere in the batch."""
    scorer = make(char_cnn=True)
    short = run(scorer, [sentence("wug")]).emissions[0]
    beside_long = run(scorer, [sentence("wug"), sentence("supercalifragilistic")]).emissions[0]
    torch.testing.assert_close(short, beside_long, rtol=0, atol=1e-5)


def test_unknown_words_and_min_count() -> None:
    scorer = make(char_cnn=True)
    words = scorer.encoder.words
    assert words.index("quimble") >= 2 and words.index("gun") == 1 and words.index("") == 1
    features = scorer.featurize([sentence("the gun")])
    assert features["words"].tolist() == [[words.index("the"), 1]]
    assert (features["chars"][0, 1, :3] >= 2).all()  # g, u, n are training characters
    assert scorer.featurize([sentence("ÿ")])["chars"].tolist() == [[[1]]]  # unknown character
    rare = make(min_word_count=2).encoder.words
    assert "zanged" in rare and "the" in rare and "frumious" not in rare and rare.index("frumious") == 1
    assert len(rare) == 2 + 5  # the, blorf, zanged, a, quimble


def test_vocabulary_specials_and_order() -> None:
    vocab = Vocabulary.build(["b", "<unk>", "a", "b", "<pad>"])
    assert vocab.index("b") == 2  # the most frequent first, ties by symbol
    assert vocab.index("<unk>") != 1 and vocab.index("<pad>") != 0  # literal words are ordinary symbols
    assert Vocabulary.from_state(json.loads(json.dumps(vocab.state()))).state() == vocab.state()


def test_long_words_are_clipped() -> None:
    word = "x" * 10 + "y" * 100 + "z" * 10
    clipped = word_chars(word)
    assert len(clipped) == MAX_WORD_CHARS and clipped.startswith("x" * 10) and clipped.endswith("z" * 10)
    features = make(char_cnn=True).featurize([Sentence((word,), ("X",))])
    assert features["chars"].shape == (1, 1, MAX_WORD_CHARS)


def test_featurize_deterministic() -> None:
    a, b = make(char_cnn=True), make(char_cnn=True)
    fa, fb = a.featurize(BATCH), b.featurize(BATCH)
    assert fa.keys() == fb.keys() == {"words", "chars", "lengths"}
    for key in fa:
        assert fa[key].dtype == torch.long and fa[key].device.type == "cpu"
        assert torch.equal(fa[key], a.featurize(BATCH)[key]) and torch.equal(fa[key], fb[key])


def test_seeded_initialisation_is_deterministic() -> None:
    a, b = make(seed=3, layers=2, char_cnn=True), make(seed=3, layers=2, char_cnn=True)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("overrides", [{"layers": 2, "char_cnn": True}, {"transitions": False}])
def test_checkpoint_round_trip(overrides: dict) -> None:
    original = make(seed=1, **overrides)
    state = json.loads(json.dumps(original.vocab_state()))
    config = ScorerConfig.from_dict(json.loads(json.dumps(original.config.to_dict())))
    torch.manual_seed(99)  # a different initialisation, overwritten by the state dict
    rebuilt = Scorer.from_state(config, state, NUM_TAGS)
    rebuilt.load_state_dict(original.state_dict())
    want, got = run(original, BATCH), run(rebuilt, BATCH)
    assert torch.equal(want.emissions, got.emissions)
    if want.transitions is None:
        assert got.transitions is None
    else:
        assert torch.equal(want.transitions, got.transitions)


def test_from_state_rejects_mismatched_chars() -> None:
    state = make().vocab_state()
    with pytest.raises(ValueError, match="char"):
        Scorer.from_state(ScorerConfig.from_dict(SMALL | {"char_cnn": True}), state, NUM_TAGS)


@pytest.mark.parametrize("overrides", [{"layers": 2, "char_cnn": True}, {}])
def test_gradients_reach_every_parameter(overrides: dict) -> None:
    scorer = make(**overrides)
    scorer.train()
    scores = scorer(scorer.featurize(BATCH))
    (scores.emissions.square().sum() + scores.transitions.square().sum()).backward()
    for name, p in scorer.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_dropout_only_in_training() -> None:
    scorer = make(layers=2, dropout=0.5)
    features = scorer.featurize(BATCH)
    scorer.eval()
    with torch.no_grad():
        assert torch.equal(scorer(features).emissions, scorer(features).emissions)
    scorer.train()
    with torch.no_grad():
        assert not torch.equal(scorer(features).emissions, scorer(features).emissions)
