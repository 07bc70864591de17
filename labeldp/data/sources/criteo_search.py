"""Criteo Sponsored Search Conversion Log (003 Section 4.1, Appendix G): raw archive -> tabular ``.npz``.

Raw format (official description, https://ailab.criteo.com/criteo-sponsored-search-conversion-log-dataset/,
whose README is copied in several public repositories; checked against code that reads the file):
``criteo-research-search-conversion.tar.gz`` holds ``CriteoSearchData`` (public code that extracts
the archive reads ``Criteo_Conversion_Search/CriteoSearchData``, so the stand-in uses that path; any
member with that base name is read), 15,995,634 lines, tab separated, NO header, 23 columns::

    Sale, SalesAmountInEuro, time_delay_for_conversion, click_timestamp, nb_clicks_1week,
    product_price, product_age_group, device_type, audience_id, product_gender, product_brand,
    product_category1 .. product_category7, product_country, product_id, product_title,
    partner_id, user_id

(the README's header line writes ``time_delay_for_conversion`` and ``product_category(1-7)``; its
label section writes ``Time_delay_for_conversion``). Missing value indicator: -1 (0 for
click_timestamp). ``SalesAmountInEuro`` and ``time_delay_for_conversion`` are -1 when there was no
conversion (Sale = 0). Categorical values are hashed (32 hex digits).

Preparation (003 Section 4.1 / Appendix G; fixed constants, not computed from the labels):

* label ``SalesAmountInEuro``; rows whose label is -1 (no conversion) are dropped (also the rare
  empty or other negative labels, counted separately); labels are clipped at 400 (003: the 95th
  percentile), so the label range is [0, 400], real valued (``label_integer`` False).
* numerical features ``nb_clicks_1week`` and ``product_price``: -1 (missing) becomes 0 and a 0/1
  indicator column ``<name>_missing`` is added; the four columns are standardised with the training
  split's statistics (no log transform: 003 describes none).
* categorical features: product_age_group, device_type, audience_id, product_gender, product_brand,
  product_category1..7, product_country, product_id, product_title, partner_id. Left out:
  ``Sale`` and ``time_delay_for_conversion`` (outcomes of the conversion: they leak the label;
  Sale is constant after the drop), ``SalesAmountInEuro`` (the label), ``user_id`` (an identifier
  of the person whose label is protected; an embedding per user memorises individuals and is
  mostly unseen in the test split) and ``click_timestamp`` (a time stamp, not a property of the
  ad; 003's split is random, not temporal). -1 is "missing" (index 0).
* vocabularies from the training split only (index 0 = missing or unseen), in sorted order of the
  raw hash strings (they are interned to int32 while streaming, then renumbered by string rank, so
  the result does not depend on the chunk size).
* random 80/20 split with seed 0; ``subset=n`` keeps the first n rows that survive the drop (the
  file is sorted by click time), before splitting.

The file is streamed (tar stream, pandas chunks, only the needed columns, categories interned to
int32), so memory grows with the ~2 million kept rows, not with the 6.4 GB file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from pathlib import Path

import numpy as np

from labeldp.data.rawformats.standin import begin_tabular_standin

from labeldp.data.dataset_spec import DatasetSpec, RemoteFile

from labeldp.data.fetch import file_digests, locate_raw_file
from labeldp.data.rawformats import is_standin_dir
from labeldp.data.tabular import (
    TabularDataError,
    build_vocab,
    encode_numeric_categories,
    random_split,
    save_prepared_tabular,
    standardise,
)

__all__ = [
    "SPEC",
    "ARCHIVE",
    "MEMBER",
    "COLUMNS",
    "LABEL",
    "LABEL_RANGE",
    "NUMERICAL_FEATURES",
    "CATEGORICAL_FEATURES",
    "prepare_dataset",
    "write_standin",
]

SPEC = DatasetSpec(
    name="criteo_search",
    title="Criteo Sponsored Search Conversion Log",
    files=(
        RemoteFile(
            filename="criteo-research-search-conversion.tar.gz",
            url="http://go.criteo.net/criteo-research-search-conversion.tar.gz",
        ),
    ),
    kind="tabular",
    raw_format="criteo_search_targz",
    num_classes=None,
    input_shape=None,
    task="regression",
    homepage="https://ailab.criteo.com/criteo-sponsored-search-conversion-log-dataset/",
    license="CC BY-NC-SA 4.0",
    citation=(
        "Tallis, Yadav (2018). Reacting to Variations in Product Demand: An Application for "
        "Conversion Rate (CR) Prediction in Sponsored Search. arXiv:1806.08211."
    ),
    label="SalesAmountInEuro",
    standin_allowed=True,
    notes=(
        "No published checksum: the sha256 is recorded on first download (sidecar <file>.sha256) "
        "and can be pinned in config. The archive holds the tab-separated file CriteoSearchData."
    ),
)


ARCHIVE = "criteo-research-search-conversion.tar.gz"
MEMBER = "CriteoSearchData"
STANDIN_MEMBER = "Criteo_Conversion_Search/" + MEMBER
COLUMNS = (
    "Sale",
    "SalesAmountInEuro",
    "time_delay_for_conversion",
    "click_timestamp",
    "nb_clicks_1week",
    "product_price",
    "product_age_group",
    "device_type",
    "audience_id",
    "product_gender",
    "product_brand",
    *(f"product_category{i}" for i in range(1, 8)),
    "product_country",
    "product_id",
    "product_title",
    "partner_id",
    "user_id",
)
LABEL = "SalesAmountInEuro"
LABEL_RANGE = (0, 400)
NUMERICAL_FEATURES = ("nb_clicks_1week", "product_price")
CATEGORICAL_FEATURES = (
    "product_age_group",
    "device_type",
    "audience_id",
    "product_gender",
    "product_brand",
    *(f"product_category{i}" for i in range(1, 8)),
    "product_country",
    "product_id",
    "product_title",
    "partner_id",
)
SOURCES = ("official", "synthetic_standin")
CHUNK_ROWS = 250_000


def _archive_path(raw_dir: Path) -> Path:
    found = locate_raw_file(raw_dir, (ARCHIVE,))
    if found is not None:
        return found
    direct = raw_dir / ARCHIVE
    raise TabularDataError(
        f"criteo_search: {direct} not found; fetch it first (snakemake fetch_criteo_search, or "
        f"python -m labeldp.data.fetch criteo_search --data-dir <data_dir>/raw)"
    )


def _read(archive: Path, subset: int | None):
    """Streams the archive: (labels, numerical, interned categorical codes, counts)."""
    import pandas as pd

    tables: list[dict] = [{} for _ in CATEGORICAL_FEATURES]
    ys, nums, cats = [], [], []
    counts = {
        "rows_read": 0,
        "rows_dropped_label_minus1": 0,
        "rows_dropped_label_missing": 0,
        "rows_dropped_label_negative": 0,
    }
    kept = 0
    try:
        tar = tarfile.open(archive, mode="r|*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise TabularDataError(f"criteo_search: {archive} is not a readable tar archive ({exc})") from exc
    with tar:
        info = next((m for m in tar if m.isfile() and Path(m.name).name == MEMBER), None)
        if info is None:
            raise TabularDataError(f"criteo_search: {archive} has no member {MEMBER}; expected the official archive")
        fh = tar.extractfile(info)
        first = fh.peek(1 << 16).split(b"\n", 1)[0]
        if not first.strip():
            raise TabularDataError(f"criteo_search: {info.name} in {archive} is empty")
        n_fields = first.count(b"\t") + 1
        if n_fields != len(COLUMNS):
            raise TabularDataError(
                f"criteo_search: {info.name} has {n_fields} tab-separated columns, expected "
                f"{len(COLUMNS)} ({', '.join(COLUMNS)}); the label {LABEL} is column 2"
            )
        dtype = {c: "category" for c in CATEGORICAL_FEATURES} | {c: "float64" for c in (LABEL,) + NUMERICAL_FEATURES}
        na = {c: ["", "-1"] for c in CATEGORICAL_FEATURES} | {c: [""] for c in (LABEL,) + NUMERICAL_FEATURES}
        reader = pd.read_csv(
            fh,
            sep="\t",
            header=None,
            names=list(COLUMNS),
            usecols=list(dtype),
            dtype=dtype,
            keep_default_na=False,
            na_values=na,
            chunksize=CHUNK_ROWS,
        )
        try:
            for chunk in reader:
                y = chunk[LABEL].to_numpy()
                keep = np.isfinite(y) & (y >= 0)
                if subset is not None and kept + int(keep.sum()) >= subset:
                    cut = int(np.searchsorted(np.cumsum(keep), subset - kept)) + 1
                    chunk, y, keep = chunk.iloc[:cut], y[:cut], keep[:cut]
                counts["rows_read"] += len(y)
                counts["rows_dropped_label_minus1"] += int((y == -1).sum())
                counts["rows_dropped_label_missing"] += int(np.isnan(y).sum())
                counts["rows_dropped_label_negative"] += int(((y < 0) & (y != -1)).sum())
                part = chunk[keep]
                ys.append(y[keep])
                nums.append(part[list(NUMERICAL_FEATURES)].to_numpy(np.float64))
                block = np.zeros((len(part), len(CATEGORICAL_FEATURES)), np.int32)
                for j, (col, table) in enumerate(zip(CATEGORICAL_FEATURES, tables)):
                    s = part[col].cat.remove_unused_categories()
                    lut = np.fromiter(
                        (table.setdefault(v, len(table) + 1) for v in s.cat.categories), np.int32, len(s.cat.categories)
                    )
                    codes = s.cat.codes.to_numpy()
                    block[:, j] = np.where(codes >= 0, lut[np.maximum(codes, 0)] if len(lut) else 0, 0)
                cats.append(block)
                kept += len(part)
                if subset is not None and kept >= subset:
                    break
        except (ValueError, pd.errors.ParserError) as exc:
            raise TabularDataError(
                f"criteo_search: cannot parse {info.name} in {archive} as the 23-column "
                f"tab-separated CriteoSearchData ({exc})"
            ) from exc
    if not ys:
        return np.zeros(0), np.zeros((0, len(NUMERICAL_FEATURES))), np.zeros((0, len(CATEGORICAL_FEATURES))), counts
    cat = np.concatenate(cats)
    for j, table in enumerate(tables):  # ids -> ranks of the raw strings: independent of the chunking
        rank = np.zeros(len(table) + 1, np.int32)
        rank[1 + np.argsort(np.array(list(table), dtype=object), kind="stable")] = np.arange(1, len(table) + 1)
        cat[:, j] = rank[cat[:, j]]
    return np.concatenate(ys), np.concatenate(nums), cat, counts


def prepare_dataset(
    *, raw_dir: str | os.PathLike, out_path: str | os.PathLike, subset: int | None = None, source: str
) -> Path:
    """Raw Criteo Search archive -> prepared tabular ``.npz`` (layout: :mod:`labeldp.data.tabular`).

    Args:
      raw_dir: directory holding ``criteo-research-search-conversion.tar.gz`` (directly or listed in its
        ``MANIFEST.json``).
      out_path: the ``.npz`` to write (atomically; absent after any failure).
      subset: keep the first ``subset`` rows left after dropping -1 labels, before splitting (None: all).
      source: ``"official"`` or ``"synthetic_standin"``; a raw directory with the ``STANDIN_SYNTHETIC``
        marker is always ``"synthetic_standin"``.

    Returns:
      ``out_path`` as a :class:`~pathlib.Path`.

    Raises:
      TabularDataError: archive missing or malformed, wrong column count, no row with a label.
    """
    if source not in SOURCES:
        raise TabularDataError(f"criteo_search: source must be one of {SOURCES}, got {source!r}")
    if subset is not None and int(subset) < 2:
        raise TabularDataError(f"criteo_search: subset must be >= 2 rows (train and test), got {subset}")
    raw_dir = Path(raw_dir)
    archive = _archive_path(raw_dir)
    if is_standin_dir(raw_dir) or is_standin_dir(archive.parent):
        source = "synthetic_standin"
    y, num, cat, counts = _read(archive, None if subset is None else int(subset))
    if len(y) == 0:
        raise TabularDataError(
            f"criteo_search: no row of {archive} has a {LABEL} other than -1 (rows read: "
            f"{counts}); nothing to learn from"
        )
    lo, hi = LABEL_RANGE
    counts["rows_clipped_at_upper"] = int((y > hi).sum())
    y = np.clip(y, lo, hi)
    missing = ~np.isfinite(num) | (num == -1)
    num = np.where(missing, 0.0, num)
    num = np.concatenate([num, missing.astype(np.float64)], axis=1)
    num_names = list(NUMERICAL_FEATURES) + [f"{c}_missing" for c in NUMERICAL_FEATURES]
    counts["numerical_missing"] = {c: int(missing[:, j].sum()) for j, c in enumerate(NUMERICAL_FEATURES)}
    train, test = random_split(len(y), test_fraction=0.2, seed=0)
    x_train, x_test, stats = standardise(num[train], num[test])
    vocabs = [build_vocab(cat[train, j], missing=0) for j in range(cat.shape[1])]
    c_train = np.empty((train.size, cat.shape[1]), np.int32)
    c_test = np.empty((test.size, cat.shape[1]), np.int32)
    for j, vocab in enumerate(vocabs):  # column by column: no second copy of the whole table
        c_train[:, j], c_test[:, j] = (
            encode_numeric_categories(cat[train, j], vocab),
            encode_numeric_categories(cat[test, j], vocab),
        )
    metadata = {
        "dataset": "criteo_search",
        "source": source,
        "subset": subset,
        "label": LABEL,
        "label_lower": lo,
        "label_upper": hi,
        "label_integer": False,
        "numerical_features": num_names,
        "categorical_features": list(CATEGORICAL_FEATURES),
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
            "drop": f"{LABEL} == -1 (no conversion)",
            "clip": f"{LABEL} clipped at {hi} (003: 95th percentile)",
            "numerical_missing_rule": "-1 -> 0 plus a 0/1 <name>_missing column",
        },
        "raw_files": {archive.name: file_digests(archive)},
    }
    arrays = {
        "x_num_train": x_train,
        "x_num_test": x_test,
        "x_cat_train": c_train,
        "x_cat_test": c_test,
        "y_train": y[train],
        "y_test": y[test],
    }
    return save_prepared_tabular(out_path, arrays, metadata)


# ------------------------------------------------------------------------------ stand-in


def _hash(col: str, value: int) -> str:
    return hashlib.md5(f"{col}:{value}".encode()).hexdigest().upper()


def write_standin(
    directory: str | os.PathLike,
    *,
    n_rows: int | None = None,
    seed: int,
    n_train: int | None = None,
    n_test: int | None = None,
) -> list[Path]:
    """Writes a SYNTHETIC ``criteo-research-search-conversion.tar.gz`` (tests / CPU smoke only).

    Same member path (``Criteo_Conversion_Search/CriteoSearchData``) and 23-column layout as the
    official file. 35% of rows have no conversion (label -1; the real data has ~86%, fewer here so a
    smoke run keeps rows), the sale amount depends on product_price and product_category1 (learnable),
    some amounts exceed 400 (clip), and some nb_clicks_1week / product_price / categories are -1.
    The ``STANDIN_SYNTHETIC`` marker is written first.

    Args:
      directory: output directory (created).
      n_rows: (default ``n_train + n_test``) number of lines (>= 2).
      seed: random seed (output is deterministic).
      n_train, n_test: recorded in the marker (default: an 80/20 split of ``n_rows``).

    Returns:
      ``[path of the archive]``.
    """
    directory, n_rows, rng = begin_tabular_standin(
        directory, dataset="criteo_search", seed=seed, n_rows=n_rows, n_train=n_train, n_test=n_test
    )
    price = np.round(np.exp(rng.normal(4.0, 0.9, n_rows)), 2)
    cat1 = rng.integers(0, 6, n_rows)
    mult = np.array([0.6, 0.9, 1.0, 1.3, 1.8, 2.5])[cat1]
    amount = np.round(price * mult * rng.uniform(0.85, 1.15, n_rows), 2)
    amount[rng.choice(n_rows, max(1, n_rows // 40), replace=False)] = np.round(rng.uniform(401, 900), 2)
    sale = np.ones(n_rows, np.int64)
    sale[rng.choice(n_rows, int(round(0.35 * n_rows)), replace=False)] = 0
    amount = np.where(sale == 1, amount, -1.0)
    delay = np.where(sale == 1, rng.integers(60, 30 * 86400, n_rows), -1)
    clicks = rng.integers(0, 200, n_rows)
    clicks[rng.random(n_rows) < 0.1] = -1
    price_out = np.where(rng.random(n_rows) < 0.05, -1.0, price)
    cards = {
        "product_age_group": 5,
        "device_type": 6,
        "audience_id": 30,
        "product_gender": 4,
        "product_brand": 40,
        "product_category1": 6,
        **{f"product_category{i}": 10 for i in range(2, 8)},
        "product_country": 8,
        "product_id": 300,
        "product_title": 300,
        "partner_id": 25,
    }
    cat_values = {c: rng.integers(0, k, n_rows) for c, k in cards.items()}
    cat_values["product_category1"] = cat1
    lines = []
    for i in range(n_rows):
        row = [
            str(sale[i]),
            "-1" if amount[i] == -1 else f"{amount[i]:.2f}",
            str(delay[i]),
            str(1596439471 + 7 * i),
            str(clicks[i]),
            "-1" if price_out[i] == -1 else f"{price_out[i]:.2f}",
        ]
        for c in CATEGORICAL_FEATURES:
            v = int(cat_values[c][i])
            row.append("-1" if (c != "product_category1" and rng.random() < 0.05) else _hash(c, v))
        row.append(_hash("user_id", int(rng.integers(0, n_rows))))
        lines.append("\t".join(row))
    data = ("\n".join(lines) + "\n").encode()
    path = directory / ARCHIVE
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
            info = tarfile.TarInfo(STANDIN_MEMBER)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)
    return [path]
