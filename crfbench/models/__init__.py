"""The scorer f_theta of Corro et al. (2025): an encoder and MLP heads for emission and transition scores.

``build_scorer(config, train_sentences, num_tags)`` gives a ``Scorer``; ``scorer.featurize(sentences)``
turns a batch into padded CPU tensors and ``scorer(features)`` into raw ``Scores`` (constraint
masks are the engine's job). ``vocab_state`` / ``Scorer.from_state`` rebuild it from a checkpoint.
"""

from .config import ScorerConfig
from .scorer import Scorer, Scores, build_scorer
from .vocab import Vocabulary

__all__ = ["Scorer", "ScorerConfig", "Scores", "Vocabulary", "build_scorer"]
