"""CIFAR-100 python archive (labeldp/data/rawformats/cifar100.py): round trip, the official layout and
pickle dialect, the fine labels, and bad input (001 Table 2's data)."""

from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np
import pytest

from labeldp.data.rawformats import CifarFormatError, write_cifar10_tar
from labeldp.data.rawformats.cifar10_writer import cifar_batch_pickle
from labeldp.data.rawformats.cifar100 import (
    CIFAR100_COARSE_LABEL_NAMES,
    CIFAR100_COARSE_OF_FINE,
    CIFAR100_DIRNAME,
    CIFAR100_FINE_LABEL_NAMES,
    CIFAR100_META_MEMBER,
    CIFAR100_TEST_MEMBER,
    CIFAR100_TRAIN_MEMBER,
    read_cifar100_tar,
    write_cifar100_tar,
)


def _tiny_cifar100(n_train=250, n_test=40, seed=0):
    """Random images; the training labels cover every fine class 0..99 (most above the 20 superclasses)."""
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8),
        rng.permutation(np.arange(n_train) % 100),
        rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8),
        rng.integers(0, 100, n_test),
    )


def _write_members(path, members: dict[str, bytes]):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_reader_round_trips_the_writers_archive(tmp_path):
    x_tr, y_tr, x_te, y_te = _tiny_cifar100()
    path = write_cifar100_tar(tmp_path / "cifar-100-python.tar.gz", x_tr, y_tr, x_te, y_te)
    out = read_cifar100_tar(path)
    np.testing.assert_array_equal(out.x_train, x_tr)
    np.testing.assert_array_equal(out.y_train, y_tr)
    np.testing.assert_array_equal(out.x_test, x_te)
    np.testing.assert_array_equal(out.y_test, y_te)
    assert out.x_train.dtype == np.uint8 and out.y_train.dtype == np.int64
    # the labels read are the 100 fine classes, not the 20 superclasses
    assert set(out.y_train.tolist()) == set(range(100))
    # deterministic: the same arrays give the same bytes
    again = write_cifar100_tar(tmp_path / "again.tar.gz", x_tr, y_tr, x_te, y_te)
    assert again.read_bytes() == path.read_bytes()


def test_writer_uses_the_official_layout_and_pickle_dialect(tmp_path):
    x_tr, y_tr, x_te, y_te = _tiny_cifar100(n_train=7, n_test=3)
    path = write_cifar100_tar(tmp_path / "c.tar.gz", x_tr, y_tr, x_te, y_te)
    with tarfile.open(path, "r:gz") as tar:
        names = set(tar.getnames())
        train_raw = tar.extractfile(CIFAR100_TRAIN_MEMBER).read()
        meta_raw = tar.extractfile(CIFAR100_META_MEMBER).read()
    assert names == {CIFAR100_DIRNAME, CIFAR100_TRAIN_MEMBER, CIFAR100_TEST_MEMBER, CIFAR100_META_MEMBER}
    assert train_raw[:2] == b"\x80\x02"  # pickle protocol 2, as the official (Python 2) files
    entry = pickle.loads(train_raw, encoding="bytes")
    assert set(entry) == {b"data", b"fine_labels", b"coarse_labels", b"batch_label", b"filenames"}
    assert entry[b"data"].shape == (7, 3072) and entry[b"data"].dtype == np.uint8
    np.testing.assert_array_equal(entry[b"data"][0, :1024], x_tr[0, :, :, 0].reshape(-1))  # red plane first
    assert entry[b"fine_labels"] == y_tr.tolist()
    assert entry[b"coarse_labels"] == [CIFAR100_COARSE_OF_FINE[v] for v in y_tr]
    meta = pickle.loads(meta_raw, encoding="bytes")
    assert [n.decode() for n in meta[b"fine_label_names"]] == list(CIFAR100_FINE_LABEL_NAMES)
    assert [n.decode() for n in meta[b"coarse_label_names"]] == list(CIFAR100_COARSE_LABEL_NAMES)


def test_class_names_and_superclasses_are_the_official_structure():
    assert len(set(CIFAR100_FINE_LABEL_NAMES)) == 100 and list(CIFAR100_FINE_LABEL_NAMES) == sorted(
        CIFAR100_FINE_LABEL_NAMES
    )
    assert len(set(CIFAR100_COARSE_LABEL_NAMES)) == 20
    assert list(CIFAR100_COARSE_LABEL_NAMES) == sorted(CIFAR100_COARSE_LABEL_NAMES, key=str.lower)
    assert len(CIFAR100_COARSE_OF_FINE) == 100
    assert np.bincount(CIFAR100_COARSE_OF_FINE, minlength=20).tolist() == [5] * 20  # five classes each
    fine = dict(zip(CIFAR100_FINE_LABEL_NAMES, CIFAR100_COARSE_OF_FINE))
    assert CIFAR100_COARSE_LABEL_NAMES[fine["apple"]] == "fruit_and_vegetables"
    assert CIFAR100_COARSE_LABEL_NAMES[fine["whale"]] == "aquatic_mammals"
    assert CIFAR100_COARSE_LABEL_NAMES[fine["tractor"]] == "vehicles_2"


def test_writer_refuses_labels_outside_the_fine_classes(tmp_path):
    x_tr, y_tr, x_te, y_te = _tiny_cifar100(n_train=5, n_test=2)
    with pytest.raises(ValueError, match="0..99"):
        write_cifar100_tar(tmp_path / "c.tar.gz", x_tr, np.array([0, 1, 2, 3, 100]), x_te, y_te)
    with pytest.raises(ValueError, match="uint8"):
        write_cifar100_tar(tmp_path / "c.tar.gz", x_tr.astype(np.float32), y_tr, x_te, y_te)


def test_missing_file_says_how_to_get_it(tmp_path):
    with pytest.raises(ValueError, match=r"does not exist.*python -m labeldp\.data\.fetch cifar100"):
        read_cifar100_tar(tmp_path / "cifar-100-python.tar.gz")


def test_a_cifar10_archive_is_refused_naming_the_cifar100_layout(tmp_path):
    x_tr, _, x_te, _ = _tiny_cifar100(n_train=10, n_test=3)
    path = write_cifar10_tar(tmp_path / "cifar-100-python.tar.gz", x_tr, np.arange(10) % 10, x_te, np.arange(3))
    with pytest.raises(CifarFormatError, match="missing members") as excinfo:
        read_cifar100_tar(path)
    msg = str(excinfo.value)
    assert CIFAR100_TRAIN_MEMBER in msg and "cifar-100-python.tar.gz" in msg and "labeldp.data.fetch cifar100" in msg
    (tmp_path / "junk.tar.gz").write_bytes(b"junk")
    with pytest.raises(CifarFormatError, match="not a readable tar"):
        read_cifar100_tar(tmp_path / "junk.tar.gz")


def test_batches_without_fine_labels_are_refused(tmp_path):
    # a batch in the official dialect whose labels are CIFAR-10's key and the superclasses only
    coarse_only = cifar_batch_pickle(
        np.zeros((2, 32, 32, 3), np.uint8),
        np.array([0, 1]),
        "training batch 1 of 1",
        "train",
        label_fields={"labels": np.array([0, 1]), "coarse_labels": np.array([0, 1])},
    )
    path = _write_members(
        tmp_path / "c.tar.gz", {CIFAR100_TRAIN_MEMBER: coarse_only, CIFAR100_TEST_MEMBER: coarse_only}
    )
    with pytest.raises(CifarFormatError, match="lacks 'data' or 'fine_labels'"):
        read_cifar100_tar(path)


def test_member_md5_is_checked(tmp_path):
    path = write_cifar100_tar(tmp_path / "c.tar.gz", *_tiny_cifar100(n_train=5, n_test=2))
    with pytest.raises(CifarFormatError, match=f"{CIFAR100_TEST_MEMBER} has md5"):
        read_cifar100_tar(path, member_md5={CIFAR100_TEST_MEMBER: "0" * 32})
