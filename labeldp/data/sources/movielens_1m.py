"""MovieLens-1M (001 Table 3): ``ml-1m.zip`` -> a prepared ratings ``.npz``.

001 Section 5.1 / Appendix B: "Following [Bu et al.], we randomly split the data into 80% train and 20%
test", treat the five ratings as classes, train the two-branch neural collaborative filtering network
(:class:`labeldp.collaborative_filtering.NeuralCollaborativeFiltering`) and report the test RMSE of the
rating the softmax expects.

Preparation (our fixed choices where 001 is silent):

* one example per rating: input ``(user index, movie index)``, label ``rating - 1`` (classes 0-4);
  ``metadata["class_values"] = [1, 2, 3, 4, 5]`` is each class's rating (what the RMSE compares);
* users and movies are numbered 0.. in increasing raw id over the whole file (ids are public
  identifiers, not labels; a test pair whose user or movie has no training rating keeps its initial
  embedding);
* a random 80/20 split with seed 0 (:func:`labeldp.data.tabular.random_split`), after ``subset`` keeps
  the file's first n ratings (the file is grouped by user);
* ``x`` is int32 ``(n, 2)``: ids, which :func:`labeldp.training.to_float_images` passes through as
  float32 (exact below 2^24) and the network casts back.

The privacy unit is one rating (001's example-level label DP; a user with many ratings is many units).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from labeldp.data.dataset_spec import DatasetSpec, RemoteFile
from labeldp.data.fetch import file_digests
from labeldp.data.rawformats.movielens import read_movielens_ratings, write_movielens_zip
from labeldp.data.rawformats.standin import begin_tabular_standin, is_standin_dir, read_standin_marker
from labeldp.data.tabular import TabularDataError, random_split
from labeldp import __version__ as labeldp_version
from labeldp.data.prepare import atomic_savez

__all__ = ["SPEC", "ARCHIVE", "CLASS_VALUES", "KIND", "prepare_dataset", "write_standin"]

ARCHIVE = "ml-1m.zip"
#: the rating each class stands for (class c is c + 1 stars)
CLASS_VALUES = (1.0, 2.0, 3.0, 4.0, 5.0)
#: the prepared kind: (user, movie) id pairs with a rating class (:mod:`labeldp.tasks`)
KIND = "ratings"
SOURCES = ("official", "synthetic_standin")

SPEC = DatasetSpec(
    name="movielens_1m",
    title="MovieLens 1M",
    files=(
        RemoteFile(
            filename=ARCHIVE,
            url="https://files.grouplens.org/datasets/movielens/ml-1m.zip",
            md5="c4d9eecfca2ab87c1945afe126590906",
        ),
    ),
    kind=KIND,
    model="ncf",
    raw_format="movielens_zip",
    num_classes=len(CLASS_VALUES),
    input_shape=(2,),
    homepage="https://grouplens.org/datasets/movielens/1m/",
    license="GroupLens research license (no redistribution; see the archive's README)",
    citation="Harper, Konstan (2015). The MovieLens Datasets: History and Context. ACM TiiS 5(4).",
    label="Rating",
    standin_allowed=True,
    notes=(
        "md5 as GroupLens publishes it (ml-1m.zip.md5). Not in the shared mirror and not downloadable on "
        "the CPU machine: tests and the smoke profile use a SYNTHETIC stand-in in the same layout."
    ),
)


def prepare_dataset(
    *, raw_dir: str | os.PathLike, out_path: str | os.PathLike, subset: int | None = None, source: str
) -> Path:
    """``raw_dir/ml-1m.zip`` -> ``out_path`` (see the module docstring), written atomically.

    Args:
      raw_dir: the directory holding ``ml-1m.zip`` (a stand-in directory has the marker).
      out_path: the ``.npz`` to write.
      subset: keep the file's first ``subset`` ratings before the split (None: all 1,000,209).
      source: ``"official"`` or ``"synthetic_standin"`` (must match the directory).

    Returns:
      ``out_path``.

    Raises:
      TabularDataError: the archive is missing, a bad ``subset`` or ``source``, or too few ratings.
    """
    raw_dir, out_path = Path(raw_dir), Path(out_path)
    path = raw_dir / ARCHIVE
    if not path.is_file():
        raise TabularDataError(f"movielens_1m: {path} not found; fetch it first (snakemake fetch, or a mirror)")
    if source not in SOURCES:
        raise TabularDataError(f"movielens_1m: source must be one of {SOURCES}, got {source!r}")
    standin = is_standin_dir(raw_dir)
    if standin != (source == "synthetic_standin"):
        raise TabularDataError(f"movielens_1m: {raw_dir} {'holds' if standin else 'lacks'} the stand-in marker")
    if subset is not None and (isinstance(subset, bool) or int(subset) < 2):
        raise TabularDataError(f"movielens_1m: subset must be an integer >= 2 or None, got {subset!r}")
    ratings = read_movielens_ratings(path)
    n_full = int(ratings.shape[0])
    if subset is not None:
        ratings = ratings[: int(subset)]
    users, user_index = np.unique(ratings[:, 0], return_inverse=True)
    movies, movie_index = np.unique(ratings[:, 1], return_inverse=True)
    x = np.stack([user_index, movie_index], axis=1).astype(np.int32)
    y = (ratings[:, 2] - 1).astype(np.int64)
    train, test = random_split(x.shape[0], test_fraction=0.2, seed=0)
    digests = file_digests(path)
    metadata = {
        "format_version": 1,
        "kind": KIND,
        "dataset": SPEC.name,
        "source": source,
        "synthetic": standin,
        "subset": None if subset is None else int(subset),
        "n_ratings_full": n_full,
        "n_train": int(train.size),
        "n_test": int(test.size),
        "num_classes": len(CLASS_VALUES),
        "class_values": list(CLASS_VALUES),
        "num_users": int(users.size),
        "num_movies": int(movies.size),
        "model_sizes": {"num_users": int(users.size), "num_items": int(movies.size)},  # the network's tables
        "input_shape": [2],
        "split": "random 80/20, seed 0 (001 Section 5.1, following Bu et al.)",
        "raw_sha256": {ARCHIVE: digests["sha256"]},
        "standin_marker": read_standin_marker(raw_dir) if standin else None,
        "labeldp_version": labeldp_version,
    }
    arrays = {
        "x_train": x[train],
        "y_train": y[train],
        "x_test": x[test],
        "y_test": y[test],
        "metadata": np.array(json.dumps(metadata, sort_keys=True)),
    }
    atomic_savez(out_path, arrays)
    return out_path


def write_standin(
    directory: str | os.PathLike, *, seed: int, n_train: int | None = None, n_test: int | None = None
) -> list[Path]:
    """Writes a SYNTHETIC ``ml-1m.zip`` (tests / CPU smoke only), the marker first.

    ``n_train + n_test`` ratings by ``max(8, n // 25)`` users of ``max(8, n // 20)`` movies; a rating is
    ``round(3.5 + user bias + movie bias + noise)`` clipped to 1-5, so a model of both ids learns
    something; the file is grouped by user, as the official one.

    Returns:
      ``[path of the archive]``.
    """
    directory, n, rng = begin_tabular_standin(directory, dataset=SPEC.name, seed=seed, n_train=n_train, n_test=n_test)
    n_users, n_movies = max(8, n // 25), max(8, n // 20)
    user = np.sort(rng.integers(0, n_users, n))
    movie = rng.integers(0, n_movies, n)
    user_bias, movie_bias = rng.normal(0.0, 0.8, n_users), rng.normal(0.0, 0.8, n_movies)
    stars = np.clip(np.rint(3.5 + user_bias[user] + movie_bias[movie] + rng.normal(0.0, 0.5, n)), 1, 5)
    timestamps = 978300000 + rng.integers(0, 10**6, n)
    ratings = np.stack([user + 1, movie + 1, stars.astype(np.int64), timestamps], axis=1)
    return [write_movielens_zip(directory / ARCHIVE, ratings)]
