"""Parsers and writers of the exact raw formats the datasets are published in.

* IDX (MNIST, Fashion-MNIST, KMNIST): big-endian header ``00 00 <type> <ndim>`` followed
  by ``ndim`` big-endian int32 sizes and the data; gzip-compressed or plain.
  Labels have magic 2049 (ubyte, 1 dim), images 2051 (ubyte, 3 dims).
* CIFAR-10 python (``cifar-10-python.tar.gz``): a gzip'd tar with
  ``cifar-10-batches-py/data_batch_1..5``, ``test_batch`` and ``batches.meta``, each a
  Python 2 pickle (protocol 2) of a dict with ``data`` ((N, 3072) uint8, each row the
  1024 red, then 1024 green, then 1024 blue values of a 32x32 image in row-major order)
  and ``labels`` (list of N ints).
* CIFAR-100 python (``cifar-100-python.tar.gz``): ``cifar-100-python/train``, ``test`` and ``meta``,
  the same pickles with ``fine_labels`` (100 classes, the ones used here) and ``coarse_labels``.

Pickle trust: the CIFAR batches are unpickled with :class:`RestrictedUnpickler`, which
resolves only the three globals a numpy-array pickle needs (``_reconstruct``, ``ndarray``,
``dtype``) and refuses everything else, so a tampered archive cannot run code
through ``find_class``. In addition :func:`labeldp.data.fetch.fetch_dataset` md5-verifies
the official archive before it is ever read.

The writers produce byte-compatible files (the CIFAR writer emits the same Python 2
protocol-2 opcodes as the official files). They are used by the tests and by
:func:`make_standin_raw_files`, which writes tiny SYNTHETIC data sets in the official raw
formats for CPU smoke runs when the real files are not available. Stand-ins are always
marked by a ``STANDIN_SYNTHETIC`` file next to them, and everything downstream records
``source = "synthetic_standin"``.

Layout: one module per format: :mod:`.idx`, :mod:`.cifar10_reader` / :mod:`.cifar10_writer`,
:mod:`.cifar100` (CIFAR-10's batch decoding and pickle writer with CIFAR-100's members and labels),
:mod:`.criteo_attribution` (+ ``_standin``), :mod:`.criteo_dac` (Criteo's Display Advertising
Challenge archive, + ``_standin``), :mod:`.ipums_extract` (Census 1940); the stand-in marker and
synthetic images in :mod:`.standin`. This package re-exports the image formats and the stand-in
helpers (its import surface), and holds the stand-in dispatcher and the CLI
(``python -m labeldp.data.rawformats``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


# The parsers/writers live in rawformats_idx, rawformats_cifar10_reader and
# rawformats_cifar10_writer; this module re-exports them and holds the stand-ins.
from labeldp.data.rawformats.cifar10_reader import (
    CIFAR10_DIRNAME,
    CIFAR10_LABEL_NAMES,
    CIFAR10_META_MEMBER,
    CIFAR10_TEST_MEMBER,
    CIFAR10_TRAIN_MEMBERS,
    CifarFormatError,
    RawSplits,
    decode_batch,
    reconstruct_function,
    RestrictedUnpickler,
    unpickle_batch,
    read_cifar10_tar,
)
from labeldp.data.rawformats.cifar10_writer import (
    check_images,
    cifar_batch_pickle,
    cifar_meta_pickle,
    p2_dict,
    p2_int,
    p2_list,
    p2_str,
    p2_tuple,
    p2_uint8_matrix,
    write_cifar10_tar,
)
from labeldp.data.rawformats.cifar100 import (
    CIFAR100_DIRNAME,
    CIFAR100_FINE_LABEL_NAMES,
    CIFAR100_TEST_MEMBER,
    CIFAR100_TRAIN_MEMBER,
    read_cifar100_tar,
    write_cifar100_tar,
)
from labeldp.data.rawformats.idx import (
    GZIP_MAGIC,
    IDX_CODES,
    IDX_DTYPES,
    IDX_IMAGES_MAGIC,
    IDX_LABELS_MAGIC,
    IDXFormatError,
    read_maybe_gzip,
    read_idx,
    write_idx,
)

__all__ = [
    "IDXFormatError",
    "CifarFormatError",
    "IDX_LABELS_MAGIC",
    "IDX_IMAGES_MAGIC",
    "STANDIN_MARKER",
    "CIFAR10_DIRNAME",
    "CIFAR10_TRAIN_MEMBERS",
    "CIFAR10_TEST_MEMBER",
    "CIFAR10_META_MEMBER",
    "CIFAR10_LABEL_NAMES",
    "CIFAR100_DIRNAME",
    "CIFAR100_TRAIN_MEMBER",
    "CIFAR100_TEST_MEMBER",
    "CIFAR100_FINE_LABEL_NAMES",
    "RawSplits",
    "read_idx",
    "write_idx",
    "read_cifar10_tar",
    "write_cifar10_tar",
    "read_cifar100_tar",
    "write_cifar100_tar",
    "make_standin_raw_files",
    "is_standin_dir",
    "read_standin_marker",
    "write_standin_marker",
    "synthetic_image_splits",
    "STANDIN_SIZES",
    "main",
]
from labeldp.data.rawformats.standin import (
    STANDIN_MARKER,
    STANDIN_SIZES,
    is_standin_dir,
    read_standin_marker,
    synthetic_image_splits,
    write_standin_marker,
)
from labeldp.data.registry import get_spec, source_module


def make_standin_raw_files(
    name: str,
    directory: str | os.PathLike,
    *,
    n_train: int,
    n_test: int,
    seed: int,
) -> list[Path]:
    """Write tiny SYNTHETIC files in the exact raw format of dataset ``name`` (its source's ``write_standin``).

    For tests and the CPU smoke profile only, for datasets whose real files are not available here
    (``cifar10``, ``cifar100``, ``kmnist``, ``criteo_search``, ``census1940``, ...; allowed wherever the spec has
    ``standin_allowed``). The source module's ``write_standin(directory, *, seed, n_train, n_test)``
    writes the files under their official names, so the real parsers read them, after a
    ``STANDIN_SYNTHETIC`` marker (:mod:`labeldp.data.rawformats.standin`); tabular sources write
    ``n_train + n_test`` raw rows, before any label drop. Returns the written raw file paths (marker
    excluded).

    Raises:
      ValueError: the dataset has real files here (no stand-in allowed) or its source has no writer.
      FileExistsError: ``directory`` holds files of that name without the marker (real data?).
    """
    spec = get_spec(name)
    if not spec.standin_allowed:
        raise ValueError(
            f"no synthetic stand-in for {name!r}: its real files are available (or no "
            "stand-in writer exists for it); stand-ins exist only for datasets the mirror lacks"
        )
    if n_train < 1 or n_test < 1:
        raise ValueError("n_train and n_test must be >= 1")
    module = source_module(name)
    if not hasattr(module, "write_standin"):
        raise ValueError(f"the source module of {name!r} ({module.__name__}) defines no write_standin")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    filenames = getattr(module, "STANDIN_FILENAMES", spec.filenames)
    existing = [f for f in filenames if (directory / f).exists()]
    if existing and not is_standin_dir(directory):
        raise FileExistsError(
            f"{directory} already holds {existing} without a {STANDIN_MARKER} marker (real data?); "
            "write stand-ins to a separate directory"
        )
    return list(module.write_standin(directory, seed=seed, n_train=n_train, n_test=n_test))


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m labeldp.data.rawformats",
        description="Write tiny SYNTHETIC stand-in raw files (tests / CPU smoke only).",
    )
    parser.add_argument("dataset")
    parser.add_argument("--dir", required=True, type=Path, help="output directory (gets a STANDIN_SYNTHETIC marker)")
    parser.add_argument("--n-train", type=int, default=512)
    parser.add_argument("--n-test", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    paths = make_standin_raw_files(args.dataset, args.dir, n_train=args.n_train, n_test=args.n_test, seed=args.seed)
    for p in paths:
        print(p)
    print(f"SYNTHETIC stand-in files for {args.dataset} written to {args.dir} (marker {STANDIN_MARKER})")
    return 0
