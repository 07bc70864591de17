"""Reading the Criteo Display Advertising Challenge archive ("Criteo pCTR", 002 Section "Summary of
Results" and Appendix A): the raw format's names and columns and the streaming, exact reader of
``train.txt`` that :func:`labeldp.data.sources.criteo_pctr.prepare_dataset` runs (twice: counting, then parsing).

* the archive's and its members' names, the 40 columns (``label, I1 .. I13, C1 .. C26``) and
  :data:`BLOCK_BYTES`, the size of the blocks of complete lines read at a time;
* opening the archive as a tar stream (``archive_path``, ``open_member``);
* ``line_blocks``: blocks of complete lines, every line's field count and label checked;
* ``parse_block`` / ``_parse_field``: the exact parse of a block, vectorised over the bytes (decimal
  integers for I1..I13, 32-bit hex hashes for C1..C26; no type inference);
* ``Interner``: a categorical column's distinct values -> int32 ids (first-seen order), renumbered in
  hash order once the training split is read.

:mod:`labeldp.data.sources.criteo_pctr` documents the raw format, the preparation and its memory bound, and
re-exports every name here.
"""

from __future__ import annotations

import tarfile
import zlib
from pathlib import Path

import numpy as np

from labeldp.data.fetch import locate_raw_file
from labeldp.data.tabular import TabularDataError

__all__ = [
    "ARCHIVE",
    "OLD_ARCHIVE_NAME",
    "MEMBER",
    "TEST_MEMBER",
    "README_MEMBER",
    "LABEL",
    "NUMERICAL_FEATURES",
    "CATEGORICAL_FEATURES",
    "COLUMNS",
    "BLOCK_BYTES",
]

ARCHIVE = "criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz"
OLD_ARCHIVE_NAME = "dac.tar.gz"
MEMBER = "train.txt"
TEST_MEMBER = "test.txt"
README_MEMBER = "readme.txt"
LABEL = "click"
NUMERICAL_FEATURES = tuple(f"I{k}" for k in range(1, 14))
CATEGORICAL_FEATURES = tuple(f"C{k}" for k in range(1, 27))
COLUMNS = (LABEL,) + NUMERICAL_FEATURES + CATEGORICAL_FEATURES
BLOCK_BYTES = 8 << 20  # bytes of complete lines parsed at a time (a parsed block holds ~4x this)
MIN_ROWS = 10  # floor(0.1 n) >= 1: every split non-empty


def log_transform(x: np.ndarray) -> np.ndarray:
    """002's "log transform" of the integer features: ``sign(x) * log(1 + |x|)`` (``log(1 + x)`` for
    ``x >= 0``); NaN (missing) becomes 0. Returns float64."""
    x = np.asarray(x, dtype=np.float64)
    out = np.sign(x) * np.log1p(np.abs(x))
    return np.where(np.isnan(x), 0.0, out)


def split_sizes(n: int) -> tuple[int, int, int]:
    """(n_train, n_val, n_test) of 002's chronological 80/10/10 split of ``n`` rows, in file order."""
    n_train, n_val = (8 * n) // 10, n // 10
    return n_train, n_val, n - n_train - n_val


_FIX = (
    "the file is not the Display Advertising Challenge train.txt (40 tab-separated columns: label, I1..I13, "
    "C1..C26) or it is damaged; download the archive again (python -m labeldp.data.fetch criteo_pctr)"
)


def archive_path(raw_dir: Path) -> Path:
    found = locate_raw_file(raw_dir, (ARCHIVE,))
    if found is not None:
        return found
    direct = raw_dir / ARCHIVE
    hint = (
        f"; {raw_dir / OLD_ARCHIVE_NAME} is the same archive under its older name: rename it to {ARCHIVE}"
        if (raw_dir / OLD_ARCHIVE_NAME).is_file()
        else ""
    )
    raise TabularDataError(
        f"criteo_pctr: {direct} not found; fetch it first (snakemake fetch_criteo_pctr, or "
        f"python -m labeldp.data.fetch criteo_pctr --data-dir <data_dir>/raw){hint}"
    )


def open_member(archive: Path):
    """(tar, file object of train.txt) from a streaming read of the archive."""
    try:
        tar = tarfile.open(archive, mode="r|*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise TabularDataError(
            f"criteo_pctr: {archive} is not a readable tar archive ({exc}); download it again"
        ) from exc
    try:
        info = next((m for m in tar if m.isfile() and Path(m.name).name == MEMBER), None)
    except (tarfile.TarError, OSError, EOFError) as exc:
        tar.close()
        raise TabularDataError(
            f"criteo_pctr: {archive} is not a readable tar archive ({exc}); download it again"
        ) from exc
    if info is None:
        tar.close()
        raise TabularDataError(
            f"criteo_pctr: {archive} has no member {MEMBER}; expected the official archive "
            f"({MEMBER}, {TEST_MEMBER}, {README_MEMBER})"
        )
    return tar, tar.extractfile(info)


def _line(block: bytes, starts: np.ndarray, ends: np.ndarray, i: int) -> str:
    return block[starts[i] : ends[i]].decode("utf-8", "replace")


def line_blocks(fh, limit: int | None):
    """Yields ``(first line number, bytes)`` of complete lines (at most ``limit`` lines in all), after
    checking every line's field count and label (exactly ``0`` or ``1``)."""
    line_no, carry, done = 1, b"", False
    while not done:
        try:
            data = fh.read(BLOCK_BYTES)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise TabularDataError(
                f"criteo_pctr: the archive ends or is damaged inside {MEMBER} after line "
                f"{line_no - 1} ({exc}); download the archive again"
            ) from exc
        if not data:
            if not carry:
                return
            data, carry, done = carry + b"\n", b"", True
        else:
            data = carry + data
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            data, carry = data[: cut + 1], data[cut + 1 :]
        arr = np.frombuffer(data, np.uint8)
        ends = np.flatnonzero(arr == 10)
        if limit is not None and line_no - 1 + len(ends) >= limit:
            ends = ends[: limit - line_no + 1]
            data, done = data[: int(ends[-1]) + 1], True
            arr = arr[: len(data)]
        starts = np.concatenate([[0], ends[:-1] + 1])
        tabs = np.flatnonzero(arr == 9)
        fields = np.diff(np.searchsorted(tabs, ends), prepend=0) + 1
        bad = np.flatnonzero(fields != len(COLUMNS))
        if bad.size:
            i = int(bad[0])
            hint = " (39 columns: this looks like the unlabelled test.txt)" if fields[i] == len(COLUMNS) - 1 else ""
            raise TabularDataError(
                f"criteo_pctr: {MEMBER} line {line_no + i} has {int(fields[i])} tab-separated "
                f"fields, expected {len(COLUMNS)}{hint}: {_line(data, starts, ends, i)[:120]!r}; "
                f"{_FIX}"
            )
        ok = ((arr[starts] == 48) | (arr[starts] == 49)) & (arr[starts + 1] == 9)
        bad = np.flatnonzero(~ok)
        if bad.size:
            i = int(bad[0])
            value = _line(data, starts, ends, i).split("\t", 1)[0]
            raise TabularDataError(
                f"criteo_pctr: {MEMBER} line {line_no + i} has label {value!r}, expected 0 or 1 (clicked); {_FIX}"
            )
        yield line_no, data
        line_no += len(ends)


def count_rows(archive: Path, limit: int | None) -> int:
    tar, fh = open_member(archive)
    with tar:
        return sum(block.count(b"\n") for _, block in line_blocks(fh, limit))


def _digit_table(digits: str) -> np.ndarray:
    lut = np.full(256, 255, np.uint8)
    for value, ch in enumerate(digits):
        lut[ord(ch)] = value
        lut[ord(ch.upper())] = value
    return lut


_DEC = _digit_table("0123456789")
_HEX = _digit_table("0123456789abcdef")
_MAX_DIGITS = {10: 18, 16: 8}  # int64-safe decimal; 32-bit hashes


def _parse_field(arr: np.ndarray, start: np.ndarray, end: np.ndarray, base: int, *, signed: bool):
    """Vectorised exact parse of one column of a block: (int64 values, missing mask, first bad row or -1)."""
    length = end - start
    missing = length == 0
    neg = np.zeros(len(start), bool)
    if signed:
        neg = ~missing & (arr[start] == 45)  # '-'
    first, ndig = start + neg, length - neg
    lut = _DEC if base == 10 else _HEX
    bad = (~missing & (ndig <= 0)) | (ndig > _MAX_DIGITS[base])
    value = np.zeros(len(start), np.int64)
    for d in range(int(min(ndig.max(initial=0), _MAX_DIGITS[base]))):
        active = ndig > d
        digit = lut[arr[np.where(active, first + d, 0)]].astype(np.int64)
        bad |= active & (digit == 255)
        value = np.where(active, value * base + digit, value)
    rows = np.flatnonzero(bad)
    return np.where(neg, -value, value), missing, (int(rows[0]) if rows.size else -1)


def parse_block(block: bytes, line_no: int):
    """(labels float64, integer features float64 with NaN for missing, categorical hashes int64 with -1
    for missing) of a block of complete lines whose field counts and labels :func:`line_blocks` checked.
    Exact and vectorised over the bytes (no type inference: pandas would read the hash ``0001e100`` as
    the number 1e100)."""
    arr = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(arr == 10)
    n = len(ends)
    tabs = np.flatnonzero(arr == 9).reshape(n, len(COLUMNS) - 1)
    line_starts = np.concatenate([[0], ends[:-1] + 1])
    labels = (arr[line_starts] - 48).astype(np.float64)
    num = np.empty((n, len(NUMERICAL_FEATURES)), np.float64)
    cat = np.empty((n, len(CATEGORICAL_FEATURES)), np.int64)
    for k, col in enumerate(COLUMNS[1:], start=1):
        start, end = tabs[:, k - 1] + 1, (tabs[:, k] if k < len(COLUMNS) - 1 else ends)
        is_int = k <= len(NUMERICAL_FEATURES)
        value, missing, bad = _parse_field(arr, start, end, 10 if is_int else 16, signed=is_int)
        if bad >= 0:
            text = block[start[bad] : end[bad]].decode("utf-8", "replace")
            want = (
                "an integer (decimal digits, optionally a leading -)"
                if is_int
                else "a 32-bit hash in hex (up to 8 hex digits)"
            )
            raise TabularDataError(
                f"criteo_pctr: {MEMBER} line {line_no + bad}: {col} is {text!r}, expected {want} "
                f"or an empty field; {_FIX}"
            )
        if is_int:
            num[:, k - 1] = np.where(missing, np.nan, value)
        else:
            cat[:, k - 1 - len(NUMERICAL_FEATURES)] = np.where(missing, -1, value)
    return labels, num, cat


class Interner:
    """Distinct 32-bit values of one categorical column -> int32 ids in first-seen order (0 = missing),
    kept as a sorted key array with the ids alongside (12 bytes per distinct value)."""

    def __init__(self):
        self.keys = np.empty(0, np.int64)
        self.ids = np.empty(0, np.int32)
        self.next_id = 1

    def _find(self, raw: np.ndarray):
        present = raw >= 0
        u, inv = np.unique(raw[present], return_inverse=True)
        pos = np.searchsorted(self.keys, u)
        found = np.zeros(len(u), bool)
        inside = pos < len(self.keys)
        found[inside] = self.keys[pos[inside]] == u[inside]
        uid = np.zeros(len(u), np.int32)
        uid[found] = self.ids[pos[found]]
        return present, u, inv, pos, found, uid

    def add(self, raw: np.ndarray) -> np.ndarray:
        present, u, inv, pos, found, uid = self._find(raw)
        new = ~found
        k = int(new.sum())
        if k:
            new_ids = np.arange(self.next_id, self.next_id + k, dtype=np.int32)
            self.next_id += k
            uid[new] = new_ids
            self.keys = np.insert(self.keys, pos[new], u[new])
            self.ids = np.insert(self.ids, pos[new], new_ids)
        out = np.zeros(len(raw), np.int32)
        out[present] = uid[inv]
        return out

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        """Ids of values already seen, 0 for missing or unseen (the vocabulary is frozen)."""
        present, _, inv, _, _, uid = self._find(raw)
        out = np.zeros(len(raw), np.int32)
        out[present] = uid[inv]
        return out

    def ranks(self) -> np.ndarray:
        """First-seen id -> 1 + rank of the value among the distinct values (0 -> 0)."""
        lut = np.zeros(self.next_id, np.int32)
        lut[self.ids] = np.arange(1, len(self.ids) + 1, dtype=np.int32)
        return lut
