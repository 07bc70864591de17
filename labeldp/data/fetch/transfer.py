"""Download plumbing of :mod:`labeldp.data.fetch`: mirror directories, progress, streaming.

Holds :func:`mirror_dirs` (the argument, else ``$LABELDP_DATA_MIRROR``), the stderr
progress display (:class:`DownloadProgress`), :func:`stream_to_temp` (copy a stream to a
``<dest>.part-<random>`` file while hashing it) and :func:`download_to_temp` (one
:mod:`urllib` download of one URL). Verification and renaming into place happen in
:mod:`labeldp.data.fetch`.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from labeldp.atomic_io import umask_mode
from labeldp.data.fetch.checksums import CHUNK

MIRROR_ENV = "LABELDP_DATA_MIRROR"
TIMEOUT_ENV = "LABELDP_DOWNLOAD_TIMEOUT"
USER_AGENT = "labeldp-fetch/0.1 (+https://github.com; research reproduction)"


def log(msg: str, quiet: bool) -> None:
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


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"


class DownloadProgress:
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
            total = fmt_bytes(self.total) if self.total else "?"
            print(f"\r  {self.label}: {fmt_bytes(self.done)} / {total} ({pct})", end="", file=sys.stderr, flush=True)
        elif not self.tty and step != self.last_step:
            self.last_step = step
            print(f"  {self.label}: {fmt_bytes(self.done)} ({pct})", file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.quiet:
            return
        secs = time.monotonic() - self.start
        end = "\n" if self.tty else ""
        print(f"{end}  {self.label}: {fmt_bytes(self.done)} in {secs:.1f} s", file=sys.stderr, flush=True)


def stream_to_temp(src, dest: Path, progress: DownloadProgress | None) -> tuple[Path, dict[str, str]]:
    """Copy a binary stream to ``<dest>.part-<random>`` (same dir), hashing on the way.

    Returns (temp path, digests). The temp file is removed if anything fails.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".part-", dir=dest.parent)
    tmp = Path(tmp_name)
    os.chmod(tmp, umask_mode())
    md5, sha = hashlib.md5(), hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := src.read(CHUNK):
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


def download_to_temp(url: str, dest: Path, quiet: bool) -> tuple[Path, dict[str, str]]:
    timeout = float(os.environ.get(TIMEOUT_ENV, "60"))
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (http(s) URLs from the registry)
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        progress = DownloadProgress(dest.name, total, quiet)
        tmp, digests = stream_to_temp(resp, dest, progress)
        progress.finish()
    if total is not None and progress.done != total:
        tmp.unlink(missing_ok=True)
        raise OSError(f"truncated download: got {progress.done} of {total} bytes")
    return tmp, digests
