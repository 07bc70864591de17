"""Downloads from a local HTTP server on 127.0.0.1 (never the network): sha256 sidecars, pinned and
published checksums, URL fallbacks, the mirror preferred, the command line."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import threading
from pathlib import Path

import pytest

from labeldp.data import fetch as fetch_mod
from labeldp.data.fetch import ChecksumError, DataMissingError, fetch_dataset, read_sidecar, sidecar_path
from labeldp.data.registry import DatasetSpec, RemoteFile
from tests.data.fetch.mirror import MIRROR, files_under, flip_byte, needs_mirror, part_files


# ======================================================================= local HTTP server


class _Server:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                server.requests.append(self.path)
                super().do_GET()

        handler = functools.partial(Handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    srv = _Server(root)
    yield srv
    srv.close()


PAYLOAD = os.urandom(300_000)


def _spec(*files: RemoteFile, name: str = "toy") -> DatasetSpec:
    return DatasetSpec(name=name, files=files, kind="tabular", num_classes=None, input_shape=None, homepage="-")


def test_download_records_sha256_sidecar_and_checks_it(server, tmp_path, capsys):
    (server.root / "blob.tar.gz").write_bytes(PAYLOAD)
    spec = _spec(RemoteFile("blob.tar.gz", url=server.url("blob.tar.gz")))
    data_dir = tmp_path / "data"
    sha = hashlib.sha256(PAYLOAD).hexdigest()

    # first download: file in place, sha256 recorded and printed
    (dest,) = fetch_dataset(spec, data_dir=data_dir, quiet=True)
    assert dest == data_dir / "toy" / "blob.tar.gz" and dest.read_bytes() == PAYLOAD
    assert read_sidecar(dest) == sha
    assert sidecar_path(dest).read_text() == f"{sha}  blob.tar.gz\n"
    assert sha in capsys.readouterr().err
    assert len(server.requests) == 1

    # second call: verified against the sidecar, not downloaded again
    mtime = dest.stat().st_mtime_ns
    fetch_dataset(spec, data_dir=data_dir, quiet=True)
    assert len(server.requests) == 1 and dest.stat().st_mtime_ns == mtime

    # local tampering: detected, deleted, downloaded again
    flip_byte(dest)
    fetch_dataset(spec, data_dir=data_dir, quiet=True)
    assert "corrupt" in capsys.readouterr().err
    assert dest.read_bytes() == PAYLOAD and len(server.requests) == 2

    # the upstream file changes: the download no longer matches the recorded sha256
    dest.unlink()
    tampered = bytearray(PAYLOAD)
    tampered[10] ^= 1
    (server.root / "blob.tar.gz").write_bytes(bytes(tampered))
    with pytest.raises(ChecksumError) as ei:
        fetch_dataset(spec, data_dir=data_dir, quiet=True)
    assert ei.value.path == server.url("blob.tar.gz")
    msg = str(ei.value)
    assert "blob.tar.gz" in msg and sha in msg and hashlib.sha256(bytes(tampered)).hexdigest() in msg
    assert files_under(data_dir) == ["toy/blob.tar.gz.sha256"]  # no data file, no .part


def test_pinned_sha256_mismatch_leaves_no_file(server, tmp_path):
    (server.root / "blob.bin").write_bytes(PAYLOAD)
    spec = _spec(RemoteFile("blob.bin", url=server.url("blob.bin")))
    with pytest.raises(ChecksumError) as ei:
        fetch_dataset(spec, data_dir=tmp_path / "d", pinned_sha256="ab" * 32, quiet=True)
    assert "ab" * 32 in str(ei.value)
    assert files_under(tmp_path / "d") == []
    # the right pin works and is recorded
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    (dest,) = fetch_dataset(spec, data_dir=tmp_path / "d", pinned_sha256=sha, quiet=True)
    assert dest.read_bytes() == PAYLOAD and read_sidecar(dest) == sha
    # a pin overrides the sidecar: an existing file that fails the pin is replaced / rejected
    with pytest.raises(ChecksumError):
        fetch_dataset(spec, data_dir=tmp_path / "d", pinned_sha256="cd" * 32, quiet=True)
    assert not dest.exists()


def test_published_md5_mismatch_and_match(server, tmp_path):
    (server.root / "a.gz").write_bytes(PAYLOAD)
    wrong = _spec(RemoteFile("a.gz", url=server.url("a.gz"), md5="0" * 32))
    with pytest.raises(ChecksumError) as ei:
        fetch_dataset(wrong, data_dir=tmp_path / "d", quiet=True)
    assert "0" * 32 in str(ei.value) and hashlib.md5(PAYLOAD).hexdigest() in str(ei.value)
    assert files_under(tmp_path / "d") == []
    right = _spec(RemoteFile("a.gz", url=server.url("a.gz"), md5=hashlib.md5(PAYLOAD).hexdigest()))
    (dest,) = fetch_dataset(right, data_dir=tmp_path / "d", quiet=True)
    assert dest.read_bytes() == PAYLOAD
    assert not sidecar_path(dest).exists()  # published checksum: no sidecar needed


def test_download_falls_back_to_next_url(server, tmp_path):
    (server.root / "b.gz").write_bytes(PAYLOAD)
    spec = _spec(
        RemoteFile(
            "b.gz",
            url=server.url("does-not-exist/b.gz"),
            md5=hashlib.md5(PAYLOAD).hexdigest(),
            mirrors=(server.url("b.gz"),),
        )
    )
    (dest,) = fetch_dataset(spec, data_dir=tmp_path, quiet=True)
    assert dest.read_bytes() == PAYLOAD
    assert server.requests == ["/does-not-exist/b.gz", "/b.gz"]


def test_download_failure_everywhere_is_data_missing(server, tmp_path):
    spec = _spec(RemoteFile("c.gz", url=server.url("nope/c.gz")))
    with pytest.raises(DataMissingError) as ei:
        fetch_dataset(spec, data_dir=tmp_path, mirror=tmp_path / "m", quiet=True)
    msg = str(ei.value)
    assert "c.gz" in msg and server.url("nope/c.gz") in msg and "404" in msg
    assert str(tmp_path / "m" / "toy" / "c.gz") in msg
    assert not part_files(tmp_path)


def test_mirror_is_preferred_over_download(server, tmp_path):
    (server.root / "d.bin").write_bytes(b"from server")
    (tmp_path / "m" / "toy").mkdir(parents=True)
    (tmp_path / "m" / "toy" / "d.bin").write_bytes(PAYLOAD)
    spec = _spec(RemoteFile("d.bin", url=server.url("d.bin"), md5=hashlib.md5(PAYLOAD).hexdigest()))
    (dest,) = fetch_dataset(spec, data_dir=tmp_path / "data", mirror=tmp_path / "m", quiet=True)
    assert dest.read_bytes() == PAYLOAD and server.requests == []


def test_cli(server, tmp_path, capsys, monkeypatch):
    (server.root / "e.bin").write_bytes(PAYLOAD)
    spec = _spec(RemoteFile("e.bin", url=server.url("e.bin")), name="criteo_search")
    monkeypatch.setattr(fetch_mod, "get_spec", lambda name: spec)
    assert fetch_mod.main(["criteo_search", "--data-dir", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "criteo_search" / "e.bin") in out
    assert fetch_mod.main(["criteo_search", "--data-dir", str(tmp_path / "x"), "--no-download"]) == 1
    assert "e.bin" in capsys.readouterr().err


@needs_mirror
def test_cli_mirror(tmp_path, capsys):
    rc = fetch_mod.main(["mnist", "--data-dir", str(tmp_path), "--mirror", str(MIRROR), "--no-download", "--quiet"])
    assert rc == 0
    assert len(capsys.readouterr().out.split()) == 4
