"""Atomic file writes: a temporary file in the destination's directory, then a rename.

A reader (or a killed job, or Snakemake's completeness check) never sees a half-written file:
either the old content, or none, or the whole new content. The temporary file is named
``.<name>.part-<random>.part`` next to the destination, so it is hidden, on the same file
system (``os.replace`` is atomic there), and recognisable as unfinished; it is removed if the
write fails. The finished file gets the usual permissions (``0o666`` filtered by the umask),
not ``mkstemp``'s ``0o600``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["umask_mode", "write_bytes_atomic", "write_text_atomic"]


def umask_mode(mode: int = 0o666) -> int:
    """``mode`` filtered by the process umask (what ``open()`` would have given the file)."""
    current = os.umask(0)
    os.umask(current)
    return mode & ~current


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, fsync: bool = True) -> Path:
    """Writes ``data`` to ``path`` atomically, creating the parent directories.

    Args:
      path: the destination; replaced if it exists.
      data: the whole content.
      fsync: flush the content to disk before the rename (a crash then leaves the old file or
        the new one, never an empty one).

    Returns:
      ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.part-", suffix=".part", dir=path.parent)
    try:
        os.chmod(tmp, umask_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str, *, fsync: bool = True) -> Path:
    """Writes ``text`` (UTF-8) to ``path`` atomically; see :func:`write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), fsync=fsync)
