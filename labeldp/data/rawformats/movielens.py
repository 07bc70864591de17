"""MovieLens-1M's raw format (GroupLens, https://files.grouplens.org/datasets/movielens/ml-1m-README.txt).

``ml-1m.zip`` holds ``ml-1m/ratings.dat``, ``ml-1m/users.dat``, ``ml-1m/movies.dat`` and a README. The
ratings file has one rating per line, ``UserID::MovieID::Rating::Timestamp`` (ISO-8859-1 text, no
header): user ids 1-6040, movie ids 1-3952, ratings whole stars 1-5, the time in seconds since the epoch;
each user has at least 20 ratings. Only ``ratings.dat`` is read (001 Table 3 predicts a rating from the
user and the movie); the stand-in writer still writes all three ``.dat`` members, in the same layout.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np

from labeldp.atomic_io import write_bytes_atomic

__all__ = ["RATINGS_MEMBER", "MovieLensFormatError", "read_movielens_ratings", "write_movielens_zip"]

RATINGS_MEMBER = "ml-1m/ratings.dat"
USERS_MEMBER = "ml-1m/users.dat"
MOVIES_MEMBER = "ml-1m/movies.dat"
RATING_RANGE = (1, 5)


class MovieLensFormatError(ValueError):
    """The archive is not MovieLens-1M's layout (the message names the problem and the fix)."""


def read_movielens_ratings(path: str | os.PathLike) -> np.ndarray:
    """Every rating of ``ml-1m.zip`` in file order.

    Args:
      path: the archive.

    Returns:
      ``(n, 4)`` int64: user id, movie id, rating (1-5), timestamp.

    Raises:
      MovieLensFormatError: no ``ml-1m/ratings.dat`` member, a line without four ``::``-separated
        integers (its number is named), or a rating outside 1-5.
    """
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, FileNotFoundError) as exc:
        raise MovieLensFormatError(f"{path}: not a readable zip archive ({exc}); fetch ml-1m.zip again") from exc
    with archive:
        if RATINGS_MEMBER not in archive.namelist():
            raise MovieLensFormatError(
                f"{path}: no member {RATINGS_MEMBER!r} (members: {archive.namelist()[:6]}); "
                "this is not MovieLens-1M's ml-1m.zip"
            )
        text = archive.read(RATINGS_MEMBER).decode("latin-1")
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("::")
        try:
            if len(fields) != 4:
                raise ValueError
            rows.append([int(f) for f in fields])
        except ValueError:
            raise MovieLensFormatError(
                f"{path}:{RATINGS_MEMBER} line {number}: {line[:60]!r} is not UserID::MovieID::Rating::Timestamp"
            ) from None
    if not rows:
        raise MovieLensFormatError(f"{path}:{RATINGS_MEMBER} holds no ratings")
    ratings = np.asarray(rows, dtype=np.int64)
    bad = (ratings[:, 2] < RATING_RANGE[0]) | (ratings[:, 2] > RATING_RANGE[1])
    if bad.any():
        line = int(np.argmax(bad)) + 1
        raise MovieLensFormatError(
            f"{path}:{RATINGS_MEMBER}: rating {int(ratings[bad][0, 2])} (line {line}) is outside 1-5"
        )
    return ratings


def write_movielens_zip(path: str | os.PathLike, ratings: np.ndarray) -> Path:
    """Writes ``ratings`` (``(n, 4)`` user, movie, rating, timestamp) as an ``ml-1m.zip`` in the official
    layout (with minimal ``users.dat`` / ``movies.dat`` members for the ids used), atomically."""
    ratings = np.asarray(ratings, dtype=np.int64)
    lines = "".join(f"{u}::{m}::{r}::{t}\n" for u, m, r, t in ratings)
    users = "".join(f"{u}::M::25::0::00000\n" for u in np.unique(ratings[:, 0]))
    movies = "".join(f"{m}::Stand-in movie {m} (2000)::Drama\n" for m in np.unique(ratings[:, 1]))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(RATINGS_MEMBER, lines.encode("latin-1"))
        archive.writestr(USERS_MEMBER, users.encode("latin-1"))
        archive.writestr(MOVIES_MEMBER, movies.encode("latin-1"))
    return write_bytes_atomic(Path(path), buffer.getvalue())
