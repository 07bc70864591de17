"""CIFAR-100, python version (001 Table 2: LP-1ST and LP-2ST on CIFAR-100).

001 Appendix "Datasets": 100 classes of 32x32 colour images, 50,000 training and 10,000 test examples;
the classes are the archive's 100 FINE labels (:mod:`labeldp.data.rawformats.cifar100`). Checksums:
torchvision's ``tgz_md5`` for ``cifar-100-python.tar.gz`` and the md5 of the ``train``, ``test`` and
``meta`` members (``torchvision/datasets/cifar.py``), checked when reading the official file.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from labeldp.data.dataset_spec import DatasetSpec, RemoteFile
from labeldp.data.rawformats.cifar100 import (
    CIFAR100_FINE_LABEL_NAMES,
    CIFAR100_META_MEMBER,
    CIFAR100_TEST_MEMBER,
    CIFAR100_TRAIN_MEMBER,
    read_cifar100_tar,
    write_cifar100_standin,
)
from labeldp.data.rawformats.standin import is_standin_dir

__all__ = ["SPEC", "read_raw", "write_standin"]

SPEC = DatasetSpec(
    name="cifar100",
    title="CIFAR-100 (python version, fine labels)",
    files=(
        RemoteFile(
            filename="cifar-100-python.tar.gz",
            url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
            md5="eb9058c3a382ffc7106e4002c42a8d85",
            size=169001437,
        ),
    ),
    kind="image",
    model="cifar_cnn",
    raw_format="cifar100_python",
    num_classes=len(CIFAR100_FINE_LABEL_NAMES),
    input_shape=(32, 32, 3),
    train_examples=50000,
    homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
    citation="Krizhevsky (2009). Learning Multiple Layers of Features from Tiny Images.",
    standin_allowed=True,
    members=MappingProxyType(
        {
            CIFAR100_TRAIN_MEMBER: "16019d7e3df5f24257cddd939b257f8d",
            CIFAR100_TEST_MEMBER: "f0ef6b0ae62326f3e7ffdfab6717acfc",
            CIFAR100_META_MEMBER: "7973b15100ade9c7d40fb424638fde48",
        }
    ),
    notes="Not in the shared mirror; CPU smoke runs use synthetic stand-ins.",
)


def read_raw(paths):
    """The archive's train and test images and fine labels; every member's md5 is checked unless the
    directory holds a SYNTHETIC stand-in."""
    path = Path(paths[SPEC.files[0].filename])
    return read_cifar100_tar(path, member_md5=None if is_standin_dir(path.parent) else dict(SPEC.members))


def write_standin(directory, *, seed: int, n_train: int, n_test: int):
    """A SYNTHETIC ``cifar-100-python.tar.gz`` (tests and the smoke profile)."""
    return write_cifar100_standin(
        directory, dataset=SPEC.name, filename=SPEC.files[0].filename, seed=seed, n_train=n_train, n_test=n_test
    )
