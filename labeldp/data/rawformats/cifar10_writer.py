"""CIFAR-10 python archive writer: arrays -> a byte-compatible ``cifar-10-python.tar.gz``.

The batches are hand-built Python 2 style pickles (protocol 2, str = BINSTRING; the
``p2_*`` helpers), the same opcodes as the official files, in a deterministic tar
(mtimes 0; :func:`write_deterministic_tar`). The pickle helpers, :func:`cifar_batch_pickle` and the
tar writer serve CIFAR-100's writer too (:mod:`labeldp.data.rawformats.cifar100`). Used by the tests
and the synthetic stand-ins. Re-exported by :mod:`labeldp.data.rawformats`.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np

from labeldp.data.rawformats.cifar10_reader import (
    CIFAR10_DIRNAME,
    CIFAR10_LABEL_NAMES,
    CIFAR10_META_MEMBER,
    CIFAR10_TEST_MEMBER,
    CIFAR10_TRAIN_MEMBERS,
)
from labeldp.data.rawformats.standin import synthetic_image_splits, write_standin_marker


# --- a Python 2 style (protocol 2, str = BINSTRING) pickle writer, as in the official files


def p2_str(value: str | bytes) -> bytes:
    b = value.encode("latin1") if isinstance(value, str) else bytes(value)
    if len(b) < 256:
        return pickle.SHORT_BINSTRING + bytes([len(b)]) + b
    return pickle.BINSTRING + struct.pack("<i", len(b)) + b


def p2_int(v: int) -> bytes:
    if 0 <= v < 256:
        return pickle.BININT1 + bytes([v])
    if 0 <= v < 65536:
        return pickle.BININT2 + struct.pack("<H", v)
    if -(2**31) <= v < 2**31:
        return pickle.BININT + struct.pack("<i", v)
    raise ValueError(f"integer {v} out of int32 range")


def p2_tuple(items: list[bytes]) -> bytes:
    n = len(items)
    body = b"".join(items)
    if n == 0:
        return pickle.EMPTY_TUPLE
    if n <= 3:
        return body + (pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3)[n - 1]
    return pickle.MARK + body + pickle.TUPLE


def p2_uint8_matrix(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a, dtype=np.uint8)
    out = b"cnumpy.core.multiarray\n_reconstruct\n"
    out += p2_tuple([b"cnumpy\nndarray\n", p2_tuple([p2_int(0)]), p2_str("b")]) + pickle.REDUCE
    dtype = b"cnumpy\ndtype\n" + p2_tuple([p2_str("u1"), p2_int(0), p2_int(1)]) + pickle.REDUCE
    dtype_state = p2_tuple(
        [p2_int(3), p2_str("|"), pickle.NONE, pickle.NONE, pickle.NONE, p2_int(-1), p2_int(-1), p2_int(0)]
    )
    dtype += dtype_state + pickle.BUILD
    state = p2_tuple(
        [p2_int(1), p2_tuple([p2_int(int(d)) for d in a.shape]), dtype, pickle.NEWFALSE, p2_str(a.tobytes())]
    )
    return out + state + pickle.BUILD


def p2_list(items: list[bytes]) -> bytes:
    if not items:
        return pickle.EMPTY_LIST
    return pickle.EMPTY_LIST + pickle.MARK + b"".join(items) + pickle.APPENDS


def p2_dict(pairs: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(k + v for k, v in pairs)
    return pickle.PROTO + b"\x02" + pickle.EMPTY_DICT + pickle.MARK + body + pickle.SETITEMS + pickle.STOP


def cifar_batch_pickle(
    x_nhwc: np.ndarray,
    y: np.ndarray,
    batch_label: str,
    prefix: str,
    *,
    label_fields: dict[str, np.ndarray] | None = None,
) -> bytes:
    """One batch as the official files pickle it: ``batch_label``, the labels, ``data`` (CHW rows) and
    ``filenames``. The labels are ``y`` under CIFAR-10's key ``labels``, or ``label_fields`` (key -> one
    label per image, in order: CIFAR-100's ``fine_labels`` and ``coarse_labels``) when given."""
    x_nhwc = np.asarray(x_nhwc, dtype=np.uint8)
    rows = x_nhwc.transpose(0, 3, 1, 2).reshape(x_nhwc.shape[0], 3072)  # NHWC -> CHW rows
    fields = {"labels": y} if label_fields is None else label_fields
    label_pairs = [
        (p2_str(key), p2_list([p2_int(int(v)) for v in np.asarray(values).reshape(-1)]))
        for key, values in fields.items()
    ]
    filenames = [f"{prefix}_{i:05d}.png" for i in range(x_nhwc.shape[0])]
    return p2_dict(
        [
            (p2_str("batch_label"), p2_str(batch_label)),
            *label_pairs,
            (p2_str("data"), p2_uint8_matrix(rows)),
            (p2_str("filenames"), p2_list([p2_str(f) for f in filenames])),
        ]
    )


def cifar_meta_pickle(num_cases_per_batch: int) -> bytes:
    return p2_dict(
        [
            (p2_str("num_cases_per_batch"), p2_int(num_cases_per_batch)),
            (p2_str("label_names"), p2_list([p2_str(n) for n in CIFAR10_LABEL_NAMES])),
            (p2_str("num_vis"), p2_int(3072)),
        ]
    )


def check_images(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], what: str) -> None:
    if x.dtype != np.uint8 or x.ndim != 4 or tuple(x.shape[1:]) != shape:
        raise ValueError(f"{what}: images must be uint8 (n, {', '.join(map(str, shape))}), got {x.shape} {x.dtype}")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"{what}: need one label per image, got {y.shape} labels for {x.shape[0]} images")


def checked_cifar_splits(x_train, y_train, x_test, y_test) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four arrays of a CIFAR archive (labels flattened), checked: images uint8 (n, 32, 32, 3), one
    label per image.

    Raises:
      ValueError: naming the split and the shapes.
    """
    x_train, x_test = np.asarray(x_train), np.asarray(x_test)
    y_train, y_test = np.asarray(y_train).reshape(-1), np.asarray(y_test).reshape(-1)
    check_images(x_train, y_train, (32, 32, 3), "train")
    check_images(x_test, y_test, (32, 32, 3), "test")
    return x_train, y_train, x_test, y_test


def write_cifar10_tar(
    path: str | os.PathLike,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
) -> Path:
    """Write arrays (NHWC uint8, labels ints) in the layout of ``cifar-10-python.tar.gz``.

    The training set is split into five ``data_batch_i`` members of (almost) equal size,
    in order, like the official 5 x 10,000. Deterministic output (mtimes 0).
    """
    path = Path(path)
    x_train, y_train, x_test, y_test = checked_cifar_splits(x_train, y_train, x_test, y_test)
    bounds = np.linspace(0, x_train.shape[0], 6).round().astype(int)
    members: list[tuple[str, bytes]] = [(CIFAR10_META_MEMBER, cifar_meta_pickle(int(bounds[1] - bounds[0])))]
    for i, name in enumerate(CIFAR10_TRAIN_MEMBERS):
        lo, hi = bounds[i], bounds[i + 1]
        members.append(
            (name, cifar_batch_pickle(x_train[lo:hi], y_train[lo:hi], f"training batch {i + 1} of 5", f"train{i + 1}"))
        )
    members.append((CIFAR10_TEST_MEMBER, cifar_batch_pickle(x_test, y_test, "testing batch 1 of 1", "test")))
    return write_deterministic_tar(path, CIFAR10_DIRNAME, members)


def write_deterministic_tar(path: str | os.PathLike, dirname: str, members: list[tuple[str, bytes]]) -> Path:
    """A gzip'd GNU tar at ``path`` holding the directory ``dirname`` and then ``members`` (name, bytes)
    in order; mtimes 0, so the same members give the same bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
            dir_info = tarfile.TarInfo(dirname)
            dir_info.type = tarfile.DIRTYPE
            dir_info.mode = 0o755
            dir_info.mtime = 0
            tar.addfile(dir_info)
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                info.mtime = 0
                tar.addfile(info, io.BytesIO(data))
    return path


def write_cifar10_standin(
    directory: str | os.PathLike, *, dataset: str, filename: str, seed: int, n_train: int, n_test: int
) -> list[Path]:
    """SYNTHETIC 32x32x3 images (:func:`labeldp.data.rawformats.standin.synthetic_image_splits`, 10 classes)
    written as ``filename`` in the CIFAR-10 python layout, after the ``STANDIN_SYNTHETIC`` marker."""
    x_train, y_train, x_test, y_test = synthetic_image_splits(
        num_classes=10, shape=(32, 32, 3), n_train=n_train, n_test=n_test, seed=seed
    )
    write_standin_marker(directory, dataset=dataset, seed=seed, n_train=n_train, n_test=n_test)
    return [write_cifar10_tar(Path(directory) / filename, x_train, y_train, x_test, y_test)]
