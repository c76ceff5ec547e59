"""ScorerConfig validation and its dict round trip."""

from __future__ import annotations

import json

import pytest

from crfbench.models import ScorerConfig


def test_defaults_and_round_trip() -> None:
    config = ScorerConfig()
    assert (config.dim, config.heads, config.feedforward, config.layers) == (768, 8, 2048, 0)
    assert ScorerConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    custom = ScorerConfig.from_dict({"layers": 4, "char_cnn": True, "dropout": 0})
    assert custom.layers == 4 and custom.char_cnn and custom.to_dict()["dropout"] == 0


def test_unknown_keys_named() -> None:
    with pytest.raises(ValueError, match=r"unknown keys \['hidden', 'layer'\]"):
        ScorerConfig.from_dict({"layer": 2, "hidden": 3})


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"layers": -1}, "layers"),
        ({"dim": 30, "heads": 8}, "divisible"),
        ({"encoder": "bert"}, "encoder"),
        ({"dropout": 1.0}, "dropout"),
        ({"char_kernel": 4}, "odd"),
        ({"min_word_count": 0}, "min_word_count"),
        ({"layers": 2.0}, "layers"),
        ({"layers": True}, "layers"),
        ({"char_cnn": 1}, "char_cnn"),
        ({"max_subwords": 2}, "max_subwords"),
        ({"encoder": "pretrained", "layers": 2}, "embeddings"),
        ({"encoder": "pretrained", "char_cnn": True}, "embeddings"),
    ],
)
def test_bad_values_rejected(bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScorerConfig.from_dict(bad)


def test_overrides_replace_checked_fields_and_name_the_bad_ones() -> None:
    """``with_overrides`` (the Bethe experiments' ``--set``): a list becomes a tuple field's value,
    a float field takes an int, an unknown name or a wrongly typed value is refused naming it."""
    from crfbench.bethe.citation import Settings
    from crfbench.models.config import with_overrides

    settings = with_overrides(Settings(), {"caps": [1, 5], "tolerance": 1, "max_citations": 7}, "--set")
    assert settings.caps == (1, 5) and settings.tolerance == 1 and settings.max_citations == 7
    assert with_overrides(Settings(), {}, "--set") == Settings()
    with pytest.raises(ValueError, match=r"^--set: unknown setting\(s\) \['cap'\]; valid: min_segments, "):
        with_overrides(Settings(), {"cap": 3}, "--set")
    for name, value, kind in [
        ("caps", [1, "x"], "a list, each an integer"),
        ("caps", 3, "a list"),
        ("max_citations", 2.5, "an integer or null"),
        ("tolerance", "soon", "a finite number"),
    ]:
        with pytest.raises(ValueError, match=rf"^--set: {name} must be {kind}"):
            with_overrides(Settings(), {name: value}, "--set")
