"""The CIFAR-100 data source (labeldp/data/sources/cifar100.py; 001 Table 2): its registry entry, the
SYNTHETIC stand-in through preparation, and the member checksums of the official archive."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from labeldp.data.prepare import SOURCE_STANDIN, load_prepared, prepare_image_dataset
from labeldp.data.rawformats import STANDIN_MARKER, CifarFormatError, make_standin_raw_files
from labeldp.data.rawformats.cifar100 import CIFAR100_TEST_MEMBER, CIFAR100_TRAIN_MEMBER, read_cifar100_tar
from labeldp.data.registry import DATASETS, source_module
from labeldp.data.sources import cifar100


def test_registry_discovers_cifar100_with_the_official_file():
    spec = DATASETS["cifar100"]
    assert source_module("cifar100") is cifar100 and spec is cifar100.SPEC
    assert spec.kind == "image" and spec.num_classes == 100 and spec.input_shape == (32, 32, 3)
    assert spec.train_examples == 50000 and spec.model == "cifar_cnn" and spec.standin_allowed
    (archive,) = spec.files
    assert archive.filename == "cifar-100-python.tar.gz"
    assert archive.url == "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    assert archive.md5 == "eb9058c3a382ffc7106e4002c42a8d85"
    assert {CIFAR100_TRAIN_MEMBER, CIFAR100_TEST_MEMBER} <= set(spec.members)


def test_standin_is_marked_and_prepares_to_the_parsers_arrays(tmp_path):
    raw = tmp_path / "raw"
    paths = make_standin_raw_files("cifar100", raw, n_train=300, n_test=120, seed=2)
    assert [p.name for p in paths] == ["cifar-100-python.tar.gz"]
    marker = json.loads((raw / STANDIN_MARKER).read_text())
    assert marker["synthetic"] is True and marker["dataset"] == "cifar100" and marker["n_train"] == 300
    out = prepare_image_dataset("cifar100", raw_dir=raw, out_path=tmp_path / "c.npz", subset=200)
    data = load_prepared(out)
    assert data.source == SOURCE_STANDIN and data.is_synthetic and data.name == "cifar100"
    assert data.num_classes == 100 and data.x_train.shape == (200, 32, 32, 3) and data.x_test.shape == (120, 32, 32, 3)
    parsed = read_cifar100_tar(paths[0])
    np.testing.assert_array_equal(data.x_train, parsed.x_train[:200])
    np.testing.assert_array_equal(data.y_test, parsed.y_test)
    # every fine class appears, each equally often in the stand-in's full training split
    assert np.bincount(parsed.y_train, minlength=100).tolist() == [3] * 100
    # seeded: the same seed gives the same bytes, another seed other data
    again = make_standin_raw_files("cifar100", tmp_path / "again", n_train=300, n_test=120, seed=2)
    other = make_standin_raw_files("cifar100", tmp_path / "other", n_train=300, n_test=120, seed=3)
    assert again[0].read_bytes() == paths[0].read_bytes() != other[0].read_bytes()


def test_an_unmarked_archive_is_held_to_the_official_member_md5s(tmp_path):
    standin = make_standin_raw_files("cifar100", tmp_path / "standin", n_train=20, n_test=10, seed=0)[0]
    assert cifar100.read_raw({standin.name: standin}).y_train.shape == (20,)
    official_dir = tmp_path / "official"
    official_dir.mkdir()
    unmarked = shutil.copy(standin, official_dir / standin.name)  # no STANDIN_SYNTHETIC marker beside it
    with pytest.raises(CifarFormatError, match="has md5"):
        cifar100.read_raw({standin.name: unmarked})
