"""Prepared tabular data: regression (003: Criteo Sponsored Search, 1940 Census, stand-ins) and
binary classification with users (000 Table 7 / 002: Criteo Attribution, Criteo pCTR).

One ``.npz`` per prepared dataset, written atomically and loaded without pickles:

* ``x_num_train``, ``x_num_test``: float32 ``(n, d_num)`` numerical features, standardised
  with the training split's mean and standard deviation;
* ``x_cat_train``, ``x_cat_test``: int32 ``(n, d_cat)`` categorical features as vocabulary
  indices; index 0 is "missing or not seen in the training split" (vocabularies are built
  from the training split only);
* ``y_train``, ``y_test``: float64 labels, inside ``[label_lower, label_upper]``;
* optional: ``user_train``, ``user_test`` (int64 ``(n,)``: the user each row belongs to, for
  user-level privacy; users are numbered per split) and a validation split ``x_num_val``,
  ``x_cat_val``, ``y_val`` (``user_val``) where the paper has one (002's chronological 80/10/10);
* ``metadata``: JSON (0-d string array): ``dataset``, ``kind = "tabular"``,
  ``task`` (``"regression"`` or ``"binary_classification"``: labels 0/1, range [0, 1]),
  ``sensitive_features`` (002: the feature names whose values are private, optional), ``source`` (``official``, ``synthetic_standin`` or
  ``package_standin``), ``subset``, ``label`` (column name), ``label_lower``,
  ``label_upper``, ``label_integer`` (integer labels: the discrete randomizers apply),
  ``numerical_features``, ``categorical_features``, ``cat_vocab_sizes`` (index 0 included),
  ``split`` (how train / test were made), ``preprocessing`` (rows dropped, clipping) and the
  raw files' digests.

The label range is part of the privacy guarantee: every randomizer of 003 is eps-DP for labels
in ``[label_lower, label_upper]``, so the range is a fixed constant of the dataset (config data),
never computed from the private labels at run time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from labeldp.atomic_io import atomic_output

__all__ = [
    "PreparedTabular",
    "save_prepared_tabular",
    "load_prepared_tabular",
    "standardise",
    "build_vocab",
    "encode_categorical",
    "encode_numeric_categories",
    "random_split",
    "TabularDataError",
]

ARRAYS = ("x_num_train", "x_cat_train", "y_train", "x_num_test", "x_cat_test", "y_test")
OPTIONAL_ARRAYS = ("user_train", "user_test", "x_num_val", "x_cat_val", "y_val", "user_val")
TASKS = ("regression", "binary_classification")


class TabularDataError(ValueError):
    """A tabular dataset is malformed (the message names the value and the fix)."""


@dataclass(frozen=True, eq=False)
class PreparedTabular:
    """A prepared tabular regression dataset (layout: module docstring)."""

    x_num_train: np.ndarray
    x_cat_train: np.ndarray
    y_train: np.ndarray
    x_num_test: np.ndarray
    x_cat_test: np.ndarray
    y_test: np.ndarray
    name: str
    source: str
    subset: int | None
    metadata: dict[str, Any] = field(default_factory=dict)
    audit_inputs: Any = None  # the label-canary audit is for classification; kept for the interface
    user_train: np.ndarray | None = None
    user_test: np.ndarray | None = None
    x_num_val: np.ndarray | None = None
    x_cat_val: np.ndarray | None = None
    y_val: np.ndarray | None = None
    user_val: np.ndarray | None = None

    kind = "tabular"

    @property
    def x_train(self) -> np.ndarray:  # row count for records (runner.build_record)
        return self.y_train

    @property
    def x_test(self) -> np.ndarray:
        return self.y_test

    @property
    def is_synthetic(self) -> bool:
        return self.source == "synthetic_standin"

    @property
    def is_standin(self) -> bool:
        """True for any data that is not the paper's dataset (synthetic or a package's stand-in)."""
        return self.source != "official"

    @property
    def task(self) -> str:
        return str(self.metadata.get("task", "regression"))

    @property
    def sensitive_features(self) -> list[str]:
        return list(self.metadata.get("sensitive_features", []))

    @property
    def label_lower(self) -> float:
        return float(self.metadata["label_lower"])

    @property
    def label_upper(self) -> float:
        return float(self.metadata["label_upper"])

    @property
    def label_integer(self) -> bool:
        return bool(self.metadata["label_integer"])

    @property
    def label_support(self) -> np.ndarray:
        """The finite label set the discrete randomizers act on: the integers of the range
        (real labels are first rounded onto it without bias, 003 Section 3.1)."""
        lo, hi = self.label_lower, self.label_upper
        if lo != int(lo) or hi != int(hi):
            raise TabularDataError(
                f"{self.name}: label range [{lo}, {hi}] has non-integer ends; the label "
                "support is the integers of the range, so set integer ends in the preparation"
            )
        return np.arange(int(lo), int(hi) + 1, dtype=float)

    @property
    def cat_vocab_sizes(self) -> list[int]:
        return [int(v) for v in self.metadata.get("cat_vocab_sizes", [])]


def validate_tabular(arrays: Mapping[str, np.ndarray], metadata: Mapping[str, Any]) -> None:
    """Refuses what would make a run meaningless, naming the value and the fix: an empty split,
    NaN or infinite features or labels, labels outside the stated range, category indices
    outside their vocabularies."""
    name = metadata.get("dataset", "?")
    task = metadata.get("task", "regression")
    if task not in TASKS:
        raise TabularDataError(f"{name}: task {task!r} is not one of {TASKS}")
    if task == "binary_classification" and (
        float(metadata["label_lower"]),
        float(metadata["label_upper"]),
        bool(metadata["label_integer"]),
    ) != (0.0, 1.0, True):
        raise TabularDataError(
            f"{name}: a binary_classification dataset has integer labels in [0, 1]; "
            "set label_lower 0, label_upper 1, label_integer true"
        )
    if ("y_val" in arrays) != ("x_num_val" in arrays) or ("y_val" in arrays) != ("x_cat_val" in arrays):
        raise TabularDataError(f"{name}: a validation split needs x_num_val, x_cat_val and y_val together")
    splits = ("train", "test", "val") if "y_val" in arrays else ("train", "test")
    for split in splits:
        users = arrays.get(f"user_{split}")
        if users is not None and (users.shape != arrays[f"y_{split}"].shape or (users < 0).any()):
            raise TabularDataError(f"{name}: user_{split} must hold one non-negative user index per row")
    for split in splits:
        n = arrays[f"y_{split}"].shape[0]
        if n == 0:
            raise TabularDataError(
                f"{name}: the {split} split is empty; check the raw file (rows dropped: "
                f"{metadata.get('preprocessing')}) or the subset size"
            )
        if arrays[f"x_num_{split}"].shape[0] != n or arrays[f"x_cat_{split}"].shape[0] != n:
            raise TabularDataError(f"{name}: {split} features and labels have different row counts")
        for key in (f"x_num_{split}", f"y_{split}"):
            bad = ~np.isfinite(arrays[key])
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise TabularDataError(
                    f"{name}: {key} has {int(bad.sum())} NaN/infinite values (first in row {row}); "
                    "impute or drop such rows in the preparation"
                )
        y = arrays[f"y_{split}"]
        lo, hi = float(metadata["label_lower"]), float(metadata["label_upper"])
        out = (y < lo) | (y > hi)
        if out.any():
            raise TabularDataError(
                f"{name}: {int(out.sum())} {split} labels lie outside the configured range "
                f"[{lo}, {hi}] (e.g. {float(y[out][0])}); clip or drop them in the preparation, "
                "or widen the range (the randomizers' privacy holds only inside it)"
            )
        if metadata.get("label_integer") and not np.all(y == np.round(y)):
            raise TabularDataError(f"{name}: label_integer is set but {split} labels are not integers")
        cats = arrays[f"x_cat_{split}"]
        sizes = list(metadata.get("cat_vocab_sizes", []))
        if cats.shape[1] != len(sizes):
            raise TabularDataError(f"{name}: {cats.shape[1]} categorical columns but {len(sizes)} vocabulary sizes")
        if cats.size and ((cats < 0).any() or (cats >= np.asarray(sizes)[None, :]).any()):
            raise TabularDataError(f"{name}: {split} category indices outside their vocabularies")


def save_prepared_tabular(
    out_path: str | os.PathLike, arrays: Mapping[str, np.ndarray], metadata: Mapping[str, Any]
) -> Path:
    """Validates and writes a prepared tabular dataset atomically (temporary name, then rename)."""
    missing = set(ARRAYS) - set(arrays)
    if missing:
        raise TabularDataError(f"prepared tabular data needs arrays {sorted(missing)}")
    meta = {"kind": "tabular", "task": "regression", **dict(metadata)}
    for key in ("dataset", "source", "label", "label_lower", "label_upper", "label_integer"):
        if key not in meta:
            raise TabularDataError(f"prepared tabular metadata needs {key!r}")

    def _2d(x, dtype):
        x = np.asarray(x, dtype=dtype)
        return x if x.ndim == 2 else x.reshape(len(x), -1)

    out = {
        "x_num_train": _2d(arrays["x_num_train"], np.float32),
        "x_num_test": _2d(arrays["x_num_test"], np.float32),
        "x_cat_train": _2d(arrays["x_cat_train"], np.int32),
        "x_cat_test": _2d(arrays["x_cat_test"], np.int32),
        "y_train": np.asarray(arrays["y_train"], dtype=np.float64),
        "y_test": np.asarray(arrays["y_test"], dtype=np.float64),
    }
    for key in OPTIONAL_ARRAYS:
        if key in arrays and arrays[key] is not None:
            dtype = (
                np.int64
                if key.startswith("user_")
                else np.float64
                if key.startswith("y_")
                else (np.float32 if key.startswith("x_num") else np.int32)
            )
            out[key] = _2d(arrays[key], dtype) if key.startswith("x_") else np.asarray(arrays[key], dtype=dtype)
    validate_tabular(out, meta)
    out["metadata"] = np.array(json.dumps(meta, sort_keys=True))
    out_path = Path(out_path)
    with atomic_output(out_path) as fh:
        np.savez_compressed(fh, **out)
    return out_path


def load_prepared_tabular(path: str | os.PathLike) -> PreparedTabular:
    """Loads what :func:`save_prepared_tabular` wrote (no pickles) and validates it again."""
    with np.load(Path(path), allow_pickle=False) as npz:
        missing = set(ARRAYS + ("metadata",)) - set(npz.files)
        if missing:
            raise TabularDataError(f"{path}: not a prepared tabular dataset (missing {sorted(missing)})")
        metadata = json.loads(str(npz["metadata"][()]))
        arrays = {k: npz[k] for k in ARRAYS + OPTIONAL_ARRAYS if k in npz.files}
    validate_tabular(arrays, metadata)
    return PreparedTabular(
        **arrays,
        name=str(metadata["dataset"]),
        source=str(metadata["source"]),
        subset=metadata.get("subset"),
        metadata=metadata,
    )


# ----------------------------------------------------------------------------- helpers


def random_split(n: int, *, test_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a random train / test split (003: "random 80/20 split"), fixed by ``seed``."""
    if n < 2:
        raise TabularDataError(f"cannot split {n} rows into train and test; the raw data has too few rows")
    perm = np.random.default_rng(seed).permutation(n)
    n_test = max(1, int(round(n * test_fraction)))
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, list]]:
    """Standardises numerical columns with the training split's statistics (constant columns: 1)."""
    train = np.asarray(train, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    if train.shape[1] == 0:
        return train, test, {"mean": [], "std": []}
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (train - mean) / std, (test - mean) / std, {"mean": mean.tolist(), "std": std.tolist()}


def build_vocab(values: np.ndarray, *, missing=None) -> dict:
    """Vocabulary of one categorical column from the TRAINING split: value -> index >= 1 (in
    sorted order of the values); index 0 is missing / unseen."""
    uniq = [v for v in np.unique(np.asarray(values)).tolist() if missing is None or v != missing]
    return {v: i + 1 for i, v in enumerate(uniq)}


def encode_categorical(values: np.ndarray, vocab: Mapping) -> np.ndarray:
    """Indices of ``values`` in ``vocab`` (0 for unseen or missing)."""
    return np.fromiter((vocab.get(v, 0) for v in np.asarray(values).tolist()), dtype=np.int32, count=len(values))


def encode_numeric_categories(values: np.ndarray, vocab: Mapping) -> np.ndarray:
    """:func:`encode_categorical` for integer-coded values, vectorised (millions of rows): the
    index of each value in ``vocab``, 0 for unseen or missing."""
    if not vocab:
        return np.zeros(len(values), np.int32)
    keys = np.fromiter(vocab.keys(), np.int64, len(vocab))
    idx = np.fromiter(vocab.values(), np.int64, len(vocab))
    order = np.argsort(keys)
    keys, idx = keys[order], idx[order]
    pos = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return np.where(keys[pos] == values, idx[pos], 0).astype(np.int32)
