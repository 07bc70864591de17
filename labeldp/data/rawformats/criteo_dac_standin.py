"""A SYNTHETIC stand-in for the Criteo Display Advertising Challenge archive ("Criteo pCTR", 002)
(tests and the CPU smoke profile only).

The real archive (about 4.3 GB, 45,840,617 labelled lines) is not obtainable on the machines CI runs
on; this writes a small archive in exactly its raw format (:mod:`labeldp.data.sources.criteo_pctr` documents
the format and reads both), with a planted signal and the ``STANDIN_SYNTHETIC`` marker, so every
output built on it says it is a stand-in.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import numpy as np

from labeldp.data.rawformats.standin import standin_rows, write_standin_marker

from labeldp.data.rawformats.criteo_dac import (
    ARCHIVE,
    MEMBER,
    MIN_ROWS,
    README_MEMBER,
    TEST_MEMBER,
    log_transform,
    split_sizes,
)

__all__ = ["write_standin"]

# The planted signal: fixed tables (the same for every seed), so a stand-in is learnable by design.
_SIGNAL_SEED = 20140624  # the challenge's start date
_CARDINALITIES = (
    60,
    250,
    5000,
    3000,
    40,
    8,
    400,
    80,
    3,
    1000,
    500,
    5000,
    300,
    12,
    800,
    4000,
    10,
    400,
    300,
    4,
    4000,
    10,
    15,
    2000,
    50,
    1500,
)
_CAT_MISSING = (
    0,
    0,
    0.03,
    0.03,
    0,
    0.1,
    0,
    0,
    0,
    0,
    0,
    0.03,
    0,
    0,
    0,
    0.03,
    0,
    0,
    0.4,
    0.4,
    0.03,
    0.7,
    0,
    0.03,
    0.4,
    0.4,
)
_INT_MISSING = (0.45, 0, 0.2, 0.2, 0.03, 0.22, 0.04, 0.001, 0.04, 0.45, 0.04, 0.75, 0.2)
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
        logit = (
            -1.2
            + 1.2 * effect_c1[codes[:, 0]]
            + 1.2 * effect_c2[codes[:, 1]]
            + 0.6 * (t[:, 2] - 2.0)
            - 0.5 * (t[:, 1] - 2.0)
        )
        click = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
        cols.append(np.where(click, "1", "0").tolist())
    for j in range(13):
        cols.append(np.where(int_missing[:, j], "", ints[:, j].astype(str)).tolist())
    for j in range(26):
        col = hexes[j][codes[:, j]]
        col[cat_missing[:, j]] = ""
        cols.append(col.tolist())
    return "".join(f"{line}\n" for line in map("\t".join, zip(*cols)))


def write_standin(
    directory: str | os.PathLike,
    *,
    n_rows: int | None = None,
    seed: int,
    n_train: int | None = None,
    n_test: int | None = None,
) -> list[Path]:
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
      n_rows: (default ``n_train + n_test``) number of ``train.txt`` lines (>= 10).
      seed: random seed (output is deterministic).
      n_train, n_test: recorded in the marker (default: the 80/10/10 split's train and validation + test).

    Returns:
      ``[path of the archive]``.
    """
    n_rows = standin_rows(n_rows, n_train, n_test)

    if n_rows < MIN_ROWS:
        raise ValueError(f"n_rows must be >= {MIN_ROWS}")
    directory = Path(directory)
    tr, va, te = split_sizes(n_rows)
    write_standin_marker(
        directory,
        dataset="criteo_pctr",
        seed=seed,
        n_train=n_train if n_train is not None else tr,
        n_test=n_test if n_test is not None else va + te,
        n_rows=n_rows,
    )
    rng = np.random.default_rng(seed)
    members = {
        README_MEMBER: (
            f"SYNTHETIC stand-in for the Criteo Display Advertising Challenge data (labeldp, seed {seed}); "
            "NOT the real data. Same layout: label, I1..I13, C1..C26, tab separated.\n"
        ).encode(),
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
