"""Parsers and writers of the exact raw formats the datasets are published in.

* IDX (MNIST, Fashion-MNIST, KMNIST): big-endian header ``00 00 <type> <ndim>`` followed
  by ``ndim`` big-endian int32 sizes and the data; gzip-compressed or plain.
  Labels have magic 2049 (ubyte, 1 dim), images 2051 (ubyte, 3 dims).
* CIFAR-10 python (``cifar-10-python.tar.gz``): a gzip'd tar with
  ``cifar-10-batches-py/data_batch_1..5``, ``test_batch`` and ``batches.meta``, each a
  Python 2 pickle (protocol 2) of a dict with ``data`` ((N, 3072) uint8, each row the
  1024 red, then 1024 green, then 1024 blue values of a 32x32 image in row-major order)
  and ``labels`` (list of N ints).

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

Layout: the IDX reader/writer live in :mod:`.rawformats_idx`, the CIFAR-10 reader in
:mod:`.rawformats_cifar10_reader`, its writer in :mod:`.rawformats_cifar10_writer`; this
module re-exports them (it is the import surface) and holds the stand-ins and the CLI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..atomic_io import write_bytes_atomic

# The parsers/writers live in rawformats_idx, rawformats_cifar10_reader and
# rawformats_cifar10_writer; this module re-exports them and holds the stand-ins.
from .rawformats_cifar10_reader import (
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
from .rawformats_cifar10_writer import (
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
from .rawformats_idx import (
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
    "RawSplits",
    "read_idx",
    "write_idx",
    "read_cifar10_tar",
    "write_cifar10_tar",
    "make_standin_raw_files",
    "is_standin_dir",
    "read_standin_marker",
    "write_standin_marker",
]

STANDIN_MARKER = "STANDIN_SYNTHETIC"


# ===================================================================== synthetic stand-ins


def _synthetic_images(rng: np.random.Generator, labels: np.ndarray, templates: np.ndarray) -> np.ndarray:
    """Class template + noise, so a model can learn something in a smoke run."""
    noise = rng.integers(0, 256, size=(labels.shape[0],) + templates.shape[1:], dtype=np.int64)
    mixed = (7 * templates[labels].astype(np.int64) + 3 * noise) // 10
    return mixed.astype(np.uint8)


def is_standin_dir(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds synthetic stand-in files (has the marker file)."""
    return (Path(directory) / STANDIN_MARKER).is_file()


def read_standin_marker(directory: str | os.PathLike) -> dict:
    """The JSON content of the ``STANDIN_SYNTHETIC`` marker of ``directory``."""
    text = (Path(directory) / STANDIN_MARKER).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"synthetic": True, "raw": text}


def write_standin_marker(
    directory: str | os.PathLike, *, dataset: str, seed: int, n_train: int, n_test: int, **extra
) -> Path:
    """Writes the ``STANDIN_SYNTHETIC`` marker (JSON: synthetic, dataset, seed, n_train, n_test, note,
    plus ``extra``) atomically into ``directory`` (created). Stand-in writers call it FIRST, so an
    interrupted write still leaves the directory flagged synthetic. Returns the marker's path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    marker = {
        "synthetic": True,
        "dataset": dataset,
        "seed": int(seed),
        "n_train": int(n_train),
        "n_test": int(n_test),
        **extra,
        "note": (
            "SYNTHETIC stand-in data in the official raw file format, written by "
            "labeldp.data.rawformats.make_standin_raw_files for tests / CPU smoke runs. "
            "NOT the real dataset; results on it are not comparable with the papers."
        ),
    }
    write_bytes_atomic(directory / STANDIN_MARKER, (json.dumps(marker, indent=2) + "\n").encode())
    return directory / STANDIN_MARKER


STANDIN_SIZES = (512, 256)
"""(train, test) examples of the smoke profile's SYNTHETIC stand-in files."""


def make_standin_raw_files(
    name: str,
    directory: str | os.PathLike,
    *,
    n_train: int,
    n_test: int,
    seed: int,
) -> list[Path]:
    """Write tiny SYNTHETIC files in the exact raw format of dataset ``name``.

    For tests and the CPU smoke profile only, for datasets whose real files are not
    available here (``cifar10``, ``kmnist``, ``criteo_search``, ``census1940``; allowed wherever the
    registry spec has ``standin_allowed``). Tabular formats are written by their dataset's module
    (``write_standin`` of :mod:`labeldp.data.criteo_search` / :mod:`labeldp.data.census1940`, with
    ``n_rows = n_train + n_test`` raw rows, before any label drop). The files get the official
    file names so the real parsers read them, and a ``STANDIN_SYNTHETIC`` marker (JSON: dataset,
    seed, sizes) is written next to them; the preparations turn that marker into
    ``source = "synthetic_standin"``, and :func:`labeldp.data.fetch.fetch_dataset` refuses
    to touch such a directory. Returns the written raw file paths (marker excluded).
    """
    from .registry import get_spec  # local import: registry has no numpy dependency

    spec = get_spec(name)
    if not spec.standin_allowed:
        raise ValueError(
            f"no synthetic stand-in for {name!r}: its real files are available (or no "
            "stand-in writer exists for it); stand-ins exist only for datasets the mirror lacks"
        )
    if n_train < 1 or n_test < 1:
        raise ValueError("n_train and n_test must be >= 1")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tabular_writers = {
        "criteo_search_targz": "criteo_search",
        "ipums_extract": "census1940",
        "criteo_attribution_zip": "criteo_attribution",
        "criteo_dac_targz": "criteo_pctr",
    }
    filenames = spec.filenames
    if spec.raw_format == "ipums_extract":
        from .registry import CENSUS1940_DEFAULT_FILENAME

        filenames = (CENSUS1940_DEFAULT_FILENAME,)
    existing = [f for f in filenames if (directory / f).exists()]
    if existing and not is_standin_dir(directory):
        raise FileExistsError(
            f"{directory} already holds {existing} without a {STANDIN_MARKER} marker (real data?); "
            "write stand-ins to a separate directory"
        )
    if spec.raw_format in tabular_writers:  # tabular: the dataset's module writes marker + file
        import importlib

        module = importlib.import_module(f"labeldp.data.{tabular_writers[spec.raw_format]}")
        return module.write_standin(directory, n_rows=n_train + n_test, seed=seed, n_train=n_train, n_test=n_test)
    rng = np.random.default_rng(seed)
    k = spec.num_classes or 10
    shape = tuple(spec.input_shape)  # (H, W, C)
    templates = rng.integers(0, 256, size=(k,) + shape, dtype=np.int64).astype(np.uint8)
    y_train = rng.permutation(np.arange(n_train) % k).astype(np.int64)
    y_test = rng.permutation(np.arange(n_test) % k).astype(np.int64)
    x_train = _synthetic_images(rng, y_train, templates)
    x_test = _synthetic_images(rng, y_test, templates)

    # Marker first: if writing is interrupted, the directory is still flagged synthetic.
    write_standin_marker(directory, dataset=name, seed=seed, n_train=n_train, n_test=n_test)

    written: list[Path] = []
    if spec.raw_format == "idx":
        arrays = {
            "train-images-idx3-ubyte.gz": x_train[..., 0],
            "train-labels-idx1-ubyte.gz": y_train.astype(np.uint8),
            "t10k-images-idx3-ubyte.gz": x_test[..., 0],
            "t10k-labels-idx1-ubyte.gz": y_test.astype(np.uint8),
        }
        for fname, arr in arrays.items():
            written.append(write_idx(directory / fname, arr))
    elif spec.raw_format == "cifar10_python":
        written.append(write_cifar10_tar(directory / spec.files[0].filename, x_train, y_train, x_test, y_test))
    else:  # pragma: no cover - registry guards this
        raise ValueError(f"no stand-in writer for raw format {spec.raw_format!r}")
    return written


def _main(argv: list[str] | None = None) -> int:
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


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
