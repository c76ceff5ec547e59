"""`crfbench data check|fetch`: each file's state, the digest cache, and fetching UD from its archive
through an injected downloader (never the network)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from crfbench import data_check
from crfbench.data import checksums
from crfbench.data.location import DownloadError

EN = "ud-2.15/UD_English-EWT/en_ewt-ud-{}.conllu"
CONTENT = {
    split: f"# {split}\n1\tw\tw\tNOUN\t_\t_\t0\troot\t_\t_\n\n".encode() for split in ("train", "dev", "test")
}


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    rows = [f"{EN.format(split)}\t{checksums.sha256(content)}\t" for split, content in CONTENT.items()]
    path = tmp_path / "checksums.tsv"
    path.write_text("path\tsha256\tgit_blob\n" + "\n".join(rows) + "\n")
    return path


def _check(root: Path, manifest: Path, tmp_path: Path, quick: bool = False) -> dict[str, str]:
    cache = data_check.DigestCache(tmp_path / "cache.json")
    return data_check.check(root, ["ud-pos-en"], quick=quick, manifest_path=manifest, cache=cache)[
        "ud-pos-en"
    ]


def test_states_present_missing_mismatch_and_quick(tmp_path: Path, manifest: Path):
    root = tmp_path / "data"
    (root / EN.format("dev")).parent.mkdir(parents=True)
    (root / EN.format("dev")).write_bytes(CONTENT["dev"])
    (root / EN.format("test")).write_bytes(b"something else\n")
    states = _check(root, manifest, tmp_path, quick=True)  # nothing hashed yet: unverified
    assert states == {EN.format("train"): "missing", EN.format("dev"): data_check.UNVERIFIED,
                      EN.format("test"): data_check.UNVERIFIED}  # fmt: skip
    states = _check(root, manifest, tmp_path)
    assert [states[EN.format(s)] for s in ("train", "dev", "test")] == [
        "missing",
        "present",
        "checksum mismatch",
    ]
    assert _check(root, manifest, tmp_path, quick=True) == states  # now from the cache, hashing nothing
    lines, usable = data_check.describe({"ud-pos-en": states})
    assert not usable and lines[0] == "ud-pos-en: NOT USABLE"
    assert any(data_check.UD_HANDLE in line for line in lines)


def test_a_changed_file_is_hashed_again(tmp_path: Path, manifest: Path):
    root = tmp_path / "data"
    path = root / EN.format("dev")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"wrong\n")
    assert _check(root, manifest, tmp_path)[EN.format("dev")] == "checksum mismatch"
    path.write_bytes(CONTENT["dev"])
    assert _check(root, manifest, tmp_path)[EN.format("dev")] == "present"


def _archive(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_fetch_takes_the_missing_ud_files_out_of_the_archive(tmp_path: Path, manifest: Path):
    root = tmp_path / "data"
    root.mkdir()
    members = {f"ud-treebanks-v2.15/UD_English-EWT/en_ewt-ud-{s}.conllu": c for s, c in CONTENT.items()}
    asked: list[str] = []

    def downloader(url: str, target: Path) -> None:
        asked.append(url)
        target.write_bytes(_archive(members))

    report = {
        "ud-pos-en": _check(root, manifest, tmp_path),
        "conll03-ner": {"conll2003/eng.train": "missing"},
    }
    lines = data_check.fetch(
        root, report, downloader=downloader, archive_url="ud.tgz", manifest_path=manifest
    )
    assert asked == ["ud.tgz"]
    assert {line for line in lines if line.startswith("fetched")} == {
        f"fetched {EN.format(s)}" for s in CONTENT
    }
    assert any(line.startswith("conll03-ner: not downloaded;") and "LDC" in line for line in lines)
    assert set(_check(root, manifest, tmp_path).values()) == {"present"}


def test_fetch_refuses_a_file_with_the_wrong_checksum(tmp_path: Path, manifest: Path):
    root = tmp_path / "data"
    root.mkdir()
    bad = _archive({"ud-treebanks-v2.15/UD_English-EWT/en_ewt-ud-dev.conllu": b"tampered\n"})
    report = {"ud-pos-en": _check(root, manifest, tmp_path)}
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        data_check.fetch(
            root, report, downloader=lambda url, target: target.write_bytes(bad), manifest_path=manifest
        )
    assert not (root / EN.format("dev")).exists()


def test_fetch_without_network_says_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    root = tmp_path / "data"
    root.mkdir()
    profile = tmp_path / "profile.yaml"
    profile.write_text("experiments:\n  - {name: a, datasets: [ud-pos-nl]}\nnewton: {}\n")

    def offline(url: str, target: Path) -> None:
        raise DownloadError(f"download of {url} failed: no network")

    assert data_check.run_command("fetch", str(root), [profile], downloader=offline) == 1
    out = capsys.readouterr().out
    assert "no network; without network, get the missing files by hand" in out
    assert "ud-pos-nl: NOT USABLE" in out and "conll03-ner: NOT USABLE" in out
    assert data_check.UD_HANDLE in out


def test_profile_datasets_reads_experiments_and_studies(tmp_path: Path):
    profile = tmp_path / "p.yaml"
    profile.write_text("experiments:\n  - {datasets: [ud-pos-en, conll03-ner]}\nbethe: {}\nnewton: {}\n")
    assert data_check.profile_datasets(profile) == ["ud-pos-en", "conll03-ner", "bethe-ocr", "bethe-citation"]


def test_no_profile_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(data_check, "CONFIG_DIR", tmp_path)
    with pytest.raises(ValueError, match="name them with --profile"):
        data_check.run_command("check", str(tmp_path), None)
