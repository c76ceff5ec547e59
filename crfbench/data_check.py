"""``crfbench data check`` and ``crfbench data fetch``: the data folder's state for the datasets the
pipeline profiles use, and the download of the public corpora into its layout.

Each profile (``config/*.yaml``) names datasets (its experiments' ``datasets``; ``bethe`` reads the
OCR letters and the UMass citations; ``newton`` CoNLL-2003). Each dataset's files are the paths of
the shared data mirror (``checksums.tsv``), each reported present, missing or checksum mismatch.
A file is hashed once: its digests are cached (``$CRFBENCH_CACHE``, default ``~/.cache/crfbench``)
under its path, size and modification time, so a later check hashes only what changed; ``--quick``
hashes nothing and reports an uncached file as present, unverified.

``fetch`` downloads what may be redistributed: UD 2.15, from its release archive on LINDAT (CC BY-SA
4.0), each needed file taken out of it, verified and written into the layout. CoNLL-2003 (Reuters
licence), the OCR letters and the UMass citations (no licence stated) are never downloaded: it
prints where to get them. The downloader is an argument, so tests never reach the network.
"""

from __future__ import annotations

import contextlib
import json
import os
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from .data import checksums, citation, conll03, ocr, ud
from .data.location import DownloadError, write_atomic

#: UD 2.15 on LINDAT/CLARIAH-CZ (Zeman, Nivre et al. 2024): the release's handle and its archive.
UD_HANDLE = "http://hdl.handle.net/11234/1-5787"
UD_ARCHIVE_URL = (
    "https://lindat.mff.cuni.cz/repository/xmlui/bitstream/handle/11234/1-5787/ud-treebanks-v2.15.tgz"
)
UD_ARCHIVE_ROOT = "ud-treebanks-v2.15"
CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
PRESENT, UNVERIFIED, MISSING, MISMATCH = "present", "present, not verified", "missing", "checksum mismatch"

_UD_LANGUAGES = {"ud-pos-nl": "nl", "ud-pos-en": "en", "ud-pos-fr": "fr", "ud-pos-de": "de"}
_UD_LANGUAGES |= {"ud-seg-zh": "zh", "ud-seg-ja": "ja"}
_CONLL = tuple(conll03.FILES.values())
#: Where to get each corpus that ``fetch`` does not download.
WHERE = {
    "ud": f"UD 2.15 release archive ud-treebanks-v2.15.tgz, {UD_HANDLE} (CC BY-SA 4.0): crfbench data fetch",
    "conll03": "CoNLL-2003 (Reuters licence, not downloadable): the NIST/LDC Reuters Corpus (RCV1) and the "
    "shared task's scripts, https://www.clips.uantwerpen.be/conll2003/ner/; build eng.train, eng.testa, "
    "eng.testb into conll2003/",
    "ocr": "Taskar's OCR letters (no licence stated): letter.data.gz from "
    "http://ai.stanford.edu/~btaskar/ocr/, decompressed to ocr-taskar/letter.data",
    "citation": "UMass citation field extraction (Anzaroot & McCallum 2013; no licence stated): IESL's "
    "umass-citation.tar.gz, its *.docs into umass-citation/",
}


@dataclass(frozen=True)
class Needed:
    """A dataset's files, relative to the data dir; ``optional`` ones have a fallback (UD train:
    the substitute protocol)."""

    name: str
    source: str  # a key of WHERE
    files: tuple[str, ...]
    optional: tuple[str, ...] = ()


def needed(name: str) -> Needed:
    """The files dataset ``name`` reads (``crfbench.data`` names, ``bethe-ocr``, ``bethe-citation``)."""
    if name in _UD_LANGUAGES:
        treebank = ud.TREEBANKS[_UD_LANGUAGES[name]]
        return Needed(name, "ud", tuple(treebank.file(s) for s in ud.SPLITS), (treebank.file("train"),))
    if name in ("conll03-ner", "conll03-ner-partial"):
        return Needed(name, "conll03", _CONLL)
    if name == "bethe-ocr":
        return Needed(name, "ocr", (ocr.RELATIVE_PATH,))
    if name == "bethe-citation":
        return Needed(name, "citation", tuple(citation.FILES.values()))
    if name == "synthetic":
        return Needed(name, "", ())
    raise ValueError(f"unknown dataset {name!r}")


def profile_datasets(config: Path) -> list[str]:
    """The datasets profile ``config`` (a YAML file) uses, in order of first use."""
    try:
        settings = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"{config}: not a readable profile: {error}") from None
    names = [
        name for experiment in settings.get("experiments", []) for name in experiment.get("datasets", [])
    ]
    if "bethe" in settings:
        names += ["bethe-ocr", "bethe-citation"]
    if "newton" in settings:
        names.append("conll03-ner")
    return list(dict.fromkeys(names))


def _cache_path() -> Path:
    return Path(os.environ.get("CRFBENCH_CACHE", Path.home() / ".cache" / "crfbench")) / "data-digests.json"


class DigestCache:
    """File digests (SHA-256, git blob) by absolute path, valid while size and mtime are unchanged."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or _cache_path()
        try:
            self.entries: dict[str, dict] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}

    def get(self, file: Path, hash_now: bool) -> tuple[str, str] | None:
        """``(sha256, git_blob)`` of ``file``: cached, else computed when ``hash_now``, else None."""
        stat = file.stat()
        key, stamp = str(file.resolve()), [stat.st_size, stat.st_mtime_ns]
        entry = self.entries.get(key)
        if entry and entry["stamp"] == stamp:
            return entry["sha256"], entry["git_blob"]
        if not hash_now:
            return None
        content = file.read_bytes()
        digests = checksums.sha256(content), checksums.git_blob(content)
        self.entries[key] = {"stamp": stamp, "sha256": digests[0], "git_blob": digests[1]}
        return digests

    def save(self) -> None:
        with contextlib.suppress(OSError):  # an unwritable cache only costs the next check its hashing
            write_atomic(self.path, json.dumps(self.entries).encode())


def file_state(
    root: Path, relative: str, manifest: dict[str, checksums.Expected], cache: DigestCache, quick: bool
) -> str:
    """One of PRESENT, UNVERIFIED, MISSING, MISMATCH for ``root / relative``."""
    path = root / relative
    if not path.is_file():
        return MISSING
    digests = cache.get(path, hash_now=not quick)
    if digests is None:
        return UNVERIFIED
    expected = manifest.get(relative)
    if expected is None:
        return UNVERIFIED
    wrong = (expected.sha256 and expected.sha256 != digests[0]) or (
        expected.git_blob and expected.git_blob != digests[1]
    )
    return MISMATCH if wrong else PRESENT


def check(
    root: Path,
    datasets: Iterable[str],
    *,
    quick: bool = False,
    manifest_path: Path = checksums.DEFAULT_MANIFEST,
    cache: DigestCache | None = None,
) -> dict[str, dict[str, str]]:
    """Dataset -> {relative file -> state} for each of ``datasets``."""
    manifest = checksums.read_manifest(manifest_path)
    cache = cache or DigestCache()
    report = {
        name: {
            relative: file_state(root, relative, manifest, cache, quick) for relative in needed(name).files
        }
        for name in datasets
    }
    cache.save()
    return report


def describe(report: dict[str, dict[str, str]]) -> tuple[list[str], bool]:
    """Lines for the report, and whether every dataset can run (optional files may be missing)."""
    lines, usable = [], True
    for name, files in report.items():
        need = needed(name)
        blocking = [
            f for f, state in files.items() if state in (MISSING, MISMATCH) and f not in need.optional
        ]
        fallback = [f for f, state in files.items() if state == MISSING and f in need.optional]
        usable &= not blocking
        status = "ok" if not blocking else "NOT USABLE"
        if not blocking and fallback:
            status = "ok (substitute protocol: train missing)"
        lines.append(f"{name}: {status}")
        lines += [f"  {state:<22} {relative}" for relative, state in files.items()]
        if blocking or fallback:
            lines.append(f"  get it: {WHERE[need.source]}")
    return lines, usable


Downloader = Callable[[str, Path], None]


def download_to(url: str, target: Path) -> None:
    """Save ``url`` (or a local archive path) to ``target``; DownloadError when it cannot."""
    if Path(url).is_file():
        target.write_bytes(Path(url).read_bytes())
        return
    try:
        with urllib.request.urlopen(url, timeout=60) as response, target.open("wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
    except (OSError, ValueError) as error:
        raise DownloadError(f"download of {url} failed: {error}") from error


def fetch(
    root: Path,
    report: dict[str, dict[str, str]],
    *,
    downloader: Downloader = download_to,
    archive_url: str = UD_ARCHIVE_URL,
    manifest_path: Path = checksums.DEFAULT_MANIFEST,
) -> list[str]:
    """Download UD 2.15's archive and write each missing UD file of ``report`` into ``root``,
    verified; return lines saying what it wrote and what must be got by hand. DownloadError when the
    archive cannot be had; ValueError (nothing written for that file) on a checksum mismatch."""
    wanted = {
        relative
        for name, files in report.items()
        if needed(name).source == "ud"
        for relative, state in files.items()
        if state == MISSING
    }
    lines = []
    if wanted:
        manifest = checksums.read_manifest(manifest_path)
        with tempfile.TemporaryDirectory() as scratch:
            archive = Path(scratch) / "ud.tgz"
            downloader(archive_url, archive)
            with tarfile.open(archive) as tar:
                for member in tar:
                    relative = _ud_relative(member.name)
                    if relative in wanted and member.isfile():
                        content = tar.extractfile(member).read()  # type: ignore[union-attr]
                        checksums.verify(relative, content, manifest, shown=f"{archive_url}:{member.name}")
                        write_atomic(root / relative, content)
                        wanted.discard(relative)
                        lines.append(f"fetched {relative}")
        lines += [f"not in the archive: {relative}" for relative in sorted(wanted)]
    for name, files in report.items():
        source = needed(name).source
        if source != "ud" and any(state in (MISSING, MISMATCH) for state in files.values()):
            lines.append(f"{name}: not downloaded; {WHERE[source]}")
    return lines


def _ud_relative(member: str) -> str:
    """An archive member's path in the data layout: ud-treebanks-v2.15/X/f -> ud-2.15/X/f."""
    head, _, rest = member.lstrip("./").partition("/")
    return f"{ud.RELEASE}/{rest}" if head == UD_ARCHIVE_ROOT else ""


def run_command(
    command: str,
    data_dir: str | None,
    profiles: list[Path] | None,
    quick: bool = False,
    archive: str | None = None,
    downloader: Downloader = download_to,
) -> int:
    """``crfbench data check|fetch``: print the report; 0 when every dataset can run, else 1."""
    from .data.location import resolve_data_dir

    root = resolve_data_dir(data_dir)
    configs = profiles or sorted(CONFIG_DIR.glob("*.yaml"))
    if not configs:
        raise ValueError(f"no profiles in {CONFIG_DIR}: name them with --profile FILE...")
    datasets = list(dict.fromkeys(name for config in configs for name in profile_datasets(Path(config))))
    report = check(root, datasets, quick=quick)
    if command == "fetch":
        try:
            for line in fetch(root, report, downloader=downloader, archive_url=archive or UD_ARCHIVE_URL):
                print(line)
        except DownloadError as error:
            print(f"{error}; without network, get the missing files by hand:")
        report = check(root, datasets, quick=quick)
    print(f"data folder {root} ({', '.join(str(c) for c in configs)}):")
    lines, usable = describe(report)
    print("\n".join(lines))
    return 0 if usable else 1
