"""Data-layer errors and checksum / sidecar verification of raw files.

Holds the exceptions every data module raises (:class:`DataError`, :class:`DataMissingError`,
:class:`ChecksumError`), md5/sha256 digests and their comparison against expected values
(:func:`file_digests`, :func:`verify_file`), the ``<file>.sha256`` sidecars that record
the checksum of files without a published one (:func:`sidecar_path`, :func:`read_sidecar`),
and :func:`locate_raw_file`. Re-exported by :mod:`labeldp.data.fetch`, the public import
surface.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from labeldp.atomic_io import write_text_atomic

CHUNK = 1 << 20


# ================================================================================ errors


class DataError(RuntimeError):
    """Base class of the data layer's errors."""


class DataMissingError(DataError):
    """A raw file is not available (not in the data dir, not in the mirror, not downloadable)."""


class ChecksumError(DataError):
    """A file's checksum differs from the expected one.

    Attributes: ``path`` (the file or URL checked), ``filename`` (its dataset file name),
    ``algorithm`` ("md5" or "sha256"), ``expected``, ``actual`` (the first failing
    checksum; md5 before sha256) and ``also`` (further failing checksums).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        algorithm: str,
        expected: str,
        actual: str,
        *,
        filename: str | None = None,
        hint: str | None = None,
        also: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        # a URL stays a string (Path would collapse its "//")
        self.path = path if isinstance(path, str) and "://" in path else Path(path)
        self.filename = filename or Path(str(path)).name
        self.algorithm = algorithm
        self.expected = expected
        self.actual = actual
        if hint is None:
            hint = (
                "The file is corrupt or is not the official file. Delete it and fetch it again "
                "(python -m labeldp.data.fetch <dataset> --data-dir ...); if it came from a mirror "
                "directory, replace the mirror copy with a verified one."
            )
        self.also = tuple(also)
        extra = "".join(f" (also {a}: expected {e}, got {g})" for a, e, g in self.also)
        super().__init__(
            f"checksum mismatch for {self.filename} ({self.path}): expected {algorithm} {expected}, "
            f"got {algorithm} {actual}{extra}. {hint}"
        )


# ============================================================================= checksums


def locate_raw_file(raw_dir: str | os.PathLike, names: Sequence[str]) -> Path | None:
    """A fetched raw file of one of ``names``: directly in ``raw_dir``, else wherever its
    ``MANIFEST.json`` (written by :func:`fetch_dataset`) says a file of that name lies.

    Args:
      raw_dir: the dataset's raw directory.
      names: acceptable file names, in order of preference for the direct look-up.

    Returns:
      The path, or None when no such file exists.
    """
    import json

    raw_dir = Path(raw_dir)
    for name in names:
        if (raw_dir / name).is_file():
            return raw_dir / name
    manifest = raw_dir / "MANIFEST.json"
    if manifest.is_file():
        for entry in json.loads(manifest.read_text()).get("files", []):
            p = Path(entry.get("path", ""))
            if p.name in names and p.is_file():
                return p
    return None


def file_digests(path: str | os.PathLike) -> dict[str, str]:
    """md5 and sha256 (hex) of a file, computed in one pass."""
    md5, sha = hashlib.md5(), hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            md5.update(chunk)
            sha.update(chunk)
    return {"md5": md5.hexdigest(), "sha256": sha.hexdigest()}


def mismatches(actual: Mapping[str, str], expected: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(algorithm, expected, actual) for every failing checksum; md5 (the published one) first."""
    out = []
    for alg in ("md5", "sha256"):
        exp = (expected.get(alg) or "").strip().lower()
        if exp and actual[alg] != exp:
            out.append((alg, exp, actual[alg]))
    return out


def first_mismatch(actual: Mapping[str, str], expected: Mapping[str, str]) -> tuple[str, str, str] | None:
    bad = mismatches(actual, expected)
    return bad[0] if bad else None


def checksum_error(path, actual, expected, **kwargs) -> ChecksumError | None:
    bad = mismatches(actual, expected)
    if not bad:
        return None
    return ChecksumError(path, *bad[0], also=bad[1:], **kwargs)


def verify_file(path: str | os.PathLike, *, md5: str | None = None, sha256: str | None = None) -> dict[str, str]:
    """Check ``path`` against the given md5 and/or sha256; return both actual digests.

    Raises :class:`ChecksumError` (naming the file, expected and actual value) on a
    mismatch, :class:`FileNotFoundError` if the file is absent, and :class:`ValueError`
    when no checksum is given.
    """
    if not md5 and not sha256:
        raise ValueError("verify_file needs md5 and/or sha256")
    actual = file_digests(path)
    err = checksum_error(path, actual, {"md5": md5 or "", "sha256": sha256 or ""})
    if err:
        raise err
    return actual


def sidecar_path(path: str | os.PathLike) -> Path:
    """``<file>.sha256`` next to ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def read_sidecar(path: str | os.PathLike) -> str | None:
    """The sha256 recorded for ``path`` (sha256sum format), or None if there is none."""
    side = sidecar_path(path)
    if not side.is_file():
        return None
    text = side.read_text().strip()
    if not text:
        return None
    value = text.split()[0].lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise DataError(f"{side}: not a sha256 sidecar (content {text[:80]!r}); delete it")
    return value


def write_sidecar(path: Path, sha256: str) -> Path:
    side = sidecar_path(path)
    content = f"{sha256}  {path.name}\n"
    if side.is_file() and side.read_text() == content:
        return side
    return write_text_atomic(side, content)
