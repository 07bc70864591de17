"""Raw-format parsers/writers, synthetic stand-ins, and preparation into .npz."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import pickle
import pickletools
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest

from labeldp.data import prepare as prepare_mod
from labeldp.data.fetch import MIRROR_ENV, ChecksumError, DataMissingError, fetch_dataset
from labeldp.data.prepare import SOURCE_OFFICIAL, SOURCE_STANDIN, load_prepared, prepare_image_dataset
from labeldp.data.rawformats import (
    CIFAR10_TEST_MEMBER,
    CIFAR10_TRAIN_MEMBERS,
    STANDIN_MARKER,
    CifarFormatError,
    IDXFormatError,
    make_standin_raw_files,
    read_cifar10_tar,
    read_idx,
    write_cifar10_tar,
    write_idx,
)
from labeldp.data.registry import DATASETS

_DEFAULT_MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
MIRROR = Path(os.environ.get(MIRROR_ENV) or _DEFAULT_MIRROR)


def _need(*parts: str) -> Path:
    path = MIRROR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not in the shared data mirror (set {MIRROR_ENV})")
    return path


# =================================================================================== IDX


@pytest.mark.parametrize("suffix", [".gz", ""])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_idx_roundtrip(tmp_path, suffix, dtype):
    rng = np.random.default_rng(0)
    arr = (rng.normal(size=(5, 4, 3)) * 50).astype(dtype)
    path = write_idx(tmp_path / f"a-idx3{suffix}", arr)
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == (suffix == ".gz")


def test_idx_header_is_the_mnist_one(tmp_path):
    imgs = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    labels = np.array([5, 0], dtype=np.uint8)
    pi = write_idx(tmp_path / "i.gz", imgs)
    pl = write_idx(tmp_path / "l", labels)
    raw = gzip.decompress(pi.read_bytes())
    assert struct.unpack(">iiii", raw[:16]) == (2051, 2, 28, 28)
    assert struct.unpack(">ii", pl.read_bytes()[:8]) == (2049, 2)
    # deterministic bytes (gzip mtime 0)
    assert write_idx(tmp_path / "j.gz", imgs).read_bytes() == pi.read_bytes()


def test_idx_bad_magic_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.gz"
    bad.write_bytes(gzip.compress(struct.pack(">iii", 1234, 1, 1) + b"\x00"))
    with pytest.raises(IDXFormatError, match=r"magic number 1234.*2049.*2051"):
        read_idx(bad)
    text = tmp_path / "text"
    text.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(IDXFormatError, match="magic"):
        read_idx(text)


def test_idx_kind_truncation_and_trailing_data(tmp_path):
    labels = write_idx(tmp_path / "l.gz", np.zeros(10, dtype=np.uint8))
    with pytest.raises(IDXFormatError, match="expected 2051"):
        read_idx(labels, expected_magic=2051)
    raw = struct.pack(">iiii", 2051, 3, 2, 2) + bytes(11)
    (tmp_path / "short").write_bytes(raw)
    with pytest.raises(IDXFormatError, match="truncated"):
        read_idx(tmp_path / "short")
    (tmp_path / "long").write_bytes(raw + bytes(5))
    with pytest.raises(IDXFormatError, match="trailing"):
        read_idx(tmp_path / "long")
    (tmp_path / "tiny").write_bytes(b"\x00\x00")
    with pytest.raises(IDXFormatError, match="too short"):
        read_idx(tmp_path / "tiny")
    (tmp_path / "broken.gz").write_bytes(gzip.compress(raw + bytes(1))[:-12])
    with pytest.raises(IDXFormatError):
        read_idx(tmp_path / "broken.gz")


# ========================================================================= real MNIST family


def test_real_mnist_parses():
    d = _need("mnist")
    x_train = read_idx(d / "train-images-idx3-ubyte.gz", expected_magic=2051)
    y_train = read_idx(d / "train-labels-idx1-ubyte.gz", expected_magic=2049)
    x_test = read_idx(d / "t10k-images-idx3-ubyte.gz")
    y_test = read_idx(d / "t10k-labels-idx1-ubyte.gz")
    assert x_train.shape == (60000, 28, 28) and x_train.dtype == np.uint8
    assert y_train.shape == (60000,) and x_test.shape == (10000, 28, 28) and y_test.shape == (10000,)
    assert int(y_train[0]) == 5 and int(y_test[0]) == 7
    for y in (y_train, y_test):
        assert set(np.unique(y).tolist()) == set(range(10))
    assert x_train.max() == 255 and x_train.min() == 0


def test_real_fashion_mnist_parses():
    d = _need("fashion_mnist")
    x_train = read_idx(d / "train-images-idx3-ubyte.gz", expected_magic=2051)
    y_train = read_idx(d / "train-labels-idx1-ubyte.gz", expected_magic=2049)
    x_test = read_idx(d / "t10k-images-idx3-ubyte.gz", expected_magic=2051)
    y_test = read_idx(d / "t10k-labels-idx1-ubyte.gz", expected_magic=2049)
    assert x_train.shape == (60000, 28, 28) and x_test.shape == (10000, 28, 28)
    assert set(np.unique(y_train).tolist()) == set(range(10)) == set(np.unique(y_test).tolist())
    assert np.bincount(y_train).tolist() == [6000] * 10  # Fashion-MNIST is balanced
    assert int(y_train[0]) == 9  # the first training image is an ankle boot


def test_real_kmnist_test_split_and_train_labels_parse():
    d = _need("kmnist")
    x_test = read_idx(d / "t10k-images-idx3-ubyte.gz", expected_magic=2051)
    y_test = read_idx(d / "t10k-labels-idx1-ubyte.gz", expected_magic=2049)
    y_train = read_idx(d / "train-labels-idx1-ubyte.gz", expected_magic=2049)
    assert x_test.shape == (10000, 28, 28) and y_test.shape == (10000,)
    assert y_train.shape == (60000,)
    assert set(np.unique(y_test).tolist()) == set(range(10))


# ============================================================================== CIFAR-10


def _tiny_cifar(n_train=13, n_test=4, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8),
        rng.integers(0, 10, n_train),
        rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8),
        rng.integers(0, 10, n_test),
    )


def test_cifar_tar_roundtrip(tmp_path):
    x_tr, y_tr, x_te, y_te = _tiny_cifar()
    path = write_cifar10_tar(tmp_path / "cifar-10-python.tar.gz", x_tr, y_tr, x_te, y_te)
    out = read_cifar10_tar(path)
    np.testing.assert_array_equal(out.x_train, x_tr)
    np.testing.assert_array_equal(out.y_train, y_tr)
    np.testing.assert_array_equal(out.x_test, x_te)
    np.testing.assert_array_equal(out.y_test, y_te)
    assert out.y_train.dtype == np.int64 and out.x_train.dtype == np.uint8
    # deterministic
    again = write_cifar10_tar(tmp_path / "again.tar.gz", x_tr, y_tr, x_te, y_te)
    assert again.read_bytes() == path.read_bytes()


def test_cifar_writer_uses_the_official_layout_and_pickle_dialect(tmp_path):
    x_tr, y_tr, x_te, y_te = _tiny_cifar(n_train=10, n_test=3)
    path = write_cifar10_tar(tmp_path / "c.tar.gz", x_tr, y_tr, x_te, y_te)
    with tarfile.open(path, "r:gz") as tar:
        names = tar.getnames()
        raw = tar.extractfile(CIFAR10_TRAIN_MEMBERS[0]).read()
    assert set(CIFAR10_TRAIN_MEMBERS) | {CIFAR10_TEST_MEMBER, "cifar-10-batches-py/batches.meta"} <= set(names)
    # Python 2 style: protocol 2, str as BINSTRING, numpy.core.multiarray._reconstruct
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(raw)]
    assert ops[0] == ("PROTO", 2)
    assert ("GLOBAL", "numpy.core.multiarray _reconstruct") in ops
    assert ("SHORT_BINSTRING", "data") in ops  # pickletools shows py2 str payloads as text
    # with encoding='bytes' the keys are bytes, as with the official files
    entry = pickle.loads(raw, encoding="bytes")
    assert set(entry) == {b"data", b"labels", b"batch_label", b"filenames"}
    assert entry[b"data"].shape == (2, 3072) and entry[b"data"].dtype == np.uint8
    # rows are CHW: the first 1024 values are the red channel in row-major order
    np.testing.assert_array_equal(entry[b"data"][0, :1024], x_tr[0, :, :, 0].reshape(-1))
    np.testing.assert_array_equal(entry[b"data"][0, 1024:2048], x_tr[0, :, :, 1].reshape(-1))


def test_cifar_reader_refuses_foreign_globals(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    evil = pickle.dumps({b"data": Evil(), b"labels": []}, protocol=2)
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name in CIFAR10_TRAIN_MEMBERS + (CIFAR10_TEST_MEMBER,):
            info = tarfile.TarInfo(name)
            info.size = len(evil)
            tar.addfile(info, io.BytesIO(evil))
    with pytest.raises(CifarFormatError, match="refusing to load global"):
        read_cifar10_tar(path)
    assert not (tmp_path / "pwned").exists()


def test_cifar_reader_layout_errors_and_member_md5(tmp_path):
    path = tmp_path / "not-cifar.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("something/else")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(CifarFormatError, match="missing members"):
        read_cifar10_tar(path)
    (tmp_path / "junk.tar.gz").write_bytes(b"junk")
    with pytest.raises(CifarFormatError, match="not a readable tar"):
        read_cifar10_tar(tmp_path / "junk.tar.gz")
    good = write_cifar10_tar(tmp_path / "c.tar.gz", *_tiny_cifar())
    with pytest.raises(CifarFormatError, match="md5"):
        read_cifar10_tar(good, member_md5={CIFAR10_TEST_MEMBER: "0" * 32})


# ===================================================================== synthetic stand-ins


@pytest.mark.parametrize("name,shape", [("cifar10", (32, 32, 3)), ("kmnist", (28, 28, 1))])
def test_standin_files_are_flagged_and_parse(tmp_path, name, shape):
    paths = make_standin_raw_files(name, tmp_path / name, n_train=37, n_test=11, seed=3)
    assert [p.name for p in paths] == list(DATASETS[name].filenames)
    marker = json.loads((tmp_path / name / STANDIN_MARKER).read_text())
    assert marker["synthetic"] is True and marker["dataset"] == name and marker["seed"] == 3
    out = tmp_path / f"{name}.npz"
    prepare_image_dataset(name, raw_dir=tmp_path / name, out_path=out)
    data = load_prepared(out)
    assert data.source == SOURCE_STANDIN and data.is_synthetic
    assert data.x_train.shape == (37,) + shape and data.x_test.shape == (11,) + shape
    assert data.x_train.dtype == np.uint8 and data.y_train.dtype == np.int64
    assert set(np.unique(data.y_train).tolist()) == set(range(10))
    assert data.metadata["standin_marker"]["synthetic"] is True
    # same seed -> same bytes; different seed -> different data
    again = make_standin_raw_files(name, tmp_path / "again", n_train=37, n_test=11, seed=3)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]
    other = make_standin_raw_files(name, tmp_path / "other", n_train=37, n_test=11, seed=4)
    assert [p.read_bytes() for p in other] != [p.read_bytes() for p in paths]


def test_standin_refused_for_datasets_with_real_files(tmp_path):
    with pytest.raises(ValueError, match="stand-in"):
        make_standin_raw_files("mnist", tmp_path, n_train=5, n_test=5, seed=0)


def test_standin_refuses_to_overwrite_real_files(tmp_path):
    src = _need("kmnist", "t10k-labels-idx1-ubyte.gz")
    (tmp_path / "kmnist").mkdir()
    (tmp_path / "kmnist" / src.name).write_bytes(src.read_bytes())
    with pytest.raises(FileExistsError):
        make_standin_raw_files("kmnist", tmp_path / "kmnist", n_train=5, n_test=5, seed=0)


def test_kmnist_standin_subset_is_first_n_in_order(tmp_path):
    make_standin_raw_files("kmnist", tmp_path / "raw", n_train=50, n_test=20, seed=0)
    prepare_image_dataset("kmnist", raw_dir=tmp_path / "raw", out_path=tmp_path / "full.npz")
    prepare_image_dataset("kmnist", raw_dir=tmp_path / "raw", out_path=tmp_path / "sub.npz", subset=7)
    full, sub = load_prepared(tmp_path / "full.npz"), load_prepared(tmp_path / "sub.npz")
    assert sub.subset == 7 and full.subset is None
    for a in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(sub, a), getattr(full, a)[:7])
    raw_labels = read_idx(tmp_path / "raw" / "train-labels-idx1-ubyte.gz")
    np.testing.assert_array_equal(full.y_train, raw_labels)


def test_cifar_standin_prepare_matches_parser(tmp_path):
    make_standin_raw_files("cifar10", tmp_path / "raw", n_train=23, n_test=9, seed=1)
    prepare_image_dataset("cifar10", raw_dir=tmp_path / "raw", out_path=tmp_path / "c.npz", subset=5)
    data = load_prepared(tmp_path / "c.npz")
    raw = read_cifar10_tar(tmp_path / "raw" / "cifar-10-python.tar.gz")
    np.testing.assert_array_equal(data.x_train, raw.x_train[:5])
    np.testing.assert_array_equal(data.y_test, raw.y_test[:5])
    assert data.num_classes == 10 and data.name == "cifar10"


# ============================================================================== prepare


@pytest.fixture(scope="module")
def mnist_raw(tmp_path_factory):
    _need("mnist")
    data_dir = tmp_path_factory.mktemp("data")
    fetch_dataset("mnist", data_dir=data_dir, mirror=MIRROR, allow_download=False, quiet=True)
    return data_dir / "mnist"


def test_prepare_real_mnist_subset(mnist_raw, tmp_path):
    out = prepare_image_dataset("mnist", raw_dir=mnist_raw, out_path=tmp_path / "m.npz", subset=100)
    data = load_prepared(out)
    assert data.source == SOURCE_OFFICIAL and not data.is_synthetic
    assert data.name == "mnist" and data.subset == 100 and data.num_classes == 10
    assert data.x_train.shape == (100, 28, 28, 1) and data.x_test.shape == (100, 28, 28, 1)
    x = read_idx(mnist_raw / "train-images-idx3-ubyte.gz")
    y = read_idx(mnist_raw / "train-labels-idx1-ubyte.gz")
    np.testing.assert_array_equal(data.x_train[..., 0], x[:100])
    np.testing.assert_array_equal(data.y_train, y[:100].astype(np.int64))
    assert int(data.y_train[0]) == 5
    meta = data.metadata
    for f in DATASETS["mnist"].files:
        assert meta["raw_sha256"][f.filename] == f.sha256
    assert meta["n_train_full"] == 60000 and meta["n_test_full"] == 10000
    assert not [p for p in tmp_path.iterdir() if ".part-" in p.name]


def test_prepare_real_mnist_full(mnist_raw, tmp_path):
    data = load_prepared(prepare_image_dataset("mnist", raw_dir=mnist_raw, out_path=tmp_path / "m.npz"))
    assert data.x_train.shape == (60000, 28, 28, 1) and data.y_test.shape == (10000,)
    assert data.subset is None and data.y_train.dtype == np.int64


def test_prepare_rejects_unverified_raw_files(mnist_raw, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for f in mnist_raw.iterdir():
        (raw / f.name).write_bytes(f.read_bytes())
    y = read_idx(raw / "t10k-labels-idx1-ubyte.gz")
    write_idx(raw / "t10k-labels-idx1-ubyte.gz", (y + 1) % 10)  # well-formed but not official
    with pytest.raises(ChecksumError, match="STANDIN_SYNTHETIC"):
        prepare_image_dataset("mnist", raw_dir=raw, out_path=tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


def test_prepare_errors(tmp_path):
    with pytest.raises(DataMissingError):
        prepare_image_dataset("mnist", raw_dir=tmp_path / "nowhere", out_path=tmp_path / "m.npz")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataMissingError, match="train-images-idx3-ubyte.gz"):
        prepare_image_dataset("mnist", raw_dir=tmp_path / "empty", out_path=tmp_path / "m.npz")
    with pytest.raises(NotImplementedError):
        prepare_image_dataset("criteo_search", raw_dir=tmp_path, out_path=tmp_path / "c.npz")
    with pytest.raises(ValueError):
        prepare_image_dataset("mnist", raw_dir=tmp_path, out_path=tmp_path / "m.npz", subset=0)


def test_prepare_cli(tmp_path, capsys):
    make_standin_raw_files("kmnist", tmp_path / "raw", n_train=30, n_test=10, seed=0)
    out = tmp_path / "k.npz"
    rc = prepare_mod.main(["kmnist", "--raw-dir", str(tmp_path / "raw"), "--out", str(out), "--subset", "8"])
    assert rc == 0
    assert "SYNTHETIC" in capsys.readouterr().out
    assert load_prepared(out).x_train.shape == (8, 28, 28, 1)
    assert hashlib.sha256(out.read_bytes()).hexdigest()  # a readable regular file
