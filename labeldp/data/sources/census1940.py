"""1940 US Census, IPUMS USA full count (003 Section 4.2, Appendix G): IPUMS CSV extract -> tabular ``.npz``.

Raw format: the user's IPUMS extract as CSV (``.csv`` or ``.csv.gz``), one row per person, a
header row of IPUMS variable names (IPUMS's technical variables YEAR, SAMPLE, SERIAL, PERNUM, ...
plus the selected ones), integer codes in every column. How to make it:
:data:`labeldp.data.rawformats.ipums_extract.CENSUS1940_INSTRUCTIONS`. The file is found through
``<raw_dir>/MANIFEST.json`` (``files[0].path``, written by the fetch rule; the extract lives at the
configured ``census_path``) or as the ``.csv`` / ``.csv.gz`` directly in ``raw_dir``. A fixed-width
``.dat`` extract is refused with a request to re-export it as CSV.

Preparation (fixed constants, not computed from the labels):

* label ``WKSWORK1`` (weeks worked in 1939); rows with ``1 <= WKSWORK1 <= 52`` are kept (0 is
  "N/A or did not work"; 003 predicts the 52 labels 1..52, Table G.3), so the label range is
  [1, 52], integer (``label_integer`` True). Dropped rows are counted by reason.
* features: the registry's defaults :data:`~labeldp.data.rawformats.ipums_extract.CENSUS1940_CATEGORICAL_FEATURES`
  and :data:`~labeldp.data.rawformats.ipums_extract.CENSUS1940_NUMERICAL_FEATURES` (the papers do not list theirs;
  the caller may pass others). Categorical codes get vocabularies from the training split only
  (index 0 = missing or unseen). Numerical columns are standardised with the training split's
  statistics; ``INCWAGE``'s IPUMS codes 999998 (missing) and 999999 (N/A) become 0 plus a 0/1
  column ``INCWAGE_missing``; an empty numerical cell becomes 0 (counted).
* random 80/20 split with seed 0; ``subset=n`` keeps the first n rows that pass the label filter.

The CSV is streamed in chunks of the needed columns; kept rows are held as int32 / float32.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from pathlib import Path

import numpy as np

from labeldp.data.rawformats.standin import begin_tabular_standin

from labeldp.data.dataset_spec import DatasetSpec

from labeldp.data.fetch import file_digests
from labeldp.data.rawformats import is_standin_dir
from labeldp.data.rawformats.ipums_extract import (
    CENSUS1940_CATEGORICAL_FEATURES,
    CENSUS1940_DEFAULT_FILENAME,
    CENSUS1940_INSTRUCTIONS,
    CENSUS1940_LABEL,
    CENSUS1940_NUMERICAL_FEATURES,
)
from labeldp.data.tabular import (
    TabularDataError,
    build_vocab,
    encode_numeric_categories,
    random_split,
    save_prepared_tabular,
    standardise,
)

__all__ = ["SPEC", "LABEL", "LABEL_RANGE", "TECHNICAL_COLUMNS", "DAT_MESSAGE", "prepare_dataset", "write_standin"]

#: the file a stand-in writes (the spec has no remote files: the extract is made by hand)
STANDIN_FILENAMES = (CENSUS1940_DEFAULT_FILENAME,)

SPEC = DatasetSpec(
    name="census1940",
    title="1940 US Census, IPUMS USA full count (us1940b)",
    files=(),
    kind="tabular",
    raw_format="ipums_extract",
    num_classes=None,
    input_shape=None,
    task="regression",
    homepage="https://usa.ipums.org/",
    license="IPUMS USA terms of use (no redistribution)",
    citation=(
        "Ruggles et al., IPUMS USA; Minnesota Population Center and Ancestry.com, "
        "IPUMS Restricted Complete Count Data / 1940 100% database."
    ),
    label=CENSUS1940_LABEL,
    manual=True,
    manual_instructions=CENSUS1940_INSTRUCTIONS,
    standin_allowed=True,
)


LABEL = CENSUS1940_LABEL
LABEL_RANGE = (1, 52)
TECHNICAL_COLUMNS = ("YEAR", "SAMPLE", "SERIAL", "PERNUM")
NA_CODES = {"INCWAGE": (999998, 999999)}
SOURCES = ("official", "synthetic_standin")
CHUNK_ROWS = 1_000_000
DAT_MESSAGE = (
    "census1940: {path} is a fixed-width IPUMS extract (.dat); this preparation reads only CSV. "
    "Re-export the extract as CSV: on IPUMS USA open 'My Data', choose 'Revise' on the extract, set "
    "Data Format to 'Comma delimited (.csv)', submit, download the .csv.gz and point census_path at it."
)


def _is_dat(path: Path) -> bool:
    return path.name.lower().endswith((".dat", ".dat.gz"))


def _csv_path(raw_dir: Path) -> Path:
    manifest = raw_dir / "MANIFEST.json"
    if manifest.is_file():
        files = json.loads(manifest.read_text()).get("files") or []
        if files:
            p = Path(files[0]["path"])
            for cand in (p, raw_dir / p.name):
                if cand.is_file():
                    if _is_dat(cand):
                        raise TabularDataError(DAT_MESSAGE.format(path=cand))
                    return cand
            raise TabularDataError(
                f"census1940: {manifest} lists {p}, which does not exist; fetch again.\n\n{CENSUS1940_INSTRUCTIONS}"
            )
    found = sorted(p for p in raw_dir.glob("*") if p.name.lower().endswith((".csv", ".csv.gz")))
    if found:
        return found[0]
    dats = sorted(p for p in raw_dir.glob("*") if _is_dat(p))
    if dats:
        raise TabularDataError(DAT_MESSAGE.format(path=dats[0]))
    raise TabularDataError(
        f"census1940: no IPUMS CSV extract (.csv / .csv.gz) and no MANIFEST.json in {raw_dir}.\n\n"
        f"{CENSUS1940_INSTRUCTIONS}"
    )


def _read(path: Path, cat_cols: list[str], num_cols: list[str], subset: int | None):
    import pandas as pd

    with (
        gzip.open(path, "rt", encoding="latin1", newline="")
        if path.name.lower().endswith(".gz")
        else open(path, encoding="latin1", newline="")
    ) as fh:
        header = [c.strip().strip('"').upper() for c in next(csv.reader([fh.readline()]), [])]
    missing = [c for c in [LABEL] + cat_cols + num_cols if c not in header]
    if missing:
        raise TabularDataError(
            f"census1940: {path} lacks the columns {missing} (header: {header[:40]}). Make a new "
            f"IPUMS extract that includes them (see CENSUS1940_INSTRUCTIONS in "
            f"labeldp.data.rawformats.ipums_extract):\n\n{CENSUS1940_INSTRUCTIONS}"
        )
    counts = {"rows_read": 0, "rows_dropped_label_0": 0, "rows_dropped_label_other": 0, "numerical_empty_filled": 0}
    ys, cats, nums, kept = [], [], [], 0
    reader = pd.read_csv(
        path,
        header=0,
        names=header,
        usecols=[LABEL] + cat_cols + num_cols,
        dtype="float64",
        chunksize=CHUNK_ROWS,
        encoding="latin1",
    )
    try:
        for chunk in reader:
            y = chunk[LABEL].to_numpy()
            keep = (y >= LABEL_RANGE[0]) & (y <= LABEL_RANGE[1]) & (y == np.round(y))
            if subset is not None and kept + int(keep.sum()) >= subset:
                cut = int(np.searchsorted(np.cumsum(keep), subset - kept)) + 1
                chunk, y, keep = chunk.iloc[:cut], y[:cut], keep[:cut]
            counts["rows_read"] += len(y)
            counts["rows_dropped_label_0"] += int((y == 0).sum())
            counts["rows_dropped_label_other"] += int((~keep & (y != 0)).sum())
            part = chunk[keep]
            ys.append(y[keep].astype(np.int8))
            c = part[cat_cols].to_numpy()
            cats.append(np.where(np.isfinite(c), c, -1).astype(np.int32))
            n = part[num_cols].to_numpy()
            counts["numerical_empty_filled"] += int((~np.isfinite(n)).sum())
            nums.append(np.where(np.isfinite(n), n, 0.0).astype(np.float32))
            kept += len(part)
            if subset is not None and kept >= subset:
                break
    except (ValueError, pd.errors.ParserError) as exc:
        raise TabularDataError(
            f"census1940: cannot parse {path} as an IPUMS CSV extract with integer codes ({exc})"
        ) from exc
    if not ys:
        return np.zeros(0), np.zeros((0, len(cat_cols)), np.int32), np.zeros((0, len(num_cols)), np.float32), counts
    return np.concatenate(ys), np.concatenate(cats), np.concatenate(nums), counts


def prepare_dataset(
    *,
    raw_dir: str | os.PathLike,
    out_path: str | os.PathLike,
    subset: int | None = None,
    source: str,
    categorical_features: tuple[str, ...] = CENSUS1940_CATEGORICAL_FEATURES,
    numerical_features: tuple[str, ...] = CENSUS1940_NUMERICAL_FEATURES,
) -> Path:
    """IPUMS 1940 CSV extract -> prepared tabular ``.npz`` (layout: :mod:`labeldp.data.tabular`).

    Args:
      raw_dir: the fetch rule's directory (its ``MANIFEST.json`` names the extract) or a directory
        holding the ``.csv`` / ``.csv.gz`` itself.
      out_path: the ``.npz`` to write (atomically; absent after any failure).
      subset: keep the first ``subset`` rows with ``1 <= WKSWORK1 <= 52``, before splitting (None: all).
      source: ``"official"`` or ``"synthetic_standin"``; a ``STANDIN_SYNTHETIC`` marker in ``raw_dir``
        or next to the extract makes it ``"synthetic_standin"``.
      categorical_features, numerical_features: IPUMS variables used as features (default: the
        registry's lists).

    Returns:
      ``out_path`` as a :class:`~pathlib.Path`.

    Raises:
      TabularDataError: no extract, a ``.dat`` extract (:data:`DAT_MESSAGE`), missing columns (named),
        unparsable values, or no row with a label in 1..52.
    """
    if source not in SOURCES:
        raise TabularDataError(f"census1940: source must be one of {SOURCES}, got {source!r}")
    if subset is not None and int(subset) < 2:
        raise TabularDataError(f"census1940: subset must be >= 2 rows (train and test), got {subset}")
    raw_dir = Path(raw_dir)
    path = _csv_path(raw_dir)
    if is_standin_dir(raw_dir) or is_standin_dir(path.parent):
        source = "synthetic_standin"
    cat_cols = [c.upper() for c in categorical_features]
    num_cols = [c.upper() for c in numerical_features]
    y, cat, num, counts = _read(path, cat_cols, num_cols, None if subset is None else int(subset))
    if len(y) == 0:
        raise TabularDataError(
            f"census1940: no row of {path} has 1 <= {LABEL} <= 52 ({counts}); nothing to learn "
            "from (an extract of the 1940 full count has tens of millions)"
        )
    extra, extra_names = [], []
    for j, col in enumerate(num_cols):
        if col in NA_CODES:
            na = np.isin(num[:, j], NA_CODES[col])
            num[na, j] = 0.0
            extra.append(na.astype(np.float32)[:, None])
            extra_names.append(f"{col}_missing")
            counts[f"{col}_na_codes"] = int(na.sum())
    num = np.concatenate([num] + extra, axis=1) if extra else num
    train, test = random_split(len(y), test_fraction=0.2, seed=0)
    x_train, x_test, stats = standardise(num[train], num[test])
    vocabs = [build_vocab(cat[train, j], missing=-1) for j in range(cat.shape[1])]
    c_train = np.empty((train.size, cat.shape[1]), np.int32)
    c_test = np.empty((test.size, cat.shape[1]), np.int32)
    for j, vocab in enumerate(vocabs):  # column by column: no second copy of the whole table
        c_train[:, j], c_test[:, j] = (
            encode_numeric_categories(cat[train, j], vocab),
            encode_numeric_categories(cat[test, j], vocab),
        )
    lo, hi = LABEL_RANGE
    metadata = {
        "dataset": "census1940",
        "source": source,
        "subset": subset,
        "label": LABEL,
        "label_lower": lo,
        "label_upper": hi,
        "label_integer": True,
        "numerical_features": num_cols + extra_names,
        "categorical_features": cat_cols,
        "cat_vocab_sizes": [len(v) + 1 for v in vocabs],
        "numerical_standardisation": stats,
        "split": {
            "kind": "random",
            "test_fraction": 0.2,
            "seed": 0,
            "n_train": int(train.size),
            "n_test": int(test.size),
        },
        "preprocessing": {
            **counts,
            "label_range": [lo, hi],
            "keep": f"{lo} <= {LABEL} <= {hi}",
            "na_codes": {k: list(v) for k, v in NA_CODES.items() if k in num_cols},
        },
        "raw_files": {path.name: file_digests(path)},
    }
    arrays = {
        "x_num_train": x_train,
        "x_num_test": x_test,
        "x_cat_train": c_train,
        "x_cat_test": c_test,
        "y_train": y[train].astype(np.float64),
        "y_test": y[test].astype(np.float64),
    }
    return save_prepared_tabular(out_path, arrays, metadata)


# ------------------------------------------------------------------------------ stand-in

_STATES = (
    1,
    4,
    5,
    6,
    8,
    9,
    10,
    12,
    13,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    26,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
    38,
    39,
    40,
    41,
    42,
    44,
    45,
    46,
    47,
    48,
    49,
    50,
    51,
    53,
    54,
    55,
    56,
)


def write_standin(
    directory: str | os.PathLike,
    *,
    n_rows: int | None = None,
    seed: int,
    n_train: int | None = None,
    n_test: int | None = None,
) -> list[Path]:
    """Writes a SYNTHETIC IPUMS-style CSV extract ``usa_1940_fullcount.csv.gz`` (tests / CPU smoke only).

    Header: YEAR, SAMPLE, SERIAL, PERNUM and every registry variable, plausible integer codes.
    WKSWORK1 is 0 for people not in the labour force or under 14 (~30% of rows, so the drop is
    exercised) and otherwise depends on EMPSTAT, AGE and INCWAGE (learnable); a few INCWAGE values
    are the N/A code 999999. The ``STANDIN_SYNTHETIC`` marker is written first.

    Args:
      directory: output directory (created).
      n_rows: (default ``n_train + n_test``) number of person rows (>= 2).
      seed: random seed (output is deterministic).
      n_train, n_test: recorded in the marker (default: an 80/20 split of ``n_rows``).

    Returns:
      ``[path of the .csv.gz]``.
    """
    directory, n_rows, rng = begin_tabular_standin(
        directory, dataset="census1940", seed=seed, n_rows=n_rows, n_train=n_train, n_test=n_test
    )
    r = lambda lo, hi: rng.integers(lo, hi + 1, n_rows)  # noqa: E731
    age = r(14, 75)
    child = rng.random(n_rows) < 0.08
    age[child] = rng.integers(0, 14, int(child.sum()))
    empstat = rng.choice([1, 2, 3], n_rows, p=[0.62, 0.1, 0.28])
    empstat[age < 14] = 0
    working = np.isin(empstat, [1, 2])
    occ = np.where(working, rng.choice([0, 10, 100, 200, 290, 300, 450, 500, 600, 700, 810, 910], n_rows), 999)
    incwage = np.where(working, np.minimum(5001, np.round(np.exp(rng.normal(6.5, 0.8, n_rows)))), 0).astype(int)
    incwage[rng.random(n_rows) < 0.03] = 999999
    inc = np.where(incwage == 999999, 700, incwage)
    base = np.where(empstat == 1, 30 + 20 * (1 - np.exp(-inc / 800)), 8 + 10 * (1 - np.exp(-inc / 500)))
    weeks = np.clip(np.round(base - 0.1 * np.abs(age - 40) + rng.normal(0, 3, n_rows)), 1, 52).astype(int)
    weeks = np.where(working, weeks, 0)
    cols = {
        "YEAR": np.full(n_rows, 1940),
        "SAMPLE": np.full(n_rows, 194002),
        "SERIAL": 1 + np.arange(n_rows) // 3,
        "PERNUM": 1 + np.arange(n_rows) % 3,
        LABEL: weeks,
        "STATEFIP": rng.choice(_STATES, n_rows),
        "URBAN": r(1, 2),
        "FARM": r(1, 2),
        "OWNERSHP": r(0, 2),
        "RELATE": rng.choice([1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12], n_rows),
        "SEX": r(1, 2),
        "MARST": r(1, 6),
        "RACE": rng.choice([1, 2, 3, 4, 5, 6], n_rows, p=[0.88, 0.09, 0.01, 0.01, 0.005, 0.005]),
        "BPL": rng.choice([1, 6, 17, 36, 42, 48, 150, 400, 410, 434, 453, 600], n_rows),
        "NATIVITY": r(0, 5),
        "CITIZEN": r(0, 4),
        "SCHOOL": r(1, 2),
        "EDUC": r(0, 11),
        "EMPSTAT": empstat,
        "LABFORCE": np.where(age < 14, 0, np.where(working, 2, 1)),
        "CLASSWKR": np.where(working, r(1, 2), 0),
        "OCC1950": occ,
        "IND1950": np.where(working, rng.choice([105, 246, 306, 357, 406, 506, 606, 716, 826, 936], n_rows), 0),
        "AGE": age,
        "HRSWORK1": np.where(empstat == 1, r(10, 70), 0),
        "INCWAGE": incwage,
    }
    absent = [v for v in CENSUS1940_CATEGORICAL_FEATURES + CENSUS1940_NUMERICAL_FEATURES if v not in cols]
    if absent:  # pragma: no cover - the registry gained a variable this writer does not know
        raise ValueError(f"census1940 stand-in: no synthetic codes for {absent}")
    buf = io.StringIO()
    buf.write(",".join(cols) + "\n")
    table = np.stack([np.asarray(v, dtype=np.int64) for v in cols.values()], axis=1)
    np.savetxt(buf, table, fmt="%d", delimiter=",")
    path = directory / CENSUS1940_DEFAULT_FILENAME
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        gz.write(buf.getvalue().encode())
    os.replace(tmp, path)
    return [path]
