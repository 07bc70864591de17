"""Fetching from the mirror: copy, verification, atomicity, the errors that name the fix.

No test touches the network (downloads: test_fetch_download.py; the census extract: test_fetch_census.py).
"""

from __future__ import annotations

import hashlib
import shutil

import pytest

from labeldp.data.fetch import MIRROR_ENV, ChecksumError, DataError, DataMissingError, fetch_dataset, verify_file
from labeldp.data.rawformats import make_standin_raw_files
from labeldp.data.registry import DATASETS
from tests.data.fetch.mirror import MIRROR, files_under, flip_byte, needs_mirror, part_files


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
    assert not part_files(tmp_path)
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


def test_corrupt_mirror_file_raises_and_leaves_nothing(corruptible_mirror, tmp_path):
    mirror = corruptible_mirror
    bad = mirror / "mnist" / "train-images-idx3-ubyte.gz"  # the first file fetched
    flip_byte(bad)
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
    assert files_under(data_dir) == []

    # fix the mirror: the rerun succeeds
    shutil.copyfile(MIRROR / "mnist" / bad.name, bad)
    paths = fetch_dataset("mnist", data_dir=data_dir, mirror=mirror, allow_download=False, quiet=True)
    for p, f in zip(paths, DATASETS["mnist"].files):
        verify_file(p, md5=f.md5)
    assert not part_files(data_dir)


def test_corrupt_later_mirror_file_leaves_no_trace_of_it(corruptible_mirror, tmp_path):
    flip_byte(corruptible_mirror / "mnist" / "t10k-labels-idx1-ubyte.gz", offset=100)
    with pytest.raises(ChecksumError, match="t10k-labels-idx1-ubyte.gz"):
        fetch_dataset("mnist", data_dir=tmp_path / "d", mirror=corruptible_mirror, allow_download=False, quiet=True)
    left = files_under(tmp_path / "d")
    assert not any("t10k-labels" in f for f in left)
    assert not any(".part-" in f for f in left)


def test_corrupt_existing_destination_is_deleted_and_refetched(corruptible_mirror, tmp_path, capsys):
    data_dir = tmp_path / "data"
    fetch_dataset("mnist", data_dir=data_dir, mirror=corruptible_mirror, allow_download=False, quiet=True)
    dest = data_dir / "mnist" / "t10k-labels-idx1-ubyte.gz"
    flip_byte(dest, offset=200)
    capsys.readouterr()
    fetch_dataset("mnist", data_dir=data_dir, mirror=corruptible_mirror, allow_download=False, quiet=True)
    err = capsys.readouterr().err
    assert "corrupt" in err and "t10k-labels-idx1-ubyte.gz" in err
    verify_file(dest, md5=DATASETS["mnist"].file(dest.name).md5)


def test_corrupt_destination_without_source_reports_missing(corruptible_mirror, tmp_path):
    data_dir = tmp_path / "data"
    fetch_dataset("mnist", data_dir=data_dir, mirror=corruptible_mirror, allow_download=False, quiet=True)
    flip_byte(data_dir / "mnist" / "t10k-labels-idx1-ubyte.gz", offset=200)
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
