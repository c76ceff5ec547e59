"""The L0 scorer in JAX: its scores equal the torch scorer's on real sentences (float32, eval mode),
with and without the char-CNN, on fresh and loaded weights; dropout drops; other scorers are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("jax")

import jax

from crfbench.data import synthetic
from crfbench.models import ScorerConfig, build_scorer
from crfbench.models.jax_scorer import jax_features, jax_scores, scorer_params

SMALL = {"dim": 32, "heads": 4, "feedforward": 64, "mlp_hidden": 16, "dropout": 0.1}


@pytest.fixture(scope="module")
def dataset():
    return synthetic.generate(seed=3, labels=3, train=60, dev=20, test=20, max_length=12)


@pytest.mark.parametrize("overrides", [{}, {"char_cnn": True, "char_dim": 8}, {"transitions": False}])
def test_jax_scores_equal_torch_scores(dataset, overrides: dict) -> None:
    torch.manual_seed(0)
    scorer = build_scorer(ScorerConfig.from_dict(SMALL | overrides), dataset.train, len(dataset.tagset))
    with torch.no_grad():  # random biases too, so a dropped bias term would show
        for parameter in scorer.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    batch = list(dataset.dev[:8])
    features = scorer.featurize(batch)
    scorer.eval()
    with torch.no_grad():
        expected = scorer(features)
    emissions, transitions = jax_scores(scorer_params(scorer), jax_features(features))
    np.testing.assert_allclose(np.asarray(emissions), expected.emissions.numpy(), rtol=1e-5, atol=1e-5)
    if expected.transitions is None:
        assert transitions is None
    else:
        assert transitions is not None
        np.testing.assert_allclose(
            np.asarray(transitions), expected.transitions.numpy(), rtol=1e-5, atol=1e-5
        )


def test_dropout_drops_with_a_key_only(dataset) -> None:
    torch.manual_seed(0)
    scorer = build_scorer(
        ScorerConfig.from_dict(SMALL | {"dropout": 0.5}), dataset.train, len(dataset.tagset)
    )
    params, features = scorer_params(scorer), jax_features(scorer.featurize(list(dataset.dev[:4])))
    plain, _ = jax_scores(params, features, dropout=0.5)
    dropped, _ = jax_scores(params, features, dropout=0.5, key=jax.random.key(0))
    assert np.isfinite(np.asarray(dropped)).all()
    assert not np.allclose(np.asarray(plain), np.asarray(dropped))


@pytest.mark.parametrize(
    ("overrides", "message"), [({"layers": 1}, "no self-attention layers"), ({}, "embeddings encoder only")]
)
def test_other_scorers_are_refused(dataset, overrides: dict, message: str, monkeypatch) -> None:
    torch.manual_seed(0)
    scorer = build_scorer(ScorerConfig.from_dict(SMALL | overrides), dataset.train, len(dataset.tagset))
    if not overrides:  # a pretrained encoder, without loading one
        monkeypatch.setattr(scorer, "config", ScorerConfig(encoder="pretrained"))
    with pytest.raises(ValueError, match=message):
        scorer_params(scorer)
