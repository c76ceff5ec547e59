"""Datasets of the benchmark: UD POS tagging, UD segmentation + POS, CoNLL-2003 NER (full and partial
labels) and a synthetic HMM task, all as ``types.Dataset`` records.

``load(name, data_dir, **options)`` builds one; ``DATASETS`` lists the names. Corpus files are read
from the data dir (``resolve_data_dir``) and verified against ``checksums.tsv``. ``bies_spans`` and
``bio_spans`` turn tag sequences into the labelled spans that span F1 counts.
"""

from . import types
from .location import resolve_data_dir
from .registry import DATASETS, OPTIONS, load
from .schemes import bies_spans, bio_spans
from .types import Dataset, Sentence, TagSet, Task
from .ud import SubstituteProtocolWarning

__all__ = [
    "DATASETS",
    "OPTIONS",
    "Dataset",
    "Sentence",
    "SubstituteProtocolWarning",
    "TagSet",
    "Task",
    "bies_spans",
    "bio_spans",
    "load",
    "resolve_data_dir",
    "types",
]
