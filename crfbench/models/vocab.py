"""Symbol vocabularies (words, characters) built from the training split, with a JSON state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

PAD = 0
UNK = 1


class Vocabulary:
    """A frozen symbol -> id map with ``<pad>`` = 0 and ``<unk>`` = 1.

    The special symbols have no string entry, so a training word spelled ``"<unk>"`` gets an
    ordinary id. Ids are assigned by decreasing count, ties broken by the symbol, so a vocabulary
    depends only on the training data.
    """

    def __init__(self, symbols: Sequence[str]) -> None:
        self._symbols = tuple(symbols)
        self._index = {s: i + 2 for i, s in enumerate(self._symbols)}
        if len(self._index) != len(self._symbols):
            raise ValueError("Vocabulary: symbols must be distinct")

    @classmethod
    def build(cls, symbols: Iterable[str], min_count: int = 1) -> Vocabulary:
        """Keep the symbols seen at least ``min_count`` times; the rest will map to ``<unk>``."""
        counts = Counter(symbols)
        kept = sorted((s for s, c in counts.items() if c >= min_count), key=lambda s: (-counts[s], s))
        return cls(kept)

    def __len__(self) -> int:
        """Number of ids, the two special ones included (the embedding table size)."""
        return len(self._symbols) + 2

    def __contains__(self, symbol: str) -> bool:
        return symbol in self._index

    def index(self, symbol: str) -> int:
        return self._index.get(symbol, UNK)

    def encode(self, symbols: Iterable[str]) -> list[int]:
        return [self._index.get(s, UNK) for s in symbols]

    def state(self) -> list[str]:
        """JSON-able state: the ordinary symbols in id order (ids 2, 3, ...)."""
        return list(self._symbols)

    @classmethod
    def from_state(cls, state: Sequence[str]) -> Vocabulary:
        return cls(state)
