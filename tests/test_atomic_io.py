"""labeldp.atomic_io: whole content or nothing, no temporary file left, umask permissions."""

from __future__ import annotations

import os
import stat

import pytest

from labeldp import atomic_io


def test_writes_the_whole_content_and_creates_parents(tmp_path):
    path = tmp_path / "a" / "b" / "out.bin"
    assert atomic_io.write_bytes_atomic(path, b"\x00\x01payload") == path
    assert path.read_bytes() == b"\x00\x01payload"
    atomic_io.write_text_atomic(path, "häppy\n")
    assert path.read_text(encoding="utf-8") == "häppy\n"
    assert os.listdir(path.parent) == ["out.bin"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    path.write_text("old")
    real_replace = os.replace

    def failing_replace(src, dst):
        assert ".part" in os.path.basename(src) and os.path.exists(src)  # the temporary is there
        raise OSError("disk full")

    monkeypatch.setattr(atomic_io.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_io.write_text_atomic(path, "new")
    monkeypatch.setattr(atomic_io.os, "replace", real_replace)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["record.json"]


def test_the_file_gets_umask_permissions_not_mkstemps_0600(tmp_path):
    old = os.umask(0o027)
    try:
        path = atomic_io.write_bytes_atomic(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert atomic_io.umask_mode(0o666) == 0o666 & ~old
