"""Frozen pretrained token features: extracted once per dataset split, cached on disk, looked up.

A split's features are a pretrained model's hidden states at the chosen ``layers``, pooled from
subwords to words (``first``: each word's first subword; ``mean``: the mean of its subwords),
stored as float16 ``(words, layers, hidden)`` per sentence. The cache file of a split is
``<root>/<model key>/<data checksum>.pt``: the model key names the model, its weights' checksum,
the layers and the pooling, the data checksum the split's token sequences (tags play no part), so
every run on that split reuses the file whatever its loss or seed, and a change of model, weights,
layers, pooling or data reads another file. How the layers are combined (concatenated or
averaged) is the encoder's choice at lookup time, so both read the same file. Files are written
atomically (complete or absent) under a lock on their folder, so two jobs on one split compute it
once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..batching import length_sorted_batches, select
from ..data.types import Sentence
from ..io import CorruptFileError, check_fields, load_torch, save_torch
from .config import ScorerConfig
from .pretrained import PretrainedEncoder, first_subwords, load_pretrained, resolve_pretrained

CACHE_VARIABLE = "CRFBENCH_FEATURES"
"""The environment variable naming the cache folder when the scorer's ``feature_cache`` is null."""
FILE_FIELDS = ("key", "data", "tokens", "offsets", "features")
EXTRACTION_BATCH = 32  # sentences per forward pass of the pretrained model (length-sorted)


def default_cache_root() -> Path:
    """$CRFBENCH_FEATURES, else crfbench/features under the user's cache folder ($XDG_CACHE_HOME)."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "crfbench" / "features"


def data_checksum(sentences: Sequence[Sentence]) -> str:
    """SHA-256 of the sentences' token sequences, in order (what the features depend on)."""
    digest = hashlib.sha256()
    for sentence in sentences:
        digest.update(json.dumps(sentence.tokens, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


@cache
def weights_checksum(directory: Path) -> str:
    """SHA-256 over the model directory's weight files (safetensors / bin), names and bytes."""
    files = sorted(p for p in directory.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
    if not files:
        raise ValueError(f"pretrained model {directory}: no weight file (*.safetensors, *.bin)")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode("utf-8") + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class FeatureKey:
    """What a split's features depend on besides its tokens: model, weights, layers, pooling."""

    model: str
    weights: str
    layers: tuple[int, ...]
    pooling: str

    def folder(self) -> str:
        """The cache sub-folder: a readable model name and a digest of every field."""
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.model).name or "model")
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode("utf-8")).hexdigest()
        return f"{name}-{digest[:16]}"


def pool_words(hidden: Tensor, words: Sequence[int], pooling: str) -> Tensor:
    """Subword vectors (S, ...) -> word vectors (N, ...); ``words[s]`` is subword s's word (-1: a
    special token). ``first``: each word's first subword; ``mean``: the mean of its subwords."""
    index = torch.tensor(words, dtype=torch.long)
    real = index >= 0
    if not bool(real.any()):
        raise ValueError("pool_words: no subword belongs to a word")
    count = int(index.max()) + 1
    if pooling == "first":  # the fine-tuning encoder's choice, by the same function
        return hidden[first_subwords(words)]
    if pooling == "mean":
        summed = torch.zeros((count, *hidden.shape[1:]), dtype=hidden.dtype)
        summed.index_add_(0, index[real], hidden[real])
        sizes = torch.bincount(index[real], minlength=count).to(hidden.dtype)
        return summed / sizes.view(-1, *([1] * (hidden.dim() - 1)))
    raise ValueError(f"pooling must be 'first' or 'mean', got {pooling!r}")


def check_layers(layers: Sequence[int], num_layers: int) -> None:
    """ValueError unless every layer indexes the model's hidden states (0: the embeddings,
    1..L: layer outputs, -1: the last layer)."""
    for layer in layers:
        if not -num_layers <= layer <= num_layers:
            raise ValueError(f"feature_layers: {layer} is not a layer of a {num_layers}-layer model")


@torch.no_grad()
def extract(
    encoder: PretrainedEncoder, sentences: Sequence[Sentence], layers: Sequence[int], pooling: str
) -> list[Tensor]:
    """Each sentence's word features, float16 (words, len(layers), hidden), from the frozen model."""
    model: Any = encoder.model
    check_layers(layers, int(model.config.num_hidden_layers))
    model.eval()
    out: list[Tensor] = [torch.empty(0) for _ in sentences]
    for indices in length_sorted_batches(sentences, EXTRACTION_BATCH):
        batch = select(sentences, indices)
        encoded = [encoder.encode(s.tokens) for s in batch]
        for sentence, (ids, _) in zip(batch, encoded, strict=True):
            if len(ids) > encoder.max_subwords:
                raise ValueError(f"a sentence of {len(sentence.tokens)} words needs {len(ids)} subwords")
        width = max(len(ids) for ids, _ in encoded)
        input_ids = torch.full((len(batch), width), encoder.tokenizer.pad_token_id or 0, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, _) in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, : len(ids)] = 1
        states = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states
        stacked = torch.stack([states[layer] for layer in layers], dim=2)  # (B, S, layers, H)
        for row, index in enumerate(indices):
            ids, words = encoded[row]
            pooled = pool_words(stacked[row, : len(ids)], words, pooling)
            out[index] = pooled.to(torch.float16).contiguous()
    return out


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` (flock on its descriptor: released when the process ends)."""
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


class FeatureStore:
    """The frozen features of a scorer config's model, layers and pooling, by token sequence.

    ``prepare(sentences)`` loads the split's cache file, computing and writing it first when absent;
    ``lookup(sentences)`` gives each sentence's features from what was prepared, else from any
    cache file of the same model key (a subset of a cached split, as the decoding sweep reads),
    else computes them (kept in memory only). The pretrained model is loaded on first need.
    """

    def __init__(self, config: ScorerConfig) -> None:
        self.config = config
        self.root = Path(config.feature_cache) if config.feature_cache else default_cache_root()
        self._table: dict[tuple[str, ...], Tensor] = {}
        self._scanned = False
        self._encoder: PretrainedEncoder | None = None
        self.extracted = 0  # sentences run through the pretrained model by this store

    @property
    def key(self) -> FeatureKey:
        directory = resolve_pretrained(self.config.pretrained)
        layers = self.config.feature_layers
        return FeatureKey(
            self.config.pretrained, weights_checksum(directory), layers, self.config.feature_pooling
        )

    def path(self, sentences: Sequence[Sentence]) -> Path:
        """The cache file of a split."""
        return self.root / self.key.folder() / f"{data_checksum(sentences)}.pt"

    def _pretrained(self) -> PretrainedEncoder:
        if self._encoder is None:
            tokenizer, model = load_pretrained(self.config.pretrained, weights=True)
            self._encoder = PretrainedEncoder(self.config, tokenizer, model)
        return self._encoder

    def compute(self, sentences: Sequence[Sentence]) -> list[Tensor]:
        """Features of ``sentences`` from the pretrained model, uncached."""
        self.extracted += len(sentences)
        return extract(self._pretrained(), sentences, self.config.feature_layers, self.config.feature_pooling)

    def prepare(self, sentences: Sequence[Sentence]) -> Path | None:
        """Make sure the split's features are cached and load them: its own file, else the files
        of this model key when they hold every sentence (a cut of a cached split: no new file,
        None), else a new file, computed and written under a lock on the folder."""
        path = self.path(sentences)
        if not path.exists():
            self._scan()
            if all(s.tokens in self._table for s in sentences):
                return None
            with _locked(path.parent):
                if not path.exists():  # another job may have written it while we waited
                    self._write(path, sentences)
        self._load(path)
        return path

    def _write(self, path: Path, sentences: Sequence[Sentence]) -> None:
        features = self.compute(sentences)
        lengths = torch.tensor([len(f) for f in features], dtype=torch.long)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
        payload = {
            "key": asdict(self.key),
            "data": data_checksum(sentences),
            "tokens": [list(s.tokens) for s in sentences],
            "offsets": offsets,
            "features": torch.cat(features),
        }
        save_torch(path, payload)

    def _load(self, path: Path) -> None:
        """Add a cache file's sentences to the table (memory-mapped: pages load as they are read)."""
        saved = check_fields(path, load_torch(path, mmap=True), FILE_FIELDS)
        if saved["key"] != asdict(self.key):
            raise CorruptFileError(f"{path}: features of another model key ({saved['key']})")
        offsets, features = saved["offsets"], saved["features"]
        for i, tokens in enumerate(saved["tokens"]):
            self._table.setdefault(tuple(tokens), features[offsets[i] : offsets[i + 1]])

    def _scan(self) -> None:
        """Load every cache file of this model key (once)."""
        if self._scanned:
            return
        self._scanned = True
        folder = self.root / self.key.folder()
        for path in sorted(folder.glob("*.pt")) if folder.is_dir() else []:
            self._load(path)

    def lookup(self, sentences: Sequence[Sentence]) -> list[Tensor]:
        """Each sentence's features (words, layers, hidden), float16."""
        missing = [s for s in sentences if s.tokens not in self._table]
        if missing:
            self._scan()
            missing = [s for s in missing if s.tokens not in self._table]
        if missing:
            for sentence, features in zip(missing, self.compute(missing), strict=True):
                self._table[sentence.tokens] = features
        return [self._table[s.tokens] for s in sentences]


def timed_prepare(store: FeatureStore, sentences: Sequence[Sentence]) -> dict[str, Any]:
    """``store.prepare(sentences)`` with what it did: the file (None: held by other files), the
    sentences it extracted (0: all cached), seconds."""
    before, started = store.extracted, time.perf_counter()
    path = store.prepare(sentences)
    return {
        "file": None if path is None else str(path),
        "sentences": len(sentences),
        "extracted": store.extracted - before,
        "seconds": round(time.perf_counter() - started, 1),
    }
