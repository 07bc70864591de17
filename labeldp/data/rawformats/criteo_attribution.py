"""The raw format of the Criteo Attribution Modeling for Bidding dataset (000 Table 7, 002): the archive's
and its member's names, the member's columns, and its streaming reader (chunks of rows, the eligible users,
the rows of given users), shared by the preparation (:mod:`labeldp.data.sources.criteo_attribution`) and
the stand-in writer (:mod:`labeldp.data.rawformats.criteo_attribution_standin`)."""

from __future__ import annotations

import gzip
import zipfile
from contextlib import closing
from pathlib import Path

import numpy as np

from labeldp.data.fetch import locate_raw_file
from labeldp.data.tabular import TabularDataError

__all__ = [
    "ARCHIVE",
    "COLUMNS",
    "MEMBER",
    "LABEL",
    "USER",
    "CATEGORICAL_FEATURES",
    "NUMERICAL_FEATURES",
    "LABEL_COLUMNS",
    "SENSITIVE_FEATURES",
    "CHUNK_ROWS",
    "MISSING",
    "raw_path",
    "read_header",
    "read_chunks",
    "eligible_users",
    "read_rows",
]

ARCHIVE = "criteo-research-attribution-dataset.zip"
MEMBER = "criteo_attribution_dataset.tsv.gz"
COLUMNS = (
    "timestamp",
    "uid",
    "campaign",
    "conversion",
    "conversion_timestamp",
    "conversion_id",
    "attribution",
    "click",
    "click_pos",
    "click_nb",
    "cost",
    "cpo",
    "time_since_last_click",
    *(f"cat{i}" for i in range(1, 10)),
)

LABEL = "last_touch_attribution_conversion"
USER = "uid"
CATEGORICAL_FEATURES = ("campaign", *(f"cat{i}" for i in range(1, 10)))
NUMERICAL_FEATURES = ("cost",)
LABEL_COLUMNS = ("conversion", "click", "click_pos", "click_nb")
SENSITIVE_FEATURES = ("cat1", "cat2")

CHUNK_ROWS = 500_000
MISSING = np.iinfo(np.int64).min  # an empty categorical cell (index 0 after encoding)


# ------------------------------------------------------------------------------ reading


def raw_path(raw_dir: Path) -> Path:
    """The zip (directly, or listed in ``MANIFEST.json``), else a bare ``.tsv.gz`` in ``raw_dir``."""
    found = locate_raw_file(raw_dir, (ARCHIVE, MEMBER))
    if found is not None:
        return found
    direct = raw_dir / ARCHIVE
    raise TabularDataError(
        f"criteo_attribution: {direct} not found; fetch it first (snakemake "
        "fetch_criteo_attribution, or python -m labeldp.data.fetch criteo_attribution "
        f"--data-dir <data_dir>/raw), or place the zip (or its {MEMBER}) in {raw_dir}"
    )


class MemberStream:
    """The decompressed TSV of the zip member (or of the bare ``.tsv.gz``), as a binary stream."""

    def __init__(self, path: Path):
        self.path = path
        self._zip = None
        self.name = path.name

    def __enter__(self):
        try:
            if self.path.name.endswith(".gz"):
                raw = open(self.path, "rb")
            else:
                self._zip = zipfile.ZipFile(self.path)
                member = next(
                    (m for m in self._zip.infolist() if not m.is_dir() and Path(m.filename).name == MEMBER), None
                )
                if member is None:
                    names = [m.filename for m in self._zip.infolist()][:10]
                    raise TabularDataError(
                        f"criteo_attribution: {self.path} has no member {MEMBER} (members: "
                        f"{names}); expected the official archive"
                    )
                self.name = member.filename
                raw = self._zip.open(member)
        except TabularDataError:
            self.close()
            raise
        except (zipfile.BadZipFile, OSError) as exc:
            self.close()
            kind = "gzip file" if self.path.name.endswith(".gz") else "zip archive"
            raise TabularDataError(
                f"criteo_attribution: {self.path} is not a readable {kind} ({exc}); fetch it again"
            ) from exc
        self._raw = raw
        self.fh = gzip.GzipFile(fileobj=raw, mode="rb")
        return self

    def close(self):
        for obj in (getattr(self, "fh", None), getattr(self, "_raw", None), self._zip):
            if obj is not None:
                obj.close()

    def __exit__(self, *exc):
        self.close()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_header(path: Path) -> tuple[list[str], str]:
    with MemberStream(path) as s:
        try:
            first = s.fh.readline(1 << 16)
        except (OSError, EOFError) as exc:
            raise TabularDataError(f"criteo_attribution: {s.name} in {path} is not gzip-compressed ({exc})") from exc
        name = s.name
    header = [c.strip() for c in first.decode("utf-8", "replace").rstrip("\r\n").split("\t")]
    if not first.strip():
        raise TabularDataError(f"criteo_attribution: {name} in {path} is empty")
    needed = [USER, *LABEL_COLUMNS, *CATEGORICAL_FEATURES, *NUMERICAL_FEATURES]
    missing = [c for c in needed if c not in header]
    if missing:
        hint = (
            " (the first line looks like data: the official file starts with a header line)"
            if all(_is_number(c) for c in header if c)
            else ""
        )
        raise TabularDataError(
            f"criteo_attribution: the header of {name} in {path} lacks the columns {missing}"
            f"{hint}; expected the official tab-separated header {', '.join(COLUMNS)}. "
            "Fetch the official file again"
        )
    return header, name


def read_chunks(path: Path, header: list[str], usecols: list[str]):
    """pandas chunks of ``usecols`` (integers; ``cost`` float; categories nullable)."""
    import pandas as pd

    dtype = {
        c: ("Int64" if c in CATEGORICAL_FEATURES else "float64" if c in NUMERICAL_FEATURES else "int64")
        for c in usecols
    }
    with MemberStream(path) as s:
        s.fh.readline(1 << 16)  # the header, already checked
        reader = pd.read_csv(
            s.fh,
            sep="\t",
            header=None,
            names=header,
            usecols=usecols,
            dtype=dtype,
            keep_default_na=False,
            na_values={c: [""] for c in usecols if c in CATEGORICAL_FEATURES + NUMERICAL_FEATURES},
            chunksize=CHUNK_ROWS,
        )
        try:
            yield from reader
        except (ValueError, TypeError, OverflowError, pd.errors.ParserError) as exc:
            raise TabularDataError(
                f"criteo_attribution: cannot parse {s.name} in {path} as the official "
                f"tab-separated file (integer ids, categories and 0/1 flags, float cost; no "
                f"empty {USER} / {', '.join(LABEL_COLUMNS)}): {exc}"
            ) from exc


def eligible_users(path: Path, header: list[str], counts: dict) -> np.ndarray:
    """Sorted unique uids with at least one clicked impression (first pass: uid and click only)."""
    parts = []
    with closing(read_chunks(path, header, [USER, "click"])) as chunks:
        for chunk in chunks:
            click = chunk["click"].to_numpy()
            counts["rows_read"] += len(click)
            counts["rows_clicked"] += int((click == 1).sum())
            parts.append(np.unique(chunk[USER].to_numpy()[click == 1]))
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def read_rows(path: Path, header: list[str], users: np.ndarray | None, max_rows: int | None, counts: dict):
    """Clicked rows (of ``users`` if given; the first ``max_rows`` if given): uid, label, categories, cost."""
    usecols = [USER, *LABEL_COLUMNS, *CATEGORICAL_FEATURES, *NUMERICAL_FEATURES]
    uids, ys, cats, nums = [], [], [], []
    kept = 0
    count_rows = users is None  # the users split counted rows in its first pass
    with closing(read_chunks(path, header, usecols)) as chunks:
        for chunk in chunks:
            click = chunk["click"].to_numpy()
            keep = click == 1
            if users is not None:
                keep &= np.isin(chunk[USER].to_numpy(), users, assume_unique=False)
            if max_rows is not None and kept + int(keep.sum()) >= max_rows:
                cut = int(np.searchsorted(np.cumsum(keep), max_rows - kept)) + 1
                chunk, click, keep = chunk.iloc[:cut], click[:cut], keep[:cut]
            if count_rows:
                counts["rows_read"] += len(click)
                counts["rows_clicked"] += int((click == 1).sum())
            part = chunk[keep]
            conversion, pos, nb = (part[c].to_numpy() for c in ("conversion", "click_pos", "click_nb"))
            ys.append(((conversion == 1) & (pos == nb - 1)).astype(np.int8))
            counts["kept_rows_conversion"] += int((conversion == 1).sum())
            counts["kept_rows_conversion_click_nb_below_1"] += int(((conversion == 1) & (nb < 1)).sum())
            uids.append(part[USER].to_numpy(np.int64))
            cats.append(np.stack([part[c].to_numpy(np.int64, na_value=MISSING) for c in CATEGORICAL_FEATURES], axis=1))
            nums.append(part[list(NUMERICAL_FEATURES)].to_numpy(np.float64))
            kept += len(part)
            if max_rows is not None and kept >= max_rows:
                break
    if not ys:
        return (
            np.zeros(0, np.int64),
            np.zeros(0, np.int8),
            np.zeros((0, len(CATEGORICAL_FEATURES)), np.int64),
            np.zeros((0, len(NUMERICAL_FEATURES))),
        )
    return np.concatenate(uids), np.concatenate(ys), np.concatenate(cats), np.concatenate(nums)
