"""Data dir resolution, the checksum manifest, verified reads and downloads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crfbench import data
from crfbench.data import checksums, location

from .corpora import DataDirFixture, no_temporary_files


def test_resolve_data_dir_prefers_the_configured_value(monkeypatch, tmp_path):
    monkeypatch.setenv("CRFBENCH_DATA", str(tmp_path / "from-env"))
    assert data.resolve_data_dir(tmp_path / "configured") == tmp_path / "configured"
    assert data.resolve_data_dir(str(tmp_path / "configured")) == tmp_path / "configured"


def test_resolve_data_dir_falls_back_to_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CRFBENCH_DATA", str(tmp_path / "from-env"))
    assert data.resolve_data_dir(None) == tmp_path / "from-env"
    assert data.resolve_data_dir("") == tmp_path / "from-env"


def test_resolve_data_dir_explains_both_ways(monkeypatch):
    monkeypatch.delenv("CRFBENCH_DATA", raising=False)
    with pytest.raises(ValueError, match="CRFBENCH_DATA") as error:
        data.resolve_data_dir(None)
    assert "configuration" in str(error.value)


def test_git_blob_matches_git_hash_object():
    # `printf 'hello\n' | git hash-object --stdin` and the empty blob
    assert checksums.git_blob(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert checksums.git_blob(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_packaged_manifest_covers_every_file_the_readers_use():
    manifest = checksums.read_manifest()
    for treebank in data.ud.TREEBANKS.values():
        for split in data.ud.SPLITS:
            expected = manifest[treebank.file(split)]
            assert len(expected.sha256) == 64 or len(expected.git_blob) == 40
    for relative in data.conll03.FILES.values():
        assert len(manifest[relative].sha256) == 64
    from crfbench.data import citation, ocr

    for relative in (ocr.RELATIVE_PATH, *citation.FILES.values()):
        assert len(manifest[relative].sha256) == 64


def test_manifest_format_errors(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("file\thash\n")
    with pytest.raises(ValueError, match=re.escape(f"{bad}:1: expected the header")):
        checksums.read_manifest(bad)
    bad.write_text("path\tsha256\tgit_blob\nsome/file\t\t\n")
    with pytest.raises(ValueError, match=re.escape(f"{bad}:2: expected a path and at least one hash")):
        checksums.read_manifest(bad)


def test_checksum_mismatch_names_file_expected_and_actual(tmp_path):
    fixture = DataDirFixture(tmp_path)
    path = fixture.add("corpus/a.txt", "zib zab\n")
    path.write_text("zib zab zob\n")
    store = location.DataDir(fixture.root, fixture.manifest)
    with pytest.raises(ValueError, match="SHA-256 mismatch") as error:
        store.read("corpus/a.txt")
    message = str(error.value)
    assert str(path) in message
    assert checksums.sha256(b"zib zab\n") in message and checksums.sha256(b"zib zab zob\n") in message


def test_git_blob_mismatch(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.expect_blob("corpus/b.txt", b"right\n")
    (fixture.root / "corpus").mkdir()
    (fixture.root / "corpus" / "b.txt").write_text("wrong\n")
    with pytest.raises(ValueError, match="git blob hash mismatch") as error:
        location.DataDir(fixture.root, fixture.manifest).read("corpus/b.txt")
    right, wrong = checksums.git_blob(b"right\n"), checksums.git_blob(b"wrong\n")
    assert f"expected {right}, actual {wrong}" in str(error.value)


def test_file_without_a_manifest_entry_is_refused(tmp_path):
    fixture = DataDirFixture(tmp_path)
    (fixture.root / "stray.txt").write_text("blip\n")
    with pytest.raises(ValueError, match="no checksum recorded"):
        location.DataDir(fixture.root, fixture.manifest).read("stray.txt")


def test_read_returns_none_for_a_missing_file_and_the_sha256_otherwise(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.add("corpus/a.txt", "zib\n")
    store = location.DataDir(fixture.root, fixture.manifest)
    assert store.read("corpus/missing.txt") is None
    source = store.read("corpus/a.txt")
    assert source.text == "zib\n" and source.sha256 == checksums.sha256(b"zib\n")


def test_download_verifies_then_writes_atomically(tmp_path):
    fixture = DataDirFixture(tmp_path)
    content = b"flim flam\n"
    fixture.expect_blob("corpus/c.txt", content)
    remote = tmp_path / "remote.txt"
    remote.write_bytes(content)
    store = location.DataDir(fixture.root, fixture.manifest)
    source = store.download("corpus/c.txt", remote.as_uri())
    assert source.sha256 == checksums.sha256(content)
    assert (fixture.root / "corpus" / "c.txt").read_bytes() == content
    assert no_temporary_files(fixture.root / "corpus")


def test_download_with_wrong_content_writes_nothing(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.expect_blob("corpus/c.txt", b"flim flam\n")
    remote = tmp_path / "remote.txt"
    remote.write_bytes(b"flim flam flum\n")
    with pytest.raises(ValueError, match="git blob hash mismatch"):
        location.DataDir(fixture.root, fixture.manifest).download("corpus/c.txt", remote.as_uri())
    assert not (fixture.root / "corpus" / "c.txt").exists()


def test_download_failure_is_a_download_error(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.expect_blob("corpus/c.txt", b"x")
    with pytest.raises(location.DownloadError, match="download of file://"):
        location.DataDir(fixture.root, fixture.manifest).download(
            "corpus/c.txt", (tmp_path / "nope").as_uri()
        )


def test_write_atomic_leaves_no_partial_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "out.txt"

    def fail(source: str, destination: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(location.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        location.write_atomic(target, b"blip")
    assert not target.exists() and no_temporary_files(target.parent)
