"""CIFAR-10, python version (000 Tables 2, 5b, 13; 001 Table 1).

Checksums: torchvision's ``tgz_md5`` for ``cifar-10-python.tar.gz`` and the md5 of every member inside
the archive (``torchvision/datasets/cifar.py``), checked when reading the official file.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from labeldp.data.dataset_spec import DatasetSpec, RemoteFile
from labeldp.data.rawformats.cifar10_reader import read_cifar10_tar
from labeldp.data.rawformats.cifar10_writer import write_cifar10_standin
from labeldp.data.rawformats.standin import is_standin_dir

__all__ = ["SPEC", "read_raw", "write_standin"]

SPEC = DatasetSpec(
    name="cifar10",
    title="CIFAR-10 (python version)",
    files=(
        RemoteFile(
            filename="cifar-10-python.tar.gz",
            url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            md5="c58f30108f718f92721af3b95e74349a",
            size=170498071,
        ),
    ),
    kind="image",
    model="cifar_cnn",
    raw_format="cifar10_python",
    num_classes=10,
    input_shape=(32, 32, 3),
    train_examples=50000,
    homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
    citation="Krizhevsky (2009). Learning Multiple Layers of Features from Tiny Images.",
    standin_allowed=True,
    members=MappingProxyType(
        {
            "cifar-10-batches-py/data_batch_1": "c99cafc152244af753f735de768cd75f",
            "cifar-10-batches-py/data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
            "cifar-10-batches-py/data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
            "cifar-10-batches-py/data_batch_4": "634d18415352ddfa80567beed471001a",
            "cifar-10-batches-py/data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
            "cifar-10-batches-py/test_batch": "40351d587109b95175f43aff81a1287e",
            "cifar-10-batches-py/batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
        }
    ),
    notes="Not in the shared mirror; CPU smoke runs use synthetic stand-ins.",
)


def read_raw(paths):
    """The archive's train and test images and labels; every member's md5 is checked unless the
    directory holds a SYNTHETIC stand-in."""
    path = Path(paths[SPEC.files[0].filename])
    return read_cifar10_tar(path, member_md5=None if is_standin_dir(path.parent) else dict(SPEC.members))


def write_standin(directory, *, seed: int, n_train: int, n_test: int):
    """A SYNTHETIC ``cifar-10-python.tar.gz`` (tests and the smoke profile)."""
    return write_cifar10_standin(
        directory, dataset=SPEC.name, filename=SPEC.files[0].filename, seed=seed, n_train=n_train, n_test=n_test
    )
