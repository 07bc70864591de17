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

Layout: errors, digests and sidecars live in :mod:`.fetch_checksums`, mirror / progress /
download plumbing in :mod:`.fetch_transfer`, the census extract check in
:mod:`.fetch_census`; this module re-exports them (it is the import surface) and holds
:func:`fetch_dataset` and the CLI.
"""

from __future__ import annotations

import http.client
import os
import sys
import urllib.error
from collections.abc import Mapping, Sequence
from pathlib import Path

# The pieces live in fetch_checksums (errors, digests, sidecars), fetch_transfer (mirror,
# progress, download) and fetch_census (the IPUMS extract); this module re-exports them.
from labeldp.data.fetch.census import census_ddi_path, census_header, fetch_census_extract
from labeldp.data.fetch.checksums import (
    ChecksumError,
    DataError,
    DataMissingError,
    CHUNK,
    checksum_error,
    first_mismatch,
    mismatches,
    write_sidecar,
    file_digests,
    locate_raw_file,
    read_sidecar,
    sidecar_path,
    verify_file,
)
from labeldp.data.fetch.transfer import (
    MIRROR_ENV,
    TIMEOUT_ENV,
    USER_AGENT,
    download_to_temp,
    fmt_bytes,
    log,
    DownloadProgress,
    stream_to_temp,
    mirror_dirs,
)
from labeldp.data.registry import DATASETS, DatasetSpec, RemoteFile, get_spec
from labeldp.data.sources.rand_hie import fetch_packaged

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

STANDIN_MARKER = "STANDIN_SYNTHETIC"  # same name as labeldp.data.rawformats.STANDIN_MARKER


# ============================================================================== helpers


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
        raise ValueError(f"{spec.name} has {len(spec.files)} files; give pinned_sha256 as a mapping filename -> sha256")
    return {spec.files[0].filename: pinned_sha256} if pinned_sha256 else {}


def _after_arrival(
    spec: DatasetSpec, rf: RemoteFile, dest: Path, digests: Mapping[str, str], had_expectation: bool, quiet: bool
) -> None:
    """Record/refresh the sha256 sidecar of files without a published checksum."""
    if rf.has_published_checksum:
        return
    side = write_sidecar(dest, digests["sha256"])
    if not had_expectation:
        msg = (
            f"{rf.filename}: no published checksum exists; recorded sha256 {digests['sha256']} in {side}. "
            f"Pin it in the workflow config (pinned_sha256 for {spec.name}) so later copies are checked "
            "against it independently of the sidecar."
        )
        # Printed even when quiet: the user needs the value to pin it.
        print(f"[labeldp.data] {msg}", file=sys.stderr, flush=True)


def _missing_message(
    spec: DatasetSpec, rf: RemoteFile, dest: Path, searched: list[Path], mirrors: list[Path], reason: str
) -> str:
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
        lines.append(
            "  expected checksum: " + ", ".join(f"{a} {v}" for a, v in (("md5", rf.md5), ("sha256", rf.sha256)) if v)
        )
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


def _fetch_file(
    spec: DatasetSpec,
    rf: RemoteFile,
    dest_dir: Path,
    mirrors: list[Path],
    allow_download: bool,
    pinned: str | None,
    quiet: bool,
) -> Path:
    dest = dest_dir / rf.filename
    expected, origin = _expected_checksums(rf, dest, pinned)

    # 1. existing destination: re-verify
    if dest.exists():
        actual = file_digests(dest)
        bad = first_mismatch(actual, expected) if expected else None
        if bad is None:
            _after_arrival(spec, rf, dest, actual, bool(expected), quiet)
            log(f"{dest} present and verified", quiet)
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
        log(f"copying {cand} -> {dest}", quiet)
        with open(cand, "rb") as src:
            tmp, actual = stream_to_temp(src, dest, None)
        try:
            err = checksum_error(
                cand,
                actual,
                expected,
                filename=rf.filename,
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
        log(f"downloading {url} -> {dest}", quiet)
        try:
            tmp, actual = download_to_temp(url, dest, quiet)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            errors.append(f"{url}: {exc}")
            log(
                f"download failed ({exc}); trying the next URL" if url != rf.urls[-1] else f"download failed ({exc})",
                quiet,
            )
            continue
        try:
            err = checksum_error(
                url,
                actual,
                expected,
                filename=rf.filename,
                hint=(
                    f"The file served by {url} does not match (expected value {origin}); it was "
                    f"discarded and nothing was written to {dest_dir}. Retry later, use another "
                    f"mirror, or, if the upstream file legitimately changed, delete "
                    f"{sidecar_path(dest)} / update the pinned sha256."
                ),
            )
            if err:
                checksum_errors.append(err)
                log(str(err), quiet)
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
        return fetch_packaged(data_dir=data_dir, quiet=quiet)
    if spec.manual:
        pins = pinned_sha256 if isinstance(pinned_sha256, str) else None
        return fetch_census_extract(spec, data_dir, census_path, pins, quiet)

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

    parser = argparse.ArgumentParser(
        prog="python -m labeldp.data.fetch",
        description="Fetch and verify the raw files of a dataset (mirror first, then official URLs).",
    )
    parser.add_argument("dataset", choices=sorted(DATASETS))
    parser.add_argument("--data-dir", required=True, type=Path, help="files go to DATA_DIR/<dataset>/")
    parser.add_argument(
        "--mirror", default=None, help=f"mirror directory (<mirror>/<dataset>/<file>); default ${MIRROR_ENV}"
    )
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
