"""IDX files (MNIST, Fashion-MNIST, KMNIST): reader and writer.

Big-endian header ``00 00 <type> <ndim>`` followed by ``ndim`` big-endian int32 sizes and
the data; gzip-compressed or plain. Labels have magic 2049 (ubyte, 1 dim), images 2051
(ubyte, 3 dims). :func:`read_idx` detects gzip from the content; :func:`write_idx` writes
byte-deterministic files. Re-exported by :mod:`labeldp.data.rawformats`.
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path
from typing import Mapping

import numpy as np

from labeldp.data.rawformats.splits import RawSplits
from labeldp.data.dataset_spec import DatasetSpec, RemoteFile
from labeldp.data.rawformats.standin import synthetic_image_splits, write_standin_marker

IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned byte, 1 dimension
IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned byte, 3 dimensions


class IDXFormatError(ValueError):
    """The file is not a well-formed IDX file (bad magic number, truncated, ...)."""


# IDX type code -> big-endian numpy dtype
IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
IDX_CODES = {np.dtype(v).newbyteorder("=").str[1:]: k for k, v in IDX_DTYPES.items()}

GZIP_MAGIC = b"\x1f\x8b"


def read_maybe_gzip(path: Path) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        if head == GZIP_MAGIC:
            try:
                with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                    return gz.read()
            except (OSError, EOFError) as exc:
                raise IDXFormatError(f"{path}: corrupt or truncated gzip stream ({exc})") from exc
        return fh.read()


def read_idx(path: str | os.PathLike, *, expected_magic: int | None = None) -> np.ndarray:
    """Read an IDX file (gzip-compressed or plain; detected from the content).

    Returns a native-endian array of the declared shape (uint8 for MNIST-family files).
    Raises :class:`IDXFormatError` for a bad magic number, a truncated or oversized
    payload, or (when ``expected_magic`` is given, e.g. 2051 for images) the wrong kind.
    """
    path = Path(path)
    buf = read_maybe_gzip(path)
    if len(buf) < 4:
        raise IDXFormatError(f"{path}: {len(buf)} bytes is too short for an IDX header")
    magic = struct.unpack(">i", buf[:4])[0]
    zero, type_code, ndim = struct.unpack(">HBB", buf[:4])
    if zero != 0 or type_code not in IDX_DTYPES or ndim == 0:
        raise IDXFormatError(
            f"{path}: bad IDX magic number {magic} (0x{magic & 0xFFFFFFFF:08x}); expected "
            f"{IDX_LABELS_MAGIC} (labels) or {IDX_IMAGES_MAGIC} (images) for MNIST-family "
            "files. The file is not an IDX file, or it is corrupt, or it was decompressed "
            "wrongly."
        )
    if expected_magic is not None and magic != expected_magic:
        raise IDXFormatError(
            f"{path}: IDX magic number {magic}, expected {expected_magic} "
            f"({'labels' if expected_magic == IDX_LABELS_MAGIC else 'images' if expected_magic == IDX_IMAGES_MAGIC else 'other'})"
            " -- image and label files swapped?"
        )
    header_len = 4 + 4 * ndim
    if len(buf) < header_len:
        raise IDXFormatError(f"{path}: truncated IDX header ({len(buf)} bytes, need {header_len})")
    shape = struct.unpack(">" + "i" * ndim, buf[4:header_len])
    if any(d < 0 for d in shape):
        raise IDXFormatError(f"{path}: negative dimension in IDX header {shape}")
    dtype = IDX_DTYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    actual = len(buf) - header_len
    if actual != expected:
        raise IDXFormatError(
            f"{path}: IDX payload is {actual} bytes but the header {shape} declares {expected}"
            f" ({'truncated' if actual < expected else 'trailing data'})"
        )
    arr = np.frombuffer(buf, dtype=dtype, offset=header_len).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def write_idx(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write ``array`` as an IDX file; gzip-compressed when ``path`` ends with ``.gz``.

    The gzip header carries mtime 0, so equal arrays give byte-identical files. Supported
    dtypes: uint8, int8, int16, int32, float32, float64 (written big-endian).
    """
    path = Path(path)
    array = np.asarray(array)
    key = array.dtype.newbyteorder("=").str[1:]
    if key not in IDX_CODES:
        raise TypeError(f"IDX cannot store dtype {array.dtype}; use one of {sorted(IDX_CODES)}")
    if array.ndim == 0 or array.ndim > 255:
        raise ValueError(f"IDX needs 1..255 dimensions, got {array.ndim}")
    code = IDX_CODES[key]
    header = struct.pack(">HBB", 0, code, array.ndim) + struct.pack(">" + "i" * array.ndim, *array.shape)
    payload = header + np.ascontiguousarray(array, dtype=IDX_DTYPES[code]).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
            gz.write(payload)
    else:
        path.write_bytes(payload)
    return path


# ============================================================ the MNIST family's four files

#: The four files of an IDX image dataset (MNIST, Fashion-MNIST, KMNIST), in the order train images,
#: train labels, test images, test labels.
IDX_FILENAMES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def idx_files(primary: str, fallbacks: tuple[str, ...], md5: Mapping[str, str], sha256: Mapping[str, str], size):
    """The :class:`~labeldp.data.dataset_spec.RemoteFile` of each of :data:`IDX_FILENAMES` under ``primary``
    (then each of ``fallbacks``), with its md5 and, where known, its sha256 and size."""
    return tuple(
        RemoteFile(
            filename=name,
            url=primary + name,
            md5=md5[name],
            sha256=sha256.get(name),
            mirrors=tuple(base + name for base in fallbacks),
            size=size.get(name),
        )
        for name in IDX_FILENAMES
    )


def read_idx_splits(paths: Mapping[str, Path]) -> RawSplits:
    """The train and test images (NHWC uint8, one channel) and labels (int64) of an IDX dataset's files."""

    def pair(img_name: str, lbl_name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
        x = read_idx(paths[img_name], expected_magic=IDX_IMAGES_MAGIC)
        y = read_idx(paths[lbl_name], expected_magic=IDX_LABELS_MAGIC)
        if x.shape[0] != y.shape[0]:
            raise IDXFormatError(f"{split}: {x.shape[0]} images but {y.shape[0]} labels")
        return x[..., None].astype(np.uint8, copy=False), y.astype(np.int64)

    train_x, train_y, test_x, test_y = IDX_FILENAMES
    x_train, y_train = pair(train_x, train_y, "train")
    x_test, y_test = pair(test_x, test_y, "test")
    return RawSplits(x_train, y_train, x_test, y_test)


def write_idx_standin(
    directory: str | os.PathLike, *, dataset: str, num_classes: int, seed: int, n_train: int, n_test: int
) -> list[Path]:
    """SYNTHETIC 28x28 images (:func:`labeldp.data.rawformats.standin.synthetic_image_splits`) written as
    the four IDX files, after the ``STANDIN_SYNTHETIC`` marker. Returns the files' paths."""
    x_train, y_train, x_test, y_test = synthetic_image_splits(
        num_classes=num_classes, shape=(28, 28, 1), n_train=n_train, n_test=n_test, seed=seed
    )
    write_standin_marker(directory, dataset=dataset, seed=seed, n_train=n_train, n_test=n_test)
    arrays = (x_train[..., 0], y_train.astype(np.uint8), x_test[..., 0], y_test.astype(np.uint8))
    return [write_idx(Path(directory) / name, arr) for name, arr in zip(IDX_FILENAMES, arrays)]


def idx_image_spec(*, name: str, title: str, files, homepage: str, citation: str, **extra):
    """The :class:`~labeldp.data.dataset_spec.DatasetSpec` of an MNIST-shaped IDX dataset: 28x28 grey images,
    10 classes, 60,000 training images, 000's Table 10 CNN (``mnist_cnn``); ``extra`` adds license, notes, ...

    Checksums (``files``, from :func:`idx_files`): the md5 values are torchvision's (``pytorch/vision``
    ``torchvision/datasets/mnist.py``, ``resources`` lists); where a verified copy of the official file is in
    the project's shared mirror, its sha256 is pinned too (``shared/data/SOURCES.md``; every one of those
    files has the official md5)."""
    return DatasetSpec(
        name=name,
        title=title,
        files=files,
        kind="image",
        model="mnist_cnn",
        raw_format="idx",
        num_classes=10,
        input_shape=(28, 28, 1),
        train_examples=60000,
        homepage=homepage,
        citation=citation,
        **extra,
    )


class IdxSource:
    """``read_raw`` and ``write_standin`` of an IDX data source (the source protocol of
    :mod:`labeldp.data.registry`), bound to its dataset id: ``read_raw, write_standin = IdxSource(name)``."""

    def __init__(self, name: str):
        self.name = name

    def read_raw(self, paths):
        """The four IDX files' train and test images and labels."""
        return read_idx_splits(paths)

    def write_standin(self, directory, *, seed: int, n_train: int, n_test: int):
        """SYNTHETIC IDX files under the official names (tests and the smoke profile)."""
        return write_idx_standin(
            directory, dataset=self.name, num_classes=10, seed=seed, n_train=n_train, n_test=n_test
        )

    def __iter__(self):
        return iter((self.read_raw, self.write_standin))
