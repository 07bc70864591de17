"""RAND Health Insurance Experiment (statsmodels' copy): a REAL regression data set that is
available offline, used as a stand-in for 003's data (never as the paper's data set).

Why this data set: neither of 003's data sets can be obtained on a machine without internet
(Criteo Sponsored Search is a 6 GB download, the 1940 Census needs an IPUMS account). The
statsmodels wheel ships the RAND HIE extract of Cameron and Trivedi (2005) inside the package
(``statsmodels/datasets/randhie/randhie.csv``, public domain, 20,190 person-years), so a real
integer count label can be randomized and learned here with no download at run time. Its label
``mdvis`` (number of outpatient visits to a physician in a year) is a heavy-tailed count, close
to 003's App Ads conversion counts; every output built on it says "stand-in for 003's data".

Preparation (the constants are fixed here, not read from the private labels at run time):

* label ``mdvis`` clipped to ``[0, 20]``: the range is a privacy parameter of every randomizer
  (sensitivity = 20). 20 is about the 99th percentile of ``mdvis`` (p95 = 10, p99 = 21,
  max 77), chosen once by looking at the data, as 003 chose its Criteo clip (400, the 95th
  percentile); that choice is not accounted for, in 003 or here. 21 integer labels 0..20.
* features: the nine other columns (coinsurance, deductible plan, participation incentive,
  maximum dollar expenditure, physical limitation, chronic diseases, self-rated health),
  all numerical, standardised with the training split's statistics; no categorical column.
* a random 80/20 split with seed 0 (003's protocol).

"Fetch" copies the CSV out of the installed statsmodels package and checks its sha256 (pinned
below, statsmodels 0.15.0; the file has not changed since statsmodels 0.5).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from labeldp.data.dataset_spec import DatasetSpec

from labeldp.data.tabular import TabularDataError, random_split, save_prepared_tabular, standardise

__all__ = [
    "SPEC",
    "FILENAME",
    "SHA256",
    "LABEL",
    "LABEL_RANGE",
    "FEATURES",
    "packaged_csv",
    "fetch_packaged",
    "prepare_dataset",
]

SPEC = DatasetSpec(
    name="rand_hie",
    title="RAND Health Insurance Experiment (statsmodels copy; a real stand-in for 003's data)",
    files=(),
    kind="tabular",
    raw_format="statsmodels_package",
    num_classes=None,
    input_shape=None,
    task="regression",
    homepage="https://www.statsmodels.org/stable/datasets/generated/randhie.html",
    license="public domain (statsmodels: 'This is in the public domain.')",
    citation="Cameron, Trivedi (2005). Microeconometrics: Methods and Applications. RAND HIE data.",
    label="mdvis",
    notes=(
        "Shipped inside the statsmodels wheel (no download); copied out and sha256-checked by "
        "labeldp.data.sources.rand_hie. A stand-in for 003's data sets, never reported as them."
    ),
)


FILENAME = "randhie.csv"
SHA256 = "9f6c87d05aef087a82cc4465310c8cd3f38327be6eafa43bd81fb98c4f3d088c"
LABEL = "mdvis"
LABEL_RANGE = (0, 20)
FEATURES = ("lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp")
SOURCE = "package_standin"
STANDIN_NOTE = (
    "REAL data, but a stand-in for 003's data sets: RAND HIE (statsmodels), label mdvis "
    "(outpatient visits), clipped to [0, 20]"
)


def packaged_csv() -> Path:
    """The CSV inside the installed statsmodels package.

    Raises:
      TabularDataError: statsmodels is not installed (the fix: ``pip install statsmodels``).
    """
    try:
        import statsmodels.datasets.randhie as pkg
    except ImportError as err:
        raise TabularDataError(
            "rand_hie: the data set ships inside the statsmodels wheel, which is not installed; "
            "run `pip install statsmodels` (it is a dependency in pyproject.toml)"
        ) from err
    path = Path(pkg.__file__).parent / FILENAME
    if not path.is_file():
        raise TabularDataError(f"rand_hie: {path} is missing from the installed statsmodels; reinstall statsmodels")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_packaged(*, data_dir: str | Path, quiet: bool = False) -> list[Path]:
    """Copies the packaged CSV to ``<data_dir>/rand_hie/randhie.csv`` (verified, atomic).

    Args:
      data_dir: the raw-data root (``<data_dir>/raw`` in the workflow).
      quiet: no progress message.

    Returns:
      ``[path of the copy]``.

    Raises:
      TabularDataError: statsmodels missing, or the packaged file's sha256 is not the pinned one.
    """
    src = packaged_csv()
    digest = _sha256(src)
    if digest != SHA256:
        raise TabularDataError(
            f"rand_hie: {src} has sha256 {digest}, expected {SHA256}; the statsmodels copy "
            "differs from the one this suite was checked with (reinstall statsmodels)"
        )
    dest_dir = Path(data_dir) / "rand_hie"
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / FILENAME
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dest)
    if not quiet:
        print(f"[labeldp.data] rand_hie: copied {src} -> {dest} (sha256 verified)")
    return [dest]


def prepare_dataset(
    *, raw_dir: str | Path, out_path: str | Path, subset: int | None = None, source: str = SOURCE
) -> Path:
    """Raw CSV -> prepared tabular ``.npz`` (see :mod:`labeldp.data.tabular`).

    Args:
      raw_dir: directory holding ``randhie.csv``.
      out_path: the ``.npz`` to write (atomically).
      subset: keep the first ``subset`` rows of the file before splitting (None: all).
      source: ignored except for validation: this data is always ``package_standin``.

    Returns:
      ``out_path``.
    """
    import pandas as pd

    path = Path(raw_dir) / FILENAME
    if not path.is_file():
        raise TabularDataError(
            f"rand_hie: {path} not found; fetch it first (snakemake fetch_rand_hie, or "
            "python -m labeldp.data.fetch rand_hie --data-dir <data_dir>/raw)"
        )
    digest = _sha256(path)
    if digest != SHA256:
        raise TabularDataError(f"rand_hie: {path} has sha256 {digest}, expected {SHA256}; fetch it again")
    frame = pd.read_csv(path)
    missing = [c for c in (LABEL,) + FEATURES if c not in frame.columns]
    if missing:
        raise TabularDataError(f"rand_hie: {path} lacks columns {missing}")
    if subset is not None:
        frame = frame.iloc[: int(subset)]
    y_raw = frame[LABEL].to_numpy(dtype=float)
    lo, hi = LABEL_RANGE
    y = np.clip(y_raw, lo, hi)
    x = frame[list(FEATURES)].to_numpy(dtype=float)
    train, test = random_split(len(y), test_fraction=0.2, seed=0)
    x_train, x_test, stats = standardise(x[train], x[test])
    metadata = {
        "dataset": "rand_hie",
        "source": SOURCE,
        "standin_note": STANDIN_NOTE,
        "subset": subset,
        "label": LABEL,
        "label_lower": lo,
        "label_upper": hi,
        "label_integer": True,
        "numerical_features": list(FEATURES),
        "categorical_features": [],
        "cat_vocab_sizes": [],
        "numerical_standardisation": stats,
        "split": {
            "kind": "random",
            "test_fraction": 0.2,
            "seed": 0,
            "n_train": int(train.size),
            "n_test": int(test.size),
        },
        "preprocessing": {
            "rows_read": int(len(y_raw)),
            "labels_clipped_at_upper": int((y_raw > hi).sum()),
            "label_range": [lo, hi],
        },
        "raw_files": {FILENAME: {"sha256": digest}},
    }
    arrays = {
        "x_num_train": x_train,
        "x_num_test": x_test,
        "x_cat_train": np.zeros((train.size, 0), np.int32),
        "x_cat_test": np.zeros((test.size, 0), np.int32),
        "y_train": y[train],
        "y_test": y[test],
    }
    return save_prepared_tabular(out_path, arrays, metadata)


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps({"csv": str(packaged_csv())}))
