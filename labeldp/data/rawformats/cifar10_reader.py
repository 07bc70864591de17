"""CIFAR python archives: the CIFAR-10 layout's constants and reader, and the batch decoding every
CIFAR python archive shares (CIFAR-100's layout: :mod:`labeldp.data.rawformats.cifar100`).

The CIFAR-10 archive is a gzip'd tar with ``cifar-10-batches-py/data_batch_1..5``, ``test_batch`` and
``batches.meta``, each a Python 2 pickle (protocol 2) of a dict with ``data`` ((N, 3072)
uint8, rows of 1024 red, 1024 green, 1024 blue values) and ``labels``. The batches are
unpickled with :class:`RestrictedUnpickler`, which resolves only the globals a numpy-array
pickle needs and refuses everything else. Also holds :class:`RawSplits`, the decoded
train/test arrays. Re-exported by :mod:`labeldp.data.rawformats`.
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np

from labeldp.data.rawformats.splits import RawSplits

CIFAR10_DIRNAME = "cifar-10-batches-py"
CIFAR10_TRAIN_MEMBERS = tuple(f"{CIFAR10_DIRNAME}/data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST_MEMBER = f"{CIFAR10_DIRNAME}/test_batch"
CIFAR10_META_MEMBER = f"{CIFAR10_DIRNAME}/batches.meta"
CIFAR10_LABEL_NAMES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


class CifarFormatError(ValueError):
    """The archive does not have the layout of the official CIFAR-10 (or CIFAR-100) python archive."""


# ============================================================================== reading


def reconstruct_function():
    # numpy 2 keeps it in numpy._core.multiarray; numpy 1 in numpy.core.multiarray.
    return np.ndarray.__reduce__(np.zeros(0, dtype=np.uint8))[0]


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals a pickled numpy array needs; refuses everything else."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name} from a CIFAR batch: only numpy "
                "array reconstruction is allowed (the file is not an official CIFAR batch)"
            )
        if name == "_reconstruct":
            return reconstruct_function()
        return getattr(np, name)


def unpickle_batch(data: bytes, member: str) -> dict:
    try:
        obj = RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise CifarFormatError(f"{member}: cannot unpickle CIFAR batch ({exc})") from exc
    if not isinstance(obj, dict):
        raise CifarFormatError(f"{member}: expected a dict, got {type(obj).__name__}")
    # encoding='bytes' gives bytes keys for the official (Python 2) files.
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def decode_batch(entry: dict, member: str, *, label_key: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """A batch dict's images, NHWC uint8 (n, 32, 32, 3), and its ``label_key`` labels (int64): CIFAR-10's
    ``labels``, CIFAR-100's ``fine_labels`` or ``coarse_labels``."""
    if "data" not in entry or label_key not in entry:
        raise CifarFormatError(f"{member}: batch lacks 'data' or {label_key!r} (keys: {sorted(entry)})")
    data = np.asarray(entry["data"])
    labels = np.asarray(entry[label_key], dtype=np.int64).reshape(-1)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise CifarFormatError(f"{member}: 'data' must be (N, 3072) uint8, got {data.shape} {data.dtype}")
    if data.shape[0] != labels.shape[0]:
        raise CifarFormatError(f"{member}: {data.shape[0]} images but {labels.shape[0]} labels")
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # CHW rows -> NHWC
    return np.ascontiguousarray(images), labels


def read_cifar_members(
    path: str | os.PathLike,
    members: tuple[str, ...],
    *,
    label_key: str,
    dataset: str,
    layout: str,
    member_md5: dict[str, str] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Decode ``members`` of a CIFAR python archive (without extracting it to disk), in order, each as
    (images NHWC uint8, ``label_key`` labels int64).

    ``dataset`` (the registry id) and ``layout`` (the expected members, in words) make the errors say
    what to fetch; ``member_md5`` (member name -> md5) additionally checks each member's bytes.

    Raises:
      CifarFormatError: a missing file, not a tar, missing members, a member's md5, or a batch's content.
    """
    import hashlib

    path = Path(path)
    if not path.is_file():
        raise CifarFormatError(
            f"{path} does not exist; fetch it first (python -m labeldp.data.fetch {dataset} --data-dir DIR) "
            f"or write SYNTHETIC stand-ins (python -m labeldp.data.rawformats {dataset} --dir DIR)"
        )
    try:
        tar = tarfile.open(path, mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CifarFormatError(f"{path}: not a readable tar archive ({exc})") from exc
    with tar:
        names = set(tar.getnames())
        missing = [m for m in members if m not in names]
        if missing:
            raise CifarFormatError(
                f"{path}: missing members {missing}; expected the layout of {layout} "
                f"(fetch it with python -m labeldp.data.fetch {dataset} --data-dir DIR)"
            )

        def load(member: str) -> tuple[np.ndarray, np.ndarray]:
            info = tar.getmember(member)
            if not info.isfile():
                raise CifarFormatError(f"{path}: member {member} is not a regular file")
            fh = tar.extractfile(info)
            assert fh is not None
            raw = fh.read()
            if member_md5 and member in member_md5:
                got = hashlib.md5(raw).hexdigest()
                if got != member_md5[member]:
                    raise CifarFormatError(f"{path}: member {member} has md5 {got}, expected {member_md5[member]}")
            return decode_batch(unpickle_batch(raw, member), member, label_key=label_key)

        return [load(m) for m in members]


def read_cifar10_tar(path: str | os.PathLike, *, member_md5: dict[str, str] | None = None) -> RawSplits:
    """Read the official ``cifar-10-python.tar.gz`` without extracting it to disk.

    Returns :class:`RawSplits` with images NHWC uint8 (n, 32, 32, 3) and labels int64;
    the training set is ``data_batch_1`` .. ``data_batch_5`` concatenated in order.
    ``member_md5`` (member name -> md5) additionally checks each member's bytes, as the
    registry lists them for the official archive.
    """
    *train, (x_test, y_test) = read_cifar_members(
        path,
        CIFAR10_TRAIN_MEMBERS + (CIFAR10_TEST_MEMBER,),
        label_key="labels",
        dataset="cifar10",
        layout=f"the official cifar-10-python.tar.gz ({CIFAR10_DIRNAME}/data_batch_1..5, test_batch)",
        member_md5=member_md5,
    )
    x_train = np.concatenate([x for x, _ in train], axis=0)
    y_train = np.concatenate([y for _, y in train], axis=0)
    return RawSplits(x_train, y_train, x_test, y_test)
