"""Fetching: mirror copy, verification, atomicity, local-HTTP download, census errors.

No test touches the network: downloads go to an http.server on 127.0.0.1.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

from labeldp.data import fetch as fetch_mod
from labeldp.data.fetch import (
    MIRROR_ENV,
    ChecksumError,
    DataError,
    DataMissingError,
    fetch_dataset,
    read_sidecar,
    sidecar_path,
    verify_file,
)
from labeldp.data.rawformats import make_standin_raw_files
from labeldp.data.registry import DATASETS, DatasetSpec, RemoteFile

# The checksum-verified mirror lives next to the repository: <repo>/../shared/data.
_DEFAULT_MIRROR = Path(__file__).resolve().parents[3].parent / "shared" / "data"
MIRROR = Path(os.environ.get(MIRROR_ENV) or _DEFAULT_MIRROR)

needs_mirror = pytest.mark.skipif(
    not (MIRROR / "mnist").is_dir(),
    reason=f"shared data mirror not found at {MIRROR} (set {MIRROR_ENV} to the mirror directory)",
)


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch):
    """Tests pass the mirror explicitly; a user's env var must not change their outcome."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)


def _files_under(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def _part_files(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if ".part-" in p.name]


# ============================================================================ verify_file


def test_verify_file(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(b"hello")
    md5 = hashlib.md5(b"hello").hexdigest()
    sha = hashlib.sha256(b"hello").hexdigest()
    assert verify_file(f, md5=md5) == {"md5": md5, "sha256": sha}
    assert verify_file(f, md5=md5.upper(), sha256=sha)["sha256"] == sha
    with pytest.raises(ChecksumError) as ei:
        verify_file(f, sha256="0" * 64)
    msg = str(ei.value)
    assert "x.bin" in msg and "0" * 64 in msg and sha in msg
    assert ei.value.algorithm == "sha256" and ei.value.actual == sha
    with pytest.raises(ValueError):
        verify_file(f)


def test_registry_entries_are_consistent():
    assert set(DATASETS) == {
        "mnist",
        "fashion_mnist",
        "kmnist",
        "cifar10",
        "cifar100",
        "criteo_attribution",
        "criteo_search",
        "census1940",
        "rand_hie",
        "criteo_pctr",
        "movielens_1m",
    }
    for name, spec in DATASETS.items():
        assert spec.name == name
        if spec.raw_format == "statsmodels_package":  # shipped inside a wheel, checked by its module's sha256
            assert not spec.files and spec.task == "regression"
            continue
        if spec.manual:
            assert not spec.files and "IPUMS" in spec.manual_instructions
            continue
        for rf in spec.files:
            assert rf.urls, rf
            assert all(u.startswith(("http://", "https://")) for u in rf.urls)
            for h, n in ((rf.md5, 32), (rf.sha256, 64)):
                assert h is None or (len(h) == n and h == h.lower())
    assert DATASETS["kmnist"].file("train-images-idx3-ubyte.gz").md5 == "bdb82020997e1d708af4cf47b453dcf7"
    assert DATASETS["cifar10"].files[0].md5 == "c58f30108f718f92721af3b95e74349a"
    assert DATASETS["cifar100"].files[0].md5 == "eb9058c3a382ffc7106e4002c42a8d85"
    assert not DATASETS["criteo_search"].files[0].has_published_checksum


# ========================================================================== mirror: MNIST


@needs_mirror
def test_fetch_mnist_from_mirror_then_no_recopy(tmp_path):
    paths = fetch_dataset("mnist", data_dir=tmp_path, mirror=MIRROR, allow_download=False, quiet=True)
    spec = DATASETS["mnist"]
    assert [p.name for p in paths] == list(spec.filenames)
    for p, rf in zip(paths, spec.files):
        assert p.parent == tmp_path / "mnist"
        verify_file(p, md5=rf.md5, sha256=rf.sha256)
    assert not _part_files(tmp_path)
    before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in paths}
    again = fetch_dataset("mnist", data_dir=tmp_path, mirror=MIRROR, allow_download=False, quiet=True)
    assert again == paths
    assert {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in again} == before


@needs_mirror
def test_fetch_uses_env_mirror(tmp_path, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(MIRROR))
    paths = fetch_dataset("mnist", data_dir=tmp_path, allow_download=False, quiet=True)
    assert len(paths) == 4 and all(p.is_file() for p in paths)


@pytest.fixture
def corruptible_mirror(tmp_path):
    """A private copy of the MNIST mirror that tests may damage."""
    if not (MIRROR / "mnist").is_dir():
        pytest.skip(f"shared data mirror not found at {MIRROR}")
    mirror = tmp_path / "mirror"
    shutil.copytree(MIRROR / "mnist", mirror / "mnist")
    for p in (mirror / "mnist").iterdir():
        p.chmod(0o644)
    return mirror


def _flip_byte(path: Path, offset: int = 1000) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_corrupt_mirror_file_raises_and_leaves_nothing(corruptible_mirror, tmp_path):
    mirror = corruptible_mirror
    bad = mirror / "mnist" / "train-images-idx3-ubyte.gz"  # the first file fetched
    _flip_byte(bad)
    actual_sha = hashlib.sha256(bad.read_bytes()).hexdigest()
    data_dir = tmp_path / "data"
    with pytest.raises(ChecksumError) as ei:
        fetch_dataset("mnist", data_dir=data_dir, mirror=mirror, allow_download=False, quiet=True)
    rf = DATASETS["mnist"].file("train-images-idx3-ubyte.gz")
    msg = str(ei.value)
    assert "train-images-idx3-ubyte.gz" in msg
    actual_md5 = hashlib.md5(bad.read_bytes()).hexdigest()
    assert rf.md5 in msg and actual_md5 in msg  # the published (torchvision) md5 ...
    assert rf.sha256 in msg and actual_sha in msg  # ... and the pinned sha256
    assert "mirror" in msg.lower()
    assert ei.value.algorithm == "md5" and ei.value.expected == rf.md5 and ei.value.actual == actual_md5
    # nothing at all was left behind, not even a temporary .part file
    assert _files_under(data_dir) == []

    # fix the mirror: the rerun succeeds
    shutil.copyfile(MIRROR / "mnist" / bad.name, bad)
    paths = fetch_dataset("mnist", data_dir=data_dir, mirror=mirror, allow_download=False, quiet=True)
    for p, f in zip(paths, DATASETS["mnist"].files):
        verify_file(p, md5=f.md5)
    assert not _part_files(data_dir)


def test_corrupt_later_mirror_file_leaves_no_trace_of_it(corruptible_mirror, tmp_path):
    _flip_byte(corruptible_mirror / "mnist" / "t10k-labels-idx1-ubyte.gz", offset=100)
    with pytest.raises(ChecksumError, match="t10k-labels-idx1-ubyte.gz"):
        fetch_dataset("mnist", data_dir=tmp_path / "d", mirror=corruptible_mirror, allow_download=False, quiet=True)
    left = _files_under(tmp_path / "d")
    assert not any("t10k-labels" in f for f in left)
    assert not any(".part-" in f for f in left)


def test_corrupt_existing_destination_is_deleted_and_refetched(corruptible_mirror, tmp_path, capsys):
    data_dir = tmp_path / "data"
    fetch_dataset("mnist", data_dir=data_dir, mirror=corruptible_mirror, allow_download=False, quiet=True)
    dest = data_dir / "mnist" / "t10k-labels-idx1-ubyte.gz"
    _flip_byte(dest, offset=200)
    capsys.readouterr()
    fetch_dataset("mnist", data_dir=data_dir, mirror=corruptible_mirror, allow_download=False, quiet=True)
    err = capsys.readouterr().err
    assert "corrupt" in err and "t10k-labels-idx1-ubyte.gz" in err
    verify_file(dest, md5=DATASETS["mnist"].file(dest.name).md5)


def test_corrupt_destination_without_source_reports_missing(corruptible_mirror, tmp_path):
    data_dir = tmp_path / "data"
    fetch_dataset("mnist", data_dir=data_dir, mirror=corruptible_mirror, allow_download=False, quiet=True)
    _flip_byte(data_dir / "mnist" / "t10k-labels-idx1-ubyte.gz", offset=200)
    with pytest.raises(DataMissingError, match="t10k-labels-idx1-ubyte.gz"):
        fetch_dataset("mnist", data_dir=data_dir, mirror=tmp_path / "empty", allow_download=False, quiet=True)
    assert not (data_dir / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()


@needs_mirror
def test_missing_file_without_download_names_file_mirror_and_url(tmp_path):
    with pytest.raises(DataMissingError) as ei:
        fetch_dataset("kmnist", data_dir=tmp_path, mirror=MIRROR, allow_download=False, quiet=True)
    msg = str(ei.value)
    assert "train-images-idx3-ubyte.gz" in msg
    assert str(MIRROR / "kmnist" / "train-images-idx3-ubyte.gz") in msg
    assert "http://codh.rois.ac.jp/kmnist/dataset/kmnist/train-images-idx3-ubyte.gz" in msg
    # the three files the mirror has were fetched and verified anyway
    assert sorted(p.name for p in (tmp_path / "kmnist").iterdir()) == [
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
    ]


def test_no_mirror_no_download_lists_every_missing_file(tmp_path):
    with pytest.raises(DataMissingError) as ei:
        fetch_dataset("mnist", data_dir=tmp_path, allow_download=False, quiet=True)
    msg = str(ei.value)
    for f in DATASETS["mnist"].filenames:
        assert f in msg
    assert MIRROR_ENV in msg
    assert "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz" in msg


def test_fetch_refuses_standin_directory(tmp_path):
    make_standin_raw_files("kmnist", tmp_path / "kmnist", n_train=20, n_test=10, seed=0)
    with pytest.raises(DataError, match="SYNTHETIC"):
        fetch_dataset("kmnist", data_dir=tmp_path, allow_download=False, quiet=True)


def test_unknown_dataset(tmp_path):
    with pytest.raises(KeyError, match="known datasets"):
        fetch_dataset("imagenet", data_dir=tmp_path)


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
    _flip_byte(dest)
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
    assert _files_under(data_dir) == ["toy/blob.tar.gz.sha256"]  # no data file, no .part


def test_pinned_sha256_mismatch_leaves_no_file(server, tmp_path):
    (server.root / "blob.bin").write_bytes(PAYLOAD)
    spec = _spec(RemoteFile("blob.bin", url=server.url("blob.bin")))
    with pytest.raises(ChecksumError) as ei:
        fetch_dataset(spec, data_dir=tmp_path / "d", pinned_sha256="ab" * 32, quiet=True)
    assert "ab" * 32 in str(ei.value)
    assert _files_under(tmp_path / "d") == []
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
    assert _files_under(tmp_path / "d") == []
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
    assert not _part_files(tmp_path)


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


# ================================================================================ census


def test_missing_census_explains_what_to_download(tmp_path):
    target = tmp_path / "ipums" / "usa_00001.csv.gz"
    with pytest.raises(DataMissingError) as ei:
        fetch_dataset("census1940", data_dir=tmp_path / "data", census_path=target)
    msg = str(ei.value)
    assert str(target) in msg
    assert "IPUMS" in msg and "WKSWORK1" in msg
    assert "1940" in msg and "us1940b" in msg and "csv" in msg.lower()


def test_missing_census_default_path(tmp_path):
    with pytest.raises(DataMissingError) as ei:
        fetch_dataset("census1940", data_dir=tmp_path)
    assert str(tmp_path / "census1940") in str(ei.value)


def test_census_csv_extract_is_accepted_and_checked(tmp_path, capsys):
    good = tmp_path / "usa_00001.csv.gz"
    with gzip.open(good, "wt") as fh:
        fh.write('"YEAR","SERIAL","AGE","SEX","WKSWORK1"\n1940,1,30,1,52\n')
    assert fetch_dataset("census1940", data_dir=tmp_path, census_path=good, quiet=True) == [good]
    assert "lacks the default census features" in capsys.readouterr().err

    sha = hashlib.sha256(good.read_bytes()).hexdigest()
    assert fetch_dataset("census1940", data_dir=tmp_path, census_path=good, pinned_sha256=sha, quiet=True) == [good]
    with pytest.raises(ChecksumError):
        fetch_dataset("census1940", data_dir=tmp_path, census_path=good, pinned_sha256="0" * 64, quiet=True)
    assert good.exists()  # the user's own extract is never deleted

    bad = tmp_path / "usa_00002.csv"
    bad.write_text("YEAR,SERIAL,AGE\n1940,1,30\n")
    with pytest.raises(DataMissingError, match="WKSWORK1"):
        fetch_dataset("census1940", data_dir=tmp_path, census_path=bad, quiet=True)


def test_census_fixed_width_needs_ddi(tmp_path):
    dat = tmp_path / "usa_00003.dat.gz"
    with gzip.open(dat, "wb") as fh:
        fh.write(b"194000000001 30 152\n")
    with pytest.raises(DataMissingError, match="DDI"):
        fetch_dataset("census1940", data_dir=tmp_path, census_path=dat, quiet=True)
    ddi = tmp_path / "usa_00003.xml"
    ddi.write_text('<codeBook><dataDscr><var ID="WKSWORK1" name="WKSWORK1"/></dataDscr></codeBook>')
    assert fetch_dataset("census1940", data_dir=tmp_path, census_path=dat, quiet=True) == [dat, ddi]
