"""MovieLens-1M (001 Table 3): the ``ml-1m.zip`` reader and writer, the preparation into (user, movie)
id pairs with rating classes, and clear errors for bad archives."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from labeldp.data.prepare import load_prepared
from labeldp.data.rawformats import make_standin_raw_files
from labeldp.data.rawformats.movielens import (
    RATINGS_MEMBER,
    MovieLensFormatError,
    read_movielens_ratings,
    write_movielens_zip,
)
from labeldp.data.registry import get_spec
from labeldp.data.sources import movielens_1m
from labeldp.data.tabular import TabularDataError


def _zip_with(path, member, text):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(member, text.encode("latin-1"))
    path.write_bytes(buffer.getvalue())
    return path


def test_the_reader_reads_back_what_the_writer_wrote_in_the_official_layout(tmp_path):
    ratings = np.array([[1, 1193, 5, 978300760], [1, 661, 3, 978302109], [2, 1357, 1, 978298709]])
    path = write_movielens_zip(tmp_path / "ml-1m.zip", ratings)
    np.testing.assert_array_equal(read_movielens_ratings(path), ratings)
    with zipfile.ZipFile(path) as archive:
        assert archive.read(RATINGS_MEMBER).decode("latin-1").splitlines()[0] == "1::1193::5::978300760"
        assert {"ml-1m/users.dat", "ml-1m/movies.dat"} <= set(archive.namelist())


@pytest.mark.parametrize(
    ("member", "text", "match"),
    [
        ("ml-100k/u.data", "1\t2\t3\t4\n", "no member 'ml-1m/ratings.dat'"),
        (RATINGS_MEMBER, "1::2::3::4\n1::2::3\n", "line 2"),
        (RATINGS_MEMBER, "1::2::x::4\n", "line 1"),
        (RATINGS_MEMBER, "1::2::6::4\n", "outside 1-5"),
        (RATINGS_MEMBER, "\n", "no ratings"),
    ],
)
def test_a_bad_archive_is_refused_naming_the_problem(tmp_path, member, text, match):
    with pytest.raises(MovieLensFormatError, match=match):
        read_movielens_ratings(_zip_with(tmp_path / "ml-1m.zip", member, text))


def test_a_file_that_is_not_a_zip_is_refused_with_the_fix(tmp_path):
    (tmp_path / "ml-1m.zip").write_text("not a zip")
    with pytest.raises(MovieLensFormatError, match="fetch ml-1m.zip again"):
        read_movielens_ratings(tmp_path / "ml-1m.zip")


def test_the_spec_is_a_ratings_source_with_the_published_md5():
    spec = get_spec("movielens_1m")
    assert (spec.kind, spec.model, spec.num_classes) == ("ratings", "ncf", 5)
    assert spec.files[0].md5 == "c4d9eecfca2ab87c1945afe126590906"
    assert spec.files[0].url == "https://files.grouplens.org/datasets/movielens/ml-1m.zip"


def test_preparation_gives_id_pairs_rating_classes_and_a_seeded_80_20_split(tmp_path):
    make_standin_raw_files("movielens_1m", tmp_path / "raw", n_train=800, n_test=200, seed=3)
    ratings = read_movielens_ratings(tmp_path / "raw" / "ml-1m.zip")
    out = movielens_1m.prepare_dataset(
        raw_dir=tmp_path / "raw", out_path=tmp_path / "p.npz", subset=None, source="synthetic_standin"
    )
    data = load_prepared(out)
    meta = data.metadata
    assert data.kind == "ratings" and data.is_synthetic and meta["standin_marker"]["dataset"] == "movielens_1m"
    assert (data.x_train.shape[0], data.x_test.shape[0]) == (800, 200)
    assert data.x_train.dtype == np.int32 and data.num_classes == 5 and meta["class_values"] == [1, 2, 3, 4, 5]
    x = np.concatenate([data.x_train, data.x_test])
    y = np.concatenate([data.y_train, data.y_test])
    users, movies = np.unique(ratings[:, 0]), np.unique(ratings[:, 1])
    assert meta["model_sizes"] == {"num_users": users.size, "num_items": movies.size}
    # every prepared example is one raw rating: (user, movie, stars) multisets agree
    prepared = sorted(zip(users[x[:, 0]], movies[x[:, 1]], y + 1))
    assert prepared == sorted(map(tuple, ratings[:, :3].tolist()))
    again = load_prepared(
        movielens_1m.prepare_dataset(
            raw_dir=tmp_path / "raw", out_path=tmp_path / "q.npz", subset=None, source="synthetic_standin"
        )
    )
    np.testing.assert_array_equal(again.x_test, data.x_test)  # the split is fixed (seed 0)


def test_subset_keeps_the_first_ratings_of_the_file(tmp_path):
    make_standin_raw_files("movielens_1m", tmp_path / "raw", n_train=400, n_test=100, seed=0)
    data = load_prepared(
        movielens_1m.prepare_dataset(
            raw_dir=tmp_path / "raw", out_path=tmp_path / "p.npz", subset=50, source="synthetic_standin"
        )
    )
    assert data.x_train.shape[0] + data.x_test.shape[0] == 50 and data.metadata["n_ratings_full"] == 500


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"source": "official"}, "holds the stand-in marker"),
        ({"source": "synthetic_standin", "subset": 1}, "subset must be"),
        ({"source": "somewhere"}, "source must be one of"),
    ],
)
def test_bad_preparation_arguments_are_refused(tmp_path, kwargs, match):
    make_standin_raw_files("movielens_1m", tmp_path / "raw", n_train=40, n_test=10, seed=0)
    with pytest.raises(TabularDataError, match=match):
        movielens_1m.prepare_dataset(raw_dir=tmp_path / "raw", out_path=tmp_path / "p.npz", **kwargs)
    assert not (tmp_path / "p.npz").exists()


def test_a_missing_archive_says_to_fetch_it(tmp_path):
    with pytest.raises(TabularDataError, match="fetch it first"):
        movielens_1m.prepare_dataset(raw_dir=tmp_path, out_path=tmp_path / "p.npz", source="official")
