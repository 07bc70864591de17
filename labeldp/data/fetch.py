"""Fetch raw dataset files: mirror first, then the official URLs; always verified.

Layout: dataset ``name`` lives in ``<data_dir>/<name>/<filename>``; a mirror directory has
the same layout (``<mirror>/<name>/<filename>``), so a populated data dir can serve as a
mirror for another checkout.

For every raw file of the dataset (see :mod:`labeldp.data.registry`):

1. An existing destination file is re-verified. If it passes, it is left alone (not
   copied again, mtime unchanged). If it fails, a message says so, it is deleted and
   fetched again.
2. The mirror (argument ``mirror``, else the environment variable ``LABELDP_DATA_MIRROR``,
   ``os.pathsep``-separated for several) is searched. A file found there is copied, never
   downloaded.
3. Otherwise, unless ``allow_download`` is False, the file is downloaded with
   :mod:`urllib` from the official URL, then the listed alternatives.

Everything is written to ``<filename>.part-<random>`` in the destination directory,
verified, and only then renamed into place with :func:`os.replace`. A checksum mismatch
removes the temporary file and raises :class:`ChecksumError`; no partial or unverified
file is ever left at the destination.

Files without a published checksum (the Criteo archives) get their sha256 recorded on
first arrival in a sidecar ``<filename>.sha256`` and checked against it afterwards; a
``pinned_sha256`` (from config) takes precedence over the sidecar.

The 1940 Census extract cannot be downloaded (IPUMS account needed): its path comes from
config (``census_path``) and a missing file raises :class:`DataMissingError` with exact
instructions.

CLI (used by the Snakemake rule)::

    python -m labeldp.data.fetch <dataset> --data-dir D [--mirror M] [--no-download]
                                 [--sha256 HEX] [--census-path P] [--quiet]
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from .registry import (
    CENSUS1940_CATEGORICAL_FEATURES,
    CENSUS1940_DEFAULT_FILENAME,
    CENSUS1940_LABEL,
    CENSUS1940_NUMERICAL_FEATURES,
    DatasetSpec,
    RemoteFile,
    get_spec,
)

__all__ = [
    "DataError",
    "DataMissingError",
    "ChecksumError",
    "MIRROR_ENV",
    "fetch_dataset",
    "verify_file",
    "file_digests",
    "sidecar_path",
    "read_sidecar",
    "mirror_dirs",
    "main",
]

MIRROR_ENV = "LABELDP_DATA_MIRROR"
TIMEOUT_ENV = "LABELDP_DOWNLOAD_TIMEOUT"
STANDIN_MARKER = "STANDIN_SYNTHETIC"  # same name as labeldp.data.rawformats.STANDIN_MARKER
_CHUNK = 1 << 20
_USER_AGENT = "labeldp-fetch/0.1 (+https://github.com; research reproduction)"


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
        while chunk := fh.read(_CHUNK):
            md5.update(chunk)
            sha.update(chunk)
    return {"md5": md5.hexdigest(), "sha256": sha.hexdigest()}


def _mismatches(actual: Mapping[str, str], expected: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(algorithm, expected, actual) for every failing checksum; md5 (the published one) first."""
    out = []
    for alg in ("md5", "sha256"):
        exp = (expected.get(alg) or "").strip().lower()
        if exp and actual[alg] != exp:
            out.append((alg, exp, actual[alg]))
    return out


def _first_mismatch(actual: Mapping[str, str], expected: Mapping[str, str]) -> tuple[str, str, str] | None:
    bad = _mismatches(actual, expected)
    return bad[0] if bad else None


def _checksum_error(path, actual, expected, **kwargs) -> ChecksumError | None:
    bad = _mismatches(actual, expected)
    if not bad:
        return None
    return ChecksumError(path, *bad[0], also=bad[1:], **kwargs)


def verify_file(
    path: str | os.PathLike, *, md5: str | None = None, sha256: str | None = None
) -> dict[str, str]:
    """Check ``path`` against the given md5 and/or sha256; return both actual digests.

    Raises :class:`ChecksumError` (naming the file, expected and actual value) on a
    mismatch, :class:`FileNotFoundError` if the file is absent, and :class:`ValueError`
    when no checksum is given.
    """
    if not md5 and not sha256:
        raise ValueError("verify_file needs md5 and/or sha256")
    actual = file_digests(path)
    err = _checksum_error(path, actual, {"md5": md5 or "", "sha256": sha256 or ""})
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


def _write_sidecar(path: Path, sha256: str) -> Path:
    side = sidecar_path(path)
    content = f"{sha256}  {path.name}\n"
    if side.is_file() and side.read_text() == content:
        return side
    fd, tmp = tempfile.mkstemp(prefix=side.name + ".part-", dir=side.parent)
    os.chmod(tmp, _umask_mode())
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(content)
        os.replace(tmp, side)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return side


# ============================================================================== helpers


def _umask_mode(mode: int = 0o666) -> int:
    """``mode`` filtered by the process umask (mkstemp creates 0600 files)."""
    current = os.umask(0)
    os.umask(current)
    return mode & ~current


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"[labeldp.data] {msg}", file=sys.stderr, flush=True)


def mirror_dirs(mirror: str | os.PathLike | Sequence[str | os.PathLike] | None = None) -> list[Path]:
    """Mirror directories to search: the argument, else ``$LABELDP_DATA_MIRROR``."""
    if mirror is None:
        env = os.environ.get(MIRROR_ENV, "")
        return [Path(p) for p in env.split(os.pathsep) if p.strip()]
    if isinstance(mirror, (str, os.PathLike)):
        return [Path(mirror)] if str(mirror) else []
    return [Path(m) for m in mirror if str(m)]


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"


class _Progress:
    """Progress on stderr: a rewritten line on a terminal, a line per 10% otherwise."""

    def __init__(self, label: str, total: int | None, quiet: bool) -> None:
        self.label, self.total, self.quiet = label, total, quiet
        self.done = 0
        self.tty = sys.stderr.isatty()
        self.last_step = -1
        self.last_time = 0.0
        self.start = time.monotonic()

    def update(self, n: int) -> None:
        self.done += n
        if self.quiet:
            return
        now = time.monotonic()
        if self.total:
            step = int(10 * self.done / self.total)
            pct = f"{100 * self.done / self.total:5.1f}%"
        else:
            step = int(self.done // (50 << 20))
            pct = "?"
        if self.tty and now - self.last_time > 0.2:
            self.last_time = now
            total = _fmt_bytes(self.total) if self.total else "?"
            print(f"\r  {self.label}: {_fmt_bytes(self.done)} / {total} ({pct})", end="", file=sys.stderr, flush=True)
        elif not self.tty and step != self.last_step:
            self.last_step = step
            print(f"  {self.label}: {_fmt_bytes(self.done)} ({pct})", file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.quiet:
            return
        secs = time.monotonic() - self.start
        end = "\n" if self.tty else ""
        print(f"{end}  {self.label}: {_fmt_bytes(self.done)} in {secs:.1f} s", file=sys.stderr, flush=True)


def _stream_to_temp(src, dest: Path, progress: _Progress | None) -> tuple[Path, dict[str, str]]:
    """Copy a binary stream to ``<dest>.part-<random>`` (same dir), hashing on the way.

    Returns (temp path, digests). The temp file is removed if anything fails.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".part-", dir=dest.parent)
    tmp = Path(tmp_name)
    os.chmod(tmp, _umask_mode())
    md5, sha = hashlib.md5(), hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := src.read(_CHUNK):
                out.write(chunk)
                md5.update(chunk)
                sha.update(chunk)
                if progress is not None:
                    progress.update(len(chunk))
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, {"md5": md5.hexdigest(), "sha256": sha.hexdigest()}


def _download_to_temp(url: str, dest: Path, quiet: bool) -> tuple[Path, dict[str, str]]:
    timeout = float(os.environ.get(TIMEOUT_ENV, "60"))
    req = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (http(s) URLs from the registry)
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        progress = _Progress(dest.name, total, quiet)
        tmp, digests = _stream_to_temp(resp, dest, progress)
        progress.finish()
    if total is not None and progress.done != total:
        tmp.unlink(missing_ok=True)
        raise OSError(f"truncated download: got {progress.done} of {total} bytes")
    return tmp, digests


def _expected_checksums(rf: RemoteFile, dest: Path, pinned: str | None) -> tuple[dict[str, str], str]:
    """Expected digests for ``rf`` and where the sha256 expectation came from."""
    expected: dict[str, str] = {}
    origin = "from the registry"
    if rf.md5:
        expected["md5"] = rf.md5.lower()
    if rf.sha256:
        expected["sha256"] = rf.sha256.lower()
    if pinned:
        expected["sha256"] = pinned.strip().lower()
        origin = "pinned in config"
    elif not rf.has_published_checksum:
        recorded = read_sidecar(dest)
        if recorded:
            expected["sha256"] = recorded
            origin = f"recorded on first download in {sidecar_path(dest)}"
    return expected, origin


def _pinned_for(spec: DatasetSpec, pinned_sha256: str | Mapping[str, str] | None) -> dict[str, str]:
    if pinned_sha256 is None:
        return {}
    if isinstance(pinned_sha256, Mapping):
        unknown = set(pinned_sha256) - set(spec.filenames)
        if unknown:
            raise ValueError(f"pinned_sha256 names files {sorted(unknown)} that {spec.name} does not have")
        return {k: v for k, v in pinned_sha256.items() if v}
    if len(spec.files) != 1:
        raise ValueError(
            f"{spec.name} has {len(spec.files)} files; give pinned_sha256 as a mapping filename -> sha256"
        )
    return {spec.files[0].filename: pinned_sha256} if pinned_sha256 else {}


def _after_arrival(spec: DatasetSpec, rf: RemoteFile, dest: Path, digests: Mapping[str, str],
                   had_expectation: bool, quiet: bool) -> None:
    """Record/refresh the sha256 sidecar of files without a published checksum."""
    if rf.has_published_checksum:
        return
    side = _write_sidecar(dest, digests["sha256"])
    if not had_expectation:
        msg = (
            f"{rf.filename}: no published checksum exists; recorded sha256 {digests['sha256']} in {side}. "
            f"Pin it in the workflow config (pinned_sha256 for {spec.name}) so later copies are checked "
            "against it independently of the sidecar."
        )
        # Printed even when quiet: the user needs the value to pin it.
        print(f"[labeldp.data] {msg}", file=sys.stderr, flush=True)


def _missing_message(spec: DatasetSpec, rf: RemoteFile, dest: Path, searched: list[Path],
                     mirrors: list[Path], reason: str) -> str:
    lines = [f"{spec.name}: raw file {rf.filename} is missing ({reason})."]
    lines.append(f"  destination: {dest}")
    if searched:
        for p in searched:
            lines.append(f"  mirror searched: {p} ({'present' if p.is_file() else 'absent'})")
    else:
        lines.append(f"  mirror searched: none configured (pass --mirror DIR or set {MIRROR_ENV})")
    for m in mirrors:
        if not m.is_dir():
            lines.append(f"  note: mirror directory {m} does not exist")
    urls = rf.urls
    lines.append("  official URL: " + (" | ".join(urls) if urls else "none"))
    if rf.md5 or rf.sha256:
        lines.append("  expected checksum: " + ", ".join(f"{a} {v}" for a, v in (("md5", rf.md5), ("sha256", rf.sha256)) if v))
    lines.append(
        f"  fix: download the file from the URL and put it at <mirror>/{spec.name}/{rf.filename}, "
        "then run again with the mirror configured (it is verified before use)"
        + ("" if reason.startswith("download") else ", or allow downloads (drop --no-download)")
        + "."
    )
    if spec.notes:
        lines.append(f"  note: {spec.notes}")
    if spec.standin_allowed:
        lines.append(
            "  for tests / the CPU smoke profile only: synthetic stand-ins in the same raw format can be "
            f"written with `python -m labeldp.data.rawformats {spec.name} --dir DIR` (flagged as synthetic; "
            "never a substitute for the real data)."
        )
    return "\n".join(lines)


# ========================================================================= file fetching


def _fetch_file(spec: DatasetSpec, rf: RemoteFile, dest_dir: Path, mirrors: list[Path],
                allow_download: bool, pinned: str | None, quiet: bool) -> Path:
    dest = dest_dir / rf.filename
    expected, origin = _expected_checksums(rf, dest, pinned)

    # 1. existing destination: re-verify
    if dest.exists():
        actual = file_digests(dest)
        bad = _first_mismatch(actual, expected) if expected else None
        if bad is None:
            _after_arrival(spec, rf, dest, actual, bool(expected), quiet)
            _log(f"{dest} present and verified", quiet)
            return dest
        alg, exp, got = bad
        print(
            f"[labeldp.data] {dest} is corrupt: expected {alg} {exp} ({origin}), got {got}; "
            "deleting it and fetching it again",
            file=sys.stderr,
            flush=True,
        )
        dest.unlink()

    # 2. mirror
    searched: list[Path] = []
    for m in mirrors:
        cand = m / spec.name / rf.filename
        searched.append(cand)
        if not cand.is_file():
            continue
        try:
            if cand.resolve() == dest.resolve():
                continue
        except OSError:
            pass
        _log(f"copying {cand} -> {dest}", quiet)
        with open(cand, "rb") as src:
            tmp, actual = _stream_to_temp(src, dest, None)
        try:
            err = _checksum_error(
                cand, actual, expected, filename=rf.filename,
                hint=(
                    f"The mirror copy {cand} is corrupt or not the official file (expected value "
                    f"{origin}); nothing was written to {dest_dir}. Replace the mirror file with a "
                    "verified copy (or delete it to download from the official URL)."
                ),
            )
            if err:
                raise err
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        _after_arrival(spec, rf, dest, actual, bool(expected), quiet)
        return dest

    # 3. download
    if not allow_download:
        raise DataMissingError(_missing_message(spec, rf, dest, searched, mirrors, "downloads disabled"))
    if not rf.urls:
        raise DataMissingError(_missing_message(spec, rf, dest, searched, mirrors, "no download URL known"))
    errors: list[str] = []
    checksum_errors: list[ChecksumError] = []
    for url in rf.urls:
        _log(f"downloading {url} -> {dest}", quiet)
        try:
            tmp, actual = _download_to_temp(url, dest, quiet)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            errors.append(f"{url}: {exc}")
            _log(f"download failed ({exc}); trying the next URL" if url != rf.urls[-1] else f"download failed ({exc})", quiet)
            continue
        try:
            err = _checksum_error(
                url, actual, expected, filename=rf.filename,
                hint=(
                    f"The file served by {url} does not match (expected value {origin}); it was "
                    f"discarded and nothing was written to {dest_dir}. Retry later, use another "
                    f"mirror, or, if the upstream file legitimately changed, delete "
                    f"{sidecar_path(dest)} / update the pinned sha256."
                ),
            )
            if err:
                checksum_errors.append(err)
                _log(str(err), quiet)
                continue
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        _after_arrival(spec, rf, dest, actual, bool(expected), quiet)
        return dest
    if checksum_errors:
        raise checksum_errors[0]
    msg = _missing_message(spec, rf, dest, searched, mirrors, "download failed")
    raise DataMissingError(msg + "\n  download errors:\n" + "\n".join(f"    {e}" for e in errors))


# ================================================================================ census


def _census_ddi_path(path: Path) -> Path:
    name = path.name
    for suffix in (".gz", ".dat"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return path.with_name(name + ".xml")


def _census_header(path: Path) -> list[str]:
    import gzip

    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="latin1", newline="") as fh:  # type: ignore[operator]
        first = fh.readline()
    return [c.strip().strip('"').upper() for c in first.split(",")]


def _fetch_census(spec: DatasetSpec, data_dir: Path, census_path: str | os.PathLike | None,
                  pinned: str | None, quiet: bool) -> list[Path]:
    path = Path(census_path) if census_path else data_dir / spec.name / CENSUS1940_DEFAULT_FILENAME
    where = (
        f"Put the extract at: {path}\n(that is the configured census_path"
        + ("" if census_path else ", here the default <data_dir>/census1940/" + CENSUS1940_DEFAULT_FILENAME)
        + "; set census_path in the workflow config to use another location)."
    )
    if not path.is_file():
        raise DataMissingError(
            f"census1940: the IPUMS 1940 full-count extract was not found at {path}.\n\n"
            f"{spec.manual_instructions}\n{where}"
        )
    files = [path]
    lower = path.name.lower()
    if ".csv" in lower:
        columns = _census_header(path)
        if CENSUS1940_LABEL not in columns:
            raise DataMissingError(
                f"census1940: {path} has no {CENSUS1940_LABEL} column (header: {columns[:30]}). "
                f"Make a new IPUMS extract that includes {CENSUS1940_LABEL}.\n\n{spec.manual_instructions}\n{where}"
            )
        absent = [v for v in CENSUS1940_CATEGORICAL_FEATURES + CENSUS1940_NUMERICAL_FEATURES if v not in columns]
        if absent:
            print(
                f"[labeldp.data] warning: {path} lacks the default census features {absent}; fine only if "
                "the workflow config selects other features.",
                file=sys.stderr,
            )
    elif ".dat" in lower:
        ddi = _census_ddi_path(path)
        if not ddi.is_file():
            raise DataMissingError(
                f"census1940: {path} is a fixed-width IPUMS file, which cannot be read without its DDI "
                f"codebook; expected it at {ddi} (download the 'DDI' link next to the extract on IPUMS).\n\n"
                f"{spec.manual_instructions}\n{where}"
            )
        if f'name="{CENSUS1940_LABEL}"' not in ddi.read_text(encoding="utf-8", errors="replace"):
            raise DataMissingError(
                f"census1940: the DDI codebook {ddi} does not define {CENSUS1940_LABEL}; the extract lacks the "
                f"label variable.\n\n{spec.manual_instructions}\n{where}"
            )
        files.append(ddi)
    else:
        raise DataMissingError(
            f"census1940: {path} is neither an IPUMS CSV (.csv / .csv.gz) nor a fixed-width file "
            f"(.dat / .dat.gz with its .xml DDI codebook).\n\n{spec.manual_instructions}\n{where}"
        )
    if pinned:
        verify_file(path, sha256=pinned)
    _log(f"census extract {path} found" + (" and verified" if pinned else ""), quiet)
    return files


# ================================================================================ public


def fetch_dataset(
    name: str | DatasetSpec,
    *,
    data_dir: str | os.PathLike,
    mirror: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    allow_download: bool = True,
    pinned_sha256: str | Mapping[str, str] | None = None,
    census_path: str | os.PathLike | None = None,
    quiet: bool = False,
) -> list[Path]:
    """Make the raw files of dataset ``name`` present and verified; return their paths.

    Files go to ``<data_dir>/<name>/``. ``mirror`` (default: ``$LABELDP_DATA_MIRROR``) is a
    directory laid out as ``<mirror>/<name>/<filename>``, searched before any download.
    ``pinned_sha256`` (a hex string for one-file datasets, or filename -> hex) overrides
    the recorded sidecar / registry sha256. ``census_path`` is the IPUMS extract for
    ``census1940``.

    ``name`` may also be a :class:`DatasetSpec` (a dataset not in the registry; tests).

    Raises :class:`DataMissingError` (file unavailable; the message names the file, the
    mirror paths searched and the URL) or :class:`ChecksumError` (nothing is left behind).
    """
    spec = name if isinstance(name, DatasetSpec) else get_spec(name)
    data_dir = Path(data_dir)
    if spec.raw_format == "statsmodels_package":
        from .rand_hie import fetch_packaged

        return fetch_packaged(data_dir=data_dir, quiet=quiet)
    if spec.manual:
        pins = pinned_sha256 if isinstance(pinned_sha256, str) else None
        return _fetch_census(spec, data_dir, census_path, pins, quiet)

    dest_dir = data_dir / spec.name
    if (dest_dir / STANDIN_MARKER).exists():
        raise DataError(
            f"{dest_dir} holds SYNTHETIC stand-in files ({STANDIN_MARKER} marker); refusing to mix real "
            "data into it. Fetch real data into another data dir, or delete that directory."
        )
    dest_dir.mkdir(parents=True, exist_ok=True)
    pins = _pinned_for(spec, pinned_sha256)
    mirrors = mirror_dirs(mirror)
    paths: list[Path] = []
    missing: list[DataMissingError] = []
    for rf in spec.files:
        try:
            paths.append(_fetch_file(spec, rf, dest_dir, mirrors, allow_download, pins.get(rf.filename), quiet))
        except DataMissingError as exc:
            missing.append(exc)
    if len(missing) == 1:
        raise missing[0]
    if missing:
        raise DataMissingError(
            f"{spec.name}: {len(missing)} raw files are missing:\n\n" + "\n\n".join(str(e) for e in missing)
        )
    return paths


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .registry import DATASETS

    parser = argparse.ArgumentParser(
        prog="python -m labeldp.data.fetch",
        description="Fetch and verify the raw files of a dataset (mirror first, then official URLs).",
    )
    parser.add_argument("dataset", choices=sorted(DATASETS))
    parser.add_argument("--data-dir", required=True, type=Path, help="files go to DATA_DIR/<dataset>/")
    parser.add_argument("--mirror", default=None, help=f"mirror directory (<mirror>/<dataset>/<file>); default ${MIRROR_ENV}")
    parser.add_argument("--no-download", action="store_true", help="never touch the network")
    parser.add_argument("--sha256", default=None, help="pinned sha256 (one-file datasets: Criteo, census extract)")
    parser.add_argument("--census-path", default=None, help="path of the IPUMS 1940 extract (census1940)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        paths = fetch_dataset(
            args.dataset,
            data_dir=args.data_dir,
            mirror=args.mirror,
            allow_download=not args.no_download,
            pinned_sha256=args.sha256,
            census_path=args.census_path,
            quiet=args.quiet,
        )
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
