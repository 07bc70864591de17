"""Atomic file writes: a temporary file in the destination's directory, then a rename.

A reader (or a killed job, or Snakemake's completeness check) never sees a half-written file:
either the old content, or none, or the whole new content. The temporary file is named
``.<name>.part-<random>.part`` next to the destination, so it is hidden, on the same file
system (``os.replace`` is atomic there), and recognisable as unfinished; it is removed if the
write fails. The finished file gets the usual permissions (``0o666`` filtered by the umask),
not ``mkstemp``'s ``0o600``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_output", "umask_mode", "write_bytes_atomic", "write_text_atomic"]


def umask_mode(mode: int = 0o666) -> int:
    """``mode`` filtered by the process umask (what ``open()`` would have given the file)."""
    current = os.umask(0)
    os.umask(current)
    return mode & ~current


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, fsync: bool = True) -> Iterator[BinaryIO]:
    """A binary file handle whose content replaces ``path`` when the block exits normally.

    Args:
      path: the destination (parent directories are created); untouched if the block raises.
      fsync: flush the content to disk before the rename (a crash then leaves the old file or
        the new one, never an empty one).

    Yields:
      the open temporary file (write to it; e.g. ``np.savez(fh, ...)``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.part-", suffix=".part", dir=path.parent)
    try:
        os.chmod(tmp, umask_mode())
        with os.fdopen(fd, "wb") as fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, fsync: bool = True) -> Path:
    """Writes ``data`` to ``path`` atomically (:func:`atomic_output`); returns ``path`` as a Path."""
    with atomic_output(path, fsync=fsync) as fh:
        fh.write(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike, text: str, *, fsync: bool = True) -> Path:
    """Writes ``text`` (UTF-8) to ``path`` atomically; see :func:`write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), fsync=fsync)
