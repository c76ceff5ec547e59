"""The named datasets and their options: ``load(name, data_dir, **options)``."""

from __future__ import annotations

import os
from pathlib import Path

from . import checksums, conll03, partial, synthetic, ud
from .location import DataDir, resolve_data_dir
from .types import Dataset

_POS = {f"ud-pos-{language}": language for language in ("nl", "en", "fr", "de")}
_SEG = {f"ud-seg-{language}": language for language in ("zh", "ja")}
DATASETS: tuple[str, ...] = (*_POS, *_SEG, "conll03-ner", "conll03-ner-partial", "synthetic")

# Options of each dataset with their defaults; every dataset also takes ``download`` (default True).
OPTIONS: dict[str, dict[str, object]] = {
    **{name: {"tags": "upos"} for name in _POS},
    **{name: {} for name in _SEG},
    "conll03-ner": {},
    "conll03-ner-partial": {"partial_seed": 0},
    "synthetic": dict(synthetic.DEFAULTS),
}
COMMON_OPTIONS: dict[str, object] = {"download": True}


def source_folder(name: str) -> str | None:
    """The folder, relative to the data dir, that dataset ``name`` is read from (None for the
    generated synthetic data): the pipeline checks it exists before planning any job."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(DATASETS)}")
    if name in _POS or name in _SEG:
        return f"{ud.RELEASE}/{ud.TREEBANKS[{**_POS, **_SEG}[name]].name}"
    if name.startswith("conll03-ner"):
        return os.path.dirname(conll03.FILES["train"])
    return None


def load(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    checksums_path: Path = checksums.DEFAULT_MANIFEST,
    **options: object,
) -> Dataset:
    """Load dataset ``name`` (one of ``DATASETS``) from ``data_dir`` (else ``$CRFBENCH_DATA``).

    Options, with defaults:

    - every dataset: ``download=True``: fetch a missing UD file from its repository (tag r2.15),
      verify it and store it in the data dir; False never touches the network. No effect on
      conll03-* (licensed, never downloaded) and synthetic (no files).
    - ud-pos-nl/en/fr/de: ``tags="upos"`` (the 17 UPOS tags) or ``"xpos"`` (the treebank's XPOS
      tags in the splits read; French-GSD has none).
    - conll03-ner-partial: ``partial_seed=0``: the permutation that splits train into the 4 parts.
    - synthetic: ``seed=0, labels=4, scheme="bies", vocab=50, train=400, dev=100, test=100,
      min_length=1, max_length=20`` (see ``crfbench.data.synthetic``); ``data_dir`` is not used.

    ``checksums_path`` is the checksum manifest every file is verified against (tests point it at a
    fixture). ValueError on an unknown name or option; FileNotFoundError on a missing dev/test file
    or CoNLL-2003 file; a missing UD train file gives the substitute protocol (``ud.SUBSTITUTE``).
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(DATASETS)}")
    defaults = {**COMMON_OPTIONS, **OPTIONS[name]}
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        valid = ", ".join(defaults)
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)} for dataset {name!r}; valid options: {valid}"
        )
    chosen = {**defaults, **options}
    download = chosen.pop("download")
    if not isinstance(download, bool):
        raise ValueError(f"{name}: option download must be True or False, got {download!r}")
    if name == "synthetic":
        return synthetic.generate(**chosen, name=name)  # type: ignore[arg-type]
    data = DataDir(resolve_data_dir(data_dir), checksums_path)
    if name in _POS:
        treebank, tags = ud.TREEBANKS[_POS[name]], chosen["tags"]
        ud.check_tags(name, treebank, tags)  # before reading anything
        return ud.pos_dataset(name, treebank, ud.read_splits(data, treebank, download), str(tags))
    if name in _SEG:
        return ud.seg_dataset(name, ud.read_splits(data, ud.TREEBANKS[_SEG[name]], download))
    if name == "conll03-ner":
        return conll03.load(data, name)
    return _conll03_partial(name, data, chosen["partial_seed"])


def _conll03_partial(name: str, data: DataDir, seed: object) -> Dataset:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"{name}: option partial_seed must be an integer, got {seed!r}")
    full = conll03.load(data, name)
    train = partial.partially_annotate(full.train, conll03.TYPES, seed)
    options: dict[str, object] = {"partial_seed": seed}
    return Dataset(name, "ner", full.tagset, train, full.dev, full.test, full.protocol, full.sources, options)
