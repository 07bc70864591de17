"""Criteo Display Advertising Challenge data ("Criteo pCTR", 002 Section "Summary of Results" and
Appendix A): raw archive -> tabular ``.npz`` (layout: :mod:`labeldp.data.tabular`).

Raw format (the archive's README, as published by Criteo with the Kaggle challenge data):
``criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz`` (about 4.3 GB; older copies are
named ``dac.tar.gz``: same content, rename it) holds ``train.txt`` (45,840,617 lines, labelled), ``test.txt``
(the unlabelled day after the training period) and ``readme.txt``. ``train.txt`` is tab separated, NO
header, 40 columns::

    label, I1 .. I13, C1 .. C26

``label`` is 1 (clicked) or 0; ``I1..I13`` are integers ("mostly count features"; I2 has negative values);
``C1..C26`` are categorical values hashed onto 32 bits, written as 8 hex digits. "When a value is missing,
the field is just empty." "The rows are chronologically ordered." Any member whose base name is
``train.txt`` is read; ``test.txt`` is never used (002: "We only use the labeled training set").

Preparation (002; the quotes are its words):

* split: "We only use the labeled training set and split it chronologically into a 80%/10%/10%
  partition of train/validation/test sets. The reported metrics are on this labeled test split."
  In file order: the first ``n_train = floor(0.8 n)`` rows are train, the next ``n_val = floor(0.1 n)``
  validation, the remaining ``n - n_train - n_val`` test. ``subset=n`` keeps the first n rows of
  ``train.txt`` (chronological) BEFORE splitting (smoke profile, tests).
* label ``click`` = column 1, binary (``task = "binary_classification"``, range [0, 1]); 002 trains
  "binary classification models with binary cross entropy loss" and reports test AUC.
* integer features: 002 Appendix A: "For int features, we apply a log transform." The paper does not
  say which; this module uses ``t(x) = sign(x) * log(1 + |x|)``, i.e. the usual ``log(1 + x)`` for
  ``x >= 0`` (every feature but I2 in the real data), extended oddly to the negative values of I2
  (-1, -2, -3 stay distinct and ordered instead of being clipped to 0). A missing (empty) value becomes
  ``t = 0`` (the same as a raw 0; the common "fill with 0" convention), with no indicator column, so
  the model has one input per integer feature as in 002. The per-feature counts of missing and of
  negative values are recorded in ``metadata["preprocessing"]``. Then every column is standardised
  with the TRAINING split's mean and standard deviation (the format's convention; 002 mentions no
  scaling; an affine map the first dense layer can absorb).
* categorical features C1..C26: 002 Appendix A: "For categorical features, we map the category into
  a dense feature vector using an embedding layer ... embedding dimension ... int[2 V^0.25], where V
  is the number of unique tokens in each categorical feature". The embedding size belongs to the model;
  the data stores ``cat_vocab_sizes`` (index 0 included) so the model computes it. Vocabularies are
  built from the TRAINING split only, in increasing order of the 32-bit hash value (= sorted order of
  the hex strings); index 0 = missing or not seen in the training split. Values are interned to int32
  while streaming and renumbered at the end, so the result does not depend on the block size.
* sensitive features: 002: "Each example consists of 13 integer features int-feature-[1-13] and 26
  categorical features categorical-feature-[14-39]. ... we arbitrarily consider all even-numbered
  features as sensitive and all odd-numbered features as non-sensitive." The numbering runs over all
  39 features (I_k is feature k, C_k is feature 13 + k), so the sensitive ones are I2, I4, ..., I12
  and C1, C3, ..., C25 (features 14, 16, ..., 38): :data:`SENSITIVE_FEATURES`, stored in
  ``metadata["sensitive_features"]`` (the numbering in ``metadata["feature_numbers_002"]``).
  002 Appendix A adds that Hybrid treats "only ... the parameters in the sensitive categorical
  features' embedding layers as sensitive": how the sensitive INTEGER features enter the model is the
  model's decision.

Bounded memory. ``train.txt`` is read twice as a stream from the archive (tar stream, blocks of
:data:`BLOCK_BYTES` of complete lines; never the whole file): pass 1 counts the lines and checks every
line's field count and label, pass 2 parses each block (exact, vectorised over the bytes: pandas'
type inference would turn the hash ``0001e100`` into the number 1e100), applies the transform and the
interning and writes the rows straight into arrays preallocated for the row count of pass 1 (one array
per kind for all three splits; the splits are row ranges, saved as views, so no split is copied).
Bytes per row held: label 8 (float64, the format's dtype) + 13 x 4 (float32) + 26 x 4 (int32) = 164.
On top of that: the interning tables (12 bytes per distinct training value of each categorical
column), one parsed block (at most ~8 x :data:`BLOCK_BYTES` = 64 MiB: raw bytes, tab positions,
column temporaries) and, while saving, the format's validation (:func:`labeldp.data.tabular.save_prepared_tabular`),
which makes boolean temporaries of up to 26 bytes x ``n_train`` (~21 bytes per row);
``np.savez_compressed`` streams each array in 16 MiB pieces. Bound (:func:`expected_peak_increase_bytes`):
peak RSS increase <= 164 x rows + 26 x n_train + 12 x distinct training values + 8 x BLOCK_BYTES + 96 MiB.
For the full file (45,840,617 rows; ~30 million distinct training values over C1..C26, none dropped):
7.52 + 0.95 + 0.36 + 0.12 = ~9.0 GB above the interpreter (the parts do not all coexist: the
validation runs after the interning tables are freed; expect ~8.6 GB); plan for a 12 GB machine.
Measured on a stand-in (Python 3.11, numpy 2.4): 300,000 rows -> +113 MiB (bound 165 MiB), of which
47 MiB are the arrays. Time: ~1-1.5 s per 100,000 rows (both passes) plus ``np.savez_compressed``
(zlib, ~10 MB/s of arrays on a loaded core) plus the interning tables' sorted inserts (each block copies
the tables of the high-cardinality columns: a few minutes once C3, C12, C16, C21 hold millions of
values): roughly half an hour for the full file.
The measured peak of each run is recorded in ``metadata["preprocessing"]["peak_rss_bytes_before_save"]``
(``VmHWM`` of ``/proc/self/status``, the process's peak so far, so it includes what ran before in the
same process; ``resource.getrusage``'s ``ru_maxrss`` is only the fallback, because it carries the
parent's peak over ``exec``; ``peak_rss_bytes_at_start`` is the same figure when the preparation started).
"""

from __future__ import annotations

import gzip
import io
import os
import resource
import tarfile
import zlib
from pathlib import Path

import numpy as np

from .fetch import file_digests, locate_raw_file
from .rawformats import is_standin_dir
from .tabular import TabularDataError, save_prepared_tabular

__all__ = ["ARCHIVE", "MEMBER", "COLUMNS", "LABEL", "NUMERICAL_FEATURES", "CATEGORICAL_FEATURES",
           "FEATURE_NUMBERS_002", "SENSITIVE_FEATURES", "SPLIT_FRACTIONS", "BYTES_PER_ROW", "log_transform",
           "split_sizes", "expected_peak_increase_bytes", "prepare_dataset", "write_standin"]

ARCHIVE = "criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz"
OLD_ARCHIVE_NAME = "dac.tar.gz"
MEMBER = "train.txt"
TEST_MEMBER = "test.txt"
README_MEMBER = "readme.txt"
LABEL = "click"
NUMERICAL_FEATURES = tuple(f"I{k}" for k in range(1, 14))
CATEGORICAL_FEATURES = tuple(f"C{k}" for k in range(1, 27))
COLUMNS = (LABEL,) + NUMERICAL_FEATURES + CATEGORICAL_FEATURES
# 002: "int-feature-[1-13] and ... categorical-feature-[14-39]": one numbering over the 39 features.
FEATURE_NUMBERS_002 = {name: k for k, name in enumerate(NUMERICAL_FEATURES + CATEGORICAL_FEATURES, start=1)}
SENSITIVE_FEATURES = tuple(name for name, k in FEATURE_NUMBERS_002.items() if k % 2 == 0)
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
SOURCES = ("official", "synthetic_standin")
BLOCK_BYTES = 8 << 20  # bytes of complete lines parsed at a time (a parsed block holds ~4x this)
BYTES_PER_ROW = 8 + 4 * len(NUMERICAL_FEATURES) + 4 * len(CATEGORICAL_FEATURES)  # 164: the prepared arrays
VALIDATION_BYTES_PER_TRAIN_ROW = len(CATEGORICAL_FEATURES)  # bool temporaries of save_prepared_tabular
BYTES_PER_DISTINCT_VALUE = 12  # interning table: int64 key + int32 id
FIXED_OVERHEAD_BYTES = 96 << 20  # np.savez's 16 MiB write buffer and its copy, small tables, allocator slack (a fresh-clone CI measured 0.3 MiB over 64)
BLOCK_OVERHEAD_FACTOR = 8  # a parsed block (raw bytes, tokens, columns) holds at most ~8x BLOCK_BYTES
MIN_ROWS = 10  # floor(0.1 n) >= 1: every split non-empty

_FIX = ("the file is not the Display Advertising Challenge train.txt (40 tab-separated columns: label, I1..I13, "
        "C1..C26) or it is damaged; download the archive again (python -m labeldp.data.fetch criteo_pctr)")


def log_transform(x: np.ndarray) -> np.ndarray:
    """002's "log transform" of the integer features: ``sign(x) * log(1 + |x|)`` (``log(1 + x)`` for
    ``x >= 0``); NaN (missing) becomes 0. Returns float64."""
    x = np.asarray(x, dtype=np.float64)
    out = np.sign(x) * np.log1p(np.abs(x))
    return np.where(np.isnan(x), 0.0, out)


def expected_peak_increase_bytes(n_rows: int, n_distinct: int = 0) -> int:
    """Upper bound on the preparation's peak RSS above the process's size before it (bytes):
    ``164 n_rows`` (the arrays) ``+ 26 n_train`` (validation temporaries when saving) ``+ 12 n_distinct``
    (interning tables; ``n_distinct`` = distinct training values summed over C1..C26) ``+ 8 BLOCK_BYTES``
    (one parsed block) ``+ 96 MiB``. Full file (45,840,617 rows, ~30 million distinct values): ~9.0 GB."""
    n_train = split_sizes(n_rows)[0]
    return int(BYTES_PER_ROW * n_rows + VALIDATION_BYTES_PER_TRAIN_ROW * n_train + BYTES_PER_DISTINCT_VALUE * n_distinct
               + BLOCK_OVERHEAD_FACTOR * BLOCK_BYTES + FIXED_OVERHEAD_BYTES)


def split_sizes(n: int) -> tuple[int, int, int]:
    """(n_train, n_val, n_test) of 002's chronological 80/10/10 split of ``n`` rows, in file order."""
    n_train, n_val = (8 * n) // 10, n // 10
    return n_train, n_val, n - n_train - n_val


def _archive_path(raw_dir: Path) -> Path:
    found = locate_raw_file(raw_dir, (ARCHIVE,))
    if found is not None:
        return found
    direct = raw_dir / ARCHIVE
    hint = (f"; {raw_dir / OLD_ARCHIVE_NAME} is the same archive under its older name: rename it to {ARCHIVE}"
            if (raw_dir / OLD_ARCHIVE_NAME).is_file() else "")
    raise TabularDataError(f"criteo_pctr: {direct} not found; fetch it first (snakemake fetch_criteo_pctr, or "
                           f"python -m labeldp.data.fetch criteo_pctr --data-dir <data_dir>/raw){hint}")


def _open_member(archive: Path):
    """(tar, file object of train.txt) from a streaming read of the archive."""
    try:
        tar = tarfile.open(archive, mode="r|*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise TabularDataError(f"criteo_pctr: {archive} is not a readable tar archive ({exc}); "
                               "download it again") from exc
    try:
        info = next((m for m in tar if m.isfile() and Path(m.name).name == MEMBER), None)
    except (tarfile.TarError, OSError, EOFError) as exc:
        tar.close()
        raise TabularDataError(f"criteo_pctr: {archive} is not a readable tar archive ({exc}); "
                               "download it again") from exc
    if info is None:
        tar.close()
        raise TabularDataError(f"criteo_pctr: {archive} has no member {MEMBER}; expected the official archive "
                               f"({MEMBER}, {TEST_MEMBER}, {README_MEMBER})")
    return tar, tar.extractfile(info)


def _line(block: bytes, starts: np.ndarray, ends: np.ndarray, i: int) -> str:
    return block[starts[i]:ends[i]].decode("utf-8", "replace")


def _blocks(fh, limit: int | None):
    """Yields ``(first line number, bytes)`` of complete lines (at most ``limit`` lines in all), after
    checking every line's field count and label (exactly ``0`` or ``1``)."""
    line_no, carry, done = 1, b"", False
    while not done:
        try:
            data = fh.read(BLOCK_BYTES)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise TabularDataError(f"criteo_pctr: the archive ends or is damaged inside {MEMBER} after line "
                                   f"{line_no - 1} ({exc}); download the archive again") from exc
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
            data, carry = data[:cut + 1], data[cut + 1:]
        arr = np.frombuffer(data, np.uint8)
        ends = np.flatnonzero(arr == 10)
        if limit is not None and line_no - 1 + len(ends) >= limit:
            ends = ends[:limit - line_no + 1]
            data, done = data[:int(ends[-1]) + 1], True
            arr = arr[:len(data)]
        starts = np.concatenate([[0], ends[:-1] + 1])
        tabs = np.flatnonzero(arr == 9)
        fields = np.diff(np.searchsorted(tabs, ends), prepend=0) + 1
        bad = np.flatnonzero(fields != len(COLUMNS))
        if bad.size:
            i = int(bad[0])
            hint = " (39 columns: this looks like the unlabelled test.txt)" if fields[i] == len(COLUMNS) - 1 else ""
            raise TabularDataError(f"criteo_pctr: {MEMBER} line {line_no + i} has {int(fields[i])} tab-separated "
                                   f"fields, expected {len(COLUMNS)}{hint}: {_line(data, starts, ends, i)[:120]!r}; "
                                   f"{_FIX}")
        ok = ((arr[starts] == 48) | (arr[starts] == 49)) & (arr[starts + 1] == 9)
        bad = np.flatnonzero(~ok)
        if bad.size:
            i = int(bad[0])
            value = _line(data, starts, ends, i).split("\t", 1)[0]
            raise TabularDataError(f"criteo_pctr: {MEMBER} line {line_no + i} has label {value!r}, expected 0 or 1 "
                                   f"(clicked); {_FIX}")
        yield line_no, data
        line_no += len(ends)


def _count_rows(archive: Path, limit: int | None) -> int:
    tar, fh = _open_member(archive)
    with tar:
        return sum(block.count(b"\n") for _, block in _blocks(fh, limit))


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


def _parse_block(block: bytes, line_no: int):
    """(labels float64, integer features float64 with NaN for missing, categorical hashes int64 with -1
    for missing) of a block of complete lines whose field counts and labels :func:`_blocks` checked.
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
            text = block[start[bad]:end[bad]].decode("utf-8", "replace")
            want = ("an integer (decimal digits, optionally a leading -)" if is_int
                    else "a 32-bit hash in hex (up to 8 hex digits)")
            raise TabularDataError(f"criteo_pctr: {MEMBER} line {line_no + bad}: {col} is {text!r}, expected {want} "
                                   f"or an empty field; {_FIX}")
        if is_int:
            num[:, k - 1] = np.where(missing, np.nan, value)
        else:
            cat[:, k - 1 - len(NUMERICAL_FEATURES)] = np.where(missing, -1, value)
    return labels, num, cat


class _Interner:
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


def _peak_rss() -> tuple[int, str]:
    """(peak resident set size of this process in bytes, where it was read). ``VmHWM`` of
    ``/proc/self/status`` where it exists: ``getrusage``'s ``ru_maxrss`` is carried over ``exec`` from
    the parent (a process started by a large one reports the parent's peak), ``VmHWM`` is not."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024, "VmHWM"
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "ru_maxrss"  # Linux: KiB


def prepare_dataset(*, raw_dir: str | os.PathLike, out_path: str | os.PathLike, subset: int | None = None,
                    source: str) -> Path:
    """Raw Display Advertising Challenge archive -> prepared tabular ``.npz`` with train / validation / test.

    Args:
      raw_dir: directory holding ``criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz``
        (directly or listed in its ``MANIFEST.json``).
      out_path: the ``.npz`` to write (atomically; absent after any failure).
      subset: keep the first ``subset`` rows of ``train.txt`` before splitting (None: all); >= 10.
      source: ``"official"`` or ``"synthetic_standin"``; a raw directory with the ``STANDIN_SYNTHETIC``
        marker is always ``"synthetic_standin"``.

    Returns:
      ``out_path`` as a :class:`~pathlib.Path`.

    Raises:
      TabularDataError: archive missing or malformed; a line with a field count other than 40, a label
        other than 0/1, a non-integer I value or a non-hex C value (the message names the line); fewer
        than 10 rows.
    """
    if source not in SOURCES:
        raise TabularDataError(f"criteo_pctr: source must be one of {SOURCES}, got {source!r}")
    if subset is not None and int(subset) < MIN_ROWS:
        raise TabularDataError(f"criteo_pctr: subset must be >= {MIN_ROWS} rows (80/10/10 split, every part "
                               f"non-empty), got {subset}")
    rss_start, rss_source = _peak_rss()
    raw_dir = Path(raw_dir)
    archive = _archive_path(raw_dir)
    if is_standin_dir(raw_dir) or is_standin_dir(archive.parent):
        source = "synthetic_standin"
    limit = None if subset is None else int(subset)

    # pass 1: row count (and every line's field count and label checked before anything is allocated)
    n = _count_rows(archive, limit)
    if n < MIN_ROWS:
        raise TabularDataError(f"criteo_pctr: {MEMBER} in {archive} has {n} rows; at least {MIN_ROWS} are needed "
                               "for the 80/10/10 split")
    n_train, n_val, n_test = split_sizes(n)

    # pass 2: parse into preallocated arrays (rows in file order; the splits are row ranges)
    y = np.empty(n, np.float64)
    x_num = np.empty((n, len(NUMERICAL_FEATURES)), np.float32)
    x_cat = np.empty((n, len(CATEGORICAL_FEATURES)), np.int32)
    interners = [_Interner() for _ in CATEGORICAL_FEATURES]
    count, mean, m2 = 0, np.zeros(len(NUMERICAL_FEATURES)), np.zeros(len(NUMERICAL_FEATURES))  # training rows
    missing = np.zeros(len(NUMERICAL_FEATURES), np.int64)
    negative = np.zeros(len(NUMERICAL_FEATURES), np.int64)
    cat_missing = np.zeros(len(CATEGORICAL_FEATURES), np.int64)
    row = 0
    tar, fh = _open_member(archive)
    with tar:
        for line_no, block in _blocks(fh, n):
            labels, num, cat = _parse_block(block, line_no)
            m = len(labels)
            if row + m > n:
                raise TabularDataError(f"criteo_pctr: {MEMBER} in {archive} changed while it was read; run again")
            del block
            y[row:row + m] = labels
            missing += np.isnan(num).sum(axis=0)
            negative += (num < 0).sum(axis=0)
            t = log_transform(num)
            x_num[row:row + m] = t
            k = max(0, min(m, n_train - row))  # rows of this block in the training split
            if k:  # merge the block's mean and sum of squared deviations (Chan et al.; exact for constants)
                b_mean = t[:k].mean(axis=0)
                b_m2 = np.square(t[:k] - b_mean).sum(axis=0)
                delta, total = b_mean - mean, count + k
                mean = mean + delta * (k / total)
                m2 = m2 + b_m2 + np.square(delta) * (count * k / total)
                count = total
            cat_missing += (cat < 0).sum(axis=0)
            for j, interner in enumerate(interners):
                col = cat[:, j]
                if k:
                    x_cat[row:row + k, j] = interner.add(col[:k])
                if k < m:
                    x_cat[row + k:row + m, j] = interner.lookup(col[k:])
            row += m
            del labels, num, cat, t
    if row != n:
        raise TabularDataError(f"criteo_pctr: {MEMBER} in {archive} gave {row} rows on the second read, {n} on the "
                               "first; the file changed while it was read: run again")

    # vocabularies (training split only): first-seen ids -> rank of the hash value, 0 stays 0
    vocab_sizes = []
    step = 1 << 20  # rows per in-place pass (bounded temporaries)
    for j, interner in enumerate(interners):
        lut = interner.ranks()
        vocab_sizes.append(len(interner.keys) + 1)
        interners[j] = None
        for a in range(0, n, step):
            x_cat[a:a + step, j] = lut[x_cat[a:a + step, j]]
        del lut, interner
    # standardise with the training split's statistics, in place, block by block
    std = np.sqrt(m2 / n_train)
    std = np.where(std > 1e-12, std, 1.0)
    mean32, std32 = mean.astype(np.float32), std.astype(np.float32)
    for a in range(0, n, step):
        np.subtract(x_num[a:a + step], mean32, out=x_num[a:a + step])
        np.divide(x_num[a:a + step], std32, out=x_num[a:a + step])
    rss_before_save, _ = _peak_rss()

    a, b = n_train, n_train + n_val
    arrays = {"x_num_train": x_num[:a], "x_num_val": x_num[a:b], "x_num_test": x_num[b:],
              "x_cat_train": x_cat[:a], "x_cat_val": x_cat[a:b], "x_cat_test": x_cat[b:],
              "y_train": y[:a], "y_val": y[a:b], "y_test": y[b:]}
    metadata = {
        "dataset": "criteo_pctr", "task": "binary_classification", "source": source, "subset": subset,
        "label": LABEL, "label_lower": 0, "label_upper": 1, "label_integer": True,
        "numerical_features": list(NUMERICAL_FEATURES), "categorical_features": list(CATEGORICAL_FEATURES),
        "sensitive_features": list(SENSITIVE_FEATURES), "feature_numbers_002": dict(FEATURE_NUMBERS_002),
        "cat_vocab_sizes": vocab_sizes,
        "numerical_standardisation": {"mean": mean.tolist(), "std": std.tolist()},
        "split": {"kind": "chronological", "fractions": list(SPLIT_FRACTIONS), "n_rows": n, "n_train": n_train,
                  "n_val": n_val, "n_test": n_test,
                  "rule": "file order: first floor(0.8 n) rows train, next floor(0.1 n) validation, rest test"},
        "preprocessing": {
            "rows_read": n,
            "numerical_transform": "sign(x) * log(1 + |x|), then (t - train mean) / train std",
            "numerical_missing_rule": "empty -> t = 0 (as a raw 0) before standardising; no indicator column",
            "numerical_missing": {c: int(v) for c, v in zip(NUMERICAL_FEATURES, missing)},
            "numerical_negative": {c: int(v) for c, v in zip(NUMERICAL_FEATURES, negative)},
            "categorical_missing": {c: int(v) for c, v in zip(CATEGORICAL_FEATURES, cat_missing)},
            "categorical_rule": "vocabulary of the training split in hash order; 0 = missing or unseen",
            "block_bytes": BLOCK_BYTES,
            "peak_rss_bytes_at_start": rss_start,
            "peak_rss_bytes_before_save": rss_before_save,
            "expected_array_bytes": BYTES_PER_ROW * n,
            "expected_peak_increase_bytes": expected_peak_increase_bytes(n, sum(vocab_sizes) - len(vocab_sizes)),
            "peak_rss_source": rss_source,
            "peak_rss_note": ("peak RSS of the preparing process so far (VmHWM, else ru_maxrss); "
                              "save_prepared_tabular's validation adds up to 26 bytes x n_train afterwards"),
        },
        "raw_files": {archive.name: file_digests(archive)},
    }
    return save_prepared_tabular(out_path, arrays, metadata)


# ------------------------------------------------------------------------------ stand-in

# The planted signal: fixed tables (the same for every seed), so a stand-in is learnable by design.
_SIGNAL_SEED = 20140624  # the challenge's start date
_CARDINALITIES = (60, 250, 5000, 3000, 40, 8, 400, 80, 3, 1000, 500, 5000, 300, 12, 800, 4000, 10, 400, 300, 4,
                  4000, 10, 15, 2000, 50, 1500)
_CAT_MISSING = (0, 0, .03, .03, 0, .1, 0, 0, 0, 0, 0, .03, 0, 0, 0, .03, 0, 0, .4, .4, .03, .7, 0, .03, .4, .4)
_INT_MISSING = (.45, 0, .2, .2, .03, .22, .04, .001, .04, .45, .04, .75, .2)
_INT_LOGMEAN = (0.8, 3.0, 2.5, 1.8, 7.5, 4.0, 1.2, 2.4, 3.5, 0.3, 0.6, 0.2, 1.4)


def _standin_rows(rng: np.random.Generator, n: int, *, labelled: bool) -> str:
    fixed = np.random.default_rng(_SIGNAL_SEED)
    hashes = [fixed.choice(1 << 32, size=k, replace=False) for k in _CARDINALITIES]
    hexes = [np.array([f"{int(h):08x}" for h in hs], dtype=object) for hs in hashes]
    effect_c1, effect_c2 = fixed.normal(0, 1.0, _CARDINALITIES[0]), fixed.normal(0, 1.0, _CARDINALITIES[1])
    cols: list[list[str]] = []
    ints = np.floor(np.exp(rng.normal(_INT_LOGMEAN, 1.0, (n, 13)))).astype(np.int64) - 1
    ints = np.maximum(ints, 0)
    neg = rng.random(n) < 0.12
    ints[neg, 1] = -rng.integers(1, 4, int(neg.sum()))  # I2: -1, -2, -3 as in the real data
    int_missing = rng.random((n, 13)) < np.asarray(_INT_MISSING)
    codes = np.empty((n, 26), np.int64)
    for j, k in enumerate(_CARDINALITIES):
        p = 1.0 / np.arange(1, k + 1) ** 1.1
        codes[:, j] = rng.choice(k, size=n, p=p / p.sum())
    cat_missing = rng.random((n, 26)) < np.asarray(_CAT_MISSING)
    if labelled:
        t = log_transform(np.where(int_missing, np.nan, ints.astype(float)))
        logit = (-1.2 + 1.2 * effect_c1[codes[:, 0]] + 1.2 * effect_c2[codes[:, 1]]
                 + 0.6 * (t[:, 2] - 2.0) - 0.5 * (t[:, 1] - 2.0))
        click = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
        cols.append(np.where(click, "1", "0").tolist())
    for j in range(13):
        cols.append(np.where(int_missing[:, j], "", ints[:, j].astype(str)).tolist())
    for j in range(26):
        col = hexes[j][codes[:, j]]
        col[cat_missing[:, j]] = ""
        cols.append(col.tolist())
    return "".join(f"{line}\n" for line in map("\t".join, zip(*cols)))


def write_standin(directory: str | os.PathLike, *, n_rows: int, seed: int, n_train: int | None = None,
                  n_test: int | None = None) -> list[Path]:
    """Writes a SYNTHETIC ``criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz``
    (tests / CPU smoke only).

    Same members and layout as the official archive: ``train.txt`` (``n_rows`` lines, 40 tab-separated
    columns, no header), ``test.txt`` (``max(1, min(1000, n_rows // 10))`` lines without the label) and
    ``readme.txt`` (saying it is synthetic). Integer features are log-normal counts with Criteo-like
    missing rates (empty fields), I2 is -1..-3 in 12% of rows; categorical values are fixed random
    32-bit hashes in 8 hex digits with Zipf-like frequencies and some empty fields. PLANTED SIGNAL: the
    click probability is ``sigmoid(-1.2 + 1.2 T1[C1] + 1.2 T2[C2] + 0.6 (t(I3) - 2) - 0.5 (t(I2) - 2))``
    with ``t`` the log transform and fixed random tables ``T1``, ``T2`` (the same for every seed), so a
    logistic regression reaches a test AUC well above 0.5 (about 0.8). Vectorised: 300,000 rows take a
    few seconds. The ``STANDIN_SYNTHETIC`` marker is written first.

    Args:
      directory: output directory (created).
      n_rows: number of ``train.txt`` lines (>= 10).
      seed: random seed (output is deterministic).
      n_train, n_test: recorded in the marker (default: the 80/10/10 split's train and validation + test).

    Returns:
      ``[path of the archive]``.
    """
    from .rawformats import write_standin_marker

    if n_rows < MIN_ROWS:
        raise ValueError(f"n_rows must be >= {MIN_ROWS}")
    directory = Path(directory)
    tr, va, te = split_sizes(n_rows)
    write_standin_marker(directory, dataset="criteo_pctr", seed=seed,
                         n_train=n_train if n_train is not None else tr,
                         n_test=n_test if n_test is not None else va + te, n_rows=n_rows)
    rng = np.random.default_rng(seed)
    members = {
        README_MEMBER: (f"SYNTHETIC stand-in for the Criteo Display Advertising Challenge data (labeldp, seed {seed}); "
                        "NOT the real data. Same layout: label, I1..I13, C1..C26, tab separated.\n").encode(),
        MEMBER: _standin_rows(rng, n_rows, labelled=True).encode(),
        TEST_MEMBER: _standin_rows(rng, max(1, min(1000, n_rows // 10)), labelled=False).encode(),
    }
    path = directory / ARCHIVE
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=1) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)
    return [path]
