"""CIFAR-100 python archive (``cifar-100-python.tar.gz``): layout constants, reader and writer.

001 Table 2 (LP-MST on CIFAR-100) reads it; 001 Appendix "Datasets": 100 classes, 32x32 colour images,
50,000 training and 10,000 test examples. The archive is a gzip'd tar with ``cifar-100-python/train``,
``test`` and ``meta``. ``train`` and ``test`` are Python 2 pickles (protocol 2) of a dict with ``data``
((N, 3072) uint8, rows of 1024 red, 1024 green, 1024 blue values, as CIFAR-10's), ``fine_labels`` (the
100 classes), ``coarse_labels`` (the 20 superclasses), ``filenames`` and ``batch_label``; ``meta`` holds
``fine_label_names`` and ``coarse_label_names``. The classes are the FINE labels.

The batch decoding, the restricted unpickler, the Python 2 pickle writer and the deterministic tar are
CIFAR-10's (:mod:`.cifar10_reader`, :mod:`.cifar10_writer`); this module holds what differs: the
members, the label keys and the class names. Re-exported by :mod:`labeldp.data.rawformats`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from labeldp.data.rawformats.cifar10_reader import read_cifar_members
from labeldp.data.rawformats.cifar10_writer import (
    checked_cifar_splits,
    cifar_batch_pickle,
    p2_dict,
    p2_list,
    p2_str,
    write_deterministic_tar,
)
from labeldp.data.rawformats.splits import RawSplits
from labeldp.data.rawformats.standin import synthetic_image_splits, write_standin_marker

__all__ = [
    "CIFAR100_DIRNAME",
    "CIFAR100_TRAIN_MEMBER",
    "CIFAR100_TEST_MEMBER",
    "CIFAR100_META_MEMBER",
    "CIFAR100_FINE_LABEL_NAMES",
    "CIFAR100_COARSE_LABEL_NAMES",
    "CIFAR100_COARSE_OF_FINE",
    "read_cifar100_tar",
    "write_cifar100_tar",
    "write_cifar100_standin",
]

CIFAR100_DIRNAME = "cifar-100-python"
CIFAR100_TRAIN_MEMBER = f"{CIFAR100_DIRNAME}/train"
CIFAR100_TEST_MEMBER = f"{CIFAR100_DIRNAME}/test"
CIFAR100_META_MEMBER = f"{CIFAR100_DIRNAME}/meta"
CIFAR100_LAYOUT = f"the official cifar-100-python.tar.gz ({CIFAR100_DIRNAME}/train, test, meta)"

# The official meta's names, in label order (alphabetical), fine and coarse.
CIFAR100_FINE_LABEL_NAMES = tuple(
    "apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle "
    "bowl boy bridge bus butterfly camel can castle caterpillar cattle "
    "chair chimpanzee clock cloud cockroach couch crab crocodile cup dinosaur "
    "dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard "
    "lamp lawn_mower leopard lion lizard lobster man maple_tree motorcycle mountain "
    "mouse mushroom oak_tree orange orchid otter palm_tree pear pickup_truck pine_tree "
    "plain plate poppy porcupine possum rabbit raccoon ray road rocket "
    "rose sea seal shark shrew skunk skyscraper snail snake spider "
    "squirrel streetcar sunflower sweet_pepper table tank telephone television tiger tractor "
    "train trout tulip turtle wardrobe whale willow_tree wolf woman worm".split()
)
CIFAR100_COARSE_LABEL_NAMES = tuple(
    "aquatic_mammals fish flowers food_containers fruit_and_vegetables household_electrical_devices "
    "household_furniture insects large_carnivores large_man-made_outdoor_things large_natural_outdoor_scenes "
    "large_omnivores_and_herbivores medium_mammals non-insect_invertebrates people reptiles small_mammals "
    "trees vehicles_1 vehicles_2".split()
)
#: The superclass of each fine class (five fine classes each), as the official files pair them.
CIFAR100_COARSE_OF_FINE = (
    (4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11)
    + (6, 11, 5, 10, 7, 6, 13, 15, 3, 15, 0, 11, 1, 10, 12, 14, 16, 9, 11, 5)
    + (5, 19, 8, 8, 15, 13, 14, 17, 18, 10, 16, 4, 17, 4, 2, 0, 17, 4, 18, 17)
    + (10, 3, 2, 12, 12, 16, 12, 1, 9, 19, 2, 10, 0, 1, 16, 12, 9, 13, 15, 13)
    + (16, 19, 2, 4, 6, 19, 5, 5, 8, 19, 18, 1, 2, 15, 6, 0, 17, 8, 14, 13)
)


def read_cifar100_tar(path: str | os.PathLike, *, member_md5: dict[str, str] | None = None) -> RawSplits:
    """Read the official ``cifar-100-python.tar.gz`` without extracting it to disk.

    Returns :class:`RawSplits` with images NHWC uint8 (n, 32, 32, 3) and the FINE labels (int64, 0..99;
    the classes of 001 Table 2). ``member_md5`` (member name -> md5) additionally checks each member's
    bytes, as the registry lists them for the official archive.

    Raises:
      CifarFormatError (a ValueError): a missing file, not a tar, not CIFAR-100's layout (a CIFAR-10
        archive, say), a member's md5, or a batch without ``data`` / ``fine_labels``.
    """
    (x_train, y_train), (x_test, y_test) = read_cifar_members(
        path,
        (CIFAR100_TRAIN_MEMBER, CIFAR100_TEST_MEMBER),
        label_key="fine_labels",
        dataset="cifar100",
        layout=CIFAR100_LAYOUT,
        member_md5=member_md5,
    )
    return RawSplits(x_train, y_train, x_test, y_test)


def cifar100_batch_pickle(x_nhwc: np.ndarray, fine_labels: np.ndarray, batch_label: str, prefix: str) -> bytes:
    fine = np.asarray(fine_labels, dtype=np.int64).reshape(-1)
    if fine.size and (fine.min() < 0 or fine.max() >= len(CIFAR100_FINE_LABEL_NAMES)):
        raise ValueError(f"CIFAR-100 fine labels must lie in 0..99, got {fine.min()}..{fine.max()}")
    coarse = np.asarray(CIFAR100_COARSE_OF_FINE, dtype=np.int64)[fine]
    return cifar_batch_pickle(
        x_nhwc, fine, batch_label, prefix, label_fields={"fine_labels": fine, "coarse_labels": coarse}
    )


def cifar100_meta_pickle() -> bytes:
    return p2_dict(
        [
            (p2_str("fine_label_names"), p2_list([p2_str(n) for n in CIFAR100_FINE_LABEL_NAMES])),
            (p2_str("coarse_label_names"), p2_list([p2_str(n) for n in CIFAR100_COARSE_LABEL_NAMES])),
        ]
    )


def write_cifar100_tar(
    path: str | os.PathLike,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
) -> Path:
    """Write arrays (NHWC uint8, fine labels 0..99) in the layout of ``cifar-100-python.tar.gz``: one
    ``train`` and one ``test`` member (with the coarse labels of :data:`CIFAR100_COARSE_OF_FINE`) and
    ``meta``. Deterministic output (mtimes 0).

    Raises:
      ValueError: images not uint8 (n, 32, 32, 3), not one label per image, or a label outside 0..99.
    """
    x_train, y_train, x_test, y_test = checked_cifar_splits(x_train, y_train, x_test, y_test)
    members = [
        (CIFAR100_META_MEMBER, cifar100_meta_pickle()),
        (CIFAR100_TEST_MEMBER, cifar100_batch_pickle(x_test, y_test, "testing batch 1 of 1", "test")),
        (CIFAR100_TRAIN_MEMBER, cifar100_batch_pickle(x_train, y_train, "training batch 1 of 1", "train")),
    ]
    return write_deterministic_tar(path, CIFAR100_DIRNAME, members)


def write_cifar100_standin(
    directory: str | os.PathLike, *, dataset: str, filename: str, seed: int, n_train: int, n_test: int
) -> list[Path]:
    """SYNTHETIC 32x32x3 images of 100 classes (:func:`labeldp.data.rawformats.standin.synthetic_image_splits`)
    written as ``filename`` in the CIFAR-100 python layout, after the ``STANDIN_SYNTHETIC`` marker."""
    x_train, y_train, x_test, y_test = synthetic_image_splits(
        num_classes=len(CIFAR100_FINE_LABEL_NAMES), shape=(32, 32, 3), n_train=n_train, n_test=n_test, seed=seed
    )
    write_standin_marker(directory, dataset=dataset, seed=seed, n_train=n_train, n_test=n_test)
    return [write_cifar100_tar(Path(directory) / filename, x_train, y_train, x_test, y_test)]
