"""Synthetic stand-ins in a dataset's exact raw format (tests and the CPU smoke profile only).

A stand-in directory carries a ``STANDIN_SYNTHETIC`` marker (JSON: dataset, seed, sizes), written
FIRST by every stand-in writer; the preparations turn it into ``source = "synthetic_standin"`` and
:func:`labeldp.data.fetch.fetch_dataset` refuses to touch such a directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from labeldp.atomic_io import write_bytes_atomic

__all__ = [
    "STANDIN_MARKER",
    "STANDIN_SIZES",
    "is_standin_dir",
    "read_standin_marker",
    "write_standin_marker",
    "synthetic_image_splits",
    "standin_rows",
    "begin_tabular_standin",
]

STANDIN_MARKER = "STANDIN_SYNTHETIC"


# ===================================================================== synthetic stand-ins


def synthetic_images(rng: np.random.Generator, labels: np.ndarray, templates: np.ndarray) -> np.ndarray:
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


def write_standin_marker(
    directory: str | os.PathLike, *, dataset: str, seed: int, n_train: int, n_test: int, **extra
) -> Path:
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
    write_bytes_atomic(directory / STANDIN_MARKER, (json.dumps(marker, indent=2) + "\n").encode())
    return directory / STANDIN_MARKER


STANDIN_SIZES = (512, 256)
"""(train, test) examples of the smoke profile's SYNTHETIC stand-in files."""


def synthetic_image_splits(*, num_classes: int, shape: tuple[int, ...], n_train: int, n_test: int, seed: int):
    """Class templates plus noise (a model can learn something in a smoke run): ``(x_train, y_train,
    x_test, y_test)``, uint8 images of ``shape`` (H, W, C) and int64 labels with every class equally often."""
    rng = np.random.default_rng(seed)
    templates = rng.integers(0, 256, size=(num_classes,) + tuple(shape), dtype=np.int64).astype(np.uint8)
    y_train = rng.permutation(np.arange(n_train) % num_classes).astype(np.int64)
    y_test = rng.permutation(np.arange(n_test) % num_classes).astype(np.int64)
    return synthetic_images(rng, y_train, templates), y_train, synthetic_images(rng, y_test, templates), y_test


def standin_rows(n_rows: int | None, n_train: int | None, n_test: int | None) -> int:
    """A tabular stand-in's raw row count: ``n_rows``, or ``n_train + n_test`` when the stand-in protocol's
    call (:func:`labeldp.data.rawformats.make_standin_raw_files`) gives the splits' sizes only.

    Raises:
      ValueError: neither is given.
    """
    if n_rows is not None:
        return int(n_rows)
    if n_train is None or n_test is None:
        raise ValueError("write_standin needs n_rows, or n_train and n_test")
    return int(n_train) + int(n_test)


def begin_tabular_standin(
    directory: str | os.PathLike,
    *,
    dataset: str,
    seed: int,
    n_rows: int | None = None,
    n_train: int | None = None,
    n_test: int | None = None,
) -> tuple[Path, int, np.random.Generator]:
    """The common start of a tabular stand-in writer: the row count, the marker written FIRST, the rng.

    Args:
      directory: the stand-in's raw directory (created by the marker's write).
      dataset: the dataset's name, stored in the marker.
      seed: the stand-in's seed (the rng is ``default_rng(seed)``).
      n_rows: raw rows (default ``n_train + n_test``; :func:`standin_rows`).
      n_train, n_test: stored in the marker (default: an 80/20 split of the rows, at least 1 test row).

    Returns:
      ``(directory as a Path, the row count, the rng)``.

    Raises:
      ValueError: fewer than 2 rows, or neither ``n_rows`` nor both splits given.
    """
    n_rows = standin_rows(n_rows, n_train, n_test)
    if n_rows < 2:
        raise ValueError(f"a {dataset} stand-in needs at least 2 rows, got {n_rows}")
    directory = Path(directory)
    n_test = n_test if n_test is not None else max(1, round(0.2 * n_rows))
    write_standin_marker(
        directory,
        dataset=dataset,
        seed=seed,
        n_train=n_train if n_train is not None else n_rows - n_test,
        n_test=n_test,
        n_rows=n_rows,
    )
    return directory, n_rows, np.random.default_rng(seed)
