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

The raw format's names and the streaming reader (block reader, field parser, interning tables) are in
:mod:`labeldp.data.rawformats.criteo_dac`, the synthetic stand-in writer in
:mod:`labeldp.data.rawformats.criteo_dac_standin`; this module re-exports their public names.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import numpy as np

from labeldp.data.dataset_spec import DatasetSpec, RemoteFile

from labeldp.data.fetch import file_digests
from labeldp.data.rawformats import is_standin_dir
from labeldp.data.tabular import TabularDataError, save_prepared_tabular
from labeldp.data.rawformats.criteo_dac import (  # the raw format and its streaming reader (their own module)
    ARCHIVE,
    BLOCK_BYTES,
    CATEGORICAL_FEATURES,
    COLUMNS,
    LABEL,
    MEMBER,
    MIN_ROWS,
    NUMERICAL_FEATURES,
    OLD_ARCHIVE_NAME,
    README_MEMBER,
    TEST_MEMBER,
    log_transform,
    split_sizes,
    archive_path,
    line_blocks,
    count_rows,
    Interner,
    open_member,
    parse_block,
)
from labeldp.data.rawformats import (
    criteo_dac as _reader,
)  # runtime reads of BLOCK_BYTES go through the reader, which uses it
from labeldp.data.rawformats.criteo_dac_standin import write_standin  # the stand-in writer (its own module)

__all__ = [
    "SPEC",
    "ARCHIVE",
    "MEMBER",
    "COLUMNS",
    "LABEL",
    "NUMERICAL_FEATURES",
    "CATEGORICAL_FEATURES",
    "FEATURE_NUMBERS_002",
    "SENSITIVE_FEATURES",
    "SPLIT_FRACTIONS",
    "BYTES_PER_ROW",
    "log_transform",
    "split_sizes",
    "expected_peak_increase_bytes",
    "prepare_dataset",
    "write_standin",
]

SPEC = DatasetSpec(
    name="criteo_pctr",
    title="Criteo Display Advertising Challenge (Kaggle 2014; 002's Criteo pCTR data)",
    files=(
        RemoteFile(
            filename="criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz",
            url="https://go.criteo.net/criteo-research-kaggle-display-advertising-challenge-dataset.tar.gz",
        ),
    ),
    kind="tabular",
    raw_format="criteo_dac_targz",
    num_classes=2,
    input_shape=None,
    homepage="https://ailab.criteo.com/ressources/",
    license="Criteo terms for research use (see the archive's readme.txt and the Criteo AI Lab page)",
    citation=(
        "Jean-Baptiste Tien, Olivier Chapelle, joycenv (2014). Display Advertising Challenge. Kaggle. "
        "https://kaggle.com/competitions/criteo-display-ad-challenge"
    ),
    label="click",
    standin_allowed=True,
    notes=(
        "No published checksum: the sha256 is recorded on first download (sidecar <file>.sha256) "
        "and can be pinned in config. The archive (~4.3 GB) holds train.txt (45,840,617 labelled lines), "
        "test.txt (unlabelled, unused) and readme.txt; older copies are named dac.tar.gz (same archive: "
        "rename it). Preparation streams the archive; the full file needs ~9 GB of memory."
    ),
)


# 002: "int-feature-[1-13] and ... categorical-feature-[14-39]": one numbering over the 39 features.
FEATURE_NUMBERS_002 = {name: k for k, name in enumerate(NUMERICAL_FEATURES + CATEGORICAL_FEATURES, start=1)}
SENSITIVE_FEATURES = tuple(name for name, k in FEATURE_NUMBERS_002.items() if k % 2 == 0)
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
SOURCES = ("official", "synthetic_standin")
BYTES_PER_ROW = 8 + 4 * len(NUMERICAL_FEATURES) + 4 * len(CATEGORICAL_FEATURES)  # 164: the prepared arrays
VALIDATION_BYTES_PER_TRAIN_ROW = len(CATEGORICAL_FEATURES)  # bool temporaries of save_prepared_tabular
BYTES_PER_DISTINCT_VALUE = 12  # interning table: int64 key + int32 id
FIXED_OVERHEAD_BYTES = (
    96 << 20
)  # np.savez's 16 MiB write buffer and its copy, small tables, allocator slack (a fresh-clone CI measured 0.3 MiB over 64)
BLOCK_OVERHEAD_FACTOR = 8  # a parsed block (raw bytes, tokens, columns) holds at most ~8x BLOCK_BYTES


def expected_peak_increase_bytes(n_rows: int, n_distinct: int = 0) -> int:
    """Upper bound on the preparation's peak RSS above the process's size before it (bytes):
    ``164 n_rows`` (the arrays) ``+ 26 n_train`` (validation temporaries when saving) ``+ 12 n_distinct``
    (interning tables; ``n_distinct`` = distinct training values summed over C1..C26) ``+ 8 BLOCK_BYTES``
    (one parsed block) ``+ 96 MiB``. Full file (45,840,617 rows, ~30 million distinct values): ~9.0 GB."""
    n_train = split_sizes(n_rows)[0]
    return int(
        BYTES_PER_ROW * n_rows
        + VALIDATION_BYTES_PER_TRAIN_ROW * n_train
        + BYTES_PER_DISTINCT_VALUE * n_distinct
        + BLOCK_OVERHEAD_FACTOR * _reader.BLOCK_BYTES
        + FIXED_OVERHEAD_BYTES
    )


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


def prepare_dataset(
    *, raw_dir: str | os.PathLike, out_path: str | os.PathLike, subset: int | None = None, source: str
) -> Path:
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
        raise TabularDataError(
            f"criteo_pctr: subset must be >= {MIN_ROWS} rows (80/10/10 split, every part non-empty), got {subset}"
        )
    rss_start, rss_source = _peak_rss()
    raw_dir = Path(raw_dir)
    archive = archive_path(raw_dir)
    if is_standin_dir(raw_dir) or is_standin_dir(archive.parent):
        source = "synthetic_standin"
    limit = None if subset is None else int(subset)

    # pass 1: row count (and every line's field count and label checked before anything is allocated)
    n = count_rows(archive, limit)
    if n < MIN_ROWS:
        raise TabularDataError(
            f"criteo_pctr: {MEMBER} in {archive} has {n} rows; at least {MIN_ROWS} are needed for the 80/10/10 split"
        )
    n_train, n_val, n_test = split_sizes(n)

    # pass 2: parse into preallocated arrays (rows in file order; the splits are row ranges)
    y = np.empty(n, np.float64)
    x_num = np.empty((n, len(NUMERICAL_FEATURES)), np.float32)
    x_cat = np.empty((n, len(CATEGORICAL_FEATURES)), np.int32)
    interners = [Interner() for _ in CATEGORICAL_FEATURES]
    count, mean, m2 = 0, np.zeros(len(NUMERICAL_FEATURES)), np.zeros(len(NUMERICAL_FEATURES))  # training rows
    missing = np.zeros(len(NUMERICAL_FEATURES), np.int64)
    negative = np.zeros(len(NUMERICAL_FEATURES), np.int64)
    cat_missing = np.zeros(len(CATEGORICAL_FEATURES), np.int64)
    row = 0
    tar, fh = open_member(archive)
    with tar:
        for line_no, block in line_blocks(fh, n):
            labels, num, cat = parse_block(block, line_no)
            m = len(labels)
            if row + m > n:
                raise TabularDataError(f"criteo_pctr: {MEMBER} in {archive} changed while it was read; run again")
            del block
            y[row : row + m] = labels
            missing += np.isnan(num).sum(axis=0)
            negative += (num < 0).sum(axis=0)
            t = log_transform(num)
            x_num[row : row + m] = t
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
                    x_cat[row : row + k, j] = interner.add(col[:k])
                if k < m:
                    x_cat[row + k : row + m, j] = interner.lookup(col[k:])
            row += m
            del labels, num, cat, t
    if row != n:
        raise TabularDataError(
            f"criteo_pctr: {MEMBER} in {archive} gave {row} rows on the second read, {n} on the "
            "first; the file changed while it was read: run again"
        )

    # vocabularies (training split only): first-seen ids -> rank of the hash value, 0 stays 0
    vocab_sizes = []
    step = 1 << 20  # rows per in-place pass (bounded temporaries)
    for j, interner in enumerate(interners):
        lut = interner.ranks()
        vocab_sizes.append(len(interner.keys) + 1)
        interners[j] = None
        for a in range(0, n, step):
            x_cat[a : a + step, j] = lut[x_cat[a : a + step, j]]
        del lut, interner
    # standardise with the training split's statistics, in place, block by block
    std = np.sqrt(m2 / n_train)
    std = np.where(std > 1e-12, std, 1.0)
    mean32, std32 = mean.astype(np.float32), std.astype(np.float32)
    for a in range(0, n, step):
        np.subtract(x_num[a : a + step], mean32, out=x_num[a : a + step])
        np.divide(x_num[a : a + step], std32, out=x_num[a : a + step])
    rss_before_save, _ = _peak_rss()

    a, b = n_train, n_train + n_val
    arrays = {
        "x_num_train": x_num[:a],
        "x_num_val": x_num[a:b],
        "x_num_test": x_num[b:],
        "x_cat_train": x_cat[:a],
        "x_cat_val": x_cat[a:b],
        "x_cat_test": x_cat[b:],
        "y_train": y[:a],
        "y_val": y[a:b],
        "y_test": y[b:],
    }
    metadata = {
        "dataset": "criteo_pctr",
        "task": "binary_classification",
        "source": source,
        "subset": subset,
        "label": LABEL,
        "label_lower": 0,
        "label_upper": 1,
        "label_integer": True,
        "numerical_features": list(NUMERICAL_FEATURES),
        "categorical_features": list(CATEGORICAL_FEATURES),
        "sensitive_features": list(SENSITIVE_FEATURES),
        "feature_numbers_002": dict(FEATURE_NUMBERS_002),
        "cat_vocab_sizes": vocab_sizes,
        "numerical_standardisation": {"mean": mean.tolist(), "std": std.tolist()},
        "split": {
            "kind": "chronological",
            "fractions": list(SPLIT_FRACTIONS),
            "n_rows": n,
            "n_train": n_train,
            "n_val": n_val,
            "n_test": n_test,
            "rule": "file order: first floor(0.8 n) rows train, next floor(0.1 n) validation, rest test",
        },
        "preprocessing": {
            "rows_read": n,
            "numerical_transform": "sign(x) * log(1 + |x|), then (t - train mean) / train std",
            "numerical_missing_rule": "empty -> t = 0 (as a raw 0) before standardising; no indicator column",
            "numerical_missing": {c: int(v) for c, v in zip(NUMERICAL_FEATURES, missing)},
            "numerical_negative": {c: int(v) for c, v in zip(NUMERICAL_FEATURES, negative)},
            "categorical_missing": {c: int(v) for c, v in zip(CATEGORICAL_FEATURES, cat_missing)},
            "categorical_rule": "vocabulary of the training split in hash order; 0 = missing or unseen",
            "block_bytes": _reader.BLOCK_BYTES,
            "peak_rss_bytes_at_start": rss_start,
            "peak_rss_bytes_before_save": rss_before_save,
            "expected_array_bytes": BYTES_PER_ROW * n,
            "expected_peak_increase_bytes": expected_peak_increase_bytes(n, sum(vocab_sizes) - len(vocab_sizes)),
            "peak_rss_source": rss_source,
            "peak_rss_note": (
                "peak RSS of the preparing process so far (VmHWM, else ru_maxrss); "
                "save_prepared_tabular's validation adds up to 26 bytes x n_train afterwards"
            ),
        },
        "raw_files": {archive.name: file_digests(archive)},
    }
    return save_prepared_tabular(out_path, arrays, metadata)
