"""Parsers and writers of the exact raw formats the datasets are published in.

* IDX (MNIST, Fashion-MNIST, KMNIST): big-endian header ``00 00 <type> <ndim>`` followed
  by ``ndim`` big-endian int32 sizes and the data; gzip-compressed or plain.
  Labels have magic 2049 (ubyte, 1 dim), images 2051 (ubyte, 3 dims).
* CIFAR-10 python (``cifar-10-python.tar.gz``): a gzip'd tar with
  ``cifar-10-batches-py/data_batch_1..5``, ``test_batch`` and ``batches.meta``, each a
  Python 2 pickle (protocol 2) of a dict with ``data`` ((N, 3072) uint8, each row the
  1024 red, then 1024 green, then 1024 blue values of a 32x32 image in row-major order)
  and ``labels`` (list of N ints).

Pickle trust: the CIFAR batches are unpickled with :class:`_RestrictedUnpickler`, which
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
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import struct
import tarfile
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

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

IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned byte, 1 dimension
IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned byte, 3 dimensions

STANDIN_MARKER = "STANDIN_SYNTHETIC"

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


class IDXFormatError(ValueError):
    """The file is not a well-formed IDX file (bad magic number, truncated, ...)."""


class CifarFormatError(ValueError):
    """The archive does not have the layout of the official CIFAR-10 python archive."""


class RawSplits(NamedTuple):
    """Decoded train/test arrays: images NHWC uint8, labels int64."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


# ===================================================================================== IDX

# IDX type code -> big-endian numpy dtype
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {np.dtype(v).newbyteorder("=").str[1:]: k for k, v in _IDX_DTYPES.items()}

_GZIP_MAGIC = b"\x1f\x8b"


def _read_maybe_gzip(path: Path) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        if head == _GZIP_MAGIC:
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
    buf = _read_maybe_gzip(path)
    if len(buf) < 4:
        raise IDXFormatError(f"{path}: {len(buf)} bytes is too short for an IDX header")
    magic = struct.unpack(">i", buf[:4])[0]
    zero, type_code, ndim = struct.unpack(">HBB", buf[:4])
    if zero != 0 or type_code not in _IDX_DTYPES or ndim == 0:
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
    dtype = _IDX_DTYPES[type_code]
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
    if key not in _IDX_CODES:
        raise TypeError(f"IDX cannot store dtype {array.dtype}; use one of {sorted(_IDX_CODES)}")
    if array.ndim == 0 or array.ndim > 255:
        raise ValueError(f"IDX needs 1..255 dimensions, got {array.ndim}")
    code = _IDX_CODES[key]
    header = struct.pack(">HBB", 0, code, array.ndim) + struct.pack(">" + "i" * array.ndim, *array.shape)
    payload = header + np.ascontiguousarray(array, dtype=_IDX_DTYPES[code]).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
            gz.write(payload)
    else:
        path.write_bytes(payload)
    return path


# ============================================================================ CIFAR-10

def _reconstruct_function():
    # numpy 2 keeps it in numpy._core.multiarray; numpy 1 in numpy.core.multiarray.
    return np.ndarray.__reduce__(np.zeros(0, dtype=np.uint8))[0]


class _RestrictedUnpickler(pickle.Unpickler):
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
                "array reconstruction is allowed (the file is not an official CIFAR-10 batch)"
            )
        if name == "_reconstruct":
            return _reconstruct_function()
        return getattr(np, name)


def _unpickle_batch(data: bytes, member: str) -> dict:
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise CifarFormatError(f"{member}: cannot unpickle CIFAR batch ({exc})") from exc
    if not isinstance(obj, dict):
        raise CifarFormatError(f"{member}: expected a dict, got {type(obj).__name__}")
    # encoding='bytes' gives bytes keys for the official (Python 2) files.
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def _decode_batch(entry: dict, member: str) -> tuple[np.ndarray, np.ndarray]:
    if "data" not in entry or "labels" not in entry:
        raise CifarFormatError(f"{member}: batch lacks 'data' or 'labels' (keys: {sorted(entry)})")
    data = np.asarray(entry["data"])
    labels = np.asarray(entry["labels"], dtype=np.int64).reshape(-1)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise CifarFormatError(f"{member}: 'data' must be (N, 3072) uint8, got {data.shape} {data.dtype}")
    if data.shape[0] != labels.shape[0]:
        raise CifarFormatError(f"{member}: {data.shape[0]} images but {labels.shape[0]} labels")
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # CHW rows -> NHWC
    return np.ascontiguousarray(images), labels


def read_cifar10_tar(
    path: str | os.PathLike, *, member_md5: dict[str, str] | None = None
) -> RawSplits:
    """Read the official ``cifar-10-python.tar.gz`` without extracting it to disk.

    Returns :class:`RawSplits` with images NHWC uint8 (n, 32, 32, 3) and labels int64;
    the training set is ``data_batch_1`` .. ``data_batch_5`` concatenated in order.
    ``member_md5`` (member name -> md5) additionally checks each member's bytes, as the
    registry lists them for the official archive.
    """
    import hashlib

    path = Path(path)
    try:
        tar = tarfile.open(path, mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CifarFormatError(f"{path}: not a readable tar archive ({exc})") from exc
    with tar:
        names = set(tar.getnames())
        needed = CIFAR10_TRAIN_MEMBERS + (CIFAR10_TEST_MEMBER,)
        missing = [m for m in needed if m not in names]
        if missing:
            raise CifarFormatError(
                f"{path}: missing members {missing}; expected the layout of the official "
                f"cifar-10-python.tar.gz ({CIFAR10_DIRNAME}/data_batch_1..5, test_batch)"
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
                    raise CifarFormatError(
                        f"{path}: member {member} has md5 {got}, expected {member_md5[member]}"
                    )
            return _decode_batch(_unpickle_batch(raw, member), member)

        train = [load(m) for m in CIFAR10_TRAIN_MEMBERS]
        x_test, y_test = load(CIFAR10_TEST_MEMBER)
    x_train = np.concatenate([x for x, _ in train], axis=0)
    y_train = np.concatenate([y for _, y in train], axis=0)
    return RawSplits(x_train, y_train, x_test, y_test)


# --- a Python 2 style (protocol 2, str = BINSTRING) pickle writer, as in the official files


def _p2_str(value: str | bytes) -> bytes:
    b = value.encode("latin1") if isinstance(value, str) else bytes(value)
    if len(b) < 256:
        return pickle.SHORT_BINSTRING + bytes([len(b)]) + b
    return pickle.BINSTRING + struct.pack("<i", len(b)) + b


def _p2_int(v: int) -> bytes:
    if 0 <= v < 256:
        return pickle.BININT1 + bytes([v])
    if 0 <= v < 65536:
        return pickle.BININT2 + struct.pack("<H", v)
    if -(2**31) <= v < 2**31:
        return pickle.BININT + struct.pack("<i", v)
    raise ValueError(f"integer {v} out of int32 range")


def _p2_tuple(items: list[bytes]) -> bytes:
    n = len(items)
    body = b"".join(items)
    if n == 0:
        return pickle.EMPTY_TUPLE
    if n <= 3:
        return body + (pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3)[n - 1]
    return pickle.MARK + body + pickle.TUPLE


def _p2_uint8_matrix(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a, dtype=np.uint8)
    out = b"cnumpy.core.multiarray\n_reconstruct\n"
    out += _p2_tuple([b"cnumpy\nndarray\n", _p2_tuple([_p2_int(0)]), _p2_str("b")]) + pickle.REDUCE
    dtype = b"cnumpy\ndtype\n" + _p2_tuple([_p2_str("u1"), _p2_int(0), _p2_int(1)]) + pickle.REDUCE
    dtype_state = _p2_tuple(
        [_p2_int(3), _p2_str("|"), pickle.NONE, pickle.NONE, pickle.NONE, _p2_int(-1), _p2_int(-1), _p2_int(0)]
    )
    dtype += dtype_state + pickle.BUILD
    state = _p2_tuple(
        [_p2_int(1), _p2_tuple([_p2_int(int(d)) for d in a.shape]), dtype, pickle.NEWFALSE, _p2_str(a.tobytes())]
    )
    return out + state + pickle.BUILD


def _p2_list(items: list[bytes]) -> bytes:
    if not items:
        return pickle.EMPTY_LIST
    return pickle.EMPTY_LIST + pickle.MARK + b"".join(items) + pickle.APPENDS


def _p2_dict(pairs: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(k + v for k, v in pairs)
    return pickle.PROTO + b"\x02" + pickle.EMPTY_DICT + pickle.MARK + body + pickle.SETITEMS + pickle.STOP


def _cifar_batch_pickle(x_nhwc: np.ndarray, y: np.ndarray, batch_label: str, prefix: str) -> bytes:
    x_nhwc = np.asarray(x_nhwc, dtype=np.uint8)
    rows = x_nhwc.transpose(0, 3, 1, 2).reshape(x_nhwc.shape[0], 3072)  # NHWC -> CHW rows
    labels = [int(v) for v in np.asarray(y).reshape(-1)]
    filenames = [f"{prefix}_{i:05d}.png" for i in range(len(labels))]
    return _p2_dict(
        [
            (_p2_str("batch_label"), _p2_str(batch_label)),
            (_p2_str("labels"), _p2_list([_p2_int(v) for v in labels])),
            (_p2_str("data"), _p2_uint8_matrix(rows)),
            (_p2_str("filenames"), _p2_list([_p2_str(f) for f in filenames])),
        ]
    )


def _cifar_meta_pickle(num_cases_per_batch: int) -> bytes:
    return _p2_dict(
        [
            (_p2_str("num_cases_per_batch"), _p2_int(num_cases_per_batch)),
            (_p2_str("label_names"), _p2_list([_p2_str(n) for n in CIFAR10_LABEL_NAMES])),
            (_p2_str("num_vis"), _p2_int(3072)),
        ]
    )


def _check_images(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], what: str) -> None:
    if x.dtype != np.uint8 or x.ndim != 4 or tuple(x.shape[1:]) != shape:
        raise ValueError(f"{what}: images must be uint8 (n, {', '.join(map(str, shape))}), got {x.shape} {x.dtype}")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"{what}: need one label per image, got {y.shape} labels for {x.shape[0]} images")


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
    x_train, x_test = np.asarray(x_train), np.asarray(x_test)
    y_train, y_test = np.asarray(y_train).reshape(-1), np.asarray(y_test).reshape(-1)
    _check_images(x_train, y_train, (32, 32, 3), "train")
    _check_images(x_test, y_test, (32, 32, 3), "test")
    bounds = np.linspace(0, x_train.shape[0], 6).round().astype(int)
    members: list[tuple[str, bytes]] = [
        (CIFAR10_META_MEMBER, _cifar_meta_pickle(int(bounds[1] - bounds[0])))
    ]
    for i, name in enumerate(CIFAR10_TRAIN_MEMBERS):
        lo, hi = bounds[i], bounds[i + 1]
        members.append(
            (name, _cifar_batch_pickle(x_train[lo:hi], y_train[lo:hi], f"training batch {i + 1} of 5", f"train{i + 1}"))
        )
    members.append((CIFAR10_TEST_MEMBER, _cifar_batch_pickle(x_test, y_test, "testing batch 1 of 1", "test")))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
            dir_info = tarfile.TarInfo(CIFAR10_DIRNAME)
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


# ===================================================================== synthetic stand-ins


def _synthetic_images(
    rng: np.random.Generator, labels: np.ndarray, templates: np.ndarray
) -> np.ndarray:
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


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".part-", dir=path.parent)
    current = os.umask(0)
    os.umask(current)
    os.chmod(tmp, 0o666 & ~current)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_standin_marker(directory: str | os.PathLike, *, dataset: str, seed: int, n_train: int, n_test: int,
                         **extra) -> Path:
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
    _atomic_write_bytes(directory / STANDIN_MARKER, (json.dumps(marker, indent=2) + "\n").encode())
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
    tabular_writers = {"criteo_search_targz": "criteo_search", "ipums_extract": "census1940",
                       "criteo_attribution_zip": "criteo_attribution",
                       "criteo_dac_targz": "criteo_pctr"}
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
