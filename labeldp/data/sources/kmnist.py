"""Kuzushiji-MNIST (001 Table 5).

IDX files (:mod:`labeldp.data.rawformats.idx`); the Table 10 CNN of 000 (``mnist_cnn``).
Checksums: the md5 values are torchvision's (``pytorch/vision`` ``torchvision/datasets/mnist.py``,
``resources`` lists); where a verified copy of the official file is in the project's shared mirror, its
sha256 is pinned too (``shared/data/SOURCES.md``; every one of those files has the official md5).
"""

from __future__ import annotations

from labeldp.data.dataset_spec import DatasetSpec
from labeldp.data.rawformats import idx

__all__ = ["SPEC", "read_raw", "write_standin"]

SPEC = DatasetSpec(
    name="kmnist",
    title="Kuzushiji-MNIST",
    files=idx.idx_files(
        "http://codh.rois.ac.jp/kmnist/dataset/kmnist/",
        (),
        md5={
            "train-images-idx3-ubyte.gz": "bdb82020997e1d708af4cf47b453dcf7",
            "train-labels-idx1-ubyte.gz": "e144d726b3acfaa3e44228e80efcd344",
            "t10k-images-idx3-ubyte.gz": "5c965bf0a639b31b8f53240b1b52f4d7",
            "t10k-labels-idx1-ubyte.gz": "7320c461ea6c1c855c0b718fb2a4b134",
        },
        sha256={
            # train-images: not in the shared mirror, so only torchvision's md5 is known.
            "train-labels-idx1-ubyte.gz": "e38f9ebcd0f3ebcdec7fc8eabdcdaef93bb0df8ea12bee65224341c8183d8e17",
            "t10k-images-idx3-ubyte.gz": "edd7a857845ad6bb1d0ba43fe7e794d164fe2dce499a1694695a792adfac43c5",
            "t10k-labels-idx1-ubyte.gz": "20bb9a0ef54c7db3efc55a92eef5582c109615df22683c380526788f98e42a1c",
        },
        size={
            "train-labels-idx1-ubyte.gz": 29497,
            "t10k-images-idx3-ubyte.gz": 3041136,
            "t10k-labels-idx1-ubyte.gz": 5120,
        },
    ),
    kind="image",
    model="mnist_cnn",
    raw_format="idx",
    num_classes=10,
    input_shape=(28, 28, 1),
    train_examples=60000,
    homepage="https://github.com/rois-codh/kmnist",
    license="CC BY-SA 4.0",
    citation="Clanuwat et al. (2018). Deep Learning for Classical Japanese Literature. arXiv:1812.01718.",
    standin_allowed=True,
    notes="The shared mirror lacks train-images-idx3-ubyte.gz; CPU smoke runs use synthetic stand-ins.",
)


def read_raw(paths):
    """The four IDX files' train and test images and labels."""
    return idx.read_idx_splits(paths)


def write_standin(directory, *, seed: int, n_train: int, n_test: int):
    """SYNTHETIC IDX files in the official names (tests and the smoke profile)."""
    return idx.write_idx_standin(
        directory, dataset=SPEC.name, num_classes=10, seed=seed, n_train=n_train, n_test=n_test
    )
